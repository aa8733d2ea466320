//! One GC job: copies the live records of the picked physical value files
//! into new physical files, keeping every record's `(logical_file,
//! ordinal)`, so the sstables' handles stay valid and nothing is written
//! into the LSM.
//!
//! Liveness comes from the value-references blocks of the sstables that
//! reference the hosted logical files: their union is the set of records
//! some table of the job's Version references. References only ever
//! decrease, so the union is a superset of what is live when the job
//! commits; a record dropped here is unreachable for good.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use roaring::RoaringBitmap;

use super::picker::GcPlan;
use super::rate_limiter::Direction;
use super::stats::GcStats;
use crate::base::{filename, FileNumber};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::manifest::Version;
use crate::sstable::TableCache;
use crate::value_file::{
    IndexEntry, Origin, ValueClass, ValueFile, ValueFileBuilder, ValueFileOptions,
    ValueFileSummary, ValueRecord, ValueStore,
};
use crate::vfs::Fs;
use crate::Compression;

/// Bytes one batch of reads takes at most, live records and the gaps read
/// through between them (a larger run is a batch alone). A job's writer
/// waits for its first batch, and its reader idles while the writer
/// copies the last. A job of 8 MiB batches holds two or three, so these
/// waits took much of it: the 2 GiB overwrite under a 1.25x budget ran
/// 11,849 ops/s with 1 MiB and 10,748 with 8 MiB (medians of three;
/// docs/benchmarks.md, issue 28).
const BATCH_BYTES: u64 = 1 << 20;
/// Batches the reader may have read that the writer has not taken: enough
/// that the reader's queue of reads never waits on one slow copy.
const BATCHES_AHEAD: usize = 4;

/// Unselected bytes a read of live records may take in between two of
/// them, rather than end there and start another read. In files at the
/// 75% utilization a tight budget leaves, live runs average four records
/// with one or two dead ones between. Reading through no gap at all, GC
/// issued 32 reads per 1 MiB batch and waited longest for them; reading
/// through up to 64 KiB, it read a third more bytes than it kept, and
/// those bytes took the device from its own writes. Through one dead
/// 8 KiB record but not two, the 300 MB fixed-8k overwrite under a 1.25x
/// budget ran 8,292 ops/s where 64 KiB ran 6,657 and none 5,989, and the
/// 2 GiB one 13,762 where 64 KiB ran 12,680 (medians, interleaved;
/// docs/benchmarks.md, issue 28). Tuned on 8 KiB records: a dead record of
/// 16 KiB or more is never read through.
const READ_THROUGH_GAP: u64 = 16 << 10;

/// GC's reads in flight at once, within one batch. Before runs read
/// through gaps, a batch held dozens of short runs, and several submitted
/// together took about the time of one; but GC is background work, and a
/// deeper queue takes the device from flushes: with the ring's full depth
/// (64) the fixed-8k overwrite ran 13% slower than with the eight reader
/// threads this replaced (docs/benchmarks.md, issue 15). Now a batch is
/// about ten reads of 100 KiB where victims are three-quarters live, and
/// one or two where they are mostly live.
pub(crate) const READS_IN_FLIGHT: usize = 8;
/// GC's reads in flight while space is short and writers wait for GC. The
/// device shares its bandwidth by what is queued, and a job reads and
/// writes the same bytes: beside output writes of 1 MiB written behind
/// (`vfs::os`), 24 reads of 56 KiB balance two of them (fio on this
/// machine: 285 MB/s of reads, 345 of writes), where 8 get a fifth of the
/// writes' bandwidth and 64 starve them (issue 28). Measured before runs
/// read through gaps; with them, a batch of 1 MiB holds about ten reads,
/// and larger batches (more bytes queued) took bandwidth from GC's own
/// writes (issue 28).
pub(crate) const SHORT_READS_IN_FLIGHT: usize = 24;

/// The records of `batch`, in order: its runs read with one
/// [`Fs::read_batch`], `in_flight` at a time.
fn read_batch(
    fs: &dyn Fs,
    in_flight: usize,
    file: &ValueFile,
    batch: &[Vec<IndexEntry>],
) -> Result<Vec<ValueRecord>> {
    let mut requests = Vec::with_capacity(batch.len());
    let mut runs = Vec::with_capacity(batch.len());
    for run in batch {
        if let Some(request) = file.run_request(run)? {
            requests.push(request);
            runs.push(run);
        }
    }
    let mut records = Vec::new();
    for (run, buf) in runs.into_iter().zip(fs.read_batch(&requests, in_flight)) {
        records.extend(file.decode_run(run, &buf?)?);
    }
    Ok(records)
}

/// Bytes one read of `run` takes: its records and the gaps between them.
fn run_bytes(run: &[IndexEntry]) -> u64 {
    match (run.first(), run.last()) {
        (Some(first), Some(last)) => last.offset + u64::from(last.len) - first.offset,
        _ => 0,
    }
}

fn batch_bytes(batch: &[Vec<IndexEntry>]) -> u64 {
    batch.iter().map(|run| run_bytes(run)).sum()
}

/// Consecutive slices of `runs` of about `BATCH_BYTES` each, in order.
fn batches(runs: &[Vec<IndexEntry>]) -> impl Iterator<Item = &[Vec<IndexEntry>]> {
    let mut rest = runs;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|run| {
                bytes += run_bytes(run);
                bytes <= BATCH_BYTES
            })
            .count()
            .max(1);
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        Some(batch)
    })
}

/// How GC writes its outputs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GcWriteOptions {
    pub compression: Compression,
    pub direct_writes: bool,
    /// An output takes no new logical file once it holds this many bytes.
    pub value_file_size: u64,
}

/// What a job needs from the database.
pub(crate) struct GcContext<'a> {
    pub fs: &'a dyn Fs,
    pub dir: &'a Path,
    pub tables: &'a TableCache,
    pub values: &'a ValueStore,
    pub write: GcWriteOptions,
    /// Read each run of live records at once, through gaps of up to
    /// `READ_THROUGH_GAP` dead bytes; off, each record alone (the ablation
    /// of coalesced reads).
    pub coalesce_reads: bool,
    /// Reads in flight at once.
    pub reads_in_flight: usize,
    /// Where the outputs' record index blocks go as they are written
    /// (`prepopulate_block_cache`), so that a get of a moved logical file
    /// needs no read for them.
    pub warm: Option<Arc<BlockCache>>,
    /// Called before GC reads or writes that many bytes: the rate
    /// limiter, which may sleep. Returns how long it did.
    pub pace: &'a (dyn Fn(Direction, u64) -> Duration + Sync),
    /// Called once that many bytes of records are in the outputs.
    pub written: &'a (dyn Fn(u64) + Sync),
}

/// The synced outputs of a job, not yet named by the manifest.
pub(crate) struct GcOutputs {
    pub files: Vec<ValueFileSummary>,
    pub stats: GcStats,
}

/// Collects `plan`'s files as `version` sees them. New file numbers come
/// from `new_number`, and each is pushed to `created` before its file is
/// created, so that the caller can remove them all if the job fails.
pub(crate) fn run(
    cx: &GcContext<'_>,
    version: &Version,
    plan: &GcPlan,
    new_number: &mut dyn FnMut() -> FileNumber,
    created: &mut Vec<FileNumber>,
) -> Result<GcOutputs> {
    let mut stats = GcStats {
        jobs: 1,
        files_in: plan.inputs.len() as u64,
        ..GcStats::default()
    };

    let start = Instant::now();
    let live = live_ordinals(cx, version, plan, &mut stats)?;
    stats.bitmap_time = start.elapsed();

    // Every input's live runs first (record indexes are small), so that
    // one reader goes through the job's inputs without a pause between
    // them: read input by input, the writer waited for each file's first
    // batch and the reader idled while each file's last was written.
    let mut inputs = Vec::with_capacity(plan.inputs.len());
    for input in &plan.inputs {
        let file = cx.values.file(input.number)?;
        let start = Instant::now();
        // Only the logical files this input hosts: a damaged record index
        // listing another input's records must not make up for records
        // that input lacks in the check below.
        let hosted: HashSet<FileNumber> = input.hosted.iter().map(|h| h.logical_file).collect();
        let selected = |logical, ordinal| {
            hosted.contains(&logical)
                && u32::try_from(ordinal)
                    .is_ok_and(|o| live.get(&logical).is_some_and(|b| b.contains(o)))
        };
        let runs: Vec<Vec<IndexEntry>> = if cx.coalesce_reads {
            file.live_runs(&selected, READ_THROUGH_GAP)?
        } else {
            let runs = file.live_runs(&selected, 0)?;
            runs.into_iter().flatten().map(|e| vec![e]).collect()
        };
        stats.index_time += start.elapsed();
        stats.index_bytes_read += file.properties().index_size;
        inputs.push((file, runs));
    }
    // The job's batches in order, each with the input it reads.
    let all_batches = || {
        inputs
            .iter()
            .flat_map(|(file, runs)| batches(runs).map(move |batch| (file, batch)))
    };

    let mut outputs = Outputs::default();
    // Per logical file: each input selects only the logical files it hosts,
    // and a Version hosts each in one physical file.
    let mut kept: BTreeMap<FileNumber, u64> = BTreeMap::new();
    let mut write = |(class, records, read): (ValueClass, Vec<ValueRecord>, u64),
                     stats: &mut GcStats|
     -> Result<()> {
        stats.value_bytes_read += read;
        let bytes = records.iter().map(|r| r.raw.len() as u64).sum();
        stats.throttle_time += (cx.pace)(Direction::Write, bytes);
        let start = Instant::now();
        for record in records {
            let out = outputs.for_record(cx, record.logical_file, class, new_number, created)?;
            out.add_moved(&record)?;
            *kept.entry(record.logical_file).or_default() += 1;
        }
        (cx.written)(bytes);
        stats.write_time += start.elapsed();
        Ok(())
    };
    let read = |file: &ValueFile, batch: &[Vec<IndexEntry>]| {
        read_batch(cx.fs, cx.reads_in_flight, file, batch)
            .map(|records| (file.properties().class, records, batch_bytes(batch)))
    };
    // Up to `BATCHES_AHEAD` batches are read while one is written, by a
    // reader thread; if none can be started, in turn here.
    let read_throttle = Mutex::new(Duration::ZERO);
    std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
        let reader = std::thread::Builder::new().spawn_scoped(s, || {
            let tx = tx;
            for (file, batch) in all_batches() {
                *read_throttle.lock() += (cx.pace)(Direction::Read, batch_bytes(batch));
                let read = read(file, batch);
                let failed = read.is_err();
                // A closed channel means the writer failed: stop.
                if tx.send(read).is_err() || failed {
                    break;
                }
            }
        });
        if reader.is_err() {
            for (file, batch) in all_batches() {
                stats.throttle_time += (cx.pace)(Direction::Read, batch_bytes(batch));
                let start = Instant::now();
                let read = read(file, batch)?;
                stats.value_read_time += start.elapsed();
                write(read, &mut stats)?;
            }
            return Ok(());
        }
        loop {
            let start = Instant::now();
            let Ok(read) = rx.recv() else {
                return Ok(());
            };
            stats.value_read_time += start.elapsed();
            write(read?, &mut stats)?;
        }
    })?;
    stats.throttle_time += read_throttle.into_inner();
    // Every referenced record must have been found: a table pointing at a
    // record the file does not hold is damage, and copying the rest would
    // make it permanent.
    for (input, (file, _)) in plan.inputs.iter().zip(&inputs) {
        for h in &input.hosted {
            let wanted = live.get(&h.logical_file).map_or(0, RoaringBitmap::len);
            let found = kept.get(&h.logical_file).copied().unwrap_or(0);
            if found != wanted {
                return Err(Error::corruption(
                    file.path(),
                    0,
                    format!(
                        "sstables reference {wanted} records of logical file {} but its \
                         record index lists {found} of them",
                        h.logical_file
                    ),
                ));
            }
            stats.records_kept += found;
            stats.records_dropped += h.records.saturating_sub(found);
        }
    }

    let start = Instant::now();
    let files = outputs.finish()?;
    if !files.is_empty() {
        cx.fs.sync_dir(cx.dir)?;
    }
    stats.write_time += start.elapsed();
    stats.files_out = files.len() as u64;
    stats.bytes_written = files.iter().map(|f| f.file_size).sum();
    let input_bytes: u64 = plan.inputs.iter().map(|f| f.size).sum();
    stats.bytes_reclaimed = input_bytes.saturating_sub(stats.bytes_written);
    Ok(GcOutputs { files, stats })
}

/// For each logical file the inputs host that some table references, the
/// union of the referenced ordinals over every table of `version`,
/// checked against the counts the manifest keeps.
fn live_ordinals(
    cx: &GcContext<'_>,
    version: &Version,
    plan: &GcPlan,
    stats: &mut GcStats,
) -> Result<HashMap<FileNumber, RoaringBitmap>> {
    let mut live: HashMap<FileNumber, RoaringBitmap> = plan
        .inputs
        .iter()
        .flat_map(|f| &f.hosted)
        .filter(|h| version.referenced(h.logical_file).count > 0)
        .map(|h| (h.logical_file, RoaringBitmap::new()))
        .collect();
    for (_, table) in version.all_files() {
        if !table
            .value_refs
            .iter()
            .any(|r| live.contains_key(&r.logical_file))
        {
            continue;
        }
        let refs = cx.tables.get(table.number)?.value_refs()?;
        stats.tables_read += 1;
        for (logical, bitmap) in live.iter_mut() {
            if let Some(ordinals) = refs.ordinals(*logical) {
                *bitmap |= ordinals;
            }
        }
    }
    // Tables of one Version never share a record, so the union holds
    // exactly as many ordinals as the manifest's counts add up to.
    for (logical, bitmap) in &live {
        let expected = version.referenced(*logical).count;
        if bitmap.len() != expected {
            return Err(Error::corruption(
                filename::value_file(cx.dir, *logical),
                0,
                format!(
                    "the value-references blocks of the sstables list {} records of logical \
                     file {logical}, the manifest {expected}",
                    bitmap.len()
                ),
            ));
        }
    }
    Ok(live)
}

/// The output files of one job. A logical file is copied into exactly one
/// output (the manifest maps it to one physical file), chosen when its
/// first record arrives: the open output of its class, or a new one if
/// that is full. Hot and cold logical files never share an output, so hot
/// files, which gather garbage fast, are collected without copying cold
/// records again.
#[derive(Default)]
struct Outputs {
    builders: Vec<ValueFileBuilder>,
    /// The output each logical file seen so far goes to.
    assigned: HashMap<FileNumber, usize>,
    /// The output taking new logical files, per class.
    open: HashMap<ValueClass, usize>,
}

impl Outputs {
    fn for_record(
        &mut self,
        cx: &GcContext<'_>,
        logical: FileNumber,
        class: ValueClass,
        new_number: &mut dyn FnMut() -> FileNumber,
        created: &mut Vec<FileNumber>,
    ) -> Result<&mut ValueFileBuilder> {
        let i = match self.assigned.get(&logical) {
            Some(&i) => i,
            None => {
                let open = self
                    .open
                    .get(&class)
                    .copied()
                    .filter(|&i| self.builders[i].file_size() < cx.write.value_file_size);
                let i = match open {
                    Some(i) => i,
                    None => {
                        let number = new_number();
                        created.push(number);
                        let opts = ValueFileOptions {
                            compression: cx.write.compression,
                            direct_writes: cx.write.direct_writes,
                            origin: Origin::Gc,
                            class,
                        };
                        let path = filename::value_file(cx.dir, number);
                        let mut b = ValueFileBuilder::create(cx.fs, path, number, opts)?;
                        if let Some(cache) = &cx.warm {
                            b.warm_cache(cache.clone());
                        }
                        self.builders.push(b);
                        self.open.insert(class, self.builders.len() - 1);
                        self.builders.len() - 1
                    }
                };
                self.assigned.insert(logical, i);
                i
            }
        };
        Ok(&mut self.builders[i])
    }

    /// Finishes (and syncs) every output.
    fn finish(self) -> Result<Vec<ValueFileSummary>> {
        self.builders.into_iter().map(|b| b.finish()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(len: u32) -> Vec<IndexEntry> {
        vec![IndexEntry {
            logical_file: 1,
            ordinal: 0,
            offset: 0,
            len,
        }]
    }

    /// A run read through a gap costs its whole span, in the batch's size,
    /// the rate limiter's charge and the bytes GC reports reading.
    #[test]
    fn a_run_counts_the_gaps_its_read_takes() {
        let entry = |offset, len| IndexEntry {
            logical_file: 1,
            ordinal: offset,
            offset,
            len,
        };
        let gapped = vec![entry(100, 10), entry(150, 10)];
        assert_eq!(run_bytes(&gapped), 60);
        assert_eq!(run_bytes(&[]), 0);
        let half = (BATCH_BYTES / 2) as u32;
        // Each run holds under half a batch of records but spans more.
        let wide = |at: u64| vec![entry(at, half / 2), entry(at + u64::from(half), half / 2)];
        let runs = vec![wide(0), wide(1 << 30), wide(2 << 30)];
        assert_eq!(batches(&runs).count(), 3);
        assert_eq!(
            batch_bytes(&runs),
            3 * (u64::from(half) + u64::from(half / 2))
        );
    }

    #[test]
    fn batches_keep_order_and_bound_bytes() {
        let part = (BATCH_BYTES * 2 / 5) as u32;
        let big = (BATCH_BYTES * 5 / 2) as u32;
        let runs = vec![run(part), run(part), run(part), run(big), run(1), run(1)];
        let got: Vec<Vec<u32>> = batches(&runs)
            .map(|b| b.iter().map(|r| r[0].len).collect())
            .collect();
        // A run larger than a batch goes alone; none is lost or repeated.
        assert_eq!(
            got,
            vec![vec![part, part], vec![part], vec![big], vec![1, 1]]
        );
        assert_eq!(batches(&[]).count(), 0);
    }
}
