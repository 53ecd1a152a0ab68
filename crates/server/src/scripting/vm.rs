//! One Lua state: the sandbox, Redis's `redis.*` API, and running a script in it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use shale_protocol::Reply;

use super::convert::{
    command_args, counted_error, error_line, error_table, lua_to_reply, mark_counted, reply_to_lua,
};
use super::flags::ScriptFlags;
use super::functions::{FunctionInfo, Libraries};
use super::{cjson, libraries, sha1_hex, RunningScript};
use crate::REDIS_VERSION;

/// A runaway script fails instead of taking the server's memory.
const MEMORY_LIMIT: usize = 1 << 30;
/// Bytes a script's reply may take as it is built; one table held many times by another
/// stands for a reply of any size.
const REPLY_LIMIT: usize = 512 << 20;
/// How often (in Lua instructions) a script checks whether SCRIPT KILL stopped it.
const KILL_CHECK_INSTRUCTIONS: u32 = 10_000;
/// How often (in Lua instructions) a loading library checks its time limit, as in Redis.
const LOAD_CHECK_INSTRUCTIONS: u32 = 100_000;
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Written in Lua: `redis.call` raises the same error table that `redis.pcall` returns, the
/// error handler turns Lua errors into error tables with the script line, and every run gets
/// fresh copies of the globals and library tables. The Lua states are shared by all clients,
/// so nothing a script changes (`redis.call = ...`, `rawset(string, ...)`) may outlive it.
/// The prelude keeps its own references to the functions it uses for the same reason.
const PRELUDE: &str = r#"
local bridge = ...
local match, pairs, type, tostring, error, xpcall, pcall, setfenv, setmetatable, getmetatable, rawset, rawget =
  string.match, pairs, type, tostring, error, xpcall, pcall, setfenv, setmetatable, getmetatable, rawset, rawget
-- `redis.call` and `redis.pcall` are C functions (see `redis_call`) that run `dispatch`, so a
-- script's `return redis.call(...)` keeps its frame, and errors can name its line.
bridge.dispatch = function(...) return bridge.command(...) end
redis.call = bridge.call
redis.pcall = bridge.pcall
bridge.acl_dispatch = function(...) return bridge.acl_check(...) end
redis.acl_check_cmd = bridge.acl_check_cmd
local where = bridge.where
redis.setresp = function(...) return bridge.setresp(...) end
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end
-- Scripts load source text only (a crafted binary chunk breaks the VM's memory safety, as in
-- Redis's CVE-2015-4335), and what they load runs in the globals of the run that loaded it.
local loadstring_, load_, byte = loadstring, load, string.byte
local current
local function binary(piece) return type(piece) == 'string' and byte(piece, 1) == 27 end
local function into_run(f, err)
  if f then setfenv(f, current) end
  return f, err
end
loadstring = function(text, name)
  if binary(text) then return nil, 'binary chunks are not loaded' end
  return into_run(loadstring_(text, name))
end
load = function(reader, name)
  if type(reader) ~= 'function' then return load_(reader, name) end
  local first = true
  local function text_only()
    local piece = reader()
    if first and piece ~= nil and piece ~= '' then
      first = false
      if binary(piece) then error('binary chunks are not loaded') end
    end
    return piece
  end
  return into_run(load_(text_only, name))
end
local libraries = {redis = true, cjson = true, string = true, table = true, math = true, coroutine = true}
local pristine = {}
for name, value in pairs(_G) do pristine[name] = value end
for name in pairs(libraries) do pristine[name] = copy(_G[name]) end
local strings = getmetatable('')
strings.__index = copy(pristine.string)
strings.__metatable = false
local function handler(err)
  if type(err) ~= 'table' then
    local text = tostring(err)
    err = {err = 'ERR ' .. text}
    local source, line = match(text, '^(user_[a-z]+):(%d+):')
    if source then err.source = '@' .. source; err.line = line end
  elseif err.source == nil then
    err.source, err.line = where()
  end
  return err
end
local function missing(name, level)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", level + 1)
end
local function readonly()
  error("Attempt to modify a readonly table", 2)
end
-- A run's globals start empty: the first read of a name copies it in (a library table as a
-- fresh copy), so a run pays only for the names it uses. `level` is the stack level of the
-- metamethod that asks, whose caller an error blames.
local function resolve(env, name, level)
  local value = pristine[name]
  if value == nil then missing(name, level + 1) end
  if libraries[name] then value = copy(value) end
  rawset(env, name, value)
  return value
end
local globals = {
  __index = function(env, name)
    local value = resolve(env, name, 2)
    return value
  end,
  __newindex = readonly,
  __metatable = false,
}
bridge.run = function(f, keys, argv)
  local env = {KEYS = keys, ARGV = argv}
  env._G = env
  setmetatable(env, globals)
  current = env
  setfenv(f, env)
  return xpcall(f, handler)
end

-- Functions. A library's code runs once per Lua state, in `library_env`: while it loads, it
-- sees only Redis's load-time API (`redis.register_function`, `redis.log`, the version);
-- afterwards its functions see the globals of the FCALL that runs them, fresh for each, and
-- no KEYS or ARGV (they get keys and arguments as parameters).
local lower, select = string.lower, select
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
  for key, value in pairs(named) do
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
local load_api = {register_function = register_function, log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE, LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING, REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
local load_redis = setmetatable({}, {
  __index = function(_, name)
    local value = load_api[name]
    if value == nil then missing(name, 2) end
    return value
  end,
  __newindex = readonly,
  __metatable = false,
})
local library_env = setmetatable({}, {
  __index = function(_, name)
    if registering then
      if name == 'redis' then return load_redis end
      missing(name, 2)
    end
    local value = rawget(current, name)
    if value == nil then value = resolve(current, name, 2) end
    return value
  end,
  __newindex = readonly,
  __metatable = false,
})
bridge.load = function(chunk)
  setfenv(chunk, library_env)
  registering = {}
  local ok, err = pcall(chunk)
  local registered = registering
  registering = nil
  if not ok then return false, err end
  return true, registered
end
bridge.call_function = function(f, keys, args)
  local env = {}
  env._G = env
  setmetatable(env, globals)
  current = env
  return xpcall(function() return f(keys, args) end, handler)
end
"#;

/// What EVAL or FCALL asks to run.
pub struct Invocation<'a> {
    pub target: Target<'a>,
    pub keys: &'a [Bytes],
    pub args: &'a [Bytes],
}

pub enum Target<'a> {
    /// An EVAL script: its SHA1, and its code after any shebang line.
    Script { sha: &'a str, body: &'a [u8] },
    /// A function of one of `libraries`.
    Function {
        name: &'a str,
        libraries: &'a Libraries,
    },
}

impl Target<'_> {
    /// How errors name what ran: the script's SHA1, or the function's name.
    fn name(&self) -> &str {
        match self {
            Target::Script { sha, .. } => sha,
            Target::Function { name, .. } => name,
        }
    }
}

/// What a running script asks of the server.
pub trait ScriptHost {
    /// Runs a command for `redis.call` and `redis.pcall`; `resp3` after `redis.setresp(3)`.
    fn call(&mut self, args: &[Bytes], resp3: bool) -> Reply;
    /// `redis.acl_check_cmd`: whether the caller's user may run `args`; `None` if no command
    /// has that name.
    fn allows(&mut self, args: &[Bytes]) -> Option<bool>;
}

/// A function a library registered as it loaded.
pub struct Registered {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: ScriptFlags,
    function: Function,
}

impl Registered {
    pub fn into_info(self) -> FunctionInfo {
        FunctionInfo {
            name: self.name,
            description: self.description,
            flags: self.flags,
        }
    }
}

pub struct Vm {
    lua: Lua,
    /// Where the prelude's `redis.call` finds the command runner of the current script.
    bridge: Table,
    /// Compiled scripts, by SHA1.
    scripts: HashMap<String, Function>,
    /// The functions of every library, by name.
    functions: HashMap<String, Function>,
    /// The generation of the libraries `functions` came from.
    libraries_generation: Option<u64>,
    pub(super) generation: u64,
}

impl Vm {
    pub fn new(generation: u64) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        // A script call leaves a few closures and tables behind, and most of what the heap
        // holds lives as long as the VM: collecting when the heap has grown 4x instead of 2x
        // took 8% off the server's CPU per EVALSHA of a one-INCR script.
        lua.gc_set_pause(400);
        let globals = lua.globals();
        for name in ["dofile", "loadfile", "print"] {
            globals.raw_set(name, Value::Nil)?;
        }
        globals.raw_set("redis", redis_api(&lua)?)?;
        globals.raw_set("cjson", cjson::library(&lua)?)?;
        libraries::open(&lua)?;
        let bridge = lua.create_table()?;
        // SAFETY: each follows the Lua C API's stack discipline (see `dispatch`).
        unsafe {
            bridge.raw_set("call", lua.create_c_function(redis_call)?)?;
            bridge.raw_set("pcall", lua.create_c_function(redis_pcall)?)?;
            bridge.raw_set("acl_check_cmd", lua.create_c_function(redis_acl_check_cmd)?)?;
        }
        bridge.raw_set(
            "where",
            lua.create_function(|lua, ()| Ok(script_line(lua).unzip()))?,
        )?;
        lua.load(PRELUDE)
            .set_name("=shale")
            .call::<()>(bridge.clone())?;
        for (key, name) in [(DISPATCH, "dispatch"), (ACL_DISPATCH, "acl_dispatch")] {
            let key = key.to_str().map_err(mlua::Error::external)?;
            lua.set_named_registry_value(key, bridge.raw_get::<Function>(name)?)?;
        }
        Ok(Vm {
            lua,
            bridge,
            scripts: HashMap::new(),
            functions: HashMap::new(),
            libraries_generation: None,
            generation,
        })
    }

    /// Runs a script or function; `host` runs the commands it issues. Returns the reply, and
    /// whether it is an error a command gave the script, which INFO has counted already.
    pub fn run(
        &mut self,
        invocation: &Invocation<'_>,
        running: &Arc<RunningScript>,
        host: &mut dyn ScriptHost,
    ) -> (Reply, bool) {
        // Set first, so that loading the libraries into this state can be killed too.
        let watched = running.clone();
        self.lua.set_hook(
            HookTriggers::new().every_nth_instruction(KILL_CHECK_INSTRUCTIONS),
            move |_, _| {
                if watched.is_killed() {
                    Err(mlua::Error::RuntimeError(KILLED.into()))
                } else {
                    Ok(VmState::Continue)
                }
            },
        );
        let (function, runner) = match &invocation.target {
            Target::Script { sha, body } => (self.script(sha, body), "run"),
            Target::Function { name, libraries } => {
                (self.library_function(name, libraries), "call_function")
            }
        };
        let function = match function {
            Ok(function) => function,
            Err(reply) => {
                self.lua.remove_hook();
                return (reply, false);
            }
        };
        let outcome = self.call(function, runner, invocation, host);
        self.lua.remove_hook();
        if running.is_killed() {
            return (Reply::Error(KILLED.into()), false);
        }
        outcome.unwrap_or_else(|err| (Reply::Error(format!("ERR {err}").into()), false))
    }

    fn script(&mut self, sha: &str, body: &[u8]) -> Result<Function, Reply> {
        if let Some(function) = self.scripts.get(sha) {
            return Ok(function.clone());
        }
        let function = self
            .lua
            .load(body)
            .set_name("@user_script")
            .into_function()
            .map_err(|err| {
                Reply::Error(
                    format!(
                        "ERR Error compiling script (new function): {}",
                        compile_error(err)
                    )
                    .into(),
                )
            })?;
        self.scripts.insert(sha.to_string(), function.clone());
        Ok(function)
    }

    /// A function of `libraries`, loading them all into this state first if it holds
    /// another generation of them.
    fn library_function(&mut self, name: &str, libraries: &Libraries) -> Result<Function, Reply> {
        if self.libraries_generation != Some(libraries.generation) {
            self.functions.clear();
            self.libraries_generation = None;
            for library in libraries.iter() {
                let registered = self.load_library(&library.body, None).map_err(|err| {
                    Reply::Error(format!("ERR library '{}': {err}", library.name).into())
                })?;
                for f in registered {
                    self.functions.insert(f.name, f.function);
                }
            }
            self.libraries_generation = Some(libraries.generation);
        }
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| Reply::Error("ERR Function not found".into()))
    }

    /// Runs a library's code (what follows its first line), which registers its functions;
    /// gives up after `timeout`. The error is Redis's FUNCTION LOAD error, without `ERR `.
    pub fn load_library(
        &mut self,
        body: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Vec<Registered>, String> {
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .into_function()
            .map_err(|err| format!("Error compiling function: {}", compile_error(err)))?;
        let timed_out = Arc::new(AtomicBool::new(false));
        // Without a time limit, the caller's hook (a kill check) stays in place.
        if let Some(timeout) = timeout {
            let started = Instant::now();
            let flag = timed_out.clone();
            self.lua.set_hook(
                HookTriggers::new().every_nth_instruction(LOAD_CHECK_INSTRUCTIONS),
                move |_, _| {
                    if started.elapsed() > timeout {
                        flag.store(true, Ordering::Relaxed);
                        return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
                    }
                    Ok(VmState::Continue)
                },
            );
        }
        let loaded = self
            .bridge
            .raw_get::<Function>("load")
            .and_then(|load| load.call::<(bool, Value)>(chunk));
        if timeout.is_some() {
            self.lua.remove_hook();
        }
        let registering = |message: String| format!("Error registering functions: {message}");
        if timed_out.load(Ordering::Relaxed) {
            return Err(registering("ERR FUNCTION LOAD timeout".into()));
        }
        match loaded {
            Ok((true, Value::Table(registered))) => {
                read_registered(&registered).map_err(|err| registering(format!("ERR {err}")))
            }
            Ok((_, value)) => Err(registering(error_message(&value))),
            Err(err) => Err(registering(format!("ERR {err}"))),
        }
    }

    fn call(
        &self,
        function: Function,
        runner: &str,
        invocation: &Invocation<'_>,
        host: &mut dyn ScriptHost,
    ) -> mlua::Result<(Reply, bool)> {
        let lua = &self.lua;
        let resp3 = Cell::new(false);
        let host = RefCell::new(host);
        let outcome = lua.scope(|scope| {
            let command = scope.create_function_mut(|lua, values: MultiValue| {
                let values: Vec<Value> = values.into_iter().collect();
                // `call` counts the errors of the commands it runs; these two it never sees.
                let (reply, counted) = match command_args(&values) {
                    None => (
                        Reply::Error(
                            "ERR Lua redis lib command arguments must be strings or integers"
                                .into(),
                        ),
                        false,
                    ),
                    Some(args) if args.is_empty() => (
                        Reply::Error(
                            "ERR Please specify at least one argument for this redis lib call"
                                .into(),
                        ),
                        false,
                    ),
                    Some(args) => (host.borrow_mut().call(&args, resp3.get()), true),
                };
                let value = reply_to_lua(lua, reply, resp3.get())?;
                if let Value::Table(error) = &value {
                    if error.raw_get::<Value>("err").is_ok_and(|e| !e.is_nil()) {
                        if counted {
                            mark_counted(error)?;
                        }
                        if let Some((source, line)) = script_line(lua) {
                            error.raw_set("source", source)?;
                            error.raw_set("line", line)?;
                        }
                    }
                }
                Ok(value)
            })?;
            let setresp = scope.create_function(|_, version: i64| match version {
                2 | 3 => {
                    resp3.set(version == 3);
                    Ok(())
                }
                _ => Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                )),
            })?;
            // Returns whether the user may run the command, or the error table to raise.
            let acl_check = scope.create_function(|lua, values: MultiValue| {
                let values: Vec<Value> = values.into_iter().collect();
                let refusal = match command_args(&values) {
                    None => "Lua redis lib command arguments must be strings or integers",
                    Some(args) if args.is_empty() => {
                        "Please specify at least one argument for this redis lib call"
                    }
                    Some(args) => match host.borrow_mut().allows(&args) {
                        Some(allowed) => return Ok((Some(allowed), None)),
                        None => "Invalid command passed to redis.acl_check_cmd()",
                    },
                };
                Ok((None, Some(error_table(lua, &format!("ERR {refusal}"))?)))
            })?;
            self.bridge.raw_set("command", command)?;
            self.bridge.raw_set("setresp", setresp)?;
            self.bridge.raw_set("acl_check", acl_check)?;
            let run: Function = self.bridge.raw_get(runner)?;
            let keys = strings(lua, invocation.keys)?;
            let args = strings(lua, invocation.args)?;
            let (ok, value): (bool, Value) = run.call((function, keys, args))?;
            let reply = if ok {
                lua_to_reply(&value, resp3.get(), REPLY_LIMIT)
            } else {
                script_error(&value, invocation.target.name())
            };
            Ok((reply, counted_error(&value)))
        });
        self.bridge.raw_set("command", Value::Nil)?;
        self.bridge.raw_set("setresp", Value::Nil)?;
        self.bridge.raw_set("acl_check", Value::Nil)?;
        outcome
    }
}

/// Where `redis_call` finds the prelude's `dispatch`, and `redis_acl_check_cmd` its
/// `acl_dispatch`, in the registry (which scripts cannot reach).
const DISPATCH: &CStr = c"shale.dispatch";
const ACL_DISPATCH: &CStr = c"shale.acl_dispatch";

/// `redis.call`: runs the command through `dispatch` and raises the error table it gets, as
/// `redis.pcall` returns it. A C function, because a Lua one would be replaced by the script's
/// `return redis.call(...)` tail call, and the script's line would be lost.
unsafe extern "C-unwind" fn redis_call(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    dispatch(state, true)
}

/// `redis.pcall`: as `redis.call`, returning the error table.
unsafe extern "C-unwind" fn redis_pcall(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    dispatch(state, false)
}

/// `redis.acl_check_cmd`: `acl_dispatch` answers whether the user may run the command, or
/// with the error to raise. A C function for the same reason as `redis_call`.
unsafe extern "C-unwind" fn redis_acl_check_cmd(
    state: *mut mlua::ffi::lua_State,
) -> std::os::raw::c_int {
    use mlua::ffi;
    let args = ffi::lua_gettop(state);
    ffi::lua_getfield(
        state,
        ffi::LUA_REGISTRYINDEX,
        c"shale.acl_dispatch".as_ptr(),
    );
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, args, 2);
    if ffi::lua_type(state, -1) != ffi::LUA_TNIL {
        ffi::lua_error(state);
    }
    ffi::lua_pop(state, 1);
    1
}

/// Calls `dispatch` with this call's arguments and leaves its one result.
///
/// `lua_call` and `lua_error` leave these frames by `longjmp`, which skips destructors: these
/// functions must hold nothing that has one (no `String`, `Vec`, guard), only the stack.
unsafe fn dispatch(state: *mut mlua::ffi::lua_State, raise: bool) -> std::os::raw::c_int {
    use mlua::ffi;
    let args = ffi::lua_gettop(state);
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, DISPATCH.as_ptr());
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, args, 1);
    if raise && ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
        // A raw read: a reply table has no metatable, but a script's own could.
        ffi::lua_pushstring(state, c"err".as_ptr());
        ffi::lua_rawget(state, -2);
        let failed = ffi::lua_type(state, -1) != ffi::LUA_TNIL;
        ffi::lua_pop(state, 1);
        if failed {
            ffi::lua_error(state);
        }
    }
    1
}

fn compile_error(err: mlua::Error) -> String {
    match err {
        mlua::Error::SyntaxError { message, .. } => message,
        other => other.to_string(),
    }
}

/// What `bridge.load` collected: one table per function, by name.
fn read_registered(registered: &Table) -> mlua::Result<Vec<Registered>> {
    let mut out = Vec::new();
    for pair in registered.pairs::<String, Table>() {
        let (name, f) = pair?;
        let mut flags = ScriptFlags::default();
        for flag in f
            .raw_get::<Table>("flags")?
            .sequence_values::<mlua::String>()
        {
            if let Some(flag) = ScriptFlags::named(&flag?.as_bytes()) {
                flags = flags.with(flag);
            }
        }
        let description = f
            .raw_get::<Option<mlua::String>>("description")?
            .map(|d| Bytes::copy_from_slice(&d.as_bytes()));
        out.push(Registered {
            name,
            description,
            flags,
            function: f.raw_get("callback")?,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The message of an error a library raised as it loaded, as Redis's
/// `luaExtractErrorInformation` reads it: an error table's `err`, or `ERR` and the text.
fn error_message(value: &Value) -> String {
    match value {
        Value::Table(table) => match table.raw_get::<Value>("err") {
            Ok(Value::String(err)) => err.to_string_lossy(),
            _ => "ERR execution failure".into(),
        },
        Value::String(text) => format!("ERR {}", text.to_string_lossy()),
        other => format!("ERR {}", other.type_name()),
    }
}

/// The script line that called into Rust: the innermost stack level in the user's script or
/// function, with its source. A `return redis.call(...)` is a Lua tail call, which leaves no
/// frame to find.
fn script_line(lua: &Lua) -> Option<(&'static str, i32)> {
    (1..32).find_map(|level| {
        let frame = lua.inspect_stack(level)?;
        let source = match frame.source().source.as_deref() {
            Some("@user_script") => "@user_script",
            Some("@user_function") => "@user_function",
            _ => return None,
        };
        Some((source, frame.curr_line()))
    })
}

/// The reply for a script that raised an error: its message, and where it happened.
fn script_error(value: &Value, name: &str) -> Reply {
    let Value::Table(table) = value else {
        return Reply::Error("ERR execution failure".into());
    };
    let field = |name: &str| match table.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        Ok(Value::Integer(n)) => Some(n.to_string()),
        Ok(Value::Number(n)) => Some((n as i64).to_string()),
        _ => None,
    };
    let message = field("err").unwrap_or_else(|| "ERR execution failure".into());
    let message = message.trim_start_matches('-').replace(['\r', '\n'], " ");
    match (field("source"), field("line")) {
        (Some(source), Some(line)) => {
            Reply::Error(format!("{message} script: {name}, on {source}:{line}.").into())
        }
        _ => Reply::Error(message.into()),
    }
}

fn strings(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        table.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(table)
}

/// The `redis` table, apart from `call`, `pcall` and `setresp`, which the prelude adds.
fn redis_api(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|_, text: mlua::String| Ok(sha1_hex(&text.as_bytes())))?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, text: mlua::String| {
            error_table(lua, &error_line(&text.to_string_lossy()))
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, text: mlua::String| {
            let table = lua.create_table()?;
            table.raw_set("ok", text)?;
            Ok(table)
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|_, (level, parts): (i64, MultiValue)| {
            let text: Vec<String> = parts
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy(),
                    other => format!("{other:?}"),
                })
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "script", "{text}"),
                1 | 2 => tracing::info!(target: "script", "{text}"),
                3 => tracing::warn!(target: "script", "{text}"),
                _ => return Err(mlua::Error::RuntimeError("Invalid debug level.".into())),
            }
            Ok(())
        })?,
    )?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    let number = REDIS_VERSION
        .split('.')
        .filter_map(|p| p.parse::<i64>().ok())
        .fold(0, |acc, p| acc * 256 + p);
    redis.raw_set("REDIS_VERSION_NUM", number)?;
    Ok(redis)
}
