//! Replies, written in RESP2 or RESP3 as the connection's `HELLO` chose.

use std::io::Write;

/// One reply. Types RESP2 lacks fall back to what Redis sends there: a map
/// to a flat array, a set to an array, a double to a bulk string, a
/// verbatim string to a bulk string, both nils to `$-1`/`*-1`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK` and the like.
    Status(&'static str),
    /// An error line without its `-`: `ERR ...`, `WRONGTYPE ...`.
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A missing array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Double(f64),
    /// Text with a three-letter format (`txt`): `=` in RESP3.
    Verbatim(String),
    /// Out-of-band data (a Pub/Sub message or subscription change): `>` in
    /// RESP3, an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies to one command, one after another (SUBSCRIBE
    /// answers once per channel).
    Many(Vec<Reply>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status("OK")
    }

    pub fn error(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    pub fn bulk(b: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(b.as_ref().to_vec())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the reply's bytes for protocol version `proto` (2 or 3).
    pub fn write_to(&self, proto: u8, out: &mut Vec<u8>) {
        let resp3 = proto >= 3;
        match self {
            Reply::Status(s) => {
                out.push(b'+');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(e) => {
                out.push(b'-');
                // A newline would end the error early and desynchronise
                // the client: Redis replaces them with spaces too.
                out.extend(
                    e.bytes()
                        .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
                );
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(i) => {
                let _ = write!(out, ":{i}\r\n");
            }
            Reply::Bulk(b) => write_bulk(b, out),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                let _ = write!(out, "*{}\r\n", items.len());
                for r in items {
                    r.write_to(proto, out);
                }
            }
            Reply::Set(items) => {
                let _ = write!(out, "{}{}\r\n", if resp3 { '~' } else { '*' }, items.len());
                for r in items {
                    r.write_to(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    let _ = write!(out, "%{}\r\n", pairs.len());
                } else {
                    let _ = write!(out, "*{}\r\n", pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.write_to(proto, out);
                    v.write_to(proto, out);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    let _ = write!(out, ",{text}\r\n");
                } else {
                    write_bulk(text.as_bytes(), out);
                }
            }
            Reply::Push(items) => {
                let _ = write!(out, "{}{}\r\n", if resp3 { '>' } else { '*' }, items.len());
                for r in items {
                    r.write_to(proto, out);
                }
            }
            Reply::Many(replies) => {
                for r in replies {
                    r.write_to(proto, out);
                }
            }
            Reply::Verbatim(text) => {
                if resp3 {
                    let _ = write!(out, "={}\r\ntxt:", text.len() + 4);
                    out.extend_from_slice(text.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    write_bulk(text.as_bytes(), out);
                }
            }
        }
    }
}

fn write_bulk(b: &[u8], out: &mut Vec<u8>) {
    let _ = write!(out, "${}\r\n", b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// A double as Redis prints scores: the shortest text that reads back to
/// the same value, `inf` and `-inf` for the infinities.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's shortest round-trip form, which writes integral values
    // without a fraction ("3"), as Redis does.
    format!("{d}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> String {
        let mut out = Vec::new();
        r.write_to(proto, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn pushes_and_several_replies() {
        let push = Reply::Push(vec![
            Reply::bulk("message"),
            Reply::bulk("c"),
            Reply::Int(1),
        ]);
        assert_eq!(enc(&push, 2), "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n:1\r\n");
        assert_eq!(enc(&push, 3), ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n:1\r\n");
        let many = Reply::Many(vec![Reply::Int(1), Reply::Int(2)]);
        assert_eq!(enc(&many, 2), ":1\r\n:2\r\n");
    }

    #[test]
    fn resp2_and_resp3_forms() {
        let map = Reply::Map(vec![(Reply::bulk("f"), Reply::bulk("v"))]);
        assert_eq!(enc(&map, 2), "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(enc(&map, 3), "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(enc(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), "*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 2), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(3.0), 3), ",3\r\n");
        assert_eq!(enc(&Reply::Double(f64::NEG_INFINITY), 3), ",-inf\r\n");
        assert_eq!(enc(&Reply::Set(vec![Reply::Int(1)]), 3), "~1\r\n:1\r\n");
        assert_eq!(enc(&Reply::Verbatim("a".into()), 3), "=5\r\ntxt:a\r\n");
        assert_eq!(enc(&Reply::Verbatim("a".into()), 2), "$1\r\na\r\n");
    }

    #[test]
    fn errors_stay_on_one_line() {
        assert_eq!(enc(&Reply::error("ERR a\r\nb"), 2), "-ERR a  b\r\n");
    }
}
