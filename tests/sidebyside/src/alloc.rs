//! The bench's global allocator, chosen per process so each variant runs on
//! the allocator it would have outside the bench: the hosted controllers
//! (wasm, webhook) and the API server on mimalloc, like the `wasm-reconciler`
//! binary; the native controller on the system allocator, as a kube-rs
//! controller has by default. `SIDEBYSIDE_ALLOC=system` in a process's
//! environment selects the system allocator (the bench sets it for the native
//! controller; set it for the whole run to measure the host without
//! mimalloc).
//!
//! The choice is made from the environment at the first allocation and never
//! changes, so every block is freed by the allocator that made it. `getenv`
//! allocates nothing, and the environment is not modified before `main`, so
//! threads racing to decide all decide the same.
//!
//! Unsafe code (denied in the workspace) is allowed in this bench-only
//! module: a global allocator is an `unsafe` trait, and reading the
//! environment without allocating needs `getenv`. The host binary itself
//! uses `mimalloc::MiMalloc` directly, with no unsafe code.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use mimalloc::MiMalloc;

/// The environment variable that selects the system allocator (`system`).
pub const ENV: &str = "SIDEBYSIDE_ALLOC";

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// mimalloc or the system allocator, per [`ENV`].
pub struct Chosen;

fn system() -> bool {
    let c = CHOICE.load(Ordering::Relaxed);
    if c != UNDECIDED {
        return c == SYSTEM;
    }
    // SAFETY: a NUL-terminated name; the pointer returned is read at once,
    // before anything could modify the environment.
    let sys = unsafe {
        let v = libc::getenv(c"SIDEBYSIDE_ALLOC".as_ptr());
        !v.is_null() && std::ffi::CStr::from_ptr(v).to_bytes() == b"system"
    };
    CHOICE.store(if sys { SYSTEM } else { MIMALLOC }, Ordering::Relaxed);
    sys
}

// SAFETY: each call is forwarded to one of two sound allocators, the same
// one for the whole life of the process (see the module docs).
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { MiMalloc.alloc(layout) }
        }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if system() {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { MiMalloc.dealloc(ptr, layout) }
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if system() {
            unsafe { System.realloc(ptr, layout, new_size) }
        } else {
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}
