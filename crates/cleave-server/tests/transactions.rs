//! MULTI/EXEC and WATCH with concurrent clients: what a transaction does
//! is seen whole or not at all by the others, no other client's command
//! runs between its commands, a change to a watched key aborts it, and
//! its writes reach the disk as one batch.

mod common;

use std::path::Path;
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::Options;
use cleave_server::commands::{execute, Ctx};
use cleave_server::pipeline;
use cleave_server::resp::Reply;
use cleave_server::state::{Client, Fixed, Limits, Shared};
use cleave_server::store::{FsyncMode, Store};
use common::{Server, Value};
use Value::{Int, NilArray};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--appendfsync", "no"]);
    (dir, server)
}

fn queued() -> Value {
    Value::status("QUEUED")
}

/// Transfers between two keys in transactions, from several clients at
/// once, while others read both keys with one command and with a
/// transaction of two GETs: every read sees the sum unchanged, so no
/// reader saw half a transfer; and each transaction's two INCRs of a
/// shared counter answer consecutive numbers, so no other client's
/// command ran between them.
#[test]
fn concurrent_transactions_are_isolated() {
    let (_d, s) = server();
    let mut c = s.client();
    const TOTAL: i64 = 1000;
    assert_eq!(c.cmd(&format!("MSET a {TOTAL} b 0")), Value::status("OK"));
    const WRITERS: usize = 4;
    const TRANSFERS: usize = 150;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                for i in 0..TRANSFERS {
                    let (from, to) = if (w + i) % 2 == 0 {
                        ("a", "b")
                    } else {
                        ("b", "a")
                    };
                    assert_eq!(c.cmd("MULTI"), Value::status("OK"));
                    assert_eq!(c.cmd(&format!("DECRBY {from} 7")), queued());
                    assert_eq!(c.cmd("INCR counter"), queued());
                    assert_eq!(c.cmd("INCR counter"), queued());
                    assert_eq!(c.cmd(&format!("INCRBY {to} 7")), queued());
                    let Value::Array(replies) = c.cmd("EXEC") else {
                        panic!("EXEC")
                    };
                    let (Int(n1), Int(n2)) = (&replies[1], &replies[2]) else {
                        panic!("{replies:?}")
                    };
                    assert_eq!(*n2, n1 + 1, "another command ran inside the transaction");
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                let mut reads = 0;
                for _ in 0..400 {
                    let pair = if r == 0 {
                        c.cmd("MGET a b")
                    } else {
                        assert_eq!(c.cmd("MULTI"), Value::status("OK"));
                        assert_eq!(c.cmd("GET a"), queued());
                        assert_eq!(c.cmd("GET b"), queued());
                        c.cmd("EXEC")
                    };
                    let Value::Array(v) = pair else { panic!() };
                    let n = |v: &Value| match v {
                        Value::Bulk(b) => std::str::from_utf8(b).unwrap().parse::<i64>().unwrap(),
                        other => panic!("{other:?}"),
                    };
                    assert_eq!(n(&v[0]) + n(&v[1]), TOTAL, "half a transfer seen");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for r in readers {
        assert_eq!(r.join().unwrap(), 400);
    }
    assert_eq!(
        c.cmd("GET counter"),
        Value::bulk(&(2 * WRITERS * TRANSFERS).to_string())
    );
}

/// WATCH: a change by another client between WATCH and EXEC aborts the
/// transaction (EXEC answers nil and does nothing); with no change it
/// runs. The classic check-and-set: concurrent increments through WATCH,
/// retried when aborted, lose none.
#[test]
fn watch_aborts_exec_when_a_watched_key_changed() {
    let (_d, s) = server();
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd("SET k 1"), Value::status("OK"));
    assert_eq!(a.cmd("WATCH k other"), Value::status("OK"));
    assert_eq!(b.cmd("SET k 2"), Value::status("OK"));
    assert_eq!(a.cmd("MULTI"), Value::status("OK"));
    assert_eq!(a.cmd("SET k mine"), queued());
    assert_eq!(a.cmd("EXEC"), NilArray);
    assert_eq!(a.cmd("GET k"), Value::bulk("2"));
    // EXEC forgot the watches: the next transaction runs.
    assert_eq!(a.cmd("MULTI"), Value::status("OK"));
    assert_eq!(a.cmd("SET k mine"), queued());
    assert_eq!(a.cmd("EXEC"), Value::Array(vec![Value::status("OK")]));
    // A hash field changed, a key deleted, a list pushed to, FLUSHALL:
    // each counts as a change.
    for change in ["HSET h f v", "DEL k", "RPUSH l x", "FLUSHALL"] {
        assert_eq!(a.cmd("SET k x"), Value::status("OK"));
        assert_eq!(a.cmd("WATCH h k l"), Value::status("OK"));
        assert!(!matches!(b.cmd(change), Value::Error(_)), "{change}");
        assert_eq!(a.cmd("MULTI"), Value::status("OK"));
        assert_eq!(a.cmd("INCR n"), queued());
        assert_eq!(a.cmd("EXEC"), NilArray, "{change}");
    }
    // A read of a watched key, or a write to another, changes nothing.
    assert_eq!(a.cmd("WATCH k"), Value::status("OK"));
    assert!(matches!(b.cmd("GET k"), Value::Nil));
    assert_eq!(b.cmd("SET unrelated 1"), Value::status("OK"));
    assert_eq!(a.cmd("MULTI"), Value::status("OK"));
    assert_eq!(a.cmd("INCR n"), queued());
    assert_eq!(a.cmd("EXEC"), Value::Array(vec![Int(1)]));
    // UNWATCH, and a client that disconnects, leave nothing watched.
    assert_eq!(a.cmd("WATCH k"), Value::status("OK"));
    assert_eq!(a.cmd("UNWATCH"), Value::status("OK"));
    assert_eq!(b.cmd("SET k 3"), Value::status("OK"));
    assert_eq!(a.cmd("MULTI"), Value::status("OK"));
    assert_eq!(a.cmd("INCR n"), queued());
    assert_eq!(a.cmd("EXEC"), Value::Array(vec![Int(2)]));

    const CLIENTS: usize = 4;
    const INCREMENTS: usize = 50;
    assert_eq!(a.cmd("SET cas 0"), Value::status("OK"));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                let mut aborted = 0;
                for _ in 0..INCREMENTS {
                    loop {
                        assert_eq!(c.cmd("WATCH cas"), Value::status("OK"));
                        let Value::Bulk(v) = c.cmd("GET cas") else {
                            panic!()
                        };
                        let n: i64 = std::str::from_utf8(&v).unwrap().parse().unwrap();
                        assert_eq!(c.cmd("MULTI"), Value::status("OK"));
                        assert_eq!(c.cmd(&format!("SET cas {}", n + 1)), queued());
                        match c.cmd("EXEC") {
                            Value::Array(_) => break,
                            NilArray => aborted += 1,
                            other => panic!("{other:?}"),
                        }
                    }
                }
                aborted
            })
        })
        .collect();
    let aborted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(
        a.cmd("GET cas"),
        Value::bulk(&(CLIENTS * INCREMENTS).to_string())
    );
    eprintln!("check-and-set: {aborted} transactions aborted and retried");
}

/// Pipelines of INCRs over keys in random orders, from several clients
/// at once (each pipeline one batch, holding the locks of the keys it
/// wrote until it is written, and on a lock another holds writing what
/// it has and waiting), beside clients incrementing one of those keys
/// by check-and-set: no batch deadlocks, no increment is lost, and no
/// check-and-set succeeds on a value a batch was about to replace (its
/// WATCH fires, or waits for the batch).
#[test]
fn pipelined_batches_and_watches_lose_no_update() {
    let (_d, s) = server();
    const KEYS: usize = 6;
    const PIPELINERS: usize = 4;
    const PIPELINES: usize = 150;
    const DEPTH: usize = 16;
    const CAS_CLIENTS: usize = 2;
    const CAS_INCREMENTS: usize = 60;
    let pipeliners: Vec<_> = (0..PIPELINERS)
        .map(|p| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                let mut counts = [0u64; KEYS];
                // A small linear congruential generator: each thread its
                // own sequence of keys.
                let mut x = 0x9e37_79b9_u64.wrapping_mul(p as u64 + 1);
                for _ in 0..PIPELINES {
                    let mut req = Vec::new();
                    let mut sent = 0;
                    for _ in 0..DEPTH {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        let k = (x >> 33) as usize % KEYS;
                        counts[k] += 1;
                        let key = format!("k{k}");
                        // Half the time read the key first: a batch that
                        // does not hold its lock must not keep what it read.
                        if x & (1 << 20) != 0 {
                            req.extend_from_slice(
                                format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len())
                                    .as_bytes(),
                            );
                            sent += 1;
                        }
                        req.extend_from_slice(
                            format!("*2\r\n$4\r\nINCR\r\n${}\r\n{key}\r\n", key.len()).as_bytes(),
                        );
                        sent += 1;
                    }
                    c.send_raw(&req);
                    for _ in 0..sent {
                        assert!(matches!(c.read(), Int(_) | Value::Bulk(_) | Value::Nil));
                    }
                }
                counts
            })
        })
        .collect();
    let cas: Vec<_> = (0..CAS_CLIENTS)
        .map(|_| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                for _ in 0..CAS_INCREMENTS {
                    loop {
                        assert_eq!(c.cmd("WATCH k0"), Value::status("OK"));
                        let n: i64 = match c.cmd("GET k0") {
                            Value::Bulk(v) => std::str::from_utf8(&v).unwrap().parse().unwrap(),
                            Value::Nil => 0,
                            other => panic!("{other:?}"),
                        };
                        assert_eq!(c.cmd("MULTI"), Value::status("OK"));
                        assert_eq!(c.cmd(&format!("SET k0 {}", n + 1)), queued());
                        match c.cmd("EXEC") {
                            Value::Array(_) => break,
                            NilArray => {}
                            other => panic!("{other:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    let mut totals = [0u64; KEYS];
    for p in pipeliners {
        for (t, n) in totals.iter_mut().zip(p.join().unwrap()) {
            *t += n;
        }
    }
    for c in cas {
        c.join().unwrap();
    }
    totals[0] += (CAS_CLIENTS * CAS_INCREMENTS) as u64;
    let mut c = s.client();
    for (k, total) in totals.iter().enumerate() {
        assert_eq!(
            c.cmd(&format!("GET k{k}")),
            Value::bulk(&total.to_string()),
            "k{k}"
        );
    }
}

/// Runs `line` (words split at spaces) as `client`.
fn run_line(shared: &Shared, client: &mut Client, line: &str) -> Reply {
    let args: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
    execute(&mut Ctx { shared, client }, &args)
}

/// A server's state over the file system `fs`, as the tests below drive it
/// without a socket.
fn open(fs: Arc<dyn Fs>) -> Shared {
    let store = Store::open(
        Path::new("/server"),
        Options {
            fs,
            ..Options::default()
        },
        FsyncMode::Always,
    )
    .unwrap();
    Shared::new(
        store,
        Limits {
            max_clients: 10,
            proto_max_bulk_len: 512 << 20,
            query_buffer_limit: 1 << 30,
        },
        Fixed {
            bind: "127.0.0.1".into(),
            port: 0,
            dir: "/server".into(),
            engine: vec![],
        },
    )
}

/// A transaction's writes reach the WAL as one append; when that append
/// fails, none of them is there, before or after a reopen.
#[test]
fn a_transaction_is_one_batch_on_disk() {
    let mem = Arc::new(MemFs::new());
    let faults = Arc::new(FaultFs::new(mem.clone()));
    let shared = open(faults.clone());
    let mut client = shared.connect("test".into()).unwrap();
    let mut run = |line: &str| run_line(&shared, &mut client, line);
    let transaction = |run: &mut dyn FnMut(&str) -> Reply, n: usize| {
        assert_eq!(run("MULTI"), Reply::ok());
        for line in [
            format!("SET s{n} v"),
            format!("RPUSH l{n} a b c"),
            format!("HSET h{n} f v"),
            format!("SADD t{n} m"),
            format!("ZADD z{n} 1 m"),
        ] {
            assert_eq!(run(&line), Reply::Status("QUEUED"));
        }
        run("EXEC")
    };
    let appends = faults.count(FaultOp::Append);
    let reply = transaction(&mut run, 1);
    assert!(
        matches!(&reply, Reply::Array(r) if r.len() == 5),
        "{reply:?}"
    );
    assert_eq!(faults.count(FaultOp::Append) - appends, 1, "one WAL append");
    // The next append fails: the whole transaction with it.
    faults.fail(
        &[FaultOp::Append],
        Some(".wal"),
        0,
        std::io::ErrorKind::Other,
        false,
    );
    let reply = transaction(&mut run, 2);
    assert!(reply.is_error(), "{reply:?}");
    assert_eq!(run("EXISTS s2 l2 h2 t2 z2"), Reply::Int(0));
    after_power_loss(
        shared,
        &mem,
        &[("EXISTS s1 l1 h1 t1 z1", 5), ("EXISTS s2 l2 h2 t2 z2", 0)],
    );
}

/// Drops `shared` and reopens its store as a power loss would leave
/// `mem`; each line then answers its count.
fn after_power_loss(shared: Shared, mem: &MemFs, checks: &[(&str, i64)]) {
    let Shared { store, .. } = shared;
    drop(store);
    let shared = open(Arc::new(mem.crash_clone()));
    let mut client = shared.connect("test".into()).unwrap();
    for (line, n) in checks {
        assert_eq!(
            run_line(&shared, &mut client, line),
            Reply::Int(*n),
            "{line}"
        );
    }
}

/// A pipeline's writes reach the WAL as one append; when that append
/// fails, every command of the pipeline answers the error (the reads too:
/// they may have seen the writes before them), and none of its writes is
/// there, before or after a reopen.
#[test]
fn a_pipeline_is_one_batch_on_disk() {
    let mem = Arc::new(MemFs::new());
    let faults = Arc::new(FaultFs::new(mem.clone()));
    let shared = open(faults.clone());
    let client = shared.connect("test".into()).unwrap();
    let pipeline = |n: usize| -> Vec<Vec<Vec<u8>>> {
        [
            format!("SET s{n} v"),
            format!("RPUSH l{n} a b c"),
            format!("GET s{n}"),
            format!("HSET h{n} f v"),
            format!("LRANGE l{n} 0 -1"),
        ]
        .iter()
        .map(|line| line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
        .collect()
    };
    let appends = faults.count(FaultOp::Append);
    let (client, out, _) = pipeline::execute(&shared, client, pipeline(1));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "+OK\r\n:3\r\n$1\r\nv\r\n:1\r\n*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(faults.count(FaultOp::Append) - appends, 1, "one WAL append");
    faults.fail(
        &[FaultOp::Append],
        Some(".wal"),
        0,
        std::io::ErrorKind::Other,
        false,
    );
    let (mut client, out, _) = pipeline::execute(&shared, client, pipeline(2));
    let out = String::from_utf8_lossy(&out);
    let replies: Vec<&str> = out.split_terminator("\r\n").collect();
    assert_eq!(replies.len(), 5, "{out}");
    assert!(replies.iter().all(|r| r.starts_with("-ERR ")), "{out}");
    assert_eq!(
        run_line(&shared, &mut client, "EXISTS s2 l2 h2"),
        Reply::Int(0)
    );
    after_power_loss(
        shared,
        &mem,
        &[("EXISTS s1 l1 h1", 3), ("EXISTS s2 l2 h2", 0)],
    );
}

/// A pipeline holding a transaction: EXEC's reply stands when the
/// pipeline's own write, after it, fails (EXEC wrote on its own, and said
/// so), while the commands after it answer the failure.
#[test]
fn a_failed_pipeline_leaves_the_exec_inside_it_answered() {
    let mem = Arc::new(MemFs::new());
    let faults = Arc::new(FaultFs::new(mem.clone()));
    let shared = open(faults.clone());
    let client = shared.connect("test".into()).unwrap();
    let requests: Vec<Vec<Vec<u8>>> = ["MULTI", "SET a 1", "EXEC", "SET b 2"]
        .iter()
        .map(|line| line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
        .collect();
    // EXEC's append goes through, the pipeline's after it fails.
    faults.fail(
        &[FaultOp::Append],
        Some(".wal"),
        1,
        std::io::ErrorKind::Other,
        false,
    );
    let (_, out, _) = pipeline::execute(&shared, client, requests);
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n-ERR "),
        "{out}"
    );
    after_power_loss(shared, &mem, &[("EXISTS a", 1), ("EXISTS b", 0)]);
}

/// A key a batch has written but not yet committed: a client that WATCHes
/// it then either reads the batch's value or has its EXEC aborted, never
/// succeeds on the value the batch replaces. (The batch holds the key's
/// lock until it is written, and WATCH waits for it.)
#[test]
fn a_watch_beside_an_unwritten_batch_never_succeeds_on_a_stale_value() {
    let shared = open(Arc::new(MemFs::new()));
    let mut writer = shared.connect("writer".into()).unwrap();
    let batch = shared.store.begin_batch();
    assert_eq!(run_line(&shared, &mut writer, "INCR k"), Reply::Int(1));
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let watcher = s.spawn(|| {
            let mut c = shared.connect("watcher".into()).unwrap();
            let tx = tx;
            assert_eq!(run_line(&shared, &mut c, "WATCH k"), Reply::ok());
            let read = run_line(&shared, &mut c, "GET k");
            tx.send(()).unwrap();
            assert_eq!(run_line(&shared, &mut c, "MULTI"), Reply::ok());
            assert_eq!(
                run_line(&shared, &mut c, "SET k from-the-watcher"),
                Reply::Status("QUEUED")
            );
            (read, run_line(&shared, &mut c, "EXEC"))
        });
        // Long enough for a watcher that does not wait to have read; one
        // that waits reads only after the commit below.
        let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
        batch.end().unwrap();
        let (read, exec) = watcher.join().unwrap();
        assert!(
            read == Reply::Bulk(b"1".to_vec()) || exec == Reply::NilArray,
            "read {read:?} before the batch was written, and EXEC answered {exec:?}"
        );
    });
}
