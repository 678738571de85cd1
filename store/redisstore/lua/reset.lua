-- reset: clear one counter (POST /v1/limit/reset).
--
-- KEYS[1]  the counter key; KEYS[2] its grants (reserve.lua: one field per instance that
--          may hold a slice of it); KEYS[3] its fence (while set, no slice is granted)
-- ARGV     now ('t' = TIME), slack ms, algorithm ('f', 's', 't'), window W, and 'fence' or
--          'clear'
-- returns  1 if the counter held unexpired state, else 0; or 2, changing nothing but the
--          fence, when ARGV[5] is 'fence' and an instance has a grant of the counter:
--          the caller then logs the fence for those instances, waits until none of them
--          can still decide from its slice, and calls again with 'clear' (reserve.go)
--
-- State is unexpired while now is before the instant engine/algo gives as its expiry:
-- fixed_window (window+1)*W, sliding_window (window+2)*W, token_bucket ceil(TAT).
local now = now_ms(ARGV[1])
local alg = ARGV[3]
local W = tonumber(ARGV[4])
if ARGV[5] == 'fence' then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('SET', KEYS[3], '1', 'PX', 5000)
    return 2
  end
end
redis.call('DEL', KEYS[2], KEYS[3])
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
redis.call('DEL', KEYS[1])
local expires = nil
if alg == 'f' then
  local a = string.match(v, '^(%-?%d+):%-?%d+$')
  if a then
    expires = (tonumber(a) + 1) * W
  end
elseif alg == 's' then
  local a = string.match(v, '^(%-?%d+):%-?%d+:%-?%d+$')
  if a then
    expires = (tonumber(a) + 2) * W
  end
elseif alg == 't' then
  local a, b, d = string.match(v, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
  if a and tonumber(d) > 0 then
    expires = tonumber(a)
    if tonumber(b) > 0 then
      expires = expires + 1
    end
  end
end
if expires and now < expires then
  return 1
end
return 0
