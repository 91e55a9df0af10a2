-- Fixed window: a counter per window of one period, windows aligned to Redis's
-- clock (window id = floor(now / period)): the window of a request at an
-- instant that is a whole multiple of the period starts there.
--
-- KEYS (one per fixed-window limit): a string counter of the units spent in
--   the current window, that expires when the window ends: PEXPIREAT at the
--   window's end in ms (periods are whole ms, so ends are too). Redis keeps
--   a key through the millisecond its expiry names, so the key outlives its
--   window by that last millisecond, in which PTTL answers 0: a key with no
--   more than that left counts as absent, and the first write of the next
--   window replaces it. So does a key with more than one period left (it was
--   written under a longer period: the rule's limit changed), without an
--   expiry, holding no integer, or of another type. A hash {w = window id,
--   c = count}, as earlier versions wrote, keeps its count in its window
--   and is rewritten as a counter when written.
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst
--   (unused).
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units,
--   retry-after µs (-1: never, the cost exceeds the rate), reset-after µs,
--   the time left in the window from the counter's PTTL, whole ms of Redis's
--   clock: (PTTL - 1) ms and 1 µs, at most 1 ms short of the window's end.

-- fixed_read returns the units key holds in the window of now (µs), its
-- ms left, and whether the key holds no count of that window, reading
-- nothing but the key.
local function fixed_read(key, now, period)
  local pm = period / 1000
  local now_ms = math.floor(now / 1000)
  local window_end = now_ms - now_ms % pm + pm
  local v = redis.pcall('GET', key)
  if type(v) == 'string' then
    local c, ttl = tonumber(v), redis.call('PTTL', key)
    if ttl == 0 then
      -- Redis answers 0 in the last ms it keeps a key, past its window's
      -- end; a server that rounds a TTL down (miniredis) answers 0 within it
      local e = redis.pcall('PEXPIRETIME', key)
      if type(e) == 'number' and e > now_ms and e <= window_end then ttl = e - now_ms end
    end
    if c and c == math.floor(c) and c >= 0 and c <= 1073741824 and ttl > 0 and ttl <= pm then
      return c, ttl, false, window_end
    end
  elseif type(v) == 'table' then
    local old = redis.pcall('HMGET', key, 'w', 'c')
    if not old.err and tonumber(old[1]) == math.floor(now_ms / pm) then
      return math.max(0, tonumber(old[2]) or 0), window_end - now_ms, true, window_end
    end
  end
  return 0, window_end - now_ms, true, window_end
end

local function fixed_check(key, now, rate, period, burst, n)
  local c, left, fresh, window_end = fixed_read(key, now, period)
  -- the window ends within the last of its left ms: waits count to that
  -- ms's start, and a µs, never past the end (as fixedResult in reply.go)
  left = (left - 1) * 1000 + 1
  local s = {c = c + n, fresh = fresh, window_end = window_end, retry = 0, remaining = rate - c,
    reset = 0}
  if c > 0 then s.reset = left end
  if n > rate then
    s.ok, s.retry = false, -1
  elseif c + n <= rate then
    s.ok = true
    s.remaining_after = rate - c - n
    s.reset_after = left
  else
    s.ok, s.retry = false, left
  end
  return s
end

-- fixed_commit counts n more units: INCRBY keeps a live counter's expiry;
-- any other key is replaced by a counter that expires at the window's end.
local function fixed_commit(key, now, s, n)
  if s.fresh then
    redis.call('SET', key, string.format('%d', s.c), 'PXAT', string.format('%d', s.window_end))
  else
    redis.call('INCRBY', key, n)
  end
end

-- fixed_refund gives n units back to the current window, deleting the
-- counter at 0; a count of an older window is past giving back. With a
-- bound x > 0 (µs, see refund.lua), the units were spent in the window
-- that ends by about now + x: a window ending later than that, by more
-- than refund_slack, is a later one, which gets nothing.
local function fixed_refund(key, now, rate, period, burst, n, x)
  local c, left, fresh, window_end = fixed_read(key, now, period)
  if c == 0 then return end
  if x > 0 and (math.floor(now / 1000) + left) * 1000 > now + x + refund_slack(period) then return end
  if c <= n then
    redis.call('DEL', key)
  elseif fresh then
    -- an earlier version's hash
    redis.call('SET', key, string.format('%d', c - n), 'PXAT', string.format('%d', window_end))
  else
    redis.call('DECRBY', key, n)
  end
end

-- fixed_charge spends up to n units whatever the window holds (see
-- charge.lua): the count passes the rate (a debt, forgiven when the
-- window ends, as every count is), but never rate * (d + 1), d being the
-- debt bound in periods, nor 2^30, the most a count may hold. It returns
-- the units spent.
local function fixed_charge(key, now, rate, period, burst, n, d)
  local c, left, fresh, window_end = fixed_read(key, now, period)
  local add = math.min(n, math.max(0, math.min(rate * (d + 1), 1073741824) - c))
  if add > 0 then fixed_commit(key, now, {c = c + add, fresh = fresh, window_end = window_end}, add) end
  return add
end
