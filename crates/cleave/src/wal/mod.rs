//! The write-ahead log: one file per memtable, a header record followed by
//! one record per WriteBatch (see `docs/format/wal.md`).

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
/// operands, which a build that reads only an older version must refuse
/// rather than replay as damage.
pub(crate) const FORMAT_VERSION: u32 = 3;

/// The header names the file's own number and the WAL written before it
/// (0: none known), so that replay can tell a missing WAL from the end of
/// the chain. Readers before the second field ignore it.
fn header(number: FileNumber, previous: Option<FileNumber>) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    put_fixed32(&mut h, FORMAT_VERSION);
    put_fixed64(&mut h, number.0);
    put_fixed64(&mut h, previous.map_or(0, |p| p.0));
    h
}

/// Appends batches to one WAL file.
pub(crate) struct WalWriter {
    number: FileNumber,
    writer: RecordWriter,
    scratch: Vec<u8>,
}

impl WalWriter {
    /// Creates the file and writes its header, which names no earlier WAL
    /// (the one an open starts). The caller syncs the directory before
    /// acknowledging writes that went to this WAL.
    pub(crate) fn create(fs: &dyn Fs, dir: &Path, number: FileNumber) -> Result<Self> {
        Self::create_after(fs, dir, number, None)
    }

    /// As [`Self::create`], for the WAL that follows `previous`.
    pub(crate) fn create_after(
        fs: &dyn Fs,
        dir: &Path,
        number: FileNumber,
        previous: Option<FileNumber>,
    ) -> Result<Self> {
        let file = fs.create(&filename::wal(dir, number), FileOptions::default())?;
        let mut writer = RecordWriter::new(file);
        writer.add(&header(number, previous))?;
        Ok(WalWriter {
            number,
            writer,
            scratch: Vec::new(),
        })
    }

    pub(crate) fn number(&self) -> FileNumber {
        self.number
    }

    /// Appends one record per payload in a single write, then hands the
    /// bytes to the OS so that a process crash cannot lose them.
    pub(crate) fn append(&mut self, payloads: &[&[u8]]) -> Result<u64> {
        self.scratch.clear();
        for p in payloads {
            record::encode(&mut self.scratch, p);
        }
        self.writer.add_raw(&self.scratch)?;
        self.writer.flush()?;
        Ok(self.scratch.len() as u64)
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
    /// The WAL written before this one, if the header names it.
    pub previous: Option<FileNumber>,
}

/// Reads a whole WAL. Bad records end the read (the caller decides what a
/// non-torn stop means); bad content inside a checksummed record is
/// corruption, since the checksum says it is what we wrote.
pub(crate) fn read(fs: &dyn Fs, dir: &Path, number: FileNumber) -> Result<WalContents> {
    let path = filename::wal(dir, number);
    let data = vfs::read_all(fs, &path)?;
    let mut reader = RecordReader::new(&data);
    let mut contents = WalContents {
        batches: Vec::new(),
        damage: None,
        path: path.clone(),
        previous: None,
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
        if first {
            contents.previous = check_header(&path, number, payload)?;
            first = false;
            continue;
        }
        let (seq, batch) =
            WriteBatch::decode(payload).map_err(|r| Error::corruption(&path, offset, r))?;
        contents.batches.push((seq, batch));
    }
    Ok(contents)
}

/// Checks the header and returns the previous WAL it names, if any.
fn check_header(path: &Path, number: FileNumber, payload: &[u8]) -> Result<Option<FileNumber>> {
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
    // Absent in WALs written before the field existed.
    if d.is_empty() {
        return Ok(None);
    }
    let previous = d.fixed64().map_err(|e| bad(e.0))?;
    Ok((previous != 0).then_some(FileNumber(previous)))
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
        let mut w = WalWriter::create(fs, dir, FileNumber(n)).unwrap();
        for i in 0..3u64 {
            let mut b = batch(format!("k{i}").as_bytes(), b"value");
            w.append(&[b.encode_with_seq(10 + i)]).unwrap();
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
        let mut w = WalWriter::create(&fs, &dir, FileNumber(5)).unwrap();
        let mut b = batch(b"k", b"v");
        b.delete(b"k");
        w.append(&[b.encode_with_seq(crate::base::key::MAX_SEQ)])
            .unwrap();
        drop(w);
        let err = read(&fs, &dir, FileNumber(5)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn header_names_the_previous_wal() {
        let (fs, dir) = setup();
        WalWriter::create_after(&fs, &dir, FileNumber(7), Some(FileNumber(5))).unwrap();
        let c = read(&fs, &dir, FileNumber(7)).unwrap();
        assert_eq!(c.previous, Some(FileNumber(5)));
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
}
