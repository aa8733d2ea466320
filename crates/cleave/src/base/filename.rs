//! The one place that knows how files in a database directory are named.

use std::path::{Path, PathBuf};

use super::key::FileNumber;

/// The kinds of file cleave keeps in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FileKind {
    Wal,
    Sstable,
    /// A physical value file.
    ValueFile,
    /// A file of the delta store's chunks.
    DeltaFile,
    Manifest,
    Current,
    Lock,
    Temp,
}

pub(crate) const CURRENT: &str = "CURRENT";
pub(crate) const LOCK: &str = "LOCK";

pub(crate) fn wal(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.wal"))
}

pub(crate) fn sstable(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.sst"))
}

pub(crate) fn value_file(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.vf"))
}

pub(crate) fn delta_file(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.kd"))
}

pub(crate) fn manifest(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("MANIFEST-{n}"))
}

pub(crate) fn temp(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.tmp"))
}

/// The path of numbered file `n` of `kind`; `None` for CURRENT and LOCK,
/// which have no number.
pub(crate) fn numbered(dir: &Path, kind: FileKind, n: FileNumber) -> Option<PathBuf> {
    match kind {
        FileKind::Wal => Some(wal(dir, n)),
        FileKind::Sstable => Some(sstable(dir, n)),
        FileKind::ValueFile => Some(value_file(dir, n)),
        FileKind::DeltaFile => Some(delta_file(dir, n)),
        FileKind::Manifest => Some(manifest(dir, n)),
        FileKind::Temp => Some(temp(dir, n)),
        FileKind::Current | FileKind::Lock => None,
    }
}

pub(crate) fn current(dir: &Path) -> PathBuf {
    dir.join(CURRENT)
}

pub(crate) fn lock(dir: &Path) -> PathBuf {
    dir.join(LOCK)
}

/// Recognises a file name written by cleave. Names that are not ours return
/// `None` and are left alone.
pub(crate) fn parse(name: &str) -> Option<(FileKind, FileNumber)> {
    match name {
        CURRENT => return Some((FileKind::Current, FileNumber(0))),
        LOCK => return Some((FileKind::Lock, FileNumber(0))),
        _ => {}
    }
    if let Some(num) = name.strip_prefix("MANIFEST-") {
        return number(num).map(|n| (FileKind::Manifest, n));
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let kind = match ext {
        "wal" => FileKind::Wal,
        "sst" => FileKind::Sstable,
        "vf" => FileKind::ValueFile,
        "kd" => FileKind::DeltaFile,
        "tmp" => FileKind::Temp,
        _ => return None,
    };
    number(stem).map(|n| (kind, n))
}

fn number(s: &str) -> Option<FileNumber> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().map(FileNumber)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/db");
        let n = FileNumber(42);
        for (p, kind) in [
            (wal(d, n), FileKind::Wal),
            (sstable(d, n), FileKind::Sstable),
            (value_file(d, n), FileKind::ValueFile),
            (delta_file(d, n), FileKind::DeltaFile),
            (manifest(d, n), FileKind::Manifest),
            (temp(d, n), FileKind::Temp),
        ] {
            let name = p.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse(name), Some((kind, n)), "{name}");
            assert_eq!(numbered(d, kind, n), Some(p.clone()));
        }
        assert_eq!(parse("CURRENT"), Some((FileKind::Current, FileNumber(0))));
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse(".sst"), None);
        assert_eq!(parse("12a.sst"), None);
    }
}
