-- paused: reads how long the key stays paused, writing nothing. A process
-- that was not subscribed for a while runs it for the keys it waits on,
-- since pauses published meanwhile went unheard. Loaded after state.lua.
--
-- KEYS[1], ARGV[1..8]: see state.lua.
-- Reply: an array of one integer, the pause left (µs; 0 for none).

return {math.max(s.pause - now, 0)}
