-- fence_add: log a fence on a counter (reserve.go: a reset, or an overdraft denied, while
-- other instances may hold a slice of it). Every instance holding slices reads the log
-- every reserveBeat (fence_poll.lua) and stops deciding from its slice of that counter.
--
-- KEYS[1]  the log (sorted set: "seq:counter key" -> seq); KEYS[2] its last seq (never
--          expires, so seqs only grow)
-- ARGV     the counter's key
-- returns  the entry's seq
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, n .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -4097)
redis.call('PEXPIRE', KEYS[1], 600000)
return n
