//! Geo commands against a real server, checked against a real Redis given the same points:
//! sets large enough to live in records of their own, searches of every shape and option, the
//! RESP3 form of coordinates, and a restart. (Small sets and the error replies are compared in
//! scripts/compare/geo.txt; random commands in the fuzzer.)

mod common;

use common::{numbers, run, RedisServer, TestServer};
use redis::Value;

/// `GEOADD key lon lat p0 ...` of `n` points scattered over about 100 km around (10, 45),
/// with every fifth one on a shared spot so that distances tie.
fn scattered(key: &str, n: u64) -> Vec<String> {
    let mut next = numbers(7);
    let mut args = vec!["GEOADD".to_string(), key.to_string()];
    for i in 0..n {
        let (lon, lat) = if i % 5 == 0 {
            (10.25, 45.25)
        } else {
            (
                10.0 + next(1_000_000) as f64 / 1_000_000.0,
                45.0 + next(1_000_000) as f64 / 1_000_000.0,
            )
        };
        args.extend([lon.to_string(), lat.to_string(), format!("p{i}")]);
    }
    args
}

fn searches() -> Vec<Vec<&'static str>> {
    [
        "GEOSEARCH g FROMLONLAT 10.25 45.25 BYRADIUS 5 km",
        "GEOSEARCH g FROMLONLAT 10.25 45.25 BYRADIUS 5 km ASC WITHDIST",
        "GEOSEARCH g FROMLONLAT 10.25 45.25 BYRADIUS 30 km COUNT 50 WITHDIST WITHHASH",
        "GEOSEARCH g FROMLONLAT 10.25 45.25 BYRADIUS 30 km COUNT 50 DESC WITHCOORD",
        "GEOSEARCH g FROMLONLAT 10.5 45.5 BYRADIUS 200 km COUNT 10 ANY",
        "GEOSEARCH g FROMMEMBER p1 BYBOX 20 10 km ASC WITHDIST",
        "GEOSEARCH g FROMMEMBER p3 BYBOX 50 80 mi COUNT 300",
        "GEORADIUS g 10.1 45.9 12000 m WITHDIST",
        "GEORADIUSBYMEMBER_RO g p0 2 km WITHCOORD COUNT 100",
        "GEORADIUS_RO g 10.7 45.2 40000 ft DESC",
        "GEOPOS g p0 p1 p2 nosuch",
        "GEOHASH g p0 p1 p2 nosuch",
        "GEODIST g p1 p2 km",
    ]
    .iter()
    .map(|s| s.split(' ').collect())
    .collect()
}

#[test]
fn searches_of_a_large_set_match_redis_and_survive_a_restart() {
    let redis = RedisServer::start(&[]);
    let mut server = TestServer::start();
    let (mut theirs, mut ours) = (redis.client(), server.client());
    let add = scattered("g", 3000);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    assert_eq!(run::<i64>(&mut theirs, &add), run::<i64>(&mut ours, &add));
    let expected: Vec<Value> = searches().iter().map(|s| run(&mut theirs, s)).collect();
    for (search, reply) in searches().iter().zip(&expected) {
        assert_eq!(&run::<Value>(&mut ours, search), reply, "{search:?}");
        if let Value::Array(items) = reply {
            assert!(!items.is_empty(), "{search:?} should find points");
        }
    }
    // Stored results, by position and by distance.
    for store in [
        "GEOSEARCHSTORE s g FROMLONLAT 10.25 45.25 BYRADIUS 10 km STOREDIST",
        "GEORADIUS g 10.25 45.25 10 km COUNT 40 STORE s2",
    ] {
        let store: Vec<&str> = store.split(' ').collect();
        assert_eq!(
            run::<i64>(&mut ours, &store),
            run::<i64>(&mut theirs, &store)
        );
    }
    for key in ["s", "s2"] {
        let range = ["ZRANGE", key, "0", "-1", "WITHSCORES"];
        assert_eq!(
            run::<Value>(&mut ours, &range),
            run::<Value>(&mut theirs, &range)
        );
    }

    server.restart();
    let mut ours = server.client();
    for (search, reply) in searches().iter().zip(&expected) {
        assert_eq!(
            &run::<Value>(&mut ours, search),
            reply,
            "after a restart: {search:?}"
        );
    }
}

#[test]
fn coordinates_are_doubles_in_resp3_and_strings_in_resp2() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<i64>(
        &mut con,
        &["GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"],
    );
    assert_eq!(
        run::<Vec<Vec<String>>>(&mut con, &["GEOPOS", "Sicily", "Palermo"]),
        vec![vec!["13.36138933897018433", "38.11555639549629859"]]
    );
    let mut raw = server.raw();
    raw.command(&["HELLO", "3"]);
    raw.skip_through(b"proto");
    raw.command(&["PING"]);
    raw.skip_through(b"+PONG\r\n");
    raw.command(&["GEOPOS", "Sicily", "Palermo", "nosuch"]);
    raw.expect(b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n");
    raw.command(&[
        "GEOSEARCH",
        "Sicily",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
        "WITHDIST",
        "WITHHASH",
    ]);
    raw.expect(b"*1\r\n*3\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n");
}
