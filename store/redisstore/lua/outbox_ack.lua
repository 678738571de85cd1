-- outbox_ack: remove an event from the outbox (delivered, or given up); idempotent.
-- KEYS[1] the due set, KEYS[2] the event records (see outbox_enqueue.lua)
-- ARGV    event id
-- returns 1 if the event was in the outbox, else 0
local n = redis.call('ZREM', KEYS[1], ARGV[1])
return math.max(n, redis.call('HDEL', KEYS[2], ARGV[1]))
