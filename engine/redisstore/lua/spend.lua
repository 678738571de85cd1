-- spend: decide one rate-limit request and spend its cost if it fits (spec §4.9).
--
-- KEYS[1]  the counter key
-- ARGV     now ('t' = TIME), slack ms, algorithm ('f', 's', 't'), limit L, window W, cost c
-- returns  {allowed 0/1, remaining, reset_ms, now}
local now = now_ms(ARGV[1])
local allowed, remaining, reset, val, px = decide(redis.call('GET', KEYS[1]), ARGV[3],
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), now, tonumber(ARGV[2]))
if allowed == nil then
  return redis.error_reply('ERR leash: unknown algorithm')
end
if val then
  redis.call('SET', KEYS[1], val, 'PX', px)
end
return {allowed, remaining, reset, now}
