//! A cluster node's data directory (docs/format/server.md):
//!
//! ```text
//! NODE             the node id this directory belongs to
//! log/             the Raft log and hard state: cleave-raft's log store
//! DB               the name of the live database's directory
//! db-N/            the live database, the state machine
//! snapshots/ID/    the current snapshot: db/ (a checkpoint) and meta
//! incoming/        snapshots being received from the leader
//! ```
//!
//! `NODE`, `DB` and a snapshot's `meta` are small files of one format:
//! an 8-byte magic, a format version (u32), the body, and a CRC-32C of
//! everything before it (u32), little-endian; each is written to a
//! temporary name, synced, renamed over the old one, and its directory
//! synced, so that a crash leaves the old file or the new one.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::types::NodeId;
use crate::small_file::{decode_small_file, encode_small_file};
pub use crate::small_file::{DB_MAGIC, META_MAGIC, NODE_MAGIC};

/// The node id file.
const NODE_FILE: &str = "NODE";
/// The file naming the live database's directory.
const DB_POINTER: &str = "DB";
pub const LOG_DIR: &str = "log";
pub const SNAPSHOTS_DIR: &str = "snapshots";
pub const INCOMING_DIR: &str = "incoming";
/// Prefix of the live database directories' names.
const DB_PREFIX: &str = "db-";

/// What the directory holds at start: the paths, and the live database's.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
    pub log: PathBuf,
    pub snapshots: PathBuf,
    pub incoming: PathBuf,
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

impl Layout {
    /// Prepares `dir` for node `id`: creates it for a new node, refuses
    /// one that belongs to another node or to a standalone server, and
    /// removes what a crash left half-made (databases the pointer does not
    /// name, snapshots half-received or half-built). Returns the layout
    /// and the live database's directory.
    pub fn prepare(dir: &Path, id: NodeId) -> Result<(Layout, PathBuf), String> {
        fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating", e))?;
        if dir.join("CURRENT").exists() {
            return Err(format!(
                "{} holds a standalone server's database; a cluster node needs a directory of its own",
                dir.display()
            ));
        }
        let node_file = dir.join(NODE_FILE);
        match read_small_file(&node_file, NODE_MAGIC)? {
            Some(body) => {
                let found = std::str::from_utf8(&body)
                    .ok()
                    .and_then(|s| s.parse::<NodeId>().ok())
                    .ok_or_else(|| format!("{}: unreadable node id", node_file.display()))?;
                if found != id {
                    return Err(format!(
                        "{} belongs to node {found}, not node {id}",
                        dir.display()
                    ));
                }
            }
            None => write_small_file(&node_file, NODE_MAGIC, id.to_string().as_bytes())?,
        }
        let layout = Layout {
            dir: dir.to_path_buf(),
            log: dir.join(LOG_DIR),
            snapshots: dir.join(SNAPSHOTS_DIR),
            incoming: dir.join(INCOMING_DIR),
        };
        for d in [&layout.snapshots, &layout.incoming] {
            fs::create_dir_all(d).map_err(|e| io_error(d, "creating", e))?;
        }
        let live = match read_small_file(&dir.join(DB_POINTER), DB_MAGIC)? {
            Some(body) => {
                let name = String::from_utf8(body)
                    .ok()
                    .filter(|n| db_generation(n).is_some())
                    .ok_or_else(|| {
                        format!("{}: unreadable pointer", dir.join(DB_POINTER).display())
                    })?;
                dir.join(name)
            }
            None => {
                let first = format!("{DB_PREFIX}1");
                layout.point_to(&first)?;
                dir.join(first)
            }
        };
        layout.remove_leftovers(&live)?;
        Ok((layout, live))
    }

    /// The directory for the database after `live`.
    pub fn next_db(&self, live: &Path) -> Result<PathBuf, String> {
        let generation = live
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(db_generation)
            .ok_or_else(|| format!("{} is not a database directory", live.display()))?;
        Ok(self.dir.join(format!("{DB_PREFIX}{}", generation + 1)))
    }

    /// Makes the database in `self.dir/name` the live one, durably.
    pub fn point_to(&self, name: &str) -> Result<(), String> {
        write_small_file(&self.dir.join(DB_POINTER), DB_MAGIC, name.as_bytes())
    }

    fn remove_leftovers(&self, live: &Path) -> Result<(), String> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, "listing", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, "listing", e))?;
            let name = entry.file_name();
            let is_db = name.to_str().and_then(db_generation).is_some();
            if is_db && entry.path() != live {
                remove_tree(&entry.path())?;
            }
        }
        clear_dir(&self.incoming)?;
        let snapshots =
            fs::read_dir(&self.snapshots).map_err(|e| io_error(&self.snapshots, "listing", e))?;
        for entry in snapshots {
            let entry = entry.map_err(|e| io_error(&self.snapshots, "listing", e))?;
            if entry.file_name().to_string_lossy().ends_with(".tmp") {
                remove_tree(&entry.path())?;
            }
        }
        Ok(())
    }
}

/// `N` of a directory named `db-N`.
fn db_generation(name: &str) -> Option<u64> {
    let n = name.strip_prefix(DB_PREFIX)?;
    (!n.starts_with('0')).then_some(())?;
    n.parse().ok()
}

/// Removes `path` and what it holds, if it exists.
pub fn remove_tree(path: &Path) -> Result<(), String> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(path, "removing", e)),
    }
}

/// Removes everything in `dir`, keeping it.
pub fn clear_dir(dir: &Path) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| io_error(dir, "listing", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, "listing", e))?;
        let path = entry.path();
        if path.is_dir() {
            remove_tree(&path)?;
        } else {
            fs::remove_file(&path).map_err(|e| io_error(&path, "removing", e))?;
        }
    }
    Ok(())
}

/// Syncs the directory `dir` (after a rename or a new file in it).
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, "syncing", e))
}

/// The body of the small file at `path`; `None` if there is none.
pub fn read_small_file(path: &Path, magic: &[u8; 8]) -> Result<Option<Vec<u8>>, String> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, "reading", e)),
    };
    decode_small_file(magic, &bytes)
        .map(|body| Some(body.to_vec()))
        .map_err(|why| format!("{}: {why}", path.display()))
}

/// Writes the small file at `path` durably, replacing any old one whole.
pub fn write_small_file(path: &Path, magic: &[u8; 8], body: &[u8]) -> Result<(), String> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let mut f = fs::File::create(&temp).map_err(|e| io_error(&temp, "creating", e))?;
    f.write_all(&encode_small_file(magic, body))
        .and_then(|()| f.sync_all())
        .map_err(|e| io_error(&temp, "writing", e))?;
    drop(f);
    fs::rename(&temp, path).map_err(|e| io_error(path, "renaming over", e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_refuse_damage() {
        let bytes = encode_small_file(DB_MAGIC, b"db-7");
        assert_eq!(decode_small_file(DB_MAGIC, &bytes).unwrap(), b"db-7");
        assert!(decode_small_file(NODE_MAGIC, &bytes).is_err());
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert!(decode_small_file(DB_MAGIC, &b).is_err(), "byte {i}");
        }
        for len in 0..bytes.len() {
            assert!(decode_small_file(DB_MAGIC, &bytes[..len]).is_err());
        }
    }

    #[test]
    fn a_directory_belongs_to_one_node_and_keeps_only_its_live_database() {
        let tmp = tempfile::tempdir().unwrap();
        let (layout, live) = Layout::prepare(tmp.path(), 3).unwrap();
        assert_eq!(live, tmp.path().join("db-1"));
        let next = layout.next_db(&live).unwrap();
        assert_eq!(next, tmp.path().join("db-2"));
        fs::create_dir_all(&next).unwrap();
        fs::create_dir_all(layout.incoming.join("x")).unwrap();
        fs::create_dir_all(layout.snapshots.join("1-2-3.tmp")).unwrap();
        fs::create_dir_all(layout.snapshots.join("1-2-4")).unwrap();
        // A crash before the pointer moved: db-2 goes, db-1 stays live.
        let (_, live) = Layout::prepare(tmp.path(), 3).unwrap();
        assert_eq!(live, tmp.path().join("db-1"));
        assert!(!next.exists());
        assert!(!layout.incoming.join("x").exists());
        assert!(!layout.snapshots.join("1-2-3.tmp").exists());
        assert!(layout.snapshots.join("1-2-4").exists());
        layout.point_to("db-2").unwrap();
        let (_, live) = Layout::prepare(tmp.path(), 3).unwrap();
        assert_eq!(live, tmp.path().join("db-2"));
        let err = Layout::prepare(tmp.path(), 4).unwrap_err();
        assert!(err.contains("belongs to node 3"), "{err}");
    }

    #[test]
    fn a_standalone_database_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        let err = Layout::prepare(tmp.path(), 1).unwrap_err();
        assert!(err.contains("standalone"), "{err}");
    }
}
