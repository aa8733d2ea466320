//! `cleave-server cluster ...`: administers a running group by sending one
//! CLUSTER command to a member over the Redis protocol, following a
//! redirect to the leader, as `redis-cli -c` would.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Redirects followed before giving up (the leader changing meanwhile).
const MAX_REDIRECTS: usize = 3;
/// Longest wait for a reply: ADD-LEARNER answers once the learner has
/// caught up, which may take a snapshot's transfer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Administer a replicated group (docs/cluster.md).
    #[command(
        after_help = "Examples:\n  cleave-server cluster --port 6381 init\n  cleave-server cluster --port 6381 add-learner 4 127.0.0.1:7104 127.0.0.1:6384\n  cleave-server cluster --port 6381 promote 4\n  cleave-server cluster --port 6381 info"
    )]
    Cluster {
        /// A member's host.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// A member's Redis port.
        #[arg(long, default_value_t = 6380)]
        port: u16,
        #[command(subcommand)]
        action: Action,
    },
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// Form the group: the member asked and its --peer list become its
    /// voters. Run once, on one member.
    Init,
    /// The group's state as the member sees it.
    Info,
    /// The members, Redis Cluster's CLUSTER NODES form.
    Nodes,
    /// Add a member that receives the log but does not vote; answers once
    /// it has caught up.
    AddLearner {
        id: u64,
        /// Its Raft transport, HOST:PORT.
        raft: String,
        /// Its Redis port, HOST:PORT.
        redis: String,
    },
    /// Make learners voters.
    Promote {
        #[arg(required = true)]
        ids: Vec<u64>,
    },
    /// Take members out of the group.
    Remove {
        #[arg(required = true)]
        ids: Vec<u64>,
    },
}

/// A reply, as much of RESP2 as CLUSTER answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Answer>),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Status(s) | Answer::Error(s) => write!(f, "{s}"),
            Answer::Int(i) => write!(f, "{i}"),
            Answer::Bulk(None) => write!(f, "(nil)"),
            Answer::Bulk(Some(b)) => write!(f, "{}", String::from_utf8_lossy(b).trim_end()),
            Answer::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{item}")?;
                }
                Ok(())
            }
        }
    }
}

pub fn run(command: &Command) -> Result<(), String> {
    let Command::Cluster { host, port, action } = command;
    let args: Vec<String> = match action {
        Action::Init => vec!["INIT".into()],
        Action::Info => vec!["INFO".into()],
        Action::Nodes => vec!["NODES".into()],
        Action::AddLearner { id, raft, redis } => {
            vec![
                "ADD-LEARNER".into(),
                id.to_string(),
                raft.clone(),
                redis.clone(),
            ]
        }
        Action::Promote { ids } => std::iter::once("PROMOTE".to_string())
            .chain(ids.iter().map(u64::to_string))
            .collect(),
        Action::Remove { ids } => std::iter::once("REMOVE".to_string())
            .chain(ids.iter().map(u64::to_string))
            .collect(),
    };
    let mut request = vec!["CLUSTER".to_string()];
    request.extend(args);
    let mut addr = format!("{host}:{port}");
    for _ in 0..=MAX_REDIRECTS {
        match call(&addr, &request)? {
            Answer::Error(e) => match e.strip_prefix("MOVED ") {
                Some(target) => {
                    addr = target
                        .split_once(' ')
                        .map(|(_, a)| a.to_string())
                        .ok_or_else(|| format!("{addr}: {e}"))?;
                }
                None => return Err(format!("{addr}: {e}")),
            },
            answer => {
                println!("{answer}");
                return Ok(());
            }
        }
    }
    Err(format!(
        "still redirected after {MAX_REDIRECTS} redirects (is the leader changing?)"
    ))
}

/// Sends `args` to the server at `addr` and reads one reply.
pub fn call(addr: &str, args: &[String]) -> Result<Answer, String> {
    let fail = |e: std::io::Error| format!("{addr}: {e}");
    let mut stream = TcpStream::connect(addr).map_err(fail)?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(fail)?;
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    stream.write_all(&out).map_err(fail)?;
    read_answer(&mut BufReader::new(stream)).map_err(|e| format!("{addr}: {e}"))
}

/// Most elements of an array or bytes of a bulk string a reply may hold.
const MAX_REPLY_LEN: i64 = 1 << 30;

pub fn read_answer<R: BufRead>(r: &mut R) -> Result<Answer, String> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if !line.ends_with(b"\r\n") || line.len() < 3 {
        return Err("the connection closed before a whole reply".into());
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let number = || {
        text.parse::<i64>()
            .map_err(|_| format!("a reply with length {text:?}"))
    };
    match line[0] {
        b'+' => Ok(Answer::Status(text)),
        b'-' => Ok(Answer::Error(text)),
        b':' => number().map(Answer::Int),
        b'$' => {
            let n = number()?;
            if n < 0 {
                return Ok(Answer::Bulk(None));
            }
            if n > MAX_REPLY_LEN {
                return Err(format!("a bulk reply of {n} bytes"));
            }
            let mut b = vec![0u8; n as usize + 2];
            r.read_exact(&mut b).map_err(|e| e.to_string())?;
            b.truncate(n as usize);
            Ok(Answer::Bulk(Some(b)))
        }
        b'*' => {
            let n = number()?;
            if n > MAX_REPLY_LEN {
                return Err(format!("an array reply of {n} elements"));
            }
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_answer(r)?);
            }
            Ok(Answer::Array(items))
        }
        other => Err(format!("a reply beginning with {:?}", other as char)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read() {
        let mut r: &[u8] = b"*3\r\n+OK\r\n:5\r\n$3\r\nabc\r\n-MOVED 1 h:2\r\n$-1\r\n";
        assert_eq!(
            read_answer(&mut r).unwrap(),
            Answer::Array(vec![
                Answer::Status("OK".into()),
                Answer::Int(5),
                Answer::Bulk(Some(b"abc".to_vec()))
            ])
        );
        assert_eq!(
            read_answer(&mut r).unwrap(),
            Answer::Error("MOVED 1 h:2".into())
        );
        assert_eq!(read_answer(&mut r).unwrap(), Answer::Bulk(None));
        assert!(read_answer(&mut r).is_err());
        let mut bad: &[u8] = b"$99999999999\r\n";
        assert!(read_answer(&mut bad).is_err());
    }
}
