//! Write failures of the writer thread (`engine.rs`): a full disk, which the writer recovers
//! from by reopening once space is freed, told apart from every other failure, which poisons
//! the store; and the incompressible bytes of the probe that proves space is back.

/// Why a batch could not be written.
pub(crate) enum Failure {
    /// The disk (or the user's quota, or the file-size limit) is full: the write was refused,
    /// no sync failed. Recoverable by reopening once space is freed.
    Full(String),
    /// Anything else, a failed sync above all: poisoned until restart.
    Fatal(String),
}

impl Failure {
    pub(crate) fn of_io(doing: &str, e: std::io::Error) -> Failure {
        if is_storage_full(&e) {
            Failure::Full(format!("{doing}: {e}"))
        } else {
            Failure::Fatal(format!("{doing}: {e}"))
        }
    }

    pub(crate) fn of_write(doing: &str, e: fjall::Error) -> Failure {
        if is_storage_full(&e) {
            Failure::Full(format!("{doing}: {e}"))
        } else {
            Failure::Fatal(format!("{doing}: {e}"))
        }
    }
}

/// Whether an error is an I/O error saying the disk, quota or file-size limit is exhausted.
fn is_storage_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
            return matches!(io.kind(), StorageFull | QuotaExceeded | FileTooLarge);
        }
        cause = e.source();
    }
    false
}

/// `len` bytes that fjall's journal compression (lz4, for values from 4 KiB) cannot shrink, so
/// that a probe takes on disk the room it claims to prove.
pub(crate) fn incompressible(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            // xorshift64: fast, and without repeats lz4 could find at this length.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart_from_other_write_errors() {
        use std::io::{Error, ErrorKind};
        for kind in [ErrorKind::StorageFull, ErrorKind::QuotaExceeded, ErrorKind::FileTooLarge] {
            assert!(
                matches!(Failure::of_write("w", fjall::Error::Io(Error::from(kind))), Failure::Full(_)),
                "{kind:?}"
            );
        }
        // ENOSPC as the OS reports it.
        assert!(matches!(Failure::of_write("w", fjall::Error::Io(Error::from_raw_os_error(28))), Failure::Full(_)));
        for e in [fjall::Error::Io(Error::other("EIO")), fjall::Error::Poisoned] {
            assert!(matches!(Failure::of_write("w", e), Failure::Fatal(_)));
        }
    }
}
