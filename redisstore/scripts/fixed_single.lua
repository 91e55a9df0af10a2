-- fixed_single: decides one key under one fixed-window limit, written out in
-- full like gcra_single.lua (no tables, no closures, no string reply), with
-- the same decision as fixed_check in fixed.lua and the same writes as
-- fixed_commit (but that a denial also rewrites an earlier version's hash
-- as a counter); the twin and conformance tests hold both to the
-- MemoryStore.
-- Loaded after a line that binds the limit's rate and period in ms as
-- constants: one script per distinct limit whose replies fit (see below).
--
-- KEYS[1]: the key, a string counter that expires at its window's end (see
--   fixed.lua).
-- ARGV[1]: n, the cost in units (integer >= 1); absent for 1, which spares
--   Redis an argument to read and convert (about 5% of the call's cost).
-- Reply: one integer, b * period + left, where b is the units counted in
--   the window before this call (at most rate) and left the whole ms left
--   in the window by Redis's clock (its PTTL, 1 to period); positive if allowed, negated if denied. The
--   caller knows the limit and the cost, so the rest follows (see
--   fixedResult in reply.go). It is exact for (rate + 1) * period < 2^53:
--   other limits run fixed.lua through single.lua.
--
-- An allowed call on a live counter costs INCRBY and PTTL, no TIME: the
-- counter's expiry is its window's end. The first unit of a window also
-- reads TIME and sets that expiry; a denied call gives its increment back.

local n = ARGV[1]
n = n and n + 0 or 1
local key = KEYS[1]
local c, left = false, -1
if n <= rate then
  c = redis.pcall('INCRBY', key, n)
  if type(c) == 'number' and c > n then
    left = redis.call('PTTL', key)
    -- a live count of a window of this period, not a bare GCRA TAT
    if left > 0 and left <= period and c - n <= 1073741824 then
      if c <= rate then return (c - n) * period + left end
      redis.call('DECRBY', key, n)
      c = c - n
      if c > rate then c = rate end
      return -(c * period + left)
    end
  end
end
-- the first unit of a window, or a key that holds no count of this window
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window_end = now - now % period + period
if left == 0 and c - n <= 1073741824 then
  -- Redis answers 0 in the last ms it keeps a key, past its window's end;
  -- a server that rounds a TTL down (miniredis) answers 0 within it
  local e = redis.pcall('PEXPIRETIME', key)
  if type(e) == 'number' and e > now and e <= window_end then
    if c <= rate then return (c - n) * period + e - now end
    redis.call('DECRBY', key, n)
    c = c - n
    if c > rate then c = rate end
    return -(c * period + e - now)
  end
end
left = window_end - now
if c == n then
  -- INCRBY created the key (or found 0)
  redis.call('PEXPIREAT', key, string.format('%d', window_end))
  return left
end
local b = 0
if type(c) ~= 'number' then
  if n > rate then
    -- never allowable: read what the key holds, spend nothing
    c = redis.pcall('GET', key)
    if type(c) == 'string' then
      local ttl = redis.call('PTTL', key)
      c = tonumber(c)
      if c and c == math.floor(c) and ttl > 0 and ttl <= period and c <= 1073741824 then
        if c > rate then c = rate end
        if c > 0 then return -(c * period + ttl) end
      end
      return -1
    end
  end
  -- another algorithm's key, or a hash {w = window id, c = count} written
  -- by an earlier version, whose count holds in its window
  local old = redis.pcall('HMGET', key, 'w', 'c')
  if not old.err and tonumber(old[1]) == math.floor(now / period) then
    b = math.max(0, tonumber(old[2]) or 0)
  end
  if n > rate then
    if b > rate then b = rate end
    if b > 0 then return -(b * period + left) end
    return -1
  end
end
-- INCRBY counted on a stale key (its window over, another period's, no
-- expiry, not a count), or on none: this window starts from b
if b + n <= rate then
  redis.call('SET', key, string.format('%d', b + n), 'PXAT', string.format('%d', window_end))
  return b * period + left
end
redis.call('SET', key, string.format('%d', b), 'PXAT', string.format('%d', window_end))
if b > rate then b = rate end
return -(b * period + left)
