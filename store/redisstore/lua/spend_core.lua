-- spend_core: the body shared by spend.lua and spend_x.lua, which decide rate-limit requests,
-- each on its own counter, each spending its cost if it fits (spec §4.9): one request, or
-- several that arrived together (respipe's Merge: one call decides them all, in order; the
-- same key twice sees the first spend).
--
-- Per call, not per request: one TIME; each distinct key read once, before anything is
-- written; each changed key written once (decide.lua's stage and flush). The reply is 4 integers a
-- request: allowed (0/1; -1: not decided, the key is not served here, nothing was spent),
-- remaining, reset_ms, now.
--
-- keys     the requests' keys, in order
-- vals     keys[i]'s stored value (false when absent), or nil where not served here
-- a, b, s  request i's arguments are a[b + (i-1)*s + 1 ..]: algorithm, L, W, c
local function spend_keys(keys, vals, a, b, s, now, slack)
  local out, changed, pxs = {}, {}, {}
  for i = 1, #keys do
    local k = keys[i]
    local v = vals[k]
    local j = b + (i - 1) * s
    if v == nil then
      out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = -1, 0, 0, now
    else
      local allowed, remaining, reset, val, p = decide(v, a[j + 1], tonumber(a[j + 2]),
        tonumber(a[j + 3]), tonumber(a[j + 4]), now, slack)
      if allowed == nil then
        return redis.error_reply('ERR leash: unknown algorithm')
      end
      if val then
        stage(vals, changed, pxs, k, val, p)
      end
      out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = allowed, remaining, reset, now
    end
  end
  flush(vals, changed, pxs)
  return out
end
