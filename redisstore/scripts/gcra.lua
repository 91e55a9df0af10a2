-- GCRA: the generic cell rate algorithm, a token bucket kept as one timestamp.
--
-- KEYS (one per GCRA limit): a string "<s>\0<interval>": s, the theoretical
--   arrival time (TAT) less one interval, in integer microseconds of Redis's
--   clock, a NUL byte, and the interval in µs of the limit that wrote it;
--   absent means a full bucket. Storing the TAT less one interval lets a
--   one-unit call on a full bucket write Redis's own clock digits as they
--   come (gcra_single.lua), with no number formatted. Values written before
--   this format still read: "<tat>:<interval>", and a bare "<tat>", which
--   reads under the current interval.
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

-- gcra_read returns the TAT that a stored value v means and the interval
-- it was written under (nil for a bare TAT), or nil when v holds none: an
-- absent key (false), a key of another type (an error table), other text.
local function gcra_read(v)
  if type(v) ~= 'string' then return nil end
  local s, iv = string.match(v, '^(%d+)%z(%d+)$')
  if s then return s + iv, iv + 0 end
  s, iv = string.match(v, '^(%d+):(%d+)$')
  if s then return s + 0, iv + 0 end
  return tonumber(v)
end

-- gcra_write stores tat under interval at key, expiring when the bucket is
-- full again.
local function gcra_write(key, now, tat, interval)
  redis.call('SET', key, string.format('%d', tat - interval) .. '\0' .. string.format('%d', interval), 'PX',
    string.format('%d', math.ceil((tat - now) / 1000)))
end

-- gcra_tat returns the TAT that key's stored value v (false when absent) means
-- under interval, never before now.
local function gcra_tat(key, v, now, interval)
  local tat, iv = gcra_read(v)
  if not tat then return now end
  if iv and iv ~= interval and tat > now then
    tat = now + math.min(math.ceil((tat - now) / iv * interval), 562949953421312)
    gcra_write(key, now, tat, interval)
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
  gcra_write(key, now, s.tat, s.interval)
end

-- gcra_refund gives n units back: TAT -= n * interval, deleting the key
-- once the bucket is full. A key of another type is left alone, and so is
-- a string without a TAT to come: a full bucket, or a fixed window's count.
-- A bound (see refund.lua) is not read: units spent before others come
-- back whole until their reset-after has passed (the caller's to tell).
local function gcra_refund(key, now, rate, period, burst, n)
  local v = redis.pcall('GET', key)
  local tat, iv = gcra_read(v)
  if not tat or not iv and tat <= now then return end
  local interval = math.ceil(period / rate)
  tat = gcra_tat(key, v, now, interval) - n * interval
  if tat <= now then
    redis.call('DEL', key)
  else
    gcra_write(key, now, tat, interval)
  end
end

-- gcra_charge spends up to n units whatever the bucket holds (see
-- charge.lua): the TAT moves n intervals on, past now + tolerance (a
-- debt), but never past now + (burst + d * rate) intervals, where d is
-- the debt bound in periods. It returns the units it spent.
local function gcra_charge(key, now, rate, period, burst, n, d)
  local interval = math.ceil(period / rate)
  local tat = gcra_tat(key, redis.pcall('GET', key), now, interval)
  local add = math.min(n, math.max(0, math.floor((now + (burst + d * rate) * interval - tat) / interval)))
  if add > 0 then gcra_write(key, now, tat + add * interval, interval) end
  return add
end
