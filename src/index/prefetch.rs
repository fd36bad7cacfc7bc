//! Hints that a line of memory is about to be read. At 65,000 nodes a node event reads,
//! for each DaemonSet, an entry of its claims column and the pod it names, each a trip to
//! memory; asked for together up front, the trips overlap where the loop would make them
//! one after another (a pod event's warm pass does the same for its batch). A hint is no
//! load: nothing waits for it, and an address it names need not be read at all.

/// Asks for the cache line holding `at`, and the next one if `T` reaches into it.
pub(super) fn prefetch<T>(at: &T) {
    let start = std::ptr::from_ref(at).cast::<i8>();
    line(start);
    line(start.wrapping_add(std::mem::size_of::<T>().saturating_sub(1)));
}

#[cfg(target_arch = "x86_64")]
fn line(at: *const i8) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at) }
}

#[cfg(not(target_arch = "x86_64"))]
fn line(_: *const i8) {}
