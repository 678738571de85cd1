-- demand_report: set one RLQS stream's demand on a bucket, drop expired entries, and
-- return every entry (spec §14.4).
-- KEYS     zset stream -> expiry (Unix ms), hash stream -> demand (thousandths of a request/s)
-- ARGV     now ('t' = TIME), stream, demand, ttl ms, max streams
-- returns  {stream, demand, expiry, ...} in no particular order
local z, h = KEYS[1], KEYS[2]
local now = now_ms(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now)
for i = 1, #gone do
  redis.call('HDEL', h, gone[i])
end
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', z, '-inf', now)
end
if redis.call('ZSCORE', z, ARGV[2]) or redis.call('ZCARD', z) < tonumber(ARGV[5]) then
  redis.call('ZADD', z, now + tonumber(ARGV[4]), ARGV[2])
  redis.call('HSET', h, ARGV[2], ARGV[3])
end
local all = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
local flat = redis.call('HGETALL', h)
local rate = {}
for i = 1, #flat, 2 do
  rate[flat[i]] = tonumber(flat[i + 1])
end
local out = {}
local last = now
for i = 1, #all, 2 do
  local exp = tonumber(all[i + 1])
  out[#out + 1] = all[i]
  out[#out + 1] = rate[all[i]] or 0
  out[#out + 1] = exp
  if exp > last then last = exp end
end
if #all > 0 then
  -- The keys outlive their last entry by a second (a test clock may run behind TIME).
  redis.call('PEXPIRE', z, last - now + 1000)
  redis.call('PEXPIRE', h, last - now + 1000)
end
return out
