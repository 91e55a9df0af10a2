-- gcra_single: decides one key under one GCRA limit, the default algorithm's
-- one-key path, written out in full: no tables, no closures, no string
-- reply, so that Redis does as little work per call as the decision allows.
-- It makes the same decision and the same write as gcra_check and
-- gcra_commit in gcra.lua; the twin and conformance tests hold both to the
-- MemoryStore. Loaded after a line that binds the limit's interval
-- (ceil(period/rate) µs), tolerance (burst * interval µs), burst, and
-- tatfmt, the format of the stored value ('%d:<interval>'), as constants:
-- one script per distinct limit.
--
-- KEYS[1]: the key, a string "<tat>:<interval>" (see gcra.lua; a key
--   written under another interval keeps its outstanding units).
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1, which spares
--   Redis an argument to read and convert (about 5% of the call's cost).
-- Reply: one integer: reset-after µs if allowed (always >= 1), else
--   -1 - reset-after µs. The caller knows the limit and the cost, so the
--   rest follows: remaining = floor((tolerance - reset) / interval), and when
--   denied, retry-after = reset + n * interval - tolerance, or -1 (never)
--   when n > burst.

local t = redis.call('TIME')
-- TIME's replies and ARGV[1] are digit strings: arithmetic converts them,
-- where tonumber() would parse each twice (the stored value goes through
-- tonumber(), so that anything but a number counts as a full bucket)
local now = t[1] * 1000000 + t[2]
local n = ARGV[1]
n = n and n + 0 or 1
-- a key of another type (the rule's algorithm changed) counts as absent:
-- SET below replaces it
local v = redis.pcall('GET', KEYS[1])
local tat = now
if type(v) == 'string' then
  local t0, iv = string.match(v, '^(%d+):(%d+)$')
  if t0 then
    tat, iv = t0 + 0, iv + 0
    if iv ~= interval and tat > now then
      tat = now + math.min(math.ceil((tat - now) / iv * interval), 562949953421312)
      -- rewritten under the new interval, so that it refills at the new rate
      redis.call('SET', KEYS[1], string.format(tatfmt, tat), 'PX',
        string.format('%d', math.ceil((tat - now) / 1000)))
    end
  else
    tat = tonumber(v) or now -- a bare TAT, written before keys carried the interval
  end
end
if tat < now then tat = now end
local new_tat = tat + n * interval
if n > burst or new_tat - now > tolerance then
  return now - tat - 1
end
redis.call('SET', KEYS[1], string.format(tatfmt, new_tat), 'PX',
  string.format('%d', math.ceil((new_tat - now) / 1000)))
return new_tat - now
