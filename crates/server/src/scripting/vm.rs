//! One Lua state: the sandbox, Redis's `redis.*` API, and running a script in it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use shale_protocol::Reply;

use super::convert::{
    command_args, counted_error, error_table, lua_to_reply, mark_counted, reply_to_lua,
};
use super::flags::ScriptFlags;
use super::functions::{FunctionInfo, Libraries};
use super::sandbox::{self, Watch};
use super::{libraries, redis_api, RunningScript};

/// A runaway script fails instead of taking the server's memory.
const MEMORY_LIMIT: usize = 1 << 30;
/// Bytes a script's reply may take as it is built; one table held many times by another
/// stands for a reply of any size.
const REPLY_LIMIT: usize = 512 << 20;
/// How often (in Lua instructions) a script checks whether SCRIPT KILL stopped it, and a
/// loading library its time limit.
const KILL_CHECK_INSTRUCTIONS: c_int = 10_000;
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Shale's side of the scripting API, in Lua: the read-only globals and libraries, the error
/// handler, and FUNCTION LOAD's `redis.register_function`.
const PRELUDE: &str = include_str!("prelude.lua");
/// The prelude's chunk name, which no error a script sees may name.
const PRELUDE_NAME: &str = "=shale";

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
    /// What the instruction hook of `lua` checks; dropped after it.
    watch: Box<Watch>,
    /// Where the prelude's `redis.call` finds the command runner of the current script.
    bridge: Table,
    /// The globals of EVAL scripts, which they are compiled in.
    eval_env: Table,
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
        lua.globals().raw_set("redis", redis_api::table(&lua)?)?;
        libraries::open(&lua)?;
        let bridge = lua.create_table()?;
        bridge.raw_set(
            "where",
            lua.create_function(|lua, ()| Ok(script_line(lua).unzip()))?,
        )?;
        let watch = Box::<Watch>::default();
        watch.install(&lua, KILL_CHECK_INSTRUCTIONS)?;
        let api = sandbox::functions(&lua)?;
        lua.load(PRELUDE)
            .set_name(PRELUDE_NAME)
            .call::<()>((bridge.clone(), api))?;
        for (key, name) in [
            (redis_api::DISPATCH, "dispatch"),
            (redis_api::ACL_DISPATCH, "acl_dispatch"),
            (redis_api::SET_RESP, "apply_resp"),
        ] {
            let key = key.to_str().map_err(mlua::Error::external)?;
            lua.set_named_registry_value(key, bridge.raw_get::<Function>(name)?)?;
        }
        let eval_env = bridge.raw_get("eval_env")?;
        Ok(Vm {
            lua,
            watch,
            bridge,
            eval_env,
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
        let (function, runner) = match &invocation.target {
            Target::Script { sha, body } => (self.script(sha, body), "run"),
            Target::Function { name, libraries } => (
                self.library_function(name, libraries, running),
                "call_function",
            ),
        };
        let outcome = match function {
            Ok(function) => {
                let _watching = self.watch.start(Some(running.clone()), None);
                self.call(function, runner, invocation, host)
            }
            Err(reply) => Ok((reply, false)),
        };
        let reset = self.reset();
        match outcome.and_then(|outcome| reset.map(|()| outcome)) {
            // Redis's error names the line it stopped at; a script that ended first has none.
            Ok((Reply::Error(line), _)) if running.is_killed() && line.starts_with(KILLED) => {
                (Reply::Error(line), false)
            }
            _ if running.is_killed() => (Reply::Error(KILLED.into()), false),
            Ok(outcome) => outcome,
            Err(err) => (Reply::Error(format!("ERR {err}").into()), false),
        }
    }

    /// Puts back cjson's settings if the run may have changed them.
    fn reset(&self) -> mlua::Result<()> {
        if self.bridge.raw_get::<bool>("cjson_changed")? {
            self.bridge.raw_get::<Function>("reset")?.call::<()>(())?;
        }
        Ok(())
    }

    fn script(&mut self, sha: &str, body: &[u8]) -> Result<Function, Reply> {
        if let Some(function) = self.scripts.get(sha) {
            return Ok(function.clone());
        }
        let function = self
            .lua
            .load(body)
            .set_name("@user_script")
            .set_environment(self.eval_env.clone())
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
    /// another generation of them; SCRIPT KILL and FUNCTION KILL may stop that as they stop
    /// `running`.
    fn library_function(
        &mut self,
        name: &str,
        libraries: &Libraries,
        running: &Arc<RunningScript>,
    ) -> Result<Function, Reply> {
        if self.libraries_generation != Some(libraries.generation) {
            self.functions.clear();
            self.libraries_generation = None;
            for library in libraries.iter() {
                let registered = self.load(&library.body, Some(running), None);
                let registered = registered.map_err(|err| {
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
        self.load(body, None, timeout.map(|timeout| Instant::now() + timeout))
    }

    /// As `load_library`; the library's code stops when `script` is killed or at `deadline`.
    fn load(
        &self,
        body: &[u8],
        script: Option<&Arc<RunningScript>>,
        deadline: Option<Instant>,
    ) -> Result<Vec<Registered>, String> {
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .into_function()
            .map_err(|err| format!("Error compiling function: {}", compile_error(err)))?;
        let registering = |message: String| format!("Error registering functions: {message}");
        let function = |name: &str| self.bridge.raw_get::<Function>(name);
        // Only the library's own code runs watched (see the prelude's `bridge.run`).
        let loaded = function("begin_load")
            .and_then(|begin| begin.call::<()>(&chunk))
            .and_then(|()| {
                let _watching = self.watch.start(script.cloned(), deadline);
                function("load")?.call::<(bool, Value)>(&chunk)
            });
        let ended = function("end_load").and_then(|end| end.call::<Option<Table>>(()));
        match (loaded, ended) {
            (Ok((true, _)), Ok(Some(registered))) => {
                read_registered(&registered).map_err(|err| registering(format!("ERR {err}")))
            }
            (Ok((false, error)), Ok(_)) => Err(registering(error_message(&error))),
            (Err(err), _) | (_, Err(err)) => Err(registering(format!("ERR {err}"))),
            (Ok(_), Ok(None)) => Err(registering("ERR execution failure".into())),
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
            // `redis.setresp` has checked the version.
            let setresp = scope.create_function(|_, version: i64| {
                resp3.set(version == 3);
                Ok(())
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

/// Where the script's code called into Rust or raised an error, as Redis's error handler
/// finds it: the innermost Lua function on the stack, this prelude's and C functions left
/// out, with its source (`@user_script`, `@user_function`, or the text of a chunk it loaded)
/// and line.
fn script_line(lua: &Lua) -> Option<(String, i32)> {
    (1..32)
        .map_while(|level| lua.inspect_stack(level))
        .find_map(|frame| {
            let source = frame.source();
            match source.source.as_deref() {
                _ if source.what == "C" => None,
                Some(PRELUDE_NAME) | None => None,
                Some(name) => Some((name.to_string(), frame.curr_line())),
            }
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
