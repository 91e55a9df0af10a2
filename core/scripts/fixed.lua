-- Fixed window: a counter per window of one period, windows aligned to Redis's
-- clock (window id = floor(now / period)).
--
-- KEYS (one per fixed-window limit): a hash {w = window id, c = units counted
--   in that window}; a hash of an older window counts as empty.
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst
--   (unused).
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units,
--   retry-after µs (-1: never, the cost exceeds the rate), reset-after µs.
--
-- The key expires 1 ms after its window ends; the window id guards against
-- any rounding of that expiry.

local function fixed_check(key, now, rate, period, burst, n)
  local w = math.floor(now / period)
  -- a key of another type (the rule's algorithm changed) counts as absent
  local stored = redis.pcall('HMGET', key, 'w', 'c')
  if stored.err then
    redis.call('DEL', key)
    stored = {}
  end
  local c = 0
  if tonumber(stored[1]) == w then c = tonumber(stored[2]) or 0 end
  local window_end = (w + 1) * period
  -- a hash without w is absent or another algorithm's: the commit clears it
  local s = {w = w, c = c + n, window_end = window_end, retry = 0, remaining = rate - c, reset = 0,
    fresh = not stored[1]}
  if c > 0 then s.reset = window_end - now end
  if n > rate then
    s.ok, s.retry = false, -1
  elseif c + n <= rate then
    s.ok = true
    s.remaining_after = rate - c - n
    s.reset_after = window_end - now
  else
    s.ok, s.retry = false, window_end - now
  end
  return s
end

local function fixed_commit(key, now, s)
  if s.fresh then redis.call('DEL', key) end
  redis.call('HSET', key, 'w', string.format('%d', s.w), 'c', s.c)
  redis.call('PEXPIRE', key, math.ceil((s.window_end - now) / 1000) + 1)
end

-- fixed_refund gives n units back to the current window, never below 0; a
-- count of an older window is past giving back.
local function fixed_refund(key, now, rate, period, burst, n)
  local stored = redis.pcall('HMGET', key, 'w', 'c')
  if stored.err or tonumber(stored[1]) ~= math.floor(now / period) then return end
  local c = tonumber(stored[2]) or 0
  redis.call('HSET', key, 'c', string.format('%d', math.max(0, c - n)))
end
