-- fixed_many: decides several one-key fixed-window calls under one limit
-- in one script call, in order, each as fixed_single.lua decides it: a
-- batching store sends the calls of one pipeline this way, so that Redis
-- pays a script's fixed cost once per pipeline rather than once per call.
-- Each call reads and writes its key in turn, so a key named twice sees
-- the first call's count; TIME is read once, at the first call that needs
-- it, and Redis's clock for expiries stands still through a script.
-- Loaded after the same line as fixed_single.lua, binding rate and period
-- in ms.
--
-- KEYS[i]: the key of call i (a key may repeat), a counter as in fixed.lua.
-- ARGV[i]: the cost of call i (integer >= 1); ARGV empty when every cost
--   is 1.
-- Reply: an array of integers, one per call, each as fixed_single.lua
--   answers.

local out = {}
local now, window_end
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = ARGV[i]
  n = n and n + 0 or 1
  local c, left = false, -1
  if n <= rate then
    c = redis.pcall('INCRBY', key, n)
    if type(c) == 'number' and c > n then
      left = redis.call('PTTL', key)
      if left > 0 and left <= period and c - n <= 1073741824 then
        if c <= rate then
          out[i] = (c - n) * period + left
        else
          redis.call('DECRBY', key, n)
          c = c - n
          if c > rate then c = rate end
          out[i] = -(c * period + left)
        end
      end
    end
  end
  if not out[i] then
    if not now then
      local t = redis.call('TIME')
      now = t[1] * 1000 + math.floor(t[2] / 1000)
      window_end = now - now % period + period
    end
    if left == 0 and c - n <= 1073741824 then
      -- as in fixed_single.lua: a server that rounds a TTL down
      local e = redis.pcall('PEXPIRETIME', key)
      if type(e) == 'number' and e > now and e <= window_end then
        if c <= rate then
          out[i] = (c - n) * period + e - now
        else
          redis.call('DECRBY', key, n)
          c = c - n
          if c > rate then c = rate end
          out[i] = -(c * period + e - now)
        end
      end
    end
  end
  if not out[i] then
    left = window_end - now
    local b = 0
    if c == n then
      redis.call('PEXPIREAT', key, string.format('%d', window_end))
      out[i] = left
    elseif type(c) ~= 'number' and n > rate then
      -- never allowable: read what the key holds, spend nothing
      out[i] = -1
      c = redis.pcall('GET', key)
      if type(c) == 'string' then
        local ttl = redis.call('PTTL', key)
        c = tonumber(c)
        if c and c == math.floor(c) and ttl > 0 and ttl <= period and c <= 1073741824 then
          if c > rate then c = rate end
          if c > 0 then out[i] = -(c * period + ttl) end
        end
      else
        local old = redis.pcall('HMGET', key, 'w', 'c')
        if not old.err and tonumber(old[1]) == math.floor(now / period) then
          b = math.min(rate, math.max(0, tonumber(old[2]) or 0))
          if b > 0 then out[i] = -(b * period + left) end
        end
      end
    else
      if type(c) ~= 'number' then
        local old = redis.pcall('HMGET', key, 'w', 'c')
        if not old.err and tonumber(old[1]) == math.floor(now / period) then
          b = math.max(0, tonumber(old[2]) or 0)
        end
      end
      if b + n <= rate then
        redis.call('SET', key, string.format('%d', b + n), 'PXAT', string.format('%d', window_end))
        out[i] = b * period + left
      else
        redis.call('SET', key, string.format('%d', b), 'PXAT', string.format('%d', window_end))
        if b > rate then b = rate end
        out[i] = -(b * period + left)
      end
    end
  end
end
return out
