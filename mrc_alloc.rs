// SPDX-License-Identifier: GPL-2.0
//! Heap memory for the sans-IO core in the module: kmalloc'ed boxes.
//!
//! The core allocates nothing itself; it asks this module, which each crate that compiles
//! the core provides (the host crate `tools/mrc-core` has its own over `alloc`). Paths are
//! added in softirq context, so allocations are atomic, and they do not warn on failure:
//! the caller refuses the path and counts it like any other.

use kernel::alloc::{flags, KBox};

/// A value on the heap, freed when dropped.
pub(crate) type Boxed<T> = KBox<T>;

/// Allocates an array of `N` elements, element `i` being `f(i)`, or returns `None` if memory
/// is short.
///
/// The elements are written in place one at a time, so no temporary the size of the array is
/// put on the stack.
pub(crate) fn try_array<T, const N: usize>(mut f: impl FnMut(usize) -> T) -> Option<Boxed<[T; N]>> {
    let mut b = KBox::<[T; N]>::new_uninit(flags::GFP_ATOMIC | flags::__GFP_NOWARN).ok()?;
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
