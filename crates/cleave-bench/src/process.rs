//! What the process costs: device writes and reads, peak memory, CPU time,
//! and the database's size on disk. Linux only (`/proc`, `/sys`); elsewhere
//! the values are `None` and print as "n/a".

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use anyhow::{Context, Result};

/// The process counters read before and after each benchmark.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessSnapshot {
    /// `write_bytes` of `/proc/self/io`: bytes this process caused to be
    /// sent to the block device, including page-cache writeback of pages
    /// it dirtied. Other processes' writes are not counted.
    pub device_write_bytes: Option<u64>,
    /// User plus system CPU time of all threads, engine threads included.
    pub cpu_seconds: Option<f64>,
    /// Reads the block device holding the database has completed.
    pub device_reads: Option<DeviceReads>,
    /// Bytes the block device holding the database has written, by every
    /// writer: the file system's journal and metadata too, which
    /// `device_write_bytes` misses.
    pub block_write_bytes: Option<u64>,
}

impl ProcessSnapshot {
    /// The counters now; device reads are those of the device holding
    /// `db` (or its nearest existing ancestor, before the database exists).
    pub fn take(db: &Path) -> Self {
        Self {
            device_write_bytes: fs::read_to_string("/proc/self/io")
                .ok()
                .and_then(|text| parse_proc_field(&text, "write_bytes")),
            cpu_seconds: cpu_seconds(),
            device_reads: device_reads(db),
            block_write_bytes: block_stat(db).and_then(|stat| parse_block_writes(&stat)),
        }
    }
}

/// Read requests a block device completed and the bytes they read, from
/// `/sys/dev/block/MAJOR:MINOR/stat`. They count every reader of the
/// device, which is fair to each engine as long as nothing else runs
/// during a benchmark; unlike `/proc/self/io`'s `read_bytes`, they count
/// requests too, and the reads io_uring completes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceReads {
    pub requests: u64,
    pub bytes: u64,
}

impl DeviceReads {
    pub fn since(self, start: DeviceReads) -> DeviceReads {
        DeviceReads {
            requests: self.requests.saturating_sub(start.requests),
            bytes: self.bytes.saturating_sub(start.bytes),
        }
    }
}

/// Bytes per sector in the block layer's statistics, whatever the device's.
const STAT_SECTOR_BYTES: u64 = 512;

fn device_reads(db: &Path) -> Option<DeviceReads> {
    parse_block_stat(&block_stat(db)?)
}

/// The `stat` file of the block device holding `db`.
fn block_stat(db: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = db.ancestors().find_map(|p| fs::metadata(p).ok())?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()
}

/// Field 7 of a block device's `stat` file, sectors written, in bytes.
fn parse_block_writes(stat: &str) -> Option<u64> {
    let sectors = stat.split_whitespace().nth(6)?.parse::<u64>().ok()?;
    Some(sectors * STAT_SECTOR_BYTES)
}

/// Fields 1 and 3 of a block device's `stat` file: reads completed and
/// sectors read.
fn parse_block_stat(stat: &str) -> Option<DeviceReads> {
    let mut fields = stat.split_whitespace().map(str::parse::<u64>);
    let requests = fields.next()?.ok()?;
    let sectors = fields.nth(1)?.ok()?;
    Some(DeviceReads {
        requests,
        bytes: sectors * STAT_SECTOR_BYTES,
    })
}

/// The first number after `field:` in a `/proc` key-value file.
pub fn parse_proc_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != field {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Peak resident set size (`VmHWM`) in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    parse_proc_field(&status, "VmHWM").map(|kib| kib * 1024)
}

/// Hands memory that the allocator holds but nothing uses back to the
/// kernel. One process runs engine after engine; without this the heap an
/// earlier engine freed stays resident and counts in a later engine's peak.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's heap to the
    // kernel; it touches no memory the program uses.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resets `VmHWM` to the current RSS, so the next reading is the peak of
/// one benchmark rather than of the whole run. Returns whether it worked
/// (the kernel may forbid it); if not, peaks are cumulative.
pub fn reset_peak_rss() -> bool {
    // "5" is the kernel's documented value for resetting the peak RSS.
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory of the right size, and
    // getrusage only writes to it.
    let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if status != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and a zeroed
    // rusage is a valid value anyway).
    let usage = unsafe { usage.assume_init() };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// The sum of the sizes of all files under `path` (apparent sizes, not
/// allocated blocks). A missing directory is 0 bytes; files that vanish
/// during the walk (an engine deleting obsolete files) are skipped.
pub fn dir_size_bytes(path: &Path) -> Result<u64> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error).with_context(|| format!("listing {}", path.display())),
    };
    let mut total = 0;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", path.display()))?;
        let metadata = match entry.metadata() {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == ErrorKind::NotFound => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("stat {}", entry.path().display()))
            }
        };
        if metadata.is_dir() {
            total += dir_size_bytes(&entry.path())?;
        } else {
            total += metadata.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io_and_status() {
        let io = "rchar: 6976\nwchar: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_proc_field(io, "write_bytes"), Some(4096));
        assert_eq!(parse_proc_field(io, "read_bytes"), None);
        let status = "Name:\tx\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_proc_field(status, "VmHWM"), Some(1234));
    }

    #[test]
    fn parses_block_device_stat() {
        let stat = "  118462     2913  7429530    51324   491850   227318 41530808   855400        0   407372   936536\n";
        assert_eq!(
            parse_block_stat(stat),
            Some(DeviceReads {
                requests: 118_462,
                bytes: 7_429_530 * 512
            })
        );
        assert_eq!(parse_block_writes(stat), Some(41_530_808 * 512));
        assert_eq!(parse_block_writes("1 2 3"), None);
        assert_eq!(parse_block_stat("12"), None);
        assert_eq!(parse_block_stat("x 1 2"), None);
        let later = DeviceReads {
            requests: 118_500,
            bytes: 7_429_530 * 512 + 8192,
        };
        assert_eq!(
            later.since(parse_block_stat(stat).unwrap()),
            DeviceReads {
                requests: 38,
                bytes: 8192
            }
        );
    }

    #[test]
    fn dir_size_sums_nested_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("a"), [0u8; 100]).expect("write");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub/b"), [0u8; 23]).expect("write");
        assert_eq!(dir_size_bytes(dir.path()).expect("size"), 123);
        assert_eq!(
            dir_size_bytes(&dir.path().join("missing")).expect("size"),
            0
        );
    }

    #[test]
    fn process_counters_are_readable_on_linux() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snapshot = ProcessSnapshot::take(&dir.path().join("db"));
        if cfg!(target_os = "linux") {
            assert!(snapshot.cpu_seconds.is_some());
            assert!(peak_rss_bytes().is_some_and(|bytes| bytes > 0));
        }
    }
}
