//! The process allocator: jemalloc, set up to hand freed memory back while the exporter idles.
//!
//! The initial list and every relist allocate far more than the index keeps. jemalloc purges
//! freed pages as part of later allocations, so an exporter that went quiet after its sync kept
//! the list's peak for good (40 MiB at 20,000 pods against 26 MiB for the same index built
//! incrementally). A background thread runs the purge on a timer instead, and each completed
//! list purges at once (`purge`): the faster a list is read, the more of its garbage the timer
//! would still hold when the watcher reports the cache synced.
//!
//! The index's largest arrays take huge pages of their own (`HugePages`).

mod huge_pages;

pub use huge_pages::{HUGE_PAGE, HugePages};

/// Every binary and bench linking this library gets the same allocator and settings.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc reads this at start-up (tikv-jemalloc-sys prefixes its symbols with `_rjem_`;
/// `_RJEM_MALLOC_CONF` in the environment still overrides it):
/// - `background_thread`: purge on a timer, not only inside allocations;
/// - `dirty_decay_ms:1000`: freed pages go back about a second after the last use, so a
///   scrape's buffers are reused under load but do not outlive it by much;
/// - `muzzy_decay_ms:0`: give pages back with MADV_DONTNEED, which leaves RSS at once
///   (MADV_FREE pages count until the kernel wants them).
///
/// Transparent huge pages stay at the kernel's default (no `thp` here). `thp:always` applied
/// watch events at 65,000 nodes 5–17% faster (fewer TLB misses: 0.90–0.93× the 5,000-node
/// rate, against 0.80–0.81×), but khugepaged then refilled the pages the purges had given
/// back: an idle exporter at 5,000 nodes went from 44 to 52 MiB within 30 s, above its own
/// sync peak, where it stays at 35 MiB without (`benches/end_to_end.rs` held idle, 2026-11-28).
/// `HugePages` takes that gain where it is, without the refill.
#[used]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Hands every arena's unused dirty pages back to the kernel now (`arena.<all>.purge`).
/// Returns whether jemalloc took the command.
pub fn purge() -> bool {
    // MALLCTL_ARENAS_ALL: the command applies to every arena.
    const PURGE_ALL_ARENAS: &[u8] = b"arena.4096.purge\0";
    // SAFETY: a NUL-terminated name, and null old/new pointers with zero lengths, which is how
    // jemalloc's void commands are called; jemalloc does not keep any of the pointers.
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL_ARENAS.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    status == 0
}

#[cfg(test)]
mod tests {
    /// The settings reach jemalloc only if the linker kept the symbol; its background thread
    /// exists only if they did. jemalloc starts that thread asynchronously, so on a busy
    /// machine it may not be there yet when the test begins: wait for it, a few seconds at most.
    #[test]
    fn jemalloc_runs_its_background_purge_thread() {
        let threads = || -> Vec<String> {
            std::fs::read_dir("/proc/self/task")
                .expect("procfs")
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .collect()
        };
        let purging = |names: &[String]| names.iter().any(|n| n.trim() == "jemalloc_bg_thd");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut names = threads();
        while !purging(&names) && std::time::Instant::now() < deadline {
            std::hint::black_box(vec![0u8; 64 * 1024]);
            std::thread::sleep(std::time::Duration::from_millis(10));
            names = threads();
        }
        assert!(purging(&names), "threads: {names:?}");
    }

    #[test]
    fn purge_is_a_command_jemalloc_takes() {
        let garbage: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 64 * 1024]).collect();
        drop(garbage);
        assert!(super::purge());
    }
}
