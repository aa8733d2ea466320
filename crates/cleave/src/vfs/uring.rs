//! [`OsFs`](super::OsFs)'s batched reads through io_uring: the reads of a
//! batch are submitted together and waited for together, from the calling
//! thread, so a batch of independent reads costs about one device latency
//! and no thread.
//!
//! Each thread has its own ring, opened at its first batch: a ring is
//! single-producer, and one per thread needs no lock. A read's buffer must
//! outlive the kernel's use of it, so when waiting fails with reads still
//! in flight, their buffers are leaked rather than freed, and the thread
//! drops its ring and reads with `pread` from then on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::OnceLock;

use io_uring::{opcode, types, IoUring, Probe};

use super::os::BatchRead;

/// Entries of each thread's ring: reads in flight at once from one thread.
/// A scan's prefetch (at most 64 entries' records) goes in one submission;
/// a larger batch keeps this many in flight, submitting the next read as
/// an earlier one completes.
pub(super) const RING_DEPTH: u32 = 64;

/// Most bytes one submitted read asks for; a longer request continues as
/// after a short read. A multiple of `O_DIRECT`'s alignment, and below
/// Linux's limit per call (2 GiB less a page).
#[cfg(not(test))]
const MAX_READ_BYTES: usize = 1 << 30;
/// Small in tests, so that their reads continue after short reads.
#[cfg(test)]
const MAX_READ_BYTES: usize = 8 << 10;
const _: () = assert!(MAX_READ_BYTES <= u32::MAX as usize);

/// 0: io_uring allowed; 1: only for a chosen group; 2: disabled.
const DISABLED_SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Whether this process can read through io_uring; probed once.
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(probe)
}

fn probe() -> bool {
    // Ring creation would fail with EPERM; the setting says so without
    // the attempt.
    if std::fs::read_to_string(DISABLED_SYSCTL).is_ok_and(|s| s.trim() == "2") {
        return false;
    }
    // ENOSYS (a kernel before 5.1, or a seccomp filter such as a
    // container's), EPERM (disabled for this group), ENOMEM.
    let Ok(ring) = IoUring::new(RING_DEPTH) else {
        return false;
    };
    // IORING_OP_READ came in 5.6, with the probe itself.
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).is_ok() && probe.is_supported(opcode::Read::CODE)
}

enum Ring {
    Unopened,
    /// Boxed: a ring's handle is a few hundred bytes, the other states none.
    Open(Box<IoUring>),
    /// Could not be opened, or failed with reads in flight: this thread
    /// reads with `pread`.
    Broken,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Unopened) };
}

#[cfg(test)]
thread_local! {
    /// Test hook: this thread's next wait submits its reads, then fails as
    /// an unknown error of `io_uring_enter` would, leaving them in flight.
    static FAIL_NEXT_WAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes this thread's next wait fail with its reads in flight.
#[cfg(test)]
pub(super) fn fail_next_wait() {
    FAIL_NEXT_WAIT.set(true);
}

/// The state of this thread's ring: "unopened", "open" or "broken".
#[cfg(test)]
pub(super) fn thread_ring() -> &'static str {
    RING.with_borrow(|ring| match ring {
        Ring::Unopened => "unopened",
        Ring::Open(_) => "open",
        Ring::Broken => "broken",
    })
}

/// Reads `reads` through this thread's ring. A read it does not finish (no
/// ring in this thread, a ring that failed, a read the kernel asks to
/// retry) is left without a result, for the caller to read with `pread`.
pub(super) fn read(reads: &mut [&mut BatchRead<'_>], in_flight: usize) {
    // A thread that is exiting has no ring left: `pread`.
    let _ = RING.try_with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else {
            return;
        };
        // Marked broken while in use: a ring left with reads in flight
        // (an error, or a panic unwinding through here) could hand their
        // late completions to a later batch; it is dropped instead, which
        // lets the kernel clean up, and their buffers are leaked.
        let mut ring = match std::mem::replace(&mut *slot, Ring::Broken) {
            Ring::Open(ring) => ring,
            Ring::Unopened => match IoUring::new(RING_DEPTH) {
                Ok(ring) => Box::new(ring),
                Err(_) => return,
            },
            Ring::Broken => return,
        };
        if run(&mut ring, reads, in_flight).is_ok() {
            *slot = Ring::Open(ring);
        }
    });
}

/// The reads of a batch, and which of them the kernel may be writing
/// into: submitted, their completion not yet reaped. Dropped with any in
/// flight (a failed wait, or a panic), it leaks their buffers.
struct InFlight<'r, 'm, 'a> {
    reads: &'r mut [&'m mut BatchRead<'a>],
    flying: Vec<bool>,
    count: usize,
}

impl Drop for InFlight<'_, '_, '_> {
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        for (read, &flying) in self.reads.iter_mut().zip(&self.flying) {
            if flying {
                read.leak();
            }
        }
    }
}

/// Keeps up to `RING_DEPTH` reads in flight until every read has an
/// answer. An error means completions are unknown: the buffers in flight
/// were leaked, and the ring must not be used again.
fn run(
    ring: &mut IoUring,
    reads: &mut [&mut BatchRead<'_>],
    in_flight: usize,
) -> std::io::Result<()> {
    let n = reads.len();
    let depth = in_flight.clamp(1, RING_DEPTH as usize);
    let mut flight = InFlight {
        reads,
        flying: vec![false; n],
        count: 0,
    };
    // Reads to submit: each once, then again after a short read.
    let mut queue: VecDeque<usize> = (0..n).collect();
    loop {
        while flight.count < depth {
            let Some(&i) = queue.front() else {
                break;
            };
            let Some(read) = flight.reads.get_mut(i) else {
                queue.pop_front();
                continue;
            };
            let Some((buf, len, offset)) = read.next_read(MAX_READ_BYTES) else {
                queue.pop_front();
                continue;
            };
            // At most MAX_READ_BYTES, which fits.
            let entry = opcode::Read::new(types::Fd(read.fd()), buf, len as u32)
                .offset(offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the entry points at `len` bytes of a buffer that
            // `read` owns on the heap, which nothing reads, moves or frees
            // until this entry's completion is reaped below (if this
            // function returns first, `InFlight` leaks it), and at a
            // descriptor `read` borrows open for the whole batch; once
            // submitted, the kernel holds its own reference to the file,
            // and an entry never submitted dies with the ring.
            if unsafe { ring.submission().push(&entry) }.is_err() {
                break;
            }
            queue.pop_front();
            flight.flying[i] = true;
            flight.count += 1;
        }
        if flight.count == 0 {
            // Every read answered, or none could be queued: the caller
            // reads what is left with `pread`.
            return Ok(());
        }
        #[cfg(test)]
        if FAIL_NEXT_WAIT.replace(false) {
            ring.submit()?;
            return Err(std::io::Error::other("injected failure of the wait"));
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            // A signal: the entries not yet taken stay queued, and the
            // next call submits them.
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let Some(i) = usize::try_from(cqe.user_data()).ok().filter(|&i| i < n) else {
                continue;
            };
            if !std::mem::take(&mut flight.flying[i]) {
                continue;
            }
            flight.count -= 1;
            if flight.reads[i].completed(cqe.result()) {
                queue.push_back(i);
            }
        }
    }
}
