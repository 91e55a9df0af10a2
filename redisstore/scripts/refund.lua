-- refund: gives ARGV[1] units back to every check's key, never past full,
-- then answers as peek.lua, which is loaded after it. Loaded after the
-- algorithm files and a line gathering their <name>_refund functions into
-- the table refunds, indexed by algorithm number + 1.
--
-- KEYS, ARGV: as for decide.lua (ARGV[1]: n, the units given back, >= 1).
-- Reply: peek.lua's, read after the refund.

local function refund(now)
  local n = tonumber(ARGV[1])
  for i = 1, #KEYS do
    local a = 4 * i - 2
    refunds[tonumber(ARGV[a]) + 1](KEYS[i], now, tonumber(ARGV[a + 1]),
      tonumber(ARGV[a + 2]) * 1000, tonumber(ARGV[a + 3]), n)
  end
end
