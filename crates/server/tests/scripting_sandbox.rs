//! The scripts' sandbox against a real server: read-only globals and libraries with Redis
//! 7.0's errors, Redis's own `cjson`, and Redis's errors from the `redis.*` API.

mod common;

use common::{fails, run, TestServer};

/// The error of `EVAL script 0`, with the script's SHA1 written `<sha>`.
fn eval_error(con: &mut redis::Connection, script: &str) -> String {
    let sha = sha1_smol::Sha1::from(script).digest().to_string();
    fails(con, &["EVAL", script, "0"]).replace(&sha, "<sha>")
}

const WRITE_IN_LUA: &str =
    "ERR user_script:1: Attempt to modify a readonly table script: <sha>, on @user_script:1.";
const WRITE_IN_C: &str = "ERR Attempt to modify a readonly table script: <sha>, on @user_script:1.";

#[test]
fn libraries_and_globals_are_read_only_with_redis_errors() {
    let server = TestServer::start();
    let mut con = server.client();
    for script in [
        "redis.setresp = nil",
        "redis.call = function() return 1 end",
        "cjson.encode = function() return 1 end",
        "cmsgpack.pack = nil",
        "bit.lshift = nil",
        "struct.pack = nil",
        "string.rep = nil",
        "math.floor = nil",
        "table.concat = nil",
        "coroutine.wrap = nil",
        "redis = function() return 1 end",
        "_G = {}",
        "leaked = 1",
        "_G.leaked = 1",
        "getmetatable(_G).__index = {}",
        "getmetatable('').__index = {}",
    ] {
        assert_eq!(eval_error(&mut con, script), WRITE_IN_LUA, "{script}");
    }
    // Lua's C functions write without a position, as they do to Redis's read-only tables.
    for script in [
        "setmetatable(_G, nil)",
        "setmetatable(redis, {})",
        "rawset(redis, 'call', nil)",
        "rawset(_G, 'leaked', 1)",
        "table.insert(cjson, 1)",
        "table.insert(string, 1, 'x')",
    ] {
        assert_eq!(eval_error(&mut con, script), WRITE_IN_C, "{script}");
    }
    assert_eq!(
        eval_error(&mut con, "local x = 1\nredis.call = nil"),
        "ERR user_script:2: Attempt to modify a readonly table script: <sha>, on @user_script:2."
    );
    for name in [
        "undefined",
        "loadfile",
        "dofile",
        "print",
        "setfenv",
        "getfenv",
    ] {
        assert_eq!(
            eval_error(&mut con, &format!("return {name}")),
            format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable \
                 '{name}' script: <sha>, on @user_script:1."
            )
        );
    }
    // What a script may do: read through them, and change its own tables and KEYS.
    let seen: Vec<String> = run(
        &mut con,
        &[
            "EVAL",
            "local n = 0 for _ in pairs(string) do n = n + 1 end\n\
             KEYS[1] = 'changed'\n\
             return {tostring(n > 10), tostring(rawget(redis, 'call') == redis.call),\n\
               tostring(next(math) ~= nil), tostring(getmetatable(redis)), #_G + #string,\n\
               type(getmetatable(_G)), tostring(getmetatable('').__index == string),\n\
               tostring(_G.redis == redis), KEYS[1], ('x'):upper()}",
            "1",
            "k",
        ],
    );
    assert_eq!(
        seen,
        ["true", "true", "true", "nil", "0", "table", "true", "true", "changed", "X"]
    );
}

#[test]
fn a_script_cannot_change_what_later_scripts_of_other_users_see() {
    let server = TestServer::start();
    let mut admin = server.client();
    for user in ["mallory", "alice"] {
        run::<()>(
            &mut admin,
            &["ACL", "SETUSER", user, "on", ">pw", "+@all", "~*"],
        );
    }
    let mut mallory = server.client();
    run::<()>(&mut mallory, &["AUTH", "mallory", "pw"]);
    let mut alice = server.client();
    run::<()>(&mut alice, &["AUTH", "alice", "pw"]);
    let tamper = "local attempts = {\n\
          function() redis.call = function() return 'intercepted' end end,\n\
          function() rawset(redis, 'pcall', nil) end,\n\
          function() rawset(_G, 'leaked', 1) end,\n\
          function() leaked = 1 end,\n\
          function() setmetatable(_G, nil) end,\n\
          function() getmetatable('').__index = {upper = function() return 'x' end} end,\n\
          function() string.upper = nil end,\n\
          function() table.insert(string, 'x') end,\n\
          function() rawset(getmetatable(''), '__index', nil) end,\n\
          function() loadstring('leaked = 1')() end,\n\
        }\n\
        local refused = 0\n\
        for _, attempt in ipairs(attempts) do\n\
          if not pcall(attempt) then refused = refused + 1 end\n\
        end\n\
        -- Allowed, and seen by this script only.\n\
        cjson.encode_number_precision(3)\n\
        cjson.encode_max_depth(1)\n\
        cjson.encode_keep_buffer(false)\n\
        for name, f in pairs(cjson) do if name == 'decode_max_depth' then f(1) end end\n\
        return {refused, cjson.encode(1/3)}";
    let check = "return table.concat({redis.call('PING').ok, redis.pcall('PING').ok,\n\
          string.upper('a'), ('b'):upper(), cjson.encode(1/3), cjson.encode({{{}}}),\n\
          tostring(rawget(_G, 'leaked')), tostring(#string),\n\
          tostring((pcall(cjson.decode, '[[1]]')))}, ' ')";
    for _ in 0..3 {
        let (refused, encoded): (i64, String) = run(&mut mallory, &["EVAL", tamper, "0"]);
        assert_eq!((refused, encoded.as_str()), (10, "0.333"));
        let seen: String = run(&mut alice, &["EVAL", check, "0"]);
        assert_eq!(seen, "PONG PONG A B 0.33333333333333 [[{}]] nil 0 true");
    }
}

#[test]
fn functions_see_read_only_globals_too() {
    let server = TestServer::start();
    let mut con = server.client();
    let library = "#!lua name=lib\n\
        redis.register_function('tamper', function() redis.call = nil end)\n\
        redis.register_function('assign', function() y = 1 end)\n\
        redis.register_function('read', function() return KEYS end)";
    run::<String>(&mut con, &["FUNCTION", "LOAD", library]);
    for (function, error) in [
        (
            "tamper",
            "ERR user_function:2: Attempt to modify a readonly table script: tamper, on \
             @user_function:2.",
        ),
        (
            "assign",
            "ERR user_function:3: Attempt to modify a readonly table script: assign, on \
             @user_function:3.",
        ),
        (
            "read",
            "ERR user_function:4: Script attempted to access nonexistent global variable 'KEYS' \
             script: read, on @user_function:4.",
        ),
    ] {
        assert_eq!(fails(&mut con, &["FCALL", function, "0"]), error);
    }
    for (line, error) in [
        ("x = 1", "Attempt to modify a readonly table"),
        ("redis.call = 1", "Attempt to modify a readonly table"),
        (
            "string.x = 1",
            "Script attempted to access nonexistent global variable 'string'",
        ),
    ] {
        let library = format!(
            "#!lua name=bad\n{line}\nredis.register_function('f', function() return 1 end)"
        );
        assert_eq!(
            fails(&mut con, &["FUNCTION", "LOAD", &library]),
            format!("ERR Error registering functions: ERR user_function:2: {error}")
        );
    }
}

/// Redis's "EVAL - JSON smoke test" (tests/unit/scripting.tcl), which needs Redis's own
/// lua-cjson: `encode_keep_buffer`, the depth and invalid number settings.
#[test]
fn redis_json_smoke_test_passes() {
    let server = TestServer::start();
    let mut con = server.client();
    let script = r#"
        local some_map = {
            s1="Some string",
            n1=100,
            a1={"Some","String","Array"},
            nil1=nil,
            b1=true,
            b2=false}
        local encoded = cjson.encode(some_map)
        local decoded = cjson.decode(encoded)
        assert(table.concat(some_map) == table.concat(decoded))

        cjson.encode_keep_buffer(false)
        encoded = cjson.encode(some_map)
        decoded = cjson.decode(encoded)
        assert(table.concat(some_map) == table.concat(decoded))

        -- Table with numeric keys
        local table1 = {one="one", [1]="one"}
        encoded = cjson.encode(table1)
        decoded = cjson.decode(encoded)
        assert(decoded["one"] == table1["one"])
        assert(decoded["1"] == table1[1])

        -- Array
        local array1 = {[1]="one", [2]="two"}
        encoded = cjson.encode(array1)
        decoded = cjson.decode(encoded)
        assert(table.concat(array1) == table.concat(decoded))

        -- Invalid keys
        local invalid_map = {}
        invalid_map[false] = "false"
        local ok, encoded = pcall(cjson.encode, invalid_map)
        assert(ok == false)

        -- Max depth
        cjson.encode_max_depth(1)
        ok, encoded = pcall(cjson.encode, some_map)
        assert(ok == false)

        cjson.decode_max_depth(1)
        ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
        assert(ok == false)

        -- Invalid numbers
        ok, encoded = pcall(cjson.encode, {num1=0/0})
        assert(ok == false)
        cjson.encode_invalid_numbers(true)
        ok, encoded = pcall(cjson.encode, {num1=0/0})
        assert(ok == true)

        -- Restore defaults
        cjson.decode_max_depth(1000)
        cjson.encode_max_depth(1000)
        cjson.encode_invalid_numbers(false)
    "#;
    let reply: Option<String> = run(&mut con, &["EVAL", script, "0"]);
    assert_eq!(reply, None);
    let decoded: String = run(
        &mut con,
        &[
            "EVAL",
            "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
            "0",
        ],
    );
    assert_eq!(decoded, "0 -5000 -1 0.0003 1023.2 0");
}

#[test]
fn redis_api_errors_are_redis_s_and_name_no_internal_chunk() {
    let server = TestServer::start();
    let mut con = server.client();
    for (script, error) in [
        ("return redis.sha1hex()", "ERR wrong number of arguments"),
        (
            "return redis.sha1hex(1, 2)",
            "ERR wrong number of arguments",
        ),
        (
            "redis.log()",
            "ERR redis.log() requires two arguments or more.",
        ),
        (
            "redis.log('x', 'y')",
            "ERR First argument must be a number (log level).",
        ),
        ("redis.log(9, 'y')", "ERR Invalid debug level."),
        (
            "redis.setresp()",
            "ERR redis.setresp() requires one argument.",
        ),
        ("redis.setresp(4)", "ERR RESP version must be 2 or 3."),
        (
            "redis.acl_check_cmd()",
            "ERR Please specify at least one argument for this redis lib call",
        ),
    ] {
        assert_eq!(
            eval_error(&mut con, script),
            format!("{error} script: <sha>, on @user_script:1.")
        );
        // Redis's `pcall` answers a raised error table with its message.
        let caught: Vec<Option<String>> = run(
            &mut con,
            &[
                "EVAL",
                &format!("return {{pcall(function() {script} end)}}"),
                "0",
            ],
        );
        assert_eq!(caught, [None, Some(error.to_string())], "{script}");
    }
    assert_eq!(
        eval_error(&mut con, "return loadstring()"),
        "ERR user_script:1: bad argument #1 to 'loadstring' (string expected, got no value) \
         script: <sha>, on @user_script:1."
    );
    assert_eq!(
        eval_error(&mut con, "return redis.error_reply()"),
        "ERR wrong number or type of arguments"
    );
    let digests: Vec<String> = run(
        &mut con,
        &["EVAL", "return {redis.sha1hex(''), redis.sha1hex(12)}", "0"],
    );
    assert_eq!(
        digests,
        [
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "7b52009b64fd0a2a49e6d8a939753077792b0554"
        ]
    );
    // A binary chunk is read as text, as Redis's Lua reads it.
    let refused: String = run(
        &mut con,
        &[
            "EVAL",
            "return select(2, loadstring(string.dump(function() return 1 end)))",
            "0",
        ],
    );
    assert_eq!(
        refused,
        "[string \"\u{1b}LuaQ\"]:1: unexpected symbol near 'char(27)'"
    );
}
