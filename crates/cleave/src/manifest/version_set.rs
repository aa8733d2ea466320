//! The VersionSet owns the current Version and the manifest that makes it
//! durable: CURRENT names the manifest; the manifest is a sequence of
//! record-framed VersionEdits whose first is a snapshot of the whole state.
//! Not thread-safe: the DB wraps it in its mutex.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::coding::{put_varint32, put_varint64};
use crate::base::filename;
use crate::base::{Decoder, FileNumber, SeqNo};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::record::{self, Next, RecordReader, RecordWriter};
use crate::vfs::{self, FileOptions, Fs};

use super::{ObsoleteFiles, Version, VersionEdit, FORMAT_VERSION};

/// Format of the CURRENT file's payload; independent of the DB format.
const CURRENT_FORMAT_VERSION: u32 = 1;

pub(crate) struct VersionSet {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    max_manifest_file_size: u64,
    current: Arc<Version>,
    next_file_number: u64,
    last_seq: SeqNo,
    log_number: FileNumber,
    manifest_number: FileNumber,
    /// `None` after recovery and after a failed write: the next apply then
    /// starts a fresh manifest rather than appending behind a torn or
    /// unknown tail.
    manifest: Option<RecordWriter>,
    obsolete: Arc<ObsoleteFiles>,
    /// Physical value files an edit must keep although no sstable
    /// references them: value logs that unflushed memtable entries point
    /// into (`value_log`).
    keep: Option<KeepValueFile>,
    /// The merge operator the database's merges need, once one is logged.
    merge_operator: Option<String>,
}

/// Says whether a physical value file must stay though unreferenced.
pub(crate) type KeepValueFile = Box<dyn Fn(FileNumber) -> bool + Send + Sync>;

impl VersionSet {
    /// Initialises a new, empty database in `dir`: manifest 1 holding one
    /// snapshot edit, and CURRENT pointing at it.
    pub(crate) fn create(fs: Arc<dyn Fs>, dir: &Path, opts: &Options) -> Result<VersionSet> {
        fs.create_dir_all(dir)?;
        let mut vs = VersionSet::empty(fs, dir, opts);
        let number = vs.new_file_number();
        let version = Version::default();
        let writer = vs.write_manifest(number, &version)?;
        vs.manifest_number = number;
        vs.manifest = Some(writer);
        Ok(vs)
    }

    /// Loads the state CURRENT and its manifest describe. A torn final
    /// manifest record (a crash mid-append) is ignored; any other damage is
    /// `Error::Corruption` naming the file.
    pub(crate) fn recover(fs: Arc<dyn Fs>, dir: &Path, opts: &Options) -> Result<VersionSet> {
        let current_path = filename::current(dir);
        let manifest_number = decode_current(&current_path, &vfs::read_all(&*fs, &current_path)?)?;
        let path = filename::manifest(dir, manifest_number);
        let data = vfs::read_all(&*fs, &path)?;
        let replayed = replay(&path, &data, &mut |_, _| {})?;
        let mut vs = VersionSet::empty(fs, dir, opts);
        let max_file = replayed
            .version
            .all_files()
            .map(|(_, f)| f.number.0)
            .chain(replayed.version.value_files().map(|f| f.number.0))
            .chain([manifest_number.0])
            .max()
            .unwrap_or(0);
        // Defensive: never hand out a number some file already has.
        vs.next_file_number = replayed.next_file_number.0.max(max_file + 1);
        vs.last_seq = replayed.last_seq;
        vs.log_number = replayed.log_number;
        vs.merge_operator = replayed.merge_operator;
        vs.manifest_number = manifest_number;
        vs.current = Arc::new(replayed.version);
        Ok(vs)
    }

    fn empty(fs: Arc<dyn Fs>, dir: &Path, opts: &Options) -> VersionSet {
        VersionSet {
            fs,
            dir: dir.to_path_buf(),
            max_manifest_file_size: opts.effective_max_manifest_file_size(),
            current: Arc::new(Version::default()),
            next_file_number: 1,
            last_seq: 0,
            log_number: FileNumber(0),
            manifest_number: FileNumber(0),
            manifest: None,
            obsolete: Arc::default(),
            keep: None,
            merge_operator: None,
        }
    }

    /// Sets what an edit keeps of the value files no sstable references.
    pub(crate) fn keep_value_files(&mut self, keep: KeepValueFile) {
        self.keep = Some(keep);
    }

    /// Logs `edit` durably, then installs the Version it produces. Fills in
    /// `next_file_number` and `last_seq`. On error the current Version is
    /// unchanged; the on-disk state may or may not include the edit, so the
    /// caller must stop writing (poison).
    pub(crate) fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        if let Some(s) = edit.last_seq {
            self.last_seq = self.last_seq.max(s);
        }
        if edit.merge_operator.is_some() && edit.merge_operator == self.merge_operator {
            edit.merge_operator = None;
        }
        let log_number = edit.log_number.unwrap_or(self.log_number);
        if log_number < self.log_number || log_number.0 >= self.next_file_number {
            return Err(Error::InvalidArgument(format!(
                "version edit moves log number from {} to {log_number}",
                self.log_number
            )));
        }
        let rotate = self
            .manifest
            .as_ref()
            .is_none_or(|w| w.len() >= self.max_manifest_file_size);
        // Allocated before next_file_number is logged, so it is covered.
        let new_manifest = rotate.then(|| self.new_file_number());
        edit.format_version = None;
        edit.next_file_number = Some(FileNumber(self.next_file_number));
        edit.last_seq = Some(self.last_seq);
        let does_not_apply =
            |reason| Error::InvalidArgument(format!("version edit does not apply: {reason}"));
        // A physical value file whose records no table references any more
        // leaves in the same edit, explicitly, so replay needs no rule.
        let mut version = self.current.apply(edit.clone()).map_err(does_not_apply)?;
        let mut dead = version.unreferenced_value_files();
        if let Some(keep) = &self.keep {
            dead.retain(|&n| !keep(n));
        }
        if !dead.is_empty() {
            for number in dead {
                // A file this edit adds that nothing references is simply
                // not added: it stays an orphan, removed by the next open.
                let before = edit.new_value_files.len();
                edit.new_value_files.retain(|f| f.number != number);
                if edit.new_value_files.len() == before {
                    edit.delete_value_file(number);
                }
            }
            version = self.current.apply(edit.clone()).map_err(does_not_apply)?;
        }
        let mut record = Vec::new();
        edit.encode(&mut record);
        let removed = edit.deleted_files.clone();
        let prev_log_number = std::mem::replace(&mut self.log_number, log_number);
        // A rotation's snapshot carries the new name too.
        let prev_merge_operator = match &edit.merge_operator {
            Some(name) => self.merge_operator.replace(name.clone()),
            None => self.merge_operator.clone(),
        };
        let logged = match new_manifest {
            Some(number) => self.rotate(number, &version),
            None => self.append(&record),
        };
        if let Err(e) = logged {
            self.log_number = prev_log_number;
            self.merge_operator = prev_merge_operator;
            self.manifest = None;
            return Err(e);
        }
        for (level, number) in removed {
            if version.contains_file(number) {
                continue; // moved to another level, still live
            }
            if let Some(f) = self
                .current
                .files(level)
                .iter()
                .find(|f| f.number == number)
            {
                f.mark_obsolete(&self.obsolete);
            }
        }
        for number in &edit.deleted_value_files {
            if let Some(f) = self.current.value_files().find(|f| f.number == *number) {
                f.mark_obsolete(&self.obsolete);
            }
        }
        for number in &edit.deleted_delta_files {
            if let Some(f) = self.current.delta_file(*number) {
                f.mark_obsolete(&self.obsolete);
            }
        }
        self.current = Arc::new(version);
        Ok(())
    }

    fn append(&mut self, record: &[u8]) -> Result<()> {
        let Some(w) = self.manifest.as_mut() else {
            return Err(Error::InvalidArgument("no open manifest".to_string()));
        };
        w.add(record)?;
        w.sync()
    }

    /// Starts manifest `number` with a snapshot of `version` and switches
    /// CURRENT to it; the old manifest is then deleted (if that fails it is
    /// an orphan, removed on the next open).
    fn rotate(&mut self, number: FileNumber, version: &Version) -> Result<()> {
        self.manifest = None;
        let writer = self.write_manifest(number, version)?;
        let old = std::mem::replace(&mut self.manifest_number, number);
        self.manifest = Some(writer);
        let _ = self.fs.remove(&filename::manifest(&self.dir, old));
        Ok(())
    }

    /// Writes and syncs a new manifest holding one snapshot edit, then points
    /// CURRENT at it. On failure the new manifest is removed (best effort).
    fn write_manifest(&self, number: FileNumber, version: &Version) -> Result<RecordWriter> {
        write_manifest(&*self.fs, &self.dir, number, &self.snapshot_edit(version))
    }

    /// The current Version and a snapshot edit describing it, for a copy of
    /// the database in another directory, whose manifest is numbered as
    /// returned: a number no file of this database has.
    pub(crate) fn checkpoint_edit(&self) -> (Arc<Version>, VersionEdit, FileNumber) {
        let mut edit = self.snapshot_edit(&self.current);
        let manifest = FileNumber(self.next_file_number);
        edit.next_file_number = Some(FileNumber(manifest.0 + 1));
        // The copy holds no WAL, so it names none to replay from (as a
        // database that never logged one).
        edit.log_number = Some(FileNumber(0));
        (self.current.clone(), edit, manifest)
    }

    fn snapshot_edit(&self, version: &Version) -> VersionEdit {
        VersionEdit {
            format_version: Some(FORMAT_VERSION),
            log_number: Some(self.log_number),
            next_file_number: Some(FileNumber(self.next_file_number)),
            last_seq: Some(self.last_seq),
            deleted_files: Vec::new(),
            new_files: version
                .all_files()
                .map(|(level, f)| (level, (**f).clone()))
                .collect(),
            deleted_value_files: Vec::new(),
            new_value_files: version.value_files().map(|f| (**f).clone()).collect(),
            merge_operator: self.merge_operator.clone(),
            new_delta_files: version.delta_files().map(|f| (**f).clone()).collect(),
            deleted_delta_files: Vec::new(),
            deleted_buckets: Vec::new(),
            new_buckets: version.buckets().map(|b| (**b).clone()).collect(),
            appended_chunks: Vec::new(),
        }
    }

    /// Reads CURRENT and the manifest it names from disk again, replays
    /// the manifest, and checks that it describes the files of the current
    /// Version: what a reopen would find. For `Db::verify`.
    pub(crate) fn check_manifest(&self) -> Result<()> {
        let current_path = filename::current(&self.dir);
        let number = decode_current(&current_path, &vfs::read_all(&*self.fs, &current_path)?)?;
        if number != self.manifest_number {
            return Err(Error::corruption(
                current_path,
                0,
                format!(
                    "names manifest {number}, but the database writes manifest {}",
                    self.manifest_number
                ),
            ));
        }
        let path = filename::manifest(&self.dir, number);
        let replayed = replay(&path, &vfs::read_all(&*self.fs, &path)?, &mut |_, _| {})?;
        if !replayed.version.same_files(&self.current) {
            return Err(Error::corruption(
                path,
                0,
                "describes other sstables or value files than the open database",
            ));
        }
        if replayed.log_number != self.log_number || replayed.last_seq > self.last_seq {
            return Err(Error::corruption(
                path,
                0,
                format!(
                    "log number {} and last sequence {} disagree with the open database's {} and {}",
                    replayed.log_number, replayed.last_seq, self.log_number, self.last_seq
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    pub(crate) fn new_file_number(&mut self) -> FileNumber {
        let n = FileNumber(self.next_file_number);
        self.next_file_number += 1;
        n
    }

    /// The number [`Self::new_file_number`] hands out next.
    pub(crate) fn next_file_number(&self) -> FileNumber {
        FileNumber(self.next_file_number)
    }

    /// Makes sure `number` is never handed out again (a file found on disk
    /// that the manifest does not cover, such as a WAL created after the
    /// last edit).
    pub(crate) fn mark_file_number_used(&mut self, number: FileNumber) {
        self.next_file_number = self.next_file_number.max(number.0 + 1);
    }

    pub(crate) fn last_seq(&self) -> SeqNo {
        self.last_seq
    }

    pub(crate) fn set_last_seq(&mut self, seq: SeqNo) {
        debug_assert!(seq >= self.last_seq, "sequence numbers go backwards");
        self.last_seq = seq;
    }

    /// The name of the merge operator logged with the first merge, if any.
    pub(crate) fn merge_operator(&self) -> Option<&str> {
        self.merge_operator.as_deref()
    }

    pub(crate) fn log_number(&self) -> FileNumber {
        self.log_number
    }

    /// Whether the next edit starts a new manifest: none is open yet, or
    /// the last write to it failed.
    pub(crate) fn rotates_next(&self) -> bool {
        self.manifest.is_none()
    }

    pub(crate) fn manifest_number(&self) -> FileNumber {
        self.manifest_number
    }

    /// Sstables and value files of the current Version plus the manifest:
    /// everything else with a cleave name (except WALs ≥ log_number,
    /// CURRENT and LOCK) is an orphan.
    pub(crate) fn live_file_numbers(&self) -> HashSet<FileNumber> {
        self.current
            .all_files()
            .map(|(_, f)| f.number)
            .chain(self.current.value_files().map(|f| f.number))
            .chain(self.current.delta_files().map(|f| f.number))
            .chain([self.manifest_number])
            .collect()
    }

    /// Files no Version names any more, to be deleted by the caller.
    #[cfg(test)]
    pub(crate) fn take_obsolete(&self) -> Vec<super::file_meta::ObsoleteFile> {
        self.obsolete.take()
    }

    /// Where files leaving every Version are queued for deletion.
    pub(crate) fn obsolete_files(&self) -> Arc<ObsoleteFiles> {
        self.obsolete.clone()
    }
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("dir", &self.dir)
            .field("manifest_number", &self.manifest_number)
            .field("next_file_number", &self.next_file_number)
            .field("last_seq", &self.last_seq)
            .field("log_number", &self.log_number)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

/// Writes and syncs manifest `number` in `dir` holding `snapshot`, then
/// points CURRENT at it. On failure the new manifest is removed (best
/// effort).
pub(crate) fn write_manifest(
    fs: &dyn Fs,
    dir: &Path,
    number: FileNumber,
    snapshot: &VersionEdit,
) -> Result<RecordWriter> {
    let path = filename::manifest(dir, number);
    let mut renamed = false;
    let result = (|| {
        let mut w = RecordWriter::new(fs.create(&path, FileOptions::default())?);
        let mut payload = Vec::new();
        snapshot.encode(&mut payload);
        w.add(&payload)?;
        w.sync()?;
        let mut current = Vec::new();
        record::encode(&mut current, &encode_current_payload(number));
        // Once the rename may have happened, CURRENT may name the new
        // manifest: it must stay (it is complete and synced); whichever
        // one CURRENT does not name is an orphan on the next open.
        renamed = true;
        vfs::write_atomically(
            fs,
            dir,
            &filename::temp(dir, number),
            &filename::current(dir),
            &current,
        )?;
        Ok(w)
    })();
    if result.is_err() && !renamed {
        let _ = fs.remove(&path);
    }
    result
}

fn encode_current_payload(manifest: FileNumber) -> Vec<u8> {
    let mut p = Vec::new();
    put_varint32(&mut p, CURRENT_FORMAT_VERSION);
    put_varint64(&mut p, manifest.0);
    p
}

/// CURRENT is exactly one record: `varint32 format_version, varint64
/// manifest_number`. Anything else (even a torn tail: CURRENT is replaced
/// atomically, so it is never torn) is corruption.
pub(crate) fn decode_current(path: &Path, data: &[u8]) -> Result<FileNumber> {
    let mut reader = RecordReader::new(data);
    let payload = match reader.next_record() {
        Next::Record { payload, .. } => payload,
        Next::End => return Err(Error::corruption(path, 0, "CURRENT is empty")),
        Next::TornTail { offset, reason } | Next::Corrupt { offset, reason } => {
            return Err(Error::corruption(path, offset, reason))
        }
    };
    if reader.next_record() != Next::End {
        return Err(Error::corruption(path, 0, "CURRENT has trailing data"));
    }
    let mut d = Decoder::new(payload);
    let bad = |e: crate::base::coding::DecodeError| Error::corruption(path, 0, e.0);
    let version = d.varint32().map_err(bad)?;
    if version > CURRENT_FORMAT_VERSION {
        return Err(Error::UnsupportedFormatVersion {
            file: path.to_path_buf(),
            found: version,
            supported: CURRENT_FORMAT_VERSION,
        });
    }
    let number = FileNumber(d.varint64().map_err(bad)?);
    if !d.is_empty() || number.0 == 0 {
        return Err(Error::corruption(path, 0, "malformed CURRENT payload"));
    }
    Ok(number)
}

/// The state a manifest's edits add up to.
pub(crate) struct Replayed {
    pub version: Version,
    pub next_file_number: FileNumber,
    pub last_seq: SeqNo,
    pub log_number: FileNumber,
    pub merge_operator: Option<String>,
    /// Where a torn final record starts, if the manifest ends in one.
    pub torn_tail: Option<u64>,
}

/// Replays the manifest `data` read from `path`, handing each edit and its
/// offset to `each` before applying it.
pub(crate) fn replay(
    path: &Path,
    data: &[u8],
    each: &mut dyn FnMut(u64, &VersionEdit),
) -> Result<Replayed> {
    let mut reader = RecordReader::new(data);
    let mut version = Version::default();
    let (mut next_file_number, mut last_seq, mut log_number) = (None, None, None);
    let mut merge_operator = None;
    let mut torn_tail = None;
    let mut first = true;
    loop {
        let (offset, payload) = match reader.next_record() {
            Next::Record { offset, payload } => (offset, payload),
            Next::End => break,
            // A crash mid-append leaves a torn last record; the edit in it
            // was never acknowledged.
            Next::TornTail { offset, .. } => {
                torn_tail = Some(offset);
                break;
            }
            Next::Corrupt { offset, reason } => {
                return Err(Error::corruption(path, offset, reason))
            }
        };
        let edit =
            VersionEdit::decode(payload).map_err(|e| Error::corruption(path, offset, e.0))?;
        match edit.format_version {
            Some(found) if found > FORMAT_VERSION => {
                return Err(Error::UnsupportedFormatVersion {
                    file: path.to_path_buf(),
                    found,
                    supported: FORMAT_VERSION,
                })
            }
            None if first => {
                return Err(Error::corruption(
                    path,
                    offset,
                    "first manifest edit has no format version",
                ))
            }
            _ => {}
        }
        first = false;
        each(offset, &edit);
        next_file_number = edit.next_file_number.or(next_file_number);
        last_seq = edit.last_seq.or(last_seq);
        log_number = edit.log_number.or(log_number);
        merge_operator = edit.merge_operator.clone().or(merge_operator);
        version = version
            .apply(edit)
            .map_err(|reason| Error::corruption(path, offset, reason))?;
    }
    match (next_file_number, last_seq, log_number) {
        (Some(next_file_number), Some(last_seq), Some(log_number)) => Ok(Replayed {
            version,
            next_file_number,
            last_seq,
            log_number,
            merge_operator,
            torn_tail,
        }),
        _ => Err(Error::corruption(
            path,
            0,
            "manifest lacks a snapshot edit (next file number, last seq, log number)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use super::*;
    use crate::manifest::testutil::meta;
    use crate::manifest::FileMeta;
    use crate::vfs::{FaultFs, FaultOp, MemFs};

    const DIR: &str = "/db";

    fn opts(max_manifest: u64) -> Options {
        Options {
            max_manifest_file_size: max_manifest,
            ..Options::default()
        }
    }

    /// What recovery must reproduce.
    #[derive(Debug, Clone, PartialEq)]
    struct State {
        files: Vec<(usize, FileMeta)>,
        last_seq: SeqNo,
        log_number: FileNumber,
    }

    fn state(vs: &VersionSet) -> State {
        State {
            files: vs
                .current()
                .all_files()
                .map(|(l, f)| (l, (**f).clone()))
                .collect(),
            last_seq: vs.last_seq(),
            log_number: vs.log_number(),
        }
    }

    /// Edit `i` of a deterministic workload: flush a file into L0, and
    /// every third step move the oldest L0 file down to L6.
    fn workload_edit(vs: &mut VersionSet, i: u64) -> VersionEdit {
        let mut e = VersionEdit::default();
        let n = vs.new_file_number();
        let key = format!("k{i:04}");
        e.add_file(0, meta(n.0, &key, &key, i * 10, 100 + i));
        if i % 3 == 2 {
            if let Some(old) = vs.current().files(0).last() {
                e.delete_file(0, old.number);
                e.add_file(6, (**old).clone());
            }
        }
        if i % 4 == 1 {
            e.log_number = Some(n);
        }
        vs.set_last_seq(i * 10 + 1);
        e
    }

    fn recover(fs: &MemFs, max_manifest: u64) -> Result<VersionSet> {
        VersionSet::recover(Arc::new(fs.clone()), Path::new(DIR), &opts(max_manifest))
    }

    #[test]
    fn recover_after_many_edits_and_rotations() {
        let fs = MemFs::new();
        let mut vs =
            VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 10)).unwrap();
        assert_eq!(vs.manifest_number(), FileNumber(1));
        let mut manifests = HashSet::new();
        for i in 0..60 {
            let e = workload_edit(&mut vs, i);
            vs.log_and_apply(e).unwrap();
            manifests.insert(vs.manifest_number());
        }
        assert!(manifests.len() > 2, "the manifest never rotated");
        let names = fs.list(Path::new(DIR)).unwrap();
        let on_disk: Vec<_> = names
            .iter()
            .filter(|n| n.starts_with("MANIFEST-"))
            .collect();
        assert_eq!(
            on_disk.len(),
            1,
            "old manifests were not removed: {names:?}"
        );
        let want = state(&vs);
        let got = recover(&fs, 1 << 10).unwrap();
        assert_eq!(state(&got), want);
        assert!(got.next_file_number >= vs.next_file_number);
        assert_eq!(got.live_file_numbers(), vs.live_file_numbers());
        // First apply after recovery starts a new manifest.
        let mut got = got;
        let before = got.manifest_number();
        let e = workload_edit(&mut got, 60);
        got.log_and_apply(e).unwrap();
        assert_ne!(got.manifest_number(), before);
        assert_eq!(state(&recover(&fs, 1 << 10).unwrap()), state(&got));
    }

    #[test]
    fn recover_after_crash_at_every_operation() {
        // Run the workload on a disk that stops working after `k` file
        // operations, then crash (keeping half of any unsynced bytes) and
        // recover. The result must be a state the workload produced, at
        // least as new as the last acknowledged apply.
        let mut k = 0;
        loop {
            let mem = MemFs::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let all = [
                FaultOp::Create,
                FaultOp::Append,
                FaultOp::Sync,
                FaultOp::Rename,
                FaultOp::Remove,
                FaultOp::SyncDir,
            ];
            fault.fail(&all, None, k, ErrorKind::Other, true);
            let mut states = Vec::new();
            let mut acknowledged = None;
            let mut finished = false;
            if let Ok(mut vs) =
                VersionSet::create(Arc::new(fault.clone()), Path::new(DIR), &opts(600))
            {
                states.push(state(&vs));
                acknowledged = Some(0);
                finished = (0..12).all(|i| {
                    let e = workload_edit(&mut vs, i);
                    let next = vs.current().apply(e.clone()).unwrap();
                    let mut expect = state(&vs);
                    expect.files = next.all_files().map(|(l, f)| (l, (**f).clone())).collect();
                    expect.last_seq = vs.last_seq();
                    expect.log_number = e.log_number.unwrap_or(vs.log_number());
                    states.push(expect);
                    match vs.log_and_apply(e) {
                        Ok(()) => {
                            acknowledged = Some(states.len() - 1);
                            true
                        }
                        Err(_) => false,
                    }
                });
            }
            let crashed = mem.crash_clone_keeping(|n| n / 2);
            match (recover(&crashed, 600), acknowledged) {
                (Ok(vs), Some(ack)) => {
                    let got = state(&vs);
                    let pos = states.iter().position(|s| *s == got);
                    assert!(
                        pos.is_some_and(|p| p >= ack),
                        "k={k}: recovered {got:?}, acknowledged {ack}"
                    );
                }
                (Err(e), None) => assert!(!e.is_corruption(), "k={k}: {e}"),
                (Ok(vs), None) => {
                    // create failed after CURRENT became durable: an empty DB.
                    assert_eq!(vs.current().all_files().count(), 0, "k={k}");
                }
                (Err(e), Some(ack)) => panic!("k={k}: lost acknowledged state {ack}: {e}"),
            }
            if finished {
                break;
            }
            k += 1;
        }
        assert!(k > 20, "the workload did too few operations to test");
    }

    #[test]
    fn every_flipped_byte_of_current_is_an_error() {
        let fs = MemFs::new();
        let vs = VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        drop(vs);
        let path = filename::current(Path::new(DIR));
        let len = fs.file_len(&path).unwrap();
        for i in 0..len {
            let copy = fs.crash_clone();
            assert!(copy.corrupt_byte(&path, i));
            let err = recover(&copy, 1 << 20).err();
            assert!(
                err.as_ref().is_some_and(Error::is_corruption),
                "flip at {i}: {err:?}"
            );
        }
        let copy = fs.crash_clone();
        copy.truncate(&path, len - 1);
        assert!(recover(&copy, 1 << 20).unwrap_err().is_corruption());
    }

    #[test]
    fn every_flipped_byte_of_the_manifest_errors_or_recovers_a_prefix() {
        let fs = MemFs::new();
        let mut vs =
            VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        // First apply rotates nothing (create left the manifest open).
        let mut states = vec![state(&vs)];
        for i in 0..5 {
            let e = workload_edit(&mut vs, i);
            vs.log_and_apply(e).unwrap();
            states.push(state(&vs));
        }
        let path = filename::manifest(Path::new(DIR), vs.manifest_number());
        let len = fs.file_len(&path).unwrap();
        let mut errors = 0;
        for i in 0..len {
            let copy = fs.crash_clone();
            assert!(copy.corrupt_byte(&path, i));
            match recover(&copy, 1 << 20) {
                Ok(got) => {
                    // A damaged last record, or a record length pointing
                    // past the end, reads as a torn tail: a prefix survives.
                    let got = state(&got);
                    let pos = states.iter().position(|s| *s == got);
                    assert!(pos.is_some_and(|p| p < states.len() - 1), "flip at {i}");
                }
                Err(e) => {
                    assert!(e.is_corruption(), "flip at {i}: {e}");
                    assert!(e.to_string().contains("MANIFEST-"), "{e}");
                    errors += 1;
                }
            }
        }
        assert!(errors > len / 2);
    }

    #[test]
    fn missing_manifest_and_unsupported_versions_are_reported() {
        let fs = MemFs::new();
        let vs = VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        let manifest = filename::manifest(Path::new(DIR), vs.manifest_number());
        let copy = fs.crash_clone();
        copy.remove(&manifest).unwrap();
        let err = recover(&copy, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("MANIFEST-"), "{err}");

        let copy = fs.crash_clone();
        let mut current = Vec::new();
        let mut payload = Vec::new();
        put_varint32(&mut payload, 2);
        put_varint64(&mut payload, 1);
        record::encode(&mut current, &payload);
        vfs::write_atomically(
            &copy,
            Path::new(DIR),
            Path::new("/db/x.tmp"),
            &filename::current(Path::new(DIR)),
            &current,
        )
        .unwrap();
        assert!(matches!(
            recover(&copy, 1 << 20),
            Err(Error::UnsupportedFormatVersion { found: 2, .. })
        ));

        let copy = fs.crash_clone();
        let mut edit = Vec::new();
        VersionEdit {
            format_version: Some(FORMAT_VERSION + 1),
            ..VersionEdit::default()
        }
        .encode(&mut edit);
        let mut data = Vec::new();
        record::encode(&mut data, &edit);
        vfs::write_atomically(
            &copy,
            Path::new(DIR),
            Path::new("/db/x.tmp"),
            &manifest,
            &data,
        )
        .unwrap();
        match recover(&copy, 1 << 20) {
            Err(Error::UnsupportedFormatVersion { file, found, .. }) => {
                assert_eq!((file, found), (manifest, FORMAT_VERSION + 1));
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn failed_sync_leaves_current_unchanged() {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let mut vs =
            VersionSet::create(Arc::new(fault.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        let e = workload_edit(&mut vs, 0);
        vs.log_and_apply(e).unwrap();
        let before = vs.current();
        let before_state = state(&vs);
        fault.fail(
            &[FaultOp::Sync],
            Some("MANIFEST"),
            0,
            ErrorKind::Other,
            false,
        );
        let e = workload_edit(&mut vs, 1);
        assert!(vs.log_and_apply(e).is_err());
        assert!(Arc::ptr_eq(&before, &vs.current()));
        assert_eq!(state(&vs).files, before_state.files);
        assert_eq!(vs.log_number(), before_state.log_number);
        // After the fault clears, the next apply starts a fresh manifest.
        let old_manifest = vs.manifest_number();
        let e = workload_edit(&mut vs, 2);
        vs.log_and_apply(e).unwrap();
        assert_ne!(vs.manifest_number(), old_manifest);
        assert_eq!(state(&recover(&mem, 1 << 20).unwrap()), state(&vs));
    }

    #[test]
    fn a_value_file_no_table_references_leaves_in_the_same_edit() {
        let fs = MemFs::new();
        let mut vs =
            VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        let mut e = VersionEdit::default();
        e.add_value_file(crate::manifest::ValueFileMeta {
            number: FileNumber(20),
            size: 500,
            hosted: vec![crate::manifest::HostedLogical {
                logical_file: FileNumber(20),
                records: 2,
                bytes: 400,
            }],
            ..Default::default()
        });
        let mut table = meta(21, "a", "c", 1, 10);
        table.value_refs = vec![crate::manifest::TableValueRefs {
            logical_file: FileNumber(20),
            count: 2,
            bytes: 400,
        }];
        e.add_file(0, table);
        vs.log_and_apply(e).unwrap();
        let held = vs.current();
        let mut e = VersionEdit::default();
        e.delete_file(0, FileNumber(21));
        vs.log_and_apply(e).unwrap();
        assert_eq!(vs.current().value_files().count(), 0);
        assert!(
            vs.take_obsolete().is_empty(),
            "a reader holds the old version"
        );
        drop(held);
        let gone: Vec<_> = vs
            .take_obsolete()
            .iter()
            .map(|f| (f.kind, f.number.0))
            .collect();
        use crate::base::filename::FileKind;
        assert_eq!(
            gone,
            vec![(FileKind::Sstable, 21), (FileKind::ValueFile, 20)]
        );
        // A value file an edit adds but nothing references is left out
        // rather than failing the edit.
        let mut e = VersionEdit::default();
        e.add_value_file(crate::manifest::ValueFileMeta {
            number: FileNumber(22),
            size: 500,
            hosted: vec![crate::manifest::HostedLogical {
                logical_file: FileNumber(22),
                records: 1,
                bytes: 400,
            }],
            ..Default::default()
        });
        vs.log_and_apply(e).unwrap();
        assert_eq!(vs.current().value_files().count(), 0);
        // Replay reaches the same state: the deletion was logged.
        let vs = VersionSet::recover(Arc::new(fs), Path::new(DIR), &opts(1 << 20)).unwrap();
        assert_eq!(vs.current().value_files().count(), 0);
        assert_eq!(vs.current().all_files().count(), 0);
    }

    #[test]
    fn removed_files_become_obsolete_when_no_version_holds_them() {
        let fs = MemFs::new();
        let mut vs =
            VersionSet::create(Arc::new(fs.clone()), Path::new(DIR), &opts(1 << 20)).unwrap();
        let mut e = VersionEdit::default();
        e.add_file(1, meta(10, "a", "c", 1, 10));
        e.add_file(1, meta(11, "d", "f", 1, 10));
        vs.log_and_apply(e).unwrap();
        let v1 = vs.current();
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNumber(10));
        vs.log_and_apply(e).unwrap();
        let v2 = vs.current();
        // A trivial move re-adds the same number: not obsolete.
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNumber(11));
        e.add_file(2, meta(11, "d", "f", 1, 10));
        vs.log_and_apply(e).unwrap();
        assert!(vs.take_obsolete().is_empty());
        drop(v1);
        assert_eq!(
            vs.take_obsolete(),
            vec![crate::manifest::file_meta::ObsoleteFile {
                kind: crate::base::filename::FileKind::Sstable,
                number: FileNumber(10)
            }]
        );
        drop(v2);
        assert!(vs.take_obsolete().is_empty());
        assert_eq!(
            vs.live_file_numbers(),
            HashSet::from([FileNumber(11), vs.manifest_number()])
        );
        // Closing never schedules live files for deletion.
        let obsolete = vs.obsolete.clone();
        drop(vs);
        assert!(obsolete.take().is_empty());
    }
}
