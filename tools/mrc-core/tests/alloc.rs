// SPDX-License-Identifier: GPL-2.0
//! Memory of a connection's paths: the first chunk of slots inline, the others allocated a
//! chunk at a time as paths are added, freed as their chunks empty, and an allocation failure
//! that refuses a path cleanly.
//!
//! `mrc_alloc::fail_after` acts on the whole process (this test binary), so the tests here
//! take turns.

use std::sync::{Mutex, MutexGuard};

use mrc_core::mrc_alloc;
use mrc_core::mrc_conn::{Conn, ConnConfig, ConnPath, State};
use mrc_core::mrc_path::PATH_CHUNK as CHUNK;
use mrc_core::mrc_path::{PathConfig, PathIds, PathState, PathTable, MAX_PATHS};
use mrc_core::mrc_proto::Endpoint;
use mrc_core::mrc_slots::Slots;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the test alone among these, with every allocation allowed.
fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    mrc_alloc::fail_after(usize::MAX);
    guard
}

fn ids(n: u32) -> PathIds {
    PathIds {
        path_id: n,
        plane: (n % 4) as u8,
        entropy: 49152 + n as u16,
    }
}

/// Adds paths to `c` until it has `n`.
fn grow_to(c: &mut Conn, n: usize) {
    while c.paths().len() < n {
        let id = c.paths().len() as u32;
        assert!(c.paths_mut().add(0, ids(id), false).is_some());
    }
}

#[test]
fn memory_grows_with_paths() {
    let _serial = serial();
    let mut c = Box::new(Conn::new(ConnConfig::default()));
    assert_eq!((c.paths().chunks(), c.paths().heap_bytes()), (0, 0));
    let mut bytes = [0; 4];
    for (k, n) in [1, 4, 16, MAX_PATHS].into_iter().enumerate() {
        grow_to(&mut c, n);
        let chunks = n.saturating_sub(CHUNK).div_ceil(CHUNK);
        assert_eq!(c.paths().chunks(), chunks, "{n} paths");
        bytes[k] = c.paths().heap_bytes();
        eprintln!(
            "{n} paths: Conn {} B + {chunks} chunks = {} B",
            std::mem::size_of::<Conn>(),
            std::mem::size_of::<Conn>() + bytes[k]
        );
    }
    // The first `CHUNK` paths take the connection's inline chunk; then memory grows in step
    // with the paths.
    let chunk = PathTable::<ConnPath>::CHUNK_BYTES;
    assert_eq!((bytes[0], bytes[1]), (0, 0));
    assert_eq!(bytes[2], chunk);
    assert_eq!(bytes[3], (MAX_PATHS - CHUNK).div_ceil(CHUNK) * chunk);
    // A chunk fills most of the 4 KiB kmalloc size class it is made for.
    assert!((3584..=4096).contains(&chunk), "a chunk is {chunk} B");
    // All 256 paths work as one.
    assert_eq!(c.paths().len(), MAX_PATHS);
    assert_eq!(c.paths().iter().count(), MAX_PATHS);
    assert_eq!(c.paths().find(MAX_PATHS as u32 - 1), Some(MAX_PATHS - 1));
    assert!(c.paths_mut().add(0, ids(999), false).is_none());
}

#[test]
fn emptied_chunks_are_freed() {
    let _serial = serial();
    let mut t = PathTable::new(PathConfig::default());
    for i in 0..4 * CHUNK as u32 {
        assert_eq!(t.add(0, ids(i), false), Some(i as usize));
    }
    assert_eq!(t.chunks(), 3);
    // Emptying a middle chunk frees it; the others stay, and so does the scan bound.
    for i in 2 * CHUNK..3 * CHUNK {
        assert!(t.remove(i));
    }
    assert_eq!(t.chunks(), 2);
    assert_eq!(t.index_end(), 4 * CHUNK);
    assert_eq!(t.iter().count(), 3 * CHUNK);
    assert!(t.iter().all(|(i, _)| !(2 * CHUNK..3 * CHUNK).contains(&i)));
    // A new path takes the lowest free index, in a fresh chunk.
    assert_eq!(t.add(0, ids(100), false), Some(2 * CHUNK));
    assert_eq!(t.chunks(), 3);
    assert_eq!(t.find(100), Some(2 * CHUNK));
    // Taking the rest down frees everything.
    for i in 0..4 * CHUNK {
        t.remove(i);
    }
    assert_eq!((t.chunks(), t.heap_bytes(), t.index_end()), (0, 0, 0));
    assert!(t.is_empty());
}

#[test]
fn sparse_paths_are_all_scanned() {
    let _serial = serial();
    let mut t = PathTable::new(PathConfig::default());
    for i in 0..MAX_PATHS as u32 {
        t.add(0, ids(i), false);
    }
    for i in 0..MAX_PATHS {
        if i != 3 && i != MAX_PATHS - 2 {
            t.remove(i);
        }
    }
    // Path 3 is in the inline chunk; only the last path's chunk is left allocated.
    assert_eq!(t.chunks(), 1);
    assert_eq!(t.index_end(), MAX_PATHS - 1);
    let seen: Vec<usize> = t.iter().map(|(i, _)| i).collect();
    assert_eq!(seen, [3, MAX_PATHS - 2]);
    assert_eq!(t.paths_in_state(PathState::Active), 2);
    assert!(t.pick_path(0, 1000).is_some());
}

#[test]
fn allocation_failure_refuses_the_path() {
    let _serial = serial();
    let mut t = PathTable::new(PathConfig::default());
    // The inline chunk needs no memory.
    mrc_alloc::fail_after(0);
    for i in 0..CHUNK as u32 {
        assert_eq!(t.add(0, ids(i), false), Some(i as usize));
    }
    // The next path needs a new chunk, and none can be had: the path is refused, the table
    // is as it was.
    assert_eq!(t.add(0, ids(50), false), None);
    assert_eq!(t.add_unvalidated(0, ids(51), false), None);
    assert_eq!((t.len(), t.chunks(), t.index_end()), (CHUNK, 0, CHUNK));
    assert_eq!(t.find(50), None);
    // A path whose slot is in a chunk already there needs no memory.
    assert!(t.remove(3));
    assert_eq!(t.add(0, ids(52), false), Some(3));
    assert!(t.pick_path(0, 1000).is_some());
    // Once memory is back, so are new chunks.
    mrc_alloc::fail_after(usize::MAX);
    assert_eq!(t.add(0, ids(53), false), Some(CHUNK));
    assert_eq!(t.chunks(), 1);

    // A connection whose next path cannot be allocated refuses it, and stays usable.
    let mut c = Box::new(Conn::new(ConnConfig::default()));
    grow_to(&mut c, CHUNK);
    mrc_alloc::fail_after(0);
    assert_eq!(c.paths_mut().add(0, ids(100), false), None);
    let peer = Endpoint::v4([10, 0, 0, 2], 4796, false);
    assert_eq!(c.add_peer_path(0, ids(101), false, &peer), None);
    assert_eq!(c.paths().len(), CHUNK);
    assert_eq!(c.state(), State::Idle);
    mrc_alloc::fail_after(usize::MAX);
    assert_eq!(c.add_peer_path(0, ids(101), false, &peer), Some(CHUNK));
    assert_eq!(c.paths().len(), CHUNK + 1);
}

#[test]
fn slots_retain_and_iterate() {
    let _serial = serial();
    let mut s: Slots<u32, 4, 3> = Slots::new();
    assert_eq!(Slots::<u32, 4, 3>::CAPACITY, 16);
    assert_eq!(s.first_free(), Some(0));
    for i in [0, 1, 5, 9, 15] {
        assert!(s.insert(i, i as u32 * 10).is_ok());
    }
    assert!(s.insert(16, 0).is_err());
    // Indices 0 to 3 are inline; 5, 9 and 15 took a chunk each.
    assert_eq!(s.chunks(), 3);
    assert_eq!(s.first_free(), Some(2));
    for (_, v) in s.iter_mut(10) {
        *v += 1;
    }
    let below_10: Vec<(usize, u32)> = s.iter(10).map(|(i, v)| (i, *v)).collect();
    assert_eq!(below_10, [(0, 1), (1, 11), (5, 51), (9, 91)]);
    assert_eq!(s.get(15), Some(&150));
    // Dropping the entries of a chunk frees it.
    s.retain(|v| *v != 51);
    assert_eq!(s.chunks(), 2);
    assert_eq!(s.first_free(), Some(2));
    assert_eq!(s.take(9), Some(91));
    assert_eq!(s.chunks(), 1);
    // The inline chunk is never freed, and needs no memory.
    assert_eq!(s.take(0), Some(1));
    assert_eq!(s.take(1), Some(11));
    assert_eq!(s.first_free(), Some(0));
    mrc_alloc::fail_after(0);
    assert!(s.insert(0, 7).is_ok());
    // With no memory, an index in a chunk not present cannot be filled.
    assert!(s.insert(8, 7).is_err());
    assert!(s.insert(14, 7).is_ok());
    mrc_alloc::fail_after(usize::MAX);
    assert_eq!(s.iter(16).map(|(i, _)| i).collect::<Vec<_>>(), [0, 14, 15]);
    // The end may fall inside a chunk, before the first, or past the last.
    assert_eq!(s.iter(15).map(|(i, _)| i).collect::<Vec<_>>(), [0, 14]);
    assert_eq!(s.iter(0).count(), 0);
    let all: Vec<usize> = s.iter(usize::MAX).map(|(i, _)| i).collect();
    assert_eq!(all, [0, 14, 15]);
}
