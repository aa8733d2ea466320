//! The format of a cluster member's small files (`NODE`, `DB`, a
//! snapshot's `meta`; docs/format/server.md): an 8-byte magic, a format
//! version (u32), the body, and a CRC-32C of everything before it (u32),
//! little-endian. Decoding needs no server, so the fuzz targets build it.

/// Version of the small files' format; written to disk, do not change.
const SMALL_FILE_VERSION: u32 = 1;
/// `NODE`: the member's id, decimal.
pub const NODE_MAGIC: &[u8; 8] = b"cleaveNI";
/// `DB`: the live database directory's name.
pub const DB_MAGIC: &[u8; 8] = b"cleaveDB";
/// A snapshot's `meta`: openraft's snapshot meta, JSON.
pub const META_MAGIC: &[u8; 8] = b"cleaveSM";

/// Encodes a small file's bytes.
pub fn encode_small_file(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 + body.len() + 4);
    out.extend_from_slice(magic);
    out.extend_from_slice(&SMALL_FILE_VERSION.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32c::crc32c(&out).to_le_bytes());
    out
}

/// The body of a small file's bytes, checked.
pub fn decode_small_file<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < 8 + 4 + 4 {
        return Err(format!("{} bytes, shorter than a header", bytes.len()));
    }
    let (data, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(data).to_le_bytes() != crc {
        return Err("checksum mismatch".into());
    }
    if &data[..8] != magic {
        return Err("not the file expected here".into());
    }
    let version = u32::from_le_bytes([data[8], data[9], data[10], data[11]]);
    if version != SMALL_FILE_VERSION {
        return Err(format!(
            "format version {version}, this build reads {SMALL_FILE_VERSION}"
        ));
    }
    Ok(&data[12..])
}
