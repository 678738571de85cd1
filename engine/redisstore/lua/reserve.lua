-- reserve: rate-limit requests on fixed_window and sliding_window counters that also take a
-- slice of what is left, for the instance to spend locally (reserve.go; docs/redis.md,
-- "Reservations"). Per request, in order (a key twice in one call sees the first's changes):
--
--   1. give back: back units of a slice of window bw, counter generation g, that the
--      instance did not spend come off the count they were added to: the current count
--      when the stored window is bw, the previous one (sliding_window) when it is bw+1.
--      Nothing comes off when the window has passed, or the generation is not g (a reset
--      has cleared the count since; reset.lua moves it on), so only units this slice added,
--      and still counted, are ever taken off.
--   2. decide c as spend.lua does (decide.lua); c = 0 decides nothing (a give-back alone).
--   3. reserve: when allowed, want > 0 and at least `from` units remain after c, spend
--      min(want, floor(remaining / share)) more units: the slice. The reply's remaining
--      and state are those before the slice, which is what the instance's own later
--      decisions see (the slice is theirs).
--
-- KEYS[i]  the counters' keys (on Redis Cluster: of one slot); a counter's generation is
--          at KEYS[i] .. ':g' (absent: 0)
-- ARGV     now ('t' = TIME), slack ms, from, share, then per key: algorithm ('f', 's';
--          upper case for overdraft, which never reserves), L, W, c, back, bw, g, want
-- returns  per key: allowed (0/1), remaining, reset_ms, now, slice, window, count (the
--          window's count after c; sliding_window: the current window's), previous count
--          (sliding_window; 0 for fixed_window), generation
local now = now_ms(ARGV[1])
local slack, from, share = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS
local gkeys = {}
for i = 1, n do
  gkeys[i] = KEYS[i] .. ':g'
end
local got = redis.call('MGET', unpack(KEYS))
local gens = redis.call('MGET', unpack(gkeys))
local vals, changed, px = {}, {}, {}
for i = 1, n do
  vals[KEYS[i]] = got[i]
end

-- giveback returns v with back units of window bw taken off, or nil when none come off.
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
  local j = 4 + (i - 1) * 8
  local alg, L, W, c = ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
  local back, bw, g, want = tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7]), tonumber(ARGV[j + 8])
  local gen = tonumber(gens[i] or '0')
  local lower = string.lower(alg)
  local v = vals[k]
  local gave = nil
  if back > 0 and v and g == gen then
    gave = giveback(v, lower, back, bw)
    if gave then
      v = gave
    end
  end
  local allowed, remaining, reset, val, p = decide(v, alg, L, W, c, now, slack)
  if allowed == nil or (lower ~= 'f' and lower ~= 's') then
    return redis.error_reply('ERR leash: unknown algorithm')
  end
  local slice, w, cnt, prev = 0, 0, 0, 0
  if val then
    local a, b, d = string.match(val, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
    w, cnt, prev = tonumber(a), tonumber(b), tonumber(d) or 0
    if allowed == 1 and want > 0 and alg == lower and remaining >= from then
      slice = math.floor(remaining / share)
      if slice > want then
        slice = want
      end
      if slice > 0 then
        if lower == 'f' then
          val = string.format('%d:%d', w, cnt + slice)
        else
          val = string.format('%d:%d:%d', w, cnt + slice, prev)
        end
      end
    end
  elseif gave then
    -- Only the give-back changed the value: of the same window, so its ttl stands.
    val, p = gave, false
  end
  if val then
    if px[k] == nil then
      changed[#changed + 1] = k
      px[k] = p
    elseif p then
      px[k] = p
    end
    vals[k] = val
  end
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = allowed, remaining, reset, now
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = slice, w, cnt, prev, gen
end
for i = 1, #changed do
  local k = changed[i]
  put(k, vals[k], px[k])
end
return out
