//! Bad input: malformed RESP, oversized bulk strings and arrays, half-sent
//! requests, dropped connections, too many clients. None of it crashes
//! the server or disturbs another client; a client is disconnected with an
//! error where Redis disconnects it.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::{Server, Value};

fn server(flags: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), flags);
    (dir, server)
}

/// Sends `bytes` on a new connection; the reply, and whether the server
/// then closed the connection.
fn exchange(s: &Server, bytes: &[u8]) -> (Value, bool) {
    let mut c = s.client();
    c.send_raw(bytes);
    let reply = c.read();
    (reply, c.try_read().is_none())
}

#[test]
fn malformed_requests_get_redis_errors_and_a_close() {
    let (_d, s) = server(&[]);
    let cases: [(&[u8], &str); 6] = [
        (b"*x\r\n", "ERR Protocol error: invalid multibulk length"),
        (
            b"*1\r\n+PING\r\n",
            "ERR Protocol error: expected '$', got '+'",
        ),
        (b"*1\r\n$-3\r\n", "ERR Protocol error: invalid bulk length"),
        (
            b"*1\r\n$1\r\nxyz\r\n",
            "ERR Protocol error: bulk string not followed by CRLF",
        ),
        (
            b"*3000000000\r\n",
            "ERR Protocol error: invalid multibulk length",
        ),
        (
            b"SET \"a\"b c\r\n",
            "ERR Protocol error: unbalanced quotes in request",
        ),
    ];
    for (bytes, error) in cases {
        assert_eq!(
            exchange(&s, bytes),
            (Value::err(error), true),
            "{}",
            bytes.escape_ascii()
        );
    }
    // Commands before the bad one in the same packet are answered first.
    let mut c = s.client();
    c.send_raw(b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n!");
    assert_eq!(c.read(), Value::status("PONG"));
    assert_eq!(c.read(), Value::status("PONG"));
    assert_eq!(
        c.read(),
        Value::err("ERR Protocol error: expected '$', got '!'")
    );
    assert_eq!(c.try_read(), None);
    // Also when one of them waits (a blocked pop, here, woken by another
    // client's push): the ones held behind it run, then the error.
    let mut c = s.client();
    c.send_raw(b"BLPOP l 0\r\nSET b 2\r\n*1\r\n!");
    assert_eq!(s.client().cmd("RPUSH l x"), Value::Int(1));
    assert_eq!(c.read(), Value::bulks(&["l", "x"]));
    assert_eq!(c.read(), Value::status("OK"));
    assert_eq!(
        c.read(),
        Value::err("ERR Protocol error: expected '$', got '!'")
    );
    assert_eq!(c.try_read(), None);
    // The server is unharmed.
    assert_eq!(s.client().cmd("PING"), Value::status("PONG"));
}

#[test]
fn oversized_bulk_strings_and_inline_lines_are_refused() {
    let (_d, s) = server(&["--proto-max-bulk-len", "1048576"]);
    let (reply, closed) = exchange(&s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n");
    assert_eq!(reply, Value::err("ERR Protocol error: invalid bulk length"));
    assert!(closed);
    let mut line = vec![b'a'; 70_000];
    line.push(b' ');
    let (reply, closed) = exchange(&s, &line);
    assert_eq!(
        reply,
        Value::err("ERR Protocol error: too big inline request")
    );
    assert!(closed);
    // At the limit, it is taken.
    let mut c = s.client();
    let value = vec![b'v'; 1 << 20];
    assert_eq!(c.call(&[b"SET", b"k", &value]), Value::status("OK"));
    assert_eq!(c.call(&[b"STRLEN", b"k"]), Value::Int(1 << 20));
    // A key cleave cannot hold is an error, not a crash.
    let key = vec![b'k'; 70_000];
    let Value::Error(e) = c.call(&[b"SET", &key, b"v"]) else {
        panic!()
    };
    assert!(e.starts_with("ERR key of 70000 bytes"), "{e}");
    let Value::Error(e) = c.call(&[b"HSET", b"h", &key, b"v"]) else {
        panic!()
    };
    assert!(e.starts_with("ERR key and field"), "{e}");
}

/// A client that sends part of a request and stops, or goes away in the
/// middle of one, holds up no one else.
#[test]
fn half_sent_requests_and_dropped_connections_affect_no_one_else() {
    let (_d, s) = server(&[]);
    let mut stalled = s.client();
    stalled.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nhalf");
    // Big announced lengths, never sent.
    let mut big = s.client();
    big.send_raw(b"*2\r\n$3\r\nGET\r\n$100000000\r\nabc");
    for _ in 0..20 {
        let mut gone = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        gone.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nab").unwrap();
        drop(gone);
    }
    let mut c = s.client();
    assert_eq!(c.cmd("SET other v"), Value::status("OK"));
    assert_eq!(c.cmd("GET other"), Value::bulk("v"));
    // The stalled request completes when the rest arrives.
    stalled.send_raw(b"-rest!\r\n");
    assert_eq!(stalled.read(), Value::status("OK"));
    assert_eq!(c.cmd("GET k"), Value::bulk("half-rest!"));
    // A pipeline cut in the middle: what was whole ran.
    let mut cut = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    cut.write_all(
        b"*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$1\r\n",
    )
    .unwrap();
    cut.shutdown(std::net::Shutdown::Both).unwrap();
    drop(cut);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd("PING"), Value::status("PONG"));
}

#[test]
fn query_buffer_limit_disconnects_the_client_only() {
    let (_d, s) = server(&["--client-query-buffer-limit", "1048576"]);
    let mut greedy = s.client();
    greedy.send_raw(b"*2\r\n$3\r\nGET\r\n$4000000\r\n");
    let chunk = vec![b'x'; 64 << 10];
    let mut sent = 0;
    // The server closes the connection after 1 MiB; writes then fail.
    while sent < 4_000_000 {
        if greedy.stream.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert_eq!(greedy.try_read(), None);
    assert_eq!(s.client().cmd("PING"), Value::status("PONG"));
}

#[test]
fn maxclients_refuses_the_one_too_many() {
    let (_d, s) = server(&["--maxclients", "2"]);
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd("PING"), Value::status("PONG"));
    assert_eq!(b.cmd("PING"), Value::status("PONG"));
    let mut c = s.client();
    assert_eq!(c.read(), Value::err("ERR max number of clients reached"));
    assert_eq!(c.try_read(), None);
    drop(a);
    // The slot frees once the server sees the close.
    let mut tries = 0;
    loop {
        let mut d = s.client();
        d.send_raw(b"PING\r\n");
        if d.read() == Value::status("PONG") {
            break;
        }
        tries += 1;
        assert!(tries < 100, "the closed client's slot never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.cmd("PING"), Value::status("PONG"));
}

#[test]
fn inline_commands_work_as_with_telnet() {
    let (_d, s) = server(&[]);
    let mut c = s.client();
    c.send_raw(b"set greeting \"hello world\"\r\nget greeting\n\r\nPING\r\n");
    assert_eq!(c.read(), Value::status("OK"));
    assert_eq!(c.read(), Value::bulk("hello world"));
    assert_eq!(c.read(), Value::status("PONG"));
}

/// Random bytes from many clients at once: the server answers or closes
/// each, and keeps serving.
#[test]
fn random_garbage_never_takes_the_server_down() {
    use rand::{Rng, SeedableRng};
    let (_d, s) = server(&["--proto-max-bulk-len", "1048576"]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    let alphabet: &[u8] = b"*$+-:\r\n0123456789 \"'\\abcSETGETHSETZADD";
    for _ in 0..200 {
        let len = rng.gen_range(1..200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
            .collect();
        let mut conn = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let _ = conn.write_all(&bytes);
        drop(conn);
    }
    let mut c = s.client();
    assert_eq!(c.cmd("PING"), Value::status("PONG"));
}
