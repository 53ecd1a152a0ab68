//! List commands against a real server.

mod common;

use common::{data_cache_misses_during, fails, numbers, run, TestServer};
use redis::Value;
use shale_storage::Cf;

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

/// A list created with a short element and given long ones: the long ones are kept apart from
/// their chunks, and every command sees the same list as with short ones only.
#[test]
fn long_elements_after_a_short_first_one() {
    let mut server = TestServer::start();
    let mut con = server.client();
    let long = |i: usize| format!("{i:04}{}", "x".repeat(10_000));
    let mut model: Vec<String> = vec!["s".into()];
    assert_eq!(run::<i64>(&mut con, &["RPUSH", "l", "s"]), 1);
    for i in 0..200 {
        let value = if i % 3 == 0 {
            format!("short{i}")
        } else {
            long(i)
        };
        if i % 2 == 0 {
            run::<i64>(&mut con, &["RPUSH", "l", &value]);
            model.push(value);
        } else {
            run::<i64>(&mut con, &["LPUSH", "l", &value]);
            model.insert(0, value);
        }
    }
    assert_eq!(range(&mut con, "l"), model);
    assert_eq!(run::<String>(&mut con, &["LINDEX", "l", "3"]), model[3]);
    assert_eq!(
        run::<String>(&mut con, &["LINDEX", "l", "-2"]),
        model[model.len() - 2]
    );
    // LSET between a long element and a short one, both ways.
    run::<()>(&mut con, &["LSET", "l", "1", "tiny"]);
    model[1] = "tiny".into();
    run::<()>(&mut con, &["LSET", "l", "0", &long(900)]);
    model[0] = long(900);
    assert_eq!(run::<String>(&mut con, &["LINDEX", "l", "0"]), model[0]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "0", "1"]),
        &model[..2]
    );
    // LPOS scans from either end past spilled elements.
    let target = model[150].clone();
    assert_eq!(run::<i64>(&mut con, &["LPOS", "l", &target]), 150);
    assert_eq!(
        run::<i64>(&mut con, &["LPOS", "l", &target, "RANK", "-1"]),
        150
    );
    // Pops take long elements from both ends; LMOVE moves one to a list of short elements.
    assert_eq!(run::<String>(&mut con, &["LPOP", "l"]), model.remove(0));
    assert_eq!(
        run::<String>(&mut con, &["RPOP", "l"]),
        model.pop().unwrap()
    );
    run::<i64>(&mut con, &["RPUSH", "other", "a"]);
    let moved: String = run(&mut con, &["LMOVE", "l", "other", "RIGHT", "LEFT"]);
    assert_eq!(moved, model.pop().unwrap());
    assert_eq!(range(&mut con, "other"), [moved.as_str(), "a"]);
    let rotated: String = run(&mut con, &["LMOVE", "l", "l", "LEFT", "RIGHT"]);
    assert_eq!(rotated, model[0]);
    model.rotate_left(1);
    // LINSERT and LREM rewrite the tail from the change on.
    let pivot = model[40].clone();
    assert_eq!(
        run::<i64>(&mut con, &["LINSERT", "l", "BEFORE", &pivot, &long(901)]),
        model.len() as i64 + 1
    );
    model.insert(40, long(901));
    let doomed = model[60].clone();
    assert_eq!(run::<i64>(&mut con, &["LREM", "l", "0", &doomed]), 1);
    model.remove(60);
    assert_eq!(range(&mut con, "l"), model);
    // LTRIM drops long elements at both ends without reading their chunks.
    run::<()>(&mut con, &["LTRIM", "l", "10", "-11"]);
    model = model[10..model.len() - 10].to_vec();
    assert_eq!(range(&mut con, "l"), model);
    // SORT ... STORE builds such a list in one go; COPY takes the long elements along.
    run::<i64>(&mut con, &["SORT", "l", "ALPHA", "STORE", "sorted"]);
    let mut sorted = model.clone();
    sorted.sort();
    assert_eq!(range(&mut con, "sorted"), sorted);
    assert_eq!(run::<i64>(&mut con, &["COPY", "l", "copy"]), 1);
    assert_eq!(range(&mut con, "copy"), model);
    drop(con);

    server.stop();
    let longest = server.record_lengths(Cf::Data).into_iter().max().unwrap();
    assert!(
        longest < 12_000,
        "a chunk of short-element positions held {longest} bytes"
    );
    server.start_again();
    let mut con = server.client();
    assert_eq!(range(&mut con, "l"), model);
    run::<()>(&mut con, &["LTRIM", "l", "1", "0"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "l"]), 0);
    // Pops and trims delete the records of the long elements they drop.
    run::<i64>(&mut con, &["RPUSH", "q", "s"]);
    for i in 0..5 {
        run::<i64>(&mut con, &["RPUSH", "q", &long(i)]);
    }
    assert_eq!(run::<String>(&mut con, &["RPOP", "q"]), long(4));
    run::<()>(&mut con, &["LTRIM", "q", "0", "1"]);
    assert_eq!(range(&mut con, "q"), ["s".to_string(), long(0)]);
    run::<i64>(&mut con, &["DEL", "sorted", "copy", "other"]);
    drop(con);
    server.stop();
    assert_eq!(
        server.count_records(Cf::Data),
        2,
        "q's chunk and its one long element"
    );
}

/// LINSERT and LREM move the elements on the shorter side of the change: inserts and removals
/// at every distance from both ends of a list of many chunks, some of whose elements are
/// spilled, against a model.
#[test]
fn linsert_and_lrem_move_the_shorter_side() {
    let server = TestServer::start();
    let mut con = server.client();
    let element = |i: u64| {
        if i % 7 == 3 {
            format!("{i}:{}", "L".repeat(300))
        } else {
            format!("e{}", i % 50)
        }
    };
    let mut model: Vec<String> = (0..2000).map(element).collect();
    let mut pipe = redis::pipe();
    for value in &model {
        pipe.cmd("RPUSH").arg("l").arg(value).ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    let mut next = numbers(7);
    for round in 0..120 {
        let pivot = model[next(model.len() as u64) as usize].clone();
        match round % 4 {
            0 | 1 => {
                let before = round % 4 == 0;
                let value = element(next(10_000) + 10_000);
                let found = model.iter().position(|v| *v == pivot).unwrap();
                let at = if before { found } else { found + 1 };
                model.insert(at, value.clone());
                let side = if before { "BEFORE" } else { "AFTER" };
                assert_eq!(
                    run::<i64>(&mut con, &["LINSERT", "l", side, &pivot, &value]),
                    model.len() as i64
                );
            }
            _ => {
                let count = next(5) as i64 - 2;
                let mut removed = 0;
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut indexes: Vec<usize> = (0..model.len()).collect();
                if count < 0 {
                    indexes.reverse();
                }
                let mut doomed: Vec<usize> = indexes
                    .into_iter()
                    .filter(|&i| model[i] == pivot)
                    .take(limit)
                    .collect();
                doomed.sort_unstable();
                for &i in doomed.iter().rev() {
                    model.remove(i);
                    removed += 1;
                }
                assert_eq!(
                    run::<i64>(&mut con, &["LREM", "l", &count.to_string(), &pivot]),
                    removed
                );
            }
        }
        if round % 20 == 19 {
            assert_eq!(range(&mut con, "l"), model, "round {round}");
        }
    }
    assert_eq!(range(&mut con, "l"), model);
    assert_eq!(
        run::<String>(&mut con, &["LINDEX", "l", "-1"]),
        *model.last().unwrap()
    );
}

/// LREM, LINSERT and LTRIM of a few positions delete the records they drop one by one, even
/// of a list with spilled elements: a range delete would empty the data cache of every key.
#[test]
fn short_drops_keep_other_keys_cached() {
    let server = TestServer::start();
    let mut con = server.client();
    let field = "v".repeat(3000);
    for i in 0..200 {
        run::<i64>(&mut con, &["HSET", "h", &format!("f{i}"), &field]);
    }
    assert_eq!(run::<String>(&mut con, &["HGET", "h", "f7"]), field);
    let long = |i: usize| format!("{i:03}{}", "L".repeat(300));
    run::<i64>(&mut con, &["RPUSH", "q", "s"]);
    for i in 0..300 {
        run::<i64>(&mut con, &["RPUSH", "q", &long(i)]);
    }
    run::<i64>(&mut con, &["LREM", "q", "1", &long(3)]);
    run::<i64>(&mut con, &["LREM", "q", "-1", &long(296)]);
    run::<i64>(&mut con, &["LINSERT", "q", "AFTER", &long(5), "x"]);
    run::<()>(&mut con, &["LTRIM", "q", "2", "-3"]);
    run::<()>(&mut con, &["LTRIM", "q", "70", "-70"]);
    let (read, misses) =
        data_cache_misses_during(&mut con, |c| run::<String>(c, &["HGET", "h", "f7"]));
    assert_eq!(read, field);
    assert_eq!(misses, 0, "h's field is still cached");
    let expected: Vec<String> = (0..300).filter(|&i| i != 3 && i != 296).map(long).collect();
    let mut expected: Vec<String> = [vec!["s".to_string()], expected].concat();
    expected.insert(
        expected.iter().position(|e| *e == long(5)).unwrap() + 1,
        "x".into(),
    );
    let trimmed = expected[2..expected.len() - 2].to_vec();
    assert_eq!(range(&mut con, "q"), trimmed[70..trimmed.len() - 69]);
}
