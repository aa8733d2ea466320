//! What a key may hold after the writer was killed, given the expected
//! state and the WAL mode it wrote in.

use crate::config::Mode;
use crate::state::{Counter, Durable, Slot, PENDING_DELETE};
use crate::values::{effective, write_of, Write};

/// Whether total `found` is allowed for a counter whose writer left
/// `counter`, after a crash in `mode`; `durable` is its total when the last
/// completed flush began (used without a WAL). With a WAL the total is
/// exact: the acknowledged sum, or that plus the increment in flight.
/// Without one, increments since that flush may be lost, a suffix of them.
pub fn judge_counter(
    mode: Mode,
    counter: &Counter,
    durable: u64,
    found: u64,
) -> Result<(), String> {
    let most = counter.acked + counter.pending;
    let allowed = match mode {
        Mode::Sync | Mode::Async => found == counter.acked || found == most,
        Mode::NoWal => (durable..=most).contains(&found),
    };
    if allowed {
        return Ok(());
    }
    Err(match mode {
        Mode::Sync | Mode::Async => format!(
            "total {found}; acknowledged {}, in flight {}",
            counter.acked, counter.pending
        ),
        Mode::NoWal => format!(
            "total {found}; the last flush made {durable} durable, and at most {most} was written"
        ),
    })
}

/// Whether an id after `durable_max` up to `max` reads as absent: such a
/// write after the last flush may have survived (ids of one key grow, so
/// eight in a row hold one of each kind).
fn absent_written_since(durable_max: u32, max: u32) -> bool {
    (durable_max.saturating_add(1)..=max)
        .take(8)
        .any(|id| effective(id) == 0)
}

/// Whether value `found` (an id, 0 for absent) is allowed for a key whose
/// writer left `slot`, after a crash in `mode`. `durable` and
/// `durable_epoch` describe the last completed flush (used without a WAL).
/// On refusal, says why.
pub fn judge(
    mode: Mode,
    slot: &Slot,
    durable: &Durable,
    durable_epoch: u32,
    found: u32,
) -> Result<(), String> {
    let pending_put = (slot.pending != 0 && slot.pending != PENDING_DELETE).then_some(slot.pending);
    let pending_delete = slot.pending == PENDING_DELETE;
    if found > slot.max_id {
        return Err(format!(
            "holds value {found}, never written (ids end at {})",
            slot.max_id
        ));
    }
    if found != 0 && write_of(found) == Write::Expired {
        return Err(format!("holds value {found}, which was written expired"));
    }
    // Values written expired or as tombs read as absent (`values::Write`).
    let seen = effective(found);
    let allowed = match mode {
        // A killed process loses nothing it was told was written: the
        // key holds the acknowledged value, or the one in flight.
        Mode::Sync | Mode::Async => {
            seen == effective(slot.acked)
                || Some(seen) == pending_put.map(effective)
                || (seen == 0 && pending_delete)
        }
        // Without a WAL, what the last completed flush covered survives;
        // anything written after it may or may not.
        Mode::NoWal => {
            if seen == 0 {
                effective(durable.acked) == 0
                    || pending_delete
                    || slot.delete_epoch > durable_epoch
                    || absent_written_since(durable.max_id, slot.max_id)
            } else {
                found == durable.acked || found > durable.max_id
            }
        }
    };
    if allowed {
        return Ok(());
    }
    let what = |id: u32| {
        if id == 0 {
            "nothing".to_string()
        } else {
            format!("value {id}")
        }
    };
    Err(match mode {
        Mode::Sync | Mode::Async if found == 0 => {
            format!("acknowledged value {} lost", slot.acked)
        }
        Mode::Sync | Mode::Async => format!(
            "holds value {found}; acknowledged {}, in flight {}",
            what(slot.acked),
            if slot.pending == 0 {
                "nothing".to_string()
            } else if pending_delete {
                "a delete".to_string()
            } else {
                what(slot.pending)
            }
        ),
        Mode::NoWal => format!(
            "holds {}; the flush of epoch {durable_epoch} made {} durable (ids up to {} then)",
            what(found),
            what(durable.acked),
            durable.max_id
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_exact_with_a_wal_and_within_its_flush_without() {
        let c = Counter {
            acked: 10,
            pending: 5,
        };
        for mode in [Mode::Sync, Mode::Async] {
            assert!(judge_counter(mode, &c, 0, 10).is_ok());
            assert!(judge_counter(mode, &c, 0, 15).is_ok());
            assert!(
                judge_counter(mode, &c, 0, 12).is_err(),
                "part of an increment"
            );
            assert!(judge_counter(mode, &c, 0, 9)
                .unwrap_err()
                .contains("acknowledged 10"));
        }
        assert!(judge_counter(Mode::NoWal, &c, 4, 4).is_ok());
        assert!(judge_counter(Mode::NoWal, &c, 4, 15).is_ok());
        assert!(
            judge_counter(Mode::NoWal, &c, 4, 3).is_err(),
            "below the flush"
        );
        assert!(
            judge_counter(Mode::NoWal, &c, 4, 16).is_err(),
            "never written"
        );
    }

    fn slot(acked: u32, pending: u32, max_id: u32) -> Slot {
        Slot {
            acked,
            pending,
            max_id,
            delete_epoch: 0,
        }
    }

    const NONE: Durable = Durable {
        acked: 0,
        max_id: 0,
    };

    #[test]
    fn with_a_wal_the_acknowledged_or_the_pending_value_survives() {
        for mode in [Mode::Sync, Mode::Async] {
            let s = slot(3, 0, 3);
            assert!(judge(mode, &s, &NONE, 0, 3).is_ok());
            assert!(judge(mode, &s, &NONE, 0, 0).unwrap_err().contains("lost"));
            assert!(
                judge(mode, &s, &NONE, 0, 2).is_err(),
                "an older value is a loss"
            );
            assert!(judge(mode, &s, &NONE, 0, 4)
                .unwrap_err()
                .contains("never written"));
            let s = slot(3, 4, 4);
            assert!(judge(mode, &s, &NONE, 0, 3).is_ok());
            assert!(judge(mode, &s, &NONE, 0, 4).is_ok());
            assert!(judge(mode, &s, &NONE, 0, 0).is_err());
            let s = slot(3, PENDING_DELETE, 3);
            assert!(judge(mode, &s, &NONE, 0, 0).is_ok());
            assert!(judge(mode, &s, &NONE, 0, 3).is_ok());
            let s = slot(0, 0, 4);
            assert!(judge(mode, &s, &NONE, 0, 0).is_ok());
            assert!(
                judge(mode, &s, &NONE, 0, 4).is_err(),
                "a deleted value came back"
            );
            // Value 13 was written expired, 15 as a tomb: both read as
            // absent, a tomb perhaps still as itself; 14 has a day to live.
            assert!(judge(mode, &slot(13, 0, 13), &NONE, 0, 0).is_ok());
            assert!(judge(mode, &slot(13, 0, 13), &NONE, 0, 12).is_err());
            assert!(judge(mode, &slot(13, 0, 13), &NONE, 0, 13)
                .unwrap_err()
                .contains("expired"));
            assert!(judge(mode, &slot(15, 0, 15), &NONE, 0, 15).is_ok());
            assert!(judge(mode, &slot(15, 0, 15), &NONE, 0, 0).is_ok());
            assert!(judge(mode, &slot(14, 0, 14), &NONE, 0, 14).is_ok());
            assert!(judge(mode, &slot(14, 0, 14), &NONE, 0, 0).is_err());
            assert!(judge(mode, &slot(12, 13, 13), &NONE, 0, 0).is_ok());
        }
    }

    #[test]
    fn without_a_wal_what_the_last_flush_covered_survives() {
        let durable = Durable {
            acked: 2,
            max_id: 2,
        };
        // Written after the flush: any of the later values, or the flushed one.
        let s = slot(4, 0, 4);
        for found in [2, 3, 4] {
            assert!(
                judge(Mode::NoWal, &s, &durable, 2, found).is_ok(),
                "{found}"
            );
        }
        assert!(
            judge(Mode::NoWal, &s, &durable, 2, 1).is_err(),
            "older than the flush"
        );
        assert!(
            judge(Mode::NoWal, &s, &durable, 2, 0).is_err(),
            "no delete happened"
        );
        // Value 5, written after the flush, was written expired: absent
        // may have survived.
        assert!(judge(Mode::NoWal, &slot(6, 0, 6), &durable, 2, 0).is_ok());
        // A delete after the flush (stamped with its epoch or later) may
        // have survived; one stamped before it was covered by it.
        let deleted = Slot {
            delete_epoch: 3,
            ..slot(0, 0, 4)
        };
        assert!(judge(Mode::NoWal, &deleted, &durable, 2, 0).is_ok());
        let covered = Slot {
            delete_epoch: 2,
            ..slot(0, 0, 4)
        };
        assert!(judge(Mode::NoWal, &covered, &durable, 2, 0).is_err());
        assert!(judge(Mode::NoWal, &slot(2, PENDING_DELETE, 2), &durable, 2, 0).is_ok());
        // Flushed as absent: an old value must not come back.
        let gone = Durable {
            acked: 0,
            max_id: 3,
        };
        assert!(judge(Mode::NoWal, &slot(0, 0, 3), &gone, 2, 0).is_ok());
        assert!(judge(Mode::NoWal, &slot(0, 0, 3), &gone, 2, 3).is_err());
        assert!(judge(Mode::NoWal, &slot(4, 0, 4), &gone, 2, 4).is_ok());
    }
}
