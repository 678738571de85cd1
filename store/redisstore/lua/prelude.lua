-- Shared by every Leash script (prepended by the Go code; see scripts.go).
--
-- Lua numbers in Redis are IEEE doubles: integers are exact only below 2^53. Every value
-- below is an integer < 2^53 (instants < 2^42, windows < 2^35, limits < 2^30); the only
-- products that could exceed 2^53 go through muldiv, the limb-split division of
-- engine/algo's MulDivLimbs. Lua's % operator is never used (in Lua 5.1 it is
-- a - floor(a/b)*b with no correction).

-- ARGV[1] is the time: "t" means Redis TIME (production); anything else is the Unix ms
-- of a test clock (Options.Clock, tests only).
local function now_ms(a)
  if a == 't' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return tonumber(a)
end

-- fdiv returns floor(x/d) and x - floor(x/d)*d exactly for |x| < 2^53, 1 <= d < 2^35:
-- the floating quotient is off by at most one, and one correction fixes it (algo.floorDivF).
local function fdiv(x, d)
  local q = math.floor(x / d)
  local r = x - q * d
  if r < 0 then
    q, r = q - 1, r + d
  elseif r >= d then
    q, r = q + 1, r - d
  end
  return q, r
end

-- muldiv returns floor(a*b/d) and a*b mod d for 0 <= a < 2^31, 0 <= b < 2^53,
-- 1 <= d < 2^35 (algo.MulDivLimbs): b < 2^36 is split as b = bh*2^17 + bl; a larger b
-- (an overdraft's debt, spec §4.12) into four 17-bit limbs divided top first. Every
-- intermediate stays below 2^53.
local LIMB = 131072
local function muldiv(a, b, d)
  local p = a * b
  if p < 9007199254740992 then
    -- The product is below 2^53, so exact as a double (a double product rounds
    -- monotonically: one of 2^53 or more never comes out below it): one fdiv.
    return fdiv(p, d)
  end
  if b < 68719476736 then
    local bh = math.floor(b / LIMB)
    local bl = b - bh * LIMB
    local q1, r1 = fdiv(a * bh, d)
    local q2, r2 = fdiv(r1 * LIMB + a * bl, d)
    return q1 * LIMB + q2, r2
  end
  local q, r = 0, 0
  local p = 2251799813685248 -- 2^51
  local x = b
  for _ = 1, 4 do
    local l = math.floor(x / p)
    x = x - l * p
    local qi
    qi, r = fdiv(r * LIMB + a * l, d)
    q = q * LIMB + qi
    p = p / LIMB
  end
  return q, r
end

-- Integers are formatted with %d (a C long, 64-bit): tostring would switch to an
-- exponent from 1e14 on.
local function int(x)
  return string.format('%d', x)
end

-- ttl is the PEXPIRE for state that stops mattering at instant expires: never below 1 ms,
-- plus the slack of ARGV (0 in production; a margin in test-clock mode, where Redis
-- expires keys on real time while the scripts follow the test clock). Correctness never
-- depends on expiry: the scripts compare stored instants.
local function ttl(expires, now, slack)
  local d = expires - now
  if d < 1 then
    d = 1
  end
  return d + slack
end
