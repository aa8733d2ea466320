//! Builder → reader round trips with every codec, lookups by handle and by
//! id, iteration order, and damage: every flipped byte, truncation, wrong
//! keys, another format version and failed writes.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::format::{record_header, HostedFile, FOOTER_LEN};
use super::reader::ValueRecord;
use super::*;
use crate::base::compression::{compress, COMPRESSION_NONE};
use crate::base::key::MAX_SEQ;
use crate::base::limits::MAX_KEY_SIZE;
use crate::base::{Decoder, SeqNo};
use crate::vfs::{FaultFs, FaultOp, FileOptions, Fs, MemFs, OsFs};
use crate::{Compression, Error};

const CODECS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

#[derive(Debug, Clone)]
struct Rec {
    key: Vec<u8>,
    seq: u64,
    value: Vec<u8>,
}

fn path_of(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.vf"))
}

fn options(compression: Compression) -> ValueFileOptions {
    ValueFileOptions {
        compression,
        ..ValueFileOptions::default()
    }
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.gen()).collect()
}

/// Random bytes of a random length in `lens`.
fn random_value(rng: &mut StdRng, lens: std::ops::Range<usize>) -> Vec<u8> {
    let len = rng.gen_range(lens);
    random_bytes(rng, len)
}

/// A random number of `1..max_bits` bits.
fn random_width(rng: &mut StdRng, max_bits: u32) -> u64 {
    let bits = rng.gen_range(1..max_bits);
    rng.gen_range(0..1u64 << bits)
}

/// Records in key order with values of 0 B, 1 B, 512 B and 100 KiB, each
/// size both compressible and random.
fn mixed_records(seed: u64, n: usize) -> Vec<Rec> {
    let mut rng = StdRng::seed_from_u64(seed);
    let sizes = [0usize, 1, 512, 100 << 10];
    (0..n)
        .map(|i| {
            let len = sizes[i % sizes.len()];
            let value = if (i / sizes.len()).is_multiple_of(2) {
                (0..len).map(|j| b"abcabcabd"[j % 9]).collect()
            } else {
                random_bytes(&mut rng, len)
            };
            Rec {
                key: format!("key{i:06}").into_bytes(),
                seq: rng.gen_range(1..=MAX_SEQ),
                value,
            }
        })
        .collect()
}

fn build(
    fs: &dyn Fs,
    path: &Path,
    n: u64,
    opts: ValueFileOptions,
    recs: &[Rec],
) -> (Vec<ValueHandle>, ValueFileSummary) {
    fs.create_dir_all(path.parent().unwrap()).unwrap();
    let mut b = ValueFileBuilder::create(fs, path.to_path_buf(), FileNumber(n), opts).unwrap();
    let handles = recs
        .iter()
        .map(|r| b.add(&r.key, r.seq, &r.value).unwrap())
        .collect();
    assert_eq!(b.num_records(), recs.len() as u64);
    (handles, b.finish().unwrap())
}

/// Record `ordinal` of logical file `logical` as a reader of another file
/// yields it, for `add_moved`.
fn moved(
    logical: u64,
    ordinal: u64,
    key: &[u8],
    seq: SeqNo,
    value: &[u8],
    c: Compression,
) -> ValueRecord {
    let (stored, codec) = match c {
        Compression::None => (value.to_vec(), COMPRESSION_NONE),
        c => compress(value, c),
    };
    let mut raw = record_header(key, &stored, seq, codec);
    raw.extend_from_slice(key);
    raw.extend_from_slice(&stored);
    ValueRecord {
        logical_file: FileNumber(logical),
        ordinal,
        key: key.to_vec(),
        seq,
        value: value.to_vec(),
        raw,
    }
}

fn open(fs: &dyn Fs, path: &Path, n: u64) -> crate::Result<ValueFile> {
    ValueFile::open(
        fs,
        path.to_path_buf(),
        FileNumber(n),
        FileOptions::default(),
        None,
    )
}

/// Checks everything a reader offers against what was written.
fn check_all(vf: &ValueFile, recs: &[Rec], handles: &[ValueHandle]) {
    for (r, h) in recs.iter().zip(handles) {
        assert_eq!(vf.read(h, &r.key, r.seq).unwrap(), r.value);
        assert_eq!(
            vf.locate(h.logical_file, h.ordinal).unwrap(),
            Some((h.offset, h.len))
        );
    }
    let read: Vec<ValueRecord> = vf.iter().unwrap().map(Result::unwrap).collect();
    assert_eq!(read.len(), recs.len());
    for ((got, r), h) in read.iter().zip(recs).zip(handles) {
        assert_eq!(
            (got.logical_file, got.ordinal, &got.key, got.seq, &got.value),
            (h.logical_file, h.ordinal, &r.key, r.seq, &r.value)
        );
    }
}

#[test]
fn round_trip_of_mixed_sizes_with_every_codec() {
    let fs = MemFs::new();
    let recs = mixed_records(1, 40);
    for (i, c) in CODECS.into_iter().enumerate() {
        let n = 10 + i as u64;
        let path = path_of(Path::new("/db"), n);
        let (handles, summary) = build(&fs, &path, n, options(c), &recs);

        // Handles: the file's own logical file, ordinals in call order,
        // records back to back.
        let mut offset = 0;
        for (i, h) in handles.iter().enumerate() {
            assert_eq!(
                (h.logical_file, h.ordinal, h.offset),
                (FileNumber(n), i as u64, offset)
            );
            offset += u64::from(h.len);
        }
        let p = &summary.properties;
        assert_eq!(summary.number, FileNumber(n));
        assert_eq!(summary.file_size, fs.file_len(&path).unwrap() as u64);
        assert_eq!(p.num_records, recs.len() as u64);
        assert_eq!(p.record_bytes, offset);
        let raw: usize = recs.iter().map(|r| r.value.len()).sum();
        assert_eq!(p.raw_value_bytes, raw as u64);
        assert_eq!(p.smallest_key, recs[0].key);
        assert_eq!(p.largest_key, recs[recs.len() - 1].key);
        assert_eq!(p.smallest_seq, recs.iter().map(|r| r.seq).min().unwrap());
        assert_eq!(p.largest_seq, recs.iter().map(|r| r.seq).max().unwrap());
        assert_eq!(
            p.hosted,
            vec![HostedFile {
                logical_file: FileNumber(n),
                num_records: recs.len() as u64,
                record_bytes: offset
            }]
        );
        assert_eq!(p.origin, Origin::Flush);
        assert_eq!(p.class, ValueClass::Cold);

        // Compression is per record: compressible 100 KiB values shrink,
        // random ones are stored raw.
        for (r, h) in recs.iter().zip(&handles) {
            let overhead = 4 + 3 + 3 + 8 + r.key.len() as u32;
            if r.value.len() == 100 << 10 {
                let compressible = r.value[..9] == b"abcabcabd"[..];
                if c != Compression::None && compressible {
                    assert!(h.len < 10 << 10, "{c:?}: {} bytes", h.len);
                } else {
                    assert!(h.len >= r.value.len() as u32, "{c:?}");
                    assert!(h.len <= r.value.len() as u32 + overhead);
                }
            }
        }

        let vf = open(&fs, &path, n).unwrap();
        assert_eq!(vf.properties(), p);
        check_all(&vf, &recs, &handles);
        let count = recs.len() as u64;
        assert_eq!(vf.locate(FileNumber(n), count).unwrap(), None);
        assert_eq!(vf.locate(FileNumber(n - 1), 0).unwrap(), None);
        assert_eq!(vf.locate(FileNumber(n + 1), 0).unwrap(), None);
    }
}

#[test]
fn many_small_records_span_several_index_blocks() {
    let fs = MemFs::new();
    let mut rng = StdRng::seed_from_u64(2);
    let recs: Vec<Rec> = (0..5000)
        .map(|i| Rec {
            key: format!("k{i:08}").into_bytes(),
            seq: i + 1,
            value: random_value(&mut rng, 0..40),
        })
        .collect();
    let path = path_of(Path::new("/db"), 3);
    let (handles, _) = build(&fs, &path, 3, options(Compression::None), &recs);
    let vf = open(&fs, &path, 3).unwrap();
    assert!(vf.num_index_blocks() > 3, "{}", vf.num_index_blocks());
    check_all(&vf, &recs, &handles);
    // The index costs a few bytes per record: records one after the other
    // of one logical file cost a head byte and their length (one byte
    // here), plus each group's full first entry and restart.
    let per_record = vf.properties().index_size as f64 / recs.len() as f64;
    assert!(per_record < 3.0, "{per_record} index bytes per record");
}

#[test]
fn moved_records_of_several_logical_files_are_found_through_the_index() {
    let fs = MemFs::new();
    let mut rng = StdRng::seed_from_u64(3);
    // Live records of logical files 7 and 9 (with gaps where records died),
    // written in a shuffled order as GC packing might.
    let mut ids: Vec<(u64, u64)> = (0..1500u64)
        .filter(|o| o % 3 != 1)
        .map(|o| (7, o))
        .chain((0..900).filter(|o| o % 5 != 0).map(|o| (9, o)))
        .collect();
    ids.shuffle(&mut rng);
    let recs: Vec<Rec> = ids
        .iter()
        .map(|&(l, o)| Rec {
            key: format!("l{l}o{o:05}").into_bytes(),
            seq: l * 10_000 + o,
            value: random_value(&mut rng, 0..64),
        })
        .collect();
    let path = path_of(Path::new("/db"), 50);
    fs.create_dir_all(Path::new("/db")).unwrap();
    let mut b = ValueFileBuilder::create(
        &fs,
        path.clone(),
        FileNumber(50),
        ValueFileOptions {
            origin: Origin::Gc,
            class: ValueClass::Hot,
            ..options(Compression::Lz4)
        },
    )
    .unwrap();
    let mut placed = Vec::new();
    for (&(l, o), r) in ids.iter().zip(&recs) {
        placed.push(
            b.add_moved(&moved(l, o, &r.key, r.seq, &r.value, Compression::Lz4))
                .unwrap(),
        );
    }
    let summary = b.finish().unwrap();
    let hosted: Vec<(FileNumber, u64)> = summary
        .properties
        .hosted
        .iter()
        .map(|h| (h.logical_file, h.num_records))
        .collect();
    assert_eq!(hosted, vec![(FileNumber(7), 1000), (FileNumber(9), 720)]);

    let vf = open(&fs, &path, 50).unwrap();
    assert_eq!(vf.properties().origin, Origin::Gc);
    assert_eq!(vf.properties().class, ValueClass::Hot);
    assert!(vf.num_index_blocks() > 1);
    for (r, p) in recs.iter().zip(&placed) {
        assert_eq!(
            vf.locate(p.logical_file, p.ordinal).unwrap(),
            Some((p.offset, p.len))
        );
        // A handle from the birth file: its offset means nothing here.
        let birth = ValueHandle {
            offset: 123_456_789,
            len: 7,
            ..*p
        };
        assert_eq!(vf.read(&birth, &r.key, r.seq).unwrap(), r.value);
    }
    for missing in [
        (7, 1),
        (7, 1498),
        (7, 1500),
        (9, 0),
        (9, 900),
        (8, 0),
        (6, 0),
        (10, 3),
    ] {
        assert_eq!(
            vf.locate(FileNumber(missing.0), missing.1).unwrap(),
            None,
            "{missing:?}"
        );
    }
    let gone = ValueHandle {
        logical_file: FileNumber(7),
        ordinal: 4,
        offset: 0,
        len: 20,
    };
    assert!(matches!(
        vf.read(&gone, b"l7o00004", 70_004),
        Err(Error::Corruption { .. })
    ));
    // Iteration follows file order, that is, write order.
    let got: Vec<(u64, u64)> = vf
        .iter()
        .unwrap()
        .map(|r| r.map(|r| (r.logical_file.0, r.ordinal)).unwrap())
        .collect();
    assert_eq!(got, ids);
}

#[test]
fn handle_round_trips_and_refuses_bad_input() {
    let mut rng = StdRng::seed_from_u64(4);
    let mut handles = vec![
        ValueHandle {
            logical_file: FileNumber(0),
            ordinal: 0,
            offset: 0,
            len: 0,
        },
        ValueHandle {
            logical_file: FileNumber(u64::MAX),
            ordinal: u64::MAX,
            offset: u64::MAX,
            len: u32::MAX,
        },
    ];
    for _ in 0..200 {
        handles.push(ValueHandle {
            logical_file: FileNumber(random_width(&mut rng, 40)),
            ordinal: random_width(&mut rng, 30),
            offset: random_width(&mut rng, 40),
            len: rng.gen(),
        });
    }
    for h in &handles {
        let enc = h.encoded();
        assert!(enc.len() <= handle::MAX_HANDLE_LEN);
        assert_eq!(ValueHandle::decode(&enc), Ok(*h));
        for cut in 0..enc.len() {
            assert!(ValueHandle::decode(&enc[..cut]).is_err(), "{h:?} cut {cut}");
        }
        let mut long = enc.clone();
        long.push(0);
        assert!(ValueHandle::decode(&long).is_err());
        // `decode_from` leaves the cursor after the handle.
        let mut d = Decoder::new(&long);
        assert_eq!(ValueHandle::decode_from(&mut d), Ok(*h));
        assert_eq!(d.remaining(), 1);
    }
    // A length over 32 bits and an 11-byte varint.
    let mut bad = vec![1, 2, 3];
    bad.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10]);
    assert!(ValueHandle::decode(&bad).is_err());
    assert!(ValueHandle::decode(&[0xff; 11]).is_err());
    assert!(ValueHandle::decode(&[]).is_err());
    // Random bytes never panic.
    for _ in 0..2000 {
        let len = rng.gen_range(0..20);
        let _ = ValueHandle::decode(&random_bytes(&mut rng, len));
    }
}

/// Every operation on a file with one byte flipped either fails with
/// `Corruption` or returns exactly what was written; and some operation
/// fails, so no byte is outside every checksum.
#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    let mut rng = StdRng::seed_from_u64(5);
    let recs = vec![
        Rec {
            key: b"a".to_vec(),
            seq: 5,
            value: Vec::new(),
        },
        Rec {
            key: b"bb".to_vec(),
            seq: 9,
            value: vec![7],
        },
        Rec {
            key: b"ccc".to_vec(),
            seq: 1 << 40,
            value: b"xyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyz".to_vec(),
        },
        Rec {
            key: Vec::new(),
            seq: MAX_SEQ,
            value: random_bytes(&mut rng, 30),
        },
    ];
    for (i, c) in CODECS.into_iter().enumerate() {
        let fs = MemFs::new();
        let n = 20 + i as u64;
        let path = path_of(Path::new("/db"), n);
        let (handles, summary) = build(&fs, &path, n, options(c), &recs);
        for at in 0..summary.file_size as usize {
            assert!(fs.corrupt_byte(&path, at));
            let detected = check_damaged(&fs, &path, n, &recs, &handles);
            assert!(
                detected,
                "{c:?}: flip at {at} of {} went unnoticed",
                summary.file_size
            );
            // corrupt_byte xors, so a second call restores the byte.
            fs.corrupt_byte(&path, at);
        }
        check_all(&open(&fs, &path, n).unwrap(), &recs, &handles);
    }
}

/// Runs every reader operation; panics on a wrong answer or a non-corruption
/// error; returns whether any operation reported corruption.
fn check_damaged(fs: &MemFs, path: &Path, n: u64, recs: &[Rec], handles: &[ValueHandle]) -> bool {
    let ok_or_corrupt = |e: Error| {
        assert!(e.is_corruption(), "{e}");
        if let Error::Corruption { file, .. } = &e {
            assert_eq!(file, path);
        }
    };
    let vf = match open(fs, path, n) {
        Ok(vf) => vf,
        Err(e) => {
            ok_or_corrupt(e);
            return true;
        }
    };
    let mut detected = false;
    for (r, h) in recs.iter().zip(handles) {
        match vf.read(h, &r.key, r.seq) {
            Ok(v) => assert_eq!(v, r.value),
            Err(e) => {
                ok_or_corrupt(e);
                detected = true;
            }
        }
        match vf.locate(h.logical_file, h.ordinal) {
            Ok(loc) => assert_eq!(loc, Some((h.offset, h.len))),
            Err(e) => {
                ok_or_corrupt(e);
                detected = true;
            }
        }
    }
    match vf.iter() {
        Ok(it) => {
            for (got, (r, h)) in it.zip(recs.iter().zip(handles)) {
                match got {
                    Ok(got) => assert_eq!(
                        (got.logical_file, got.ordinal, got.key, got.seq, got.value),
                        (
                            h.logical_file,
                            h.ordinal,
                            r.key.clone(),
                            r.seq,
                            r.value.clone()
                        )
                    ),
                    Err(e) => {
                        ok_or_corrupt(e);
                        detected = true;
                    }
                }
            }
        }
        Err(e) => {
            ok_or_corrupt(e);
            detected = true;
        }
    }
    detected
}

#[test]
fn truncated_file_is_corruption_naming_the_file() {
    let fs = MemFs::new();
    let recs = mixed_records(6, 8);
    let path = path_of(Path::new("/db"), 30);
    let (_, summary) = build(&fs, &path, 30, options(Compression::None), &recs);
    let len = summary.file_size as usize;
    let records_end = summary.properties.record_bytes as usize;
    for cut in [
        len - 1,
        len - FOOTER_LEN,
        len / 2,
        records_end,
        FOOTER_LEN,
        1,
        0,
    ] {
        let copy = path_of(Path::new("/db"), 31);
        let bytes = crate::vfs::read_all(&fs, &path).unwrap();
        let mut f = fs.create(&copy, FileOptions::default()).unwrap();
        f.append(&bytes).unwrap();
        drop(f);
        fs.truncate(&copy, cut);
        match open(&fs, &copy, 31) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, copy, "cut at {cut}"),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn wrong_key_seq_or_place_is_corruption() {
    let fs = MemFs::new();
    let recs = mixed_records(7, 8);
    let path = path_of(Path::new("/db"), 40);
    let (handles, summary) = build(&fs, &path, 40, options(Compression::Lz4), &recs);
    let vf = open(&fs, &path, 40).unwrap();
    let (r, h) = (&recs[2], handles[2]);
    let is_corruption_at = |res: crate::Result<Vec<u8>>, offset: u64| match res {
        Err(Error::Corruption {
            file, offset: o, ..
        }) => {
            assert_eq!(file, path);
            assert_eq!(o, offset);
        }
        other => panic!("{other:?}"),
    };
    is_corruption_at(vf.read(&h, b"key000003", r.seq), h.offset);
    is_corruption_at(vf.read(&h, &r.key, r.seq + 1), h.offset);
    // A handle pointing at another record, or at a part of one.
    let other = ValueHandle {
        offset: handles[3].offset,
        len: handles[3].len,
        ..h
    };
    is_corruption_at(vf.read(&other, &r.key, r.seq), handles[3].offset);
    let short = ValueHandle {
        len: h.len - 1,
        ..h
    };
    is_corruption_at(vf.read(&short, &r.key, r.seq), h.offset);
    let beyond = ValueHandle {
        offset: summary.properties.record_bytes - 10,
        len: 20,
        ..h
    };
    is_corruption_at(vf.read(&beyond, &r.key, r.seq), beyond.offset);
    let overflow = ValueHandle {
        offset: u64::MAX - 3,
        ..h
    };
    is_corruption_at(vf.read(&overflow, &r.key, r.seq), overflow.offset);
    assert_eq!(vf.read(&h, &r.key, r.seq).unwrap(), r.value);
}

#[test]
fn another_format_version_is_reported_as_such() {
    let fs = MemFs::new();
    let path = path_of(Path::new("/db"), 41);
    let (_, summary) = build(
        &fs,
        &path,
        41,
        options(Compression::None),
        &mixed_records(8, 3),
    );
    // The version is the fixed32 at byte 40 of the footer.
    let at = summary.file_size as usize - FOOTER_LEN + 40;
    assert!(fs.corrupt_byte(&path, at));
    match open(&fs, &path, 41) {
        Err(Error::UnsupportedFormatVersion {
            file,
            found,
            supported,
        }) => {
            assert_eq!(file, path);
            assert!(found > 2, "{found}");
            assert_eq!(supported, 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_append_or_sync_is_an_io_error_naming_the_file() {
    let recs = mixed_records(9, 4);
    let dir = Path::new("/db");
    // Each record is three appends; the index, properties and footer follow.
    for (op, skip) in [
        (FaultOp::Append, 0),
        (FaultOp::Append, 4),
        (FaultOp::Append, 3 * recs.len() as u64),
        (FaultOp::Append, 3 * recs.len() as u64 + 3),
        (FaultOp::Sync, 0),
        (FaultOp::Create, 0),
    ] {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        fs.create_dir_all(dir).unwrap();
        let path = path_of(dir, 60);
        fs.fail(&[op], Some("000060.vf"), skip, ErrorKind::Other, false);
        let result = ValueFileBuilder::create(
            &fs,
            path.clone(),
            FileNumber(60),
            options(Compression::None),
        )
        .and_then(|mut b| {
            for r in &recs {
                if let Err(e) = b.add(&r.key, r.seq, &r.value) {
                    // A builder that failed refuses further use.
                    assert!(matches!(
                        b.add(&r.key, r.seq, &r.value),
                        Err(Error::InvalidArgument(_))
                    ));
                    return Err(e);
                }
            }
            b.finish()
        });
        match result {
            Err(Error::Io { path: p, .. }) => assert_eq!(p, path, "{op:?} {skip}"),
            other => panic!("{op:?} {skip}: {other:?}"),
        }
        assert_eq!(fs.injected(), 1);
    }
}

#[test]
fn limits_and_empty_files_are_refused() {
    let fs = MemFs::new();
    let path = path_of(Path::new("/db"), 70);
    fs.create_dir_all(Path::new("/db")).unwrap();
    let mut b = ValueFileBuilder::create(
        &fs,
        path.clone(),
        FileNumber(70),
        options(Compression::None),
    )
    .unwrap();
    let big_key = vec![0u8; MAX_KEY_SIZE + 1];
    assert!(matches!(
        b.add(&big_key, 1, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.add(b"k", MAX_SEQ + 1, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(b.file_size(), 0, "a refused record wrote bytes");
    assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));

    // Adding the same id twice is refused at finish.
    let mut b = ValueFileBuilder::create(
        &fs,
        path.clone(),
        FileNumber(70),
        options(Compression::None),
    )
    .unwrap();
    b.add_moved(&moved(3, 1, b"a", 1, b"x", Compression::None))
        .unwrap();
    b.add_moved(&moved(3, 1, b"b", 2, b"y", Compression::None))
        .unwrap();
    assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));
}

#[test]
fn direct_writes_on_a_real_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let fs = OsFs::new();
    let recs = mixed_records(10, 12);
    let path = path_of(dir.path(), 80);
    let opts = ValueFileOptions {
        direct_writes: true,
        ..options(Compression::Zstd)
    };
    let (handles, summary) = build(&fs, &path, 80, opts, &recs);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), summary.file_size);
    let vf = ValueFile::open(
        &fs,
        path.clone(),
        FileNumber(80),
        FileOptions { direct: true },
        None,
    )
    .unwrap();
    check_all(&vf, &recs, &handles);
}

/// Value file 7 of 100 records of 1,000-byte values (`key000`...), for the
/// tests that count the reads of live runs.
fn file_of_100_records(fs: &dyn Fs) -> (Vec<Rec>, Vec<ValueHandle>, ValueFile) {
    let path = PathBuf::from("/v/000007.vf");
    let recs: Vec<Rec> = (0..100)
        .map(|i| Rec {
            key: format!("key{i:03}").into_bytes(),
            seq: i + 1,
            value: vec![b'v'; 1000],
        })
        .collect();
    let (handles, _) = build(fs, &path, 7, ValueFileOptions::default(), &recs);
    let vf = open(fs, &path, 7).unwrap();
    (recs, handles, vf)
}

/// Iterating live records reads each run of adjacent live records once and
/// never a dead record: 11 adjacent live records cost one read, 25
/// scattered ones a read each.
#[test]
fn iter_live_reads_only_live_runs() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let (recs, handles, vf) = file_of_100_records(&fault);
    let live = |_: FileNumber, ordinal: u64| {
        (10..=20).contains(&ordinal) || (ordinal >= 50 && ordinal.is_multiple_of(2))
    };
    // The index is read by `iter_live` itself; count the record reads.
    let it = vf.iter_live(&live).unwrap();
    let before = fault.count(FaultOp::Read);
    let got: Vec<ValueRecord> = it.map(Result::unwrap).collect();
    let reads = fault.count(FaultOp::Read) - before;
    let expected: Vec<u64> = (0..100).filter(|&o| live(FileNumber(7), o)).collect();
    assert_eq!(got.iter().map(|r| r.ordinal).collect::<Vec<_>>(), expected);
    for r in &got {
        let i = r.ordinal as usize;
        assert_eq!(
            (&r.key, r.seq, &r.value),
            (&recs[i].key, recs[i].seq, &recs[i].value)
        );
        assert_eq!(r.logical_file, handles[i].logical_file);
    }
    assert_eq!(reads, 1 + 25);
}

/// GC's runs read through small gaps: records a few hundred bytes apart
/// share one read, which yields only the selected ones; a gap wider than
/// the bound starts a new read.
#[test]
fn live_runs_read_through_small_gaps_only() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let (recs, handles, vf) = file_of_100_records(&fault);
    // Every other record from 30 to 40, and 60: one dead record (about
    // 1 KiB) between each of the first, 19 before the last.
    let live = |_: FileNumber, ordinal: u64| {
        ((30..=40).contains(&ordinal) && ordinal.is_multiple_of(2)) || ordinal == 60
    };
    let ordinals = |runs: &[Vec<IndexEntry>]| -> Vec<Vec<u64>> {
        runs.iter()
            .map(|r| r.iter().map(|e| e.ordinal).collect())
            .collect()
    };
    let apart = vf.live_runs(&live, 0).unwrap();
    assert_eq!(apart.len(), 7);
    let runs = vf.live_runs(&live, 4 << 10).unwrap();
    assert_eq!(
        ordinals(&runs),
        vec![vec![30, 32, 34, 36, 38, 40], vec![60]]
    );
    let before = fault.count(FaultOp::Read);
    let mut got = Vec::new();
    for run in &runs {
        got.extend(vf.read_run(run).unwrap());
    }
    assert_eq!(fault.count(FaultOp::Read) - before, 2);
    let expected: Vec<u64> = (0..100).filter(|&o| live(FileNumber(7), o)).collect();
    assert_eq!(got.iter().map(|r| r.ordinal).collect::<Vec<_>>(), expected);
    for r in &got {
        let i = r.ordinal as usize;
        assert_eq!((&r.key, &r.value), (&recs[i].key, &recs[i].value));
        assert_eq!(r.logical_file, handles[i].logical_file);
        assert_eq!(r.raw.len(), handles[i].len as usize);
    }
}

/// `testdata/v1_gc_output.vf`, written by the version-1 builder (commit
/// 8bc07f0) as a GC output hosting logical files 9, 3 and 5 in that order,
/// lz4, record index blocks cut at 300 bytes, records as the two functions
/// below say, physical file 40.
const V1_FIXTURE: &[u8] = include_bytes!("testdata/v1_gc_output.vf");

/// The records of the version-1 fixture: (logical file, ordinal) in the
/// order they were written.
fn v1_fixture_ids() -> Vec<(u64, u64)> {
    let mut ids = Vec::new();
    // Logical files written out of number order, ordinals with gaps.
    for logical in [9u64, 3, 5] {
        for ordinal in (0..300u64).filter(|o| o % 3 != 1 || logical == 5) {
            ids.push((logical, ordinal));
        }
    }
    ids
}

fn v1_fixture_record(logical: u64, ordinal: u64) -> (Vec<u8>, SeqNo, Vec<u8>) {
    let key = format!("k{logical:02}-{ordinal:04}").into_bytes();
    let value = format!("v{logical}.{ordinal}.")
        .repeat(1 + (ordinal % 7) as usize)
        .into_bytes();
    (key, logical * 1000 + ordinal, value)
}

/// A file written before the record index was searched in place still
/// opens, finds every record through its index (the blocks are converted
/// when read, and the cache holds them converted), iterates and verifies.
#[test]
fn version_1_files_still_open_and_find_every_record() {
    let fs = MemFs::new();
    let path = path_of(Path::new("/db"), 40);
    fs.create_dir_all(Path::new("/db")).unwrap();
    let mut w = fs.create(&path, FileOptions::default()).unwrap();
    w.append(V1_FIXTURE).unwrap();
    w.sync().unwrap();
    drop(w);
    let cache = Arc::new(crate::cache::new_block_cache(1 << 20));
    let vf = ValueFile::open(
        &fs,
        path.clone(),
        FileNumber(40),
        FileOptions::default(),
        Some(cache.clone()),
    )
    .unwrap();
    assert_eq!(vf.properties().format_version, 1);
    assert!(vf.num_index_blocks() > 5, "{}", vf.num_index_blocks());
    vf.verify().unwrap();
    let ids = v1_fixture_ids();
    let mut offset = 0;
    let mut in_file_order = Vec::new();
    for &(logical, ordinal) in &ids {
        let (key, seq, value) = v1_fixture_record(logical, ordinal);
        let (at, len) = vf.locate(FileNumber(logical), ordinal).unwrap().unwrap();
        assert_eq!(at, offset, "record ({logical}, {ordinal})");
        offset += u64::from(len);
        assert_eq!(vf.read_placed(at, len, &key, seq).unwrap(), value);
        assert_eq!(vf.locate(FileNumber(logical), ordinal + 300).unwrap(), None);
        in_file_order.push((logical, ordinal, key, seq, value));
    }
    assert_eq!(vf.locate(FileNumber(4), 0).unwrap(), None);
    assert_eq!(vf.locate(FileNumber(3), 1).unwrap(), None);
    // Every block is in the cache now, converted: a second pass finds
    // each record there.
    let hits = cache.hits();
    for &(logical, ordinal) in &ids {
        assert!(vf.locate(FileNumber(logical), ordinal).unwrap().is_some());
    }
    assert_eq!(cache.hits() - hits, ids.len() as u64);
    let got: Vec<_> = vf
        .iter()
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.logical_file.0, r.ordinal, r.key, r.seq, r.value)
        })
        .collect();
    assert_eq!(got, in_file_order);
}

/// A value file whose builder warmed the cache finds moved records through
/// its record index without reading a block of it.
#[test]
fn warmed_record_index_blocks_serve_the_first_lookups() {
    use crate::cache::CacheKind;
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let path = path_of(Path::new("/db"), 60);
    let cache = Arc::new(crate::cache::new_block_cache(1 << 20));
    let mut b = ValueFileBuilder::create(
        &fs,
        path.clone(),
        FileNumber(60),
        options(Compression::None),
    )
    .unwrap();
    b.warm_cache(cache.clone());
    let ids: Vec<(u64, u64)> = (0..3000u64)
        .filter(|o| o % 4 != 0)
        .map(|o| (8, o))
        .collect();
    for &(l, o) in &ids {
        let key = format!("k{o:05}").into_bytes();
        b.add_moved(&moved(l, o, &key, o + 1, b"v", Compression::None))
            .unwrap();
    }
    b.finish().unwrap();
    let vf = ValueFile::open(
        &fs,
        path,
        FileNumber(60),
        FileOptions::default(),
        Some(cache.clone()),
    )
    .unwrap();
    assert!(vf.num_index_blocks() > 1);
    for &(l, o) in &ids {
        assert!(vf.locate(FileNumber(l), o).unwrap().is_some());
    }
    let stats = cache.class_stats(CacheKind::RecordIndex as usize);
    assert_eq!(stats.misses, 0);
    assert_eq!(stats.hits, ids.len() as u64);
}
