-- fleet: the processes that share a limiter, one sorted-set member each,
-- scored by its latest heartbeat on Redis's clock. A heartbeat drops the
-- members not heard from within ttl, adds or renews its own, and counts them.
--
-- KEYS[1]: the sorted set
-- ARGV[1]: the member, the process's random id
-- ARGV[2]: ttl (µs): members older than that are gone; also the key's expiry
-- ARGV[3]: '1' to beat, '0' to leave
-- Reply: the number of members after the call (integer).

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
if ARGV[3] == '0' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return redis.call('ZCARD', KEYS[1])
end
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now - ttl))
redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000))
return redis.call('ZCARD', KEYS[1])
