-- Sliding window log: one sorted-set member per admitted unit, scored by its
-- time in µs; the window is (now - period, now].
--
-- KEYS (one per sliding-log limit): a sorted set of at most rate members.
--   Members are "<µs>-<index>", where index counts up from the set's size when
--   they were added, so units admitted in the same microsecond stay distinct;
--   it has five digits at least, so that members of one microsecond sort by
--   index (a refund removes the newest).
-- ARGV (per limit, passed on by decide.lua): rate, period in µs, burst
--   (unused).
-- Reply (per limit, written by decide.lua): allowed (0/1), remaining units,
--   retry-after µs (-1: never, the cost exceeds the rate), reset-after µs.
--
-- Trimming is a write, so a denied call that trimmed also renews the expiry.

local function slidinglog_reset(key, now, period)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] then return tonumber(newest[2]) + period - now end
  return 0
end

local function slidinglog_check(key, now, rate, period, burst, n)
  -- a key of another type (the rule's algorithm changed) counts as absent
  local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - period))
  if type(trimmed) == 'table' then
    redis.call('DEL', key)
    trimmed = 0
  end
  local c = redis.call('ZCARD', key)
  if trimmed > 0 and c > 0 then
    redis.call('PEXPIRE', key, math.ceil(period / 1000) + 1)
  end
  local s = {c = c, period = period, retry = 0, remaining = rate - c}
  if n > rate then
    s.ok, s.retry = false, -1
  elseif c + n <= rate then
    s.ok = true
    s.remaining_after = rate - c - n
    s.reset_after = period
    -- reset is only needed if another limit denies: computed then
    s.reset = function() return slidinglog_reset(key, now, period) end
    return s
  else
    -- the (c + n - rate)-th oldest member must leave the window first
    local k = c + n - rate
    local oldest = redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')
    s.ok, s.retry = false, tonumber(oldest[2]) + period - now
  end
  s.reset = slidinglog_reset(key, now, period)
  return s
end

local function slidinglog_commit(key, now, s, n)
  -- ZADD in chunks: unpack() of a huge table would overflow Lua's C stack
  local stamp = string.format('%d', now)
  local i = 1
  while i <= n do
    local args, j = {}, 0
    while i <= n and j < 1000 do
      args[j + 1] = stamp
      args[j + 2] = stamp .. '-' .. string.format('%05d', s.c + i)
      i, j = i + 1, j + 2
    end
    redis.call('ZADD', key, (table.unpack or unpack)(args))
  end
  redis.call('PEXPIRE', key, math.ceil(s.period / 1000) + 1)
end

-- slidinglog_refund gives n units back by removing the n newest members
-- (members of one microsecond go highest index first: the index is
-- zero-padded so that its order is the members' order). With a bound
-- x > 0 (µs, see refund.lua), the units leave the window by about now + x,
-- so they were admitted at about now + x - period: the members removed
-- are those of the instant nearest to that, within refund_slack (a
-- decision admits all its units in one instant), up to n, and none when
-- no instant is that near. Members of the newest microsecond are then
-- renamed with indices up to the set's size, which the next units of that
-- microsecond count on to stay distinct.
local function slidinglog_refund(key, now, rate, period, burst, n, x)
  local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - period))
  if type(trimmed) == 'table' then return end
  if x <= 0 then
    redis.call('ZPOPMAX', key, n)
    return
  end
  local est = now + x - period
  local below = redis.call('ZREVRANGEBYSCORE', key, string.format('%d', est), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local above = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', est), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local at
  if below[2] then at = tonumber(below[2]) end
  if above[2] and (not at or tonumber(above[2]) - est < est - at) then at = tonumber(above[2]) end
  if not at or math.abs(at - est) > refund_slack(period) then return end
  local stamp = string.format('%d', at)
  redis.call('ZREM', key, (table.unpack or unpack)(redis.call('ZREVRANGEBYSCORE', key, stamp, stamp, 'LIMIT', 0, n)))
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if not newest[2] then return end
  local last = redis.call('ZRANGEBYSCORE', key, newest[2], newest[2])
  local size = redis.call('ZCARD', key)
  if tonumber(string.match(last[#last], '-(%d+)$')) <= size then return end
  local ttl = redis.call('PTTL', key)
  stamp = string.format('%d', tonumber(newest[2]))
  -- in chunks, as slidinglog_commit adds: all old names go before any new
  for i = 1, #last, 1000 do
    redis.call('ZREM', key, (table.unpack or unpack)(last, i, math.min(i + 999, #last)))
  end
  local i = 1
  while i <= #last do
    local args, j = {}, 0
    while i <= #last and j < 1000 do
      args[j + 1] = stamp
      args[j + 2] = stamp .. '-' .. string.format('%05d', size - #last + i)
      i, j = i + 1, j + 2
    end
    redis.call('ZADD', key, (table.unpack or unpack)(args))
  end
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end

-- slidinglog_charge spends up to n units whatever the log holds (see
-- charge.lua): members past the rate (a debt), but never more than twice
-- the rate in all, whatever the debt bound: every member leaves the window
-- within a period, so more would keep the key denied no longer, only cost
-- memory. It returns the units spent.
local function slidinglog_charge(key, now, rate, period, burst, n, d)
  local trimmed = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - period))
  if type(trimmed) == 'table' then
    redis.call('DEL', key)
    trimmed = 0
  end
  local c = redis.call('ZCARD', key)
  local add = math.min(n, math.max(0, 2 * rate - c))
  if add > 0 then
    slidinglog_commit(key, now, {c = c, period = period}, add)
  elseif trimmed > 0 and c > 0 then
    redis.call('PEXPIRE', key, math.ceil(period / 1000) + 1)
  end
  return add
end
