-- spend_x: rate-limit requests on counters of any slots of one Redis Cluster master
-- (spend_core.lua): the keys are arguments, so one call may merge every request queued for
-- the node, not only those of one slot (Redis >= 7.0, flag allow-cross-slot-keys; hotpath.go).
-- KEYS[1], the first request's key, routes the call: a slot the node does not serve answers
-- MOVED or ASK before the script runs. A later key the node does not serve (a stale slot map,
-- a slot in migration) fails its GET, which comes before any write: its request is answered
-- -1 (not decided, nothing spent), to be sent again on its own.
--
-- KEYS[1]  the first request's key (again among the arguments)
-- ARGV     now ('t' = TIME), slack ms, then per request: key, algorithm, L, W, c
-- returns  as spend.lua's, with allowed -1 for a request not decided here
local now = now_ms(ARGV[1])
local keys, vals = {}, {}
for j = 3, #ARGV, 5 do
  local k = ARGV[j]
  keys[#keys + 1] = k
  if vals[k] == nil then
    local v = redis.pcall('GET', k)
    if type(v) ~= 'table' then
      vals[k] = v
    end
  end
end
return spend_keys(keys, vals, ARGV, 3, 5, now, tonumber(ARGV[2]))
