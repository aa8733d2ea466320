//! Requests as Redis reads them: RESP arrays of bulk strings, or inline
//! commands (a line of space-separated words, as telnet sends them), with
//! Redis's limits and its protocol error messages.

/// Longest inline command, or `*`/`$` header line, Redis reads before it
/// gives up: `PROTO_INLINE_MAX_SIZE`, 64 KiB.
pub const INLINE_MAX_BYTES: usize = 64 << 10;

/// Most elements in one request's array (Redis: `INT_MAX`).
pub const MAX_MULTIBULK_LEN: u64 = i32::MAX as u64;

/// Elements reserved up front for an array, whatever its header claims: a
/// client sending `*2000000000` then nothing must not cost memory.
const PREALLOCATED_ARGS: usize = 1024;

/// A request's arguments and the bytes it took from the buffer.
pub type Request = (Vec<Vec<u8>>, usize);

/// A malformed request. The message is Redis's, after `ERR Protocol error: `;
/// the connection is closed once the error is sent, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Parses one request from the front of `buf`: `Ok(Some((args, used)))`
/// with the bytes it took, `Ok(None)` if `buf` holds only part of it, or
/// `Err` if it can never be a request. An empty inline line yields an
/// empty `args`, which the caller skips.
pub fn parse_request(buf: &[u8], max_bulk_len: u64) -> Result<Option<Request>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_multibulk(buf, max_bulk_len),
        Some(_) => parse_inline(buf),
    }
}

/// The line starting at `from`, without its `\r\n`, and the offset after it.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = &buf[from..];
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let end = if nl > 0 && rest[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    Some((&rest[..end], from + nl + 1))
}

/// A decimal header number as Redis's `string2ll` accepts it.
fn header_number(digits: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(digits).ok()?;
    if s.is_empty() || s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

fn parse_multibulk(buf: &[u8], max_bulk_len: u64) -> Result<Option<Request>, ProtocolError> {
    let Some((header, mut pos)) = line(buf, 1) else {
        if buf.len() > INLINE_MAX_BYTES {
            return Err(ProtocolError("too big mbulk count string".into()));
        }
        return Ok(None);
    };
    let count = match header_number(header) {
        Some(n) if n <= MAX_MULTIBULK_LEN as i64 => n,
        _ => return Err(ProtocolError("invalid multibulk length".into())),
    };
    if count <= 0 {
        return Ok(Some((Vec::new(), pos)));
    }
    let count = count as usize;
    let mut args = Vec::with_capacity(count.min(PREALLOCATED_ARGS));
    for _ in 0..count {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => {
                return Err(ProtocolError(format!(
                    "expected '$', got '{}'",
                    char::from(other)
                )))
            }
        }
        let Some((header, start)) = line(buf, pos + 1) else {
            if buf.len() - pos > INLINE_MAX_BYTES {
                return Err(ProtocolError("too big bulk count string".into()));
            }
            return Ok(None);
        };
        let len = match header_number(header) {
            Some(n) if n >= 0 && n as u64 <= max_bulk_len => n as usize,
            _ => return Err(ProtocolError("invalid bulk length".into())),
        };
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            // Redis skips the two bytes unchecked; a client that sent
            // something else sent a wrong length, and what follows would be
            // read as commands.
            return Err(ProtocolError("bulk string not followed by CRLF".into()));
        }
        args.push(buf[start..end].to_vec());
        pos = end + 2;
    }
    Ok(Some((args, pos)))
}

fn parse_inline(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
    let Some((text, used)) = line(buf, 0) else {
        if buf.len() > INLINE_MAX_BYTES {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    let args =
        split_args(text).ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))?;
    Ok(Some((args, used)))
}

/// Splits a line into words as Redis's `sdssplitargs`: spaces separate;
/// `"..."` takes the escapes `\n \r \t \b \a \\ \" \xHH`; `'...'` takes only
/// `\'`; a closing quote must be followed by a space or the end. `None`
/// for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = line.get(i).copied();
            if in_double {
                let c = c?;
                if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok();
                    if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        word.push(b);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    word.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
            } else if in_single {
                let c = c?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    word.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
            } else {
                match c {
                    None => break,
                    Some(b) if b.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(b) => word.push(b),
                }
            }
            i += 1;
        }
        args.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 << 20;

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_requests_parse_whole_or_not_at_all() {
        let req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
        let (a, used) = parse_request(req, MAX).unwrap().unwrap();
        assert_eq!(a, args(&["SET", "k", "hello"]));
        let (b, used2) = parse_request(&req[used..], MAX).unwrap().unwrap();
        assert_eq!(b, args(&["PING"]));
        assert_eq!(used + used2, req.len());
        // Every strict prefix is incomplete, never an error.
        for cut in 0..used {
            assert_eq!(parse_request(&req[..cut], MAX).unwrap(), None, "{cut}");
        }
    }

    #[test]
    fn binary_bulk_strings_keep_every_byte() {
        let req = b"*2\r\n$3\r\nGET\r\n$4\r\n\r\n\0\xff\r\n";
        let (a, _) = parse_request(req, MAX).unwrap().unwrap();
        assert_eq!(a[1], b"\r\n\0\xff");
    }

    #[test]
    fn malformed_requests_give_redis_messages() {
        let err = |req: &[u8]| parse_request(req, MAX).unwrap_err().0;
        assert_eq!(err(b"*x\r\n"), "invalid multibulk length");
        assert_eq!(err(b"*3000000000\r\n"), "invalid multibulk length");
        assert_eq!(err(b"*1\r\n+PING\r\n"), "expected '$', got '+'");
        assert_eq!(err(b"*1\r\n$-5\r\n"), "invalid bulk length");
        assert_eq!(
            err(b"*1\r\n$1\r\nab\r\n"),
            "bulk string not followed by CRLF"
        );
        let huge = format!("*1\r\n${}\r\n", MAX + 1);
        assert_eq!(err(huge.as_bytes()), "invalid bulk length");
        let long = vec![b'a'; INLINE_MAX_BYTES + 1];
        assert_eq!(err(&long), "too big inline request");
        let mut long_count = b"*".to_vec();
        long_count.extend(vec![b'1'; INLINE_MAX_BYTES + 1]);
        assert_eq!(err(&long_count), "too big mbulk count string");
        assert_eq!(err(b"SET \"a\"b c\r\n"), "unbalanced quotes in request");
    }

    #[test]
    fn empty_arrays_and_lines_are_skipped_requests() {
        assert_eq!(parse_request(b"*0\r\n", MAX).unwrap(), Some((vec![], 4)));
        assert_eq!(parse_request(b"*-1\r\n", MAX).unwrap(), Some((vec![], 5)));
        assert_eq!(parse_request(b"\r\n", MAX).unwrap(), Some((vec![], 2)));
    }

    #[test]
    fn inline_commands_split_like_redis() {
        let (a, used) = parse_request(b"set k \"a b\\x41\\n\" 'it\\'s'\r\n", MAX)
            .unwrap()
            .unwrap();
        assert_eq!(
            a,
            vec![
                b"set".to_vec(),
                b"k".to_vec(),
                b"a bA\n".to_vec(),
                b"it's".to_vec()
            ]
        );
        assert_eq!(used, 27);
        assert_eq!(
            parse_request(b"ping\n", MAX).unwrap(),
            Some((args(&["ping"]), 5))
        );
        assert_eq!(parse_request(b"ping", MAX).unwrap(), None);
        assert_eq!(split_args(b"\"open"), None);
        assert_eq!(split_args(b"'open"), None);
        assert_eq!(split_args(b"  "), Some(vec![]));
    }

    /// Arbitrary bytes never panic, and a parse never claims more than it
    /// was given.
    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(19);
        let alphabet = b"*$\r\n0123456789-+ \"'\\xabAB";
        for _ in 0..50_000 {
            let len = rng.gen_range(0..40);
            let buf: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            if let Ok(Some((_, used))) = parse_request(&buf, 16) {
                assert!(used <= buf.len() && used > 0);
            }
        }
    }
}
