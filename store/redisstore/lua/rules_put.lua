-- rules_put: store a rule in its kind's slot and bump the rules version.
-- KEYS[1] the namespace's rules hash, KEYS[2] the rules version key, KEYS[3] the account's
--         set of namespaces with rules
-- ARGV    kind ('rate' or 'concurrent'), rule JSON, namespace
-- returns {created 0/1, new version}
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
local v = redis.call('INCR', KEYS[2])
return {created, v}
