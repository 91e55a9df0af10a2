-- decide_many: decides several calls of decide.lua's in one script call, in
-- order, as if each had run decide.lua at the same instant: a batching
-- store sends the calls of one pipeline this way, so that Redis pays a
-- script's fixed cost and TIME once per pipeline rather than once per
-- call. Each call reads what the calls before it wrote. Loaded as decide.lua
-- is, after decide_call.lua.
--
-- KEYS: every call's keys, one call's after another's.
-- ARGV: per call, in the same order: its number of keys nk, its cost n,
--   and four values per key, as decide.lua takes them.
-- Reply: an array of strings, one per call, each as decide.lua answers.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2] -- digit strings: arithmetic converts them
local out = {}
local ki, ai = 0, 1
while ai <= #ARGV do
  local nk = tonumber(ARGV[ai])
  out[#out + 1] = decide_call(now, ki, nk, tonumber(ARGV[ai + 1]), ai + 2)
  ki, ai = ki + nk, ai + 2 + 4 * nk
end
return out
