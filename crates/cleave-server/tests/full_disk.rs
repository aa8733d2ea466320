//! cleave-server on a full disk (a small ext4 file system the test mounts;
//! where it cannot, it says so and passes): writes are answered with
//! Redis's MISCONF error, reads go on, INFO's persistence section shows the
//! state, and writes are taken again by themselves once space is freed.

mod common;

#[path = "../../cleave/tests/common/mount.rs"]
mod mount;

use std::time::{Duration, Instant};

use common::{Client, Server, Value};
use mount::Mounted;

fn info_field(c: &mut Client, name: &str) -> String {
    let text = match c.cmd("INFO persistence") {
        Value::Verbatim(s) => s,
        Value::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("INFO: {other:?}"),
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .to_string()
}

fn value(i: usize) -> Vec<u8> {
    // 64 KiB: to a value log as it is written.
    let mut v = format!("{i}:").into_bytes();
    v.resize(64 << 10, b'a' + (i % 26) as u8);
    v
}

#[test]
fn a_full_disk_refuses_writes_serves_reads_and_recovers() {
    let Some(disk) = Mounted::ext4("a_full_disk_refuses_writes_serves_reads_and_recovers") else {
        return;
    };
    disk.ballast(12 << 20);
    let server = Server::start(&disk.db(), &["--appendfsync", "always"]);
    let mut c = server.client();
    assert_eq!(info_field(&mut c, "cleave_write_state"), "read-write");
    let mut acked = Vec::new();
    let refusal = loop {
        let i = acked.len();
        assert!(i < 10_000, "the disk never filled");
        match c.call(&[b"SET", format!("k{i}").as_bytes(), &value(i)]) {
            Value::Status(s) if s == "OK" => acked.push(i),
            Value::Error(e) => break e,
            other => panic!("SET: {other:?}"),
        }
    };
    assert!(
        refusal.starts_with("MISCONF Errors writing to the database: no space left"),
        "{refusal}"
    );
    // Refused at once, every kind of write.
    for cmd in ["SET x y", "DEL k0", "HSET h f v", "INCR n"] {
        match c.cmd(cmd) {
            Value::Error(e) => assert!(e.starts_with("MISCONF"), "{cmd}: {e}"),
            other => panic!("{cmd}: {other:?}"),
        }
    }
    for &i in acked.iter().step_by(7) {
        assert_eq!(
            c.call(&[b"GET", format!("k{i}").as_bytes()]),
            Value::Bulk(value(i)),
            "k{i}"
        );
    }
    assert_eq!(info_field(&mut c, "cleave_write_state"), "read-only");
    assert_eq!(info_field(&mut c, "cleave_write_state_reason"), "no_space");
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "err");

    disk.free_ballast();
    let start = Instant::now();
    loop {
        match c.cmd("SET after-the-ballast yes") {
            Value::Status(s) if s == "OK" => break,
            Value::Error(e) if e.starts_with("MISCONF") => {}
            other => panic!("SET: {other:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "writes never resumed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut c, "cleave_write_state"), "read-write");
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "ok");
    assert_eq!(info_field(&mut c, "cleave_resumes"), "1");
    for &i in &acked {
        assert_eq!(
            c.call(&[b"GET", format!("k{i}").as_bytes()]),
            Value::Bulk(value(i)),
            "k{i}"
        );
    }
}
