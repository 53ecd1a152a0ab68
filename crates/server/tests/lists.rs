//! List commands against a real server.

mod common;

use common::{fails, run, TestServer};
use redis::Value;

fn range(con: &mut redis::Connection, key: &str) -> Vec<String> {
    run(con, &["LRANGE", key, "0", "-1"])
}

#[test]
fn push_pop_range_index() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(run::<i64>(&mut con, &["LPUSH", "l", "x", "y"]), 5);
    assert_eq!(range(&mut con, "l"), ["y", "x", "a", "b", "c"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "1", "2"]),
        ["x", "a"]
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "-2", "-1"]),
        ["b", "c"]
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "-100", "100"]).len(),
        5
    );
    assert!(run::<Vec<String>>(&mut con, &["LRANGE", "l", "3", "1"]).is_empty());
    assert!(run::<Vec<String>>(&mut con, &["LRANGE", "l", "10", "20"]).is_empty());
    assert!(run::<Vec<String>>(&mut con, &["LRANGE", "nokey", "0", "-1"]).is_empty());
    assert_eq!(run::<String>(&mut con, &["LINDEX", "l", "0"]), "y");
    assert_eq!(run::<String>(&mut con, &["LINDEX", "l", "-1"]), "c");
    assert_eq!(run::<Value>(&mut con, &["LINDEX", "l", "5"]), Value::Nil);
    assert_eq!(run::<Value>(&mut con, &["LINDEX", "l", "-6"]), Value::Nil);
    assert_eq!(
        run::<Value>(&mut con, &["LINDEX", "missing", "x"]),
        Value::Nil,
        "Redis looks the key up before it reads the index"
    );
    assert_eq!(
        fails(&mut con, &["LINDEX", "l", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(run::<i64>(&mut con, &["LLEN", "l"]), 5);
    assert_eq!(run::<i64>(&mut con, &["LLEN", "nokey"]), 0);

    assert_eq!(run::<String>(&mut con, &["LPOP", "l"]), "y");
    assert_eq!(run::<String>(&mut con, &["RPOP", "l"]), "c");
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LPOP", "l", "2"]),
        ["x", "a"]
    );
    assert_eq!(run::<Vec<String>>(&mut con, &["RPOP", "l", "5"]), ["b"]);
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "l"]),
        0,
        "an emptied list disappears"
    );
    assert_eq!(run::<Value>(&mut con, &["LPOP", "l"]), Value::Nil);
    assert_eq!(run::<Value>(&mut con, &["LPOP", "l", "2"]), Value::Nil);
    run::<()>(&mut con, &["RPUSH", "l", "a"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LPOP", "l", "0"]),
        Vec::<String>::new()
    );
    assert_eq!(
        fails(&mut con, &["LPOP", "l", "-1"]),
        "ERR value is out of range, must be positive"
    );

    assert_eq!(run::<i64>(&mut con, &["LPUSHX", "nokey", "a"]), 0);
    assert_eq!(run::<i64>(&mut con, &["RPUSHX", "nokey", "a"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "nokey"]), 0);
    assert_eq!(run::<i64>(&mut con, &["RPUSHX", "l", "b", "c"]), 3);
    assert_eq!(run::<i64>(&mut con, &["LPUSHX", "l", "z"]), 4);
    assert_eq!(range(&mut con, "l"), ["z", "a", "b", "c"]);
    assert_eq!(
        fails(&mut con, &["LPUSH", "l"]),
        "ERR wrong number of arguments for 'lpush' command"
    );
}

#[test]
fn lset_linsert_lrem_ltrim() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["RPUSH", "l", "a", "b", "c", "a", "d", "a"]);
    assert_eq!(run::<i64>(&mut con, &["LREM", "l", "-2", "a"]), 2);
    assert_eq!(range(&mut con, "l"), ["a", "b", "c", "d"]);
    assert_eq!(
        run::<i64>(&mut con, &["LINSERT", "l", "BEFORE", "c", "X"]),
        5
    );
    assert_eq!(
        run::<i64>(&mut con, &["LINSERT", "l", "AFTER", "d", "Y"]),
        6
    );
    assert_eq!(
        run::<i64>(&mut con, &["LINSERT", "l", "after", "nope", "Y"]),
        -1
    );
    assert_eq!(
        run::<i64>(&mut con, &["LINSERT", "nokey", "after", "a", "Y"]),
        0
    );
    assert_eq!(
        fails(&mut con, &["LINSERT", "l", "middle", "a", "b"]),
        "ERR syntax error"
    );
    assert_eq!(range(&mut con, "l"), ["a", "b", "X", "c", "d", "Y"]);
    run::<()>(&mut con, &["LSET", "l", "-1", "last"]);
    run::<()>(&mut con, &["LSET", "l", "0", "first"]);
    assert_eq!(range(&mut con, "l"), ["first", "b", "X", "c", "d", "last"]);
    assert_eq!(
        fails(&mut con, &["LSET", "nokey", "0", "x"]),
        "ERR no such key"
    );
    assert_eq!(
        fails(&mut con, &["LSET", "nokey", "x", "x"]),
        "ERR no such key",
        "Redis looks the key up before it reads the index"
    );
    assert_eq!(
        fails(&mut con, &["LSET", "l", "100", "x"]),
        "ERR index out of range"
    );
    run::<()>(&mut con, &["RPUSH", "r", "x", "y", "x", "x"]);
    assert_eq!(run::<i64>(&mut con, &["LREM", "r", "0", "x"]), 3);
    assert_eq!(range(&mut con, "r"), ["y"]);
    assert_eq!(run::<i64>(&mut con, &["LREM", "r", "1", "nothing"]), 0);
    assert_eq!(run::<i64>(&mut con, &["LREM", "r", "1", "y"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "r"]), 0);

    assert_eq!(run::<String>(&mut con, &["LTRIM", "l", "1", "-2"]), "OK");
    assert_eq!(range(&mut con, "l"), ["b", "X", "c", "d"]);
    run::<()>(&mut con, &["LTRIM", "l", "-2", "100"]);
    assert_eq!(range(&mut con, "l"), ["c", "d"]);
    run::<()>(&mut con, &["RPUSH", "l", "e"]);
    run::<()>(&mut con, &["LPUSH", "l", "b"]);
    assert_eq!(
        range(&mut con, "l"),
        ["b", "c", "d", "e"],
        "pushes after a trim land at the new ends"
    );
    run::<()>(&mut con, &["LTRIM", "l", "5", "1"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "l"]), 0);
}

#[test]
fn lpos_options() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"],
    );
    assert_eq!(run::<i64>(&mut con, &["LPOS", "p", "c"]), 2);
    assert_eq!(run::<i64>(&mut con, &["LPOS", "p", "c", "RANK", "2"]), 6);
    assert_eq!(run::<i64>(&mut con, &["LPOS", "p", "c", "RANK", "-1"]), 7);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LPOS", "p", "c", "COUNT", "0"]),
        [2, 6, 7]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LPOS", "p", "c", "RANK", "-1", "COUNT", "2"]),
        [7, 6]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LPOS", "p", "c", "COUNT", "0", "MAXLEN", "4"]),
        [2]
    );
    assert_eq!(run::<Value>(&mut con, &["LPOS", "p", "zz"]), Value::Nil);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LPOS", "p", "zz", "COUNT", "1"]),
        Vec::<i64>::new()
    );
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "COUNT", "-1"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "MAXLEN", "-1"]),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "BOGUS", "1"]),
        "ERR syntax error"
    );
    // Like Redis: the option name first, then its value, with the option's own message.
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "BOGUS", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["LPOS", "p", "c", "MAXLEN", "x"]),
        "ERR MAXLEN can't be negative"
    );
}

#[test]
fn lmove_rpoplpush_lmpop() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["RPUSH", "src", "a", "b", "c"]);
    assert_eq!(
        run::<String>(&mut con, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]),
        "a"
    );
    assert_eq!(run::<String>(&mut con, &["RPOPLPUSH", "src", "dst"]), "c");
    assert_eq!(range(&mut con, "dst"), ["c", "a"]);
    assert_eq!(
        run::<String>(&mut con, &["LMOVE", "dst", "dst", "LEFT", "RIGHT"]),
        "c",
        "rotation"
    );
    assert_eq!(range(&mut con, "dst"), ["a", "c"]);
    assert_eq!(
        run::<Value>(&mut con, &["LMOVE", "nokey", "dst", "LEFT", "LEFT"]),
        Value::Nil
    );
    assert_eq!(
        fails(&mut con, &["LMOVE", "src", "dst", "UP", "LEFT"]),
        "ERR syntax error"
    );
    run::<()>(&mut con, &["SET", "str", "v"]);
    assert_eq!(
        fails(&mut con, &["LMOVE", "src", "str", "LEFT", "LEFT"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(range(&mut con, "src"), ["b"], "nothing moved on error");
    assert_eq!(run::<String>(&mut con, &["RPOPLPUSH", "src", "dst"]), "b");
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "src"]), 0);

    let popped: (String, Vec<String>) = run(
        &mut con,
        &["LMPOP", "2", "nokey", "dst", "RIGHT", "COUNT", "2"],
    );
    assert_eq!(
        popped,
        ("dst".to_string(), vec!["c".to_string(), "a".to_string()])
    );
    let last: (String, Vec<String>) = run(&mut con, &["LMPOP", "1", "dst", "LEFT"]);
    assert_eq!(last, ("dst".to_string(), vec!["b".to_string()]));
    assert_eq!(
        run::<Value>(&mut con, &["LMPOP", "1", "dst", "LEFT"]),
        Value::Nil
    );
    assert_eq!(
        fails(&mut con, &["LMPOP", "3", "dst", "dst"]),
        "ERR syntax error",
        "keys that leave no room for the direction"
    );
    assert_eq!(
        fails(&mut con, &["LMPOP", "0", "dst", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        fails(&mut con, &["LMPOP", "1", "dst", "MIDDLE"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["LMPOP", "1", "dst", "LEFT", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
}

#[test]
fn long_lists_push_and_pop_at_both_ends() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.cmd(if i % 2 == 0 { "RPUSH" } else { "LPUSH" })
            .arg("big")
            .arg(i)
            .ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    assert_eq!(run::<i64>(&mut con, &["LLEN", "big"]), 5000);
    assert_eq!(run::<i64>(&mut con, &["LINDEX", "big", "0"]), 4999);
    assert_eq!(run::<i64>(&mut con, &["LINDEX", "big", "-1"]), 4998);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LRANGE", "big", "2499", "2500"]),
        [1, 0]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["LPOP", "big", "3"]),
        [4999, 4997, 4995]
    );
}
