//! Writes one value file: records as values arrive, then the record index,
//! the top-level index, properties and the footer.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::base::compression::{compress, compression_byte, COMPRESSION_NONE};
use crate::base::key::MAX_SEQ;
use crate::base::limits::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::base::{FileNumber, SeqNo};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority};
use crate::error::{Error, Result};
use crate::vfs::{FileOptions, Fs, WritableFile};

use super::format::{
    record_header, seal_block, BlockHandle, Footer, HostedFile, ValueFileProperties,
    BLOCK_TRAILER_LEN, FORMAT_VERSION,
};
use super::reader::ValueRecord;
use super::record_index::{
    encode_top_index, IndexBlockEncoder, IndexBlockMeta, IndexEntry, INDEX_BLOCK_TARGET_BYTES,
    MAX_ID,
};
use super::{ValueFileOptions, ValueFileSummary, ValueHandle};

pub(crate) struct ValueFileBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    number: FileNumber,
    opts: ValueFileOptions,
    /// Bytes written so far.
    offset: u64,
    /// Ordinal of the next record of the file's own logical file.
    next_ordinal: u64,
    /// Every record written, in write order; sorted by id at `finish`.
    /// About 32 bytes per record, so a 256 MiB file of 1 KiB values holds
    /// 8 MiB here while it is written.
    entries: Vec<IndexEntry>,
    /// Per logical file: (records, bytes).
    hosted: BTreeMap<u64, (u64, u64)>,
    props: ValueFileProperties,
    /// Set once a write failed; the file is then unusable.
    failed: bool,
    /// Where record index blocks are cut.
    index_block_bytes: usize,
    /// Where the record index blocks go as they are written.
    warm: Option<Arc<BlockCache>>,
}

impl ValueFileBuilder {
    /// Creates the file `path` for physical (and birth logical) file
    /// `number`.
    pub(crate) fn create(
        fs: &dyn Fs,
        path: PathBuf,
        number: FileNumber,
        opts: ValueFileOptions,
    ) -> Result<ValueFileBuilder> {
        let file = fs.create(
            &path,
            FileOptions {
                direct: opts.direct_writes,
            },
        )?;
        Ok(Self::new(file, path, number, opts, 0))
    }

    /// Takes up file `path`, whose records a writer left unsealed (a full
    /// disk cut an append, or a crash came first), to seal it in place:
    /// cuts it at `end`, the end of its last whole record, and goes on
    /// from there. The caller counts each record before `end` with
    /// [`Self::count_existing`], then finishes.
    pub(crate) fn resume(
        fs: &dyn Fs,
        path: PathBuf,
        number: FileNumber,
        opts: ValueFileOptions,
        end: u64,
    ) -> Result<ValueFileBuilder> {
        fs.truncate(&path, end)?;
        // The records durable (and the cut) before the tail goes on them.
        fs.sync_file(&path)?;
        let file = fs.reopen_at(
            &path,
            end,
            FileOptions {
                direct: opts.direct_writes,
            },
        )?;
        Ok(Self::new(file, path, number, opts, end))
    }

    fn new(
        file: Box<dyn WritableFile>,
        path: PathBuf,
        number: FileNumber,
        opts: ValueFileOptions,
        offset: u64,
    ) -> ValueFileBuilder {
        ValueFileBuilder {
            file,
            path,
            number,
            offset,
            next_ordinal: 0,
            entries: Vec::new(),
            hosted: BTreeMap::new(),
            props: ValueFileProperties {
                format_version: u64::from(FORMAT_VERSION),
                compression: compression_byte(opts.compression),
                origin: opts.origin,
                class: opts.class,
                smallest_seq: u64::MAX,
                ..ValueFileProperties::default()
            },
            failed: false,
            index_block_bytes: INDEX_BLOCK_TARGET_BYTES,
            warm: None,
            opts,
        }
    }

    /// Counts record `r`, `len` bytes at `offset`, already in the file
    /// [`Self::resume`] took up, in the properties and the record index.
    pub(crate) fn count_existing(&mut self, r: &ValueRecord, offset: u64, len: u32) {
        debug_assert!(offset + u64::from(len) <= self.offset);
        if r.logical_file == self.number {
            self.next_ordinal = self.next_ordinal.max(r.ordinal + 1);
        }
        self.account(
            r.logical_file,
            r.ordinal,
            &r.key,
            r.seq,
            r.value.len(),
            offset,
            len,
        );
    }

    /// Puts the record index blocks this builder writes into `cache` with
    /// high priority, as reads look them up: a get of a logical file that
    /// GC just moved here then reads only its record.
    pub(crate) fn warm_cache(&mut self, cache: Arc<BlockCache>) {
        self.warm = Some(cache);
    }

    /// Cuts record index blocks at `bytes` (at most the usual target): a
    /// small file with several index blocks, for fuzz seeds.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn set_index_block_bytes(&mut self, bytes: usize) {
        self.index_block_bytes = bytes.min(INDEX_BLOCK_TARGET_BYTES);
    }

    /// Appends a record of this file's own logical file (numbered as the
    /// physical file) with the next ordinal. Records keep call order.
    pub(crate) fn add(&mut self, key: &[u8], seq: SeqNo, value: &[u8]) -> Result<ValueHandle> {
        let ordinal = self.next_ordinal;
        let h = self.append_record(self.number, ordinal, key, seq, value)?;
        self.next_ordinal += 1;
        Ok(h)
    }

    /// Appends a record read from another file, byte for byte, keeping
    /// its id (GC moving a logical file here). Its length stays what the
    /// sstables' handles and value-references blocks say, so referenced
    /// and hosted bytes keep counting the same bytes; its codec stays its
    /// own. REQUIRES: each `(logical_file, ordinal)` is added once, and not
    /// mixed with [`ValueFileBuilder::add`] for the file's own number.
    /// The returned handle's offset is valid only in this file; callers
    /// keep the original handles.
    pub(crate) fn add_moved(&mut self, r: &ValueRecord) -> Result<ValueHandle> {
        self.check_not_failed()?;
        let len = u32::try_from(r.raw.len()).map_err(|_| {
            Error::InvalidArgument(format!("value file record of {} bytes", r.raw.len()))
        })?;
        let offset = self.offset;
        self.append(&r.raw)?;
        self.account(
            r.logical_file,
            r.ordinal,
            &r.key,
            r.seq,
            r.value.len(),
            offset,
            len,
        );
        Ok(ValueHandle {
            logical_file: r.logical_file,
            ordinal: r.ordinal,
            offset,
            len,
        })
    }

    /// Bytes written so far (records only until `finish`).
    pub(crate) fn file_size(&self) -> u64 {
        self.offset
    }

    pub(crate) fn num_records(&self) -> u64 {
        self.props.num_records
    }

    /// Hands what was appended to the OS, so that reads of the file see
    /// it: a value log is read while it is written.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let r = self.file.flush();
        self.guard(r)
    }

    /// Makes what was appended durable (a value log before the WAL records
    /// that point into it).
    pub(crate) fn sync(&mut self) -> Result<()> {
        let r = self.file.flush().and_then(|()| self.file.sync());
        self.guard(r)
    }

    fn append_record(
        &mut self,
        logical_file: FileNumber,
        ordinal: u64,
        key: &[u8],
        seq: SeqNo,
        value: &[u8],
    ) -> Result<ValueHandle> {
        self.check_not_failed()?;
        if key.len() > MAX_KEY_SIZE || value.len() > MAX_VALUE_SIZE || seq > MAX_SEQ {
            return Err(Error::InvalidArgument(format!(
                "value file record with a {}-byte key, a {}-byte value or sequence {seq} \
                 exceeds the limits",
                key.len(),
                value.len()
            )));
        }
        // Compression that does not pay is undone per record, so one file
        // can mix compressed and raw records.
        let compressed;
        let (stored, codec): (&[u8], u8) = match self.opts.compression {
            crate::Compression::None => (value, COMPRESSION_NONE),
            c => {
                compressed = compress(value, c);
                (&compressed.0, compressed.1)
            }
        };
        let header = record_header(key, stored, seq, codec);
        let record_len = header.len() + key.len() + stored.len();
        // The limits keep a record under 4 GiB; checked rather than assumed
        // because the handle's length field is 32 bits.
        let len = u32::try_from(record_len).map_err(|_| {
            Error::InvalidArgument(format!("value file record of {record_len} bytes"))
        })?;
        let offset = self.offset;
        self.append(&header)?;
        self.append(key)?;
        self.append(stored)?;
        self.account(logical_file, ordinal, key, seq, value.len(), offset, len);
        Ok(ValueHandle {
            logical_file,
            ordinal,
            offset,
            len,
        })
    }

    /// Counts a record of `len` bytes just written at `offset` in the
    /// properties and the record index.
    #[allow(clippy::too_many_arguments)]
    fn account(
        &mut self,
        logical_file: FileNumber,
        ordinal: u64,
        key: &[u8],
        seq: SeqNo,
        value_len: usize,
        offset: u64,
        len: u32,
    ) {
        let p = &mut self.props;
        if p.num_records == 0 || key < p.smallest_key.as_slice() {
            p.smallest_key = key.to_vec();
        }
        if p.num_records == 0 || key > p.largest_key.as_slice() {
            p.largest_key = key.to_vec();
        }
        p.num_records += 1;
        p.record_bytes += u64::from(len);
        p.raw_value_bytes += value_len as u64;
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        let slot = self.hosted.entry(logical_file.0).or_default();
        slot.0 += 1;
        slot.1 += u64::from(len);
        self.entries.push(IndexEntry {
            logical_file: logical_file.0,
            ordinal,
            offset,
            len,
        });
    }

    /// Writes the record index, top-level index, properties and footer, and
    /// syncs. REQUIRES: at least one record.
    pub(crate) fn finish(mut self) -> Result<ValueFileSummary> {
        let summary = self.write_tail()?;
        let r = self.file.sync();
        self.guard(r)?;
        Ok(summary)
    }

    /// Writes what [`Self::finish`] writes and hands it to the OS, then
    /// closes the file without syncing it ([`Fs::sync_file`] does that
    /// later): a value log's writer moves on to a new log while the full
    /// one reaches the disk, and the full one holds no descriptor or
    /// buffer meanwhile.
    pub(crate) fn finish_unsynced(mut self) -> Result<ValueFileSummary> {
        self.write_tail()
    }

    /// The record index, top-level index, properties and footer, handed
    /// to the OS. REQUIRES: at least one record.
    fn write_tail(&mut self) -> Result<ValueFileSummary> {
        self.check_not_failed()?;
        if self.props.num_records == 0 {
            return Err(Error::InvalidArgument(format!(
                "value file {} would be empty",
                self.path.display()
            )));
        }
        let mut entries = std::mem::take(&mut self.entries);
        if entries
            .iter()
            .any(|e| e.logical_file >= MAX_ID || e.ordinal >= MAX_ID)
        {
            self.failed = true;
            return Err(Error::InvalidArgument(format!(
                "value file {} names a logical file or ordinal of 2^62 or more",
                self.path.display()
            )));
        }
        entries.sort_unstable_by_key(IndexEntry::id);
        if entries.windows(2).any(|w| w[0].id() == w[1].id()) {
            self.failed = true;
            return Err(Error::InvalidArgument(format!(
                "value file {} holds a (logical file, ordinal) twice",
                self.path.display()
            )));
        }
        let records_end = self.offset;
        let index_blocks = self.write_index_blocks(&entries)?;
        let top_index = self.write_block(encode_top_index(&index_blocks))?;
        self.props.index_size = self.offset - records_end;
        self.props.hosted = self
            .hosted
            .iter()
            .map(|(&l, &(num_records, record_bytes))| HostedFile {
                logical_file: FileNumber(l),
                num_records,
                record_bytes,
            })
            .collect();
        let properties = self.write_block(self.props.encode())?;
        let footer = Footer {
            records_end,
            top_index,
            properties,
            version: FORMAT_VERSION,
        };
        self.append(&footer.encode())?;
        let r = self.file.flush();
        self.guard(r)?;
        Ok(ValueFileSummary {
            number: self.number,
            file_size: self.offset,
            properties: std::mem::take(&mut self.props),
        })
    }

    /// Cuts `entries` into blocks of about `index_block_bytes`.
    fn write_index_blocks(&mut self, entries: &[IndexEntry]) -> Result<Vec<IndexBlockMeta>> {
        let mut metas = Vec::new();
        let mut encoder = IndexBlockEncoder::default();
        for (i, e) in entries.iter().enumerate() {
            encoder.add(e);
            if encoder.len() >= self.index_block_bytes || i + 1 == entries.len() {
                let (contents, first, num_entries) = encoder.finish();
                let cached: Option<Arc<[u8]>> =
                    self.warm.as_ref().map(|_| contents.as_slice().into());
                let handle = self.write_block(contents)?;
                if let (Some(cache), Some(contents)) = (&self.warm, cached) {
                    let charge = contents.len();
                    let key = (CacheKind::RecordIndex, self.number, handle.offset);
                    cache.insert(
                        key,
                        CachedBlock::ValueIndex(contents),
                        charge,
                        Priority::High,
                    );
                }
                metas.push(IndexBlockMeta {
                    first,
                    handle,
                    num_entries,
                });
            }
        }
        Ok(metas)
    }

    fn write_block(&mut self, contents: Vec<u8>) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: contents.len() as u64,
        };
        let sealed = seal_block(contents);
        debug_assert_eq!(sealed.len() as u64, handle.size + BLOCK_TRAILER_LEN as u64);
        self.append(&sealed)?;
        Ok(handle)
    }

    fn check_not_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(format!(
                "value file builder for {} used after a failed write",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let r = self.file.append(data);
        self.guard(r)?;
        self.offset += data.len() as u64;
        Ok(())
    }

    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}
