//! A group of cleave-server cluster members on loopback, and a client
//! that follows the leader and records what it saw, for the failure tests.
#![allow(dead_code)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{spawn_until_ready, Client, Value};
use crate::linearizability::{Kind, Op};

/// How long the tests wait for anything a group does (an election, a
/// catch-up) before they fail.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A port free now (bound and let go).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[derive(Debug, Clone)]
pub struct Addrs {
    pub id: u64,
    pub port: u16,
    pub raft_port: u16,
}

impl Addrs {
    pub fn new(id: u64) -> Addrs {
        Addrs {
            id,
            port: free_port(),
            raft_port: free_port(),
        }
    }

    pub fn peer_flag(&self) -> String {
        format!(
            "{}=127.0.0.1:{},127.0.0.1:{}",
            self.id, self.raft_port, self.port
        )
    }
}

pub struct Member {
    pub addrs: Addrs,
    pub dir: PathBuf,
    pub child: Option<Child>,
    peers: Vec<String>,
    extra: Vec<String>,
}

impl Member {
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "node {} runs already", self.addrs.id);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cleave-server"));
        cmd.arg("--dir")
            .arg(&self.dir)
            .args(["--cluster", "--cluster-test-hooks"])
            .args(["--node-id", &self.addrs.id.to_string()])
            .args(["--port", &self.addrs.port.to_string()])
            .args(["--raft-port", &self.addrs.raft_port.to_string()])
            .args(["--threads", "2", "--write-buffer-size", "4194304"]);
        for p in &self.peers {
            cmd.args(["--peer", p]);
        }
        cmd.args(&self.extra);
        self.child = Some(spawn_until_ready(&mut cmd).0);
    }

    /// SIGKILL, and wait.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addrs.port)
    }

    /// CLUSTER INFO's fields.
    pub fn info(&self) -> Option<Vec<(String, String)>> {
        let stream = TcpStream::connect(("127.0.0.1", self.addrs.port)).ok()?;
        drop(stream);
        let mut c = self.client();
        match c.cmd("CLUSTER INFO") {
            Value::Verbatim(s) => Some(parse_info(&s)),
            Value::Bulk(b) => Some(parse_info(&String::from_utf8_lossy(&b))),
            other => panic!("CLUSTER INFO: {other:?}"),
        }
    }

    pub fn field(&self, name: &str) -> Option<String> {
        self.info()?
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

fn parse_info(s: &str) -> Vec<(String, String)> {
    s.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct Group {
    pub members: Vec<Member>,
    _tmp: tempfile::TempDir,
}

impl Group {
    /// Starts `n` members (ids 1..=n) with `extra` flags each, and forms
    /// the group.
    pub fn start(n: u64, extra: &[&str]) -> Group {
        let tmp = tempfile::tempdir().unwrap();
        let addrs: Vec<Addrs> = (1..=n).map(Addrs::new).collect();
        let mut members: Vec<Member> = addrs
            .iter()
            .map(|a| Member {
                addrs: a.clone(),
                dir: tmp.path().join(format!("n{}", a.id)),
                child: None,
                peers: addrs
                    .iter()
                    .filter(|p| p.id != a.id)
                    .map(Addrs::peer_flag)
                    .collect(),
                extra: extra.iter().map(|s| s.to_string()).collect(),
            })
            .collect();
        for m in &mut members {
            m.start();
        }
        assert_eq!(members[0].client().cmd("CLUSTER INIT"), Value::status("OK"));
        let group = Group { members, _tmp: tmp };
        group.wait_for_leader(&[]);
        group
    }

    /// Adds a member that is not in the group yet (for ADD-LEARNER).
    pub fn add_member(&mut self, id: u64, extra: &[&str]) -> &mut Member {
        let dir = self._tmp.path().join(format!("n{id}"));
        self.members.push(Member {
            addrs: Addrs::new(id),
            dir,
            child: None,
            peers: Vec::new(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        });
        let m = self.members.last_mut().unwrap();
        m.start();
        m
    }

    pub fn member(&self, id: u64) -> &Member {
        self.members.iter().find(|m| m.addrs.id == id).unwrap()
    }

    pub fn member_mut(&mut self, id: u64) -> &mut Member {
        self.members.iter_mut().find(|m| m.addrs.id == id).unwrap()
    }

    /// Waits until the running members outside `ignore` agree on one
    /// leader among them; returns its id.
    pub fn wait_for_leader(&self, ignore: &[u64]) -> u64 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(id) = self.agreed_leader(ignore) {
                return id;
            }
            assert!(Instant::now() < deadline, "no leader within {PATIENCE:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The leader every running member outside `ignore` names, if they
    /// agree and it says it leads.
    pub fn agreed_leader(&self, ignore: &[u64]) -> Option<u64> {
        let mut leader = None;
        for m in self
            .members
            .iter()
            .filter(|m| m.running() && !ignore.contains(&m.addrs.id))
        {
            let named: u64 = m.field("raft_leader_id")?.parse().ok()?;
            if ignore.contains(&named) || leader.is_some_and(|l| l != named) {
                return None;
            }
            leader = Some(named);
        }
        let id = leader?;
        (self.member(id).field("raft_state")? == "leader").then_some(id)
    }

    pub fn ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.addrs.port).collect()
    }

    /// Waits until member `id` has applied at least `index`.
    pub fn wait_applied(&self, id: u64, index: u64) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let applied = self.applied(id);
            if applied >= index {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {id} applied {applied}, not {index}, within {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last log index member `id` has applied.
    pub fn applied(&self, id: u64) -> u64 {
        self.member(id)
            .field("raft_last_applied_index")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Waits until each running member has applied what the leader has,
    /// checks that they all hold the same keys and values, and returns
    /// them.
    pub fn all_agree(&self) -> Vec<(Vec<u8>, Value)> {
        let leader = self.wait_for_leader(&[]);
        let applied = self.applied(leader);
        let want = self.contents(leader);
        for m in self.members.iter().filter(|m| m.running()) {
            self.wait_applied(m.addrs.id, applied);
            assert_eq!(self.contents(m.addrs.id), want, "node {}", m.addrs.id);
        }
        want
    }

    /// Every key member `id` holds and what it holds (a string's value,
    /// a hash's fields), read from its own state.
    pub fn contents(&self, id: u64) -> Vec<(Vec<u8>, Value)> {
        let mut c = self.member(id).client();
        assert_eq!(c.cmd("READONLY"), Value::status("OK"));
        let mut keys = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let Value::Array(reply) = c.cmd(&format!("SCAN {cursor} COUNT 1000")) else {
                panic!("SCAN");
            };
            let (Value::Bulk(next), Value::Array(batch)) = (&reply[0], &reply[1]) else {
                panic!("SCAN {reply:?}");
            };
            for k in batch {
                let Value::Bulk(k) = k else { panic!() };
                keys.push(k.clone());
            }
            cursor = String::from_utf8(next.clone()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        keys.sort();
        keys.into_iter()
            .map(|k| {
                let value = match c.call(&[b"TYPE".as_slice(), &k]) {
                    Value::Status(t) if t == "string" => c.call(&[b"GET".as_slice(), &k]),
                    Value::Status(t) if t == "hash" => c.call(&[b"HGETALL".as_slice(), &k]),
                    Value::Status(t) if t == "zset" => c.call(&[
                        b"ZRANGEBYSCORE".as_slice(),
                        &k,
                        b"-inf",
                        b"+inf",
                        b"WITHSCORES",
                    ]),
                    other => panic!("TYPE: {other:?}"),
                };
                (k, value)
            })
            .collect()
    }
}

/// A client of the group that finds the leader (following MOVED, trying
/// the members in turn) and records every operation with its times.
pub struct Recorder {
    ports: Vec<u16>,
    conn: Option<(u16, Client)>,
    start: Instant,
    pub history: Vec<Op>,
    pub acknowledged_writes: usize,
}

impl Recorder {
    pub fn new(ports: Vec<u16>, start: Instant) -> Recorder {
        Recorder {
            ports,
            conn: None,
            start,
            history: Vec::new(),
            acknowledged_writes: 0,
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn connect(&mut self, port: u16) -> bool {
        self.conn = Client::try_connect(port, Duration::from_secs(15)).map(|c| (port, c));
        self.conn.is_some()
    }

    /// One request; `None` if the connection failed or the answer was a
    /// redirect or a refusal (after which the client looks again).
    fn request(&mut self, args: &[&[u8]]) -> Option<Value> {
        if self.conn.is_none() {
            let ports = self.ports.clone();
            let first = (self.now() / 1000) as usize % ports.len();
            if !(0..ports.len()).any(|i| self.connect(ports[(first + i) % ports.len()])) {
                std::thread::sleep(Duration::from_millis(50));
                return None;
            }
        }
        let (_, c) = self.conn.as_mut()?;
        if c.stream.write_all(&encode(args)).is_err() {
            self.conn = None;
            return None;
        }
        let reply = c.try_read_checked();
        match reply {
            Some(Value::Error(e)) if e.starts_with("MOVED ") => {
                let port: u16 = e
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(0);
                self.conn = None;
                if !self.connect(port) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                None
            }
            Some(Value::Error(e)) if e.starts_with("CLUSTERDOWN") || e.starts_with("TRYAGAIN") => {
                self.conn = None;
                std::thread::sleep(Duration::from_millis(20));
                None
            }
            Some(v) => Some(v),
            None => {
                self.conn = None;
                None
            }
        }
    }

    /// SET key value; recorded, its outcome unknown unless acknowledged.
    pub fn write(&mut self, key: &[u8], value: &[u8]) -> bool {
        let invoked = self.now();
        let ok = self.request(&[b"SET".as_slice(), key, value]) == Some(Value::status("OK"));
        let returned = ok.then(|| self.now());
        if ok {
            self.acknowledged_writes += 1;
        }
        self.history.push(Op {
            key: key.to_vec(),
            kind: Kind::Write(value.to_vec()),
            invoked,
            returned,
        });
        ok
    }

    /// GET key; recorded if answered.
    pub fn read(&mut self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let invoked = self.now();
        let value = match self.request(&[b"GET".as_slice(), key])? {
            Value::Bulk(v) => Some(v),
            Value::Nil => None,
            other => panic!("GET answered {other:?}"),
        };
        self.history.push(Op {
            key: key.to_vec(),
            kind: Kind::Read(value.clone()),
            invoked,
            returned: Some(self.now()),
        });
        Some(value)
    }
}

/// Runs `threads` recorders over `keys` keys until `stop`, each doing
/// writes of unique values and reads; returns their histories and the
/// number of acknowledged writes.
pub fn load(
    ports: Vec<u16>,
    threads: usize,
    keys: usize,
    stop: Arc<AtomicBool>,
    start: Instant,
    max_ops_per_thread: usize,
) -> std::thread::JoinHandle<(Vec<Op>, usize)> {
    std::thread::spawn(move || {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (ports, stop) = (ports.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut r = Recorder::new(ports, start);
                    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) && i < max_ops_per_thread {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        let key = format!("k{}", state % keys as u64);
                        if state % 8 < 5 {
                            r.write(key.as_bytes(), format!("t{t}-{i}").as_bytes());
                        } else {
                            r.read(key.as_bytes());
                        }
                        i += 1;
                    }
                    (r.history, r.acknowledged_writes)
                })
            })
            .collect();
        let mut history = Vec::new();
        let mut acked = 0;
        for h in handles {
            let (ops, n) = h.join().unwrap();
            history.extend(ops);
            acked += n;
        }
        (history, acked)
    })
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        req.extend_from_slice(a);
        req.extend_from_slice(b"\r\n");
    }
    req
}

pub fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}
