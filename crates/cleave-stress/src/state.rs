//! The expected-state file: per key, the last acknowledged value id and
//! the write in flight, kept on disk by the process that writes the
//! database so that it survives that process being killed (each update is
//! one `pwrite` into the page cache; SIGKILL does not undo it).
//!
//! Layout (little endian):
//! - header, 64 bytes: magic `clvSTATE`, format version (u32), number of
//!   keys (u32), seed (u64), acknowledged writes (u64, a running count),
//!   durable epoch (u32), durable region (u32, 0 or 1), number of
//!   counters (u32);
//! - one [`Slot`] of 16 bytes per key;
//! - two regions of one [`Durable`] (8 bytes) per key each: the state at
//!   the last completed `flush()`, for writes made without a WAL. The
//!   header's region field names the complete one; the other is written
//!   first, so a kill in the middle of writing leaves the previous one;
//! - one [`Counter`] of 16 bytes per counter, then its total at the last
//!   completed `flush()` in each of the two regions (8 bytes each).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};

const MAGIC: &[u8; 8] = b"clvSTATE";
/// Version 2 added the counters.
const FORMAT_VERSION: u32 = 2;
const HEADER: u64 = 64;
const ACKED_AT: u64 = 24;
const DURABLE_AT: u64 = 32;
const COUNTERS_AT: u64 = 40;
const SLOT: u64 = 16;
const DURABLE: u64 = 8;
const COUNTER: u64 = 16 + 2 * 8;

/// Counters every state has: keys that only merges (`U64Add`) change.
pub const COUNTERS: u32 = 16;

/// `Slot::pending` of a delete in flight.
pub const PENDING_DELETE: u32 = u32::MAX;

/// What is known of one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// The id of the last acknowledged value; 0 if the key was deleted or
    /// never written.
    pub acked: u32,
    /// The write in flight: 0 for none, [`PENDING_DELETE`], or the id of a
    /// value being put.
    pub pending: u32,
    /// The largest id ever given to a value of this key; ids only grow.
    pub max_id: u32,
    /// 1 + the flush epoch in which a delete of the key was last
    /// acknowledged; 0 if none since the state was last settled.
    pub delete_epoch: u32,
}

impl Slot {
    fn encode(&self) -> [u8; SLOT as usize] {
        let mut out = [0u8; SLOT as usize];
        for (i, v) in [self.acked, self.pending, self.max_id, self.delete_epoch]
            .into_iter()
            .enumerate()
        {
            out[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    fn decode(b: &[u8]) -> Slot {
        let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Slot {
            acked: w(0),
            pending: w(4),
            max_id: w(8),
            delete_epoch: w(12),
        }
    }
}

/// A key's state when a flush started: what the flush made durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Durable {
    /// The acknowledged value id (0: absent).
    pub acked: u32,
    /// The largest id given out by then: larger ids were written later.
    pub max_id: u32,
}

/// What is known of one counter: the sum of its acknowledged increments,
/// and the increment in flight (0 for none; increments are positive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    pub acked: u64,
    pub pending: u64,
}

/// Where the counters start in a file of `keys` keys.
fn counters_base(keys: u64) -> u64 {
    HEADER + keys * (SLOT + 2 * DURABLE)
}

/// Everything the file holds, as read back.
#[derive(Debug, Clone)]
pub struct Expected {
    pub seed: u64,
    pub acked_writes: u64,
    /// The epoch of the flush `durable` describes.
    pub durable_epoch: u32,
    pub slots: Vec<Slot>,
    pub durable: Vec<Durable>,
    pub counters: Vec<Counter>,
    /// Each counter's total when the flush of `durable_epoch` began.
    pub durable_counters: Vec<u64>,
}

impl Expected {
    /// A fresh state: no key written.
    pub fn new(keys: u32, seed: u64) -> Expected {
        Expected {
            seed,
            acked_writes: 0,
            durable_epoch: 0,
            slots: vec![Slot::default(); keys as usize],
            durable: vec![Durable::default(); keys as usize],
            counters: vec![Counter::default(); COUNTERS as usize],
            durable_counters: vec![0; COUNTERS as usize],
        }
    }

    pub fn keys(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Writes the whole state to `path` atomically (a temporary file and a
    /// rename), durable region 0.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut bytes =
            Vec::with_capacity(HEADER as usize + self.slots.len() * (SLOT + 2 * DURABLE) as usize);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&self.keys().to_le_bytes());
        bytes.extend_from_slice(&self.seed.to_le_bytes());
        bytes.extend_from_slice(&self.acked_writes.to_le_bytes());
        bytes.extend_from_slice(&self.durable_epoch.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&(self.counters.len() as u32).to_le_bytes());
        bytes.resize(HEADER as usize, 0);
        for s in &self.slots {
            bytes.extend_from_slice(&s.encode());
        }
        for _ in 0..2 {
            for d in &self.durable {
                bytes.extend_from_slice(&d.acked.to_le_bytes());
                bytes.extend_from_slice(&d.max_id.to_le_bytes());
            }
        }
        for (c, durable) in self.counters.iter().zip(&self.durable_counters) {
            bytes.extend_from_slice(&c.acked.to_le_bytes());
            bytes.extend_from_slice(&c.pending.to_le_bytes());
            bytes.extend_from_slice(&durable.to_le_bytes());
            bytes.extend_from_slice(&durable.to_le_bytes());
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }

    pub fn load(path: &Path) -> Result<Expected> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        ensure!(
            bytes.len() >= HEADER as usize && &bytes[..8] == MAGIC,
            "{} is not an expected-state file",
            path.display()
        );
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        if u32_at(8) != FORMAT_VERSION {
            bail!(
                "{} has format version {}, this build reads {FORMAT_VERSION}",
                path.display(),
                u32_at(8)
            );
        }
        let keys = u32_at(12) as usize;
        let counters = u32_at(COUNTERS_AT as usize) as usize;
        let want = counters_base(keys as u64) as usize + counters * COUNTER as usize;
        ensure!(
            bytes.len() == want,
            "{} holds {} bytes, {want} expected for {keys} keys and {counters} counters",
            path.display(),
            bytes.len()
        );
        let region = u32_at(DURABLE_AT as usize + 4);
        ensure!(
            region < 2,
            "{}: bad durable region {region}",
            path.display()
        );
        let slots = (0..keys)
            .map(|k| Slot::decode(&bytes[HEADER as usize + k * SLOT as usize..]))
            .collect();
        let base =
            HEADER as usize + keys * SLOT as usize + region as usize * keys * DURABLE as usize;
        let durable = (0..keys)
            .map(|k| {
                let at = base + k * DURABLE as usize;
                Durable {
                    acked: u32_at(at),
                    max_id: u32_at(at + 4),
                }
            })
            .collect();
        let at = |c: usize| counters_base(keys as u64) as usize + c * COUNTER as usize;
        let counter_list = (0..counters)
            .map(|c| Counter {
                acked: u64_at(at(c)),
                pending: u64_at(at(c) + 8),
            })
            .collect();
        let durable_counters = (0..counters)
            .map(|c| u64_at(at(c) + 16 + region as usize * 8))
            .collect();
        Ok(Expected {
            seed: u64_at(16),
            acked_writes: u64_at(ACKED_AT as usize),
            durable_epoch: u32_at(DURABLE_AT as usize),
            slots,
            durable,
            counters: counter_list,
            durable_counters,
        })
    }
}

/// The file, open for the updates of the process writing the database.
pub struct StateFile {
    file: File,
    keys: u64,
    /// The durable region that is complete.
    region: u32,
}

impl StateFile {
    pub fn open(path: &Path, keys: u32) -> Result<StateFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut word = [0u8; 4];
        file.read_exact_at(&mut word, DURABLE_AT + 4)?;
        Ok(StateFile {
            file,
            keys: u64::from(keys),
            region: u32::from_le_bytes(word),
        })
    }

    pub fn write_slot(&self, k: u32, slot: &Slot) -> Result<()> {
        self.file
            .write_all_at(&slot.encode(), HEADER + u64::from(k) * SLOT)?;
        Ok(())
    }

    pub fn write_counter(&self, c: u32, counter: &Counter) -> Result<()> {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&counter.acked.to_le_bytes());
        bytes[8..].copy_from_slice(&counter.pending.to_le_bytes());
        let at = counters_base(self.keys) + u64::from(c) * COUNTER;
        self.file.write_all_at(&bytes, at)?;
        Ok(())
    }

    pub fn write_acked_writes(&self, n: u64) -> Result<()> {
        self.file.write_all_at(&n.to_le_bytes(), ACKED_AT)?;
        Ok(())
    }

    /// Records `durable` and `counters` (totals) as what the flush of
    /// `epoch` made durable.
    pub fn write_durable(
        &mut self,
        epoch: u32,
        durable: &[Durable],
        counters: &[u64],
    ) -> Result<()> {
        debug_assert_eq!(durable.len() as u64, self.keys);
        let region = 1 - self.region;
        let mut bytes = Vec::with_capacity(durable.len() * DURABLE as usize);
        for d in durable {
            bytes.extend_from_slice(&d.acked.to_le_bytes());
            bytes.extend_from_slice(&d.max_id.to_le_bytes());
        }
        let at = HEADER + self.keys * SLOT + u64::from(region) * self.keys * DURABLE;
        self.file.write_all_at(&bytes, at)?;
        for (c, total) in counters.iter().enumerate() {
            let at = counters_base(self.keys) + c as u64 * COUNTER + 16 + u64::from(region) * 8;
            self.file.write_all_at(&total.to_le_bytes(), at)?;
        }
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&epoch.to_le_bytes());
        header[4..].copy_from_slice(&region.to_le_bytes());
        self.file.write_all_at(&header, DURABLE_AT)?;
        self.region = region;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_in_place_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        Expected::new(10, 99).save(&path).unwrap();
        let mut f = StateFile::open(&path, 10).unwrap();
        let slot = Slot {
            acked: 3,
            pending: PENDING_DELETE,
            max_id: 4,
            delete_epoch: 2,
        };
        f.write_slot(7, &slot).unwrap();
        f.write_acked_writes(123).unwrap();
        let counter = Counter {
            acked: 1 << 40,
            pending: 17,
        };
        f.write_counter(3, &counter).unwrap();
        let d1 = vec![
            Durable {
                acked: 1,
                max_id: 1
            };
            10
        ];
        let totals: Vec<u64> = (0..u64::from(COUNTERS)).collect();
        f.write_durable(5, &d1, &totals).unwrap();
        let e = Expected::load(&path).unwrap();
        assert_eq!((e.seed, e.acked_writes, e.durable_epoch), (99, 123, 5));
        assert_eq!(e.slots[7], slot);
        assert_eq!(e.counters[3], counter);
        assert_eq!(e.counters[2], Counter::default());
        assert_eq!(e.durable_counters, totals);
        assert_eq!(e.slots[6], Slot::default());
        assert_eq!(e.durable, d1);
        // The second flush goes to the other region and switches to it.
        let d2 = vec![
            Durable {
                acked: 2,
                max_id: 9
            };
            10
        ];
        let totals2 = vec![9; COUNTERS as usize];
        f.write_durable(6, &d2, &totals2).unwrap();
        let e = Expected::load(&path).unwrap();
        assert_eq!((e.durable_epoch, e.durable.clone()), (6, d2));
        assert_eq!(e.durable_counters, totals2);
        // A saved state reads back whole.
        e.save(&path).unwrap();
        let again = Expected::load(&path).unwrap();
        assert_eq!(again.slots, e.slots);
        assert_eq!(again.durable, e.durable);
        assert_eq!(again.counters, e.counters);
        assert_eq!(again.durable_counters, e.durable_counters);
    }

    #[test]
    fn other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        std::fs::write(
            &path,
            b"not a state file at all, though long enough to hold a header..",
        )
        .unwrap();
        assert!(Expected::load(&path).is_err());
        Expected::new(4, 1).save(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        std::fs::write(&path, bytes).unwrap();
        assert!(Expected::load(&path).is_err(), "truncated");
    }
}
