//! An allocator for the index's few big blocks (chunks of pod slots, the UID table) that asks
//! the kernel to back them with 2 MiB pages.
//!
//! An event reaches a random pod: its UID's bucket in the table, then its slot. At 65,000
//! nodes those structures span some 170 MiB, far more than the TLB covers in 4 KiB pages, so
//! each step also walked the page tables (events cost 0.55× their 5,000-node rate; with
//! huge pages everywhere, 0.73×, but the many small allocations grew RSS by 10 MiB). Here
//! only blocks of at least one huge page are advised: their whole huge pages, aligned so
//! that there are some. Smaller blocks, and every other allocation, are left as they were.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator, Global};

/// The size of a transparent huge page on x86-64 and arm64 (with 4 KiB base pages).
pub(super) const HUGE_PAGE: usize = 2 << 20;

/// The global allocator, with `MADV_HUGEPAGE` on blocks of a huge page or more.
#[derive(Clone, Copy, Debug, Default)]
pub struct HugePages;

/// The layout a block is allocated with: blocks of a huge page or more start on one, so
/// that all their whole huge pages can be advised.
fn placed(layout: Layout) -> Layout {
    if layout.size() >= HUGE_PAGE { layout.align_to(HUGE_PAGE).unwrap_or(layout) } else { layout }
}

/// The bytes of a block that `advise` covers: its whole huge pages, if it starts on one.
fn advised_len(start: usize, size: usize) -> usize {
    if start.is_multiple_of(HUGE_PAGE) { size / HUGE_PAGE * HUGE_PAGE } else { 0 }
}

/// Tells the kernel how to back the whole huge pages of a block; best effort (a kernel
/// without transparent huge pages says no, and the block works the same).
fn advise(block: NonNull<u8>, size: usize, huge: bool) {
    let len = advised_len(block.as_ptr() as usize, size);
    if len == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let advice = if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: the range is page-aligned (it starts on a huge page) and lies within a block
        // this allocator owns; the advice changes how pages are backed, never their contents.
        unsafe { libc::madvise(block.as_ptr().cast(), len, advice) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = huge;
}

// SAFETY: every block comes from `Global` with the layout `placed` gives, and goes back to it
// with the same layout (`placed` depends only on the layout the caller passes, which is the
// one it allocated with).
unsafe impl Allocator for HugePages {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let placed = placed(layout);
        let block = Global.allocate(placed)?;
        advise(block.cast(), placed.size(), true);
        Ok(block)
    }

    unsafe fn deallocate(&self, block: NonNull<u8>, layout: Layout) {
        let placed = placed(layout);
        // Whatever jemalloc puts here next (small objects, perhaps) gets base pages again.
        advise(block, placed.size(), false);
        // SAFETY: allocated by `Global` with this same layout (see above).
        unsafe { Global.deallocate(block, placed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_blocks_of_a_huge_page_or_more_are_placed_on_one() {
        let small = Layout::from_size_align(HUGE_PAGE - 1, 8).expect("a layout");
        assert_eq!(placed(small), small);
        let big = Layout::from_size_align(HUGE_PAGE + 48, 8).expect("a layout");
        assert_eq!((placed(big).size(), placed(big).align()), (HUGE_PAGE + 48, HUGE_PAGE));
    }

    #[test]
    fn only_whole_huge_pages_of_a_block_that_starts_on_one_are_advised() {
        assert_eq!(advised_len(HUGE_PAGE * 3, HUGE_PAGE * 2 + 48), HUGE_PAGE * 2);
        assert_eq!(advised_len(HUGE_PAGE * 3, HUGE_PAGE - 1), 0);
        assert_eq!(advised_len(HUGE_PAGE * 3 + 4096, HUGE_PAGE * 4), 0);
    }

    #[test]
    fn a_huge_block_is_aligned_usable_and_given_back() {
        let layout = Layout::array::<u64>(HUGE_PAGE / 8 + 6).expect("a layout");
        let block = HugePages.allocate(layout).expect("memory");
        assert!((block.cast::<u8>().as_ptr() as usize).is_multiple_of(HUGE_PAGE));
        let words = block.cast::<u64>().as_ptr();
        // SAFETY: the block holds `HUGE_PAGE / 8 + 6` u64s, at u64 alignment.
        unsafe {
            for i in 0..HUGE_PAGE / 8 + 6 {
                words.add(i).write(i as u64);
            }
            assert_eq!(words.add(HUGE_PAGE / 8 + 5).read(), (HUGE_PAGE / 8 + 5) as u64);
            HugePages.deallocate(block.cast(), layout);
        }
    }
}
