-- decide_call: the body of decide.lua and decide_many.lua, as a function
-- that decides one call at now: the nk keys KEYS[ki + 1 .. ki + nk], at
-- cost n, with their limits at ARGV[ai ..], four values per key (see
-- decide.lua), and returns the call's reply string. Loaded after the line
-- that gathers the algorithms' checks and commits.
local function decide_call(now, ki, nk, n, ai)
  local states, algs = {}, {}
  local all = true
  for i = 1, nk do
    local a = ai + 4 * (i - 1)
    local alg = tonumber(ARGV[a]) + 1
    local s = checks[alg](KEYS[ki + i], now, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]) * 1000,
      tonumber(ARGV[a + 3]), n)
    states[i], algs[i] = s, alg
    all = all and s.ok
  end

  local out = {}
  for i = 1, nk do
    local s = states[i]
    if all then
      commits[algs[i]](KEYS[ki + i], now, s, n)
      out[i] = string.format('1 %d 0 %d', s.remaining_after, s.reset_after)
    else
      local reset = s.reset
      if type(reset) == 'function' then reset = reset() end
      out[i] = string.format('0 %d %d %d', s.remaining, s.retry, reset)
    end
  end
  return table.concat(out, ' ')
end
