//! CRC32C, masked as LevelDB does so that a checksum stored inside checksummed
//! data does not make the outer checksum trivially predictable.

const MASK_DELTA: u32 = 0xa282_ead8;

pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

pub(crate) fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

pub(crate) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

#[cfg(test)]
pub(crate) fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// Whether `stored`, a masked checksum as read, is that of data whose
/// CRC32C is `crc`. Every checksum read from disk is checked here.
pub(crate) fn matches(crc: u32, stored: u32) -> bool {
    #[cfg(feature = "fuzzing")]
    if IGNORE_CHECKSUMS.with(std::cell::Cell::get) {
        return true;
    }
    mask(crc) == stored
}

#[cfg(feature = "fuzzing")]
thread_local! {
    /// Set by the fuzz targets (`crate::fuzzing`) on their thread: every
    /// checksum then matches, so that a fuzzer explores the decoding behind
    /// them, which must stand bytes a writer's bug could checksum.
    pub(crate) static IGNORE_CHECKSUMS: std::cell::Cell<bool> = const {
        std::cell::Cell::new(false)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_round_trips_and_changes_value() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask(mask(crc)), crc);
            assert!(matches(crc, mask(crc)));
            assert!(!matches(crc, mask(crc) ^ 1));
            assert_ne!(mask(crc), crc);
        }
    }

    #[test]
    fn extend_equals_whole() {
        let whole = crc32c(b"hello world");
        assert_eq!(crc32c_extend(crc32c(b"hello "), b"world"), whole);
    }
}
