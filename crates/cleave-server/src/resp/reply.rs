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
                put_line(out, b':', *i);
            }
            Reply::Bulk(b) => write_bulk(b, out),
            Reply::Nil if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                put_line(out, b'*', items.len() as i64);
                for r in items {
                    r.write_to(proto, out);
                }
            }
            Reply::Set(items) => {
                put_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
                for r in items {
                    r.write_to(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    put_line(out, b'%', pairs.len() as i64);
                } else {
                    put_line(out, b'*', pairs.len() as i64 * 2);
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
                put_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
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

/// `prefix`, `n` in decimal and CRLF: the line of an integer and the
/// header of every array and bulk string, so written without `fmt`.
fn put_line(out: &mut Vec<u8>, prefix: u8, n: i64) {
    // "-9223372036854775808" is 20 bytes.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    out.push(prefix);
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

fn write_bulk(b: &[u8], out: &mut Vec<u8>) {
    put_line(out, b'$', b.len() as i64);
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
    fn integers_are_written_in_decimal() {
        for i in [
            0,
            7,
            -7,
            10,
            4_294_967_296,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ] {
            assert_eq!(enc(&Reply::Int(i), 2), format!(":{i}\r\n"));
        }
        assert_eq!(
            enc(&Reply::Bulk(vec![b'x'; 12]), 2),
            format!("$12\r\n{}\r\n", "x".repeat(12))
        );
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
