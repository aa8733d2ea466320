//! Snapshots of the state machine. Each is a directory under `snapshots/`
//! named by its id, holding `db/` (a cleave checkpoint of the live
//! database: its files hard-linked, so a snapshot costs a flush, not a
//! copy) and `meta` (openraft's snapshot meta as JSON, in a small file of
//! module `layout`). The directory is built under `ID.tmp` and renamed, so
//! a crash leaves a whole snapshot or a leftover that the next start
//! removes. The two newest are kept: one may be on its way to a follower
//! while the next is built.

use std::fs;
use std::path::{Path, PathBuf};

use super::layout::{self, META_MAGIC};
use super::types::SnapshotMeta;

/// A snapshot's meta file.
pub const META_FILE: &str = "meta";
/// A snapshot's database directory.
pub const DB_DIR: &str = "db";
/// Snapshots kept.
const KEEP: usize = 2;

pub fn write_meta(dir: &Path, meta: &SnapshotMeta) -> Result<(), String> {
    let body = serde_json::to_vec(meta).map_err(|e| format!("encoding a snapshot's meta: {e}"))?;
    layout::write_small_file(&dir.join(META_FILE), META_MAGIC, &body)
}

pub fn read_meta(dir: &Path) -> Result<SnapshotMeta, String> {
    let path = dir.join(META_FILE);
    let body = layout::read_small_file(&path, META_MAGIC)?
        .ok_or_else(|| format!("{} is missing", path.display()))?;
    serde_json::from_slice(&body).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether `id` may name a directory: what this build's ids hold (digits,
/// letters, dashes), nothing that could leave `snapshots/`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The complete snapshots in `snapshots`, newest (by last log id) first.
pub fn list(snapshots: &Path) -> Result<Vec<(SnapshotMeta, PathBuf)>, String> {
    let mut out = Vec::new();
    let entries =
        fs::read_dir(snapshots).map_err(|e| format!("listing {}: {e}", snapshots.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {}: {e}", snapshots.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !valid_id(&name) {
            continue;
        }
        let path = entry.path();
        match read_meta(&path) {
            Ok(meta) => out.push((meta, path)),
            // Renamed into place only once whole: a damaged one is not
            // served, and the next build replaces it.
            Err(e) => log::warn!("skipping snapshot {}: {e}", path.display()),
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.0.last_log_id));
    Ok(out)
}

/// Moves the snapshot built in `tmp` to its place and drops the oldest
/// beyond those kept.
pub fn publish(snapshots: &Path, tmp: &Path, meta: &SnapshotMeta) -> Result<PathBuf, String> {
    let path = snapshots.join(&meta.snapshot_id);
    fs::rename(tmp, &path).map_err(|e| format!("renaming {}: {e}", tmp.display()))?;
    layout::sync_dir(snapshots)?;
    for (_, old) in list(snapshots)?.into_iter().skip(KEEP) {
        layout::remove_tree(&old)?;
    }
    Ok(path)
}

/// The files of the snapshot in `dir`, as paths relative to it with their
/// sizes, in the order they are sent: the database's, then the meta.
pub fn files(dir: &Path) -> Result<Vec<(String, u64)>, String> {
    let db = dir.join(DB_DIR);
    let mut out = Vec::new();
    let entries = fs::read_dir(&db).map_err(|e| format!("listing {}: {e}", db.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {}: {e}", db.display()))?;
        let meta = entry
            .metadata()
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // The lock file is the database's while it is open, not data.
        if name == "LOCK" {
            continue;
        }
        out.push((format!("{DB_DIR}/{name}"), meta.len()));
    }
    out.sort();
    let meta = dir.join(META_FILE);
    let len = fs::metadata(&meta)
        .map_err(|e| format!("{}: {e}", meta.display()))?
        .len();
    out.push((META_FILE.to_string(), len));
    Ok(out)
}

/// Whether `rel`, a file name a leader sent, is one a snapshot holds:
/// `meta`, or `db/NAME` with a plain file name.
pub fn valid_file(rel: &str) -> bool {
    if rel == META_FILE {
        return true;
    }
    let Some(name) = rel.strip_prefix("db/") else {
        return false;
    };
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_accepted_from_a_leader() {
        for ok in ["meta", "db/000012.sst", "db/CURRENT", "db/MANIFEST-000003"] {
            assert!(valid_file(ok), "{ok}");
        }
        for bad in [
            "",
            "db/",
            "db/..",
            "../x",
            "db/../x",
            "/etc/passwd",
            "db/a/b",
            "x/meta",
            "db/a b",
        ] {
            assert!(!valid_file(bad), "{bad}");
        }
        assert!(valid_id("3-120-17f0a"));
        assert!(!valid_id("../3"));
        assert!(!valid_id(""));
    }
}
