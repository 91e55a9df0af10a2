-- Acquire: take one slot of a concurrency limit for a new holder, if the cap
-- allows it.
--
-- KEYS[1]: a sorted set of holder IDs, each scored by the expiry of its lease
--   in ms of Redis's clock (TIME).
-- ARGV[1]: the cap, at least 1; ARGV[2]: the lease time in ms; ARGV[3]: the
--   new holder's ID, random per acquisition.
-- Reply: {allowed (0 or 1), holders after the call, this one included when
--   allowed}.
--
-- Holders whose lease has run out (their process died, or could not renew)
-- are dropped first. The key expires with its longest lease (PEXPIREAT the
-- highest score), never sooner, so holders whose Limiters use other lease
-- times keep theirs.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= cap then
  return {0, n}
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return {1, n + 1}
