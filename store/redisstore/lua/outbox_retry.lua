-- outbox_retry: count a failed delivery and make the event due after a delay.
-- KEYS[1] the due set, KEYS[2] the event records (see outbox_enqueue.lua)
-- ARGV    now ('t' = TIME), slack (unused), event id, delay ms
-- returns 1 if the event was in the outbox, 0 if not (nothing changes)
--
-- The record is JSON that starts with its attempts count ({"attempts":N,...}, written so
-- by webhooks.go): the count is rewritten in place, the rest (the caller's data) is left
-- byte for byte.
local now = now_ms(ARGV[1])
local id = ARGV[3]
local rec = redis.call('HGET', KEYS[2], id)
if not rec then
  redis.call('ZREM', KEYS[1], id)
  return 0
end
local n = string.match(rec, '^{"attempts":(%d+),')
if not n then
  return redis.error_reply('outbox_retry: malformed event record')
end
local rest = string.sub(rec, string.len('{"attempts":' .. n .. ',') + 1)
redis.call('HSET', KEYS[2], id, '{"attempts":' .. int(tonumber(n) + 1) .. ',' .. rest)
redis.call('ZADD', KEYS[1], int(now + tonumber(ARGV[4])), id)
return 1
