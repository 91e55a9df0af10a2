-- GCRA: the generic cell rate algorithm, a token bucket kept as one timestamp.
--
-- KEYS (one per GCRA limit): a string "<tat>:<interval>", the theoretical
--   arrival time (TAT) in integer microseconds of Redis's clock and the
--   interval in µs of the limit that wrote it; absent means a full bucket.
--   A bare "<tat>", as written before keys carried their interval, is read
--   under the current interval.
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst.
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units,
--   retry-after µs (-1: never, the cost exceeds the burst), reset-after µs.
--
-- Units are spaced by interval = ceil(period/rate) µs, so all arithmetic is
-- exact on integers; a full bucket holds burst*interval µs of credit.
--
-- A key written under another interval (the limit changed) keeps its
-- outstanding units, (tat - now) / old interval, under the new interval:
-- raising 10 to 20 per minute after 10 were spent leaves 10, and lowering
-- 20 to 10 after 15 were spent denies until 6 have refilled. The rescaled
-- wait is capped at 2^49 µs, as a bucket's credit is. The read that rescales
-- writes the key under the new interval at once, allowed or not (a peek
-- too), so that it refills at the new rate from then on.

-- gcra_tat returns the TAT that key's stored value v (false when absent)
-- means under interval, never before now.
local function gcra_tat(key, v, now, interval)
  local tat = now
  if type(v) == 'string' then
    local t0, iv = string.match(v, '^(%d+):(%d+)$')
    if t0 then
      tat, iv = t0 + 0, iv + 0
      if iv ~= interval and tat > now then
        tat = now + math.min(math.ceil((tat - now) / iv * interval), 562949953421312)
        redis.call('SET', key, string.format('%d:%d', tat, interval), 'PX', math.ceil((tat - now) / 1000))
      end
    else
      tat = tonumber(v) or now
    end
  end
  if tat < now then tat = now end
  return tat
end

local function gcra_check(key, now, rate, period, burst, n)
  local interval = math.ceil(period / rate)
  local tolerance = interval * burst
  -- a key of another type (the rule's algorithm changed) counts as absent:
  -- SET replaces it
  local tat = gcra_tat(key, redis.pcall('GET', key), now, interval)
  local s = {interval = interval,
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
  redis.call('SET', key, string.format('%d:%d', s.tat, s.interval), 'PX', math.ceil((s.tat - now) / 1000))
end

-- gcra_refund gives n units back: TAT -= n * interval, deleting the key
-- once the bucket is full. A key of another type is left alone, and so is
-- a string without a TAT to come: a full bucket, or a fixed window's count.
-- A bound (see refund.lua) is not read: units spent before others come
-- back whole until their reset-after has passed (the caller's to tell).
local function gcra_refund(key, now, rate, period, burst, n)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'string' then return end
  if not string.find(v, ':', 1, true) and (tonumber(v) or 0) <= now then return end
  local interval = math.ceil(period / rate)
  local tat = gcra_tat(key, v, now, interval) - n * interval
  if tat <= now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, string.format('%d:%d', tat, interval), 'PX', math.ceil((tat - now) / 1000))
  end
end
