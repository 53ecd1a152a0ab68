//! Builds the C side of number parsing and INCRBYFLOAT (`src/types/numbers.c`), and the Lua
//! libraries Redis bundles for scripts (`src/scripting/libraries/`: Redis 7.0.15's own
//! `lua_bit.c`, `lua_struct.c` and `lua_cmsgpack.c`, unchanged) against the vendored Lua.

fn main() {
    println!("cargo:rerun-if-changed=src/types/numbers.c");
    cc::Build::new()
        .file("src/types/numbers.c")
        .warnings(true)
        .compile("shale_numbers");

    let libraries = ["lua_bit.c", "lua_struct.c", "lua_cmsgpack.c"];
    let mut build = cc::Build::new();
    for file in libraries {
        let path = format!("src/scripting/libraries/{file}");
        println!("cargo:rerun-if-changed={path}");
        build.file(path);
    }
    if let Ok(include) = std::env::var("DEP_LUA_INCLUDE") {
        build.include(include);
    }
    // Redis builds them as C99 with its own warnings off; they are kept as Redis has them.
    build.warnings(false).compile("shale_lua_libraries");
}
