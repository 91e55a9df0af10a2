-- reserve: hands one caller a time to act for n units, on the key's schedule
-- shared by every process: GCRA's theoretical arrival time pushed forward by
-- n intervals, so each caller gets a distinct time and sleeps once, to it.
-- It decides as x/time/rate's reserveN decides for a Limiter of the same
-- rate and burst, on Redis's clock. Loaded after state.lua.
--
-- KEYS[1], ARGV[1..8]: see state.lua.
-- ARGV[9]:  n, the units to reserve (integer, 1 <= n <= burst)
-- ARGV[10]: the longest wait the caller accepts (µs); -1 for any. A wait
--           longer than that reserves nothing.
-- ARGV[11]: share (>= 1): this call's interval is the key's times share
--           (a process back from an outage takes its share of the rate)
-- ARGV[12]: floor (µs): no unit reserved from now on acts before now + floor
--           (0: none)
-- Reply: an array of six integers: granted (1 or 0); the wait (µs from
--   Redis's now to the time to act); the time to act (µs of Redis's clock,
--   0 if not granted); the interval of this call (µs); the tat less now (µs,
--   the end of the schedule); the pause left (µs, 0 if none).

local n, maxwait = tonumber(ARGV[9]), tonumber(ARGV[10])
local share, floor = tonumber(ARGV[11]), tonumber(ARGV[12])
local ive = iv * share
local tat = s.tat
if tat < now then tat = now end
if floor > 0 then
  local f = now + floor + (burst - 1) * ive
  if tat < f then tat = f end
end
local new_tat = tat + n * ive
local act = new_tat - burst * ive
if act < now then act = now end
local wait = act - now
local left = 0
if s.pause > now then left = s.pause - now end
if maxwait >= 0 and wait > maxwait then
  local ahead = 0
  if s.tat > now then ahead = s.tat - now end
  return {0, wait, 0, ive, ahead, left}
end
s.tat, s.last = new_tat, act
save()
return {1, wait, act, ive, new_tat - now, left}
