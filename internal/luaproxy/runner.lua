-- The script runner of package luaproxy, run by lua5.4: it reads scripts to
-- run from stdin and runs each in an environment holding only what both
-- Lua 5.1 (Redis, Valkey) and Lua 5.4 (Dragonfly) give a script, and
-- forwards each redis.call and redis.pcall to the proxy on stdout.
--
-- Messages are values in one encoding, both ways:
--   i<integer>\n      an integer
--   s<length>\n<bytes> a string
--   n\n               nil (Redis's null reply, Lua's false)
--   a<count>\n<values> an array
--   o<length>\n<bytes> a status reply ({ok = ...})
--   e<length>\n<bytes> an error reply ({err = ...})
-- The proxy sends a script as an array of its SHA1, its source, its KEYS
-- and its ARGV; the runner answers with arrays: {"call", args...} or
-- {"pcall", args...}, to which the proxy answers the command's reply,
-- then {"return", value} or {"fail", message}.

local stdin, stdout = io.stdin, io.stdout

local function readvalue()
  local line = stdin:read('l')
  if line == nil then os.exit(0) end
  local t, rest = line:sub(1, 1), line:sub(2)
  if t == 'i' then return math.tointeger(tonumber(rest)) end
  if t == 'n' then return false end
  if t == 's' or t == 'o' or t == 'e' then
    local n = math.tointeger(tonumber(rest))
    local s = n > 0 and stdin:read(n) or ''
    if t == 'o' then return { ok = s } end
    if t == 'e' then return { err = s } end
    return s
  end
  if t == 'a' then
    local n, out = math.tointeger(tonumber(rest)), {}
    for i = 1, n do out[i] = readvalue() end
    return out
  end
  error('luaproxy runner: bad message line ' .. line)
end

local function writestring(tag, s)
  stdout:write(tag, #s, '\n', s)
end

-- writereply writes v as Redis converts a script's value to a reply:
-- numbers to integers (truncated), strings to bulk strings, true to 1,
-- false and nil to nil, tables with err or ok to errors and statuses,
-- other tables to arrays up to their first nil.
local function writereply(v)
  local t = type(v)
  if t == 'number' then
    if math.type(v) == 'float' then
      if v ~= v or v == math.huge or v == -math.huge then
        stdout:write('i0\n')
        return
      end
      v = v >= 0 and math.floor(v) or math.ceil(v)
    end
    stdout:write('i', string.format('%d', v), '\n')
  elseif t == 'string' then
    writestring('s', v)
  elseif t == 'boolean' then
    stdout:write(v and 'i1\n' or 'n\n')
  elseif t == 'table' then
    if type(v.err) == 'string' then
      writestring('e', v.err)
    elseif type(v.ok) == 'string' then
      writestring('o', v.ok)
    else
      local n = 0
      while v[n + 1] ~= nil do n = n + 1 end
      stdout:write('a', n, '\n')
      for i = 1, n do writereply(v[i]) end
    end
  else
    stdout:write('n\n')
  end
end

local violation = 'luaproxy violation: '

-- strict returns a read-only table of fields whose missing fields are
-- errors: a script that reads what one Lua version lacks fails on every
-- server, not only on the server with that version.
local function strict(name, fields)
  return setmetatable(fields, {
    __index = function(_, k)
      error(violation .. name .. tostring(k) .. ' is not in both Lua 5.1 and Lua 5.4', 2)
    end,
    __newindex = function(_, k)
      error(violation .. 'a script may not set ' .. name .. tostring(k), 2)
    end,
  })
end

local function pick(from, names)
  local out = {}
  for _, n in ipairs(names) do out[n] = from[n] end
  return out
end

-- The standard library both versions have. Left out on purpose: 5.1's
-- unpack, table.maxn, table.getn, math.pow, math.mod, loadstring, setfenv,
-- getfenv and 5.3's math.tointeger, math.type, utf8, table.move.
-- table.unpack is 5.2+, so a script reaches it as table.unpack or unpack.
local stringlib = strict('string.', pick(string, {
  'byte', 'char', 'find', 'format', 'gmatch', 'gsub', 'len', 'lower',
  'match', 'rep', 'reverse', 'sub', 'upper' }))
local tablelib = strict('table.', pick(table, { 'concat', 'insert', 'remove', 'sort', 'unpack' }))
local mathlib = strict('math.', pick(math, {
  'abs', 'ceil', 'cos', 'exp', 'floor', 'fmod', 'huge', 'log', 'max', 'min',
  'modf', 'pi', 'random', 'randomseed', 'sin', 'sqrt', 'tan' }))

-- struct is Redis's struct library (in Redis, Valkey and Dragonfly); the
-- formats the scripts use mean the same to string.pack.
local structlib = strict('struct.', {
  pack = string.pack,
  unpack = function(fmt, s, pos) return string.unpack(fmt, s, pos) end,
})

-- arg converts an argument of redis.call as a Lua 5.4 server does:
-- strings as they are, numbers as tostring writes them. A float of an
-- integer value is refused: Lua 5.4 writes it 3.0, where Lua 5.1 writes 3.
local function arg(v)
  local t = type(v)
  if t == 'string' then return v end
  if t == 'number' then
    if math.type(v) == 'float' and v == math.floor(v) then
      error(violation .. 'the float ' .. tostring(v) .. ' passed to redis.call, which Lua 5.4 writes with .0 and Lua 5.1 without', 3)
    end
    return tostring(v)
  end
  error('Lua redis lib command arguments must be strings or integers', 3)
end

local function command(kind, ...)
  local n = select('#', ...)
  if n == 0 then error('Please specify at least one argument for this redis lib call', 3) end
  local args = { kind }
  for i = 1, n do args[i + 1] = arg((select(i, ...))) end
  writereply(args)
  stdout:flush()
  return readvalue()
end

local redislib = strict('redis.', {
  call = function(...)
    local r = command('call', ...)
    if type(r) == 'table' and r.err then error(r, 2) end
    return r
  end,
  pcall = function(...) return command('pcall', ...) end,
  status_reply = function(s) return { ok = s } end,
  error_reply = function(s) return { err = s } end,
  log = function() end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
})

local base = pick(_G, {
  'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'rawequal',
  'rawget', 'rawset', 'select', 'setmetatable', 'getmetatable', 'tonumber',
  'tostring', 'type', 'xpcall' })
base.string, base.table, base.math = stringlib, tablelib, mathlib
base.struct, base.redis = structlib, redislib

local compiled = {}

while true do
  local msg = readvalue()
  local sha, src, keys, argv = msg[1], msg[2], msg[3], msg[4]
  local env = {}
  for k, v in pairs(base) do env[k] = v end
  env.KEYS, env.ARGV = keys, argv
  env._G = env
  strict('', env)
  local f, err = compiled[sha], nil
  if f == nil then
    -- compiled once per script, as a server does; each run gets a fresh
    -- environment through the upvalue _ENV
    f, err = load('local _ENV = ...; return function() ' .. src .. '\nend', '=user_script', 't')
    if f then compiled[sha] = f end
  end
  if f == nil then
    writereply({ 'fail', 'compiling: ' .. tostring(err) })
  else
    local ok, res = pcall(function() return f(env)() end)
    if ok then
      writereply({ 'return', res })
    elseif type(res) == 'table' and res.err then
      writereply({ 'return', res })
    else
      writereply({ 'fail', tostring(res) })
    end
  end
  stdout:flush()
end
