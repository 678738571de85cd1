-- reserve: rate-limit requests that also take a slice of what is left, for the instance to
-- spend locally (reserve.go; docs/redis.md, "Reservations"; spec §4.13). Per request, in
-- order (a key twice in one call sees the first's changes):
--
--   1. give back what the instance's last slice of the counter left unspent, when the
--      counter's generation is still g (a reset moves it on: reset.lua):
--      fixed_window, sliding_window: b1 units of window b2 come off the count they were
--        added to (the current count when the stored window is b2, the previous one when it
--        is b2+1; nothing once the window has passed);
--      token_bucket: a slice is the stretch of TAT from the bucket's state after the
--        request that took it to b1 ms + b2/b5 (b5: the limit it was taken under); while
--        the stored TAT still ends there, in that limit (no request has come after it), the
--        stored state becomes the instance's own, b3 ms + b4/b5, so the rest of the stretch
--        is free again. Anything stored later stays: its
--        slots come after the slice's.
--      So only what the slice added, and is still there, is ever taken off.
--   2. decide c as spend.lua does (decide.lua); c = 0 decides nothing (a give-back alone).
--   3. reserve: when allowed, want > 0 and at least `from` units remain after c, spend
--      min(want, floor(remaining / share)) more units: the slice. The reply's remaining
--      and state are those before the slice, which is what the instance's own later
--      decisions see (the slice is theirs).
--
-- KEYS[i]  the counters' keys (on Redis Cluster: of one slot); a counter's generation is
--          at KEYS[i] .. ':g': written with the first slice (now), moved on by a reset
--          (reset.lua), and kept while a slice of it may be held (2 W + 1 s from the last)
-- ARGV     now ('t' = TIME), slack ms, from, share, then per key: algorithm ('f', 's', 't';
--          upper case for overdraft, which never reserves), L, W, c, g, want, b1 .. b5
-- returns  per key: allowed (0/1), remaining, reset_ms, now, slice, then the state after c
--          without the slice: window, count, previous count (fixed_window: previous 0;
--          token_bucket: TAT ms, TAT remainder, 0), and the generation
local now = now_ms(ARGV[1])
local slack, from, share = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS
local gkeys = {}
for i = 1, n do
  gkeys[i] = KEYS[i] .. ':g'
end
local got = redis.call('MGET', unpack(KEYS))
local gens = redis.call('MGET', unpack(gkeys))
local vals, changed, pxs = {}, {}, {}
for i = 1, n do
  vals[KEYS[i]] = got[i]
end

-- giveback returns v with the slice's unspent part taken off (see 1. above), or nil when
-- nothing comes off.
local function giveback(v, alg, back, bw, b3, b4, b5)
  if alg == 't' then
    local a, b, d = string.match(v, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
    if a and tonumber(a) == back and tonumber(b) == bw and tonumber(d) == b5 then
      return string.format('%d:%d:%d', b3, b4, b5)
    end
  elseif alg == 'f' then
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
  local j = 4 + (i - 1) * 11
  local alg, L, W, c = ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
  local g, want = tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6])
  local back, bw = tonumber(ARGV[j + 7]), tonumber(ARGV[j + 8])
  local gen = tonumber(gens[i] or '0')
  local lower = string.lower(alg)
  local v = vals[k]
  local gave = nil
  if back > 0 and v and g == gen then
    gave = giveback(v, lower, back, bw, tonumber(ARGV[j + 9]), tonumber(ARGV[j + 10]), tonumber(ARGV[j + 11]))
    if gave then
      v = gave
    end
  end
  local allowed, remaining, reset, val, p = decide(v, alg, L, W, c, now, slack)
  if allowed == nil then
    return redis.error_reply('ERR leash: unknown algorithm')
  end
  local slice, w, cnt, prev = 0, 0, 0, 0
  if val then
    local a, b, d = string.match(val, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
    w, cnt, prev = tonumber(a), tonumber(b), tonumber(d) or 0
    if lower == 't' then
      prev = 0 -- the third field is the limit
    end
    if allowed == 1 and want > 0 and alg == lower and remaining >= from then
      slice = math.floor(remaining / share)
      if slice > want then
        slice = want
      end
      if slice > 0 then
        -- The counter's generation lives while a slice of it may be held anywhere.
        local gpx = int(2 * W + 1000 + slack)
        if gens[i] then
          redis.call('PEXPIRE', gkeys[i], gpx)
        else
          gen = now
          redis.call('SET', gkeys[i], int(gen), 'PX', gpx)
          gens[i] = int(gen)
        end
        if lower == 'f' then
          val = string.format('%d:%d', w, cnt + slice)
        elseif lower == 's' then
          val = string.format('%d:%d:%d', w, cnt + slice, prev)
        else
          -- The slice's stretch of TAT: slice*W/L ms more (remaining covers it, so the
          -- bucket's TAT stays within W of now).
          local ms, rem = addcost(w, cnt, slice, L, W)
          val = string.format('%d:%d:%d', ms, rem, L)
          p = bucketpx(grain(ms, rem), now, slack)
        end
      end
    end
  elseif gave then
    -- Only the give-back changed the value: of the same window, so its ttl stands.
    val, p = gave, false
  end
  if val then
    stage(vals, changed, pxs, k, val, p)
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = allowed, remaining, reset, now
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = slice, w, cnt, prev, gen
end
flush(vals, changed, pxs)
return out
