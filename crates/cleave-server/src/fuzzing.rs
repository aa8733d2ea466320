//! Entry points of the fuzz targets `resp_request`, `server_meta` and
//! `cluster_frames` (fuzz/), and a test that runs their checked-in
//! corpora.

use crate::frame::{self, HEADER_BYTES};
use crate::keyspace::Meta;
use crate::resp::parse_request;
use crate::small_file::{decode_small_file, encode_small_file, DB_MAGIC, META_MAGIC, NODE_MAGIC};

/// Longest bulk string the target allows, small so that lengths near it
/// are reached.
const FUZZ_MAX_BULK: u64 = 1 << 10;

/// Parses requests from `data` as a connection does, one after another:
/// never a panic, never more bytes taken than given, and every request's
/// arguments within the bulk limit.
pub fn resp_request(data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        match parse_request(&data[at..], FUZZ_MAX_BULK) {
            Ok(Some((args, used))) => {
                assert!(used > 0 && at + used <= data.len());
                assert!(args
                    .iter()
                    .all(|a| a.len() as u64 <= FUZZ_MAX_BULK.max(64 << 10)));
                at += used;
            }
            Ok(None) | Err(_) => return,
        }
    }
}

/// Decodes a metadata value: an error or a value that encodes back to
/// bytes that decode to it again.
pub fn server_meta(data: &[u8]) {
    if let Ok((meta, expire)) = Meta::decode_with_expire(data.to_vec()) {
        assert_eq!(
            Meta::decode_with_expire(meta.encode(expire)),
            Ok((meta, expire))
        );
    }
}

/// Decodes the Raft transport's frames from `data` as a connection reads
/// them, and `data` as each of a member's small files: never a panic, a
/// frame's body inside the input and re-encoding to the same bytes, a
/// small file's body re-encoding to the input.
pub fn cluster_frames(data: &[u8]) {
    let mut at = 0;
    for decoded in frame::decode_all(data) {
        let Ok((kind, body)) = decoded else {
            break;
        };
        let mut again = Vec::new();
        assert!(
            frame::encode(kind, body, &mut again).is_ok(),
            "a decoded body encodes"
        );
        assert_eq!(again, data[at..at + HEADER_BYTES + body.len()]);
        at += HEADER_BYTES + body.len();
    }
    for magic in [NODE_MAGIC, DB_MAGIC, META_MAGIC] {
        if let Ok(body) = decode_small_file(magic, data) {
            assert_eq!(encode_small_file(magic, body), data);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every checked-in input of both targets, as the fuzzer would run it.
    #[test]
    fn the_corpora_run_clean() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        for (target, run) in [
            ("resp_request", super::resp_request as fn(&[u8])),
            ("server_meta", super::server_meta),
            ("cluster_frames", super::cluster_frames),
        ] {
            let dir = root.join(target);
            let mut n = 0;
            for entry in std::fs::read_dir(&dir).unwrap() {
                run(&std::fs::read(entry.unwrap().path()).unwrap());
                n += 1;
            }
            assert!(n > 0, "no seeds in {}", dir.display());
        }
    }
}
