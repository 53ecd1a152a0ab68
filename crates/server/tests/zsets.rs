//! Sorted-set commands against a real server, with Redis's score and range syntax.

mod common;

use std::collections::BTreeMap;

use common::{fails, numbers, run, TestServer};
use redis::Value;

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn fill(con: &mut redis::Connection) {
    run::<()>(
        con,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
}

#[test]
fn zadd_options_and_scores() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con);
    assert_eq!(run::<i64>(&mut con, &["ZADD", "z", "2.5", "c"]), 0);
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "z", "c"]), "2.5");
    assert_eq!(
        run::<i64>(&mut con, &["ZADD", "z", "CH", "GT", "2", "c", "10", "a"]),
        1
    );
    let all: Vec<String> = run(&mut con, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
    assert_eq!(
        all,
        strs(&["b", "2", "c", "2.5", "d", "4", "e", "5", "a", "10"])
    );
    assert_eq!(
        run::<String>(&mut con, &["ZADD", "z", "INCR", "0.1", "b"]),
        "2.1000000000000001"
    );
    assert_eq!(run::<i64>(&mut con, &["ZADD", "z", "XX", "7", "nope"]), 0);
    assert_eq!(run::<Value>(&mut con, &["ZSCORE", "z", "nope"]), Value::Nil);
    assert_eq!(
        run::<Value>(&mut con, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        Value::Nil
    );
    assert_eq!(
        run::<i64>(&mut con, &["ZADD", "z", "LT", "CH", "1", "a", "1", "new"]),
        2
    );
    assert_eq!(
        run::<String>(&mut con, &["ZINCRBY", "z", "-1e308", "a"]),
        "-1e+308"
    );
    assert_eq!(
        run::<String>(&mut con, &["ZADD", "z", "INCR", "3.0e1", "f"]),
        "30"
    );
    run::<()>(
        &mut con,
        &["ZADD", "z", "-0.0", "g", "+inf", "top", "-inf", "bottom"],
    );
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "z", "g"]), "0");
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "z", "top"]), "inf");
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "z", "bottom"]), "-inf");
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "0", "1"]),
        strs(&["bottom", "a"])
    );
    assert_eq!(run::<i64>(&mut con, &["ZCARD", "z"]), 10);
    let scores: Vec<Option<String>> = run(&mut con, &["ZMSCORE", "z", "e", "nope", "f"]);
    assert_eq!(scores, vec![Some("5".into()), None, Some("30".into())]);

    assert_eq!(
        fails(&mut con, &["ZADD", "z", "nan", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "abc", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "1", "x", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "NX", "XX", "1", "x"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "NX", "GT", "1", "x"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "GT", "LT", "1", "x"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "INCR", "1", "x", "2", "y"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "INCR", "-inf", "top"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(
        fails(&mut con, &["ZINCRBY", "z", "x", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        fails(&mut con, &["ZADD", "z", "1"]),
        "ERR wrong number of arguments for 'zadd' command"
    );
}

/// Scores are read as Redis reads them: members' scores and weights refuse what `strtod`
/// finds out of range, range bounds (`zslParseRange`) accept whatever `strtod` accepts.
#[test]
fn scores_and_bounds_parse_like_strtod() {
    let server = TestServer::start();
    let mut con = server.client();
    for out_of_range in ["1e400", "-1e400", "1e-400"] {
        assert_eq!(
            fails(&mut con, &["ZADD", "z", out_of_range, "x"]),
            "ERR value is not a valid float"
        );
    }
    assert_eq!(run::<i64>(&mut con, &["ZADD", "z", "1e-310", "tiny"]), 1);
    assert_eq!(run::<i64>(&mut con, &["ZADD", "hex", "0x1p4", "h"]), 1);
    assert_eq!(
        run::<String>(&mut con, &["ZSCORE", "hex", "h"]),
        "16",
        "strtod reads hex floats"
    );
    assert_eq!(
        run::<String>(&mut con, &["ZSCORE", "z", "tiny"]),
        "9.9999999999999694e-311",
        "a subnormal is in range"
    );
    assert_eq!(
        run::<String>(&mut con, &["ZINCRBY", "z", "-0", "neg"]),
        "-0"
    );
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "z", "neg"]), "0");
    run::<()>(&mut con, &["ZADD", "z", "16", "high"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGEBYSCORE", "z", " 1", "+inf"]),
        strs(&["high"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGEBYSCORE", "z", "", "0"]),
        strs(&["neg"]),
        "an empty bound reads as 0"
    );
    assert_eq!(run::<i64>(&mut con, &["ZCOUNT", "z", "(", ""]), 0);
    assert_eq!(run::<i64>(&mut con, &["ZCOUNT", "z", "-1e400", "1e400"]), 3);
    assert_eq!(
        fails(&mut con, &["ZUNION", "1", "z", "WEIGHTS", "1e400"]),
        "ERR weight value is not a float"
    );
    run::<()>(&mut con, &["ZADD", "signs", "-3", "2", "0", "10", "3", "c"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZUNION", "1", "signs", "WEIGHTS", "0"]),
        strs(&["10", "2", "c"]),
        "-0 and 0 are one score, so members order them"
    );
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "1", "2", "REV", "WITHSCORES"]),
        strs(&["d", "4", "c", "3"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZREVRANGE", "z", "0", "1"]),
        strs(&["e", "d"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "-2", "-1"]),
        strs(&["d", "e"])
    );
    assert!(run::<Vec<String>>(&mut con, &["ZRANGE", "z", "3", "1"]).is_empty());
    assert!(run::<Vec<String>>(&mut con, &["ZRANGE", "nokey", "0", "-1"]).is_empty());
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGEBYSCORE", "z", "(1", "3", "WITHSCORES"]),
        strs(&["b", "2", "c", "3"])
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"]
        ),
        strs(&["b", "c"])
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &["ZREVRANGEBYSCORE", "z", "4", "(2", "LIMIT", "1", "5"]
        ),
        strs(&["c"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "4", "(2", "BYSCORE", "REV"]),
        strs(&["d", "c"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "(1", "(2", "BYSCORE"]),
        Vec::<String>::new()
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "5", "1", "BYSCORE"]),
        Vec::<String>::new()
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "-1", "2"]
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "3", "-1"]
        ),
        strs(&["d", "e"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "[b", "(d", "BYLEX"]),
        strs(&["b", "c"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGEBYLEX", "z", "-", "+", "LIMIT", "0", "2"]),
        strs(&["a", "b"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZREVRANGEBYLEX", "z", "+", "[d"]),
        strs(&["e", "d"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "+", "-", "BYLEX"]),
        Vec::<String>::new()
    );
    assert_eq!(run::<i64>(&mut con, &["ZCOUNT", "z", "-inf", "+inf"]), 5);
    assert_eq!(run::<i64>(&mut con, &["ZCOUNT", "z", "(1", "(5"]), 3);
    assert_eq!(run::<i64>(&mut con, &["ZLEXCOUNT", "z", "-", "+"]), 5);
    assert_eq!(run::<i64>(&mut con, &["ZLEXCOUNT", "z", "[b", "[c"]), 2);

    assert_eq!(
        fails(&mut con, &["ZRANGE", "z", "0", "-1", "LIMIT", "1", "2"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        fails(&mut con, &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(
        fails(&mut con, &["ZRANGEBYSCORE", "z", "a", "b"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        fails(&mut con, &["ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    for repeated in [
        &["REV", "REV"][..],
        &["BYSCORE", "BYLEX"],
        &["BYSCORE", "BYSCORE"],
    ] {
        let mut args = vec!["ZRANGE", "z", "0", "-1"];
        args.extend_from_slice(repeated);
        assert_eq!(fails(&mut con, &args), "ERR syntax error", "{repeated:?}");
    }
    assert_eq!(
        fails(&mut con, &["ZRANGEBYLEX", "z", "x", "y"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        fails(&mut con, &["ZCOUNT", "z", "(x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        fails(&mut con, &["ZRANGE", "z", "a", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["ZRANGE", "z", "0", "1", "BOGUS"]),
        "ERR syntax error"
    );
}

#[test]
fn rank_remove_pop() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con);
    assert_eq!(run::<i64>(&mut con, &["ZRANK", "z", "c"]), 2);
    assert_eq!(run::<i64>(&mut con, &["ZREVRANK", "z", "c"]), 2);
    assert_eq!(run::<i64>(&mut con, &["ZREVRANK", "z", "e"]), 0);
    assert_eq!(run::<Value>(&mut con, &["ZRANK", "z", "nope"]), Value::Nil);
    assert_eq!(
        run::<(i64, String)>(&mut con, &["ZRANK", "z", "d", "WITHSCORE"]),
        (3, "4".to_string())
    );
    assert_eq!(
        run::<Value>(&mut con, &["ZRANK", "z", "nope", "WITHSCORE"]),
        Value::Nil
    );
    assert_eq!(run::<i64>(&mut con, &["ZREM", "z", "a", "a", "nope"]), 1);
    assert_eq!(
        run::<i64>(&mut con, &["ZREMRANGEBYRANK", "z", "-1", "-1"]),
        1
    );
    assert_eq!(
        run::<i64>(&mut con, &["ZREMRANGEBYSCORE", "z", "-inf", "(3"]),
        1
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "0", "-1"]),
        strs(&["c", "d"])
    );
    assert_eq!(run::<i64>(&mut con, &["ZREMRANGEBYLEX", "z", "-", "(d"]), 1);
    fill(&mut con);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZPOPMIN", "z"]),
        strs(&["a", "1"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZPOPMAX", "z", "2"]),
        strs(&["e", "5", "d", "4"])
    );
    assert!(run::<Vec<String>>(&mut con, &["ZPOPMIN", "z", "0"]).is_empty());
    assert!(run::<Vec<String>>(&mut con, &["ZPOPMIN", "nokey"]).is_empty());
    for bad in ["-1", "x"] {
        assert_eq!(
            fails(&mut con, &["ZPOPMIN", "z", bad]),
            "ERR value is out of range, must be positive"
        );
    }
    assert_eq!(
        fails(&mut con, &["ZMPOP", "5", "z", "MAX"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["ZMPOP", "1", "z", "MID", "COUNT", "-1"]),
        "ERR syntax error",
        "the direction is read before the count"
    );
    assert_eq!(
        fails(
            &mut con,
            &["ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "2"]
        ),
        "ERR syntax error"
    );
    let popped: (String, Vec<(String, String)>) =
        run(&mut con, &["ZMPOP", "2", "nokey", "z", "MIN", "COUNT", "5"]);
    assert_eq!(
        popped,
        (
            "z".to_string(),
            vec![("b".into(), "2".into()), ("c".into(), "3".into())]
        )
    );
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "z"]),
        0,
        "an emptied sorted set disappears"
    );
    assert_eq!(
        run::<Value>(&mut con, &["ZMPOP", "1", "z", "MAX"]),
        Value::Nil
    );
    assert_eq!(
        fails(&mut con, &["ZMPOP", "1", "z", "UP"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["ZMPOP", "0", "z", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
}

#[test]
fn combine_sets() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["ZADD", "z1", "1", "a", "2", "b", "3", "c"]);
    run::<()>(&mut con, &["ZADD", "z2", "10", "b", "20", "c", "30", "d"]);
    run::<()>(&mut con, &["SADD", "plain", "a", "d"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZUNION", "2", "z1", "z2", "WITHSCORES"]),
        strs(&["a", "1", "b", "12", "c", "23", "d", "30"])
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &[
                "ZINTER",
                "2",
                "z1",
                "z2",
                "WEIGHTS",
                "2",
                "0.5",
                "AGGREGATE",
                "MAX",
                "WITHSCORES"
            ]
        ),
        strs(&["b", "5", "c", "10"])
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZDIFF", "2", "z1", "z2"]),
        strs(&["a"])
    );
    assert_eq!(
        run::<Vec<String>>(
            &mut con,
            &[
                "ZUNION",
                "2",
                "z1",
                "plain",
                "AGGREGATE",
                "MIN",
                "WITHSCORES"
            ]
        ),
        strs(&["a", "1", "d", "1", "b", "2", "c", "3"]),
        "sets count as score 1"
    );
    assert_eq!(
        run::<i64>(&mut con, &["ZUNIONSTORE", "out", "2", "z1", "z2"]),
        4
    );
    assert_eq!(run::<String>(&mut con, &["ZSCORE", "out", "c"]), "23");
    assert_eq!(
        run::<i64>(
            &mut con,
            &["ZINTERSTORE", "out", "2", "z1", "z2", "AGGREGATE", "MIN"]
        ),
        2
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "out", "0", "-1", "WITHSCORES"]),
        strs(&["b", "2", "c", "3"])
    );
    assert_eq!(
        run::<i64>(&mut con, &["ZDIFFSTORE", "out", "2", "z2", "z1"]),
        1
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "out", "0", "-1"]),
        strs(&["d"])
    );
    assert_eq!(
        run::<i64>(&mut con, &["ZINTERSTORE", "out", "2", "z1", "nokey"]),
        0
    );
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "out"]), 0);
    assert_eq!(run::<i64>(&mut con, &["ZINTERCARD", "2", "z1", "z2"]), 2);
    assert_eq!(
        run::<i64>(&mut con, &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        run::<i64>(
            &mut con,
            &["ZRANGESTORE", "out", "z2", "15", "+inf", "BYSCORE"]
        ),
        2
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "out", "0", "-1"]),
        strs(&["c", "d"])
    );
    run::<()>(&mut con, &["ZADD", "inf1", "+inf", "x"]);
    run::<()>(&mut con, &["ZADD", "inf2", "-inf", "x"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZUNION", "2", "inf1", "inf2", "WITHSCORES"]),
        strs(&["x", "0"]),
        "inf + -inf is 0"
    );

    assert_eq!(
        fails(&mut con, &["ZUNIONSTORE", "out", "0", "z1"]),
        "ERR at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        fails(&mut con, &["ZUNION", "0", "z1"]),
        "ERR at least 1 input key is needed for 'zunion' command"
    );
    assert_eq!(
        fails(&mut con, &["ZUNIONSTORE", "out", "3", "z1"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "x"]),
        "ERR weight value is not a float"
    );
    assert_eq!(
        fails(&mut con, &["ZUNION", "2", "z1", "z2", "AGGREGATE", "AVG"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["ZINTERCARD", "0", "z1"]),
        "ERR at least 1 input key is needed for 'zintercard' command"
    );
    assert_eq!(
        fails(&mut con, &["ZINTERCARD", "5", "z1"]),
        "ERR syntax error"
    );
    run::<()>(&mut con, &["SET", "str", "v"]);
    assert_eq!(
        fails(&mut con, &["ZUNION", "2", "z1", "str"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // Redis looks the keys up before it reads the options after them.
    for bad_options in [
        &["ZUNION", "2", "z1", "str", "WEIGHTS", "x"][..],
        &["ZINTERSTORE", "d", "2", "z1", "str", "AGGREGATE", "FOO"],
        &["ZINTERCARD", "1", "str", "WITHSCORES"],
    ] {
        assert_eq!(
            fails(&mut con, bad_options),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }
}

#[test]
fn random_members_and_scan() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con);
    assert_eq!(
        fails(
            &mut con,
            &["ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"]
        ),
        "ERR value is out of range"
    );
    // Redis 7.0 lets a rank range carry a LIMIT whose count is -1, and ignores it.
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "z", "0", "1", "LIMIT", "3", "-1"]),
        strs(&["a", "b"])
    );
    let one: String = run(&mut con, &["ZRANDMEMBER", "z"]);
    assert!(["a", "b", "c", "d", "e"].contains(&one.as_str()));
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANDMEMBER", "z", "10"]).len(),
        5
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANDMEMBER", "z", "-10"]).len(),
        10
    );
    let with_scores: Vec<String> = run(&mut con, &["ZRANDMEMBER", "z", "2", "WITHSCORES"]);
    assert_eq!(with_scores.len(), 4);
    assert_eq!(
        with_scores[1],
        ((with_scores[0].as_bytes()[0] - b'a' + 1) as i64).to_string()
    );
    assert_eq!(
        run::<Value>(&mut con, &["ZRANDMEMBER", "nokey"]),
        Value::Nil
    );
    let (cursor, items): (String, Vec<String>) =
        run(&mut con, &["ZSCAN", "z", "0", "COUNT", "100"]);
    assert_eq!(cursor, "0");
    assert_eq!(
        items,
        strs(&["a", "1", "b", "2", "c", "3", "d", "4", "e", "5"])
    );
    let (next, first): (String, Vec<String>) = run(&mut con, &["ZSCAN", "z", "0", "COUNT", "2"]);
    assert_eq!(first, strs(&["a", "1", "b", "2"]));
    let (_, rest): (String, Vec<String>) = run(&mut con, &["ZSCAN", "z", &next, "COUNT", "10"]);
    assert_eq!(rest, strs(&["c", "3", "d", "4", "e", "5"]));
}

#[test]
fn resp3_scores_are_doubles() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"ZADD z 1 a 2.5 b\r\n");
    raw.expect(b":2\r\n");
    raw.send(b"HELLO 3\r\nPING\r\n");
    raw.skip_through(b"+PONG\r\n");
    raw.send(b"ZSCORE z b\r\nZRANGE z 0 -1 WITHSCORES\r\nZPOPMIN z\r\nZMSCORE z b nope\r\n");
    raw.expect(b",2.5\r\n*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n,2.5\r\n_\r\n");
}

/// Removing the lowest members raises a floor that scans start from, and adding below it
/// lowers it: random adds, increments, removals from either end and reads of a sorted set in
/// records of its own, against a model.
#[test]
fn scans_start_at_the_floor_that_removals_from_the_bottom_raise() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut model: BTreeMap<String, f64> = BTreeMap::new();
    let mut zadd = vec!["ZADD".to_string(), "z".to_string()];
    for i in 0..300 {
        zadd.extend([(i % 97).to_string(), format!("m{i:04}")]);
        model.insert(format!("m{i:04}"), (i % 97) as f64);
    }
    let zadd: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(run::<i64>(&mut con, &zadd), 300);
    let sorted = |model: &BTreeMap<String, f64>| {
        let mut all: Vec<(f64, String)> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
        all.sort_by(|a, b| a.partial_cmp(b).unwrap());
        all
    };
    let mut next = numbers(11);
    for round in 0..400 {
        let all = sorted(&model);
        match next(10) {
            0..=3 => {
                let member = format!("m{:04}", next(400));
                let score = if next(10) == 0 {
                    f64::NEG_INFINITY
                } else {
                    next(150) as f64 - 50.0
                };
                let arg = if score.is_infinite() {
                    "-inf".to_string()
                } else {
                    score.to_string()
                };
                run::<i64>(&mut con, &["ZADD", "z", &arg, &member]);
                model.insert(member, score);
            }
            4 => {
                let member = format!("m{:04}", next(400));
                let delta = next(100) as f64 - 80.0;
                let old = model.get(&member).copied().unwrap_or(0.0);
                run::<f64>(&mut con, &["ZINCRBY", "z", &delta.to_string(), &member]);
                model.insert(member, old + delta);
            }
            5 => {
                let max = next(80) as f64 - 50.0;
                // From the bottom, or from a bound with or without members below it.
                let (min, exclusive) = match next(4) {
                    0 => (f64::NEG_INFINITY, false),
                    1 => (f64::NEG_INFINITY, true),
                    2 => (next(40) as f64 - 60.0, false),
                    _ => (next(40) as f64 - 60.0, true),
                };
                let min_arg = match (min.is_infinite(), exclusive) {
                    (true, false) => "-inf".to_string(),
                    (true, true) => "(-inf".to_string(),
                    (false, false) => min.to_string(),
                    (false, true) => format!("({min}"),
                };
                let doomed: Vec<String> = all
                    .iter()
                    .filter(|(s, _)| *s <= max && (*s > min || (!exclusive && *s == min)))
                    .map(|(_, m)| m.clone())
                    .collect();
                let removed: i64 = run(
                    &mut con,
                    &["ZREMRANGEBYSCORE", "z", &min_arg, &max.to_string()],
                );
                assert_eq!(removed, doomed.len() as i64, "round {round}");
                for member in doomed {
                    model.remove(&member);
                }
            }
            6 => {
                let count = next(6) as usize;
                let from_top = next(2) == 0;
                let (start, stop) = if from_top {
                    (format!("-{}", count + 1), "-1".to_string())
                } else {
                    ("0".to_string(), count.to_string())
                };
                run::<i64>(&mut con, &["ZREMRANGEBYRANK", "z", &start, &stop]);
                let doomed: Vec<&(f64, String)> = if from_top {
                    all.iter().rev().take(count + 1).collect()
                } else {
                    all.iter().take(count + 1).collect()
                };
                for (_, member) in doomed {
                    model.remove(member);
                }
            }
            7 => {
                let count = (next(4) + 1).to_string();
                let popped: Vec<String> = run(&mut con, &["ZPOPMIN", "z", &count]);
                for pair in popped.chunks(2) {
                    assert!(model.remove(&pair[0]).is_some(), "round {round}");
                }
            }
            8 => {
                let popped: Vec<String> = run(&mut con, &["ZPOPMAX", "z"]);
                for pair in popped.chunks(2) {
                    assert!(model.remove(&pair[0]).is_some(), "round {round}");
                }
            }
            _ => {
                let all = sorted(&model);
                if let Some((score, member)) = all.get(next(all.len().max(1) as u64) as usize) {
                    let rank: i64 = run(&mut con, &["ZRANK", "z", member]);
                    let expected = all.iter().position(|(s, m)| (s, m) == (score, member));
                    assert_eq!(Some(rank as usize), expected, "round {round}");
                }
                let count: i64 = run(&mut con, &["ZCOUNT", "z", "-inf", "10"]);
                assert_eq!(
                    count as usize,
                    all.iter().filter(|(s, _)| *s <= 10.0).count()
                );
            }
        }
        if round % 25 == 24 {
            let all = sorted(&model);
            let got: Vec<String> = run(&mut con, &["ZRANGE", "z", "0", "-1"]);
            let expected: Vec<String> = all.iter().map(|(_, m)| m.clone()).collect();
            assert_eq!(got, expected, "round {round}");
            let low: Vec<String> = run(&mut con, &["ZRANGEBYSCORE", "z", "-inf", "0"]);
            let expected_low: Vec<String> = all
                .iter()
                .filter(|(s, _)| *s <= 0.0)
                .map(|(_, m)| m.clone())
                .collect();
            assert_eq!(low, expected_low, "round {round}");
        }
    }
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "z"]),
        "skiplist",
        "the sorted set stayed in records"
    );
}
