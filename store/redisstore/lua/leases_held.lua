-- leases_held: a lease set's unexpired leases (spec §15.5); changes nothing.
-- KEYS[1] the lease set's expiry sorted set (token -> expiry)
-- ARGV    now ('t' = TIME)
-- returns {now, token, expiry, token, expiry, ...}, soonest expiry first
local now = now_ms(ARGV[1])
local out = {int(now)}
local held = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int(now), '+inf', 'WITHSCORES')
for i = 1, #held, 2 do
  out[#out + 1] = held[i]
  out[#out + 1] = held[i + 1]
end
return out
