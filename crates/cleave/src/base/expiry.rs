//! Entries with a time to live. An expiring entry (kinds
//! `ExpiringValue` and `ExpiringValueRef`) stores `fixed64 expires_at ++
//! value`, the value being the user's bytes or a value handle, and
//! `expires_at` milliseconds since the Unix epoch. The expiry sits in the
//! tree, beside the handle of a separated value, so that reads hide an
//! expired entry and compaction drops it without reading the value.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::coding::{decode_fixed64, DecodeError};
use super::key::ValueKind;

/// Bytes of the expiry in front of an expiring entry's value.
pub(crate) const EXPIRY_LEN: usize = 8;

/// Where [`crate::Options::clock`] reads the time that expiry is
/// measured against.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// When something that lives `ttl` from now expires, in milliseconds
    /// since the Unix epoch (for `WriteBatch::put_with_expiry`).
    fn expiry_after(&self, ttl: std::time::Duration) -> u64 {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.now_ms().saturating_add(ttl_ms)
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to, for tests of expiry.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        ManualClock(AtomicU64::new(now_ms))
    }

    /// Sets the time.
    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Whether an entry expiring at `expires_at` has expired at `now`: from
/// the millisecond it names on.
pub(crate) fn expired(expires_at: u64, now: u64) -> bool {
    expires_at <= now
}

/// An entry's stored value with its expiry, if any, taken off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// `Value` or `ValueRef` for an expiring kind; the kind itself for the
    /// others.
    pub kind: ValueKind,
    pub expires_at: Option<u64>,
    pub value: &'a [u8],
}

/// Splits the stored value of an entry of `kind`; an expiring entry too
/// short to hold its expiry is an error (damaged input).
pub(crate) fn split(kind: ValueKind, stored: &[u8]) -> Result<Split<'_>, DecodeError> {
    if !kind.is_expiring() {
        return Ok(Split {
            kind,
            expires_at: None,
            value: stored,
        });
    }
    let (at, value) = stored
        .split_at_checked(EXPIRY_LEN)
        .ok_or(DecodeError("expiring entry shorter than its expiry"))?;
    Ok(Split {
        kind: kind.without_expiry(),
        expires_at: Some(decode_fixed64(at)),
        value,
    })
}

/// Appends the stored value of an expiring entry.
pub(crate) fn join(out: &mut Vec<u8>, expires_at: u64, value: &[u8]) {
    out.extend_from_slice(&expires_at.to_le_bytes());
    out.extend_from_slice(value);
}

/// What a reader at time `now` sees of an entry: `Deletion` if it has
/// expired, otherwise its kind and value without the expiry.
pub(crate) fn as_seen(
    kind: ValueKind,
    stored: &[u8],
    now: u64,
) -> Result<(ValueKind, &[u8]), DecodeError> {
    let s = split(kind, stored)?;
    Ok(match s.expires_at {
        Some(at) if expired(at, now) => (ValueKind::Deletion, &[][..]),
        _ => (s.kind, s.value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_join_and_expiry() {
        let mut stored = Vec::new();
        join(&mut stored, 1000, b"v");
        let s = split(ValueKind::ExpiringValue, &stored).unwrap();
        assert_eq!(
            (s.kind, s.expires_at, s.value),
            (ValueKind::Value, Some(1000), &b"v"[..])
        );
        assert_eq!(
            as_seen(ValueKind::ExpiringValue, &stored, 999).unwrap(),
            (ValueKind::Value, &b"v"[..])
        );
        assert_eq!(
            as_seen(ValueKind::ExpiringValue, &stored, 1000).unwrap(),
            (ValueKind::Deletion, &[][..])
        );
        assert_eq!(
            as_seen(ValueKind::Value, b"plain", u64::MAX).unwrap(),
            (ValueKind::Value, &b"plain"[..])
        );
        assert!(split(ValueKind::ExpiringValueRef, b"short").is_err());
    }

    #[test]
    fn manual_clock_moves_when_told() {
        let c = ManualClock::new(5);
        c.advance(10);
        assert_eq!(c.now_ms(), 15);
        c.set(3);
        assert_eq!(c.now_ms(), 3);
        assert!(SystemClock.now_ms() > 1_700_000_000_000);
    }
}
