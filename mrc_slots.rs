// SPDX-License-Identifier: GPL-2.0
//! Tables indexed by path, whose memory follows the paths in use.
//!
//! A connection may have up to 256 paths, most have a few. A [`Slots`] keeps its entries in
//! chunks of `CHUNK`, each allocated when the first entry of its range of indices is
//! inserted and freed when its last one is taken; the table itself is a directory of `DIR`
//! pointers, one per chunk. Looking an index up costs one more load than an array would,
//! and a scan visits only the chunks present. The user picks `CHUNK` so that a chunk fills
//! a kmalloc size class well (see [`crate::mrc_path::PATH_CHUNK`]).
//!
//! Memory comes from the crate's `mrc_alloc` (kmalloc in the module, atomic since paths are
//! added in softirq context), and running out is an error the caller handles: the entry is
//! not inserted. Like the rest of the sans-IO core this depends on `core` only.

use core::mem::size_of;

use super::mrc_alloc::{self, Boxed};

/// Memory for a chunk could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

/// A table of up to `DIR * CHUNK` entries, by index, allocated `CHUNK` at a time.
#[derive(Debug)]
pub struct Slots<T, const CHUNK: usize, const DIR: usize> {
    dir: [Option<Boxed<[Option<T>; CHUNK]>>; DIR],
}

impl<T, const CHUNK: usize, const DIR: usize> Default for Slots<T, CHUNK, DIR> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const CHUNK: usize, const DIR: usize> Slots<T, CHUNK, DIR> {
    /// Number of indices the table has room for.
    pub const CAPACITY: usize = DIR * CHUNK;

    /// Bytes of one chunk.
    pub const CHUNK_BYTES: usize = size_of::<[Option<T>; CHUNK]>();

    /// Returns an empty table: no chunk allocated.
    pub const fn new() -> Self {
        Slots {
            dir: [const { None }; DIR],
        }
    }

    /// Returns the entry at `idx`.
    #[inline]
    pub fn get(&self, idx: usize) -> Option<&T> {
        self.dir
            .get(idx / CHUNK)?
            .as_deref()?
            .get(idx % CHUNK)?
            .as_ref()
    }

    /// Returns the entry at `idx`, mutably.
    #[inline]
    pub fn get_mut(&mut self, idx: usize) -> Option<&mut T> {
        self.dir
            .get_mut(idx / CHUNK)?
            .as_deref_mut()?
            .get_mut(idx % CHUNK)?
            .as_mut()
    }

    /// Returns the lowest index without an entry, if any is below [`Slots::CAPACITY`].
    pub fn first_free(&self) -> Option<usize> {
        self.dir.iter().enumerate().find_map(|(c, chunk)| {
            let k = match chunk {
                None => 0,
                Some(chunk) => chunk.iter().position(Option::is_none)?,
            };
            Some(c * CHUNK + k)
        })
    }

    /// Puts `value` at `idx`, replacing (and dropping) any entry there, and returns it.
    ///
    /// Allocates the chunk of `idx` if it has none; if that fails, or `idx` is not below
    /// [`Slots::CAPACITY`], nothing changes and `value` is dropped.
    pub fn insert(&mut self, idx: usize, value: T) -> Result<&mut T, AllocError> {
        let chunk = self.dir.get_mut(idx / CHUNK).ok_or(AllocError)?;
        if chunk.is_none() {
            *chunk = Some(mrc_alloc::try_array(|_| None).ok_or(AllocError)?);
        }
        let slot = chunk
            .as_deref_mut()
            .and_then(|c| c.get_mut(idx % CHUNK))
            .ok_or(AllocError)?;
        Ok(slot.insert(value))
    }

    /// Takes the entry at `idx` out of the table; frees its chunk if it was the chunk's last.
    pub fn take(&mut self, idx: usize) -> Option<T> {
        let chunk = self.dir.get_mut(idx / CHUNK)?;
        let value = chunk.as_deref_mut()?.get_mut(idx % CHUNK)?.take();
        if chunk
            .as_deref()
            .is_some_and(|c| c.iter().all(Option::is_none))
        {
            *chunk = None;
        }
        value
    }

    /// Keeps only the entries for which `keep` returns true; frees the chunks left empty.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        for chunk in self.dir.iter_mut() {
            let Some(c) = chunk.as_deref_mut() else {
                continue;
            };
            for e in c.iter_mut() {
                if e.as_ref().is_some_and(|v| !keep(v)) {
                    *e = None;
                }
            }
            if c.iter().all(Option::is_none) {
                *chunk = None;
            }
        }
    }

    /// Iterates over `(index, entry)` for the entries below `end`, in ascending index order.
    pub fn iter(&self, end: usize) -> impl Iterator<Item = (usize, &T)> + '_ {
        let chunks = end.div_ceil(CHUNK).min(DIR);
        self.dir
            .get(..chunks)
            .unwrap_or(&[])
            .iter()
            .enumerate()
            .filter_map(|(c, chunk)| Some((c, chunk.as_deref()?)))
            .flat_map(|(c, chunk)| {
                chunk
                    .iter()
                    .enumerate()
                    .filter_map(move |(k, e)| Some((c * CHUNK + k, e.as_ref()?)))
            })
            .take_while(move |(i, _)| *i < end)
    }

    /// Iterates mutably over `(index, entry)` for the entries below `end`, in ascending
    /// index order.
    pub fn iter_mut(&mut self, end: usize) -> impl Iterator<Item = (usize, &mut T)> + '_ {
        let chunks = end.div_ceil(CHUNK).min(DIR);
        self.dir
            .get_mut(..chunks)
            .unwrap_or(&mut [])
            .iter_mut()
            .enumerate()
            .filter_map(|(c, chunk)| Some((c, chunk.as_deref_mut()?)))
            .flat_map(|(c, chunk)| {
                chunk
                    .iter_mut()
                    .enumerate()
                    .filter_map(move |(k, e)| Some((c * CHUNK + k, e.as_mut()?)))
            })
            .take_while(move |(i, _)| *i < end)
    }

    /// Returns the number of chunks allocated.
    pub fn chunks(&self) -> usize {
        self.dir.iter().filter(|c| c.is_some()).count()
    }

    /// Returns the bytes of the chunks allocated (what the table costs beyond its own
    /// size).
    pub fn heap_bytes(&self) -> usize {
        self.chunks() * Self::CHUNK_BYTES
    }
}
