-- reset: clear one counter (POST /v1/limit/reset).
--
-- KEYS[1]  the counter key; KEYS[2] its generation (reserve.lua: present while a slice of
--          the counter may be held somewhere)
-- ARGV     now ('t' = TIME), slack ms, algorithm ('f', 's', 't'), window W
-- returns  1 if the counter held unexpired state, else 0; plus 2 if it has a generation
--          (the reset is then logged for the instances that may hold a slice)
--
-- State is unexpired while now is before the instant engine/algo gives as its expiry:
-- fixed_window (window+1)*W, sliding_window (window+2)*W, token_bucket ceil(TAT).
local now = now_ms(ARGV[1])
local alg = ARGV[3]
local W = tonumber(ARGV[4])
local gen = 0
local old = redis.call('GET', KEYS[2])
if old then
  -- A new generation: a slice reserved before this reset is never given back to the
  -- counts after it. Instants only grow, so a generation is never seen again once gone;
  -- it outlives every slice of the cleared windows (2 W).
  local g = tonumber(old) + 1
  if g < now then
    g = now
  end
  redis.call('SET', KEYS[2], int(g), 'PX', int(2 * W + 1000 + tonumber(ARGV[2])))
  gen = 2
end
local v = redis.call('GET', KEYS[1])
if not v then
  return gen
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
  return 1 + gen
end
return gen
