-- outbox_claim: take up to max due events and hide them for the visibility timeout
-- (spec §8.5: at-least-once delivery).
-- KEYS[1] the due set, KEYS[2] the event records (see outbox_enqueue.lua)
-- ARGV    now ('t' = TIME), slack (unused), max, visibility ms
-- returns {id, record, id, record, ...}: oldest due first, ties by id (bytewise)
--
-- An event is due when its due instant is at or before now; each one claimed is due
-- again at now + visibility unless Ack or Retry changes that first.
local now = now_ms(ARGV[1])
local max = tonumber(ARGV[3])
local again = int(now + tonumber(ARGV[4]))
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', int(now), 'LIMIT', 0, max)
local out = {}
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', KEYS[2], id)
  if rec then
    redis.call('ZADD', KEYS[1], again, id)
    out[#out + 1] = id
    out[#out + 1] = rec
  else
    -- A due entry without a record cannot be delivered: drop it.
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
