//! What the current thread allocates, counted (the test build's global allocator): the bytes it
//! holds now and the most it held since [`reset`], for tests that assert a bound on memory by
//! bytes rather than by time. Counted per thread, so tests running at once do not disturb each
//! other (memory freed by another thread than the one that allocated it is not counted back:
//! the peak stays an upper bound). Self-contained (std only): the fuzz targets include it too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting.
pub(crate) struct Counting;

thread_local! {
    /// Bytes this thread holds now (since [`reset`]), and the most it held.
    static HELD: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
}

fn count(bytes: isize) {
    // A thread being torn down has no counter any more: nothing to count then.
    let _ = HELD.try_with(|held| {
        let (now, peak) = held.get();
        let now = now + bytes;
        held.set((now, peak.max(now)));
    });
}

// SAFETY: every call is the system allocator's, with the same arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Both blocks may be live during the move: count the new one first.
            count(new_size as isize);
            count(-(layout.size() as isize));
        }
        p
    }
}

/// Start counting afresh on this thread: what it holds now counts as nothing.
pub(crate) fn reset() {
    let _ = HELD.try_with(|held| held.set((0, 0)));
}

/// The most this thread held at once since [`reset`], in bytes.
pub(crate) fn peak() -> u64 {
    HELD.try_with(|held| held.get().1.max(0) as u64)
        .unwrap_or(0)
}

/// What `f` allocated at most at once on this thread (beyond what was held before), and what
/// it returned.
pub(crate) fn peak_of<T>(f: impl FnOnce() -> T) -> (u64, T) {
    reset();
    let out = f();
    (peak(), out)
}
