-- rules_del: remove the rule of one kind; the version is bumped only when one existed.
-- KEYS[1] the namespace's rules hash, KEYS[2] the rules version key, KEYS[3] the account's
--         set of namespaces with rules
-- ARGV    kind ('rate' or 'concurrent'), namespace
-- returns {deleted 0/1, version}
local deleted = redis.call('HDEL', KEYS[1], ARGV[1])
local v
if deleted == 1 then
  v = redis.call('INCR', KEYS[2])
else
  v = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[2])
end
return {deleted, v}
