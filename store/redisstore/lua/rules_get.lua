-- rules_get: read a namespace's rules together with the rules version, atomically, so a
-- cached copy is tagged with the version it was read at (see rules.go).
-- KEYS[1] the namespace's rules hash, KEYS[2] the rules version key
-- returns {version, rate rule JSON or false, concurrent rule JSON or false}
local v = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local r = redis.call('HMGET', KEYS[1], 'rate', 'concurrent')
return {v, r[1], r[2]}
