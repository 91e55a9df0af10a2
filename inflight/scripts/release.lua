-- Release: give a holder's slot back.
--
-- KEYS[1]: the sorted set of holders (see acquire.lua).
-- ARGV[1]: the holder's ID.
-- Reply: 1 if the holder held a slot, 0 if its lease had already run out.
return redis.call('ZREM', KEYS[1], ARGV[1])
