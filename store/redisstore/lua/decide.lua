-- decide: one rate-limit decision on a counter's stored value (spec §4.6–§4.9). The formulas
-- are engine/algo's (FixedWindow, SlidingWindow, TokenBucket), line by line; the
-- conformance suite runs both against one test clock.
--
-- v        the counter's value (GET; false when absent)
-- alg      'f', 's' or 't'; in upper case ('F', 'S', 'T') the spend is in overdraft mode
--          (spec §4.12): a denied cost is counted all the same, and c may exceed L
--          (up to algo.MaxCount); L limit, W window ms, c cost, now and slack ms
-- returns  allowed (0/1), remaining, reset_ms, and the value to store with its PX ttl
--          (val nil when nothing changes; px false when the stored value is of the same
--          window, so its ttl stands: put's SET KEEPTTL spares Redis the expiry's
--          removal and re-insertion); nil alone for an unknown algorithm
--
-- Values (strings, integers in decimal):
--   f: "window:count"              window = floor(t/W)
--   s: "window:curr:prev"
--   t: "tat_ms:tat_rem:limit"      TAT = tat_ms + tat_rem/limit ms (GCRA)
local MAXCOUNT = 2000000000 -- algo.MaxCount
local DEBTWINDOWS = 1000 -- algo.MaxDebtWindows
-- A token bucket's expiry is g*TTLGRAIN - TTLGRAIN + slack, g = ceil(ceil(TAT)/TTLGRAIN):
-- from ceil(TAT) to ceil(TAT) + slack (spec §7.7: until the bucket is full, with the
-- slack), and the same for every TAT of one grain g, so a write whose TAT stays in the
-- stored value's grain keeps the key's TTL (SET KEEPTTL). It needs slack >= TTLGRAIN
-- (production: 1,000 ms), which also keeps a key written with the exact expiry ceil(TAT) +
-- slack (older builds) alive for any TAT of its grain.
local TTLGRAIN = 1000

-- addcost is the instant ms + rem/L advanced by c*W/L ms (algo.addCost).
local function addcost(ms, rem, c, L, W)
  local q, r = muldiv(c, W, L)
  ms, rem = ms + q, rem + r
  if rem >= L then
    ms, rem = ms + 1, rem - L
  end
  return ms, rem
end

-- pxfor is the PX of a value that stops mattering at expires, or false when keep (the
-- stored value is of the same window: its ttl, for the same instant, stands).
local function pxfor(keep, expires, now, slack)
  if keep then
    return false
  end
  return int(ttl(expires, now, slack))
end

-- put stores a value decide returned.
local function put(k, val, px)
  if px then
    redis.call('SET', k, val, 'PX', px)
  else
    redis.call('SET', k, val, 'KEEPTTL')
  end
end

-- stage notes key k's new value (with its px, as decide returns them) for a call that
-- decides several requests: vals[k] is what the call's next request on k reads; each
-- changed key is written once, at the end (flush), with its last value and the ttl of the
-- first change that set one (a later change of the same call is of the same window).
local function stage(vals, changed, pxs, k, val, px)
  if pxs[k] == nil then
    changed[#changed + 1] = k
    pxs[k] = px
  elseif px then
    pxs[k] = px
  end
  vals[k] = val
end

-- flush writes the keys stage noted.
local function flush(vals, changed, pxs)
  for i = 1, #changed do
    local k = changed[i]
    put(k, vals[k], pxs[k])
  end
end

-- grain is the TTLGRAIN a token bucket's TAT (ms + rem/L) expires in; bucketpx is the PX
-- of a bucket in grain g.
local function grain(ms, rem)
  if rem > 0 then
    ms = ms + 1
  end
  return math.ceil(ms / TTLGRAIN)
end

local function bucketpx(g, now, slack)
  return int(ttl(g * TTLGRAIN - TTLGRAIN, now, slack))
end

local function decide(v, alg, L, W, c, now, slack)
  local allowed, remaining, reset = 0, 0, 0
  local val, px = nil, 0
  local over = false
  if alg == 'F' or alg == 'S' or alg == 'T' then
    over, alg = true, string.lower(alg)
  end

  if alg == 'f' then
    -- algo.FixedWindow
    local sw, sc, held = 0, 0, false
    if v then
      local a, b = string.match(v, '^(%-?%d+):(%-?%d+)$')
      if a then
        sw, sc, held = tonumber(a), tonumber(b), true
      end
    end
    local w = fdiv(now, W)
    local keep = held and sw == w
    local count = 0
    if sw == w then
      count = sc
    end
    local e = (w + 1) * W
    if count + c <= L then
      count = count + c
      allowed = 1
      if count > 0 then
        reset = e - now
      end
      if c > 0 then
        val, px = string.format('%d:%d', w, count), pxfor(keep, e, now, slack)
      end
    else
      reset = e - now
      if over and c > 0 then
        -- algo.FixedWindowOverdraft: counted all the same.
        count = count + c
        if count > MAXCOUNT then
          count = MAXCOUNT
        end
        val, px = string.format('%d:%d', w, count), pxfor(keep, e, now, slack)
      end
    end
    remaining = L - count
    if remaining < 0 then
      remaining = 0
    end

  elseif alg == 's' then
    -- algo.SlidingWindow
    local sw, scurr, sprev, held = 0, 0, 0, false
    if v then
      local a, b, d = string.match(v, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
      if a then
        sw, scurr, sprev, held = tonumber(a), tonumber(b), tonumber(d), true
      end
    end
    local w = fdiv(now, W)
    local keep = held and sw == w
    local curr, prev = 0, 0
    if sw == w then
      curr, prev = scurr, sprev
    elseif sw == w - 1 then
      prev = scurr
    end
    local t = now - w * W
    local p, r = muldiv(prev, W - t, W)
    if r > 0 then
      p = p + 1
    end
    if p + curr + c <= L then
      curr = curr + c
      allowed = 1
      if curr > 0 then
        reset = (w + 2) * W - now
      elseif prev > 0 then
        reset = (w + 1) * W - now
      end
      if c > 0 then
        val, px = string.format('%d:%d:%d', w, curr, prev), pxfor(keep, (w + 2) * W, now, slack)
      end
    else
      local cr = c
      if over and c > 0 then
        -- algo.SlidingWindowOverdraft: counted all the same; the reset is for min(c, L).
        curr = curr + c
        if curr > MAXCOUNT then
          curr = MAXCOUNT
        end
        if cr > L then
          cr = L
        end
        val, px = string.format('%d:%d:%d', w, curr, prev), pxfor(keep, (w + 2) * W, now, slack)
      end
      -- algo.slidingRetry: phase 1 (still in window w), else phase 2 (window w+1).
      local d0 = W - t
      local R = L - curr - cr
      local done = false
      if R >= 0 and prev > 0 and R < prev then
        local f = muldiv(R, W, prev)
        local d = d0 - f
        if d > 0 and d < d0 then
          reset = d
          done = true
        end
      end
      if not done then
        local R2 = L - cr
        if curr == 0 or curr <= R2 then
          reset = d0
        else
          local f = muldiv(R2, W, curr)
          reset = d0 + W - f
        end
      end
    end
    remaining = L - curr - p
    if remaining < 0 then
      remaining = 0
    end

  elseif alg == 't' then
    -- algo.TokenBucket
    local ms, rem, sl = 0, 0, 0
    local held = nil -- the grain of the stored expiry, when a value is stored
    if v then
      local a, b, d = string.match(v, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
      if a then
        ms, rem, sl = tonumber(a), tonumber(b), tonumber(d)
        held = grain(ms, rem)
      end
    end
    local rewritten = false
    local capms = DEBTWINDOWS * W
    if sl <= 0 or ms < now or (ms == now and rem == 0) then
      ms, rem = now, 0
    else
      local debt = ms - now
      if debt > capms or (debt == capms and rem > 0) then
        debt, rem = capms, 0
      end
      if sl ~= L then
        if debt > W or (debt == W and rem > 0) then
          -- algo.reexpress of an overdraft's debt: never lengthened.
          if L < sl then
            if rem > 0 then
              debt = debt + 1
            end
            rem = 0
          else
            local qb, rb = muldiv(sl, debt, L)
            local xq, xr = fdiv(rb + rem, L)
            debt, rem = qb + xq, xr
          end
        else
          -- algo.reexpress: debt + rem/sl ms becomes (debt*sl + rem)/L ms, capped at W.
          local qa, ra = muldiv(sl, debt, W)
          if qa + fdiv(ra + rem, W) >= L then
            debt, rem = W, 0
          else
            local qb, rb = muldiv(sl, debt, L)
            local x = rb + rem
            local xq, xr = fdiv(x, L)
            debt, rem = qb + xq, xr
          end
        end
        rewritten = true
      end
      ms = now + debt
    end
    local out_ms, out_rem = ms, rem
    local write = rewritten
    -- Spend: c*W/L = q + r/L (c <= L; a larger cost, in overdraft mode, never fits).
    if c <= L then
      local ms2, rem2
      local p = c * W
      if p < 9007199254740992 then
        -- addcost, inline for an exact product (the common case: one division).
        local q = math.floor(p / L)
        local r = p - q * L
        if r < 0 then
          q, r = q - 1, r + L
        elseif r >= L then
          q, r = q + 1, r - L
        end
        ms2, rem2 = ms + q, rem + r
        if rem2 >= L then
          ms2, rem2 = ms2 + 1, rem2 - L
        end
      else
        ms2, rem2 = addcost(ms, rem, c, L, W)
      end
      local d = ms2 - now
      if d < W or (d == W and rem2 == 0) then
        allowed = 1
        reset = d
        if rem2 > 0 then
          reset = reset + 1
        end
        if c > 0 then
          out_ms, out_rem = ms2, rem2
          write = true
        end
      elseif not over or c == 0 then
        reset = d - W
        if rem2 > 0 then
          reset = reset + 1
        end
      end
    end
    if allowed == 0 and over and c > 0 then
      -- algo.TokenBucketOverdraft: charged into debt, at most capms.
      if c >= DEBTWINDOWS * L then
        out_ms, out_rem = now + capms, 0
      else
        out_ms, out_rem = addcost(ms, rem, c, L, W)
        local d = out_ms - now
        if d > capms or (d == capms and out_rem > 0) then
          out_ms, out_rem = now + capms, 0
        end
      end
      write = true
      local cr = c
      if cr > L then
        cr = L
      end
      local ms4, rem4 = addcost(out_ms, out_rem, cr, L, W)
      reset = ms4 - now - W
      if rem4 > 0 then
        reset = reset + 1
      end
    end
    if write then
      local g = grain(out_ms, out_rem)
      val = string.format('%d:%d:%d', out_ms, out_rem, L)
      if g == held then
        px = false -- the stored expiry, (g - 1) * TTLGRAIN + slack or later, stands
      else
        px = bucketpx(g, now, slack)
      end
    end
    -- algo.bucketRemaining: floor((X*L - rem)/W) with X = now + W - TAT ms, clamped to [0, L].
    local x = now + W - out_ms
    if x <= 0 then
      remaining = 0
    else
      local xx = x
      if out_rem > 0 then
        xx = x - 1
      end
      if xx > W then
        xx = W
      end
      -- floor((xx*L + (L - out_rem if out_rem > 0))/W): one division when exact.
      local p = L * xx
      if out_rem > 0 then
        p = p + L - out_rem
      end
      if p < 9007199254740992 then
        remaining = math.floor(p / W)
        local r = p - remaining * W
        if r < 0 then
          remaining = remaining - 1
        elseif r >= W then
          remaining = remaining + 1
        end
      elseif out_rem == 0 then
        remaining = muldiv(L, xx, W)
      else
        local rq, rr = muldiv(L, xx, W)
        remaining = rq + fdiv(rr + L - out_rem, W)
      end
      if remaining > L then
        remaining = L
      end
    end
  else
    return nil
  end

  return allowed, remaining, reset, val, px
end
