//! Huge pages for the index's few large, dense, long-lived arrays, and for them alone.
//!
//! At 2.6 million daemon pods every watch event looks a pod up in a 20 MiB hash table and
//! reads its slot in 145 MiB of slots, each a TLB miss on 4 KiB pages. Huge pages for the
//! whole heap (jemalloc's `thp`) made events at 65,000 nodes 17% faster, but khugepaged
//! refilled what the purges had given back (`super` says how much). Here only allocations of
//! about a huge page or more are mapped on their own, aligned to 2 MiB and advised
//! `MADV_HUGEPAGE`, and unmapped when freed: nothing else shares their pages, so there is
//! nothing for khugepaged to refill. Smaller ones go to the global allocator (jemalloc).
//!
//! Measured against the build before (`benches/scale/`, 65,000 nodes × 40 DaemonSets, two
//! pairs of runs in opposite orders, 2026-11-28): events 9–10% faster (359k against 327k/s,
//! 266k against 243k/s on a slower hour), RSS the same (227 MiB). At 5,000 nodes the rounding
//! to whole huge pages costs 2 MiB, and an idle exporter held 60 s after ready stayed flat.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator, Global};

/// The size of a huge page on x86-64 and on arm64 with 4 KiB pages.
pub const HUGE_PAGE: usize = 2 << 20;

/// An allocation of at least half a huge page gets huge pages of its own. A chunk of slots
/// fills one but for the last object's width; hash tables grow by doubling, so one maps at
/// most twice its size, and is touched all over (its control bytes are at the end).
const MAPPED_FROM: usize = HUGE_PAGE / 2;

/// The allocator for the index's large arrays (hash tables and chunks of slots).
#[derive(Clone, Copy, Debug, Default)]
pub struct HugePages;

fn mapped(layout: Layout) -> bool {
    layout.size() >= MAPPED_FROM && layout.align() <= HUGE_PAGE
}

/// What `mmap` reserves for `layout`: whole huge pages.
fn mapped_len(layout: Layout) -> usize {
    layout.size().next_multiple_of(HUGE_PAGE)
}

// SAFETY: a block from `allocate` stays valid until `deallocate` gets it back. `allocate`
// returns exactly the size asked for, so the layout a block is freed (or resized) with is
// the one it was made with, and `mapped` sends it back the way it came: a mapped block is
// unmapped with the length it was mapped with. `grow` and `shrink` move a block between
// the two ways only by allocating anew. Copies of `HugePages` are interchangeable: it holds
// nothing.
unsafe impl Allocator for HugePages {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if !mapped(layout) {
            return Global.allocate(layout);
        }
        let len = mapped_len(layout);
        // One huge page more than needed, so that an aligned start lies within it.
        let reserved = len + HUGE_PAGE;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(AllocError);
        }
        let head = at.align_offset(HUGE_PAGE);
        let start = at.cast::<u8>().wrapping_add(head);
        // SAFETY: both ranges lie within the mapping just made and outside [start, start + len);
        // page-aligned, since `at` and `start` are. A failed unmap only leaves them mapped.
        unsafe {
            if head > 0 {
                libc::munmap(at, head);
            }
            let tail = reserved - head - len;
            if tail > 0 {
                libc::munmap(start.add(len).cast(), tail);
            }
            // Advice only: a kernel without transparent huge pages (or set to `never`)
            // refuses it, and the block stays on small pages.
            libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE);
        }
        let start = NonNull::new(start).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(start, layout.size()))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if !mapped(layout) {
            // SAFETY: the caller's contract; the block came from `Global`.
            return unsafe { Global.deallocate(ptr, layout) };
        }
        // SAFETY: the block was mapped by `allocate` with this length, and is not used again.
        unsafe { libc::munmap(ptr.as_ptr().cast(), mapped_len(layout)) };
    }

    unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's contract, passed on: both layouts are in the same class.
        match (mapped(old), mapped(new)) {
            (false, false) => unsafe { Global.grow(ptr, old, new) },
            _ => unsafe { moved(self, ptr, old, new) },
        }
    }

    unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: as in `grow`.
        match (mapped(old), mapped(new)) {
            (false, false) => unsafe { Global.shrink(ptr, old, new) },
            _ => unsafe { moved(self, ptr, old, new) },
        }
    }
}

/// Moves a block into a new one of `new`'s size: a mapped block is never resized in place.
///
/// # Safety
/// As for `Allocator::grow`: `ptr` is a block of `alloc`'s that fits `old`.
unsafe fn moved(alloc: &HugePages, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
    let block = alloc.allocate(new)?;
    // SAFETY: distinct blocks, both valid for the smaller of the two sizes.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.as_ptr(), block.cast::<u8>().as_ptr(), old.size().min(new.size()));
        alloc.deallocate(ptr, old);
    }
    Ok(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's view of the mapping that holds `at`: its flags line from smaps.
    fn vm_flags(at: *const u8) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let at = at as usize;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((from, to)) = range.split_once('-')
                && let (Ok(from), Ok(to)) = (usize::from_str_radix(from, 16), usize::from_str_radix(to, 16))
            {
                inside = (from..to).contains(&at);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.trim().to_owned());
            }
        }
        None
    }

    #[test]
    fn large_blocks_are_aligned_advised_and_keep_their_contents_as_they_grow() {
        let mut chunk = allocator_api2::vec::Vec::<u64, _>::new_in(HugePages);
        for n in 0..(3 * HUGE_PAGE / 8) as u64 {
            chunk.push(n);
        }
        assert_eq!(chunk.as_ptr() as usize % HUGE_PAGE, 0, "a mapped block starts on a huge page");
        assert!(chunk.iter().enumerate().all(|(i, &n)| i as u64 == n), "every value survived the moves");
        let flags = vm_flags(chunk.as_ptr().cast()).expect("the block is in a mapping");
        // A kernel built without transparent huge pages refuses the advice, and says so here.
        let kernel_has_thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
        assert!(!kernel_has_thp || flags.split(' ').any(|flag| flag == "hg"), "advised MADV_HUGEPAGE: {flags}");
        chunk.truncate(10);
        chunk.shrink_to_fit();
        assert_eq!(chunk[..], (0..10).collect::<Vec<u64>>()[..], "and shrinking back to the heap");
    }

    #[test]
    fn small_blocks_stay_with_the_global_allocator() {
        let mut small = allocator_api2::vec::Vec::<u8, _>::new_in(HugePages);
        small.extend_from_slice(&[7; 1000]);
        let flags = vm_flags(small.as_ptr()).expect("the heap is a mapping");
        assert!(!flags.split(' ').any(|flag| flag == "hg"), "not advised: {flags}");
    }
}
