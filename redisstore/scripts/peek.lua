-- peek: reads every check's key as a request of one unit would find it,
-- and spends nothing (a sliding log still trims what left its window).
-- Loaded after the algorithm files it needs, a line gathering their
-- functions into the table checks, indexed by algorithm number + 1, as for
-- decide.lua, and, in the refund and charge scripts, after refund.lua or
-- charge.lua, whose function before runs first and whose reply goes
-- first.
--
-- KEYS: one key per limit, all of one identity (one Cluster hash tag).
-- ARGV[1]: n, unused here (refund.lua's cost); ARGV[2..]: four values per
--   key as for decide.lua: algorithm, rate, period in ms, burst.
-- Reply: one string of four integers per key, space-separated, in KEYS
--   order, each key read on its own: allowed (0/1: a unit is left),
--   remaining units now, retry-after µs until a unit fits (0 when one
--   does), reset-after µs until the key is full.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local head = before and before(now) or ''
local out = {}
for i = 1, #KEYS do
  local a = 4 * i - 2
  local s = checks[tonumber(ARGV[a]) + 1](KEYS[i], now, tonumber(ARGV[a + 1]),
    tonumber(ARGV[a + 2]) * 1000, tonumber(ARGV[a + 3]), 1)
  local reset = s.reset
  if type(reset) == 'function' then reset = reset() end
  if s.ok then
    out[i] = string.format('1 %d 0 %d', s.remaining, reset)
  else
    out[i] = string.format('0 %d %d %d', s.remaining, s.retry, reset)
  end
end
return head .. table.concat(out, ' ')
