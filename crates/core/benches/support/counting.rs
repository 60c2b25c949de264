//! A `#[global_allocator]` that counts, per thread, the allocations made through it: `alloc`,
//! `alloc_zeroed` and `realloc` calls each count one (a `realloc` that grows a buffer is a new
//! allocation as far as the cost is concerned); `dealloc` is not counted. Shared by
//! `benches/alloc.rs` and `tests/alloc_count.rs` (`#[path]` module); the system allocator does the work.
//!
//! Per-thread, so tests running on other threads of the same binary do not disturb a count. The
//! counter is a `const`-initialised thread local without a destructor: reading it never allocates.
//!
//! A `GlobalAlloc` is an unsafe trait: the workspace denies unsafe code and the core's library
//! forbids it, so this measuring harness (benches and tests only) is the one place that allows it.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

pub struct Counting;

fn count(bytes: usize) {
    // `try_with`: during thread teardown the thread local may be gone; such allocations are not counted.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    let _ = BYTES.try_with(|c| c.set(c.get() + bytes as u64));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations and bytes requested on this thread while `f` ran (its result dropped after counting).
pub fn count_in<T>(f: impl FnOnce() -> T) -> (u64, u64, T) {
    let (a0, b0) = (ALLOCATIONS.with(Cell::get), BYTES.with(Cell::get));
    let out = f();
    let (a1, b1) = (ALLOCATIONS.with(Cell::get), BYTES.with(Cell::get));
    (a1 - a0, b1 - b0, out)
}
