-- slidinglog_many: decides several one-key sliding-log calls under one
-- limit in one script call, in order, as if each had run single.lua over
-- slidinglog.lua at the same instant: a batching store sends the calls of
-- one pipeline this way, so that Redis pays a script's fixed cost and TIME
-- once per pipeline rather than once per call. A key named twice is
-- trimmed and counted once; the members its allowed calls add, all of this
-- instant and so the newest, are added at the end, named as those calls
-- alone would have named them. A batching store sends it calls of one key
-- only, adding core.MaxLogCost members at most together, so that it takes
-- no longer than one call may; it decides any keys alike. Loaded after a
-- line binding rate, period in µs and burst.
--
-- KEYS[i]: the key of call i (a key may repeat), a sorted set as in
--   slidinglog.lua.
-- ARGV[i]: the cost of call i (integer >= 1); ARGV empty when every cost
--   is 1.
-- Reply: an array of strings, one per call, each as single.lua answers.

local t = redis.call('TIME')
-- TIME's replies are digit strings: arithmetic converts them
local now = t[1] * 1000000 + t[2]
local out = {}
-- key -> {c0 (members before this script), c (and those added), and the
-- scores read of the members before: by rank from the oldest, and newest}
local states = {}
local order = {}  -- keys in the order first read
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = ARGV[i]
  n = n and n + 0 or 1
  local s = states[key]
  if not s then
    -- a key of another type (the rule's algorithm changed) counts as absent
    local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - period))
    if type(trimmed) == 'table' then
      redis.call('DEL', key)
      trimmed = 0
    end
    local c = redis.call('ZCARD', key)
    if trimmed > 0 and c > 0 then
      -- trimming is a write: it renews the expiry
      redis.call('PEXPIRE', key, math.ceil(period / 1000) + 1)
    end
    s = {c0 = c, c = c, ranked = {}}
    states[key] = s
    order[#order + 1] = key
  end
  local c = s.c
  if n <= rate and c + n <= rate then
    s.c = c + n
    out[i] = string.format('1 %d 0 %d', rate - c - n, period)
  else
    local retry = -1
    if n <= rate then
      -- the (c + n - rate)-th oldest member must leave the window first:
      -- one this script added is of this instant
      local k = c + n - rate
      retry = period
      if k <= s.c0 then
        local at = s.ranked[k]
        if not at then
          at = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
          s.ranked[k] = at
        end
        retry = at + period - now
      end
    end
    -- the newest member leaves the window last
    local reset = 0
    if s.c > s.c0 then
      reset = period
    else
      if s.newest == nil then
        local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
        s.newest = newest[2] and tonumber(newest[2]) or false
      end
      if s.newest then reset = s.newest + period - now end
    end
    out[i] = string.format('0 %d %d %d', rate - c, retry, reset)
  end
end
-- each key's new members, indexed on from its size before them, as each
-- call's commit would have added its own; in chunks, since unpack() of a
-- huge table would overflow Lua's C stack
local stamp = string.format('%d', now)
for _, key in ipairs(order) do
  local s = states[key]
  if s.c > s.c0 then
    local i = s.c0 + 1
    while i <= s.c do
      local args, j = {}, 0
      while i <= s.c and j < 1000 do
        args[j + 1] = stamp
        args[j + 2] = stamp .. '-' .. string.format('%05d', i)
        i, j = i + 1, j + 2
      end
      redis.call('ZADD', key, (table.unpack or unpack)(args))
    end
    redis.call('PEXPIRE', key, math.ceil(period / 1000) + 1)
  end
end
return out
