-- override: lets each check of a decide, peek or refund script take the
-- identity's override of its limit, read in the same script call. Loaded
-- after the algorithm files and before the entry script (decide.lua, or
-- refund.lua and peek.lua), which is wrapped in the function run: this
-- file binds the locals KEYS and ARGV that the entry script then reads in
-- place of Redis's, the overrides applied, and the script answers run()'s
-- reply followed by tail.
--
-- KEYS: one storage key per check, as for the entry script, then the
--   override keys of the checks that have one (each in its check's slot).
-- ARGV: the entry script's (ARGV[1], then four values per check:
--   algorithm, rate, period in ms, burst), then one value per check: the
--   position in KEYS of its override key, 0 for none; then a refund's
--   bounds, if any (see refund.lua), which the entry script reads after its
--   own arguments.
-- An override key holds a string "<rate> <period ms> <burst>", written by
--   RedisStore.SetOverride. Anything else (no key, another type, another
--   text, a limit the check's algorithm cannot enforce) counts as none.
-- Reply: the entry script's, then ';' and three integers per check,
--   space-separated, in KEYS order: rate, period in ms and burst of the
--   override applied, or 0 0 0 when none was.

-- override_of returns the rate, period in ms and burst that the override
-- value v gives a check of algorithm alg, or nil when it gives none. The
-- bounds are Limit.Validate's.
local function override_of(v, alg)
  if type(v) ~= 'string' then return nil end
  local r, p, b = string.match(v, '^(%d+) (%d+) (%d+)$')
  if not r then return nil end
  r, p, b = tonumber(r), tonumber(p), tonumber(b)
  if not (r and p and b) or r < 1 or r > 1073741824 or p < 1 or p > 31622400000 then return nil end
  if alg == 0 and (b < 1 or b > 1073741824 or p * 1000 < r or
      math.ceil(p * 1000 / r) * b > 562949953421312) then
    return nil
  end
  if alg == 2 and r > 10000 then return nil end
  return r, p, b
end

local function override_args(keys, argv)
  -- a refund's bounds, when sent, are one more argument, after the rest
  local m = math.floor((#argv - 1) / 5)
  local k, a, tail = {}, {argv[1]}, {}
  if argv[5 * m + 2] then a[4 * m + 2] = argv[5 * m + 2] end
  for i = 1, m do
    local j = 4 * i - 2
    k[i] = keys[i]
    a[j], a[j + 1], a[j + 2], a[j + 3] = argv[j], argv[j + 1], argv[j + 2], argv[j + 3]
    tail[i] = '0 0 0'
    local o = tonumber(argv[4 * m + 1 + i])
    if o > 0 then
      local r, p, b = override_of(redis.pcall('GET', keys[o]), tonumber(argv[j]))
      if r then
        a[j + 1], a[j + 2], a[j + 3] = r, p, b
        tail[i] = string.format('%d %d %d', r, p, b)
      end
    end
  end
  return k, a, ';' .. table.concat(tail, ' ')
end

local KEYS, ARGV, tail = override_args(KEYS, ARGV)
