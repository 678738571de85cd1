-- renew: set a held lease's expiry to now + ttl (spec §5.5).
-- ARGV     now ('t' = TIME), slack, token, ttl ms (0 = the ttl it was acquired with)
-- returns  {renewed 0/1, active, reset_ms}
prune()
local token = ARGV[3]
if not redis.call('ZSCORE', z, token) then
  return {0, redis.call('ZCARD', z), 0}
end
local lt = tonumber(ARGV[4])
if lt <= 0 then
  lt = tonumber(redis.call('HGET', h, token)) or 0
end
if lt <= 0 then
  return redis.error_reply('ERR leash: lease without a ttl')
end
redis.call('ZADD', z, 'XX', int(now + lt), token)
extend()
return {1, redis.call('ZCARD', z), lt}
