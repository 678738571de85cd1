-- fence_poll: the fences logged after seq ARGV[1] (fence_add.lua), and Redis's clock.
--
-- KEYS[1]  the log; KEYS[2] its last seq
-- ARGV     the last seq the caller has read, or -1 for none (only the last seq is returned)
-- returns  the last seq, 1 if entries after ARGV[1] are no longer in the log (trimmed, or
--          the log was lost) else 0, Redis TIME (ms), then the entries after ARGV[1]
local t = redis.call('TIME')
local tms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = tonumber(ARGV[1])
if n == last or last < 0 then
  return {n, 0, tms}
end
local missed = 0
if n < last then
  missed = 1
else
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if not first[2] or tonumber(first[2]) > last + 1 then
    missed = 1
  end
end
local out = {n, missed, tms}
local es = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. last, '+inf')
for i = 1, #es do
  out[#out + 1] = es[i]
end
return out
