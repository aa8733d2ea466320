//! Every command's replies and errors, byte for byte as Redis 7 sends them,
//! over a real connection to the server binary.

mod common;

use common::{Server, Value};
use Value::{Int, Nil};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--appendfsync", "no"]);
    (dir, server)
}

fn ok() -> Value {
    Value::status("OK")
}

fn b(s: &str) -> Value {
    Value::bulk(s)
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";

#[test]
fn strings() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(c.cmd("GET missing"), Nil);
    assert_eq!(c.cmd("SET k v1"), ok());
    assert_eq!(c.cmd("GET k"), b("v1"));
    assert_eq!(c.cmd("SET k v2 NX"), Nil);
    assert_eq!(c.cmd("SET k v2 XX"), ok());
    assert_eq!(c.cmd("SET new v XX"), Nil);
    assert_eq!(c.cmd("GET new"), Nil);
    assert_eq!(c.cmd("SET k v3 GET"), b("v2"));
    assert_eq!(c.cmd("SET fresh v NX GET"), Nil);
    assert_eq!(c.cmd("SET k v NX XX"), Value::err("ERR syntax error"));
    assert_eq!(c.cmd("SET k v EX"), Value::err("ERR syntax error"));
    assert_eq!(
        c.cmd("SET k"),
        Value::err("ERR wrong number of arguments for 'set' command")
    );
    assert_eq!(c.cmd("GETDEL k"), b("v3"));
    assert_eq!(c.cmd("GETDEL k"), Nil);
    assert_eq!(c.cmd("MSET a 1 b 2 c 3"), ok());
    assert_eq!(
        c.cmd("MSET a 1 b"),
        Value::err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(
        c.cmd("MGET a b nope c"),
        Value::Array(vec![b("1"), b("2"), Nil, b("3")])
    );
    assert_eq!(c.cmd("MSETNX a 9 z 9"), Int(0));
    assert_eq!(c.cmd("GET z"), Nil);
    assert_eq!(c.cmd("MSETNX y 8 z 9"), Int(1));
    assert_eq!(c.cmd("MGET y z"), Value::bulks(&["8", "9"]));
    assert_eq!(c.cmd("STRLEN a"), Int(1));
    assert_eq!(c.cmd("STRLEN nope"), Int(0));
    assert_eq!(c.cmd("SET s Hello"), ok());
    assert_eq!(c.cmd("APPEND s World"), Int(10));
    assert_eq!(c.cmd("APPEND s !"), Int(11));
    assert_eq!(c.cmd("GET s"), b("HelloWorld!"));
    assert_eq!(c.cmd("APPEND fresh2 abc"), Int(3));
    assert_eq!(c.cmd("GETRANGE s 0 4"), b("Hello"));
    assert_eq!(c.cmd("GETRANGE s -6 -1"), b("World!"));
    assert_eq!(c.cmd("GETRANGE s 5 1"), b(""));
    assert_eq!(c.cmd("GETRANGE s x 1"), Value::err(NOT_INT));
    assert_eq!(c.cmd("SETRANGE s 5 Redis"), Int(11));
    assert_eq!(c.cmd("GET s"), b("HelloRedis!"));
    assert_eq!(c.cmd("SETRANGE pad 3 x"), Int(4));
    assert_eq!(c.call(&[b"GET", b"pad"]), Value::Bulk(b"\0\0\0x".to_vec()));
    assert_eq!(
        c.cmd("SETRANGE s -1 x"),
        Value::err("ERR offset is out of range")
    );
    assert_eq!(
        c.cmd("SETRANGE s 536870911 xx"),
        Value::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(c.cmd("SETRANGE empty 5 "), Int(0));
    assert_eq!(c.cmd("EXISTS empty"), Int(0));
    // Counters.
    assert_eq!(c.cmd("INCR n"), Int(1));
    assert_eq!(c.cmd("INCRBY n 41"), Int(42));
    assert_eq!(c.cmd("DECR n"), Int(41));
    assert_eq!(c.cmd("DECRBY n 50"), Int(-9));
    assert_eq!(c.cmd("GET n"), b("-9"));
    assert_eq!(c.cmd("INCR s"), Value::err(NOT_INT));
    assert_eq!(c.cmd("INCRBY n x"), Value::err(NOT_INT));
    assert_eq!(c.cmd("SET big 9223372036854775807"), ok());
    assert_eq!(
        c.cmd("INCR big"),
        Value::err("ERR increment or decrement would overflow")
    );
    assert_eq!(c.cmd("GET big"), b("9223372036854775807"));
    assert_eq!(
        c.cmd("DECRBY n -9223372036854775808"),
        Value::err("ERR decrement would overflow")
    );
    assert_eq!(c.cmd("SET sp 01"), ok());
    assert_eq!(c.cmd("INCR sp"), Value::err(NOT_INT));
    // Types.
    assert_eq!(c.cmd("HSET h f v"), Int(1));
    for cmd in [
        "GET h",
        "APPEND h x",
        "INCR h",
        "STRLEN h",
        "GETRANGE h 0 1",
        "GETDEL h",
        "SET h v GET",
    ] {
        assert_eq!(c.cmd(cmd), Value::err(WRONGTYPE), "{cmd}");
    }
    assert_eq!(c.cmd("MGET h a"), Value::Array(vec![Nil, b("1")]));
    // SET overwrites a key of any type.
    assert_eq!(c.cmd("SET h now-a-string"), ok());
    assert_eq!(c.cmd("TYPE h"), Value::status("string"));
    assert_eq!(c.cmd("HGET h f"), Value::err(WRONGTYPE));
}

/// The seconds `TTL` answers for `key`, which must have an expiry.
fn ttl(c: &mut common::Client, key: &str) -> i64 {
    match c.cmd(&format!("TTL {key}")) {
        Int(n) if n >= 0 => n,
        other => panic!("TTL {key}: {other:?}"),
    }
}

/// The expiry family, replies as redis-server 7.0 gives them (checked side
/// by side). Waits are longer than the TTLs they outlast; no timing is
/// asserted.
#[test]
fn expiry() {
    let (_d, s) = server();
    let mut c = s.client();
    let invalid = |cmd: &str| Value::err(&format!("ERR invalid expire time in '{cmd}' command"));
    assert_eq!(c.cmd("SET k v EX 0"), invalid("set"));
    assert_eq!(c.cmd("SET k v EX -1"), invalid("set"));
    assert_eq!(c.cmd("SET k v EX abc"), Value::err(NOT_INT));
    assert_eq!(
        c.cmd("SET k v EX 10 PX 100"),
        Value::err("ERR syntax error")
    );
    assert_eq!(
        c.cmd("SET k v KEEPTTL EX 10"),
        Value::err("ERR syntax error")
    );
    assert_eq!(c.cmd("SET k v EX 100"), ok());
    assert!((99..=100).contains(&ttl(&mut c, "k")));
    assert_eq!(c.cmd("SET k v2 KEEPTTL"), ok());
    assert!((99..=100).contains(&ttl(&mut c, "k")));
    assert_eq!(c.cmd("SET k v3"), ok());
    assert_eq!(c.cmd("TTL k"), Int(-1));
    assert_eq!(c.cmd("TTL missing"), Int(-2));
    assert_eq!(c.cmd("PTTL missing"), Int(-2));
    assert_eq!(
        c.cmd("EXPIRE k 100 NX XX"),
        Value::err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd("EXPIRE k 100 GT LT"),
        Value::err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd("EXPIRE k 100 FOO"),
        Value::err("ERR Unsupported option FOO")
    );
    assert_eq!(c.cmd("EXPIRE k abc"), Value::err(NOT_INT));
    assert_eq!(c.cmd("EXPIRE k 9223372036854775807"), invalid("expire"));
    assert_eq!(c.cmd("SETEX k 0 v"), invalid("setex"));
    assert_eq!(c.cmd("PSETEX k -5 v"), invalid("psetex"));
    assert_eq!(c.cmd("GETEX k FOO"), Value::err("ERR syntax error"));
    assert_eq!(c.cmd("GETEX k EX 0"), invalid("getex"));
    assert_eq!(
        c.cmd("GETEX k PERSIST EX 5"),
        Value::err("ERR syntax error")
    );
    assert_eq!(c.cmd("GETEX missing EX 5"), Nil);
    // NX, XX, GT, LT: no expiry counts as never.
    assert_eq!(c.cmd("EXPIRE k 100 XX"), Int(0));
    assert_eq!(c.cmd("EXPIRE k 100 GT"), Int(0));
    assert_eq!(c.cmd("EXPIRE k 100 NX"), Int(1));
    assert_eq!(c.cmd("EXPIRE k 50 GT"), Int(0));
    assert_eq!(c.cmd("EXPIRE k 200 GT"), Int(1));
    assert_eq!(c.cmd("EXPIRE k 300 LT"), Int(0));
    assert_eq!(c.cmd("PEXPIRE k 150000 LT XX"), Int(1));
    assert!((149..=150).contains(&ttl(&mut c, "k")));
    assert_eq!(c.cmd("GET k"), b("v3"), "EXPIRE keeps the value");
    // EXPIREAT and the times.
    let at = 4_102_444_800i64; // 2100-01-01
    assert_eq!(c.cmd(&format!("EXPIREAT k {at}")), Int(1));
    assert_eq!(c.cmd("EXPIRETIME k"), Int(at));
    assert_eq!(c.cmd("PEXPIRETIME k"), Int(at * 1000));
    assert_eq!(c.cmd(&format!("PEXPIREAT k {}", at * 1000 + 5)), Int(1));
    assert_eq!(c.cmd("PEXPIRETIME k"), Int(at * 1000 + 5));
    assert_eq!(c.cmd("EXPIRETIME missing"), Int(-2));
    assert_eq!(c.cmd("PERSIST k"), Int(1));
    assert_eq!(c.cmd("PERSIST k"), Int(0));
    assert_eq!(c.cmd("PERSIST missing"), Int(0));
    assert_eq!(c.cmd("EXPIRETIME k"), Int(-1));
    assert_eq!(c.cmd("EXPIRE missing 10"), Int(0));
    // A time already past deletes the key.
    assert_eq!(c.cmd("SET k v PXAT 1"), ok());
    assert_eq!(c.cmd("EXISTS k"), Int(0));
    assert_eq!(c.cmd("SET k v"), ok());
    assert_eq!(c.cmd("EXPIRE k -1"), Int(1));
    assert_eq!(c.cmd("EXISTS k"), Int(0));
    // Commands that change a value in place keep its expiry.
    assert_eq!(c.cmd("SET n 5 EX 100"), ok());
    assert_eq!(c.cmd("INCR n"), Int(6));
    assert!(ttl(&mut c, "n") >= 99);
    assert_eq!(c.cmd("APPEND n 0"), Int(2));
    assert!(ttl(&mut c, "n") >= 99);
    assert_eq!(c.cmd("SETRANGE n 0 7"), Int(2));
    assert_eq!(c.cmd("GET n"), b("70"));
    assert!(ttl(&mut c, "n") >= 99);
    assert_eq!(c.cmd("MSET n 1"), ok());
    assert_eq!(c.cmd("TTL n"), Int(-1), "MSET sets, dropping the expiry");
    // Hashes and sorted sets: the whole key expires; writes keep it.
    assert_eq!(c.cmd("HSET h f v"), Int(1));
    assert_eq!(c.cmd("GETEX h"), Value::err(WRONGTYPE));
    assert_eq!(c.cmd("EXPIRE h 100"), Int(1));
    assert_eq!(c.cmd("HSET h g w"), Int(1));
    assert!(ttl(&mut c, "h") >= 99);
    assert_eq!(c.cmd("HDEL h g"), Int(1));
    assert!(ttl(&mut c, "h") >= 99);
    assert_eq!(c.cmd("ZADD z 1 a"), Int(1));
    assert_eq!(c.cmd("PEXPIRE z 100000"), Int(1));
    assert_eq!(c.cmd("ZADD z 2 b"), Int(1));
    assert!(ttl(&mut c, "z") >= 99);
    // GETEX changes the expiry and answers the value.
    assert_eq!(c.cmd("SET g v"), ok());
    assert_eq!(c.cmd("GETEX g EX 100"), b("v"));
    assert!(ttl(&mut c, "g") >= 99);
    assert_eq!(c.cmd("GETEX g PERSIST"), b("v"));
    assert_eq!(c.cmd("TTL g"), Int(-1));
    assert_eq!(c.cmd("SETEX s 100 v"), ok());
    assert!(ttl(&mut c, "s") >= 99);
    assert_eq!(c.cmd("PSETEX s 100000 w"), ok());
    assert_eq!(c.cmd("GET s"), b("w"));
    // INFO counts keys with an expiry: h, z and s (n lost its to MSET, g
    // to PERSIST).
    let Value::Bulk(info) = c.cmd("INFO keyspace") else {
        panic!()
    };
    let info = String::from_utf8(info).unwrap();
    assert!(info.contains("keys=5,expires=3,"), "{info}");
    // Then they expire: strings, a hash with its fields, a sorted set.
    assert_eq!(c.cmd("SET short v PX 100"), ok());
    assert_eq!(c.cmd("HSET hs f v"), Int(1));
    assert_eq!(c.cmd("PEXPIRE hs 100"), Int(1));
    assert_eq!(c.cmd("ZADD zs 1 m"), Int(1));
    assert_eq!(c.cmd("PEXPIRE zs 100"), Int(1));
    assert_eq!(c.cmd("GETEX g PX 100"), b("v"));
    std::thread::sleep(std::time::Duration::from_millis(400));
    for k in ["short", "hs", "zs", "g"] {
        assert_eq!(c.cmd(&format!("EXISTS {k}")), Int(0), "{k}");
        assert_eq!(c.cmd(&format!("TTL {k}")), Int(-2), "{k}");
    }
    assert_eq!(c.cmd("HGET hs f"), Nil);
    assert_eq!(c.cmd("HLEN hs"), Int(0));
    assert_eq!(c.cmd("ZSCORE zs m"), Nil);
    assert_eq!(c.cmd("GET short"), Nil);
    // A write to an expired hash starts a new one, without the old fields.
    assert_eq!(c.cmd("HSET hs g w"), Int(1));
    assert_eq!(c.cmd("HGETALL hs"), Value::bulks(&["g", "w"]));
    assert_eq!(c.cmd("TTL hs"), Int(-1));
}

/// The value of `field` in INFO's `section`.
fn info_field(c: &mut common::Client, section: &str, field: &str) -> u64 {
    let Value::Bulk(info) = c.cmd(&format!("INFO {section}")) else {
        panic!("INFO {section}")
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .parse()
        .unwrap()
}

/// Deleted, expired and overwritten hashes and sorted sets leave their
/// fields behind; COMPACT's compactions drop them, deciding from the subkey
/// alone for versions the server saw end, with one metadata lookup per
/// collection otherwise (kvrocks looks up once per subkey), and keep every
/// live one.
#[test]
fn compaction_reclaims_the_subkeys_of_ended_collections() {
    let (_d, s) = server();
    let mut c = s.client();
    const FIELDS: usize = 50;
    let fields: String = (0..FIELDS).map(|f| format!(" f{f} {f}")).collect();
    let members: String = (0..FIELDS).map(|m| format!(" {m} m{m}")).collect();
    for h in 0..300 {
        assert_eq!(c.cmd(&format!("HSET h{h}{fields}")), Int(FIELDS as i64));
    }
    for z in 0..100 {
        assert_eq!(c.cmd(&format!("ZADD z{z}{members}")), Int(FIELDS as i64));
    }
    // Ended: 100 hashes deleted (seen by the server), 100 expired, 50
    // sorted sets overwritten by SET (not read, so not seen).
    for h in 0..100 {
        assert_eq!(c.cmd(&format!("DEL h{h}")), Int(1));
    }
    for h in 100..200 {
        assert_eq!(c.cmd(&format!("PEXPIRE h{h} 100")), Int(1));
    }
    for z in 0..50 {
        assert_eq!(c.cmd(&format!("SET z{z} string")), ok());
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(c.cmd("COMPACT"), ok());
    let removed = info_field(&mut c, "cleave", "stale_subkeys_removed");
    let from_key = info_field(&mut c, "cleave", "stale_subkeys_decided_from_key");
    let lookups = info_field(&mut c, "cleave", "stale_subkeys_lookups");
    let checked = info_field(&mut c, "cleave", "stale_subkeys_checked");
    // A sorted set's member has a field entry and a score entry.
    let dead = (100 + 100 + 2 * 50) * FIELDS as u64;
    let live = (100 + 2 * 50) * FIELDS as u64;
    assert_eq!(removed, dead, "checked {checked}");
    assert_eq!(checked, dead + live);
    assert_eq!(from_key, 100 * FIELDS as u64, "the deleted hashes");
    // The expired hashes, the overwritten sorted sets and the live
    // collections: a lookup each (two for a sorted set, whose field and
    // score entries lie in two ranges), give or take a run split between
    // two compactions or two tables. The last run: 350 lookups for 25,000
    // subkeys, where a lookup per subkey would be 25,000.
    eprintln!("stale subkeys: {checked} checked, {removed} removed, {from_key} decided from the key, {lookups} lookups");
    assert!(lookups <= 2 * (100 + 50 + 150), "{lookups} lookups");
    assert_eq!(info_field(&mut c, "cleave", "exposed_garbage_bytes"), 0);
    for h in 200..300 {
        assert_eq!(c.cmd(&format!("HLEN h{h}")), Int(FIELDS as i64), "h{h}");
    }
    assert_eq!(c.cmd("HGET h250 f7"), b("7"));
    assert_eq!(c.cmd("ZSCORE z70 m3"), Value::bulk("3"));
    assert_eq!(c.cmd("GET z10"), b("string"));
    assert_eq!(c.cmd("EXISTS h150"), Int(0));
    // A compaction later finds nothing more to drop.
    assert_eq!(c.cmd("COMPACT"), ok());
    assert_eq!(info_field(&mut c, "cleave", "stale_subkeys_removed"), dead);
}

#[test]
fn binary_keys_and_values_survive() {
    let (_d, s) = server();
    let mut c = s.client();
    let key = b"k\r\n\0\xff";
    let value: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    assert_eq!(c.call(&[b"SET", key, &value]), ok());
    assert_eq!(c.call(&[b"GET", key]), Value::Bulk(value.clone()));
    assert_eq!(c.call(&[b"APPEND", key, b"\0"]), Int(100_001));
    assert_eq!(c.call(&[b"STRLEN", key]), Int(100_001));
}

#[test]
fn hashes() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(c.cmd("HSET h a 1 b 2"), Int(2));
    assert_eq!(c.cmd("HSET h a 10 c 3 c 4"), Int(1));
    assert_eq!(
        c.cmd("HSET h a"),
        Value::err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(c.cmd("HMSET h d 5"), ok());
    assert_eq!(c.cmd("HGET h a"), b("10"));
    assert_eq!(c.cmd("HGET h c"), b("4"));
    assert_eq!(c.cmd("HGET h nope"), Nil);
    assert_eq!(c.cmd("HGET nokey a"), Nil);
    assert_eq!(
        c.cmd("HMGET h a nope d"),
        Value::Array(vec![b("10"), Nil, b("5")])
    );
    assert_eq!(c.cmd("HMGET nokey a"), Value::Array(vec![Nil]));
    assert_eq!(c.cmd("HLEN h"), Int(4));
    assert_eq!(c.cmd("HEXISTS h b"), Int(1));
    assert_eq!(c.cmd("HEXISTS h z"), Int(0));
    assert_eq!(
        c.cmd("HGETALL h"),
        Value::bulks(&["a", "10", "b", "2", "c", "4", "d", "5"])
    );
    assert_eq!(c.cmd("HDEL h a a z"), Int(1));
    assert_eq!(c.cmd("HLEN h"), Int(3));
    assert_eq!(c.cmd("HDEL h b c d"), Int(3));
    assert_eq!(c.cmd("EXISTS h"), Int(0));
    assert_eq!(c.cmd("HGETALL h"), Value::Array(vec![]));
    // Deleted then re-created: none of the old fields come back.
    assert_eq!(c.cmd("HSET g x 1 y 2"), Int(2));
    assert_eq!(c.cmd("DEL g"), Int(1));
    assert_eq!(c.cmd("HSET g z 3"), Int(1));
    assert_eq!(c.cmd("HGETALL g"), Value::bulks(&["z", "3"]));
    assert_eq!(c.cmd("HLEN g"), Int(1));
    // Another hash whose name starts alike keeps its own fields.
    assert_eq!(c.cmd("HSET gg x 1"), Int(1));
    assert_eq!(c.cmd("HGETALL g"), Value::bulks(&["z", "3"]));
    assert_eq!(c.cmd("SET str v"), ok());
    for cmd in [
        "HSET str a b",
        "HGET str a",
        "HGETALL str",
        "HDEL str a",
        "HLEN str",
        "HMGET str a",
        "HEXISTS str a",
    ] {
        assert_eq!(c.cmd(cmd), Value::err(WRONGTYPE), "{cmd}");
    }
}

#[test]
fn sorted_sets() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(c.cmd("ZADD z 1 a 2 b 3 c"), Int(3));
    assert_eq!(c.cmd("ZADD z 1 a 5 b"), Int(0));
    assert_eq!(c.cmd("ZADD z CH 1 a 6 b 7 d"), Int(2));
    assert_eq!(c.cmd("ZCARD z"), Int(4));
    assert_eq!(c.cmd("ZSCORE z b"), b("6"));
    assert_eq!(c.cmd("ZSCORE z nope"), Nil);
    assert_eq!(c.cmd("ZADD z NX 100 a 0.5 e"), Int(1));
    assert_eq!(c.cmd("ZSCORE z a"), b("1"));
    assert_eq!(c.cmd("ZADD z XX 100 f 2 a"), Int(0));
    assert_eq!(c.cmd("ZSCORE z f"), Nil);
    assert_eq!(c.cmd("ZSCORE z a"), b("2"));
    assert_eq!(c.cmd("ZADD z GT 1 a"), Int(0));
    assert_eq!(c.cmd("ZSCORE z a"), b("2"));
    assert_eq!(c.cmd("ZADD z LT 1.5 a"), Int(0));
    assert_eq!(c.cmd("ZSCORE z a"), b("1.5"));
    assert_eq!(c.cmd("ZADD z INCR 2.25 a"), b("3.75"));
    assert_eq!(c.cmd("ZADD z NX INCR 1 a"), Nil);
    assert_eq!(
        c.cmd("ZADD z INCR 1 a 2 b"),
        Value::err("ERR INCR option supports a single increment-element pair")
    );
    assert_eq!(
        c.cmd("ZADD z NX XX 1 a"),
        Value::err("ERR XX and NX options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd("ZADD z GT LT 1 a"),
        Value::err("ERR GT, LT, and/or NX options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd("ZADD z x a"),
        Value::err("ERR value is not a valid float")
    );
    assert_eq!(c.cmd("ZADD z 1 a 2"), Value::err("ERR syntax error"));
    assert_eq!(c.cmd("ZADD z +inf a"), Int(0));
    assert_eq!(
        c.cmd("ZADD z INCR -inf a"),
        Value::err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(c.cmd("ZSCORE z a"), b("inf"));
    // z: e 0.5, c 3, b 6, d 7, a inf
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z -inf +inf"),
        Value::bulks(&["e", "c", "b", "d", "a"])
    );
    assert_eq!(c.cmd("ZRANGEBYSCORE z (3 7"), Value::bulks(&["b", "d"]));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z 3 (7 WITHSCORES"),
        Value::bulks(&["c", "3", "b", "6"])
    );
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z -inf +inf LIMIT 1 2"),
        Value::bulks(&["c", "b"])
    );
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z -inf +inf LIMIT 4 -1"),
        Value::bulks(&["a"])
    );
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z -inf +inf LIMIT -1 5"),
        Value::Array(vec![])
    );
    assert_eq!(c.cmd("ZRANGEBYSCORE z 7 3"), Value::Array(vec![]));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z x 3"),
        Value::err("ERR min or max is not a float")
    );
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z 1 3 LIMIT 1"),
        Value::err("ERR syntax error")
    );
    assert_eq!(c.cmd("ZRANGEBYSCORE z 1 3 LIMIT a 1"), Value::err(NOT_INT));
    assert_eq!(c.cmd("ZRANGEBYSCORE nokey 1 3"), Value::Array(vec![]));
    // Negative scores sort below positive ones.
    assert_eq!(c.cmd("ZADD neg -2 x -10 y 0 z 1e3 w"), Int(4));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE neg -inf inf"),
        Value::bulks(&["y", "x", "z", "w"])
    );
    // Lex ranges, all scores equal.
    assert_eq!(c.cmd("ZADD lex 0 a 0 b 0 c 0 d 0 e"), Int(5));
    assert_eq!(
        c.cmd("ZRANGEBYLEX lex - +"),
        Value::bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(c.cmd("ZRANGEBYLEX lex [b (d"), Value::bulks(&["b", "c"]));
    assert_eq!(c.cmd("ZRANGEBYLEX lex (b [d"), Value::bulks(&["c", "d"]));
    assert_eq!(
        c.cmd("ZRANGEBYLEX lex - + LIMIT 1 2"),
        Value::bulks(&["b", "c"])
    );
    assert_eq!(c.cmd("ZRANGEBYLEX lex + -"), Value::Array(vec![]));
    assert_eq!(
        c.cmd("ZRANGEBYLEX lex a +"),
        Value::err("ERR min or max not valid string range item")
    );
    assert_eq!(
        c.cmd("ZRANGEBYLEX lex - + WITHSCORES"),
        Value::err("ERR syntax error")
    );
    // Removal, down to an empty set, which is deleted.
    assert_eq!(c.cmd("ZREM lex a a nope"), Int(1));
    assert_eq!(c.cmd("ZCARD lex"), Int(4));
    assert_eq!(c.cmd("ZREM lex b c d e"), Int(4));
    assert_eq!(c.cmd("EXISTS lex"), Int(0));
    assert_eq!(c.cmd("ZCARD lex"), Int(0));
    assert_eq!(c.cmd("ZADD lex 1 q"), Int(1));
    assert_eq!(c.cmd("ZRANGEBYLEX lex - +"), Value::bulks(&["q"]));
    // A changed score leaves no stale index entry.
    assert_eq!(c.cmd("ZADD moved 1 m"), Int(1));
    assert_eq!(c.cmd("ZADD moved 5 m"), Int(0));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE moved -inf +inf WITHSCORES"),
        Value::bulks(&["m", "5"])
    );
    assert_eq!(c.cmd("SET str v"), ok());
    for cmd in [
        "ZADD str 1 a",
        "ZSCORE str a",
        "ZCARD str",
        "ZREM str a",
        "ZRANGEBYSCORE str 0 1",
        "ZRANGEBYLEX str - +",
    ] {
        assert_eq!(c.cmd(cmd), Value::err(WRONGTYPE), "{cmd}");
    }
}

#[test]
fn keys_scan_type_dbsize_flushdb() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(c.cmd("DBSIZE"), Int(0));
    for i in 0..250 {
        assert_eq!(c.cmd(&format!("SET key:{i:03} v")), ok());
    }
    assert_eq!(c.cmd("HSET hash f v"), Int(1));
    assert_eq!(c.cmd("ZADD zset 1 m"), Int(1));
    assert_eq!(c.cmd("TYPE key:001"), Value::status("string"));
    assert_eq!(c.cmd("TYPE hash"), Value::status("hash"));
    assert_eq!(c.cmd("TYPE zset"), Value::status("zset"));
    assert_eq!(c.cmd("TYPE nope"), Value::status("none"));
    assert_eq!(c.cmd("EXISTS key:001 key:001 nope hash"), Int(3));
    assert_eq!(c.cmd("DBSIZE"), Int(252));
    // A full SCAN returns every key once, whatever the page size.
    for count in [1, 7, 1000] {
        let mut cursor = "0".to_string();
        let mut seen = Vec::new();
        loop {
            let Value::Array(reply) = c.cmd(&format!("SCAN {cursor} COUNT {count}")) else {
                panic!()
            };
            let Value::Bulk(next) = &reply[0] else {
                panic!()
            };
            let Value::Array(keys) = &reply[1] else {
                panic!()
            };
            seen.extend(keys.iter().cloned());
            cursor = String::from_utf8(next.clone()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 252, "COUNT {count}");
        seen.sort_by_key(|v| format!("{v:?}"));
        seen.dedup();
        assert_eq!(seen.len(), 252);
    }
    let Value::Array(reply) = c.cmd("SCAN 0 MATCH key:1?3 COUNT 1000") else {
        panic!()
    };
    assert_eq!(
        reply[1],
        Value::bulks(&[
            "key:103", "key:113", "key:123", "key:133", "key:143", "key:153", "key:163", "key:173",
            "key:183", "key:193"
        ])
    );
    let Value::Array(reply) = c.cmd("SCAN 0 TYPE hash COUNT 1000") else {
        panic!()
    };
    assert_eq!(reply, vec![b("0"), Value::bulks(&["hash"])]);
    assert_eq!(c.cmd("SCAN x"), Value::err("ERR invalid cursor"));
    assert_eq!(c.cmd("SCAN 0 COUNT 0"), Value::err("ERR syntax error"));
    assert_eq!(c.cmd("SCAN 0 MATCH"), Value::err("ERR syntax error"));
    assert_eq!(c.cmd("DEL key:000 key:001 key:001 nope hash"), Int(3));
    assert_eq!(c.cmd("DBSIZE"), Int(249));
    assert_eq!(c.cmd("FLUSHDB"), ok());
    assert_eq!(c.cmd("DBSIZE"), Int(0));
    assert_eq!(c.cmd("GET key:100"), Nil);
    assert_eq!(c.cmd("ZCARD zset"), Int(0));
    assert_eq!(c.cmd("FLUSHDB bogus"), Value::err("ERR syntax error"));
}

#[test]
fn server_commands() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(c.cmd("PING"), Value::status("PONG"));
    assert_eq!(c.cmd("PING hi"), b("hi"));
    assert_eq!(
        c.cmd("PING a b"),
        Value::err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(c.cmd("ECHO hello"), b("hello"));
    assert_eq!(c.cmd("SELECT 0"), ok());
    assert_eq!(
        c.cmd("SELECT 16"),
        Value::err("ERR DB index is out of range")
    );
    assert_eq!(c.cmd("SELECT x"), Value::err(NOT_INT));
    assert_eq!(
        c.cmd("NOSUCH a b"),
        Value::err("ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(c.cmd("CLIENT GETNAME"), Nil);
    assert_eq!(c.cmd("CLIENT SETNAME worker-1"), ok());
    assert_eq!(c.cmd("CLIENT GETNAME"), b("worker-1"));
    assert_eq!(
        c.call(&[b"CLIENT", b"SETNAME", b"a b"]),
        Value::err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert!(matches!(c.cmd("CLIENT ID"), Int(n) if n > 0));
    assert_eq!(c.cmd("CLIENT SETINFO LIB-NAME x"), ok());
    let Value::Bulk(list) = c.cmd("CLIENT LIST") else {
        panic!()
    };
    assert!(String::from_utf8(list).unwrap().contains("name=worker-1"));
    // CONFIG.
    assert_eq!(
        c.cmd("CONFIG GET appendfsync"),
        Value::bulks(&["appendfsync", "no"])
    );
    assert_eq!(c.cmd("CONFIG SET appendfsync always"), ok());
    assert_eq!(
        c.cmd("CONFIG GET appendfsync"),
        Value::bulks(&["appendfsync", "always"])
    );
    assert_eq!(c.cmd("CONFIG SET appendfsync sometimes"), Value::err("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: always, everysec, no"));
    assert_eq!(c.cmd("CONFIG SET port 1"), Value::err("ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"));
    assert_eq!(
        c.cmd("CONFIG SET nosuch 1"),
        Value::err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    );
    assert_eq!(
        c.cmd("CONFIG SET maxclients 100 proto-max-bulk-len 2mb"),
        ok()
    );
    assert_eq!(
        c.cmd("CONFIG GET proto-max-bulk-len"),
        Value::bulks(&["proto-max-bulk-len", "2097152"])
    );
    let Value::Array(all) = c.cmd("CONFIG GET cleave-*") else {
        panic!()
    };
    assert!(all.len() >= 10 && all.len() % 2 == 0);
    assert_eq!(c.cmd("CONFIG GET save"), Value::bulks(&["save", ""]));
    // COMMAND.
    let Int(count) = c.cmd("COMMAND COUNT") else {
        panic!()
    };
    let Value::Array(all) = c.cmd("COMMAND") else {
        panic!()
    };
    assert_eq!(all.len() as i64, count);
    let Value::Array(info) = c.cmd("COMMAND INFO get nosuch") else {
        panic!()
    };
    let Value::Array(get) = &info[0] else {
        panic!()
    };
    assert_eq!(&get[..2], &[b("get"), Int(2)]);
    assert_eq!(info[1], Value::NilArray);
    // INFO.
    let Value::Bulk(text) = c.cmd("INFO") else {
        panic!()
    };
    let text = String::from_utf8(text).unwrap();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Stats",
        "# Keyspace",
        "# Cleave",
    ] {
        assert!(text.contains(section), "{section}");
    }
    assert!(text.contains("redis_version:7.0.0\r\n"));
    assert!(text.contains("sstable_bytes:"));
    let Value::Bulk(only) = c.cmd("INFO clients") else {
        panic!()
    };
    assert!(String::from_utf8(only)
        .unwrap()
        .starts_with("# Clients\r\nconnected_clients:1\r\n"));
    assert_eq!(c.cmd("QUIT"), ok());
    assert_eq!(c.try_read(), None);
}

#[test]
fn resp3_through_hello() {
    let (_d, s) = server();
    let mut c = s.client();
    assert_eq!(
        c.cmd("HELLO 4"),
        Value::err("NOPROTO unsupported protocol version")
    );
    let Value::Map(hello) = c.cmd("HELLO 3 SETNAME r3") else {
        panic!()
    };
    assert!(hello.contains(&(b("proto"), Int(3))));
    assert_eq!(c.cmd("CLIENT GETNAME"), b("r3"));
    assert_eq!(c.cmd("GET nope"), Nil);
    assert_eq!(c.cmd("HSET h f v"), Int(1));
    assert_eq!(c.cmd("HGETALL h"), Value::Map(vec![(b("f"), b("v"))]));
    assert_eq!(c.cmd("ZADD z 1.5 m"), Int(1));
    assert_eq!(c.cmd("ZSCORE z m"), Value::Double("1.5".into()));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE z -inf +inf WITHSCORES"),
        Value::Array(vec![Value::Array(vec![
            b("m"),
            Value::Double("1.5".into())
        ])])
    );
    assert_eq!(
        c.cmd("CONFIG GET appendfsync"),
        Value::Map(vec![(b("appendfsync"), b("no"))])
    );
    assert!(matches!(c.cmd("INFO server"), Value::Verbatim(t) if t.starts_with("txt:# Server")));
    let Value::Array(_) = c.cmd("HELLO 2") else {
        panic!()
    };
    assert_eq!(c.cmd("HGETALL h"), Value::bulks(&["f", "v"]));
}

/// Commands of many connections at once: counters never lose an
/// increment, and a pipeline's replies come back in order.
#[test]
fn concurrent_clients_and_pipelines() {
    let (_d, s) = server();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                for i in 0..200 {
                    assert!(matches!(c.cmd("INCR shared"), Int(_)));
                    assert_eq!(c.cmd(&format!("HSET h{} f{t}-{i} v", t % 2)), Int(1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    assert_eq!(c.cmd("GET shared"), b("1600"));
    assert_eq!(c.cmd("HLEN h0"), Int(800));
    let mut pipeline = Vec::new();
    for i in 0..2000 {
        pipeline.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$5\r\np{i:04}\r\n$4\r\n{i:04}\r\n").as_bytes(),
        );
        pipeline.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n$5\r\np{i:04}\r\n").as_bytes());
    }
    c.send_raw(&pipeline);
    for i in 0..2000 {
        assert_eq!(c.read(), ok());
        assert_eq!(c.read(), b(&format!("{i:04}")));
    }
}

/// Lists and sets end as hashes do: deleting one drops its metadata only,
/// and compaction drops its elements' subkeys; elements popped or trimmed
/// off a live list go as they are removed.
#[test]
fn compaction_reclaims_the_subkeys_of_ended_lists_and_sets() {
    let (_d, s) = server();
    let mut c = s.client();
    const ELEMENTS: usize = 40;
    let elements: String = (0..ELEMENTS).map(|e| format!(" e{e}")).collect();
    for k in 0..20 {
        assert_eq!(
            c.cmd(&format!("RPUSH l{k}{elements}")),
            Int(ELEMENTS as i64)
        );
        assert_eq!(c.cmd(&format!("SADD s{k}{elements}")), Int(ELEMENTS as i64));
    }
    for k in 0..10 {
        assert_eq!(c.cmd(&format!("DEL l{k} s{k}")), Int(2));
    }
    // Emptied by trimming: the metadata goes, the elements with its version.
    assert_eq!(c.cmd("LTRIM l10 1 0"), ok());
    assert_eq!(
        c.cmd("LPOP l11 10"),
        Value::Array((0..10).map(|e| b(&format!("e{e}"))).collect())
    );
    assert_eq!(c.cmd("COMPACT"), ok());
    let removed = info_field(&mut c, "cleave", "stale_subkeys_removed");
    assert_eq!(removed, (2 * 10 + 1) * ELEMENTS as u64);
    assert_eq!(c.cmd("LLEN l11"), Int(30));
    assert_eq!(c.cmd("LINDEX l11 0"), b("e10"));
    assert_eq!(c.cmd("SCARD s15"), Int(ELEMENTS as i64));
    assert_eq!(c.cmd("EXISTS l10 l5 s5"), Int(0));
    assert_eq!(c.cmd("COMPACT"), ok());
    assert_eq!(
        info_field(&mut c, "cleave", "stale_subkeys_removed"),
        removed
    );
}

/// A set too large to read whole for SPOP and SRANDMEMBER: they pick by
/// seeks, and still answer distinct members of the set, as many as asked.
#[test]
fn random_picks_from_a_large_set() {
    let (_d, s) = server();
    let mut c = s.client();
    const MEMBERS: usize = 20_000;
    for chunk in (0..MEMBERS).collect::<Vec<_>>().chunks(1000) {
        let members: String = chunk.iter().map(|m| format!(" member:{m:05}")).collect();
        assert_eq!(
            c.cmd(&format!("SADD big{members}")),
            Int(chunk.len() as i64)
        );
    }
    let names = |v: Value| -> Vec<Vec<u8>> {
        match v {
            Value::Array(items) | Value::Set(items) => items
                .into_iter()
                .map(|i| match i {
                    Value::Bulk(b) => b,
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    let picked = names(c.cmd("SRANDMEMBER big 300"));
    let distinct: std::collections::HashSet<_> = picked.iter().collect();
    assert_eq!((picked.len(), distinct.len()), (300, 300));
    let repeats = names(c.cmd("SRANDMEMBER big -500"));
    assert_eq!(repeats.len(), 500);
    let popped = names(c.cmd("SPOP big 1000"));
    let distinct: std::collections::HashSet<_> = popped.iter().collect();
    assert_eq!(distinct.len(), 1000);
    assert_eq!(c.cmd("SCARD big"), Int((MEMBERS - 1000) as i64));
    for m in popped.iter().take(50) {
        assert_eq!(c.call(&[b"SISMEMBER", b"big", m]), Int(0));
    }
    for m in picked.iter().chain(&repeats) {
        assert!(m.starts_with(b"member:"), "{}", m.escape_ascii());
    }
}
