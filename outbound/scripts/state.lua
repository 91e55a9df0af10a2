-- state: what every outbound script shares, loaded before the entry script
-- (reserve.lua, cancel.lua, pause.lua or paused.lua) as one chunk: the
-- key's state, the clock, the adaptive rate and the interval between units.
--
-- KEYS[1]: the key's state, a string of nine numbers separated by spaces:
--   tat   the theoretical arrival time (µs of Redis's clock): GCRA's state,
--         pushed forward by every reservation
--   last  the time to act of the latest reservation (x/time/rate's
--         lastEvent), which decides what a cancellation gives back
--   seen  the latest clock reading of a script that wrote the key: the clock
--         never runs backwards past it
--   iv    the interval (µs) the tat was counted in; another interval (a
--         changed limit or rate) rescales what is outstanding
--   pause the end of the latest pause (µs): no unit acts before it
--   rate  the adaptive rate (units per period; 0 when adaptation is off)
--   ceil  the rate at which the upstream last refused (0: none remembered)
--   tdec  when the rate last lowered took effect (µs): the end of the
--         schedule and of the pause then
--   tstep when the rate last changed took effect (µs)
--   Written as a 0 byte and the nine as little-endian doubles, 73 bytes
--   (Lua's struct library), which Redis packs and unpacks in one call each:
--   as text, matching and formatting nine numbers cost about a fifth of a
--   reservation's Redis time. Doubles hold every value exactly (the times
--   are µs below 2^53, the rates what the script computed). The text form,
--   the nine as decimals separated by spaces, is still read (keys written
--   before the packed form), and written where a server has no struct
--   library. A key that holds anything else counts as absent.
-- ARGV[1]: rate, units per period (integer >= 1)
-- ARGV[2]: span, the period with its margin (µs): units are span / rate apart
-- ARGV[3]: burst, the most units that may act at once (integer >= 1)
-- ARGV[4]: period (µs), the round of the adaptive rate
-- ARGV[5]: increase, units per period added each period (0: adaptation off)
-- ARGV[6]: the lowest adaptive rate (units per period)
-- ARGV[7]: hold (µs), how long the rate stays below ceil - increase
-- ARGV[8]: decrease, the factor that lowers the rate when the upstream refuses
-- Entry scripts take their own arguments from ARGV[9] on.

local R, span, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local inc = tonumber(ARGV[5])
-- the adaptive rate's arguments are read only when adaptation is on: each
-- conversion costs Redis about as much as a command's own work
local period, minr, hold, dec = 0, 0, 0, 0
if inc > 0 then
  period, minr = tonumber(ARGV[4]), tonumber(ARGV[6])
  hold, dec = tonumber(ARGV[7]), tonumber(ARGV[8])
end
local key = KEYS[1]

-- Lua's struct library, which Redis has; a server without it (a stand-in
-- that guards its globals, as Redis 7 does) reads and writes the text form
local struct = rawget(_G, 'struct')

local s = {tat = 0, last = 0, seen = 0, iv = 0, pause = 0, rate = 0, ceil = 0, tdec = 0, tstep = 0}
local v = redis.pcall('GET', key)
-- the packed form's first byte is 0, where the text's is a digit
local packed = struct and type(v) == 'string' and #v == 73 and string.byte(v) == 0
if packed then
  local _, a, b, c, d, e, f, g, h, i = struct.unpack('<Bddddddddd', v)
  -- x - x is 0 for a finite x only, not for an infinity or a NaN
  if a - a + b - b + c - c + d - d + e - e + f - f + g - g + h - h + i - i == 0 then
    s.tat, s.last, s.seen, s.iv, s.pause = a, b, c, d, e
    s.rate, s.ceil, s.tdec, s.tstep = f, g, h, i
  end
elseif type(v) == 'string' then
  local a, b, c, d, e, f, g, h, i = string.match(v, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  a, b, c, d, e = tonumber(a), tonumber(b), tonumber(c), tonumber(d), tonumber(e)
  f, g, h, i = tonumber(f), tonumber(g), tonumber(h), tonumber(i)
  if a and b and c and d and e and f and g and h and i then
    s.tat, s.last, s.seen, s.iv, s.pause = a, b, c, d, e
    s.rate, s.ceil, s.tdec, s.tstep = f, g, h, i
  end
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- Redis's clock stepped back (a failover, a clock set by hand): time stands
-- still until it catches up, so no unit is handed out twice
if s.seen > now then now = s.seen end

-- the adaptive rate rises by inc each whole period since it last moved (or
-- since the latest pause ended), up
-- to the configured rate, or to just below the rate refused within hold
local rate = R
if inc > 0 then
  if s.rate <= 0 or s.rate > R then s.rate, s.tstep = R, now end
  if s.ceil > 0 and now - s.tdec >= hold then s.ceil = 0 end
  -- a pause tells nothing of the upstream: only periods after it count
  local from = math.max(s.tstep, s.pause)
  local k = math.floor((now - from) / period)
  if k > 0 then
    local cap = R
    if s.ceil > 0 then cap = math.max(math.min(R, s.ceil - inc), minr) end
    if s.rate < cap then
      s.rate = math.min(cap, s.rate + k * inc)
      -- the turns already handed out go at the old rate: the upstream
      -- sees the new one from the schedule's end, and the next rise waits
      -- a period past that, to hear what it says of this one
      s.tstep = math.max(now, s.tat)
    else
      s.tstep = from + k * period
    end
  end
  rate = s.rate
end

local iv = math.ceil(span / rate)
-- a longer interval (a lower rate) counts what is outstanding in it, as
-- x/time/rate's SetLimit keeps the tokens: the turns already handed out
-- keep their times, and the next comes as much later. A shorter one keeps
-- the schedule's end where it is: counted in the new interval, the turns
-- handed out would end sooner than they do, and new turns would fall among
-- them, above either rate.
if s.iv > 0 and iv > s.iv and s.tat > now then
  s.tat = now + math.ceil((s.tat - now) * iv / s.iv)
end
s.iv = iv

-- save writes the state back with an expiry a period past the last time it
-- matters: the schedule, the pause, and the adaptive rate's memory
local function save()
  s.seen = now
  local keep = math.max(s.tat, s.pause, s.last) - now
  if inc > 0 and (s.rate < R or s.ceil > 0) then
    keep = math.max(keep, hold, (R - s.rate) / inc * period)
  end
  local px = math.ceil(keep / 1000) + math.ceil(span / 1000)
  if struct then
    redis.call('SET', key, struct.pack('<Bddddddddd', 0,
      s.tat, s.last, s.seen, s.iv, s.pause, s.rate, s.ceil, s.tdec, s.tstep), 'PX', px)
    return
  end
  -- the rates are whole numbers but after a decrease: %.17g, which keeps a
  -- fraction exactly, costs Redis more than the rest of the format
  local f = '%d %d %d %d %d %d %d %d %d'
  if s.rate % 1 ~= 0 or s.ceil % 1 ~= 0 then f = '%d %d %d %d %d %.17g %.17g %d %d' end
  redis.call('SET', key, string.format(f,
    s.tat, s.last, s.seen, s.iv, s.pause, s.rate, s.ceil, s.tdec, s.tstep), 'PX', px)
end
