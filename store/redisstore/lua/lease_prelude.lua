-- Shared by the lease scripts. A lease set is two keys with one hash tag:
--   KEYS[1] a sorted set: member = lease token, score = expiry (Unix ms)
--   KEYS[2] a hash: lease token -> the time-to-live it was acquired with (ms), for renew
-- A lease is held while now < expiry. Both keys expire with the last lease.
local now = now_ms(ARGV[1])
local slack = tonumber(ARGV[2])
local z, h = KEYS[1], KEYS[2]

-- prune drops the leases whose expiry is at or before now.
local function prune()
  while true do
    local gone = redis.call('ZRANGEBYSCORE', z, '-inf', int(now), 'LIMIT', 0, 500)
    if #gone == 0 then
      return
    end
    redis.call('ZREM', z, unpack(gone))
    redis.call('HDEL', h, unpack(gone))
    if #gone < 500 then
      return
    end
  end
end

-- extend keeps both keys until the last lease expires.
local function extend()
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if #last == 2 then
    local px = int(ttl(tonumber(last[2]), now, slack))
    redis.call('PEXPIRE', z, px)
    redis.call('PEXPIRE', h, px)
  end
end
