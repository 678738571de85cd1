-- reserve: window-counter requests (fixed_window, sliding_window) that settle the calling
-- instance's last slice of the counter and may take a new one, for the instance to spend
-- locally (reserve.go; docs/redis.md, "Reservations"; spec §4.13). Per request, in order
-- (a key twice in one call sees the first's changes):
--
--   1. settle: the counter's grants live in a hash beside it, KEYS[i] .. ':h', one field
--      per holder (an instance): "seq:units:window" of its last grant. A call carries its
--      own seq (a holder's seqs only grow) and ack:used, the grant the holder last read and
--      how much of it it spent. A stored grant newer than the call (a call that arrived
--      late, after a later one) makes the call stale: nothing is done. Otherwise the stored
--      grant's unspent part comes off the count it was added to: units - used when it is
--      the grant acked, all of it when the holder never read its reply (lost, timed out).
--      fixed_window: the count of that window, if still current; sliding_window: the
--      current count, or the previous one once the window moved on by one. A reset deletes
--      the hash (reset.lua), so nothing taken before a reset is ever given back after it.
--   2. deadline: past `deadline` (Redis TIME, ms; 0: none) the caller no longer reads the
--      reply: nothing is decided or granted (the settling above stands).
--   3. decide c as spend.lua does (decide.lua); c = 0 decides nothing (a give-back alone).
--   4. grant: when allowed, want > 0 and at least `from` units remain after c, and no reset
--      is fencing the counter (KEYS[i] .. ':f'), spend min(want, floor(remaining / share),
--      floor(L / part)) more units: the slice, recorded as the holder's grant. The reply's
--      remaining and state are those before the slice, which is what the holder's own
--      later decisions see.
--
-- KEYS[i]  the counters' keys (on Redis Cluster: of one slot)
-- ARGV     now ('t' = TIME), slack ms, from, share, part, holder, then per key: algorithm ('f',
--          's'; upper case for overdraft, which never reserves), L, W, c, seq, ack, used,
--          want, deadline
-- returns  per key: verdict (1 allowed, 0 denied, -1 stale, -2 past the deadline),
--          remaining, reset_ms, now, slice, then the state after c without the slice
--          (window, count, previous count; fixed_window: previous 0), how many other
--          holders have a grant of the counter, and Redis TIME (ms)
local now = now_ms(ARGV[1])
local tnow = now
if ARGV[1] ~= 't' then
  tnow = now_ms('t')
end
local slack, from, share = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local part, holder = tonumber(ARGV[5]), ARGV[6]
local n = #KEYS
local got = redis.call('MGET', unpack(KEYS))
local vals, changed, pxs = {}, {}, {}
for i = 1, n do
  vals[KEYS[i]] = got[i]
end

-- giveback returns v with back units of window bw taken off (see 1. above), or nil when
-- nothing comes off.
local function giveback(v, alg, back, bw)
  if alg == 'f' then
    local a, b = string.match(v, '^(%-?%d+):(%-?%d+)$')
    if a and tonumber(a) == bw then
      local c = tonumber(b) - back
      if c < 0 then
        c = 0
      end
      return string.format('%d:%d', bw, c)
    end
  elseif alg == 's' then
    local a, b, d = string.match(v, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
    if a then
      local sw, curr, prev = tonumber(a), tonumber(b), tonumber(d)
      if sw == bw then
        curr = curr - back
        if curr < 0 then
          curr = 0
        end
        return string.format('%d:%d:%d', sw, curr, prev)
      elseif sw == bw + 1 then
        prev = prev - back
        if prev < 0 then
          prev = 0
        end
        return string.format('%d:%d:%d', sw, curr, prev)
      end
    end
  end
  return nil
end

local out = {}
for i = 1, n do
  local k = KEYS[i]
  local hk, fk = k .. ':h', k .. ':f'
  local j = 6 + (i - 1) * 9
  local alg, L, W, c = ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
  local seq, ack, used, want = tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7]), tonumber(ARGV[j + 8])
  local deadline = tonumber(ARGV[j + 9])
  local lower = string.lower(alg)
  local verdict, remaining, reset, slice, w, cnt, prev = 0, 0, 0, 0, 0, 0, 0
  local rec = redis.call('HGET', hk, holder)
  local gseq, gunits, gwin
  if rec then
    local a, b, d = string.match(rec, '^(%d+):(%d+):(%-?%d+)$')
    gseq, gunits, gwin = tonumber(a), tonumber(b), tonumber(d)
  end
  if gseq and gseq > seq then
    verdict = -1
  else
    local v = vals[k]
    if gseq then
      redis.call('HDEL', hk, holder)
      local back = gunits
      if gseq == ack then
        back = gunits - used
      end
      if back > 0 and v then
        local gave = giveback(v, lower, back, gwin)
        if gave then
          -- Of the same window or the one just before: the value's ttl stands.
          v = gave
          stage(vals, changed, pxs, k, gave, false)
        end
      end
    end
    if deadline > 0 and tnow > deadline then
      verdict = -2
    else
      local val, p
      verdict, remaining, reset, val, p = decide(v, alg, L, W, c, now, slack)
      if verdict == nil then
        return redis.error_reply('ERR leash: unknown algorithm')
      end
      if val then
        local a, b, d = string.match(val, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
        w, cnt, prev = tonumber(a), tonumber(b), tonumber(d) or 0
        if verdict == 1 and want > 0 and alg == lower and remaining >= from and redis.call('EXISTS', fk) == 0 then
          slice = math.floor(remaining / share)
          if slice > want then
            slice = want
          end
          local cap = math.floor(L / part)
          if slice > cap then
            slice = cap
          end
          if slice > 0 then
            if lower == 'f' then
              val = string.format('%d:%d', w, cnt + slice)
            else
              val = string.format('%d:%d:%d', w, cnt + slice, prev)
            end
            redis.call('HSET', hk, holder, string.format('%d:%d:%d', seq, slice, w))
            -- The grant lives as long as the windows it weighs on.
            redis.call('PEXPIRE', hk, int(2 * W + 1000 + slack))
          end
        end
        stage(vals, changed, pxs, k, val, p)
      end
    end
  end
  local others = redis.call('HLEN', hk)
  if slice > 0 then
    others = others - 1
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = verdict, remaining, reset, now, slice
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = w, cnt, prev, others, tnow
end
flush(vals, changed, pxs)
return out
