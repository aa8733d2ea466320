//! Keys and values on the command line and in what the tool prints: as
//! text (UTF-8, with anything else escaped so that nothing is lost) or as
//! hex in `ldb`'s form (`0x6B6579`).

use anyhow::{bail, Result};

/// How bytes are printed and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Text,
    Hex,
}

impl Form {
    pub fn show(self, bytes: &[u8]) -> String {
        match self {
            Form::Text => text(bytes),
            Form::Hex => hex(bytes),
        }
    }

    /// An argument: with `Hex`, hex digits with or without `0x`.
    pub fn parse(self, arg: &str, what: &str) -> Result<Vec<u8>> {
        match self {
            Form::Text => Ok(arg.as_bytes().to_vec()),
            Form::Hex => unhex(arg.strip_prefix("0x").unwrap_or(arg))
                .ok_or_else(|| anyhow::anyhow!("{what} {arg:?} is not hex (--hex is set)")),
        }
    }
}

/// `0x` and two upper-case digits per byte, as `ldb --hex` prints.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * bytes.len());
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// Valid UTF-8 as it is, except control characters and backslashes, which
/// are escaped as Rust escapes them, and bytes that are not UTF-8, as
/// `\xNN`: printable, one line, and unambiguous.
pub fn text(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || c == '\\' {
                s.extend(c.escape_default());
            } else {
                s.push(c);
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// Hex digits, two per byte; nothing else (no sign, no spaces).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16);
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks(2)
        .map(|pair| Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect()
}

/// The smallest key above every key starting with `prefix`; `None` when
/// there is none (the prefix is all 0xff).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The separator of a dump line's key and value.
const ARROW: &[u8] = b" ==> ";

/// One line of a dump: `KEY ==> VALUE`, each side `0x`-hex or raw bytes
/// (what `ldb dump` writes with and without `--hex`; without it, binary
/// keys and values are written as they are, so a line is bytes, not
/// text). A side starting with `0x` is hex: a raw key or value that
/// starts so, or holds ` ==> ` (the line is split at the first), needs a
/// hex dump.
pub fn parse_dump_line(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let Some(at) = line.windows(ARROW.len()).position(|w| w == ARROW) else {
        bail!("not KEY ==> VALUE");
    };
    let (k, v) = (&line[..at], &line[at + ARROW.len()..]);
    let side = |s: &[u8], what: &str| match s.strip_prefix(b"0x") {
        Some(h) => std::str::from_utf8(h)
            .ok()
            .and_then(unhex)
            .ok_or_else(|| anyhow::anyhow!("{what} {} is not hex", text(s))),
        None => Ok(s.to_vec()),
    };
    Ok((side(k, "key")?, side(v, "value")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(b"ab\x00\xff"), "0x616200FF");
        assert_eq!(unhex(&hex(&all)[2..]), Some(all));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("+1"), None);
        assert_eq!(unhex("+1"), None);
        assert_eq!(unhex("é1"), None);
        assert_eq!(Form::Hex.parse("0x6162", "key").unwrap(), b"ab");
        assert!(Form::Hex.parse("0x61x", "key").is_err());
    }

    #[test]
    fn text_escapes_what_is_not_printable_utf8() {
        assert_eq!(text("héllo".as_bytes()), "héllo");
        assert_eq!(text(b"a\nb\\c\x00"), "a\\nb\\\\c\\u{0}");
        assert_eq!(text(b"\xff\xfeok"), "\\xff\\xfeok");
    }

    #[test]
    fn prefix_end_skips_trailing_ff() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn dump_lines_read_both_forms() {
        assert_eq!(
            parse_dump_line(b"0x6162 ==> 0x00FF0A").unwrap(),
            (b"ab".to_vec(), vec![0, 0xff, 0x0a])
        );
        assert_eq!(
            parse_dump_line(b"text key ==> val ue").unwrap(),
            (b"text key".to_vec(), b"val ue".to_vec())
        );
        assert_eq!(
            parse_dump_line(b"k ==> ").unwrap(),
            (b"k".to_vec(), Vec::new())
        );
        assert!(parse_dump_line(b"0x6 ==> 0x00").is_err());
        assert!(parse_dump_line(b"no arrow").is_err());
        assert!(parse_dump_line(b"0x+1 ==> 0x00").is_err());
        assert_eq!(
            parse_dump_line(b"\xff\x00 ==> \xfe").unwrap(),
            (vec![0xff, 0], vec![0xfe])
        );
    }
}
