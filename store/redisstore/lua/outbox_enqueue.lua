-- outbox_enqueue: add one webhook event to the outbox, due now (spec §8.5), at most
-- once per once-key.
-- KEYS[1] the due set (sorted set: event id -> due instant, Unix ms)
-- KEYS[2] the event records (hash: event id -> record JSON, see webhooks.go)
-- KEYS[3] the once-key, when the call has one (string: the instant it is forgotten)
-- ARGV    now ('t' = TIME), slack, event id, record JSON, once-key lifetime ms
-- returns 1 if added; 0 if the id is already in the outbox (nothing changes, the once-key
--         is not used up) or the once-key was used within its lifetime
--
-- The once-key is judged by the instant it stores, not by Redis expiring it: its TTL is
-- only there to reclaim it (with the slack of test-clock mode, where the two differ).
-- The due set and the records have no TTL: an event is kept until Ack, and both keys
-- vanish when the outbox is empty.
local now = now_ms(ARGV[1])
local slack = tonumber(ARGV[2])
local id = ARGV[3]
if redis.call('HEXISTS', KEYS[2], id) == 1 then
  return 0
end
if #KEYS == 3 then
  local used = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
  if used > now then
    return 0
  end
  local forget = now + tonumber(ARGV[5])
  redis.call('SET', KEYS[3], int(forget), 'PX', int(ttl(forget, now, slack)))
end
redis.call('HSET', KEYS[2], id, ARGV[4])
redis.call('ZADD', KEYS[1], int(now), id)
return 1
