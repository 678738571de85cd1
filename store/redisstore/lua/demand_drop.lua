-- demand_drop: remove one RLQS stream's entry of a bucket (spec §14.4).
-- KEYS     zset stream -> expiry, hash stream -> demand
-- ARGV     stream
-- returns  {removed 0/1}
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
end
return {removed}
