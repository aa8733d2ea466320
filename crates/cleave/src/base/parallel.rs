//! Independent reads issued from several threads at once: a device with
//! a deep queue (NVMe) serves many small random reads in about the time of
//! one, so one thread reading them in turn wastes most of it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Calls `f(0)`, …, `f(n - 1)`, each once, from the calling thread and up
/// to `threads - 1` scoped helpers, which take the next index as they
/// finish the last; returns when all calls have. A helper that cannot be
/// started is done without: the others take its share.
pub(crate) fn for_each_index(n: usize, threads: usize, f: &(dyn Fn(usize) + Sync)) {
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        f(i);
    };
    if n <= 1 || threads <= 1 {
        work();
        return;
    }
    std::thread::scope(|s| {
        for _ in 1..threads.min(n) {
            let _ = std::thread::Builder::new().spawn_scoped(s, work);
        }
        work();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn every_index_exactly_once() {
        for (n, threads) in [(0, 4), (1, 4), (5, 1), (100, 8), (3, 8)] {
            let seen = Mutex::new(vec![0u32; n]);
            for_each_index(n, threads, &|i| seen.lock()[i] += 1);
            assert!(seen.into_inner().iter().all(|&c| c == 1), "{n} {threads}");
        }
    }
}
