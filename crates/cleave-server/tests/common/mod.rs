//! A cleave-server process for tests, and a small RESP client that reads
//! replies exactly as sent.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Server {
    /// Starts a server on a free port over `dir`, with extra flags.
    pub fn start(dir: &Path, flags: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cleave-server"));
        cmd.arg("--dir").arg(dir).args(["--port", "0"]).args(flags);
        let (child, line) = spawn_until_ready(&mut cmd);
        let port = line
            .split_whitespace()
            .find_map(|w| w.strip_suffix(',')?.rsplit(':').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    /// SIGKILL, and wait.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM; the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) with a pid this test started; no memory involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

/// Starts `cmd` (a cleave-server) and waits for its start-up line, which
/// it returns.
pub fn spawn_until_ready(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start cleave-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("ready"), "{line:?}");
    (child, line)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reply as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    /// RESP3 map, set, double, verbatim: kept apart to check the framing.
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Double(String),
    Verbatim(String),
    NilArray,
}

impl Value {
    pub fn bulk(s: &str) -> Value {
        Value::Bulk(s.as_bytes().to_vec())
    }

    pub fn status(s: &str) -> Value {
        Value::Status(s.to_string())
    }

    pub fn err(s: &str) -> Value {
        Value::Error(s.to_string())
    }

    pub fn bulks(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| Value::bulk(s)).collect())
    }
}

pub struct Client {
    pub stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Client::connect_with_timeout(port, Duration::from_secs(30))
    }

    pub fn connect_with_timeout(port: u16, timeout: Duration) -> Client {
        Client::try_connect(port, timeout).expect("connect to the server")
    }

    /// A connection, or `None` if the server is not there (any more).
    pub fn try_connect(port: u16, timeout: Duration) -> Option<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(timeout)).ok()?;
        Some(Client {
            reader: BufReader::new(stream.try_clone().ok()?),
            stream,
        })
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.send_raw(&req);
    }

    /// Sends a command (words split on spaces) and reads its reply.
    pub fn cmd(&mut self, line: &str) -> Value {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.send(&args);
        self.read()
    }

    /// Sends a command given as separate arguments and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Value {
        self.send(args);
        self.read()
    }

    pub fn read(&mut self) -> Value {
        self.try_read().expect("a reply")
    }

    /// A reply, or `None` if the connection failed in any way (closed,
    /// reset, timed out) before a whole reply came.
    pub fn try_read_checked(&mut self) -> Option<Value> {
        if matches!(self.reader.fill_buf(), Ok([]) | Err(_)) {
            return None;
        }
        // A reply cut off by a killed server fails `try_read`'s checks.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.try_read()))
            .ok()
            .flatten()
    }

    /// A reply, or `None` if the server closed the connection.
    pub fn try_read(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.strip_suffix("\r\n").expect("CRLF");
        let (kind, rest) = line.split_at(1);
        Some(match kind {
            "+" => Value::Status(rest.into()),
            "-" => Value::Error(rest.into()),
            ":" => Value::Int(rest.parse().unwrap()),
            "_" => Value::Nil,
            "," => Value::Double(rest.into()),
            "$" | "=" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Some(Value::Nil);
                }
                let mut b = vec![0; n as usize + 2];
                self.reader.read_exact(&mut b).unwrap();
                b.truncate(n as usize);
                if kind == "=" {
                    Value::Verbatim(String::from_utf8(b).unwrap())
                } else {
                    Value::Bulk(b)
                }
            }
            "*" | "~" | "%" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Some(Value::NilArray);
                }
                let items = (0..n * if kind == "%" { 2 } else { 1 })
                    .map(|_| self.read())
                    .collect::<Vec<_>>();
                match kind {
                    "*" => Value::Array(items),
                    "~" => Value::Set(items),
                    _ => Value::Map(
                        items
                            .chunks(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .collect(),
                    ),
                }
            }
            other => panic!("unknown reply type {other:?}"),
        })
    }
}
