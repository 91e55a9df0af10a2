-- slidingcounter_single: decides one key under one sliding-window-counter
-- limit, the algorithm's one-key path, written out in full: no state table,
-- no check and commit calls, so that Redis does as little work per call as
-- the decision allows. It makes the same decision, write and reply as
-- single.lua over slidingcounter_check and slidingcounter_commit (see
-- slidingcounter.lua, whose hash it keeps); the twin and conformance tests
-- hold both to the MemoryStore. Loaded after a line that binds the limit's
-- rate, period in µs and burst as constants: one script per distinct limit.
--
-- KEYS[1]: the key, a hash {sw, sc, sp} (see slidingcounter.lua).
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1.
-- Reply: as single.lua's, one string of four integers, space-separated:
--   allowed (0/1), remaining units, retry-after µs (-1: never),
--   reset-after µs.

local t = redis.call('TIME')
-- TIME's replies are digit strings: arithmetic converts them
local now = t[1] * 1000000 + t[2]
local n = ARGV[1]
n = n and n + 0 or 1
local key = KEYS[1]
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
if n <= rate and weighted + c + n <= rate then
  local ends = start + 2 * period - now
  if sw == w then
    -- this window's hash: its sw and sp stand, and so does the expiry its
    -- window's first write set, at the same instant this one would
    redis.call('HSET', key, 'sc', c + n)
  else
    -- a hash without sw is absent or an old fixed window's: cleared first
    if not stored[1] then redis.call('DEL', key) end
    redis.call('HSET', key, 'sw', string.format('%d', w), 'sc', c + n, 'sp', p)
    redis.call('PEXPIRE', key, math.ceil(ends / 1000) + 1)
  end
  return string.format('1 %d 0 %d', math.floor(rate - weighted - c - n), ends)
end
local reset = 0
if c > 0 then
  reset = start + 2 * period - now
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
return string.format('0 %d %d %d', math.max(0, math.floor(rate - weighted - c)), retry, reset)
