-- pause: stops the key for every process until now + d, when the upstream
-- said so (Retry-After, a spent quota): reservations whose time falls
-- before the end are void and their holders reserve again, after it. With
-- congested set and adaptation on, it also lowers the shared rate by the
-- decrease factor, once for the refusals of turns handed out before the
-- last decrease took effect, and remembers the refused rate.
-- A pause that grows is published on the channel as "<key> <µs left>".
-- Loaded after state.lua.
--
-- KEYS[1], ARGV[1..8]: see state.lua.
-- ARGV[9]:  d, the pause (µs from Redis's now)
-- ARGV[10]: congested, '1' when the upstream refused (a 429), else '0'
-- ARGV[11]: the channel to publish the pause on ('' for none)
-- Reply: an array of three integers: the pause left (µs); the key's
--   interval after it (µs); 1 if the rate was lowered, else 0.

local d, congested, channel = tonumber(ARGV[9]), ARGV[10] == '1', ARGV[11]
local ivo, lowered = iv, 0
-- a refusal of a turn handed out before the last decrease took effect
-- says nothing of the lowered rate
if congested and inc > 0 and now >= s.tdec then
  s.ceil = s.rate
  s.rate = math.max(minr, s.rate * dec)
  iv = math.ceil(span / s.rate)
  s.iv = iv
  lowered = 1
end
local grew = now + d > s.pause
if grew then s.pause = now + d end
-- the schedule before the pause is void; what lies beyond it is repaid in
-- the new interval
local tat = s.pause
if s.tat > s.pause then tat = s.pause + math.ceil((s.tat - s.pause) * iv / ivo) end
if tat < s.pause + (burst - 1) * iv then tat = s.pause + (burst - 1) * iv end
s.tat = tat
if lowered == 1 then s.tdec, s.tstep = tat, tat end
save()
if grew and channel ~= '' then
  redis.call('PUBLISH', channel, key .. ' ' .. string.format('%d', s.pause - now))
end
return {s.pause - now, iv, lowered}
