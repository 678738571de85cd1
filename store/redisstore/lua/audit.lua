-- audit: the audit log (spec §15.10), run with the prelude. Its keys share the tag
-- {P:audit}; each is a sorted set (every score 0, so ordered bytewise) of entries written
-- '<id><json>', where the id is 13 digits of Unix ms, '-' and 16 hex digits:
--   KEYS[1] {P:audit}:all           every account's entries (append), or the set read (list)
--   KEYS[2] {P:audit}:acct:<id>     one account's entries (append)
-- ARGV[1] now ('t' = TIME), ARGV[2] the operation, ARGV[3] the retention in ms.
local now = now_ms(ARGV[1])
local function pad(ms)
  local s = string.format('%.0f', ms)
  return string.rep('0', 13 - #s) .. s
end
-- An entry is kept while younger than the retention (engine.AuditCutoff).
local cutoff = pad(math.max(0, now - tonumber(ARGV[3]) + 1)) .. '-'

if ARGV[2] == 'append' then
  -- ARGV[4] 8 random hex digits, ARGV[5] the entry's JSON, ARGV[6] the most entries of
  -- the whole log, ARGV[7] of one account. Returns the entry's id: ids only grow
  -- (engine.NextAuditID), an entry in the millisecond of the last one (or, should the
  -- clock go back, before it) takes its instant and the next sequence number.
  local ms, seq = now, 0
  local last = redis.call('ZREVRANGEBYLEX', KEYS[1], '+', '-', 'LIMIT', 0, 1)[1]
  if last then
    local last_ms = tonumber(string.sub(last, 1, 13))
    if last_ms >= now then
      ms, seq = last_ms, tonumber(string.sub(last, 15, 22), 16) + 1
    end
  end
  local id = pad(ms) .. '-' .. string.format('%08x', seq) .. ARGV[4]
  local caps = {tonumber(ARGV[6]), tonumber(ARGV[7])}
  for i = 1, 2 do
    redis.call('ZADD', KEYS[i], 0, id .. ARGV[5])
    redis.call('ZREMRANGEBYLEX', KEYS[i], '-', '(' .. cutoff)
    redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -caps[i] - 1)
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
  end
  return id
elseif ARGV[2] == 'list' then
  -- ARGV[4] the id entries must sort before ('' none), ARGV[5] the most to return.
  -- Returns the entries, newest first.
  local hi = '+'
  if ARGV[4] ~= '' then
    hi = '(' .. ARGV[4]
  end
  return redis.call('ZREVRANGEBYLEX', KEYS[1], hi, '[' .. cutoff, 'LIMIT', 0, tonumber(ARGV[5]))
end
return redis.error_reply('audit: unknown operation')
