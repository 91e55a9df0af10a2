-- slidingcounter_many: decides several one-key sliding-window-counter calls
-- under one limit in one script call, in order, as if each had run
-- slidingcounter_single.lua at the same instant: a batching store sends the
-- calls of one pipeline this way, so that Redis pays a script's fixed cost
-- and TIME once per pipeline rather than once per call. A key named twice
-- is read and written once, its counts carried from one call to the next.
-- Loaded after the same line as slidingcounter_single.lua, binding rate,
-- period in µs and burst.
--
-- KEYS[i]: the key of call i (a key may repeat), a hash {sw, sc, sp} (see
--   slidingcounter.lua).
-- ARGV[i]: the cost of call i (integer >= 1); ARGV empty when every cost
--   is 1.
-- Reply: an array of strings, one per call, each as
--   slidingcounter_single.lua answers.

local t = redis.call('TIME')
-- TIME's replies are digit strings: arithmetic converts them
local now = t[1] * 1000000 + t[2]
local w = math.floor(now / period)
local start = w * period
local ends = start + 2 * period - now
local out = {}
local states = {} -- key -> {c, p, sw (as stored), has (the hash had sw), spent}
local order = {}  -- keys in the order first read
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = ARGV[i]
  n = n and n + 0 or 1
  local s = states[key]
  if not s then
    -- a key of another type (the rule's algorithm changed) counts as
    -- absent, and so does an earlier version's fixed-window hash, whose
    -- fields are other
    local stored = redis.pcall('HMGET', key, 'sw', 'sc', 'sp')
    if stored.err then
      redis.call('DEL', key)
      stored = {}
    end
    local sw = tonumber(stored[1])
    s = {c = 0, p = 0, sw = sw, has = stored[1] and true or false, spent = false}
    if sw == w then
      s.c, s.p = tonumber(stored[2]) or 0, tonumber(stored[3]) or 0
    elseif sw == w - 1 then
      s.p = tonumber(stored[2]) or 0
    end
    states[key] = s
    order[#order + 1] = key
  end
  local c, p = s.c, s.p
  local weighted = p * (period - (now - start)) / period
  if n <= rate and weighted + c + n <= rate then
    s.c, s.spent = c + n, true
    out[i] = string.format('1 %d 0 %d', math.floor(rate - weighted - c - n), ends)
  else
    local reset = 0
    if c > 0 then
      reset = ends
    elseif p > 0 then
      reset = start + period - now
    end
    local retry = -1
    if n <= rate then
      local room = rate - c - n
      if room >= 0 then
        -- later in this window, once the previous window's weight has shrunk
        retry = math.ceil(start + (1 - room / p) * period - now)
      else
        -- in the next window, where this window's count becomes the previous
        retry = math.ceil(start + (2 - (rate - n) / c) * period - now)
      end
    end
    out[i] = string.format('0 %d %d %d', math.max(0, math.floor(rate - weighted - c)), retry, reset)
  end
end
-- each key that spent is written once, as slidingcounter_single.lua's
-- last allowed call on it would have written it
local px = math.ceil(ends / 1000) + 1
for _, key in ipairs(order) do
  local s = states[key]
  if s.spent then
    if s.sw == w then
      redis.call('HSET', key, 'sc', s.c)
    else
      -- a hash without sw is absent or an old fixed window's: cleared first
      if not s.has then redis.call('DEL', key) end
      redis.call('HSET', key, 'sw', string.format('%d', w), 'sc', s.c, 'sp', s.p)
      redis.call('PEXPIRE', key, px)
    end
  end
end
return out
