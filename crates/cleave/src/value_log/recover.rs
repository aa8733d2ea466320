//! Value logs on open: replaying the WAL meets handles into logs the
//! Version does not hold (the crash came before the flush that would have
//! installed them). Each such log is opened once: whole if it was sealed,
//! else scanned up to its first damaged record. Replay keeps a batch only
//! if every record its handles name is intact, and the flush of the
//! replayed memtables installs the logs they point into: a sealed one as it
//! is, an unsealed one through a sealed copy of its intact records, which
//! hosts the log's logical file (the log itself becomes an orphan).

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
    found: Found,
    installed: bool,
}

enum Found {
    /// No such file: every handle into it is to a lost value.
    Missing,
    /// Sealed: footer, properties and record index read back.
    Sealed { file: Box<ValueFile>, size: u64 },
    /// Never sealed: the places of its intact records, by ordinal.
    Scanned {
        reader: Arc<dyn RandomAccessFile>,
        places: Vec<(u64, u32)>,
    },
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
                    found: Found::Missing,
                    installed: false,
                });
            }
            Err(e) => return Err(e),
        };
        let found = match ValueFile::open(fs, path.clone(), number, FileOptions::default(), None) {
            Ok(file) => Found::Sealed {
                file: Box::new(file),
                size: reader.len(),
            },
            // No footer (or a damaged one): the records are all there is.
            Err(Error::Corruption { .. }) => Found::Scanned {
                places: scan(reader.as_ref())?,
                reader,
            },
            Err(e) => return Err(e),
        };
        Ok(RecoveredLog {
            number,
            path,
            found,
            installed: false,
        })
    }

    /// Whether the record `h` names is intact here: the ordinal is one of
    /// the log's records, at the handle's offset and length.
    pub(crate) fn holds(&self, h: &ValueHandle) -> Result<bool> {
        Ok(match &self.found {
            Found::Missing => false,
            Found::Sealed { file, .. } => {
                file.locate(h.logical_file, h.ordinal)? == Some((h.offset, h.len))
            }
            Found::Scanned { places, .. } => usize::try_from(h.ordinal)
                .ok()
                .and_then(|i| places.get(i))
                .is_some_and(|&p| p == (h.offset, h.len)),
        })
    }

    /// The value file that puts this log in the Version, the first time
    /// it is asked for: the log itself if sealed, else a sealed copy of
    /// its intact records in a new file `new_number()` names.
    pub(crate) fn install(
        &mut self,
        fs: &dyn Fs,
        dir: &Path,
        new_number: &dyn Fn() -> FileNumber,
        direct_writes: bool,
    ) -> Result<Option<ValueFileSummary>> {
        if self.installed {
            return Ok(None);
        }
        let summary = match &self.found {
            // A handle into a missing log ended replay before its batch.
            Found::Missing => return Ok(None),
            Found::Sealed { file, size } => ValueFileSummary {
                number: self.number,
                file_size: *size,
                properties: file.properties().clone(),
            },
            Found::Scanned { reader, places } => {
                let number = new_number();
                let opts = ValueFileOptions {
                    compression: crate::Compression::None,
                    direct_writes,
                    origin: Origin::ValueLog,
                    class: ValueClass::Cold,
                };
                let path = filename::value_file(dir, number);
                let mut copy = ValueFileBuilder::create(fs, path, number, opts)?;
                for (ordinal, &(offset, len)) in places.iter().enumerate() {
                    let raw = reader.read_at(offset, len as usize)?;
                    let record =
                        record_from_raw(&self.path, offset, self.number, ordinal as u64, raw)?;
                    copy.add_moved(&record)?;
                }
                copy.finish()?
            }
        };
        self.installed = true;
        Ok(Some(summary))
    }
}
