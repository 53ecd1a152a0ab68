//! Builds the C side of number parsing and INCRBYFLOAT (`src/types/numbers.c`), and the Lua
//! libraries Redis bundles for scripts (`src/scripting/libraries/`: Redis 7.0.15's own
//! `lua_bit.c`, `lua_struct.c`, `lua_cmsgpack.c` and `lua_cjson.c` with its `strbuf.c` and
//! `fpconv.c`, unchanged) against the vendored Lua.

use std::io;
use std::path::PathBuf;

fn main() -> io::Result<()> {
    println!("cargo:rerun-if-changed=src/types/numbers.c");
    cc::Build::new()
        .file("src/types/numbers.c")
        .warnings(true)
        .compile("shale_numbers");

    let libraries = [
        "lua_bit.c",
        "lua_struct.c",
        "lua_cmsgpack.c",
        "lua_cjson.c",
        "strbuf.c",
        "fpconv.c",
    ];
    let mut build = cc::Build::new();
    for file in libraries {
        let path = format!("src/scripting/libraries/{file}");
        println!("cargo:rerun-if-changed={path}");
        build.file(path);
    }
    for header in ["strbuf.h", "fpconv.h", "solarisfixes.h"] {
        println!("cargo:rerun-if-changed=src/scripting/libraries/{header}");
    }
    if let Ok(include) = std::env::var("DEP_LUA_INCLUDE") {
        build.include(include);
    }
    // `lua_cjson.c` includes `../../../src/solarisfixes.h`, as it sits in Redis's tree
    // (`deps/lua/src`): the same layout is made in OUT_DIR and searched.
    let out = std::env::var_os("OUT_DIR").ok_or_else(|| io::Error::other("OUT_DIR not set"))?;
    let tree = PathBuf::from(out).join("redis");
    let deps = tree.join("deps/lua/src");
    std::fs::create_dir_all(&deps)?;
    std::fs::create_dir_all(tree.join("src"))?;
    std::fs::copy(
        "src/scripting/libraries/solarisfixes.h",
        tree.join("src/solarisfixes.h"),
    )?;
    build.include(&deps);
    // As Redis builds them: their warnings off, and `cjson` registered as a global.
    build
        .define("ENABLE_CJSON_GLOBAL", None)
        .warnings(false)
        .compile("shale_lua_libraries");
    Ok(())
}
