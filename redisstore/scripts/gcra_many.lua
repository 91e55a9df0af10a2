-- gcra_many: decides several one-key GCRA calls under one limit in one
-- script call, in order, as if each had run gcra_single.lua at the same
-- instant: a batching store sends the calls of one pipeline this way, so
-- that Redis pays a script's fixed cost and TIME once per pipeline rather
-- than once per call. A key named twice is written once, its state carried
-- from one call to the next. Loaded after the same line as gcra_single.lua,
-- binding interval, tolerance, burst, sfx, sfxat, vfmt and px1.
--
-- KEYS[i]: the key of call i (a key may repeat), holding a value as in
--   gcra_single.lua.
-- ARGV[i]: the cost of call i (integer >= 1); ARGV empty when every cost
--   is 1.
-- Reply: an array of integers, one per call, each as gcra_single.lua
--   answers: reset-after µs if allowed, else -1 - reset-after µs.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- one MGET reads every key, repeats included, for less than a GET each
local vals = redis.call('MGET', (table.unpack or unpack)(KEYS))
local out = {}
local tats = {}  -- key -> its TAT after the calls so far
local moved = {} -- key -> true once an allowed call moved its TAT
local writes = {} -- keys to write, in the order first moved
for i = 1, #KEYS do
  local k = KEYS[i]
  local n = ARGV[i]
  n = n and n + 0 or 1
  local tat = tats[k]
  if not tat then
    local v = vals[i]
    tat = now
    if v then
      local s = tonumber(v)
      if s and string.find(v, sfx, sfxat, true) then
        tat = s + interval
      else
        local iv
        s, iv = string.match(v, '^(%d+)%z(%d+)$')
        if s then
          tat, iv = s + iv, iv + 0
        else
          s, iv = string.match(v, '^(%d+):(%d+)$') -- written before the NUL format
          if s then
            tat, iv = s + 0, iv + 0
          else
            tat = tonumber(v) or now -- a bare TAT, written before keys carried the interval
          end
        end
        if iv and iv ~= interval and tat > now then
          tat = now + math.min(math.ceil((tat - now) / iv * interval), 562949953421312)
          -- rewritten under the new interval, so that it refills at the new rate
          redis.call('SET', k, string.format(vfmt, tat - interval), 'PX',
            string.format('%d', math.ceil((tat - now) / 1000)))
        end
      end
    end
  end
  if tat < now then tat = now end
  local new_tat = tat + n * interval
  if n > burst or new_tat - now > tolerance then
    out[i] = now - tat - 1
    tats[k] = tat
  else
    if not moved[k] then
      moved[k] = true
      writes[#writes + 1] = k
    end
    tats[k] = new_tat
    out[i] = new_tat - now
  end
end
-- a key one unit from full is stored as now, TIME's digits with the µs
-- padded to six, made once
local nowv
for j = 1, #writes do
  local k = writes[j]
  local tat = tats[k]
  if tat - now == interval then
    if not nowv then
      local us = t[2]
      nowv = t[1] .. string.rep('0', 6 - #us) .. us .. sfx
    end
    redis.call('SET', k, nowv, 'PX', px1)
  else
    redis.call('SET', k, string.format(vfmt, tat - interval), 'PX',
      string.format('%d', math.ceil((tat - now) / 1000)))
  end
end
return out
