-- reset_log: note a reset in the log of the last minute's resets, which instances holding
-- a slice of the counter read (reserve.go: pollResets).
--
-- KEYS[1]  the reset log (sorted set: counter key -> instant ms)
-- ARGV     now ('t' = TIME), the counter's key
local now = now_ms(ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
redis.call('PEXPIRE', KEYS[1], 120000)
return 0
