// SPDX-License-Identifier: GPL-2.0
//! Heap memory for the sans-IO core on the host: boxes of `alloc`'s global allocator.
//!
//! The module build has its own version of this module (`mrc_alloc.rs` at the top of the
//! tree, over the kernel's kmalloc). This one can be told to fail allocations
//! ([`fail_after`]), so that tests can check how the core takes a failure. The switch is
//! global to the process: a test that uses it should be alone in its test binary.

use alloc::boxed::Box;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Allocations that may still succeed; `usize::MAX`: all.
static ALLOWED: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Lets the next `n` allocations succeed and fails every one after them; `usize::MAX`
/// (the default) lets every allocation succeed.
pub fn fail_after(n: usize) {
    ALLOWED.store(n, Ordering::SeqCst);
}

/// Takes one allocation from the allowance: whether it may succeed.
fn allowed() -> bool {
    ALLOWED
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            usize::MAX => Some(n),
            0 => None,
            _ => Some(n - 1),
        })
        .is_ok()
}

/// A value on the heap, freed when dropped.
pub type Boxed<T> = Box<T>;

/// Allocates an array of `N` elements, element `i` being `f(i)`, or returns `None` if memory
/// is short (or [`fail_after`] says so).
///
/// The elements are written in place one at a time, as in the module build.
pub fn try_array<T, const N: usize>(mut f: impl FnMut(usize) -> T) -> Option<Boxed<[T; N]>> {
    if !allowed() {
        return None;
    }
    let mut b = Box::<[T; N]>::new_uninit();
    let p = b.as_mut_ptr().cast::<T>();
    for i in 0..N {
        // SAFETY: `p` points to the first element of an allocated, uninitialised `[T; N]`, so
        // `p.add(i)` for `i < N` is in bounds, aligned and valid for writes; `write` drops
        // nothing.
        unsafe { p.add(i).write(f(i)) };
    }
    // SAFETY: the loop above initialised all `N` elements.
    Some(unsafe { b.assume_init() })
}
