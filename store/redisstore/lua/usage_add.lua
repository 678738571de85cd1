-- usage_add: apply one account's part of a usage batch, once (spec §7.3).
--
-- KEYS[1]   the account's list of recently applied batch ids from this batch's instance
-- KEYS[2..] the account's day hashes and month counters the batch touches
-- ARGV      now ('t' = TIME), slack (unused), batch id, n, then n entries of
--           (day key index, month key index, namespace, total, blocked) — indexes into
--           KEYS — then one expiry instant (Unix ms) per key of KEYS[2..]
-- returns   1 if applied, 0 if this batch id was already applied (the last 16 ids of
--           each instance are remembered for 3 days)
--
-- Day hash fields: "t:<namespace>" = decisions, "b:<namespace>" = denied decisions.
-- Month counter: the account's decisions over all namespaces.
local now = now_ms(ARGV[1])
local id = ARGV[3]
if id ~= '' then
  for _, seen in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if seen == id then
      return 0
    end
  end
end
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  local b = 5 + i * 5
  local dk = KEYS[tonumber(ARGV[b])]
  local mk = KEYS[tonumber(ARGV[b + 1])]
  local ns = ARGV[b + 2]
  local total = tonumber(ARGV[b + 3])
  local blocked = tonumber(ARGV[b + 4])
  if total > 0 then
    redis.call('HINCRBY', dk, 't:' .. ns, int(total))
    redis.call('INCRBY', mk, int(total))
  end
  if blocked > 0 then
    redis.call('HINCRBY', dk, 'b:' .. ns, int(blocked))
  end
end
local e = 5 + n * 5
for j = 2, #KEYS do
  local d = tonumber(ARGV[e + j - 2]) - now
  if d < 3600000 then
    d = 3600000
  end
  redis.call('PEXPIRE', KEYS[j], int(d))
end
-- Keep the last 16 batch ids of this instance: the engine re-sends only its one pending
-- batch, before anything newer, so the id it retries is always among them.
-- A batch without an id is always applied (and not recorded).
if id ~= '' then
  redis.call('LPUSH', KEYS[1], id)
  redis.call('LTRIM', KEYS[1], 0, 15)
  redis.call('PEXPIRE', KEYS[1], 259200000)
end
return 1
