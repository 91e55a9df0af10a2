-- envoyproxy/ratelimit's counting, on Redis's clock: each key is a counter
-- of one fixed window aligned to Unix time (window k of a period P spans
-- [k*P, (k+1)*P)), expiring at the window's end. Every hit is added, over
-- the limit or not, as envoy adds them.
--
-- KEYS: one counter key per limit (one hash slot).
-- ARGV[1]: 0 to count each key apart; 1 for envoy's
--          STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when a key would go over
--          its limit, only the keys that would go over are counted.
-- ARGV[2+3(i-1)], ARGV[3+3(i-1)], ARGV[4+3(i-1)]: key i's limit, window in
--          ms and hits (0 reads the count without adding to it).
-- Reply: for each key, the count after the call and the ms left in its
--          window.

local now_ms
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  return now_ms
end

-- open starts key's window afresh with count n (not written when 0), and
-- returns n and the ms left in the window.
local function open(key, period, n)
  local t = now()
  local ends = (math.floor(t / period) + 1) * period
  if n > 0 then
    redis.call('SET', key, n, 'PXAT', ends)
  else
    redis.call('DEL', key)
  end
  return n, ends - t
end

-- live returns key's count and ms left when it holds a counter of the
-- current window of period: it expires within the period (a counter
-- without expiry, one of a longer period, or one in its last ms is not).
local function live(key, period)
  local ttl = redis.call('PTTL', key)
  if ttl <= 0 or ttl > period then
    return nil
  end
  local c = tonumber(redis.pcall('GET', key))
  if not c or c ~= math.floor(c) or c < 0 then
    return nil
  end
  return c, ttl
end

local function add(key, period, n)
  if n == 0 then
    local c, ttl = live(key, period)
    if c then
      return c, ttl
    end
    return 0, (math.floor(now() / period) + 1) * period - now()
  end
  local c = redis.pcall('INCRBY', key, n)
  if c == n then
    -- the key was absent (no counter of ours holds 0): a new window, whose
    -- expiry open sets without asking for the missing one
    return open(key, period, n)
  end
  if type(c) == 'number' then
    local ttl = redis.call('PTTL', key)
    if ttl > 0 and ttl <= period and c >= n then
      return c, ttl
    end
  end
  return open(key, period, n)
end

local stop = ARGV[1] == '1'
local n = #KEYS
local hits = {}
for i = 1, n do
  hits[i] = tonumber(ARGV[4 + 3 * (i - 1)])
end
if stop then
  local over = {}
  local any = false
  for i = 1, n do
    local limit = tonumber(ARGV[2 + 3 * (i - 1)])
    local c = live(KEYS[i], tonumber(ARGV[3 + 3 * (i - 1)])) or 0
    over[i] = c + hits[i] > limit
    any = any or over[i]
  end
  if any then
    for i = 1, n do
      if not over[i] then
        hits[i] = 0
      end
    end
  end
end
local reply = {}
for i = 1, n do
  local c, ttl = add(KEYS[i], tonumber(ARGV[3 + 3 * (i - 1)]), hits[i])
  reply[2 * i - 1] = c
  reply[2 * i] = ttl
end
return reply
