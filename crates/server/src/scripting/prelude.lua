-- Shale's side of the scripting API, run once in each Lua state (see vm.rs).
--
-- As in Redis 7.0, every table a script can reach is read-only: the globals, `redis`, `string`,
-- `cjson` and the other libraries. Scripts see proxies of them (`protect`, and sandbox.rs for the
-- C functions that see through proxies); the real tables stay here. The Lua states are shared
-- by all clients, so this is what keeps a script from changing what later ones see. `bridge`
-- links this code to Rust, `api` holds the C functions and the tables they share with it.
-- Nothing here gives a script an error that names this chunk: errors are raised at the
-- script's level or as Redis's error tables.
local bridge, api = ...
local match, type, tostring, error, xpcall, pcall, select, ipairs, next, unpack =
  string.match, type, tostring, error, xpcall, pcall, select, ipairs, next, unpack
local setfenv, setmetatable, rawset, lower = setfenv, setmetatable, rawset, string.lower
local proxies, reported, loading = api.proxies, api.reported, api.loading

-- Redis's read-only tables: a write fails where the script wrote.
local function readonly()
  error('Attempt to modify a readonly table', 2)
end
-- Redis's error metatable (`luaSetErrorMetatable`): reading a missing global fails.
local function missing(...)
  if select('#', ...) ~= 2 then error('Wrong number of arguments to luaProtectedTableError', 2) end
  local _, name = ...
  local kind = type(name)
  if kind ~= 'string' and kind ~= 'number' then
    error('Second argument to luaProtectedTableError must be a string or number', 2)
  end
  error("Script attempted to access nonexistent global variable '" .. name .. "'", 2)
end

-- The read-only proxy of `real`, and of every table `real` holds, which it then holds in their
-- place. `meta` is what `getmetatable` reports for the proxy.
local protected = {}
local function protect(real, meta)
  if proxies[real] then return real end
  local proxy = protected[real]
  if proxy then return proxy end
  proxy = setmetatable({}, {__index = real, __newindex = readonly})
  protected[real], proxies[proxy], reported[proxy] = proxy, real, meta
  for key, value in next, real do
    if type(value) == 'table' then rawset(real, key, protect(value)) end
  end
  return proxy
end
-- `real` with Redis's error metatable, behind a proxy.
local function strict(real)
  local meta = {__index = missing}
  setmetatable(real, meta)
  return protect(real, protect(meta))
end

-- The libraries. Strings' own metatable indexes the real `string` table, and shows scripts a
-- read-only one.
rawset(table, 'insert', api.insert)
local libraries = {}
for _, name in ipairs({'string', 'table', 'math', 'coroutine', 'redis', 'struct', 'cmsgpack', 'bit'}) do
  libraries[name] = protect(_G[name])
end
getmetatable('').__metatable = protect({__index = libraries.string})

-- cjson keeps its settings (`encode_max_depth` ...) in the library, not in its table: a run
-- that reaches for one of them ends with `reset`, so that each run starts from the defaults,
-- whatever an earlier one set (Redis keeps them from one script to the next).
local cjson = _G.cjson
local settings, defaults = {}, {}
for _, name in ipairs({'encode_sparse_array', 'encode_max_depth', 'decode_max_depth',
    'encode_number_precision', 'encode_keep_buffer', 'encode_invalid_numbers', 'decode_invalid_numbers'}) do
  settings[name], defaults[name] = true, {cjson[name]()}
end
libraries.cjson = setmetatable({}, {
  __index = function(_, key)
    if settings[key] then bridge.cjson_changed = true end
    return cjson[key]
  end,
  __newindex = readonly,
})
proxies[libraries.cjson] = function()
  bridge.cjson_changed = true
  return cjson
end
bridge.reset = function()
  for name, values in next, defaults do cjson[name](unpack(values)) end
  bridge.cjson_changed = nil
end

-- The error handler of a run: Lua errors become error tables, and each gets the line of the
-- script or function where it happened.
local where = bridge.where
local function handler(err)
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if err.source == nil then err.source, err.line = where() end
  return err
end

-- The globals of EVAL scripts (with KEYS and ARGV, set by each run) and of functions: Lua's
-- that Redis keeps, Redis's replacements, and the libraries.
local function globals()
  local g = {}
  for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'ipairs', 'rawequal',
      'select', 'tonumber', 'tostring', 'type', 'unpack', 'xpcall', '_VERSION'}) do
    g[name] = _G[name]
  end
  for _, name in ipairs({'next', 'pairs', 'rawget', 'rawset', 'getmetatable', 'setmetatable',
      'loadstring', 'load', 'pcall'}) do
    g[name] = api[name]
  end
  for name, library in next, libraries do g[name] = library end
  return g
end
local function environment(g)
  local env = strict(g)
  rawset(g, '_G', env)
  return env
end
local eval_globals = globals()
eval_globals.__redis__err__handler = handler
local eval_env = environment(eval_globals)
local function_globals = globals()
local function_env = environment(function_globals)
bridge.eval_env = eval_env

-- `redis.call`, `redis.pcall`, `redis.acl_check_cmd` and `redis.setresp` (C functions, see
-- redis_api.rs) call these, which reach the Rust closures of the current run.
bridge.dispatch = function(...) return bridge.command(...) end
bridge.acl_dispatch = function(...) return bridge.acl_check(...) end
bridge.apply_resp = function(version) return bridge.setresp(version) end

-- Runs return straight from `xpcall`: no code of this chunk may run after a script is killed,
-- as the kill error is then raised at every line.
bridge.run = function(f, keys, argv)
  rawset(eval_globals, 'KEYS', keys)
  rawset(eval_globals, 'ARGV', argv)
  loading.env = eval_env
  return xpcall(f, handler)
end
bridge.call_function = function(f, keys, args)
  loading.env = function_env
  return xpcall(function() return f(keys, args) end, handler)
end

-- Functions. A library's code runs once per Lua state, in `library_env`: while it loads, it
-- sees only Redis's load-time API (`redis.register_function`, `redis.log`, the version), and
-- afterwards the globals of functions.
local registering
local function refuse(message) error({err = 'ERR ' .. message}) end
local function is_text(value) local t = type(value) return t == 'string' or t == 'number' end
local flag_names = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
local function read_flags(flags)
  local read, j = {}, 1
  while true do
    local flag = flags[j]
    if flag == nil then return read end
    if not is_text(flag) or not flag_names[lower(flag)] then return nil end
    read[#read + 1] = lower(flag)
    j = j + 1
  end
end
local function named_arguments(named)
  if type(named) ~= 'table' then
    refuse('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
  end
  local f = {flags = {}}
  for key, value in api.pairs(named) do
    if not is_text(key) then refuse('named argument key given to redis.register_function is not a string') end
    key = lower(key)
    if key == 'function_name' then
      if not is_text(value) then refuse('function_name argument given to redis.register_function must be a string') end
      f.name = tostring(value)
    elseif key == 'description' then
      if not is_text(value) then refuse('description argument given to redis.register_function must be a string') end
      f.description = tostring(value)
    elseif key == 'callback' then
      if type(value) ~= 'function' then refuse('callback argument given to redis.register_function must be a function') end
      f.callback = value
    elseif key == 'flags' then
      if type(value) ~= 'table' then refuse('flags argument to redis.register_function must be a table representing function flags') end
      f.flags = read_flags(value)
      if not f.flags then refuse('unknown flag given') end
    else
      refuse('unknown argument given to redis.register_function')
    end
  end
  if f.name == nil then refuse('redis.register_function must get a function name argument') end
  if f.callback == nil then refuse('redis.register_function must get a callback argument') end
  return f
end
local function register_function(...)
  if not registering then refuse('redis.register_function can only be called on FUNCTION LOAD command') end
  local count = select('#', ...)
  if count < 1 or count > 2 then refuse('wrong number of arguments to redis.register_function') end
  local f
  if count == 1 then
    f = named_arguments(...)
  else
    local name, callback = ...
    if not is_text(name) then refuse('first argument to redis.register_function must be a string') end
    if type(callback) ~= 'function' then refuse('second argument to redis.register_function must be a function') end
    f = {name = tostring(name), callback = callback, flags = {}}
  end
  -- Redis checks function names with its library name check, and says so.
  if not match(f.name, '^[%w_]+$') then
    refuse('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  if registering[f.name] then refuse('Function already exists in the library') end
  registering[f.name] = f
end
local redis = _G.redis
local load_globals = {redis = strict({register_function = register_function, log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE, LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING, REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM})}
setmetatable(load_globals, {__index = missing})
local library_meta = {__index = function_globals, __newindex = readonly}
local library_env = setmetatable({}, library_meta)
-- Loading is three calls, so that the library's code is the last Lua code to run while it may
-- be stopped (see `bridge.run`).
bridge.begin_load = function(chunk)
  setfenv(chunk, library_env)
  registering = {}
  library_meta.__index = load_globals
end
bridge.load = function(chunk) return pcall(chunk) end
bridge.end_load = function()
  library_meta.__index = function_globals
  local registered = registering
  registering = nil
  return registered
end
