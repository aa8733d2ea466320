//! Reads a value file: records by handle, the record index by id, and all
//! records in file order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::coding::DecodeError;
use crate::base::compression::decompress;
use crate::base::limits::MAX_VALUE_SIZE;
use crate::base::{FileNumber, SeqNo};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority};
use crate::error::{Error, Result};
use crate::vfs::{FileOptions, Fs, RandomAccessFile, ReadRequest};

use super::format::{
    check_block, decode_record, BlockHandle, Footer, FooterError, ValueFileProperties, FOOTER_LEN,
    FORMAT_VERSION, MIN_RECORD_LEN,
};
use super::record_index::{
    self, decode_index_block, decode_top_index, decode_v1_index_block, encode_entries,
    IndexBlockMeta, IndexEntry,
};
use super::ValueHandle;

/// An open value file. Holds its footer, properties and top-level index;
/// record index blocks are read when needed, through the block cache if
/// it has one.
pub(crate) struct ValueFile {
    file: Arc<dyn RandomAccessFile>,
    cache: Option<Arc<BlockCache>>,
    path: PathBuf,
    number: FileNumber,
    footer: Footer,
    properties: ValueFileProperties,
    index_blocks: Vec<IndexBlockMeta>,
}

impl std::fmt::Debug for ValueFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueFile")
            .field("path", &self.path)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

/// One record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueRecord {
    pub logical_file: FileNumber,
    pub ordinal: u64,
    pub key: Vec<u8>,
    pub seq: SeqNo,
    pub value: Vec<u8>,
    /// The record as stored (checksum, header, key, possibly compressed
    /// value), checked: GC copies it unchanged.
    pub raw: Vec<u8>,
}

impl ValueFile {
    /// Opens physical file `number` at `path`: reads and checks the footer,
    /// properties and top-level index (three reads). Record index blocks
    /// that point reads use are kept in `cache`.
    pub(crate) fn open(
        fs: &dyn Fs,
        path: PathBuf,
        number: FileNumber,
        opts: FileOptions,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<ValueFile> {
        let file = fs.open(&path, opts)?;
        let len = file.len();
        let footer_offset = len.checked_sub(FOOTER_LEN as u64).ok_or_else(|| {
            Error::corruption(
                &path,
                0,
                format!("file of {len} bytes is too short for a value file footer"),
            )
        })?;
        let buf = file.read_at(footer_offset, FOOTER_LEN)?;
        let footer = Footer::decode(&buf, footer_offset).map_err(|e| match e {
            FooterError::Corrupt(reason) => Error::corruption(&path, footer_offset, reason),
            FooterError::Version(found) => Error::UnsupportedFormatVersion {
                file: path.clone(),
                found,
                supported: FORMAT_VERSION,
            },
        })?;
        let mut vf = ValueFile {
            file,
            cache,
            path,
            number,
            footer,
            properties: ValueFileProperties::default(),
            index_blocks: Vec::new(),
        };
        let props = footer.properties;
        vf.properties = ValueFileProperties::decode(&vf.read_block(props)?)
            .map_err(|e| vf.corruption(props.offset, e))?;
        if vf.properties.format_version != u64::from(footer.version) {
            return Err(vf.corruption(
                props.offset,
                DecodeError("properties and footer name different format versions"),
            ));
        }
        if vf.properties.record_bytes != footer.records_end {
            return Err(vf.corruption(
                props.offset,
                DecodeError("record bytes differ from the records region"),
            ));
        }
        let top = footer.top_index;
        vf.index_blocks = decode_top_index(
            &vf.read_block(top)?,
            footer.records_end,
            top.offset,
            footer.version,
        )
        .map_err(|e| vf.corruption(top.offset, e))?;
        let indexed: u64 = vf.index_blocks.iter().map(|b| b.num_entries).sum();
        if indexed != vf.properties.num_records {
            return Err(vf.corruption(
                top.offset,
                DecodeError("record index count differs from the properties"),
            ));
        }
        Ok(vf)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn properties(&self) -> &ValueFileProperties {
        &self.properties
    }

    #[cfg(test)]
    pub(crate) fn num_index_blocks(&self) -> usize {
        self.index_blocks.len()
    }

    /// The value of the record `handle` names, which must hold `key` and
    /// `seq`. One read when the handle's logical file was born here; else
    /// the record index is read first.
    #[cfg(test)]
    pub(crate) fn read(&self, handle: &ValueHandle, key: &[u8], seq: SeqNo) -> Result<Vec<u8>> {
        let (offset, len) = self.place(handle)?;
        self.read_placed(offset, len, key, seq)
    }

    /// The value of the record of `len` bytes at `offset` (as
    /// [`Self::place`] gives), checked as [`Self::read`] checks it.
    pub(crate) fn read_placed(
        &self,
        offset: u64,
        len: u32,
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Vec<u8>> {
        let r = self.record_request(offset, len)?;
        let buf = self.file.read_at(r.offset, r.len)?;
        self.value_of(offset, &buf, key, seq)
    }

    /// The read of the record of `len` bytes at `offset` (checked to lie
    /// in the records region), for a caller that reads several at once.
    pub(crate) fn record_request(&self, offset: u64, len: u32) -> Result<ReadRequest<'_>> {
        self.check_record_bounds(offset, len)?;
        Ok(ReadRequest {
            file: self.file.as_ref(),
            offset,
            len: len as usize,
        })
    }

    /// Where the record `handle` names lies in this file: the handle's own
    /// place if its logical file was born here, else the record index's.
    pub(crate) fn place(&self, handle: &ValueHandle) -> Result<(u64, u32)> {
        if handle.logical_file == self.number {
            return Ok((handle.offset, handle.len));
        }
        self.locate(handle.logical_file, handle.ordinal)?
            .ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    self.footer.top_index.offset,
                    format!(
                        "record {} of logical file {} is not in this file",
                        handle.ordinal, handle.logical_file
                    ),
                )
            })
    }

    /// Raw bytes `[offset, offset + len)` of the records region, clipped
    /// to its end: a readahead window over several records.
    pub(crate) fn read_records_span(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let r = self.records_span_request(offset, len)?;
        self.file.read_at(r.offset, r.len)
    }

    /// The read [`Self::read_records_span`] does, for a caller that reads
    /// several at once.
    pub(crate) fn records_span_request(&self, offset: u64, len: usize) -> Result<ReadRequest<'_>> {
        let end = offset
            .saturating_add(len as u64)
            .min(self.footer.records_end);
        let len = usize::try_from(end.saturating_sub(offset))
            .map_err(|_| self.corruption(offset, DecodeError("span overflows")))?;
        Ok(ReadRequest {
            file: self.file.as_ref(),
            offset,
            len,
        })
    }

    /// The value of the record of `len` bytes at `offset`, taken from
    /// `buf` (which holds exactly those bytes), checked as [`Self::read`]
    /// checks it.
    pub(crate) fn value_of(
        &self,
        offset: u64,
        buf: &[u8],
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Vec<u8>> {
        let len = u32::try_from(buf.len())
            .map_err(|_| self.corruption(offset, DecodeError("record longer than 4 GiB")))?;
        self.check_record_bounds(offset, len)?;
        check_record(&self.path, offset, buf, key, seq)
    }

    /// Where record `ordinal` of `logical_file` lies in this file, through
    /// the record index; `None` if the file does not host it.
    pub(crate) fn locate(
        &self,
        logical_file: FileNumber,
        ordinal: u64,
    ) -> Result<Option<(u64, u32)>> {
        let id = (logical_file.0, ordinal);
        let i = self.index_blocks.partition_point(|b| b.first <= id);
        let Some(i) = i.checked_sub(1) else {
            return Ok(None);
        };
        let at = self.index_blocks.get(i).map_or(0, |b| b.handle.offset);
        let block = self.index_block(i)?;
        let entry = record_index::find(&block, id).map_err(|e| self.corruption(at, e))?;
        Ok(entry.map(|e| (e.offset, e.len)))
    }

    /// Reads every record, checking its checksum and that the records of
    /// each hosted logical file are as many and as large as the
    /// properties say.
    pub(crate) fn verify(&self) -> Result<()> {
        let mut seen: std::collections::BTreeMap<FileNumber, u64> = Default::default();
        for r in self.iter()? {
            *seen.entry(r?.logical_file).or_default() += 1;
        }
        let expected: std::collections::BTreeMap<FileNumber, u64> = self
            .properties
            .hosted
            .iter()
            .map(|h| (h.logical_file, h.num_records))
            .collect();
        if seen != expected {
            return Err(self.corruption(
                self.footer.properties.offset,
                DecodeError("records differ from the hosted files the properties list"),
            ));
        }
        Ok(())
    }

    /// All records in file order (for verification): reads the whole
    /// record index, then the records, a run of adjacent ones per read.
    pub(crate) fn iter(&self) -> Result<RecordIter<'_>> {
        self.iter_live(&|_, _| true)
    }

    /// The records `live(logical_file, ordinal)` selects, in file order.
    /// Only those are read: one read per run of adjacent live records (up
    /// to a bound), and a dead record is never read, so a file that is
    /// mostly garbage costs little more than its live bytes.
    pub(crate) fn iter_live(
        &self,
        live: &dyn Fn(FileNumber, u64) -> bool,
    ) -> Result<RecordIter<'_>> {
        Ok(RecordIter {
            file: self,
            runs: self.live_runs(live, 0)?.into_iter(),
            records: Vec::new().into_iter(),
            done: false,
        })
    }

    /// The runs [`Self::iter_live`] reads (with `max_gap` 0), for a caller
    /// that reads them itself (GC reads several at once): reads the whole
    /// record index and groups the selected records into runs of at most
    /// `RUN_BYTES` (a larger record is a run alone), in file order. A run's
    /// records are adjacent, or apart by at most `max_gap` bytes of
    /// unselected records that its read then takes too.
    pub(crate) fn live_runs(
        &self,
        live: &dyn Fn(FileNumber, u64) -> bool,
        max_gap: u64,
    ) -> Result<Vec<Vec<IndexEntry>>> {
        let mut entries = Vec::new();
        // A whole-file pass (GC, verification) does not fill the cache:
        // it would push out the blocks point reads use.
        for i in 0..self.index_blocks.len() {
            entries.extend(self.index_entries(i)?);
        }
        entries.sort_unstable_by_key(|e| e.offset);
        // Records are written back to back: the index must cover the
        // records region exactly, once.
        let mut end = 0;
        for e in &entries {
            if e.offset != end {
                return Err(self.corruption(
                    self.footer.records_end,
                    DecodeError("record index does not tile the records"),
                ));
            }
            end = e.offset + u64::from(e.len);
        }
        if end != self.footer.records_end {
            return Err(self.corruption(
                self.footer.records_end,
                DecodeError("record index does not cover the records"),
            ));
        }
        let mut runs: Vec<Vec<IndexEntry>> = Vec::new();
        let mut run_start = 0;
        for e in entries
            .into_iter()
            .filter(|e| live(FileNumber(e.logical_file), e.ordinal))
        {
            match runs.last_mut() {
                Some(run)
                    if run
                        .last()
                        .is_some_and(|l| e.offset - (l.offset + u64::from(l.len)) <= max_gap)
                        && e.offset + u64::from(e.len) - run_start <= RUN_BYTES =>
                {
                    run.push(e)
                }
                _ => {
                    run_start = e.offset;
                    runs.push(vec![e]);
                }
            }
        }
        Ok(runs)
    }

    /// The records of `run` (as [`Self::live_runs`] gives), read with one
    /// `pread` and each checked.
    pub(crate) fn read_run(&self, run: &[IndexEntry]) -> Result<Vec<ValueRecord>> {
        let Some(r) = self.run_request(run)? else {
            return Ok(Vec::new());
        };
        let buf = self.file.read_at(r.offset, r.len)?;
        self.decode_run(run, &buf)
    }

    /// The one read that fetches `run` whole (`None` for an empty run), for
    /// a caller that reads several runs at once; [`Self::decode_run`] then
    /// takes its bytes.
    pub(crate) fn run_request(&self, run: &[IndexEntry]) -> Result<Option<ReadRequest<'_>>> {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return Ok(None);
        };
        let len = usize::try_from(last.offset + u64::from(last.len) - first.offset)
            .map_err(|_| self.corruption(first.offset, DecodeError("run overflows")))?;
        Ok(Some(ReadRequest {
            file: self.file.as_ref(),
            offset: first.offset,
            len,
        }))
    }

    /// The records of `run`, each checked, from `buf`: the bytes of
    /// [`Self::run_request`]'s read.
    pub(crate) fn decode_run(&self, run: &[IndexEntry], buf: &[u8]) -> Result<Vec<ValueRecord>> {
        let Some(first) = run.first() else {
            return Ok(Vec::new());
        };
        run.iter()
            .map(|e| {
                let at = (e.offset - first.offset) as usize;
                let raw = buf.get(at..at + e.len as usize).unwrap_or_default();
                let r = decode_at(&self.path, e.offset, raw)?;
                Ok(ValueRecord {
                    logical_file: FileNumber(e.logical_file),
                    ordinal: e.ordinal,
                    key: r.key.to_vec(),
                    seq: r.seq,
                    value: r.value,
                    raw: raw.to_vec(),
                })
            })
            .collect()
    }

    fn corruption(&self, offset: u64, e: DecodeError) -> Error {
        Error::corruption(&self.path, offset, e.0)
    }

    /// Record index block `i` in the version-2 encoding, which lookups
    /// search in place: from the block cache, else read, checked against
    /// the top-level index (a version-1 block converted) and put into the
    /// cache with high priority, as sstable index blocks are: a handle of a
    /// moved logical file needs it before its record, and should cost one
    /// disk read, not two. The cache holds about 3.5 bytes per record.
    fn index_block(&self, i: usize) -> Result<Arc<[u8]>> {
        let at = self.index_blocks.get(i).map_or(0, |b| b.handle.offset);
        let key = (CacheKind::RecordIndex, self.number, at);
        if let Some(CachedBlock::ValueIndex(contents)) =
            self.cache.as_ref().and_then(|c| c.get(&key))
        {
            return Ok(contents);
        }
        let (contents, _) = self.read_index_block(i)?;
        if let Some(cache) = &self.cache {
            cache.insert(
                key,
                CachedBlock::ValueIndex(contents.clone()),
                contents.len(),
                Priority::High,
            );
        }
        Ok(contents)
    }

    /// The entries of record index block `i`, checked. A whole-file pass
    /// (GC, verification) takes a cached block but does not fill the
    /// cache: it would push out the blocks point reads use.
    fn index_entries(&self, i: usize) -> Result<Vec<IndexEntry>> {
        let at = self.index_blocks.get(i).map_or(0, |b| b.handle.offset);
        if let Some(CachedBlock::ValueIndex(contents)) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(&(CacheKind::RecordIndex, self.number, at)))
        {
            return decode_index_block(&contents, self.footer.records_end)
                .map_err(|e| self.corruption(at, e));
        }
        Ok(self.read_index_block(i)?.1)
    }

    /// Reads record index block `i` from the file and checks it, and that
    /// it agrees with the top-level index and the next block's first id.
    /// Returns it in the version-2 encoding and decoded.
    fn read_index_block(&self, i: usize) -> Result<(Arc<[u8]>, Vec<IndexEntry>)> {
        let Some(meta) = self.index_blocks.get(i) else {
            return Err(self.corruption(
                self.footer.top_index.offset,
                DecodeError("record index block beyond the top-level index"),
            ));
        };
        let at = meta.handle.offset;
        let bytes = self.read_block(meta.handle)?;
        let records_end = self.footer.records_end;
        let (contents, entries) = if self.footer.version == 1 {
            let entries =
                decode_v1_index_block(&bytes, records_end).map_err(|e| self.corruption(at, e))?;
            (encode_entries(&entries), entries)
        } else {
            let entries =
                decode_index_block(&bytes, records_end).map_err(|e| self.corruption(at, e))?;
            (bytes, entries)
        };
        let next_first = self.index_blocks.get(i + 1).map(|b| b.first);
        let consistent = entries.len() as u64 == meta.num_entries
            && entries.first().map(IndexEntry::id) == Some(meta.first)
            && entries
                .last()
                .zip(next_first)
                .is_none_or(|(last, next)| last.id() < next);
        if !consistent {
            return Err(self.corruption(
                at,
                DecodeError("record index block disagrees with the top-level index"),
            ));
        }
        Ok((contents.into(), entries))
    }

    /// Reads a block with its trailer (bounded by the footer's checks) and
    /// returns its checked contents.
    fn read_block(&self, h: BlockHandle) -> Result<Vec<u8>> {
        let len = h
            .end_with_trailer()
            .and_then(|end| usize::try_from(end - h.offset).ok())
            .ok_or_else(|| self.corruption(h.offset, DecodeError("block handle overflows")))?;
        let buf = self.file.read_at(h.offset, len)?;
        let contents = check_block(&buf).map_err(|e| self.corruption(h.offset, e))?;
        Ok(contents.to_vec())
    }

    fn check_record_bounds(&self, offset: u64, len: u32) -> Result<()> {
        let inside = offset
            .checked_add(u64::from(len))
            .is_some_and(|end| end <= self.footer.records_end);
        if !inside || (len as usize) < MIN_RECORD_LEN {
            return Err(self.corruption(
                offset,
                DecodeError("record handle points outside the records"),
            ));
        }
        Ok(())
    }
}

/// The value of the record read at `offset` of `path` into `buf` (exactly
/// its bytes): its checksum checked, its value decompressed, and it must
/// hold `key` and `seq`. A record of sequence 0 matches any sequence: a
/// value log writes its records before the write group assigns theirs
/// (real sequence numbers start at 1).
pub(crate) fn check_record(
    path: &Path,
    offset: u64,
    buf: &[u8],
    key: &[u8],
    seq: SeqNo,
) -> Result<Vec<u8>> {
    let r = decode_at(path, offset, buf)?;
    if r.key != key || (r.seq != 0 && r.seq != seq) {
        return Err(Error::corruption(
            path,
            offset,
            format!(
                "record holds another key or sequence number (seq {} instead of {seq})",
                r.seq
            ),
        ));
    }
    Ok(r.value)
}

/// Record `ordinal` of `logical_file`, whose bytes `raw` were read at
/// `offset` of `path`: checked and decoded, for a copy that keeps it.
pub(crate) fn record_from_raw(
    path: &Path,
    offset: u64,
    logical_file: FileNumber,
    ordinal: u64,
    raw: Vec<u8>,
) -> Result<ValueRecord> {
    let (key, seq, value) = {
        let r = decode_at(path, offset, &raw)?;
        (r.key.to_vec(), r.seq, r.value)
    };
    Ok(ValueRecord {
        logical_file,
        ordinal,
        key,
        seq,
        value,
        raw,
    })
}

/// The record in `buf` (read at `offset` of `path`), checked, its value
/// decompressed; the key is borrowed, as a read only compares it.
fn decode_at<'b>(path: &Path, offset: u64, buf: &'b [u8]) -> Result<DecodedRecord<'b>> {
    let err = |e: DecodeError| Error::corruption(path, offset, e.0);
    let r = decode_record(buf).map_err(err)?;
    let value = decompress(r.stored_value.to_vec(), r.codec, MAX_VALUE_SIZE).map_err(err)?;
    Ok(DecodedRecord {
        key: r.key,
        seq: r.seq,
        value,
    })
}

struct DecodedRecord<'b> {
    key: &'b [u8],
    seq: SeqNo,
    value: Vec<u8>,
}

/// Most bytes one read of a run takes, gaps included; a larger record is
/// read alone.
const RUN_BYTES: u64 = 1 << 20;

/// Records in file order, each with its id, a run at a time. Stops after
/// the first error.
pub(crate) struct RecordIter<'a> {
    file: &'a ValueFile,
    runs: std::vec::IntoIter<Vec<IndexEntry>>,
    records: std::vec::IntoIter<ValueRecord>,
    done: bool,
}

impl Iterator for RecordIter<'_> {
    type Item = Result<ValueRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if let Some(r) = self.records.next() {
                return Some(Ok(r));
            }
            let run = self.runs.next()?;
            match self.file.read_run(&run) {
                Ok(records) => self.records = records.into_iter(),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
