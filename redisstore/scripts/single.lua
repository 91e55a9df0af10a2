-- single: decides one key whose limit is compiled into the script, so a call
-- passes nothing but the cost. Loaded after the limit's algorithm file and a
-- line that binds check, commit (that file's functions), and the limit's
-- rate, period in µs and burst as constants: one script per distinct limit.
--
-- KEYS[1]: the key.
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1.
-- Reply: one string of four integers, space-separated: allowed (0/1),
--   remaining units, retry-after µs (-1: never), reset-after µs.

local t = redis.call('TIME')
-- TIME's replies are digit strings: arithmetic converts them, where
-- tonumber() would parse each twice
local now = t[1] * 1000000 + t[2]
local n = ARGV[1]
n = n and n + 0 or 1
local s = check(KEYS[1], now, rate, period, burst, n)
if s.ok then
  commit(KEYS[1], now, s, n)
  return string.format('1 %d 0 %d', s.remaining_after, s.reset_after)
end
local reset = s.reset
if type(reset) == 'function' then reset = reset() end
return string.format('0 %d %d %d', s.remaining, s.retry, reset)
