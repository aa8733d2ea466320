//! What the integration tests share: small-file options and entry
//! builders.
#![allow(dead_code)]

use cleave::log_store::LogOptions;
use cleave_raft::{Entry, LogId, Request};
use openraft::{CommittedLeaderId, EntryPayload};

/// Small data files, so that tests seal, release and recycle them, and
/// don't preallocate the default 256 MiB per store.
pub fn log_options() -> LogOptions {
    LogOptions {
        create_if_missing: true,
        data_file_bytes: 256 << 10,
        meta_file_bytes: 64 << 10,
        index_memory_bytes: 16 << 10,
        checkpoint_bytes: 32 << 10,
        ..LogOptions::default()
    }
}

pub fn db_options() -> cleave::Options {
    cleave::Options {
        create_if_missing: true,
        write_buffer_size: 1 << 20,
        ..cleave::Options::default()
    }
}

pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// The key of entry `index`: 23 keys, so later entries overwrite and
/// delete what earlier ones set.
pub fn key(index: u64) -> Vec<u8> {
    format!("key{:02}", index % 23).into_bytes()
}

/// A value of 10 to 2,000 bytes, different for each index and term.
pub fn value(index: u64, term: u64) -> Vec<u8> {
    let stem = format!("v{index}t{term}-");
    let len = 10 + (index * 131 + term * 17) % 1990;
    stem.bytes().cycle().take(len as usize).collect()
}

/// The entry every test writes at `index` in `term`: a set, or every
/// fifth index a delete.
pub fn request(index: u64, term: u64) -> Request {
    if index % 5 == 0 {
        Request::Delete { key: key(index) }
    } else {
        Request::Set {
            key: key(index),
            value: value(index, term),
        }
    }
}

pub fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(request(index, term)),
    }
}
