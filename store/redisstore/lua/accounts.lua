-- accounts: every account and key of the admin API (spec §15.2). One script, run with
-- the prelude, whose ARGV[2] names the operation; all keys share the tag {P:a}:
--   KEYS[1] {P:a}:ids        sorted set of account ids (score 0: ordered bytewise)
--   KEYS[2] {P:a}:version    bumped by every write
--   KEYS[3] {P:a}:acct:<id>  hash plan, susp ('0'/'1'), created (Unix ms)   (when one account)
--   KEYS[4] {P:a}:keys:<id>  hash key id -> '<sha256 hex>|<created>|<prefix>|<name>'
-- ARGV[1] now ('t' = TIME), ARGV[2] the operation, ARGV[3..] its arguments.
-- An account is returned as {plan, susp, created, number of keys}.
local op = ARGV[2]

local function account(k, kk)
  local r = redis.call('HMGET', k, 'plan', 'susp', 'created')
  if not r[1] then
    return false
  end
  return {r[1], r[2], r[3], redis.call('HLEN', kk)}
end

if op == 'create' then
  -- ARGV[3] id, ARGV[4] plan; returns {created 0/1, account}
  local a = account(KEYS[3], KEYS[4])
  if a then
    return {0, a}
  end
  local now = int(now_ms(ARGV[1]))
  redis.call('HSET', KEYS[3], 'plan', ARGV[4], 'susp', '0', 'created', now)
  redis.call('ZADD', KEYS[1], 0, ARGV[3])
  redis.call('INCR', KEYS[2])
  return {1, account(KEYS[3], KEYS[4])}
elseif op == 'get' then
  return {account(KEYS[3], KEYS[4])}
elseif op == 'update' then
  -- ARGV[3] plan or '', ARGV[4] susp '0', '1' or ''; returns {account} or {false}
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return {false}
  end
  if ARGV[3] ~= '' then
    redis.call('HSET', KEYS[3], 'plan', ARGV[3])
  end
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[3], 'susp', ARGV[4])
  end
  redis.call('INCR', KEYS[2])
  return {account(KEYS[3], KEYS[4])}
elseif op == 'delete' then
  -- ARGV[3] id; returns 1 when it existed
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return 0
  end
  redis.call('DEL', KEYS[3], KEYS[4])
  redis.call('ZREM', KEYS[1], ARGV[3])
  redis.call('INCR', KEYS[2])
  return 1
elseif op == 'issue' then
  -- ARGV[3] key id, ARGV[4] '<sha256 hex>', ARGV[5] prefix, ARGV[6] name, ARGV[7] max keys;
  -- returns {0, created} issued, {1} no account, {2} too many keys, {3} the key id exists
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return {1}
  end
  if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 1 then
    return {3}
  end
  if redis.call('HLEN', KEYS[4]) >= tonumber(ARGV[7]) then
    return {2}
  end
  local now = int(now_ms(ARGV[1]))
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4] .. '|' .. now .. '|' .. ARGV[5] .. '|' .. ARGV[6])
  redis.call('INCR', KEYS[2])
  return {0, now}
elseif op == 'keys' then
  return redis.call('HGETALL', KEYS[4])
elseif op == 'revoke' then
  -- ARGV[3] key id; returns 1 when it existed
  if redis.call('HDEL', KEYS[4], ARGV[3]) == 0 then
    return 0
  end
  redis.call('INCR', KEYS[2])
  return 1
elseif op == 'list' then
  -- ARGV[3] after ('' = from the start), ARGV[4] limit, ARGV[5] the tag;
  -- returns {id, account, id, account, ...}
  local from = '-'
  if ARGV[3] ~= '' then
    from = '(' .. ARGV[3]
  end
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, tonumber(ARGV[4]))
  local out = {}
  for _, id in ipairs(ids) do
    local a = account(ARGV[5] .. ':acct:' .. id, ARGV[5] .. ':keys:' .. id)
    if a then
      out[#out + 1] = id
      out[#out + 1] = a
    end
  end
  return out
elseif op == 'load' then
  -- ARGV[3] the tag; returns {version, {id, account, ...}, {account id, key id, record, ...}}
  local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
  local accts, keys = {}, {}
  for _, id in ipairs(ids) do
    local a = account(ARGV[3] .. ':acct:' .. id, ARGV[3] .. ':keys:' .. id)
    if a then
      accts[#accts + 1] = id
      accts[#accts + 1] = a
      local kv = redis.call('HGETALL', ARGV[3] .. ':keys:' .. id)
      for i = 1, #kv, 2 do
        keys[#keys + 1] = id
        keys[#keys + 1] = kv[i]
        keys[#keys + 1] = kv[i + 1]
      end
    end
  end
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), accts, keys}
end
return redis.error_reply('accounts: unknown operation')
