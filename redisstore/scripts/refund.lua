-- refund: gives ARGV[1] units back to every check's key, never past full,
-- then answers as peek.lua, which is loaded after it. Loaded after the
-- algorithm files and a line gathering their <name>_refund functions into
-- the table refunds, indexed by algorithm number + 1.
--
-- KEYS, ARGV: as for decide.lua (ARGV[1]: n, the units given back, >= 1),
--   then, optionally, one string of one integer per check, space-separated:
--   the check's bound in µs on how long the units go on counting (what is
--   left of the ResetAfter of the decision that spent them), 0 for none,
--   -1 for a bound already past (nothing goes back). Each <name>_refund
--   takes it as its last argument, 0 when there is no string.
-- Reply: peek.lua's, read after the refund.
--
-- The algorithm files' refund functions call refund_slack, from
-- refund_slack.lua, loaded before them in the refund script alone.

local function before(now)
  local n = tonumber(ARGV[1])
  local bounds = {}
  local s = ARGV[4 * #KEYS + 2]
  if s then
    for v in string.gmatch(s, '-?%d+') do bounds[#bounds + 1] = tonumber(v) end
  end
  for i = 1, #KEYS do
    local a = 4 * i - 2
    local x = bounds[i] or 0
    if x >= 0 then
      refunds[tonumber(ARGV[a]) + 1](KEYS[i], now, tonumber(ARGV[a + 1]),
        tonumber(ARGV[a + 2]) * 1000, tonumber(ARGV[a + 3]), n, x)
    end
  end
end
