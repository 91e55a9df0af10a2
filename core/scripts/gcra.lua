-- GCRA: the generic cell rate algorithm, a token bucket kept as one timestamp.
--
-- KEYS (one per GCRA limit): a string holding the theoretical arrival time
--   (TAT) in integer microseconds of Redis's clock; absent means a full bucket.
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst.
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units,
--   retry-after µs (-1: never, the cost exceeds the burst), reset-after µs.
--
-- Units are spaced by interval = ceil(period/rate) µs, so all arithmetic is
-- exact on integers; a full bucket holds burst*interval µs of credit.

local function gcra_check(key, now, rate, period, burst, n)
  local interval = math.ceil(period / rate)
  local tolerance = interval * burst
  -- a key of another type (the rule's algorithm changed) counts as absent:
  -- SET replaces it
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then v = false end
  local tat = v and tonumber(v) or now
  if tat < now then tat = now end
  local s = {
    retry = 0,
    remaining = math.floor((now + tolerance - tat) / interval),
    reset = tat - now,
  }
  local new_tat = tat + n * interval
  local diff = now + tolerance - new_tat
  if n > burst then
    s.ok, s.retry = false, -1
  elseif diff >= 0 then
    s.ok, s.tat = true, new_tat
    s.remaining_after = math.floor(diff / interval)
    s.reset_after = new_tat - now
  else
    s.ok, s.retry = false, -diff
  end
  return s
end

local function gcra_commit(key, now, s)
  redis.call('SET', key, string.format('%d', s.tat), 'PX', math.ceil((s.tat - now) / 1000))
end
