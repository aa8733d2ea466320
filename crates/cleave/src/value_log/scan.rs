//! Recovering a value log that was never sealed: its records in arrival
//! order, up to the first one that is incomplete or fails its checksum.
//!
//! An unsealed log has no record index and no footer, only records, each
//! checking itself. A crash can leave its tail torn (a record cut short,
//! or bytes never written); what follows the first bad record is ignored,
//! as a WAL's torn tail is. Handles name records by arrival position
//! (ordinal), so record `i` of the scan is ordinal `i`.

use crate::error::Result;
use crate::value_file::{record_len, record_ok};
use crate::vfs::RandomAccessFile;

/// Bytes read at a time; a longer record is read whole.
const WINDOW_BYTES: usize = 4 << 20;

/// The place `(offset, len)` of every record of the log in `file`, in
/// order (the index is the ordinal), up to the first damaged one.
pub(crate) fn scan(file: &dyn RandomAccessFile) -> Result<Vec<(u64, u32)>> {
    let size = file.len();
    let mut records = Vec::new();
    let mut base = 0u64;
    let mut window: Vec<u8> = Vec::new();
    let mut at = 0usize;
    loop {
        let offset = base + at as u64;
        let rest = window.get(at..).unwrap_or_default();
        let len = match record_len(rest) {
            Some(len) if len <= rest.len() => len,
            // The header or the record crosses the window's end: read a
            // window starting at this record, unless the file ends first.
            need => {
                let left = size.saturating_sub(offset);
                let want = need.unwrap_or(0).max(WINDOW_BYTES) as u64;
                if left == 0 || (rest.len() as u64 >= left) {
                    break;
                }
                window = file.read_at(offset, want.min(left) as usize)?;
                base = offset;
                at = 0;
                match record_len(&window) {
                    Some(len) if len <= window.len() => len,
                    _ => break,
                }
            }
        };
        let Some(raw) = window.get(at..at + len) else {
            break;
        };
        if !record_ok(raw) {
            break;
        }
        // `record_len` keeps a record within the limits, far below 4 GiB.
        let Ok(len32) = u32::try_from(len) else {
            break;
        };
        records.push((base + at as u64, len32));
        at += len;
    }
    Ok(records)
}

/// [`scan`] over bytes in memory: what the fuzz target drives.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn scan_bytes(bytes: &[u8]) -> Vec<(u64, u32)> {
    struct Bytes<'a>(&'a [u8]);
    impl RandomAccessFile for Bytes<'_> {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(self.0.len());
            let end = start.saturating_add(len).min(self.0.len());
            Ok(self.0[start..end].to_vec())
        }
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn as_any(&self) -> &dyn std::any::Any {
            &()
        }
    }
    // Reading from memory cannot fail.
    scan(&Bytes(bytes)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value_file::record_header;

    fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut r = record_header(key, value, 0, 0);
        r.extend_from_slice(key);
        r.extend_from_slice(value);
        r
    }

    fn log_of(records: &[Vec<u8>]) -> Vec<u8> {
        records.concat()
    }

    #[test]
    fn every_record_of_an_intact_log_in_order() {
        let recs: Vec<Vec<u8>> = (0..50)
            .map(|i| record(format!("k{i}").as_bytes(), &vec![i as u8; i * 100]))
            .collect();
        let log = log_of(&recs);
        let found = scan_bytes(&log);
        assert_eq!(found.len(), 50);
        let mut offset = 0u64;
        for (r, &(o, len)) in recs.iter().zip(&found) {
            assert_eq!((o, len as usize), (offset, r.len()));
            offset += r.len() as u64;
        }
    }

    #[test]
    fn stops_at_a_torn_tail_and_at_damage() {
        let recs: Vec<Vec<u8>> = (0..10).map(|i| record(b"key", &[i; 1000])).collect();
        let log = log_of(&recs);
        // Every cut keeps exactly the records wholly before it.
        for cut in (0..log.len()).step_by(97) {
            let whole = cut / recs[0].len();
            assert_eq!(scan_bytes(&log[..cut]).len(), whole, "cut at {cut}");
        }
        // A flipped byte in record 4 ends the log before it.
        let mut damaged = log.clone();
        damaged[4 * recs[0].len() + 30] ^= 1;
        assert_eq!(scan_bytes(&damaged).len(), 4);
        // Zeros after the records (space the file system allocated but no
        // write reached) are not records.
        let mut padded = log.clone();
        padded.extend_from_slice(&[0; 4096]);
        assert_eq!(scan_bytes(&padded).len(), 10);
        assert!(scan_bytes(&[]).is_empty());
    }

    #[test]
    fn records_larger_than_the_window_and_across_its_end() {
        let big = vec![7u8; WINDOW_BYTES + 1000];
        let recs = vec![
            record(b"a", &vec![1u8; WINDOW_BYTES - 100]),
            record(b"b", &big),
            record(b"c", b"small"),
        ];
        let found = scan_bytes(&log_of(&recs));
        assert_eq!(found.len(), 3);
        assert_eq!(found[2].1 as usize, recs[2].len());
    }
}
