//! Reading a database's files one at a time, without opening the database:
//! what `cleave dump-sst`, `dump-wal`, `dump-value-file` and
//! `dump-manifest` print (RocksDB's `sst_dump` and `ldb manifest_dump`).
//!
//! Each file is read through an [`Fs`] and checked as the engine checks it
//! (checksums, format versions, counts): damage is an error naming the file
//! and the offset, never a panic, and a reader may be pointed at any file.
//! Nothing is written. Reading a file a running database holds is safe;
//! what it shows is the file as it was when read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::compression::{COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_ZSTD};
use crate::base::expiry;
use crate::base::filename::{self, FileKind};
use crate::base::key::{self, ValueKind};
use crate::base::{FileNumber, InternalIterator};
use crate::error::{Error, Result};
use crate::manifest::version_set::{decode_current, replay};
use crate::manifest::VersionEdit;
use crate::sstable::{new_block_cache, Table};
use crate::value_file::{record_from_raw, IndexEntry, Origin, ValueClass, ValueFile, ValueHandle};
use crate::vfs::{self, FileOptions, Fs};

/// Block cache of a table being dumped: each block is read once.
const DUMP_CACHE_BYTES: usize = 1 << 20;

/// What an entry of an sstable or a WAL batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A value, held in the entry.
    Value,
    /// A tombstone.
    Deletion,
    /// A merge operand, held in the entry.
    Merge,
    /// A separated value: the entry holds its handle.
    ValueRef,
}

impl EntryKind {
    /// The name dumps print.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Value => "PUT",
            EntryKind::Deletion => "DELETE",
            EntryKind::Merge => "MERGE",
            EntryKind::ValueRef => "VALUE_REF",
        }
    }

    /// The kind of an entry of `kind`, an expiring one as its kind without
    /// the expiry (`Entry::expires_at` has that).
    fn of(kind: ValueKind) -> EntryKind {
        match kind {
            ValueKind::Value | ValueKind::ExpiringValue => EntryKind::Value,
            ValueKind::Deletion => EntryKind::Deletion,
            ValueKind::Merge => EntryKind::Merge,
            ValueKind::ValueRef | ValueKind::ExpiringValueRef => EntryKind::ValueRef,
        }
    }
}

/// Where a separated value lies: record `ordinal` of logical value file
/// `logical_file`, `len` bytes at `offset` of the physical file it was
/// written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub logical_file: u64,
    pub ordinal: u64,
    pub offset: u64,
    pub len: u32,
}

impl From<ValueHandle> for Handle {
    fn from(h: ValueHandle) -> Handle {
        Handle {
            logical_file: h.logical_file.0,
            ordinal: h.ordinal,
            offset: h.offset,
            len: h.len,
        }
    }
}

impl From<&IndexEntry> for Handle {
    fn from(e: &IndexEntry) -> Handle {
        Handle {
            logical_file: e.logical_file,
            ordinal: e.ordinal,
            offset: e.offset,
            len: e.len,
        }
    }
}

/// One entry of an sstable or of a WAL batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub seq: u64,
    pub kind: EntryKind,
    /// The value or operand; empty for a deletion; for a separated value,
    /// the encoded handle.
    pub value: Vec<u8>,
    /// The decoded handle of a separated value.
    pub handle: Option<Handle>,
    /// When the entry expires, in milliseconds since the Unix epoch, if it
    /// was written with a time to live.
    pub expires_at: Option<u64>,
}

impl Entry {
    /// An entry of the file `path`; a handle that does not decode is
    /// corruption there (the readers give no finer offset).
    fn new(path: &Path, key: &[u8], seq: u64, kind: ValueKind, stored: &[u8]) -> Result<Entry> {
        let split = expiry::split(kind, stored).map_err(|e| Error::corruption(path, 0, e.0))?;
        let handle = match split.kind {
            ValueKind::ValueRef => Some(
                ValueHandle::decode(split.value)
                    .map_err(|e| Error::corruption(path, 0, e.0))?
                    .into(),
            ),
            _ => None,
        };
        Ok(Entry {
            key: key.to_vec(),
            seq,
            kind: EntryKind::of(kind),
            value: split.value.to_vec(),
            handle,
            expires_at: split.expires_at,
        })
    }
}

/// The number in a cleave file name of `kind` (`7.sst`), or 0 for a file
/// named otherwise (a copy): the number only tells files apart in caches.
fn number_of(path: &Path, kind: FileKind) -> FileNumber {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(filename::parse)
        .filter(|(k, _)| *k == kind)
        .map_or(FileNumber(0), |(_, n)| n)
}

fn codec_name(codec: u64) -> &'static str {
    match u8::try_from(codec) {
        Ok(COMPRESSION_NONE) => "none",
        Ok(COMPRESSION_LZ4) => "lz4",
        Ok(COMPRESSION_ZSTD) => "zstd",
        _ => "unknown",
    }
}

/// An sstable, opened for a dump: footer, metaindex and properties read
/// and checked.
pub struct SstableFile {
    table: Arc<Table>,
    path: PathBuf,
}

/// One data block of an sstable, as its index names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBlock {
    /// The index's separator: a key at or after the block's last entry.
    pub separator: Vec<u8>,
    pub separator_seq: u64,
    pub offset: u64,
    /// Bytes on disk, without the block trailer.
    pub size: u64,
}

/// The records an sstable references in one logical value file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueFileRefs {
    pub logical_file: u64,
    pub records: u64,
    pub bytes: u64,
}

impl SstableFile {
    pub fn open(fs: &dyn Fs, path: &Path) -> Result<SstableFile> {
        let file = fs.open(path, FileOptions::default())?;
        let number = number_of(path, FileKind::Sstable);
        let cache = Arc::new(new_block_cache(DUMP_CACHE_BYTES));
        let table = Table::open(file, path.to_path_buf(), number, cache)?;
        Ok(SstableFile {
            table: Arc::new(table),
            path: path.to_path_buf(),
        })
    }

    /// Every property by its on-disk name (`cleave.num_entries`, …), in
    /// name order, with the compression's name beside its number.
    pub fn properties(&self) -> Vec<(String, String)> {
        let p = self.table.properties();
        let mut out = p.listing();
        for (name, value) in &mut out {
            if name == "cleave.compression" {
                *value = format!("{value} ({})", codec_name(p.compression));
            }
        }
        out
    }

    /// The data blocks, in order, as the index block names them.
    pub fn data_blocks(&self) -> Result<Vec<DataBlock>> {
        let mut out = Vec::new();
        for (sep, offset, size) in self.table.data_blocks()? {
            // A separator's tag may be the seek tag, which is no entry's
            // kind: only its length is checked.
            if sep.len() < key::TAG_LEN {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    "index separator is shorter than an internal key",
                ));
            }
            out.push(DataBlock {
                separator: key::user_key(&sep).to_vec(),
                separator_seq: key::seq(&sep),
                offset,
                size,
            });
        }
        Ok(out)
    }

    /// The value-references block: per logical value file, the records
    /// the table's entries point to.
    pub fn value_refs(&self) -> Result<Vec<ValueFileRefs>> {
        Ok(self
            .table
            .value_refs()?
            .per_file()
            .map(|(file, records, bytes)| ValueFileRefs {
                logical_file: file.0,
                records,
                bytes,
            })
            .collect())
    }

    /// Every entry in key order (newest version of a key first).
    pub fn entries(&self) -> SstableEntries {
        SstableEntries {
            iter: self.table.iter(),
            path: self.path.clone(),
            started: false,
            done: false,
        }
    }

    /// Reads every block and checks every checksum, the order and count of
    /// the entries, and the value-references block against the handles.
    pub fn verify(&self) -> Result<()> {
        self.table.verify()
    }
}

/// The entries of an [`SstableFile`]; ends after the first error.
pub struct SstableEntries {
    iter: crate::sstable::TableIter,
    path: PathBuf,
    started: bool,
    done: bool,
}

impl Iterator for SstableEntries {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        let stepped = if self.started {
            self.iter.next()
        } else {
            self.started = true;
            self.iter.seek_to_first()
        };
        let entry = stepped.and_then(|()| {
            if !self.iter.valid() {
                return Ok(None);
            }
            let ikey = self.iter.key();
            let parsed = key::parse(ikey).ok_or_else(|| {
                Error::corruption(&self.path, 0, "entry key is not an internal key")
            })?;
            Entry::new(
                &self.path,
                parsed.user_key,
                parsed.seq,
                parsed.kind,
                self.iter.value(),
            )
            .map(Some)
        });
        match entry {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A sealed value file (or value log), opened for a dump: footer,
/// properties and top-level record index read and checked.
pub struct ValueFileDump {
    file: ValueFile,
}

/// One record of a value file, with its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRecord {
    /// The record's id and its place in this file.
    pub handle: Handle,
    pub key: Vec<u8>,
    /// 0 for a value-log record (written before its write had one).
    pub seq: u64,
    /// Decompressed.
    pub value: Vec<u8>,
}

impl ValueFileDump {
    pub fn open(fs: &dyn Fs, path: &Path) -> Result<ValueFileDump> {
        let number = number_of(path, FileKind::ValueFile);
        let file = ValueFile::open(fs, path.to_path_buf(), number, FileOptions::default(), None)?;
        Ok(ValueFileDump { file })
    }

    /// Every property by its on-disk name, in name order; keys are given
    /// to `show` to print.
    pub fn properties(&self, show: &dyn Fn(&[u8]) -> String) -> Vec<(String, String)> {
        let p = self.file.properties();
        let origin = match p.origin {
            Origin::Flush => "flush",
            Origin::Gc => "gc",
            Origin::ValueLog => "value log",
            Origin::Compaction => "compaction",
        };
        let class = match p.class {
            ValueClass::Cold => "cold",
            ValueClass::Hot => "hot",
        };
        let hosted: Vec<String> = p
            .hosted
            .iter()
            .map(|h| {
                format!(
                    "{} ({} records, {} bytes)",
                    h.logical_file, h.num_records, h.record_bytes
                )
            })
            .collect();
        let mut out = vec![
            ("cleave.class".to_string(), class.to_string()),
            (
                "cleave.compression".to_string(),
                format!(
                    "{} ({})",
                    p.compression,
                    codec_name(u64::from(p.compression))
                ),
            ),
            (
                "cleave.format_version".to_string(),
                p.format_version.to_string(),
            ),
            ("cleave.hosted_files".to_string(), hosted.join(", ")),
            ("cleave.index_size".to_string(), p.index_size.to_string()),
            ("cleave.largest_key".to_string(), show(&p.largest_key)),
            ("cleave.largest_seq".to_string(), p.largest_seq.to_string()),
            ("cleave.num_records".to_string(), p.num_records.to_string()),
            ("cleave.origin".to_string(), origin.to_string()),
            (
                "cleave.raw_value_bytes".to_string(),
                p.raw_value_bytes.to_string(),
            ),
            (
                "cleave.record_bytes".to_string(),
                p.record_bytes.to_string(),
            ),
            ("cleave.smallest_key".to_string(), show(&p.smallest_key)),
            (
                "cleave.smallest_seq".to_string(),
                p.smallest_seq.to_string(),
            ),
        ];
        out.sort();
        out
    }

    /// The record index: every record's id and place, in file order.
    pub fn record_index(&self) -> Result<Vec<Handle>> {
        Ok(self.runs()?.iter().flatten().map(Handle::from).collect())
    }

    /// Every record in file order, each checked and decompressed; ends
    /// after the first error.
    pub fn records(&self) -> impl Iterator<Item = Result<ValueRecord>> + '_ {
        let runs = match self.runs() {
            Ok(runs) => runs,
            Err(e) => return Box::new(std::iter::once(Err(e))) as Box<dyn Iterator<Item = _>>,
        };
        let mut failed = false;
        Box::new(
            runs.into_iter()
                .map_while(move |run| {
                    if failed {
                        return None;
                    }
                    let read = self.file.read_run(&run);
                    failed = read.is_err();
                    Some(read.map(|records| {
                        run.iter()
                            .zip(records)
                            .map(|(e, r)| ValueRecord {
                                handle: e.into(),
                                key: r.key,
                                seq: r.seq,
                                value: r.value,
                            })
                            .collect::<Vec<_>>()
                    }))
                })
                .flat_map(|run| -> Box<dyn Iterator<Item = Result<ValueRecord>>> {
                    match run {
                        Ok(records) => Box::new(records.into_iter().map(Ok)),
                        Err(e) => Box::new(std::iter::once(Err(e))),
                    }
                }),
        )
    }

    fn runs(&self) -> Result<Vec<Vec<IndexEntry>>> {
        self.file.live_runs(&|_, _| true, 0)
    }

    /// Reads every record and checks every checksum and the record index.
    pub fn verify(&self) -> Result<()> {
        self.file.verify()
    }
}

/// The records of a value log that was never sealed (no record index, no
/// footer: a crash, or a log still being written), in arrival order, up
/// to the first incomplete or damaged one, as recovery reads them; the
/// ordinal is the position. The logical file is the name's number.
pub fn unsealed_value_log(fs: &dyn Fs, path: &Path) -> Result<Vec<ValueRecord>> {
    let file = fs.open(path, FileOptions::default())?;
    let number = number_of(path, FileKind::ValueFile);
    let mut out = Vec::new();
    for (ordinal, (offset, len)) in (0u64..).zip(crate::value_log::scan(file.as_ref())?) {
        let raw = file.read_at(offset, len as usize)?;
        let r = record_from_raw(path, offset, number, ordinal, raw)?;
        out.push(ValueRecord {
            handle: Handle {
                logical_file: number.0,
                ordinal,
                offset,
                len,
            },
            key: r.key,
            seq: r.seq,
            value: r.value,
        });
    }
    Ok(out)
}

/// One write batch of a WAL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalBatch {
    /// The sequence number of its first entry; the others follow.
    pub seq: u64,
    pub entries: Vec<Entry>,
}

/// What a WAL holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDump {
    pub batches: Vec<WalBatch>,
    /// The WAL written before this one, as its header names it.
    pub previous: Option<u64>,
    /// Where reading stopped before the end, and why: a torn final record
    /// (a crash during an append, which recovery ignores) or damage.
    pub stopped: Option<(u64, String)>,
}

/// Reads a whole WAL, which must be named as cleave names them
/// (`<number>.wal`: a recycled WAL's records carry its number).
pub fn wal(fs: &dyn Fs, path: &Path) -> Result<WalDump> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let Some((FileKind::Wal, number)) = filename::parse(name) else {
        return Err(Error::InvalidArgument(format!(
            "{} is not named as a WAL (<number>.wal)",
            path.display()
        )));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let contents = crate::wal::read(fs, dir, number)?;
    let mut batches = Vec::with_capacity(contents.batches.len());
    for (seq, batch) in &contents.batches {
        let mut entries = Vec::with_capacity(batch.len());
        for (s, e) in (*seq..).zip(batch.entries()) {
            let e = e?;
            entries.push(Entry::new(path, e.key, s, e.kind, e.value)?);
        }
        batches.push(WalBatch { seq: *seq, entries });
    }
    Ok(WalDump {
        batches,
        previous: contents.previous.map(|n| n.0),
        stopped: contents.damage.map(|d| {
            let what = if d.torn_tail {
                "torn final record"
            } else {
                "damage"
            };
            (d.offset, format!("{what}: {}", d.reason))
        }),
    })
}

/// What a manifest holds: each edit as text, and the state they add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestDump {
    pub path: PathBuf,
    /// Each edit's offset and its lines.
    pub edits: Vec<(u64, Vec<String>)>,
    /// The state after the last edit: files per level, value files, delta
    /// store, counters.
    pub summary: Vec<String>,
    /// A torn final record (a crash during an append, ignored by recovery).
    pub torn_tail: Option<u64>,
}

/// Reads the manifest `path` names: a manifest file (`MANIFEST-<number>`)
/// or a database directory (the manifest its CURRENT names). Keys are
/// given to `show` to print.
pub fn manifest(fs: &dyn Fs, path: &Path, show: &dyn Fn(&[u8]) -> String) -> Result<ManifestDump> {
    // A manifest file by its name; anything else is a directory.
    let named_manifest = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(filename::parse)
        .is_some_and(|(kind, _)| kind == FileKind::Manifest);
    let current = filename::current(path);
    let path = if !named_manifest {
        let number = decode_current(&current, &vfs::read_all(fs, &current)?)?;
        filename::manifest(path, number)
    } else {
        path.to_path_buf()
    };
    let data = vfs::read_all(fs, &path)?;
    let mut edits = Vec::new();
    let r = replay(&path, &data, &mut |offset, edit| {
        edits.push((offset, describe(edit, show)));
    })?;
    let version = r.version;
    let mut dump = ManifestDump {
        path,
        edits,
        summary: vec![format!(
            "next file {}, last sequence {}, log number {}, merge operator {}",
            r.next_file_number,
            r.last_seq,
            r.log_number,
            r.merge_operator.as_deref().unwrap_or("-")
        )],
        torn_tail: r.torn_tail,
    };
    for level in 0..crate::base::limits::NUM_LEVELS {
        let files = version.files(level);
        if files.is_empty() {
            continue;
        }
        let numbers: Vec<String> = files.iter().map(|f| f.number.to_string()).collect();
        dump.summary.push(format!(
            "L{level}: {} files, {} bytes, {} value bytes referenced: {}",
            files.len(),
            version.level_bytes(level),
            version.level_value_bytes(level),
            numbers.join(" ")
        ));
    }
    for f in version.value_files() {
        dump.summary.push(format!(
            "value file {}: {} bytes, {} bytes garbage",
            f.number,
            f.size,
            version.garbage_bytes(f)
        ));
    }
    let delta_files = version.delta_files().count();
    if delta_files > 0 {
        dump.summary.push(format!(
            "delta store: {} buckets in {delta_files} files",
            version.buckets().count()
        ));
    }
    Ok(dump)
}

/// An edit as lines of text, one per change.
fn describe(edit: &VersionEdit, show: &dyn Fn(&[u8]) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    let mut counters = Vec::new();
    if let Some(v) = edit.format_version {
        counters.push(format!("format version {v}"));
    }
    if let Some(n) = edit.log_number {
        counters.push(format!("log number {n}"));
    }
    if let Some(n) = edit.next_file_number {
        counters.push(format!("next file {n}"));
    }
    if let Some(s) = edit.last_seq {
        counters.push(format!("last sequence {s}"));
    }
    if let Some(m) = &edit.merge_operator {
        counters.push(format!("merge operator {m}"));
    }
    if !counters.is_empty() {
        lines.push(counters.join(", "));
    }
    for (level, f) in &edit.new_files {
        let refs: Vec<String> = f
            .value_refs
            .iter()
            .map(|r| format!("{}:{}/{}B", r.logical_file, r.count, r.bytes))
            .collect();
        lines.push(format!(
            "+ L{level} sstable {} ({} bytes, {} entries, {} deletions, seq {}..{}) [{} @{} .. {} @{}]{}",
            f.number,
            f.size,
            f.num_entries,
            f.num_deletions,
            f.smallest_seq,
            f.largest_seq,
            show(f.smallest.user_key()),
            f.smallest.seq(),
            show(f.largest.user_key()),
            f.largest.seq(),
            if refs.is_empty() {
                String::new()
            } else {
                format!(" values in {}", refs.join(" "))
            }
        ));
    }
    for (level, n) in &edit.deleted_files {
        lines.push(format!("- L{level} sstable {n}"));
    }
    for f in &edit.new_value_files {
        let hosted: Vec<String> = f
            .hosted
            .iter()
            .map(|h| format!("{}:{}/{}B", h.logical_file, h.records, h.bytes))
            .collect();
        lines.push(format!(
            "+ value file {} ({} bytes) hosting {}",
            f.number,
            f.size,
            hosted.join(" ")
        ));
    }
    for n in &edit.deleted_value_files {
        lines.push(format!("- value file {n}"));
    }
    for f in &edit.new_delta_files {
        lines.push(format!("+ delta file {} ({} bytes)", f.number, f.size));
    }
    for n in &edit.deleted_delta_files {
        lines.push(format!("- delta file {n}"));
    }
    for b in &edit.new_buckets {
        lines.push(format!(
            "+ bucket {} from {} ({} chunks, {} bytes)",
            b.id,
            show(&b.smallest),
            b.chunks.len(),
            b.bytes()
        ));
    }
    for id in &edit.deleted_buckets {
        lines.push(format!("- bucket {id}"));
    }
    for (id, c) in &edit.appended_chunks {
        lines.push(format!(
            "bucket {id} + chunk of {} bytes at {} of delta file {}",
            c.len, c.offset, c.file
        ));
    }
    lines
}
