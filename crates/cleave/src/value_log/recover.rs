//! Value logs on open: replaying the WAL meets handles into logs the
//! Version does not hold (the crash came before the flush that would have
//! installed them). Each such log is opened once and scanned, record by
//! record, up to its first damaged one, sealed or not: a seal's fsync cut
//! short by a power loss can leave the footer and index on disk without
//! every record page, so a footer proves nothing about the records. Replay
//! keeps a batch only if every record its handles name is among them, and
//! the flush of the replayed memtables installs the logs they point into:
//! as it is, if it is sealed and every record its footer counts is intact;
//! else sealed in place: cut after its last intact record, with the record
//! index and footer written there (no copy: a log cut by a full disk is
//! sealed so too, where a copy would need room for all of it).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::{filename, FileNumber};
use crate::error::{Error, Result};
use crate::value_file::{
    record_from_raw, Origin, ValueClass, ValueFile, ValueFileBuilder, ValueFileOptions,
    ValueFileSummary, ValueHandle,
};
use crate::vfs::{FileOptions, Fs, RandomAccessFile};

use super::scan;

/// The logs met during one replay, by number.
#[derive(Default)]
pub(crate) struct RecoveredLogs(pub BTreeMap<FileNumber, RecoveredLog>);

pub(crate) struct RecoveredLog {
    number: FileNumber,
    path: PathBuf,
    /// `None`: no such file, and every handle into it is to a lost value.
    found: Option<Found>,
    installed: bool,
}

struct Found {
    reader: Arc<dyn RandomAccessFile>,
    /// The places of its intact records, by ordinal.
    places: Vec<(u64, u32)>,
    /// What it holds, if it is sealed and whole: installed as it is.
    whole: Option<ValueFileSummary>,
}

impl RecoveredLog {
    /// Opens log `number` of the database in `dir`.
    pub(crate) fn open(fs: &dyn Fs, dir: &Path, number: FileNumber) -> Result<RecoveredLog> {
        let path = filename::value_file(dir, number);
        let reader = match fs.open(&path, FileOptions::default()) {
            Ok(r) => r,
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
                return Ok(RecoveredLog {
                    number,
                    path,
                    found: None,
                    installed: false,
                });
            }
            Err(e) => return Err(e),
        };
        let places = scan(reader.as_ref())?;
        // Any fault in the footer or what it points to (a cut seal, bytes
        // of a value that look like a footer of another version) leaves
        // the records the scan found, which is all a log needs.
        let whole = ValueFile::open(fs, path.clone(), number, FileOptions::default(), None)
            .ok()
            .filter(|f| {
                let p = f.properties();
                let end = places.last().map_or(0, |&(o, l)| o + u64::from(l));
                p.num_records == places.len() as u64 && p.record_bytes == end
            })
            .map(|f| ValueFileSummary {
                number,
                file_size: reader.len(),
                properties: f.properties().clone(),
            });
        Ok(RecoveredLog {
            number,
            path,
            found: Some(Found {
                reader,
                places,
                whole,
            }),
            installed: false,
        })
    }

    /// Intact records found, from the first on.
    pub(crate) fn records(&self) -> usize {
        self.found.as_ref().map_or(0, |f| f.places.len())
    }

    /// Whether the record `h` names is intact here: the ordinal is one of
    /// the log's intact records, at the handle's offset and length.
    pub(crate) fn holds(&self, h: &ValueHandle) -> bool {
        self.found.as_ref().is_some_and(|f| {
            usize::try_from(h.ordinal)
                .ok()
                .and_then(|i| f.places.get(i))
                .is_some_and(|&p| p == (h.offset, h.len))
        })
    }

    /// The value file that puts this log in the Version, the first time
    /// it is asked for: the log itself, sealed in place after its intact
    /// records unless it is sealed and whole already.
    pub(crate) fn install(
        &mut self,
        fs: &dyn Fs,
        direct_writes: bool,
    ) -> Result<Option<ValueFileSummary>> {
        // A handle into a missing log ended replay before its batch.
        let Some(found) = self.found.as_ref().filter(|_| !self.installed) else {
            return Ok(None);
        };
        let summary = match &found.whole {
            Some(whole) => {
                // A writer that filled it wrote the footer but a crash
                // may have come before its sync: the manifest must not
                // name a file that a power cut could still take back.
                fs.sync_file(&self.path)?;
                whole.clone()
            }
            None => {
                // Sealed in place: cut after its last whole record, its
                // record index and footer written there. Each record keeps
                // its own codec byte.
                let opts = ValueFileOptions {
                    compression: crate::Compression::None,
                    direct_writes,
                    origin: Origin::ValueLog,
                    class: ValueClass::Cold,
                };
                let end = found.places.last().map_or(0, |&(o, l)| o + u64::from(l));
                let mut sealed =
                    ValueFileBuilder::resume(fs, self.path.clone(), self.number, opts, end)?;
                for (ordinal, &(offset, len)) in found.places.iter().enumerate() {
                    let raw = found.reader.read_at(offset, len as usize)?;
                    let record =
                        record_from_raw(&self.path, offset, self.number, ordinal as u64, raw)?;
                    sealed.count_existing(&record, offset, len);
                }
                sealed.finish()?
            }
        };
        self.installed = true;
        Ok(Some(summary))
    }
}
