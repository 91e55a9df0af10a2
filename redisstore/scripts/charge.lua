-- charge: spends ARGV[1] units from every check's key whatever it holds,
-- each key on its own, then answers as peek.lua, which is loaded after it,
-- with the units each key took before that reply. Loaded after the
-- algorithm files and a line gathering their <name>_charge functions into
-- the table charges, indexed by algorithm number + 1.
--
-- KEYS, ARGV: as for decide.lua (ARGV[1]: n, the units charged, >= 1),
--   then the debt bound d in periods (core.MaxDebtPeriods): no key is left
--   owing more than its algorithm's bound of d periods (see each file's
--   <name>_charge), and a charge past it spends what fits.
-- Reply: one integer per key, space-separated, the units it took, then
--   '|', then peek.lua's reply, read after the charge.

local function before(now)
  local n = tonumber(ARGV[1])
  local d = tonumber(ARGV[4 * #KEYS + 2])
  local took = {}
  for i = 1, #KEYS do
    local a = 4 * i - 2
    took[i] = string.format('%d', charges[tonumber(ARGV[a]) + 1](KEYS[i], now, tonumber(ARGV[a + 1]),
      tonumber(ARGV[a + 2]) * 1000, tonumber(ARGV[a + 3]), n, d))
  end
  return table.concat(took, ' ') .. '|'
end
