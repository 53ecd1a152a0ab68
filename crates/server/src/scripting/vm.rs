//! One Lua state: the sandbox, Redis's `redis.*` API, and running a script in it.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use shale_protocol::Reply;

use super::convert::{
    command_args, counted_error, error_line, error_table, lua_to_reply, mark_counted, reply_to_lua,
};
use super::{cjson, libraries, sha1_hex, RunningScript};
use crate::REDIS_VERSION;

/// A runaway script fails instead of taking the server's memory.
const MEMORY_LIMIT: usize = 1 << 30;
/// Bytes a script's reply may take as it is built; one table held many times by another
/// stands for a reply of any size.
const REPLY_LIMIT: usize = 512 << 20;
/// How often (in Lua instructions) a script checks whether SCRIPT KILL stopped it.
const KILL_CHECK_INSTRUCTIONS: u32 = 10_000;
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Written in Lua: `redis.call` raises the same error table that `redis.pcall` returns, the
/// error handler turns Lua errors into error tables with the script line, and every run gets
/// fresh copies of the globals and library tables. The Lua states are shared by all clients,
/// so nothing a script changes (`redis.call = ...`, `rawset(string, ...)`) may outlive it.
/// The prelude keeps its own references to the functions it uses for the same reason.
const PRELUDE: &str = r#"
local bridge = ...
local match, pairs, type, tostring, error, xpcall, setfenv, setmetatable, getmetatable, rawset =
  string.match, pairs, type, tostring, error, xpcall, setfenv, setmetatable, getmetatable, rawset
local command = function(...) return bridge.command(...) end
redis.call = function(...)
  local reply = command(...)
  if type(reply) == 'table' and reply.err ~= nil then error(reply) end
  return reply
end
redis.pcall = command
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
    local line = match(text, '^user_script:(%d+):')
    if line then err.source = '@user_script'; err.line = line end
  end
  return err
end
-- A run's globals start empty: the first read of a name copies it in (a library table as a
-- fresh copy), so a run pays only for the names it uses.
local globals = {
  __index = function(env, name)
    local value = pristine[name]
    if value == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    if libraries[name] then value = copy(value) end
    rawset(env, name, value)
    return value
  end,
  __newindex = function(_, name)
    error("Attempt to modify a readonly table: Script attempted to create global variable '" .. tostring(name) .. "'", 2)
  end,
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
"#;

/// What EVAL asks to run.
pub struct Invocation<'a> {
    pub sha: &'a str,
    pub source: &'a [u8],
    pub keys: &'a [Bytes],
    pub args: &'a [Bytes],
}

pub struct Vm {
    lua: Lua,
    /// Where the prelude's `redis.call` finds the command runner of the current script.
    bridge: Table,
    functions: HashMap<String, Function>,
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
        lua.load(PRELUDE)
            .set_name("=shale")
            .call::<()>(bridge.clone())?;
        Ok(Vm {
            lua,
            bridge,
            functions: HashMap::new(),
            generation,
        })
    }

    /// Runs a script; `call` runs the commands it issues. Returns the reply to EVAL, and
    /// whether it is an error a command gave the script, which INFO has counted already.
    pub fn run(
        &mut self,
        invocation: &Invocation<'_>,
        running: &Arc<RunningScript>,
        call: &mut dyn FnMut(&[Bytes], bool) -> Reply,
    ) -> (Reply, bool) {
        let function = match self.function(invocation) {
            Ok(function) => function,
            Err(reply) => return (reply, false),
        };
        let outcome = self.call(function, invocation, running, call);
        self.lua.remove_hook();
        if running.is_killed() {
            return (Reply::Error(KILLED.into()), false);
        }
        outcome.unwrap_or_else(|err| (Reply::Error(format!("ERR {err}").into()), false))
    }

    fn function(&mut self, invocation: &Invocation<'_>) -> Result<Function, Reply> {
        if let Some(function) = self.functions.get(invocation.sha) {
            return Ok(function.clone());
        }
        let function = self
            .lua
            .load(invocation.source)
            .set_name("@user_script")
            .into_function()
            .map_err(|err| {
                let message = match err {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                Reply::Error(format!("ERR Error compiling script (new function): {message}").into())
            })?;
        self.functions
            .insert(invocation.sha.to_string(), function.clone());
        Ok(function)
    }

    fn call(
        &self,
        function: Function,
        invocation: &Invocation<'_>,
        running: &Arc<RunningScript>,
        call: &mut dyn FnMut(&[Bytes], bool) -> Reply,
    ) -> mlua::Result<(Reply, bool)> {
        let lua = &self.lua;
        let watched = running.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(KILL_CHECK_INSTRUCTIONS),
            move |_, _| {
                if watched.is_killed() {
                    Err(mlua::Error::RuntimeError(KILLED.into()))
                } else {
                    Ok(VmState::Continue)
                }
            },
        );
        let resp3 = Cell::new(false);
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
                    Some(args) => (call(&args, resp3.get()), true),
                };
                let value = reply_to_lua(lua, reply, resp3.get())?;
                if let Value::Table(error) = &value {
                    if error.raw_get::<Value>("err").is_ok_and(|e| !e.is_nil()) {
                        if counted {
                            mark_counted(error)?;
                        }
                        if let Some(line) = script_line(lua) {
                            error.raw_set("source", "@user_script")?;
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
            self.bridge.raw_set("command", command)?;
            self.bridge.raw_set("setresp", setresp)?;
            let run: Function = self.bridge.raw_get("run")?;
            let keys = strings(lua, invocation.keys)?;
            let args = strings(lua, invocation.args)?;
            let (ok, value): (bool, Value) = run.call((function, keys, args))?;
            let reply = if ok {
                lua_to_reply(&value, resp3.get(), REPLY_LIMIT)
            } else {
                script_error(&value, invocation.sha)
            };
            Ok((reply, counted_error(&value)))
        });
        self.bridge.raw_set("command", Value::Nil)?;
        self.bridge.raw_set("setresp", Value::Nil)?;
        outcome
    }
}

/// The script line that called into Rust: the innermost stack level in the user's script.
/// A `return redis.call(...)` is a Lua tail call, which leaves no frame to find.
fn script_line(lua: &Lua) -> Option<i32> {
    (1..32).find_map(|level| {
        let frame = lua.inspect_stack(level)?;
        (frame.source().source.as_deref() == Some("@user_script")).then(|| frame.curr_line())
    })
}

/// The reply for a script that raised an error: its message, and where it happened.
fn script_error(value: &Value, sha: &str) -> Reply {
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
            Reply::Error(format!("{message} script: {sha}, on {source}:{line}.").into())
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
