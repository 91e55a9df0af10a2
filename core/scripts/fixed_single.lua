-- fixed_single: decides one key under one fixed-window limit, written out in
-- full like gcra_single.lua (no tables, no closures), with the same decision
-- and writes as fixed_check and fixed_commit in fixed.lua; the twin and
-- conformance tests hold both to the MemoryStore. Loaded after a line that
-- binds the limit's rate and period in µs as constants: one script per
-- distinct limit.
--
-- KEYS[1]: the key, a hash {w = window id, c = units counted} (see fixed.lua).
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1, which spares
--   Redis an argument to read and convert (about 5% of the call's cost).
-- Reply: one string of four integers, space-separated: allowed (0/1),
--   remaining units, retry-after µs (-1: never), reset-after µs.

local t = redis.call('TIME')
-- TIME's replies and ARGV[1] are digit strings: arithmetic converts them,
-- where tonumber() would parse each twice
local now = t[1] * 1000000 + t[2]
local n = ARGV[1]
n = n and n + 0 or 1
local key = KEYS[1]
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
if n <= rate and c + n <= rate then
  -- a hash without w is absent or a sliding counter's: clear its fields
  if not stored[1] then redis.call('DEL', key) end
  redis.call('HSET', key, 'w', string.format('%d', w), 'c', string.format('%d', c + n))
  redis.call('PEXPIRE', key, string.format('%d', math.ceil((window_end - now) / 1000) + 1))
  return string.format('1 %d 0 %d', rate - c - n, window_end - now)
end
local retry, reset = window_end - now, 0
if n > rate then retry = -1 end
if c > 0 then reset = window_end - now end
return string.format('0 %d %d %d', rate - c, retry, reset)
