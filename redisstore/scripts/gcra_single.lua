-- gcra_single: decides one key under one GCRA limit, the default algorithm's
-- one-key path, written out in full: no tables, no closures, no string
-- reply, so that Redis does as little work per call as the decision allows.
-- It makes the same decision and the same write as gcra_check and
-- gcra_commit in gcra.lua; the twin and conformance tests hold both to the
-- MemoryStore. Loaded after a line that binds, as constants (one script
-- per distinct limit): the limit's interval (ceil(period/rate) µs),
-- tolerance (burst * interval µs) and burst; sfx, the end of a value
-- written under this interval ("\0<interval>", see gcra.lua), and sfxat,
-- minus its length; vfmt, the format of a value ('%d\0<interval>'); and px1,
-- the expiry in ms of a key one unit from full (ceil(interval / 1000)).
--
-- KEYS[1]: the key, a string "<tat - interval>\0<interval>" (see gcra.lua,
--   which also reads the values of earlier versions; a key written under
--   another interval keeps its outstanding units).
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1, which spares
--   Redis an argument to read and convert.
-- Reply: one integer: reset-after µs if allowed (always >= 1), else
--   -1 - reset-after µs. The caller knows the limit and the cost, so the
--   rest follows: remaining = floor((tolerance - reset) / interval), and when
--   denied, retry-after = reset + n * interval - tolerance, or -1 (never)
--   when n > burst.
--
-- Every C function call and every number formatted or parsed costs Redis
-- about as much as a command's own work, so the common paths do few: a key
-- that is absent, or whose bucket is full, takes a unit with no number
-- converted at all, its value being Redis's clock digits as TIME gave them.

local t = redis.call('TIME')
local n = ARGV[1]
n = n and n + 0 or 1
local key = KEYS[1]
-- a key of another type (the rule's algorithm changed) counts as absent:
-- SET below replaces it
local v = redis.pcall('GET', key)
local now, tat
if v then
  -- TIME's replies are digit strings: arithmetic converts them, where
  -- tonumber() would parse each twice
  now = t[1] * 1000000 + t[2]
  -- tonumber reads the digits before the NUL (and is nil for a table); the
  -- end of the value says which interval wrote it
  local s = tonumber(v)
  if s and string.find(v, sfx, sfxat, true) then
    tat = s + interval
  elseif type(v) == 'string' then
    local iv
    s, iv = string.match(v, '^(%d+)%z(%d+)$')
    if s then
      tat, iv = s + iv, iv + 0
    else
      s, iv = string.match(v, '^(%d+):(%d+)$') -- written before the NUL format
      if s then
        tat, iv = s + 0, iv + 0
      else
        tat = tonumber(v) -- a bare TAT, written before keys carried the interval
      end
    end
    if tat and iv and iv ~= interval and tat > now then
      tat = now + math.min(math.ceil((tat - now) / iv * interval), 562949953421312)
      -- rewritten under the new interval, so that it refills at the new rate
      redis.call('SET', key, string.format(vfmt, tat - interval), 'PX',
        string.format('%d', math.ceil((tat - now) / 1000)))
    end
  end
  if tat and tat <= now then tat = nil end
end
if not tat then
  -- a full bucket
  if n == 1 then
    -- the TAT is now + interval: stored less one interval, it is now, the
    -- digits of TIME with the µs padded to six
    local us = t[2]
    local l = #us
    if l < 6 then
      if l == 5 then us = '0' .. us
      elseif l == 4 then us = '00' .. us
      elseif l == 3 then us = '000' .. us
      elseif l == 2 then us = '0000' .. us
      else us = '00000' .. us end
    end
    redis.call('SET', key, t[1] .. us .. sfx, 'PX', px1)
    return interval
  end
  if n > burst then return -1 end
  now = now or t[1] * 1000000 + t[2]
  tat = now
end
local new_tat = tat + n * interval
if n > burst or new_tat - now > tolerance then
  return now - tat - 1
end
redis.call('SET', key, string.format(vfmt, new_tat - interval), 'PX',
  string.format('%d', math.ceil((new_tat - now) / 1000)))
return new_tat - now
