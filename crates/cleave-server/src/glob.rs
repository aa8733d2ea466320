//! Redis's glob patterns (SCAN's MATCH, CONFIG GET): `*`, `?`, `[abc]`,
//! `[^a-z]`, and `\` to take the next character as it is.

/// True if `text` matches `pattern`. Backtracks only to the last `*`, so
/// the work is at most the product of the lengths: a client's pattern of
/// many stars cannot take exponential time.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the
    // text position it has taken up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p + 1, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {
                    if let Some(next) = match_one(pattern, p, text[t]) {
                        p = next;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((after, taken)) => {
                p = after;
                t = taken + 1;
                star = Some((after, taken + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// If the single-character element at `pattern[p]` (a literal, `\x` or a
/// class) matches `c`, the pattern position after it.
fn match_one(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    match pattern[p] {
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            while i < pattern.len() && pattern[i] != b']' {
                if pattern[i] == b'\\' && i + 1 < pattern.len() {
                    hit |= pattern[i + 1] == c;
                    i += 2;
                } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']'
                {
                    let (a, b) = (
                        pattern[i].min(pattern[i + 2]),
                        pattern[i].max(pattern[i + 2]),
                    );
                    hit |= (a..=b).contains(&c);
                    i += 3;
                } else {
                    hit |= pattern[i] == c;
                    i += 1;
                }
            }
            // An unclosed class ends at the pattern's end, as in Redis.
            let next = (i + 1).min(pattern.len());
            (hit != negate).then_some(next)
        }
        literal => (literal == c).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_patterns() {
        let yes = [
            ("*", ""),
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("user:*:name", "user:42:name"),
            ("\\*", "*"),
            ("a*b*c", "aXbYbZc"),
        ];
        for (p, t) in yes {
            assert!(matches(p.as_bytes(), t.as_bytes()), "{p} {t}");
        }
        let no = [
            ("h?llo", "hllo"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("a*b", "aXc"),
            ("\\*", "a"),
            ("abc", "ab"),
            ("ab", "abc"),
        ];
        for (p, t) in no {
            assert!(!matches(p.as_bytes(), t.as_bytes()), "{p} {t}");
        }
    }

    #[test]
    fn many_stars_stay_cheap() {
        let pattern = "*a".repeat(30) + "b";
        let text = "a".repeat(5000);
        assert!(!matches(pattern.as_bytes(), text.as_bytes()));
    }
}
