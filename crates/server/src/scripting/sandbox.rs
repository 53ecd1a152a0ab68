//! Read-only tables as Redis 7.0 has them, on a stock Lua 5.1.
//!
//! Redis patches its Lua so that a table can be flagged read-only, and flags every table a
//! script can reach (the globals, `redis`, `string`, `cjson`, ...). Here each of those is a
//! proxy: an empty table whose metatable reads through to the real table, hidden from scripts,
//! and refuses writes. Lua's own functions that bypass metatables (`rawset`, `next`,
//! `setmetatable`, `table.insert`, ...) are replaced by the C functions below, which see
//! through proxies as Redis's see read-only tables: the same results, the same errors.
//!
//! Also here: Redis's replacement of `pcall`, `loadstring` and `load` as Redis's Lua has them
//! (source text only), and the instruction hook that stops a killed script or a library past
//! its load time.
//!
//! These functions are called by Lua and leave by `longjmp` when they raise an error, which
//! skips destructors: they hold nothing that has one, only the Lua stack.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Arc;
use std::time::Instant;

use mlua::ffi::{self, lua_State};
use mlua::{Function, IntoLuaMulti, Lua, Table};

use super::RunningScript;

const READONLY: &CStr = c"Attempt to modify a readonly table";
const KILLED: &CStr = c"ERR Script killed by user with SCRIPT KILL...";
const LOAD_TIMEOUT: &CStr = c"ERR FUNCTION LOAD timeout";
/// Where the hook finds its [`Watch`], in the registry.
const WATCH: &CStr = c"shale.watch";

/// What the instruction hook of a Lua state checks: set while a script runs or a library's
/// code loads, empty otherwise.
#[derive(Default)]
pub struct Watch {
    script: RefCell<Option<Arc<RunningScript>>>,
    /// When a loading library's time is up.
    deadline: Cell<Option<Instant>>,
}

/// Watching, until dropped.
pub struct Watching<'a>(&'a Watch);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.script.replace(None);
        self.0.deadline.set(None);
    }
}

impl Watch {
    /// Hooks `lua` to this watch every `instructions` Lua instructions; `lua` must not
    /// outlive it.
    pub fn install(&self, lua: &Lua, instructions: c_int) -> mlua::Result<()> {
        let pointer = self as *const Watch as *mut c_void;
        // SAFETY: sets a registry field and the hook of the state that runs scripts.
        unsafe {
            lua.exec_raw::<()>((), |state| {
                ffi::lua_pushlightuserdata(state, pointer);
                ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, WATCH.as_ptr());
                ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, instructions);
            })
        }
    }

    /// Stops the Lua code that runs from now on once `script` is killed or `deadline`
    /// passes, until the guard drops.
    pub fn start(
        &self,
        script: Option<Arc<RunningScript>>,
        deadline: Option<Instant>,
    ) -> Watching<'_> {
        self.script.replace(script);
        self.deadline.set(deadline);
        Watching(self)
    }

    fn stops(&self) -> Option<&'static CStr> {
        if self.script.borrow().as_ref().is_some_and(|s| s.is_killed()) {
            Some(KILLED)
        } else if self.deadline.get().is_some_and(|d| Instant::now() > d) {
            Some(LOAD_TIMEOUT)
        } else {
            None
        }
    }
}

/// Raises Redis's error once the script is killed or the load time is up, and from then on at
/// every line, so that a script cannot go on by catching the error with `pcall`.
unsafe extern "C-unwind" fn hook(state: *mut lua_State, _: *mut ffi::lua_Debug) {
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, WATCH.as_ptr());
    let watch = ffi::lua_touserdata(state, -1) as *const Watch;
    ffi::lua_pop(state, 1);
    // SAFETY: `install` set it, and the Watch outlives the state.
    let Some(watch) = watch.as_ref() else { return };
    let count = ffi::lua_gethookcount(state);
    match watch.stops() {
        Some(message) => {
            ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKLINE, count);
            raise(state, message);
        }
        // What a stopped run left: back to counting.
        None if ffi::lua_gethookmask(state) & ffi::LUA_MASKLINE != 0 => {
            ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, count);
        }
        None => {}
    }
}

/// Pushes Redis's error table, `{err = message}`.
pub unsafe fn push_error(state: *mut lua_State, message: &CStr) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushstring(state, message.as_ptr());
    ffi::lua_setfield(state, -2, c"err".as_ptr());
}

/// Raises Redis's error table, `{err = message}`.
pub unsafe fn raise(state: *mut lua_State, message: &CStr) -> c_int {
    push_error(state, message);
    ffi::lua_error(state)
}

/// The C functions the prelude installs, by name, and the tables they share with it:
/// `proxies` maps each proxy to its real table (or to a function that returns it, for a proxy
/// that watches its use), `reported` each proxy to what `getmetatable` answers for it, and
/// `loading.env` is the globals that chunks loaded by `loadstring` and `load` run in.
pub fn functions(lua: &Lua) -> mlua::Result<Table> {
    let functions = lua.create_table()?;
    let (proxies, reported, loading) = (
        lua.create_table()?,
        lua.create_table()?,
        lua.create_table()?,
    );
    functions.raw_set("proxies", &proxies)?;
    functions.raw_set("reported", &reported)?;
    functions.raw_set("loading", &loading)?;
    let (proxies, reported, loading) = (&proxies, &reported, &loading);
    let next = closure(lua, next, proxies)?;
    functions.raw_set("next", next.clone())?;
    functions.raw_set("pairs", closure(lua, pairs, next)?)?;
    functions.raw_set("rawget", closure(lua, rawget, proxies)?)?;
    functions.raw_set("rawset", closure(lua, rawset, proxies)?)?;
    functions.raw_set("setmetatable", closure(lua, setmetatable, proxies)?)?;
    functions.raw_set(
        "getmetatable",
        closure(lua, getmetatable, (proxies, reported))?,
    )?;
    functions.raw_set("insert", closure(lua, insert, proxies)?)?;
    functions.raw_set("loadstring", closure(lua, loadstring, loading)?)?;
    functions.raw_set("load", closure(lua, load, loading)?)?;
    // SAFETY: it follows the Lua C API's stack discipline.
    functions.raw_set("pcall", unsafe { lua.create_c_function(pcall)? })?;
    Ok(functions)
}

/// A C closure of `f` over `upvalues`.
fn closure(
    lua: &Lua,
    f: ffi::lua_CFunction,
    upvalues: impl IntoLuaMulti,
) -> mlua::Result<Function> {
    let upvalues = upvalues.into_lua_multi(lua)?;
    let count = upvalues.len() as c_int;
    // SAFETY: the upvalues are what `exec_raw` pushed; the closure replaces them.
    unsafe { lua.exec_raw(upvalues, |state| ffi::lua_pushcclosure(state, f, count)) }
}

/// Replaces the proxy at `index` (a positive index) by its real table, if it is one. The
/// proxy map is upvalue 1; it maps a proxy to its real table, or to a function that
/// returns it.
unsafe fn see_through(state: *mut lua_State, index: c_int) {
    ffi::lua_pushvalue(state, index);
    match ffi::lua_rawget(state, ffi::lua_upvalueindex(1)) {
        ffi::LUA_TNIL => ffi::lua_pop(state, 1),
        kind => {
            if kind == ffi::LUA_TFUNCTION {
                ffi::lua_call(state, 0, 1);
            }
            ffi::lua_replace(state, index);
        }
    }
}

unsafe fn is_proxy(state: *mut lua_State, index: c_int) -> bool {
    ffi::lua_pushvalue(state, index);
    ffi::lua_rawget(state, ffi::lua_upvalueindex(1));
    let proxy = ffi::lua_isnil(state, -1) == 0;
    ffi::lua_pop(state, 1);
    proxy
}

/// The error of a write to a read-only table from C, which Lua gives no position.
unsafe fn readonly(state: *mut lua_State) -> c_int {
    ffi::lua_pushstring(state, READONLY.as_ptr());
    ffi::lua_error(state)
}

unsafe extern "C-unwind" fn next(state: *mut lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(state, 2);
    see_through(state, 1);
    if ffi::lua_next(state, 1) != 0 {
        2
    } else {
        ffi::lua_pushnil(state);
        1
    }
}

/// Upvalue 1 is this module's `next`.
unsafe extern "C-unwind" fn pairs(state: *mut lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_pushvalue(state, 1);
    ffi::lua_pushnil(state);
    3
}

unsafe extern "C-unwind" fn rawget(state: *mut lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(state, 2);
    ffi::lua_settop(state, 2);
    see_through(state, 1);
    ffi::lua_rawget(state, 1);
    1
}

unsafe extern "C-unwind" fn rawset(state: *mut lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(state, 2);
    ffi::luaL_checkany(state, 3);
    ffi::lua_settop(state, 3);
    if is_proxy(state, 1) {
        return readonly(state);
    }
    ffi::lua_rawset(state, 1);
    1
}

unsafe extern "C-unwind" fn setmetatable(state: *mut lua_State) -> c_int {
    let kind = ffi::lua_type(state, 2);
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    ffi::luaL_argcheck(
        state,
        (kind == ffi::LUA_TNIL || kind == ffi::LUA_TTABLE) as c_int,
        2,
        c"nil or table expected".as_ptr(),
    );
    if is_proxy(state, 1) {
        return readonly(state);
    }
    if ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr()) != ffi::LUA_TNIL {
        return ffi::luaL_error(state, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_settop(state, 2);
    ffi::lua_setmetatable(state, 1);
    1
}

/// Upvalue 2 maps each proxy to the metatable reported for its real table.
unsafe extern "C-unwind" fn getmetatable(state: *mut lua_State) -> c_int {
    ffi::luaL_checkany(state, 1);
    if is_proxy(state, 1) {
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, ffi::lua_upvalueindex(2));
        return 1;
    }
    if ffi::lua_getmetatable(state, 1) == 0 {
        ffi::lua_pushnil(state);
        return 1;
    }
    ffi::luaL_getmetafield(state, 1, c"__metatable".as_ptr());
    1
}

/// `table.insert`, which writes raw.
unsafe extern "C-unwind" fn insert(state: *mut lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    let proxy = is_proxy(state, 1);
    let mut end = ffi::lua_objlen(state, 1) as c_int + 1;
    let position = match ffi::lua_gettop(state) {
        2 => end,
        3 => {
            let position = ffi::luaL_checkinteger(state, 2) as c_int;
            end = end.max(position);
            if proxy {
                return readonly(state);
            }
            for i in (position + 1..=end).rev() {
                ffi::lua_rawgeti(state, 1, (i - 1).into());
                ffi::lua_rawseti(state, 1, i.into());
            }
            position
        }
        _ => return ffi::luaL_error(state, c"wrong number of arguments to 'insert'".as_ptr()),
    };
    if proxy {
        return readonly(state);
    }
    ffi::lua_rawseti(state, 1, position.into());
    0
}

/// Redis's `pcall`: Lua's, except that an error table with an `err` field is answered by that
/// field, as `redis.call` errors are.
unsafe extern "C-unwind" fn pcall(state: *mut lua_State) -> c_int {
    let argc = ffi::lua_gettop(state);
    ffi::lua_pushboolean(state, 1);
    if argc == 0 {
        // Redis's then calls its own result placeholder, `true`, which fails.
        ffi::lua_pcall(state, 0, 0, 0);
        ffi::lua_pushboolean(state, 0);
        ffi::lua_insert(state, 1);
        return 2;
    }
    ffi::lua_insert(state, 1);
    if ffi::lua_pcall(state, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        ffi::lua_remove(state, 1);
        if ffi::lua_istable(state, -1) != 0 {
            ffi::lua_getfield(state, -1, c"err".as_ptr());
            if ffi::lua_isstring(state, -1) != 0 {
                ffi::lua_replace(state, -2);
            }
        }
        ffi::lua_pushboolean(state, 0);
        ffi::lua_insert(state, 1);
    }
    ffi::lua_gettop(state)
}

/// What `read` hands to `lua_load`: a space first, so that the text is parsed as text even if
/// it starts as a binary chunk does (Redis's Lua never loads those), then `text` (for
/// `loadstring`), or what the function at stack index 1 returns (for `load`).
struct Reader {
    space: bool,
    /// Null once handed over.
    text: *const c_char,
    len: usize,
    from_function: bool,
}

unsafe extern "C-unwind" fn read(
    state: *mut lua_State,
    data: *mut c_void,
    size: *mut usize,
) -> *const c_char {
    let reader = &mut *(data as *mut Reader);
    if reader.space {
        reader.space = false;
        *size = 1;
        return c" ".as_ptr();
    }
    if !reader.from_function {
        *size = std::mem::take(&mut reader.len);
        return std::mem::replace(&mut reader.text, ptr::null());
    }
    // As Lua's `generic_reader`.
    ffi::luaL_checkstack(state, 2, c"too many nested functions".as_ptr());
    ffi::lua_pushvalue(state, 1);
    ffi::lua_call(state, 0, 1);
    if ffi::lua_isnil(state, -1) != 0 {
        *size = 0;
        return ptr::null();
    }
    if ffi::lua_isstring(state, -1) == 0 {
        ffi::luaL_error(state, c"reader function must return a string".as_ptr());
        return ptr::null();
    }
    ffi::lua_replace(state, 3);
    ffi::lua_tolstring(state, 3, size)
}

/// What `loadstring` and `load` answer: the chunk, in the globals of the current run
/// (upvalue 1's `env`), or nil and the error.
unsafe fn loaded(state: *mut lua_State, status: c_int) -> c_int {
    if status != 0 {
        ffi::lua_pushnil(state);
        ffi::lua_insert(state, -2);
        return 2;
    }
    ffi::lua_getfield(state, ffi::lua_upvalueindex(1), c"env".as_ptr());
    if ffi::lua_istable(state, -1) != 0 {
        ffi::lua_setfenv(state, -2);
    } else {
        ffi::lua_pop(state, 1);
    }
    1
}

unsafe extern "C-unwind" fn loadstring(state: *mut lua_State) -> c_int {
    let mut len = 0;
    let text = ffi::luaL_checklstring(state, 1, &mut len);
    let name = ffi::luaL_optstring(state, 2, text);
    let mut reader = Reader {
        space: len > 0 && *text == 0x1b,
        text,
        len,
        from_function: false,
    };
    let data = &mut reader as *mut Reader as *mut c_void;
    loaded(state, ffi::lua_load(state, read, data, name))
}

unsafe extern "C-unwind" fn load(state: *mut lua_State) -> c_int {
    let name = ffi::luaL_optstring(state, 2, c"=(load)".as_ptr());
    ffi::luaL_checktype(state, 1, ffi::LUA_TFUNCTION);
    ffi::lua_settop(state, 3);
    let mut reader = Reader {
        space: true,
        text: ptr::null(),
        len: 0,
        from_function: true,
    };
    let data = &mut reader as *mut Reader as *mut c_void;
    loaded(state, ffi::lua_load(state, read, data, name))
}
