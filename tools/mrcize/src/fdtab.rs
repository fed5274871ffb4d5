// SPDX-License-Identifier: GPL-2.0
//! What mrcize knows about each file descriptor, in a lock-free table.
//!
//! The table is indexed by descriptor number (up to [`MAX_FDS`]) and made
//! of chunks of [`CHUNK`] slots mapped with mmap() on first use and never
//! freed, so that a slot reference is valid for the life of the process.
//! Every field is an atomic: no lock is taken, so threads, signal handlers
//! and fork() cannot deadlock on it. Fields of one slot are not updated as a
//! whole; a program that reconfigures a descriptor from two threads at once
//! may see a mix, as it would with two setsockopt() calls racing.
//!
//! After exec() the table is empty: descriptors inherited across it are
//! [`Kind::Unknown`] until looked at (see `hooks::classify`).

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::opts::N_OPTS;

/// Descriptors at or above this number are not tracked (they are treated
/// like inherited ones: recognised again on each call).
pub const MAX_FDS: usize = 1 << 20;
/// Slots per chunk.
pub const CHUNK: usize = 1024;

/// What a descriptor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Not looked at since it was opened (or inherited across exec).
    Unknown,
    /// Not a socket that mrcize translates: passed through untouched.
    Plain,
    /// An AF_MRC SOCK_STREAM socket standing in for a TCP socket.
    Mrc,
}

/// The decoded state word of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State(u32);

const KIND_MASK: u32 = 0x3;
const FAMILY_SHIFT: u32 = 8;
/// The program bound the socket (its address is in [`Slot::bound`]).
pub const F_BOUND: u32 = 1 << 16;
/// A non-blocking connect() is in progress and may fall back to TCP.
pub const F_NB_CONNECT: u32 = 1 << 17;

impl State {
    /// A state of `kind` for a program that asked for address family
    /// `family` (AF_INET or AF_INET6; 0 when not MRC).
    pub fn new(kind: Kind, family: i32) -> State {
        let k = match kind {
            Kind::Unknown => 0,
            Kind::Plain => 1,
            Kind::Mrc => 2,
        };
        State(k | ((family as u32 & 0xff) << FAMILY_SHIFT))
    }

    pub fn kind(self) -> Kind {
        match self.0 & KIND_MASK {
            1 => Kind::Plain,
            2 => Kind::Mrc,
            _ => Kind::Unknown,
        }
    }

    /// The address family the program asked for.
    pub fn family(self) -> i32 {
        ((self.0 >> FAMILY_SHIFT) & 0xff) as i32
    }

    pub fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// A socket address of up to 28 bytes (sockaddr_in or sockaddr_in6) and
/// its length, as the program passed it.
#[derive(Debug)]
pub struct AddrCell([AtomicU64; 4]);

/// Longest address an [`AddrCell`] holds.
pub const ADDR_MAX: usize = 28;

impl AddrCell {
    /// Stores `b` (truncated to [`ADDR_MAX`] bytes).
    pub fn store(&self, b: &[u8]) {
        let n = b.len().min(ADDR_MAX);
        let mut raw = [0u8; 32];
        raw[..n].copy_from_slice(&b[..n]);
        raw[31] = n as u8;
        for (i, w) in self.0.iter().enumerate() {
            let mut x = [0u8; 8];
            x.copy_from_slice(&raw[i * 8..i * 8 + 8]);
            w.store(u64::from_ne_bytes(x), Relaxed);
        }
    }

    /// The stored bytes and their length (0: none).
    pub fn load(&self) -> ([u8; ADDR_MAX], usize) {
        let mut raw = [0u8; 32];
        for (i, w) in self.0.iter().enumerate() {
            raw[i * 8..i * 8 + 8].copy_from_slice(&w.load(Relaxed).to_ne_bytes());
        }
        let mut out = [0u8; ADDR_MAX];
        out.copy_from_slice(&raw[..ADDR_MAX]);
        (out, (raw[31] as usize).min(ADDR_MAX))
    }

    fn copy_from(&self, o: &AddrCell) {
        for (a, b) in self.0.iter().zip(o.0.iter()) {
            a.store(b.load(Relaxed), Relaxed);
        }
    }

    fn clear(&self) {
        for w in &self.0 {
            w.store(0, Relaxed);
        }
    }
}

/// An option value: bit 32 set when the program set it, the value in the
/// low 32 bits.
const OPT_SET: u64 = 1 << 32;

/// The record of one descriptor.
#[derive(Debug)]
pub struct Slot {
    state: AtomicU32,
    /// Values of the options of [`crate::opts::OPTS`], by index.
    opts: [AtomicU64; N_OPTS],
    /// TCP_CONGESTION name set by the program, NUL padded (16 bytes).
    cc: [AtomicU64; 2],
    /// The address the program bound the socket to ([`F_BOUND`]).
    pub bound: AddrCell,
    /// The address of a connect() that may still fall back to TCP.
    pub dest: AddrCell,
}

impl Slot {
    pub fn state(&self) -> State {
        State(self.state.load(Relaxed))
    }

    pub fn set_flag(&self, flag: u32, on: bool) {
        if on {
            self.state.fetch_or(flag, Relaxed);
        } else {
            self.state.fetch_and(!flag, Relaxed);
        }
    }

    /// Starts a new life of the slot: a fresh descriptor of `kind`, no
    /// options set.
    pub fn reset(&self, kind: Kind, family: i32) {
        if kind == Kind::Mrc {
            for o in &self.opts {
                o.store(0, Relaxed);
            }
            for c in &self.cc {
                c.store(0, Relaxed);
            }
            self.bound.clear();
            self.dest.clear();
        }
        self.state.store(State::new(kind, family).0, Relaxed);
    }

    /// Marks the descriptor closed.
    pub fn clear(&self) {
        self.state.store(0, Relaxed);
    }

    /// Makes this slot a copy of `o` (dup(), accept() inheriting the
    /// listener's options).
    pub fn copy_from(&self, o: &Slot) {
        for (a, b) in self.opts.iter().zip(o.opts.iter()) {
            a.store(b.load(Relaxed), Relaxed);
        }
        for (a, b) in self.cc.iter().zip(o.cc.iter()) {
            a.store(b.load(Relaxed), Relaxed);
        }
        self.bound.copy_from(&o.bound);
        self.dest.copy_from(&o.dest);
        self.state.store(o.state.load(Relaxed), Relaxed);
    }

    /// The value the program set for option `i`, if it set one.
    pub fn opt(&self, i: usize) -> Option<i32> {
        let v = self.opts.get(i)?.load(Relaxed);
        (v & OPT_SET != 0).then_some(v as u32 as i32)
    }

    /// Records option `i` (None: back to the default).
    pub fn set_opt(&self, i: usize, v: Option<i32>) {
        if let Some(o) = self.opts.get(i) {
            o.store(v.map_or(0, |v| OPT_SET | u64::from(v as u32)), Relaxed);
        }
    }

    /// The TCP_CONGESTION name the program set (NUL padded; all zero if
    /// none).
    pub fn cc(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.cc[0].load(Relaxed).to_ne_bytes());
        b[8..].copy_from_slice(&self.cc[1].load(Relaxed).to_ne_bytes());
        b
    }

    pub fn set_cc(&self, name: &[u8]) {
        let mut b = [0u8; 16];
        let n = name.len().min(15);
        b[..n].copy_from_slice(&name[..n]);
        let w = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_ne_bytes(x)
        };
        self.cc[0].store(w(0), Relaxed);
        self.cc[1].store(w(8), Relaxed);
    }
}

// A constant only to initialise the array below.
#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<Slot> = AtomicPtr::new(ptr::null_mut());
static CHUNKS: [AtomicPtr<Slot>; MAX_FDS / CHUNK] = [NO_CHUNK; MAX_FDS / CHUNK];

const CHUNK_BYTES: usize = CHUNK * std::mem::size_of::<Slot>();

fn index(fd: i32) -> Option<(usize, usize)> {
    let fd = usize::try_from(fd).ok().filter(|fd| *fd < MAX_FDS)?;
    Some((fd / CHUNK, fd % CHUNK))
}

/// The slot of `fd` if its chunk exists.
pub fn get(fd: i32) -> Option<&'static Slot> {
    let (c, i) = index(fd)?;
    let p = CHUNKS[c].load(std::sync::atomic::Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null chunk pointer points to CHUNK slots mapped for the
    // life of the process (chunks are never unmapped); i < CHUNK. Slots
    // hold only atomics, so shared references to them are sound.
    Some(unsafe { &*p.add(i) })
}

/// The slot of `fd`, mapping its chunk if needed. None if `fd` is out of
/// range or the memory cannot be had.
pub fn get_or_alloc(fd: i32) -> Option<&'static Slot> {
    if let Some(s) = get(fd) {
        return Some(s);
    }
    let (c, _) = index(fd)?;
    // SAFETY: an anonymous private mapping; the kernel zero-fills it, and
    // all-zero is a valid Slot (atomics holding 0).
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            CHUNK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let p = p as *mut Slot;
    use std::sync::atomic::Ordering::{AcqRel, Acquire};
    if let Err(_other) = CHUNKS[c].compare_exchange(ptr::null_mut(), p, AcqRel, Acquire) {
        // Another thread mapped the chunk first; use its chunk.
        // SAFETY: p is our own mapping of CHUNK_BYTES, not shared.
        unsafe { libc::munmap(p as *mut libc::c_void, CHUNK_BYTES) };
    }
    get(fd)
}

/// Records that `new` is a duplicate of `old` (dup(), dup2(), dup3(),
/// F_DUPFD). Nothing is recorded in a vfork() child (see
/// [`crate::config::borrowed_memory`]).
pub fn dup(old: i32, new: i32) {
    let tracked = |fd| get(fd).is_some_and(|s| s.state().kind() != Kind::Unknown);
    if (tracked(old) || tracked(new)) && crate::config::borrowed_memory() {
        return;
    }
    match get(old) {
        Some(o) if o.state().kind() != Kind::Unknown => {
            if let Some(n) = get_or_alloc(new) {
                n.copy_from(o);
            }
        }
        _ => forget(new),
    }
}

/// Forgets what was known about `fd` (closed, or replaced); not in a
/// vfork() child.
pub fn forget(fd: i32) {
    if let Some(s) = get(fd) {
        if s.state().kind() != Kind::Unknown && !crate::config::borrowed_memory() {
            s.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Descriptor numbers far above what the test process opens, so that
    // the tests do not depend on real descriptors.
    const A: i32 = 900_001;
    const B: i32 = 900_002;

    #[test]
    fn state_word() {
        let s = State::new(Kind::Mrc, libc::AF_INET6);
        assert_eq!(s.kind(), Kind::Mrc);
        assert_eq!(s.family(), libc::AF_INET6);
        assert!(!s.has(F_BOUND));
        assert_eq!(State::new(Kind::Plain, 0).kind(), Kind::Plain);
        assert_eq!(State(0).kind(), Kind::Unknown);
    }

    #[test]
    fn slots_and_dup() {
        assert!(get(-1).is_none());
        assert!(get_or_alloc(MAX_FDS as i32).is_none());
        let a = get_or_alloc(A).expect("slot");
        a.reset(Kind::Mrc, libc::AF_INET);
        a.set_opt(3, Some(-5));
        a.set_cc(b"reno");
        a.bound.store(&[1, 2, 3]);
        a.set_flag(F_BOUND, true);
        assert_eq!(a.opt(3), Some(-5));
        assert_eq!(a.opt(4), None);
        dup(A, B);
        let b = get(B).expect("dup slot");
        assert_eq!(b.state(), a.state());
        assert!(b.state().has(F_BOUND));
        assert_eq!(b.opt(3), Some(-5));
        assert_eq!(&b.cc()[..5], b"reno\0");
        let (addr, n) = b.bound.load();
        assert_eq!(&addr[..n], &[1, 2, 3]);
        // A new life starts with no options.
        b.reset(Kind::Mrc, libc::AF_INET6);
        assert_eq!(b.opt(3), None);
        assert_eq!(b.bound.load().1, 0);
        forget(A);
        assert_eq!(a.state().kind(), Kind::Unknown);
        // A duplicate of an unknown descriptor is unknown.
        dup(A, B);
        assert_eq!(b.state().kind(), Kind::Unknown);
    }

    #[test]
    fn addr_cell_truncates() {
        let c = AddrCell([
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
        ]);
        c.store(&[7u8; 40]);
        let (b, n) = c.load();
        assert_eq!(n, ADDR_MAX);
        assert_eq!(b, [7u8; ADDR_MAX]);
    }
}
