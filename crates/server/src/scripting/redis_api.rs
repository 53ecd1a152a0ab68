//! The `redis` table scripts see, as Redis's `script_lua.c` makes it: C functions with its
//! argument checks and its errors, raised as Redis's error tables (`{err = "ERR ..."}`) that
//! the error handler gives the script's line.
//!
//! Those that need the server (`call`, `pcall`, `acl_check_cmd`, `setresp`) go through Lua
//! functions of the prelude found in the registry, which reach Rust closures of the current
//! run. As in `sandbox`, these functions leave by `longjmp` on an error, so they hold nothing
//! with a destructor.

use std::ffi::CStr;
use std::os::raw::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Table};

use super::sandbox::{push_error, raise};
use crate::REDIS_VERSION;

/// Where the C functions find the prelude's Lua side, in the registry.
pub const DISPATCH: &CStr = c"shale.dispatch";
pub const ACL_DISPATCH: &CStr = c"shale.acl_dispatch";
pub const SET_RESP: &CStr = c"shale.setresp";

/// The `redis` table, apart from what only the prelude can add (`register_function`).
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    let functions: [(&str, ffi::lua_CFunction); 8] = [
        ("call", call),
        ("pcall", redis_pcall),
        ("acl_check_cmd", acl_check_cmd),
        ("setresp", setresp),
        ("sha1hex", sha1hex),
        ("error_reply", error_reply),
        ("status_reply", status_reply),
        ("log", log),
    ];
    for (name, function) in functions {
        // SAFETY: each follows the Lua C API's stack discipline.
        redis.raw_set(name, unsafe { lua.create_c_function(function)? })?;
    }
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

/// `redis.call`: runs the command through the prelude's `dispatch` and raises the error table
/// it gets, as `redis.pcall` returns it. A C function, because a Lua one would be replaced by
/// the script's `return redis.call(...)` tail call, and the script's line would be lost.
unsafe extern "C-unwind" fn call(state: *mut lua_State) -> c_int {
    dispatch(state, true)
}

/// `redis.pcall`: as `redis.call`, returning the error table.
unsafe extern "C-unwind" fn redis_pcall(state: *mut lua_State) -> c_int {
    dispatch(state, false)
}

/// Calls `dispatch` with this call's arguments and leaves its one result.
unsafe fn dispatch(state: *mut lua_State, raise: bool) -> c_int {
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

/// `redis.acl_check_cmd`: the prelude's `acl_dispatch` answers whether the user may run the
/// command, or with the error to raise.
unsafe extern "C-unwind" fn acl_check_cmd(state: *mut lua_State) -> c_int {
    let args = ffi::lua_gettop(state);
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ACL_DISPATCH.as_ptr());
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, args, 2);
    if ffi::lua_type(state, -1) != ffi::LUA_TNIL {
        ffi::lua_error(state);
    }
    ffi::lua_pop(state, 1);
    1
}

unsafe extern "C-unwind" fn setresp(state: *mut lua_State) -> c_int {
    if ffi::lua_gettop(state) != 1 {
        return raise(state, c"ERR redis.setresp() requires one argument.");
    }
    // As C converts the double to an int.
    let resp = ffi::lua_tonumber(state, 1) as c_int;
    if resp != 2 && resp != 3 {
        return raise(state, c"ERR RESP version must be 2 or 3.");
    }
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, SET_RESP.as_ptr());
    ffi::lua_pushinteger(state, resp.into());
    ffi::lua_call(state, 1, 0);
    0
}

unsafe extern "C-unwind" fn sha1hex(state: *mut lua_State) -> c_int {
    if ffi::lua_gettop(state) != 1 {
        return raise(state, c"ERR wrong number of arguments");
    }
    // Anything but a string or a number hashes as the empty string, as in Redis.
    let digest = sha1_smol::Sha1::from(string_at(state, 1)).digest().bytes();
    let mut hex = [0u8; 40];
    for (i, byte) in digest.iter().enumerate() {
        hex[2 * i] = HEX[usize::from(byte >> 4)];
        hex[2 * i + 1] = HEX[usize::from(byte & 0xf)];
    }
    ffi::lua_pushlstring(state, hex.as_ptr().cast(), hex.len());
    1
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes of the string (or number, converted in place) at `index`, as far as C reads
/// them: up to the first NUL. Empty for other values.
unsafe fn c_string_at<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    let bytes = string_at(state, index);
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// The bytes of the string (or number, converted in place) at `index`; empty for other
/// values. They live as long as the value stays on the stack.
unsafe fn string_at<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    let mut len = 0;
    let text = ffi::lua_tolstring(state, index, &mut len);
    if text.is_null() {
        return &[];
    }
    std::slice::from_raw_parts(text.cast(), len)
}

/// `redis.error_reply`: an error table, with the code the text starts with (`-CODE msg`) or
/// `ERR`. Wrong arguments give an error table too, not an error.
unsafe extern "C-unwind" fn error_reply(state: *mut lua_State) -> c_int {
    if ffi::lua_gettop(state) != 1 || ffi::lua_type(state, 1) != ffi::LUA_TSTRING {
        push_error(state, c"ERR wrong number or type of arguments");
        return 1;
    }
    let text = c_string_at(state, 1);
    let text = text.strip_prefix(b"-").unwrap_or(text);
    // As Redis's `luaPushErrorBuff`.
    let (code, message) = match text.iter().position(|&b| b == b' ') {
        Some(space) => (&text[..space], &text[space + 1..]),
        None => (&b"ERR"[..], text),
    };
    let newline = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = message
        .iter()
        .position(|b| !newline(b))
        .unwrap_or(message.len());
    let end = message
        .iter()
        .rposition(|b| !newline(b))
        .map_or(start, |i| i + 1);
    let message = &message[start..end];
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushlstring(state, code.as_ptr().cast(), code.len());
    ffi::lua_pushstring(state, c" ".as_ptr());
    ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
    ffi::lua_concat(state, 3);
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    1
}

/// `redis.status_reply`: `{ok = text}`. Wrong arguments give an error table, not an error.
unsafe extern "C-unwind" fn status_reply(state: *mut lua_State) -> c_int {
    if ffi::lua_gettop(state) != 1 || ffi::lua_type(state, 1) != ffi::LUA_TSTRING {
        push_error(state, c"ERR wrong number or type of arguments");
        return 1;
    }
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushvalue(state, 1);
    ffi::lua_setfield(state, -2, c"ok".as_ptr());
    1
}

/// `redis.log(level, ...)`: the strings and numbers among the other arguments, joined by
/// spaces, at Redis's level (0 debug to 3 warning).
unsafe extern "C-unwind" fn log(state: *mut lua_State) -> c_int {
    let argc = ffi::lua_gettop(state);
    if argc < 2 {
        return raise(state, c"ERR redis.log() requires two arguments or more.");
    }
    if ffi::lua_isnumber(state, 1) == 0 {
        return raise(state, c"ERR First argument must be a number (log level).");
    }
    let level = ffi::lua_tonumber(state, 1) as c_int;
    if !(0..=3).contains(&level) {
        return raise(state, c"ERR Invalid debug level.");
    }
    // Numbers become strings in place first: nothing below can raise, so the text may own
    // memory.
    for i in 2..=argc {
        ffi::lua_tolstring(state, i, std::ptr::null_mut());
    }
    let mut text = Vec::new();
    for i in 2..=argc {
        if ffi::lua_isstring(state, i) != 0 {
            if i != 2 {
                text.push(b' ');
            }
            text.extend_from_slice(string_at(state, i));
        }
    }
    let text = String::from_utf8_lossy(&text);
    match level {
        0 => tracing::debug!(target: "script", "{text}"),
        1 | 2 => tracing::info!(target: "script", "{text}"),
        _ => tracing::warn!(target: "script", "{text}"),
    }
    0
}
