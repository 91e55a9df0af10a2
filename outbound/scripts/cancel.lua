-- cancel: gives back what a reservation holds and nobody overtook, as
-- x/time/rate's Reservation.CancelAt does: nothing once its time to act has
-- passed; otherwise its units less those reserved after it (the time from
-- its time to act to the latest one's, in its interval), at most up to a
-- full bucket. Loaded after state.lua.
--
-- KEYS[1], ARGV[1..8]: see state.lua.
-- ARGV[9]:  n, the reservation's units
-- ARGV[10]: its time to act (µs of Redis's clock, as reserve.lua replied)
-- ARGV[11]: its interval (µs, as reserve.lua replied)
-- Reply: the units given back, in millionths (integer >= 0).

local n, act, ivr = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
if act < now or s.tat == 0 then return 0 end
local restore = n - (s.last - act) / ivr
if restore <= 0 then return 0 end
local tat = s.tat
if tat < now then tat = now end
tat = tat - restore * iv
if tat < now then tat = now end
-- a pause set since stands: nothing acts before its end
if s.pause > now and tat < s.pause + (burst - 1) * iv then
  tat = s.pause + (burst - 1) * iv
end
s.tat = math.floor(tat + 0.5)
if act == s.last then
  local prev = act - n * ivr
  if prev >= now then s.last = prev end
end
save()
return math.floor(restore * 1000000 + 0.5)
