//! The server killed under load from clients, with `--appendfsync always`:
//! after a restart every acknowledged write is there. SIGTERM and SHUTDOWN
//! close cleanly and lose nothing in any mode.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Server, Value};

/// What one writer thread had acknowledged when the server died.
#[derive(Default)]
struct Acked {
    /// Keys set to a value, with the value.
    strings: HashMap<String, Vec<u8>>,
    /// The counter's last acknowledged value.
    counter: i64,
    /// Bytes the appended-to string had when the last APPEND was acknowledged.
    appended: i64,
    /// Hash fields acknowledged.
    fields: Vec<String>,
    /// Elements acknowledged pushed onto the thread's list, in order, and
    /// how many were acknowledged popped off its head.
    pushed: Vec<String>,
    popped: usize,
    /// Every element an RPUSH was sent for, acknowledged or not.
    sent: Vec<String>,
    /// Set members acknowledged.
    members: Vec<String>,
}

fn value(round: usize, t: usize, i: usize) -> Vec<u8> {
    // Every 16th value is 64 KiB: a value log takes it at write time.
    let len = if i.is_multiple_of(16) {
        64 << 10
    } else {
        100 + i % 900
    };
    let mut v = format!("{round}:{t}:{i}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

#[test]
fn kill_under_load_loses_no_acknowledged_write_with_always() {
    kill_under_load("always");
}

/// Writes that are not synced wait in the process (the engine's
/// `manual_wal_flush`) but reach the OS before any reply: a killed
/// process loses none that was answered.
#[test]
fn kill_under_load_loses_no_acknowledged_write_with_everysec() {
    kill_under_load("everysec");
}

fn kill_under_load(mode: &str) {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    const THREADS: usize = 4;
    const ROUNDS: usize = 3;
    let mut acked: Vec<Arc<Mutex<Acked>>> = (0..THREADS).map(|_| Default::default()).collect();
    for round in 0..ROUNDS {
        let mut server = Server::start(&data, &["--appendfsync", mode]);
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let port = server.port;
                let acked = Arc::clone(&acked[t]);
                std::thread::spawn(move || {
                    let mut c = common::Client::connect(port);
                    for i in 0.. {
                        let key = format!("s:{t}:{round}:{i}");
                        let v = value(round, t, i);
                        // A write is acknowledged when its reply arrives;
                        // a dead server ends the loop.
                        c.send(&[b"SET", key.as_bytes(), &v]);
                        if c.try_read() != Some(Value::status("OK")) {
                            return;
                        }
                        acked.lock().unwrap().strings.insert(key, v);
                        c.send(&[b"INCR", format!("n:{t}").as_bytes()]);
                        match c.try_read() {
                            Some(Value::Int(n)) => acked.lock().unwrap().counter = n,
                            _ => return,
                        }
                        c.send(&[b"APPEND", format!("a:{t}").as_bytes(), b"0123456789"]);
                        match c.try_read() {
                            Some(Value::Int(n)) => acked.lock().unwrap().appended = n,
                            _ => return,
                        }
                        let field = format!("{round}:{i}");
                        c.send(&[b"HSET", format!("h:{t}").as_bytes(), field.as_bytes(), b"v"]);
                        if !matches!(c.try_read(), Some(Value::Int(_))) {
                            return;
                        }
                        acked.lock().unwrap().fields.push(field.clone());
                        acked.lock().unwrap().sent.push(field.clone());
                        c.send(&[b"RPUSH", format!("l:{t}").as_bytes(), field.as_bytes()]);
                        if !matches!(c.try_read(), Some(Value::Int(_))) {
                            return;
                        }
                        acked.lock().unwrap().pushed.push(field.clone());
                        if i % 3 == 2 {
                            c.send(&[b"LPOP", format!("l:{t}").as_bytes()]);
                            if !matches!(c.try_read(), Some(Value::Bulk(_))) {
                                return;
                            }
                            acked.lock().unwrap().popped += 1;
                        }
                        c.send(&[b"SADD", format!("s:{t}").as_bytes(), field.as_bytes()]);
                        if !matches!(c.try_read(), Some(Value::Int(_))) {
                            return;
                        }
                        acked.lock().unwrap().members.push(field);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
        server.kill();
        for w in writers {
            w.join().unwrap();
        }
        let server = Server::start(&data, &["--appendfsync", mode]);
        let mut c = server.client();
        let mut checked = 0;
        for (t, a) in acked.iter_mut().enumerate() {
            let a = a.lock().unwrap();
            for (key, v) in &a.strings {
                assert_eq!(
                    c.call(&[b"GET", key.as_bytes()]),
                    Value::Bulk(v.clone()),
                    "{key}"
                );
                checked += 1;
            }
            // Unacknowledged increments may have landed too: never fewer.
            let Value::Bulk(n) = c.cmd(&format!("GET n:{t}")) else {
                panic!("counter {t} lost")
            };
            let n: i64 = String::from_utf8(n).unwrap().parse().unwrap();
            assert!(n >= a.counter, "counter {t}: {n} < {}", a.counter);
            let Value::Int(len) = c.cmd(&format!("STRLEN a:{t}")) else {
                panic!()
            };
            assert!(
                len >= a.appended && len % 10 == 0,
                "append {t}: {len} < {}",
                a.appended
            );
            for f in &a.fields {
                assert_eq!(
                    c.cmd(&format!("HEXISTS h:{t} {f}")),
                    Value::Int(1),
                    "h:{t} {f}"
                );
            }
            let Value::Int(hlen) = c.cmd(&format!("HLEN h:{t}")) else {
                panic!()
            };
            assert!(hlen as usize >= a.fields.len());
            // The list holds what was pushed, in order, less what was
            // popped off its head: every acknowledged push past the
            // acknowledged pops (and one unacknowledged pop per round),
            // and nothing that was never sent.
            let Value::Array(list) = c.cmd(&format!("LRANGE l:{t} 0 -1")) else {
                panic!("list {t}")
            };
            let list: Vec<String> = list
                .into_iter()
                .map(|v| match v {
                    Value::Bulk(b) => String::from_utf8(b).unwrap(),
                    other => panic!("{other:?}"),
                })
                .collect();
            let mut sent = a.sent.iter();
            for e in &list {
                assert!(
                    sent.any(|s| s == e),
                    "list {t}: {e} out of order or never sent"
                );
            }
            let must = a.pushed.iter().skip(a.popped + round + 1);
            let mut found = list.iter();
            for e in must {
                assert!(found.any(|f| f == e), "list {t} lost {e}: {list:?}");
            }
            for m in &a.members {
                assert_eq!(
                    c.cmd(&format!("SISMEMBER s:{t} {m}")),
                    Value::Int(1),
                    "s:{t} {m}"
                );
            }
        }
        assert!(checked > 0, "round {round}: no write was acknowledged");
    }
}

#[test]
fn sigterm_and_shutdown_close_cleanly_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for (i, mode) in ["no", "everysec", "always"].into_iter().enumerate() {
        let mut server = Server::start(&data, &["--appendfsync", mode]);
        let mut c = server.client();
        for k in 0..500 {
            assert_eq!(c.cmd(&format!("SET {mode}:{k} {k}")), Value::status("OK"));
        }
        if i % 2 == 0 {
            assert!(server.terminate().success(), "{mode}: SIGTERM exit");
        } else {
            c.send_raw(b"SHUTDOWN\r\n");
            // No reply: the connection closes.
            assert_eq!(c.try_read(), None);
            assert!(
                server.child.wait().unwrap().success(),
                "{mode}: SHUTDOWN exit"
            );
        }
        let server = Server::start(&data, &[]);
        let mut c = server.client();
        for k in 0..500 {
            assert_eq!(
                c.cmd(&format!("GET {mode}:{k}")),
                Value::bulk(&k.to_string())
            );
        }
    }
}

/// With `everysec`, a write the background sync has covered is durable:
/// INFO's `wal_syncs` grows only through syncs that began after the write
/// was acknowledged.
#[test]
fn everysec_syncs_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--appendfsync", "everysec"]);
    let mut c = server.client();
    let syncs = |c: &mut common::Client| -> u64 {
        let Value::Bulk(info) = c.cmd("INFO cleave") else {
            panic!()
        };
        let info = String::from_utf8(info).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("wal_syncs:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(c.cmd("SET k v"), Value::status("OK"));
    let before = syncs(&mut c);
    let mut waited = 0;
    while syncs(&mut c) == before {
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
        assert!(waited < 300, "no background sync in 30 s");
    }
    // Without writes, no more syncs.
    let idle = syncs(&mut c);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(syncs(&mut c), idle);
}
