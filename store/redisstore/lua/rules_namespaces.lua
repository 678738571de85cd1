-- rules_namespaces: an account's namespaces with rules, and how many each has.
-- KEYS[1] the account's set of namespaces with rules
-- ARGV    the account's rules key prefix ('{P:r}:<account>:')
-- returns {namespace, count, ...}; a namespace whose rules are gone leaves the set
local out = {}
for _, ns in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local n = redis.call('HLEN', ARGV[1] .. ns)
  if n > 0 then
    out[#out + 1] = ns
    out[#out + 1] = n
  else
    redis.call('SREM', KEYS[1], ns)
  end
end
return out
