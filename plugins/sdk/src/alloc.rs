//! The guest's memory allocator: a bump allocator, because a plugin
//! instance lives for exactly one call.
//!
//! The host instantiates every call in a fresh instance and throws it away
//! afterwards (a sandbox promise: nothing survives between calls), so
//! nothing a call allocates needs to be given back before the instance
//! goes. The default allocator of `wasm32-wasip2` (dlmalloc) still keeps
//! free lists, splits and coalesces blocks; with the SDK's JSON trees (a
//! block per key, string, map and array) that bookkeeping was about a third
//! of a static-site call's instructions (`docs/benchmarks.md`, issue 15).
//! This one hands out memory by moving a pointer; `dealloc` gives back only
//! the most recent block, and `realloc` of the most recent block grows it
//! in place, so the usual build-a-string / grow-a-vector patterns do not
//! leave copies behind. Everything else freed during a call stays unused
//! until the call ends; a plugin that allocates and frees much more than it
//! keeps can opt out with `default-features = false` (feature
//! `bump-allocator`) and gets dlmalloc back.
//!
//! Hand-written (~60 lines) rather than a crate: the allocator crates for
//! wasm either keep free lists (the cost removed here) or never reuse the
//! last block, which doubles what growing vectors and strings use.
//!
//! Memory comes from `memory.grow` only, like dlmalloc's, so it never
//! overlaps memory the C runtime (wasi-libc) manages. Growing past the
//! host's memory cap fails the allocation, which aborts the call; the host
//! reports it as a memory-limit fault.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Bytes per WebAssembly page.
const PAGE: usize = 64 * 1024;
/// Smallest growth step (pages). One page: the host resets a reused
/// instance's memory up to its size on kernels without `PAGEMAP_SCAN`, so
/// memory grows no further than needed (4 pages cost ~6 % more per call in
/// the instruction-count gate, all of it in that reset).
const MIN_GROW_PAGES: usize = 1;

/// The allocator; `#[global_allocator]` in `lib.rs` on `wasm32` only.
///
/// The guest is single-threaded: relaxed atomics compile to plain loads and
/// stores there and spare an `unsafe impl Sync`.
pub struct BumpAllocator {
    /// Next free byte.
    next: AtomicUsize,
    /// End of the region obtained from `memory.grow`.
    end: AtomicUsize,
}

impl BumpAllocator {
    pub const fn new() -> Self {
        BumpAllocator {
            next: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
        }
    }

    /// The start of `size` bytes aligned to `align`, or `None` when memory
    /// cannot grow (the cap).
    fn take(&self, size: usize, align: usize) -> Option<usize> {
        let mut start = self.next.load(Ordering::Relaxed).checked_add(align - 1)? & !(align - 1);
        let mut stop = start.checked_add(size)?;
        let end = self.end.load(Ordering::Relaxed);
        if start == 0 || stop > end {
            let pages = (size + align).div_ceil(PAGE).max(MIN_GROW_PAGES);
            let old = grow(pages)?;
            let region = old * PAGE;
            if region != end || end == 0 {
                // Not contiguous with our region (first use, or someone else
                // grew memory since): start afresh in the new pages.
                start = (region + align - 1) & !(align - 1);
                stop = start.checked_add(size)?;
            }
            self.end.store(region + pages * PAGE, Ordering::Relaxed);
            if stop > region + pages * PAGE {
                return None;
            }
        }
        self.next.store(stop, Ordering::Relaxed);
        Some(start)
    }
}

impl Default for BumpAllocator {
    fn default() -> Self {
        Self::new()
    }
}

/// Grows linear memory 0 by `pages`; the previous size in pages.
#[cfg(target_arch = "wasm32")]
fn grow(pages: usize) -> Option<usize> {
    let old = core::arch::wasm32::memory_grow(0, pages);
    (old != usize::MAX).then_some(old)
}

/// Off wasm the allocator is never installed (natively built plugins and
/// their tests use the system allocator); this keeps it compiling there.
#[cfg(all(not(target_arch = "wasm32"), not(test)))]
fn grow(_pages: usize) -> Option<usize> {
    None
}

/// For this module's native tests: fresh page-aligned memory from the
/// system allocator stands in for `memory.grow` (never contiguous with the
/// previous region, the harder case).
#[cfg(all(not(target_arch = "wasm32"), test))]
fn grow(pages: usize) -> Option<usize> {
    let layout = Layout::from_size_align(pages * PAGE, PAGE).ok()?;
    #[allow(unsafe_code)]
    // SAFETY: the layout has a non-zero size. Leaked on purpose (tests only).
    let region = unsafe { std::alloc::alloc(layout) };
    (!region.is_null()).then_some(region as usize / PAGE)
}

// SAFETY (the whole impl): every block handed out is a fresh, aligned range
// of linear memory below `end` that no other live block overlaps — `next`
// only moves back over the most recent block when that block is freed or
// resized — and nothing else uses memory obtained from `memory.grow` here.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for BumpAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.take(layout.size(), layout.align()) {
            Some(start) => start as *mut u8,
            None => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Only the most recent block is given back.
        if ptr as usize + layout.size() == self.next.load(Ordering::Relaxed) {
            self.next.store(ptr as usize, Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let start = ptr as usize;
        let old_size = layout.size();
        if start + old_size == self.next.load(Ordering::Relaxed) {
            // The most recent block: take it again at its new size, which
            // keeps it in place unless memory had to grow elsewhere.
            self.next.store(start, Ordering::Relaxed);
            return match self.take(new_size, layout.align()) {
                Some(new) if new == start => ptr,
                Some(new) => {
                    // SAFETY: the old bytes are untouched (nothing was
                    // allocated over them) and `new` lies in fresh pages.
                    unsafe { core::ptr::copy_nonoverlapping(ptr, new as *mut u8, old_size) };
                    new as *mut u8
                }
                None => {
                    self.next.store(start + old_size, Ordering::Relaxed);
                    core::ptr::null_mut()
                }
            };
        }
        if new_size <= old_size {
            // Shrinking another block: keep it where it is.
            return ptr;
        }
        match self.take(new_size, layout.align()) {
            Some(new) => {
                // SAFETY: both blocks are live and distinct; the old one
                // holds `old_size` initialised bytes, fewer than `new_size`.
                unsafe { core::ptr::copy_nonoverlapping(ptr, new as *mut u8, old_size) };
                new as *mut u8
            }
            None => core::ptr::null_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    #[allow(unsafe_code)]
    fn blocks_are_aligned_distinct_and_the_last_one_is_reused() {
        let a = BumpAllocator::new();
        // SAFETY (all calls): layouts are valid and non-zero; blocks are
        // freed or resized only with the layout they were made with.
        unsafe {
            let x = a.alloc(layout(3, 1));
            let y = a.alloc(layout(8, 8));
            assert!(!x.is_null() && !y.is_null());
            assert_eq!(y as usize % 8, 0);
            assert!(y as usize >= x as usize + 3);
            // Freeing the last block gives it back...
            a.dealloc(y, layout(8, 8));
            assert_eq!(a.alloc(layout(8, 8)), y);
            // ...freeing an earlier one does not.
            a.dealloc(x, layout(3, 1));
            assert_ne!(a.alloc(layout(3, 1)), x);
        }
    }

    #[test]
    #[allow(unsafe_code)]
    fn the_last_block_grows_in_place_and_others_are_copied() {
        let a = BumpAllocator::new();
        // SAFETY: as above; every write stays inside its block.
        unsafe {
            let first = a.alloc(layout(4, 1));
            first.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
            let grown = a.realloc(first, layout(4, 1), 64);
            assert_eq!(grown, first, "the most recent block grows in place");
            let other = a.alloc(layout(4, 1));
            let moved = a.realloc(grown, layout(64, 1), 128);
            assert_ne!(moved, grown, "an earlier block moves");
            assert!(moved as usize >= other as usize + 4);
            assert_eq!(std::slice::from_raw_parts(moved, 4), b"abcd");
        }
    }

    #[test]
    #[allow(unsafe_code)]
    fn memory_grows_past_one_step_and_keeps_contents() {
        let a = BumpAllocator::new();
        let big = MIN_GROW_PAGES * PAGE + 1;
        // SAFETY: as above.
        unsafe {
            let small = a.alloc(layout(16, 8));
            small.write_bytes(7, 16);
            let large = a.alloc(layout(big, 16));
            assert!(!large.is_null());
            assert_eq!(large as usize % 16, 0);
            large.write_bytes(1, big);
            assert_eq!(std::slice::from_raw_parts(small, 16), &[7u8; 16]);
            // The last block grows across a new region, contents copied.
            let larger = a.realloc(large, layout(big, 16), big * 2);
            assert_eq!(*larger.add(big - 1), 1);
        }
    }
}
