//! The process that is killed: several threads doing random puts, deletes,
//! batches, gets, multi_gets, scans, snapshot reads and counter increments
//! (merges) over a bounded key space, while another forces flushes,
//! compactions and GC and takes checkpoints, which it opens and checks
//! against the key states before and after. Every write is
//! the expected-state file before it is issued (pending) and after it is
//! acknowledged, under a per-key lock, so the file always says which
//! values a key may hold. Reads are checked as they go: a get under the
//! key's lock must return the acknowledged value, a snapshot must keep
//! what it saw, a scan may only return values that were written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use cleave::{Db, ReadOptions, WriteBatch, WriteOptions};
use parking_lot::{Mutex, MutexGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::{self, Mode};
use crate::state::{Counter, Durable, Expected, Slot, StateFile, PENDING_DELETE};
use crate::values::{
    counter_key, counter_total, effective, key, parse_counter, parse_key, value, value_id,
    write_of, Write,
};

pub struct WorkerArgs {
    pub db: PathBuf,
    pub state: PathBuf,
    pub mode: Mode,
    pub threads: usize,
    /// Selects the engine options (`config::options`).
    pub variant: u64,
    /// Seeds the operations (not the values, which the state file's seed
    /// determines).
    pub seed: u64,
}

struct Shared {
    db: Db,
    /// The engine options' variant, which checkpoints open with too.
    variant: u64,
    seed: u64,
    wo: WriteOptions,
    slots: Vec<Mutex<Slot>>,
    counters: Vec<Mutex<Counter>>,
    file: StateFile,
    /// The flush epoch (`Mode::NoWal`): deletes are stamped with it.
    epoch: AtomicU32,
    acked_writes: AtomicU64,
}

/// Runs until killed; returns only on a failure, which it describes.
pub fn run(args: &WorkerArgs) -> Result<()> {
    let expected = Expected::load(&args.state)?;
    let db = Db::open(&args.db, config::options(args.variant))
        .with_context(|| format!("opening {}", args.db.display()))?;
    let shared = Shared {
        db,
        variant: args.variant,
        seed: expected.seed,
        wo: args.mode.write_options(),
        file: StateFile::open(&args.state, expected.keys())?,
        slots: expected.slots.iter().copied().map(Mutex::new).collect(),
        counters: expected.counters.iter().copied().map(Mutex::new).collect(),
        epoch: AtomicU32::new(expected.durable_epoch),
        acked_writes: AtomicU64::new(expected.acked_writes),
    };
    std::thread::scope(|s| {
        let mut threads = Vec::new();
        for t in 0..args.threads {
            let rng = StdRng::seed_from_u64(args.seed.wrapping_add(t as u64));
            let shared = &shared;
            threads.push(s.spawn(move || operate(shared, rng)));
        }
        let rng = StdRng::seed_from_u64(args.seed ^ 0xb6);
        let shared = &shared;
        let state = args.state.clone();
        let mode = args.mode;
        threads.push(s.spawn(move || background(shared, rng, mode, &state)));
        // The first failure ends the process; the others would only repeat
        // what broke.
        for t in threads {
            match t.join() {
                Ok(result) => result?,
                Err(_) => bail!("a stress thread panicked"),
            }
        }
        Ok(())
    })
}

fn operate(sh: &Shared, mut rng: StdRng) -> Result<()> {
    let keys = sh.slots.len() as u32;
    loop {
        let k = rng.gen_range(0..keys);
        match rng.gen_range(0..100) {
            0..=34 => put(sh, k, &mut rng)?,
            35..=44 => delete(sh, k)?,
            45..=54 => batch(sh, &mut rng)?,
            55..=69 => get(sh, k)?,
            70..=74 => multi_get(sh, &mut rng)?,
            75..=86 => scan(sh, k, &mut rng)?,
            87..=93 => count(sh, &mut rng)?,
            _ => snapshot_read(sh, k, &mut rng)?,
        }
    }
}

/// Marks the write in flight in the file, before it is issued.
fn begin(sh: &Shared, k: u32, slot: &mut Slot, put: bool) -> Result<Option<u32>> {
    let id = put.then(|| slot.max_id + 1);
    slot.pending = id.unwrap_or(PENDING_DELETE);
    slot.max_id = id.unwrap_or(slot.max_id);
    sh.file.write_slot(k, slot)?;
    Ok(id)
}

/// Records the acknowledged write.
fn acknowledge(sh: &Shared, k: u32, slot: &mut Slot) -> Result<()> {
    if slot.pending == PENDING_DELETE {
        slot.acked = 0;
        // Read after the acknowledgement: a flush copying the states after
        // this epoch began may have missed the delete, and the stamp then
        // says so.
        slot.delete_epoch = sh.epoch.load(Ordering::SeqCst) + 1;
    } else {
        slot.acked = slot.pending;
    }
    slot.pending = 0;
    sh.file.write_slot(k, slot)?;
    let n = sh.acked_writes.fetch_add(1, Ordering::Relaxed) + 1;
    sh.file.write_acked_writes(n)
}

fn put(sh: &Shared, k: u32, rng: &mut StdRng) -> Result<()> {
    let mut slot = sh.slots[k as usize].lock();
    let id = begin(sh, k, &mut slot, true)?.unwrap_or_default();
    let (k_bytes, v) = (key(k), value(sh.seed, k, id));
    match expiry_of(id) {
        Some(at) => sh.db.put_with_expiry(&sh.wo, &k_bytes, &v, at),
        None => sh.db.put(&sh.wo, &k_bytes, &v),
    }
    .with_context(|| format!("put of key {k}"))?;
    acknowledge(sh, k, &mut slot)?;
    // Now and then read the write back at once.
    if rng.gen_bool(0.1) {
        check_get(sh, k, &slot)?;
    }
    Ok(())
}

fn delete(sh: &Shared, k: u32) -> Result<()> {
    let mut slot = sh.slots[k as usize].lock();
    begin(sh, k, &mut slot, false)?;
    sh.db
        .delete(&sh.wo, &key(k))
        .with_context(|| format!("delete of key {k}"))?;
    acknowledge(sh, k, &mut slot)
}

/// Adds a random amount to a random counter by a merge, recorded in the
/// file as in flight before and as acknowledged after; now and then reads
/// the counter back under its lock, where its total is exact.
fn count(sh: &Shared, rng: &mut StdRng) -> Result<()> {
    let c = rng.gen_range(0..sh.counters.len() as u32);
    let mut counter = sh.counters[c as usize].lock();
    counter.pending = rng.gen_range(1..1000);
    sh.file.write_counter(c, &counter)?;
    sh.db
        .merge(&sh.wo, &counter_key(c), &counter.pending.to_le_bytes())
        .with_context(|| format!("merge into counter {c}"))?;
    counter.acked += counter.pending;
    counter.pending = 0;
    sh.file.write_counter(c, &counter)?;
    let n = sh.acked_writes.fetch_add(1, Ordering::Relaxed) + 1;
    sh.file.write_acked_writes(n)?;
    if rng.gen_bool(0.2) {
        let got = sh.db.get(&ReadOptions::new(), &counter_key(c))?;
        let total = got.map_or(Ok(0), |v| counter_total(c, &v))?;
        ensure!(
            total == counter.acked,
            "counter {c} reads {total}, its acknowledged total is {}",
            counter.acked
        );
    }
    Ok(())
}

/// Up to `most` distinct random keys (at least 2 drawn), ascending, each
/// with its slot locked. Locked in key order, so that two callers never
/// wait on each other in a cycle.
fn lock_keys<'a>(
    sh: &'a Shared,
    rng: &mut StdRng,
    most: usize,
) -> (Vec<u32>, Vec<MutexGuard<'a, Slot>>) {
    let keys = sh.slots.len() as u32;
    let mut ks: Vec<u32> = (0..rng.gen_range(2..=most))
        .map(|_| rng.gen_range(0..keys))
        .collect();
    ks.sort_unstable();
    ks.dedup();
    let guards = ks.iter().map(|&k| sh.slots[k as usize].lock()).collect();
    (ks, guards)
}

/// An atomic batch of puts and deletes of 2 to 8 distinct keys.
fn batch(sh: &Shared, rng: &mut StdRng) -> Result<()> {
    let (ks, mut guards) = lock_keys(sh, rng, 8);
    let mut b = WriteBatch::new();
    for (&k, slot) in ks.iter().zip(guards.iter_mut()) {
        match begin(sh, k, slot, rng.gen_bool(0.8))? {
            Some(id) => match expiry_of(id) {
                Some(at) => b.put_with_expiry(&key(k), &value(sh.seed, k, id), at),
                None => b.put(&key(k), &value(sh.seed, k, id)),
            },
            None => b.delete(&key(k)),
        }
    }
    sh.db
        .write(&sh.wo, b)
        .with_context(|| format!("batch of keys {ks:?}"))?;
    for (&k, slot) in ks.iter().zip(guards.iter_mut()) {
        acknowledge(sh, k, slot)?;
    }
    Ok(())
}

/// The id `bytes` hold as a value of `k` (0 for none), or an error if
/// they are not a value ever written to `k`.
/// The expiry value `id` is written with (`values::Write`), if any.
fn expiry_of(id: u32) -> Option<u64> {
    const DAY_MS: u64 = 24 * 3600 * 1000;
    match write_of(id) {
        // A millisecond after the epoch: long past.
        Write::Expired => Some(1),
        Write::Lasting => Some(cleave::Clock::now_ms(&cleave::SystemClock) + DAY_MS),
        Write::Plain | Write::Tomb => None,
    }
}

/// The id of the value a read found (0 for none); a value written
/// expired must never be found.
fn id_of(sh: &Shared, k: u32, bytes: Option<&[u8]>) -> Result<u32> {
    let id = match bytes {
        None => 0,
        Some(v) => value_id(sh.seed, k, v)
            .with_context(|| format!("key {k} holds {} bytes never written to it", v.len()))?,
    };
    ensure!(
        id == 0 || write_of(id) != Write::Expired,
        "key {k} holds value {id}, which was written expired"
    );
    Ok(id)
}

/// Under the key's lock nothing is in flight: a get must return exactly
/// the acknowledged value (read-your-writes across threads).
fn check_get(sh: &Shared, k: u32, slot: &Slot) -> Result<()> {
    let got = sh.db.get(&ReadOptions::new(), &key(k))?;
    let id = id_of(sh, k, got.as_deref())?;
    ensure!(
        effective(id) == effective(slot.acked),
        "get of key {k} returned value {id}, the last acknowledged is {}",
        slot.acked
    );
    Ok(())
}

fn get(sh: &Shared, k: u32) -> Result<()> {
    let slot = sh.slots[k as usize].lock();
    check_get(sh, k, &slot)
}

/// A multi_get of 2 to 16 distinct keys, locked as a batch locks them:
/// nothing is in flight for any of them, so each answer must be its key's
/// acknowledged value.
fn multi_get(sh: &Shared, rng: &mut StdRng) -> Result<()> {
    let (ks, guards) = lock_keys(sh, rng, 16);
    // Asked in an order other than the keys'.
    let asked: Vec<Vec<u8>> = ks.iter().rev().map(|&k| key(k)).collect();
    let got = sh.db.multi_get(&ReadOptions::new(), &asked);
    for ((&k, slot), r) in ks.iter().rev().zip(guards.iter().rev()).zip(got) {
        let value = r.with_context(|| format!("multi_get of key {k}"))?;
        let id = id_of(sh, k, value.as_deref())?;
        ensure!(
            effective(id) == effective(slot.acked),
            "multi_get of key {k} returned value {id}, the last acknowledged is {}",
            slot.acked
        );
    }
    Ok(())
}

/// Up to 50 entries from `k` in either direction: ordered keys of this
/// test, each holding a value once written to it.
fn scan(sh: &Shared, k: u32, rng: &mut StdRng) -> Result<()> {
    let mut ro = ReadOptions::new();
    if rng.gen_bool(0.3) {
        ro.upper_bound = Some(key(k.saturating_add(rng.gen_range(1..200))));
    }
    let mut it = sh.db.iter(&ro);
    let forward = rng.gen_bool(0.7);
    if forward {
        it.seek(&key(k))?;
    } else {
        it.seek_for_prev(&key(k))?;
    }
    let mut prev: Option<u32> = None;
    for _ in 0..50 {
        // Counters lie below every key: a backward scan is done there.
        if !it.valid() || parse_counter(it.key()).is_some() {
            break;
        }
        let k = parse_key(it.key())
            .with_context(|| format!("scan returned a key never written: {:?}", it.key()))?;
        if let Some(p) = prev {
            ensure!(
                if forward { p < k } else { p > k },
                "scan returned key {k} after {p}"
            );
        }
        prev = Some(k);
        let id = id_of(sh, k, Some(it.value()?))?;
        // Ids only grow, so reading the bound afterwards is safe.
        let max_id = sh.slots[k as usize].lock().max_id;
        ensure!(
            id <= max_id,
            "scan: key {k} holds value {id}, above {max_id}"
        );
        if forward {
            it.next()?;
        } else {
            it.prev()?;
        }
    }
    Ok(it.status()?)
}

/// A snapshot taken while `k` is quiet keeps its value while `k` and other
/// keys are overwritten, in gets and in iterators.
fn snapshot_read(sh: &Shared, k: u32, rng: &mut StdRng) -> Result<()> {
    let (snap, seen) = {
        let slot = sh.slots[k as usize].lock();
        (sh.db.snapshot(), slot.acked)
    };
    for _ in 0..rng.gen_range(1..4) {
        let other = if rng.gen_bool(0.5) {
            k
        } else {
            rng.gen_range(0..sh.slots.len() as u32)
        };
        put(sh, other, rng)?;
    }
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    let got = sh.db.get(&ro, &key(k))?;
    let id = id_of(sh, k, got.as_deref())?;
    ensure!(
        effective(id) == effective(seen),
        "snapshot get of key {k} returned value {id}, it saw {seen}"
    );
    let mut it = sh.db.iter(&ro);
    it.seek(&key(k))?;
    let at_k = it.valid() && it.key() == key(k).as_slice();
    let id = if at_k {
        id_of(sh, k, Some(it.value()?))?
    } else {
        0
    };
    it.status()?;
    ensure!(
        effective(id) == effective(seen),
        "snapshot iterator at key {k} found value {id}, it saw {seen}"
    );
    Ok(())
}

/// Forces background work beyond what the small options cause: flushes,
/// compactions of random ranges and GC with random thresholds. Without a
/// WAL, each flush first copies the key states it will make durable and
/// records them once it completed.
fn background(sh: &Shared, mut rng: StdRng, mode: Mode, state: &std::path::Path) -> Result<()> {
    let mut durable_file = StateFile::open(state, sh.slots.len() as u32)?;
    let keys = sh.slots.len() as u32;
    loop {
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..200)));
        match rng.gen_range(0..10) {
            0..=5 if mode == Mode::NoWal => {
                let epoch = sh.epoch.fetch_add(1, Ordering::SeqCst) + 1;
                let copy: Vec<Durable> = sh
                    .slots
                    .iter()
                    .map(|s| {
                        let s = s.lock();
                        Durable {
                            acked: s.acked,
                            max_id: s.max_id,
                        }
                    })
                    .collect();
                let totals: Vec<u64> = sh.counters.iter().map(|c| c.lock().acked).collect();
                sh.db.flush().context("flush")?;
                durable_file.write_durable(epoch, &copy, &totals)?;
            }
            0..=3 => sh.db.flush().context("flush")?,
            4..=6 => {
                let a = rng.gen_range(0..keys);
                let b = a.saturating_add(rng.gen_range(0..keys / 4 + 1));
                sh.db
                    .compact_range(Some(&key(a)), Some(&key(b)))
                    .context("compact_range")?;
            }
            7 if rng.gen_bool(0.3) => checkpoint(sh, state)?,
            _ => {
                sh.db
                    .gc_with_ratio(rng.gen_range(0.05..0.6))
                    .context("gc")?;
            }
        }
    }
}

/// Where checkpoints go: beside the state file, removed after each check
/// (and before the first, for one a kill interrupted).
fn checkpoint_dir(state: &std::path::Path) -> PathBuf {
    state.with_extension("checkpoint")
}

/// Takes a checkpoint while the workers write, opens it, and checks every
/// key in it: a key no write touched during the call holds its
/// acknowledged value, and any key holds a value once written to it.
fn checkpoint(sh: &Shared, state: &std::path::Path) -> Result<()> {
    let dir = checkpoint_dir(state);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let states = || -> Vec<Slot> { sh.slots.iter().map(|s| *s.lock()).collect() };
    let before = states();
    sh.db.checkpoint(&dir).context("checkpoint")?;
    let after = states();
    let copy = Db::open(&dir, config::options(sh.variant))
        .with_context(|| format!("opening the checkpoint {}", dir.display()))?;
    let mut held = vec![None; sh.slots.len()];
    let mut it = copy.iter(&ReadOptions::new());
    it.seek_to_first()?;
    while it.valid() {
        if let Some(k) = parse_key(it.key()) {
            let slot = held
                .get_mut(k as usize)
                .with_context(|| format!("checkpoint holds key {k}, beyond the key space"))?;
            *slot = Some(id_of(sh, k, Some(it.value()?))?);
        }
        it.next()?;
    }
    it.status()?;
    for (k, ((b, a), id)) in before.iter().zip(&after).zip(held).enumerate() {
        let id = id.unwrap_or(0);
        ensure!(
            id <= a.max_id,
            "checkpoint: key {k} holds value {id}, above {}",
            a.max_id
        );
        if b == a && a.pending == 0 {
            ensure!(
                effective(id) == effective(a.acked),
                "checkpoint: key {k}, untouched during the call, holds value {id}, the acknowledged is {}",
                a.acked
            );
        }
    }
    copy.close()?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    let log = checkpoints_log(state);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"checked\n"))
        .with_context(|| format!("appending to {}", log.display()))
}

/// One line per checkpoint checked, for the driver's report.
pub fn checkpoints_log(state: &std::path::Path) -> PathBuf {
    state.with_extension("checkpoints")
}
