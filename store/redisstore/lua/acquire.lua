-- acquire: take a lease if fewer than limit unexpired leases are held (spec §5.2).
-- ARGV     now ('t' = TIME), slack, token, limit, ttl ms
-- returns  {allowed 0/1, active, reset_ms, now}: reset_ms is the lease's ttl when allowed,
--          else the ms until the soonest-expiring lease frees a slot
-- A token already held is renewed with ttl and stays counted once.
prune()
local token = ARGV[3]
local limit = tonumber(ARGV[4])
local lt = tonumber(ARGV[5])
local held = redis.call('ZSCORE', z, token)
local n = redis.call('ZCARD', z)
if held or n < limit then
  redis.call('ZADD', z, int(now + lt), token)
  redis.call('HSET', h, token, int(lt))
  extend()
  return {1, redis.call('ZCARD', z), lt, now}
end
local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
local reset = 0
if #first == 2 then
  reset = tonumber(first[2]) - now
end
return {0, n, reset, now}
