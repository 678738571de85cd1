-- spend_all: decide several counters of one key together and spend all or none
-- (spec §9.3: an Envoy descriptor with several rate_limits).
--
-- KEYS[i]  the counters' keys (one hash tag: the same account, namespace and key)
-- ARGV     now ('t' = TIME), slack ms, then per key: algorithm, limit L, window W, cost c
-- returns  {allowed_1, remaining_1, reset_1, ..., allowed_n, remaining_n, reset_n, now};
--          each triple is that counter's own verdict; values are stored only when all allow,
--          except an overdraft spend's (algorithm in upper case, spec §4.12), which is
--          counted whatever the others say
local now = now_ms(ARGV[1])
local slack = tonumber(ARGV[2])
local out, vals, pxs = {}, {}, {}
local all = true
for i = 1, #KEYS do
  local b = 2 + (i - 1) * 4
  local allowed, remaining, reset, val, px = decide(redis.call('GET', KEYS[i]), ARGV[b + 1],
    tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), now, slack)
  if allowed == nil then
    return redis.error_reply('ERR leash: unknown algorithm')
  end
  if allowed == 0 then
    all = false
  end
  out[#out + 1] = allowed
  out[#out + 1] = remaining
  out[#out + 1] = reset
  vals[i], pxs[i] = val or false, px
end
for i = 1, #KEYS do
  local a = ARGV[2 + (i - 1) * 4 + 1]
  if vals[i] and (all or a == 'F' or a == 'S' or a == 'T') then
    put(KEYS[i], vals[i], pxs[i])
  end
end
out[#out + 1] = now
return out
