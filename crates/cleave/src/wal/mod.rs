//! The write-ahead log: one file per memtable, a header record followed by
//! one record per WriteBatch (see `docs/format/wal.md`). With recycling, an
//! obsolete WAL is renamed to the next WAL's number and written over from
//! its start, so that a synced write lands inside the file's size and
//! `fdatasync` writes data and no size metadata; its records then carry
//! the file's number, which tells them from the previous use's records.

use std::path::{Path, PathBuf};

use crate::base::coding::{put_fixed32, put_fixed64, Decoder};
use crate::base::{filename, FileNumber, SeqNo};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::record::{self, Next, RecordReader, RecordWriter};
use crate::vfs::{self, FileOptions, Fs};

const MAGIC: &[u8; 8] = b"cleavWAL";
/// Version of the WAL format this build writes, and the newest it reads:
/// 2 lets batches hold value handles (WAL-time separation), 3 merge
/// operands, 4 recyclable records, 5 entries with an expiry; a build that
/// reads only an older version must refuse a newer WAL rather than replay
/// it as damage. Every WAL is written as version 5, whatever its framing:
/// the header comes before the entries that may need it.
pub(crate) const FORMAT_VERSION: u32 = 5;

/// Bytes of the header record's payload as this build writes it.
const HEADER_PAYLOAD_LEN: usize = 36;

/// What a WAL's header says about the chain of WALs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Previous {
    /// The WAL written before this one.
    pub number: FileNumber,
    /// Bytes written to it, up to the end of its last record: replay
    /// reaching less of it means a crash lost its tail, which a recycled
    /// WAL's stale bytes would otherwise hide.
    pub len: u64,
}

/// The header names the file's own number and the WAL written before it
/// with its length (0: none known), so that replay can tell a missing WAL
/// or a lost tail from the end of the chain. Readers before a field ignore
/// it.
fn header(number: FileNumber, previous: Option<Previous>) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    put_fixed32(&mut h, FORMAT_VERSION);
    put_fixed64(&mut h, number.0);
    let p = previous.unwrap_or_default();
    put_fixed64(&mut h, p.number.0);
    put_fixed64(&mut h, p.len);
    debug_assert_eq!(h.len(), HEADER_PAYLOAD_LEN);
    h
}

/// Appends batches to one WAL file.
pub(crate) struct WalWriter {
    number: FileNumber,
    writer: RecordWriter,
    /// Whether records carry the file's number (see the module comment).
    recyclable: bool,
    scratch: Vec<u8>,
    /// Bytes up to the end of the last record whose append succeeded: a
    /// failed append (a full disk) may leave part of a record past it,
    /// which the next WAL's header must not count as written.
    whole_len: u64,
}

impl WalWriter {
    /// Creates the file and writes its header, which names no earlier WAL
    /// (the one an open starts). The caller syncs the directory before
    /// acknowledging writes that went to this WAL.
    pub(crate) fn create(
        fs: &dyn Fs,
        dir: &Path,
        number: FileNumber,
        recyclable: bool,
    ) -> Result<Self> {
        Self::create_after(fs, dir, number, None, recyclable)
    }

    /// As [`Self::create`], for the WAL that follows `previous`.
    pub(crate) fn create_after(
        fs: &dyn Fs,
        dir: &Path,
        number: FileNumber,
        previous: Option<Previous>,
        recyclable: bool,
    ) -> Result<Self> {
        let file = fs.create(&filename::wal(dir, number), FileOptions::default())?;
        Self::start(file, number, previous, recyclable)
    }

    /// Makes the obsolete WAL `old`, written with recyclable records and
    /// durable, WAL `number` that follows `previous`, writing over it from
    /// its start. The caller syncs the directory (the rename) before
    /// acknowledging writes that went to it.
    pub(crate) fn recycle(
        fs: &dyn Fs,
        dir: &Path,
        old: FileNumber,
        number: FileNumber,
        previous: Option<Previous>,
    ) -> Result<Self> {
        debug_assert!(old < number);
        let path = filename::wal(dir, number);
        fs.rename(&filename::wal(dir, old), &path)?;
        let file = fs.reopen_at(&path, 0, FileOptions::default())?;
        Self::start(file, number, previous, true)
    }

    fn start(
        file: Box<dyn vfs::WritableFile>,
        number: FileNumber,
        previous: Option<Previous>,
        recyclable: bool,
    ) -> Result<Self> {
        let mut w = WalWriter {
            number,
            writer: RecordWriter::new(file),
            recyclable,
            scratch: Vec::new(),
            whole_len: 0,
        };
        w.append(&[&header(number, previous)], true)?;
        Ok(w)
    }

    pub(crate) fn number(&self) -> FileNumber {
        self.number
    }

    pub(crate) fn recyclable(&self) -> bool {
        self.recyclable
    }

    /// What the next WAL's header says about this one.
    pub(crate) fn as_previous(&self) -> Previous {
        Previous {
            number: self.number,
            len: self.whole_len,
        }
    }

    /// Appends one record per payload in a single write, then, with
    /// `flush`, hands the bytes to the OS so that a process crash cannot
    /// lose them (else [`WalWriter::flush`] does, later).
    pub(crate) fn append(&mut self, payloads: &[&[u8]], flush: bool) -> Result<u64> {
        self.scratch.clear();
        for p in payloads {
            if self.recyclable {
                record::encode_recyclable(&mut self.scratch, self.number.0, p);
            } else {
                record::encode(&mut self.scratch, p);
            }
        }
        self.writer.add_raw(&self.scratch)?;
        if flush {
            self.writer.flush()?;
        }
        self.whole_len += self.scratch.len() as u64;
        debug_assert_eq!(self.whole_len, self.writer.len());
        Ok(self.scratch.len() as u64)
    }

    /// Hands the appended bytes to the OS.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.writer.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.writer.sync()
    }
}

/// Why replay of a WAL stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    pub offset: u64,
    pub reason: &'static str,
    /// A torn final record (a crash during an append), as opposed to damage
    /// with valid-looking data after it.
    pub torn_tail: bool,
}

/// The batches of one WAL, in order, and where reading stopped early.
#[derive(Debug)]
pub(crate) struct WalContents {
    pub batches: Vec<(SeqNo, WriteBatch)>,
    pub damage: Option<Damage>,
    pub path: PathBuf,
    /// The WAL written before this one, if the header names it, and its
    /// length where the header gives it.
    pub previous: Option<FileNumber>,
    pub previous_len: Option<u64>,
    /// Where the last record read ends.
    pub end: u64,
}

/// Reads a whole WAL. Bad records end the read (the caller decides what a
/// non-torn stop means); bad content inside a checksummed record is
/// corruption, since the checksum says it is what we wrote.
pub(crate) fn read(fs: &dyn Fs, dir: &Path, number: FileNumber) -> Result<WalContents> {
    let path = filename::wal(dir, number);
    let data = vfs::read_all(fs, &path)?;
    let mut reader = reader_for(&data, number);
    let mut contents = WalContents {
        batches: Vec::new(),
        damage: None,
        path: path.clone(),
        previous: None,
        previous_len: None,
        end: 0,
    };
    let mut first = true;
    loop {
        let (offset, payload) = match reader.next_record() {
            Next::Record { offset, payload } => (offset, payload),
            Next::End => break,
            // A crash right after creation: the header never made it.
            Next::TornTail { offset: 0, .. } => break,
            Next::TornTail { offset, reason } => {
                contents.damage = Some(Damage {
                    offset,
                    reason,
                    torn_tail: true,
                });
                break;
            }
            Next::Corrupt { offset, reason } => {
                contents.damage = Some(Damage {
                    offset,
                    reason,
                    torn_tail: false,
                });
                break;
            }
        };
        contents.end = reader.position();
        if first {
            (contents.previous, contents.previous_len) = check_header(&path, number, payload)?;
            first = false;
            continue;
        }
        let (seq, batch) =
            WriteBatch::decode(payload).map_err(|r| Error::corruption(&path, offset, r))?;
        contents.batches.push((seq, batch));
    }
    Ok(contents)
}

/// A reader in the framing the file was written in. A file whose first
/// record is of the recyclable type is read as one, whatever number that
/// record carries and whether or not it is whole: a stale first record is
/// a recycled file whose new header never made it, a damaged one a header
/// a crash tore, and either reads as empty (the next WAL's header, naming
/// this one's length, tells replay whether anything was lost).
fn reader_for(data: &[u8], number: FileNumber) -> RecordReader<'_> {
    if RecordReader::starts_recyclable(data) {
        RecordReader::recyclable(data, number.0)
    } else {
        RecordReader::new(data)
    }
}

type HeaderFields = (Option<FileNumber>, Option<u64>);

/// Checks the header and returns the previous WAL it names, if any, and
/// that WAL's length.
fn check_header(path: &Path, number: FileNumber, payload: &[u8]) -> Result<HeaderFields> {
    let bad = |r: &str| Error::corruption(path, 0, r.to_string());
    let mut d = Decoder::new(payload);
    if d.bytes(MAGIC.len()).map_err(|e| bad(e.0))? != MAGIC {
        return Err(bad("not a WAL: bad magic"));
    }
    let version = d.fixed32().map_err(|e| bad(e.0))?;
    if version > FORMAT_VERSION || version == 0 {
        return Err(Error::UnsupportedFormatVersion {
            file: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if d.fixed64().map_err(|e| bad(e.0))? != number.0 {
        return Err(bad("WAL header names another file number"));
    }
    // Each absent in WALs written before the field existed.
    if d.is_empty() {
        return Ok((None, None));
    }
    let previous = d.fixed64().map_err(|e| bad(e.0))?;
    let previous = (previous != 0).then_some(FileNumber(previous));
    if d.is_empty() || previous.is_none() {
        return Ok((previous, None));
    }
    let len = d.fixed64().map_err(|e| bad(e.0))?;
    Ok((previous, Some(len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemFs;

    fn batch(k: &[u8], v: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(k, v);
        b
    }

    fn write_wal(fs: &MemFs, dir: &Path, n: u64) -> Vec<u8> {
        let mut w = WalWriter::create(fs, dir, FileNumber(n), false).unwrap();
        for i in 0..3u64 {
            let mut b = batch(format!("k{i}").as_bytes(), b"value");
            w.append(&[b.encode_with_seq(10 + i)], true).unwrap();
        }
        w.sync().unwrap();
        vfs::read_all(fs, &filename::wal(dir, FileNumber(n))).unwrap()
    }

    fn setup() -> (MemFs, PathBuf) {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        (fs, dir)
    }

    #[test]
    fn round_trip() {
        let (fs, dir) = setup();
        write_wal(&fs, &dir, 5);
        let c = read(&fs, &dir, FileNumber(5)).unwrap();
        assert!(c.damage.is_none());
        let seqs: Vec<_> = c.batches.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![10, 11, 12]);
    }

    #[test]
    fn torn_tail_keeps_the_prefix() {
        let (fs, dir) = setup();
        let data = write_wal(&fs, &dir, 5);
        let path = filename::wal(&dir, FileNumber(5));
        fs.truncate(&path, data.len() - 3);
        let c = read(&fs, &dir, FileNumber(5)).unwrap();
        assert_eq!(c.batches.len(), 2);
        assert!(c.damage.unwrap().torn_tail);
    }

    #[test]
    fn flipped_bytes_never_yield_wrong_batches() {
        let (fs, dir) = setup();
        let data = write_wal(&fs, &dir, 5);
        let path = filename::wal(&dir, FileNumber(5));
        for i in 0..data.len() {
            fs.corrupt_byte(&path, i);
            match read(&fs, &dir, FileNumber(5)) {
                Ok(c) => {
                    assert!(c.batches.len() < 3, "flip at {i} unnoticed");
                    assert!(c.damage.is_some() || c.batches.is_empty());
                    for (j, (seq, _)) in c.batches.iter().enumerate() {
                        assert_eq!(*seq, 10 + j as u64);
                    }
                }
                Err(e) => assert!(e.is_corruption(), "flip at {i}: {e}"),
            }
            fs.corrupt_byte(&path, i);
        }
    }

    #[test]
    fn newer_format_version_is_refused() {
        let (fs, dir) = setup();
        let path = filename::wal(&dir, FileNumber(5));
        let mut header = MAGIC.to_vec();
        put_fixed32(&mut header, FORMAT_VERSION + 1);
        put_fixed64(&mut header, 5);
        let mut bytes = Vec::new();
        record::encode(&mut bytes, &header);
        let mut f = fs.create(&path, FileOptions::default()).unwrap();
        f.append(&bytes).unwrap();
        drop(f);
        let err = read(&fs, &dir, FileNumber(5)).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedFormatVersion { found, .. } if found == FORMAT_VERSION + 1),
            "{err}"
        );
    }

    /// Found by the wal fuzz target: a checksummed batch whose sequence
    /// numbers run past `MAX_SEQ` was handed to replay.
    #[test]
    fn batch_beyond_the_largest_sequence_number_is_corruption() {
        let (fs, dir) = setup();
        let mut w = WalWriter::create(&fs, &dir, FileNumber(5), false).unwrap();
        let mut b = batch(b"k", b"v");
        b.delete(b"k");
        w.append(&[b.encode_with_seq(crate::base::key::MAX_SEQ)], true)
            .unwrap();
        drop(w);
        let err = read(&fs, &dir, FileNumber(5)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn header_names_the_previous_wal() {
        let (fs, dir) = setup();
        let previous = Previous {
            number: FileNumber(5),
            len: 300,
        };
        WalWriter::create_after(&fs, &dir, FileNumber(7), Some(previous), false).unwrap();
        let c = read(&fs, &dir, FileNumber(7)).unwrap();
        assert_eq!(
            (c.previous, c.previous_len),
            (Some(FileNumber(5)), Some(300))
        );
        write_wal(&fs, &dir, 5);
        assert_eq!(read(&fs, &dir, FileNumber(5)).unwrap().previous, None);
        // A header written before the field existed names none.
        let path = filename::wal(&dir, FileNumber(9));
        let mut header = MAGIC.to_vec();
        put_fixed32(&mut header, FORMAT_VERSION);
        put_fixed64(&mut header, 9);
        let mut bytes = Vec::new();
        record::encode(&mut bytes, &header);
        let mut f = fs.create(&path, FileOptions::default()).unwrap();
        f.append(&bytes).unwrap();
        drop(f);
        let c = read(&fs, &dir, FileNumber(9)).unwrap();
        assert_eq!((c.previous, c.damage), (None, None));
    }

    /// Every WAL says version 5, which may hold entries with an expiry,
    /// whatever its framing: builds before expiry refuse it.
    #[test]
    fn every_wal_says_the_version_with_expiring_entries() {
        let (fs, dir) = setup();
        for (n, recyclable, version) in [(5, false, 5), (6, true, 5)] {
            WalWriter::create(&fs, &dir, FileNumber(n), recyclable)
                .unwrap()
                .sync()
                .unwrap();
            let data = vfs::read_all(&fs, &filename::wal(&dir, FileNumber(n))).unwrap();
            let Next::Record { payload, .. } = reader_for(&data, FileNumber(n)).next_record()
            else {
                panic!("no header in WAL {n}");
            };
            assert_eq!(payload[8..12], u32::to_le_bytes(version), "WAL {n}");
            assert!(read(&fs, &dir, FileNumber(n)).unwrap().damage.is_none());
        }
    }

    #[test]
    fn header_for_another_number_is_corruption() {
        let (fs, dir) = setup();
        write_wal(&fs, &dir, 5);
        fs.rename(
            &filename::wal(&dir, FileNumber(5)),
            &filename::wal(&dir, FileNumber(6)),
        )
        .unwrap();
        assert!(read(&fs, &dir, FileNumber(6)).unwrap_err().is_corruption());
    }

    /// Writes `n` batches of distinct sequence numbers starting at
    /// `first_seq` to a recyclable WAL and syncs it.
    fn fill(w: &mut WalWriter, first_seq: u64, n: u64) {
        for i in 0..n {
            let mut b = batch(format!("k{i}").as_bytes(), &[b'v'; 40]);
            w.append(&[b.encode_with_seq(first_seq + i)], true).unwrap();
        }
        w.sync().unwrap();
    }

    fn seqs(c: &WalContents) -> Vec<u64> {
        c.batches.iter().map(|(s, _)| *s).collect()
    }

    /// Old WAL 5 with 20 batches, being recycled as WAL 9.
    fn recycling() -> (MemFs, PathBuf, WalWriter) {
        let (fs, dir) = setup();
        fill(
            &mut WalWriter::create(&fs, &dir, FileNumber(5), true).unwrap(),
            100,
            20,
        );
        let w = WalWriter::recycle(&fs, &dir, FileNumber(5), FileNumber(9), None).unwrap();
        (fs, dir, w)
    }

    /// [`recycling`]'s WAL 9 holding `new` batches.
    fn recycled(new: u64) -> (MemFs, PathBuf) {
        let (fs, dir, mut w) = recycling();
        fill(&mut w, 500, new);
        (fs, dir)
    }

    #[test]
    fn recyclable_round_trip() {
        let (fs, dir) = setup();
        fill(
            &mut WalWriter::create(&fs, &dir, FileNumber(5), true).unwrap(),
            10,
            3,
        );
        let c = read(&fs, &dir, FileNumber(5)).unwrap();
        assert_eq!((seqs(&c), c.damage), (vec![10, 11, 12], None));
        let len = fs.file_len(&filename::wal(&dir, FileNumber(5))).unwrap();
        assert_eq!(c.end, len as u64);
    }

    /// A recycled file still holds valid records of its previous use after
    /// the new ones: the reader stops at them, and it is a clean end.
    #[test]
    fn a_recycled_wal_never_yields_its_previous_use_records() {
        for new in [0, 1, 5, 19] {
            let (fs, dir) = recycled(new);
            assert!(!fs.exists(&filename::wal(&dir, FileNumber(5))).unwrap());
            let c = read(&fs, &dir, FileNumber(9)).unwrap();
            let want: Vec<u64> = (500..500 + new).collect();
            assert_eq!((seqs(&c), c.damage), (want, None), "{new} new batches");
        }
    }

    /// Every crash image of writes into a recyclable WAL (new, recycled, or
    /// recycled from a WAL that held only its header), the header's
    /// included, reads as a prefix of what was written, never a stale
    /// record and never an error or damage (which `paranoid_checks` would
    /// turn into a failed open after an ordinary crash).
    #[test]
    fn every_crash_image_of_a_recyclable_wal_reads_as_a_prefix() {
        let new = || {
            let (fs, dir) = setup();
            let w = WalWriter::create(&fs, &dir, FileNumber(9), true).unwrap();
            (fs, dir, w)
        };
        let header_only = || {
            let (fs, dir) = setup();
            WalWriter::create(&fs, &dir, FileNumber(5), true)
                .unwrap()
                .sync()
                .unwrap();
            let w = WalWriter::recycle(&fs, &dir, FileNumber(5), FileNumber(9), None).unwrap();
            (fs, dir, w)
        };
        for (what, (fs, dir, mut w)) in [
            ("new", new()),
            ("recycled", recycling()),
            ("recycled header-only", header_only()),
        ] {
            for i in 0..3 {
                let mut b = batch(format!("n{i}").as_bytes(), &[b'w'; 40]);
                w.append(&[b.encode_with_seq(500 + i)], true).unwrap();
            }
            fs.sync_dir(&dir).unwrap();
            let len = vfs::read_all(&fs, &filename::wal(&dir, FileNumber(9)))
                .unwrap()
                .len();
            for keep in 0..=len {
                let crashed = fs.crash_clone_keeping(|_| keep);
                let c = read(&crashed, &dir, FileNumber(9)).unwrap();
                let got = seqs(&c);
                assert!(got.len() <= 3, "{what}, keep {keep}: {got:?}");
                assert_eq!(got, (500..500 + got.len() as u64).collect::<Vec<_>>());
                assert_eq!(c.damage, None, "{what}, keep {keep}");
            }
        }
    }

    /// After the end, headers crafted as valid headers of the file's number
    /// that each claim a payload reaching the end of the data: the search
    /// for a later record of the file checksums no more payload bytes than
    /// the data holds (otherwise quadratic), and the read ends cleanly.
    #[test]
    fn a_crafted_tail_of_headers_ends_the_read_cleanly() {
        use crate::base::checksum;
        let (fs, dir) = recycled(2);
        let path = filename::wal(&dir, FileNumber(9));
        let mut data = vfs::read_all(&fs, &path).unwrap();
        let end = read(&fs, &dir, FileNumber(9)).unwrap().end as usize;
        data.truncate(end);
        data.push(0xff); // not a record: reading stops here
        let headers = 2000;
        let total = data.len() + headers * record::RECYCLABLE_HEADER_LEN;
        for _ in 0..headers {
            let claim = (total - data.len() - record::RECYCLABLE_HEADER_LEN) as u32;
            let mut fields = claim.to_le_bytes().to_vec();
            fields.push(record::TYPE_RECYCLABLE);
            fields.extend_from_slice(&9u64.to_le_bytes());
            fields.extend_from_slice(&[0; 4]); // a payload checksum that fails
            put_fixed32(&mut data, checksum::mask(checksum::crc32c(&fields)));
            data.extend_from_slice(&fields);
        }
        assert_eq!(data.len(), total);
        let mut f = fs.create(&path, FileOptions::default()).unwrap();
        f.append(&data).unwrap();
        drop(f);
        let c = read(&fs, &dir, FileNumber(9)).unwrap();
        assert_eq!((seqs(&c), c.damage), (vec![500, 501], None));
    }

    /// A damaged record followed by a later record of the same file is
    /// damage, not the end of the file.
    #[test]
    fn damage_before_a_later_record_of_the_file_is_reported() {
        let (fs, dir) = recycled(5);
        let path = filename::wal(&dir, FileNumber(9));
        let c = read(&fs, &dir, FileNumber(9)).unwrap();
        assert_eq!(c.batches.len(), 5);
        let first_batch = (record::RECYCLABLE_HEADER_LEN + HEADER_PAYLOAD_LEN) as u64;
        let second = (first_batch + c.end) / 2;
        fs.corrupt_byte(&path, second as usize);
        let c = read(&fs, &dir, FileNumber(9)).unwrap();
        let damage = c.damage.unwrap();
        assert!(!damage.torn_tail, "{damage:?}");
        assert!(c.batches.len() < 5);
    }

    /// A byte flipped anywhere in a recycled WAL never yields a batch that
    /// was not written, nor a stale one.
    #[test]
    fn flipped_bytes_in_a_recycled_wal_never_yield_wrong_batches() {
        let (fs, dir) = recycled(3);
        let path = filename::wal(&dir, FileNumber(9));
        let len = fs.file_len(&path).unwrap();
        for i in 0..len {
            fs.corrupt_byte(&path, i);
            if let Ok(c) = read(&fs, &dir, FileNumber(9)) {
                for (j, s) in seqs(&c).into_iter().enumerate() {
                    assert_eq!(s, 500 + j as u64, "flip at {i}");
                }
            }
            fs.corrupt_byte(&path, i);
        }
    }
}
