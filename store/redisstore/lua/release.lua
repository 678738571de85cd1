-- release: free a held lease; idempotent (spec §5.4).
-- ARGV     now ('t' = TIME), slack, token
-- returns  {released 0/1, active}
prune()
local released = 0
if redis.call('ZREM', z, ARGV[3]) == 1 then
  redis.call('HDEL', h, ARGV[3])
  released = 1
end
return {released, redis.call('ZCARD', z)}
