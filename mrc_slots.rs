// SPDX-License-Identifier: GPL-2.0
//! Tables indexed by path, whose memory follows the paths in use.
//!
//! A connection may have up to 256 paths, most have a few. A [`Slots`] keeps its first
//! `CHUNK` entries inline, where looking one up costs what an array's element does (the
//! paths are looked up for every packet sent, acknowledged or examined for loss), and the
//! rest in up to `DIR` chunks of `CHUNK`, each allocated when the first entry of its range of
//! indices is inserted and freed when its last one is taken. Looking such an index up costs
//! one more load, and a scan visits only the chunks present. The user picks `CHUNK` so that
//! a chunk fills a kmalloc size class well (see [`crate::mrc_path::PATH_CHUNK`]).
//!
//! Memory comes from the crate's `mrc_alloc` (kmalloc in the module, atomic since paths are
//! added in softirq context), and running out is an error the caller handles: the entry is
//! not inserted. Like the rest of the sans-IO core this depends on `core` only.

use core::mem::{size_of, MaybeUninit};
use core::ptr::addr_of_mut;

use super::mrc_alloc::{self, Boxed};

/// Memory for a chunk could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

/// A table of up to `(DIR + 1) * CHUNK` entries, by index: the first `CHUNK` inline, the
/// rest allocated `CHUNK` at a time.
#[derive(Debug)]
pub struct Slots<T, const CHUNK: usize, const DIR: usize> {
    /// Indices `0..CHUNK`.
    head: [Option<T>; CHUNK],
    /// `dir[c]` holds indices `(c + 1) * CHUNK..(c + 2) * CHUNK`, once one of them is used.
    dir: [Option<Boxed<[Option<T>; CHUNK]>>; DIR],
}

impl<T, const CHUNK: usize, const DIR: usize> Default for Slots<T, CHUNK, DIR> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const CHUNK: usize, const DIR: usize> Slots<T, CHUNK, DIR> {
    /// Number of indices the table has room for.
    pub const CAPACITY: usize = (DIR + 1) * CHUNK;

    /// Bytes of one chunk.
    pub const CHUNK_BYTES: usize = size_of::<[Option<T>; CHUNK]>();

    /// Returns an empty table: no chunk allocated.
    pub const fn new() -> Self {
        Slots {
            head: [const { None }; CHUNK],
            dir: [const { None }; DIR],
        }
    }

    /// Initialises an empty table in `slot`, the same as [`Slots::new`] returns, and returns
    /// it. The entries are written one at a time, so that no temporary the size of the inline
    /// chunk is put on the stack; whatever `slot` held is overwritten without being dropped.
    pub fn init_in_place(slot: &mut MaybeUninit<Self>) -> &mut Self {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` comes from a `&mut MaybeUninit<Self>`, so it is aligned and valid for
        // writes of a `Slots`; `addr_of_mut!` projects to the fields without making a
        // reference to uninitialised memory, the inline entries are written through a
        // pointer to the first for indices below `CHUNK`, and `write` drops nothing. Both
        // fields are written, so the table is initialised.
        unsafe {
            let head = addr_of_mut!((*p).head).cast::<Option<T>>();
            for i in 0..CHUNK {
                head.add(i).write(None);
            }
            addr_of_mut!((*p).dir).write([const { None }; DIR]);
            slot.assume_init_mut()
        }
    }

    /// The chunk of indices at or above `CHUNK` that holds `idx`, and `idx`'s place in it.
    #[inline]
    fn place(idx: usize) -> (usize, usize) {
        let i = idx - CHUNK;
        (i / CHUNK, i % CHUNK)
    }

    /// Returns the entry at `idx`.
    #[inline]
    pub fn get(&self, idx: usize) -> Option<&T> {
        if idx < CHUNK {
            return self.head.get(idx)?.as_ref();
        }
        let (c, k) = Self::place(idx);
        self.dir.get(c)?.as_deref()?.get(k)?.as_ref()
    }

    /// Returns the entry at `idx`, mutably.
    #[inline]
    pub fn get_mut(&mut self, idx: usize) -> Option<&mut T> {
        if idx < CHUNK {
            return self.head.get_mut(idx)?.as_mut();
        }
        let (c, k) = Self::place(idx);
        self.dir.get_mut(c)?.as_deref_mut()?.get_mut(k)?.as_mut()
    }

    /// Returns the lowest index without an entry, if any is below [`Slots::CAPACITY`].
    pub fn first_free(&self) -> Option<usize> {
        if let Some(k) = self.head.iter().position(Option::is_none) {
            return Some(k);
        }
        self.dir.iter().enumerate().find_map(|(c, chunk)| {
            let k = match chunk {
                None => 0,
                Some(chunk) => chunk.iter().position(Option::is_none)?,
            };
            Some((c + 1) * CHUNK + k)
        })
    }

    /// Puts `value` at `idx`, replacing (and dropping) any entry there, and returns it.
    ///
    /// Allocates the chunk of `idx` if it has none; if that fails, or `idx` is not below
    /// [`Slots::CAPACITY`], nothing changes and `value` is dropped.
    pub fn insert(&mut self, idx: usize, value: T) -> Result<&mut T, AllocError> {
        if idx < CHUNK {
            let slot = self.head.get_mut(idx).ok_or(AllocError)?;
            return Ok(slot.insert(value));
        }
        let (c, k) = Self::place(idx);
        let chunk = self.dir.get_mut(c).ok_or(AllocError)?;
        if chunk.is_none() {
            *chunk = Some(mrc_alloc::try_array(|_| None).ok_or(AllocError)?);
        }
        let slot = chunk
            .as_deref_mut()
            .and_then(|c| c.get_mut(k))
            .ok_or(AllocError)?;
        Ok(slot.insert(value))
    }

    /// Takes the entry at `idx` out of the table; frees its chunk if it was the chunk's last.
    pub fn take(&mut self, idx: usize) -> Option<T> {
        if idx < CHUNK {
            return self.head.get_mut(idx)?.take();
        }
        let (c, k) = Self::place(idx);
        let chunk = self.dir.get_mut(c)?;
        let value = chunk.as_deref_mut()?.get_mut(k)?.take();
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
        let mut drop_unkept = |c: &mut [Option<T>]| {
            for e in c.iter_mut() {
                if e.as_ref().is_some_and(|v| !keep(v)) {
                    *e = None;
                }
            }
        };
        drop_unkept(&mut self.head);
        for chunk in self.dir.iter_mut() {
            let Some(c) = chunk.as_deref_mut() else {
                continue;
            };
            drop_unkept(c);
            if c.iter().all(Option::is_none) {
                *chunk = None;
            }
        }
    }

    /// Iterates over `(index, entry)` for the entries below `end`, in ascending index order.
    pub fn iter(&self, end: usize) -> SlotsIter<'_, T, CHUNK, DIR> {
        SlotsIter {
            slots: self,
            cur: self.head.get(..end.min(CHUNK)).unwrap_or(&[]),
            base: 0,
            k: 0,
            chunk: 0,
            end,
        }
    }

    /// Iterates mutably over `(index, entry)` for the entries below `end`, in ascending
    /// index order.
    pub fn iter_mut(&mut self, end: usize) -> impl Iterator<Item = (usize, &mut T)> + '_ {
        let head = self.head.get_mut(..end.min(CHUNK)).unwrap_or(&mut []);
        let chunks = end.saturating_sub(CHUNK).div_ceil(CHUNK).min(DIR);
        let rest = self.dir.get_mut(..chunks).unwrap_or(&mut []);
        head.iter_mut()
            .enumerate()
            .filter_map(|(k, e)| Some((k, e.as_mut()?)))
            .chain(rest.iter_mut().enumerate().flat_map(move |(c, chunk)| {
                let base = (c + 1) * CHUNK;
                let n = end.saturating_sub(base).min(CHUNK);
                let used = chunk
                    .as_deref_mut()
                    .and_then(|a| a.get_mut(..n))
                    .unwrap_or(&mut []);
                used.iter_mut()
                    .enumerate()
                    .filter_map(move |(k, e)| Some((base + k, e.as_mut()?)))
            }))
    }

    /// Returns the number of chunks allocated (the inline one not counted).
    pub fn chunks(&self) -> usize {
        self.dir.iter().filter(|c| c.is_some()).count()
    }

    /// Returns the bytes of the chunks allocated (what the table costs beyond its own
    /// size).
    pub fn heap_bytes(&self) -> usize {
        self.chunks() * Self::CHUNK_BYTES
    }
}

/// The iterator of [`Slots::iter`]: the occupied slots below `end`, a chunk at a time.
///
/// A plain cursor rather than a chain of iterator adapters: the path table runs it over
/// every path for nearly every packet, where the adapters' state machine cost more than
/// the work done per path.
pub struct SlotsIter<'a, T, const CHUNK: usize, const DIR: usize> {
    slots: &'a Slots<T, CHUNK, DIR>,
    /// The slots of the current chunk below `end`.
    cur: &'a [Option<T>],
    /// Index of `cur[0]`.
    base: usize,
    /// Next position in `cur`.
    k: usize,
    /// Next chunk of `dir` to visit.
    chunk: usize,
    end: usize,
}

impl<'a, T, const CHUNK: usize, const DIR: usize> Iterator for SlotsIter<'a, T, CHUNK, DIR> {
    type Item = (usize, &'a T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            while let Some(slot) = self.cur.get(self.k) {
                let i = self.base + self.k;
                self.k += 1;
                if let Some(v) = slot {
                    return Some((i, v));
                }
            }
            let base = (self.chunk + 1) * CHUNK;
            if base >= self.end || self.chunk >= DIR {
                return None;
            }
            let n = (self.end - base).min(CHUNK);
            self.cur = self
                .slots
                .dir
                .get(self.chunk)
                .and_then(|c| c.as_deref())
                .and_then(|a| a.get(..n))
                .unwrap_or(&[]);
            self.base = base;
            self.k = 0;
            self.chunk += 1;
        }
    }
}
