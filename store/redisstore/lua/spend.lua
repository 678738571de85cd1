-- spend: rate-limit requests on counters declared in KEYS (spend_core.lua), read with one MGET.
--
-- KEYS[i]  the counters' keys (on Redis Cluster: of one slot)
-- ARGV     now ('t' = TIME), slack ms, then per key: algorithm ('f', 's', 't'; upper case for
--          overdraft, spec §4.12), limit L, window W, cost c
-- returns  {allowed_1 0/1, remaining_1, reset_ms_1, now, ..., allowed_n, remaining_n,
--          reset_ms_n, now}
local now = now_ms(ARGV[1])
local got = redis.call('MGET', unpack(KEYS))
local vals = {}
for i = 1, #KEYS do
  vals[KEYS[i]] = got[i]
end
return spend_keys(KEYS, vals, ARGV, 2, 4, now, tonumber(ARGV[2]))
