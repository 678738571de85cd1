-- spend: decide rate-limit requests, each on its own counter, each spending its cost if it
-- fits (spec §4.9). One request, or several that arrived together (respipe's Merge: one
-- call of this script decides them all, in key order; the same key twice sees the first
-- spend).
--
-- KEYS[i]  the counters' keys (on Redis Cluster: of one slot)
-- ARGV     now ('t' = TIME), slack ms, then per key: algorithm ('f', 's', 't'), limit L,
--          window W, cost c
-- returns  {allowed_1 0/1, remaining_1, reset_ms_1, now, ..., allowed_n, remaining_n,
--          reset_ms_n, now}
local now = now_ms(ARGV[1])
local slack = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local b = 2 + (i - 1) * 4
  local allowed, remaining, reset, val, px = decide(redis.call('GET', KEYS[i]), ARGV[b + 1],
    tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), now, slack)
  if allowed == nil then
    return redis.error_reply('ERR leash: unknown algorithm')
  end
  if val then
    redis.call('SET', KEYS[i], val, 'PX', px)
  end
  out[#out + 1] = allowed
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = now
end
return out
