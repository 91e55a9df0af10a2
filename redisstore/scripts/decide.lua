-- decide: checks every limit of one identity against Redis's clock and, only
-- if all of them allow the request, consumes its cost from each of them.
-- Loaded after the algorithm files it needs (gcra.lua, fixed.lua,
-- slidinglog.lua, slidingcounter.lua), a line that gathers their functions
-- into the tables checks and commits, indexed by algorithm number + 1, and
-- decide_call.lua, which does the work: one script per algorithm, and one
-- with all four for mixed calls.
--
-- KEYS: one key per limit, all of one identity (one Cluster hash tag).
-- ARGV[1]: n, the cost in units (integer >= 1).
-- ARGV[2..]: four values per key, in KEYS order: algorithm (0 gcra, 1 fixed,
--   2 sliding-log, 3 sliding-counter), rate, period in ms, burst.
-- Reply: one string of four integers per key, space-separated, in KEYS order:
--   allowed (0/1), remaining units, retry-after µs (-1: never), reset-after µs.
--   When any limit denies, every allowed is 0, nothing is consumed, and each
--   limit reports its state as it stands (retry-after 0 if it had room).

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2] -- digit strings: arithmetic converts them
return decide_call(now, 0, #KEYS, tonumber(ARGV[1]), 2)
