//! The C libraries Redis bundles for scripts, `cjson`, `struct`, `cmsgpack` and `bit`: Redis
//! 7.0.15's own sources beside this file, built by the crate's build script against the
//! vendored Lua, so scripts get Redis's JSON, packing, MessagePack and bit operations to the
//! byte.

use std::os::raw::c_int;

use mlua::ffi::lua_State;
use mlua::Lua;

extern "C-unwind" {
    fn luaopen_cjson(state: *mut lua_State) -> c_int;
    fn luaopen_struct(state: *mut lua_State) -> c_int;
    fn luaopen_cmsgpack(state: *mut lua_State) -> c_int;
    fn luaopen_bit(state: *mut lua_State) -> c_int;
}

/// Opens each library as Redis's `luaLoadLib` does: its opener, called with its name,
/// registers it as a global.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let openers: [(&str, mlua::ffi::lua_CFunction); 4] = [
        ("cjson", luaopen_cjson),
        ("struct", luaopen_struct),
        ("cmsgpack", luaopen_cmsgpack),
        ("bit", luaopen_bit),
    ];
    for (name, opener) in openers {
        // SAFETY: each opener is a Lua 5.1 C function compiled against this Lua's headers;
        // it only registers its table.
        let open = unsafe { lua.create_c_function(opener)? };
        open.call::<()>(name)?;
    }
    Ok(())
}
