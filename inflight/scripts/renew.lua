-- Renew: extend the leases of holders that are still running, all of one key.
--
-- KEYS[1]: the sorted set of holders (see acquire.lua).
-- ARGV[1]: the lease time in ms; ARGV[2] onwards: the holders' IDs.
-- Reply: one integer per holder, in order: 1 renewed, 0 lost (its lease ran
--   out before this call, or it was released).
--
-- Expired holders are dropped first, so a lease that ran out is never
-- brought back: another holder may already have its slot.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out, renewed = {}, false
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i])
    out[i - 1] = 1
    renewed = true
  else
    out[i - 1] = 0
  end
end
if renewed then
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
end
return out
