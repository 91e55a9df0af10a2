-- Sliding window counter: counts per fixed window, with the previous window's
-- count weighted by how much of it the sliding period still covers:
--   estimate = previous * (period - elapsed) / period + current
--
-- KEYS (one per sliding-counter limit): a hash {sw = current window id,
--   sc = units in window sw, sp = units in window sw-1}. The fields are not
--   those of the hash {w, c} earlier versions kept for a fixed window, so
--   that such a hash reads as absent (a fixed window's counter now is a
--   string: another type).
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst
--   (unused).
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units
--   (floor of rate - estimate), retry-after µs (-1: never, the cost exceeds
--   the rate), reset-after µs.
--
-- Approximate by design: it assumes the previous window's units were spread
-- evenly. Within the first window of a key it is exact.

local function slidingcounter_check(key, now, rate, period, burst, n)
  local w = math.floor(now / period)
  -- a key of another type (the rule's algorithm changed) counts as absent,
  -- and so does an earlier version's fixed-window hash, whose fields are other
  local stored = redis.pcall('HMGET', key, 'sw', 'sc', 'sp')
  if stored.err then
    redis.call('DEL', key)
    stored = {}
  end
  local sw = tonumber(stored[1])
  local c, p = 0, 0
  if sw == w then
    c, p = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
  elseif sw == w - 1 then
    p = tonumber(stored[2]) or 0
  end
  local start = w * period
  local weighted = p * (period - (now - start)) / period
  -- a hash without sw is absent or an old fixed window's: the commit clears it
  local s = {w = w, c = c + n, p = p, expire_at = start + 2 * period, retry = 0, reset = 0,
    fresh = not stored[1], same = sw == w}
  s.remaining = math.max(0, math.floor(rate - weighted - c))
  if c > 0 then
    s.reset = start + 2 * period - now
  elseif p > 0 then
    s.reset = start + period - now
  end
  if n > rate then
    s.ok, s.retry = false, -1
  elseif weighted + c + n <= rate then
    s.ok = true
    s.remaining_after = math.floor(rate - weighted - c - n)
    s.reset_after = start + 2 * period - now
  else
    s.ok = false
    local room = rate - c - n
    if room >= 0 then
      -- later in this window, once the previous window's weight has shrunk
      s.retry = math.ceil(start + (1 - room / p) * period - now)
    else
      -- in the next window, where this window's count becomes the previous
      s.retry = math.ceil(start + (2 - (rate - n) / c) * period - now)
    end
  end
  return s
end

local function slidingcounter_commit(key, now, s)
  if s.same then
    -- this window's hash: its sw and sp stand, and so does the expiry its
    -- window's first write set, at the same instant this one would
    redis.call('HSET', key, 'sc', s.c)
    return
  end
  if s.fresh then redis.call('DEL', key) end
  redis.call('HSET', key, 'sw', string.format('%d', s.w), 'sc', s.c, 'sp', s.p)
  redis.call('PEXPIRE', key, math.ceil((s.expire_at - now) / 1000) + 1)
end

-- slidingcounter_refund gives n units back, from the current window's
-- count first and then from the previous window's, never below 0. With a
-- bound x > 0 (µs, see refund.lua), the units were spent in the window
-- whose next window ends by about now + x (an allowed call's reset-after,
-- within refund_slack): they go back to that window's count only, while
-- it still counts.
local function slidingcounter_refund(key, now, rate, period, burst, n, x)
  local stored = redis.pcall('HMGET', key, 'sw', 'sc', 'sp')
  if stored.err then return end
  local sw, w = tonumber(stored[1]), math.floor(now / period)
  local c, p = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
  if x > 0 then
    local spent = math.floor((now + x + refund_slack(period)) / period) - 2
    if sw and spent == sw and sw >= w - 1 then
      redis.call('HSET', key, 'sc', string.format('%d', math.max(0, c - n)))
    elseif sw == w and spent == w - 1 then
      redis.call('HSET', key, 'sp', string.format('%d', math.max(0, p - n)))
    end
    return
  end
  if sw == w then
    local back = math.min(c, n)
    c, p = c - back, math.max(0, p - (n - back))
    redis.call('HSET', key, 'sc', string.format('%d', c), 'sp', string.format('%d', p))
  elseif sw == w - 1 then
    redis.call('HSET', key, 'sc', string.format('%d', math.max(0, c - n)))
  end
end

-- slidingcounter_charge spends up to n units whatever the windows hold
-- (see charge.lua): the current window's count passes the rate (a debt,
-- which weighs on the next window too), but never rate * (d + 1), d being
-- the debt bound in periods. It returns the units spent.
local function slidingcounter_charge(key, now, rate, period, burst, n, d)
  local s = slidingcounter_check(key, now, rate, period, burst, 0)
  local add = math.min(n, math.max(0, rate * (d + 1) - s.c))
  if add > 0 then
    s.c = s.c + add
    slidingcounter_commit(key, now, s)
  end
  return add
end
