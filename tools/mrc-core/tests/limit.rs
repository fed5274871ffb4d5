// SPDX-License-Identifier: GPL-2.0
//! The token bucket that bounds answers to packets of unknown sessions, and the slots that
//! bound things of which only so many may exist.

use mrc_core::mrc_limit::{Slots, TokenBucket};

const MS: u64 = 1_000_000;

#[test]
fn a_burst_is_cut_at_the_bucket_size() {
    let mut b = TokenBucket::new(1000, 50);
    let sent = (0..10_000).filter(|_| b.allow(5 * MS)).count();
    assert_eq!(sent, 50);
    assert_eq!(b.tokens(), 0);
}

#[test]
fn a_flood_gets_the_rate_and_no_more() {
    let mut b = TokenBucket::new(1000, 50);
    // 100 packets every millisecond for one second.
    let mut sent = 0;
    for ms in 0..1000 {
        for _ in 0..100 {
            if b.allow(ms * MS) {
                sent += 1;
            }
        }
    }
    // The burst, then one a millisecond for the 999 ms after the first.
    assert_eq!(sent, 50 + 999);
}

#[test]
fn a_steady_sender_below_the_rate_is_never_refused() {
    let mut b = TokenBucket::new(1000, 1);
    // One every 1.5 ms: below 1000/s, so each finds a token, and no fraction of the
    // half-millisecond left over each time is lost.
    for i in 0..10_000u64 {
        assert!(b.allow(i * 3 * MS / 2), "refused at {i}");
    }
}

#[test]
fn tokens_come_back_with_time_up_to_the_burst() {
    let mut b = TokenBucket::new(100, 5);
    for _ in 0..5 {
        assert!(b.allow(0));
    }
    assert!(!b.allow(0));
    assert!(!b.allow(9 * MS));
    assert!(b.allow(10 * MS));
    assert!(!b.allow(10 * MS));
    // A long pause refills to the burst, not beyond.
    let sent = (0..100).filter(|_| b.allow(10_000 * MS)).count();
    assert_eq!(sent, 5);
}

#[test]
fn a_clock_that_goes_back_earns_nothing() {
    let mut b = TokenBucket::new(1000, 2);
    assert!(b.allow(100 * MS));
    assert!(b.allow(100 * MS));
    assert!(!b.allow(50 * MS));
    assert!(!b.allow(100 * MS));
    assert!(b.allow(101 * MS));
}

use mrc_core::mrc_limit::admit_rx;

#[test]
fn receive_memory_admits_up_to_the_limit() {
    assert!(admit_rx(0, 2048, 4096, false));
    assert!(admit_rx(2048, 2048, 4096, false));
    assert!(!admit_rx(2049, 2048, 4096, false));
    assert!(!admit_rx(u32::MAX, 1, 4096, false));
}

#[test]
fn the_awaited_packet_gets_in_past_the_limit_but_not_past_twice_it() {
    // Out-of-order packets filled the buffer: the one that fills the hole still gets in.
    assert!(admit_rx(4096, 2048, 4096, true));
    assert!(admit_rx(8192, 2048, 4096, true));
    // A reader that does not keep up stops even in-order packets at twice the limit.
    assert!(!admit_rx(8193, 2048, 4096, true));
}

#[test]
fn a_flood_of_empty_messages_is_bounded_by_their_real_size() {
    // Each zero-length message arrives in order and takes a whole buffer: what the
    // socket ends up holding stays within twice the limit plus one packet.
    let (limit, truesize) = (64 * 1024, 768);
    let mut held = 0u32;
    let mut taken = 0;
    for _ in 0..100_000 {
        if admit_rx(held, truesize, limit, true) {
            held += truesize;
            taken += 1;
        }
    }
    assert!(held <= 2 * limit + truesize, "held {held}");
    assert_eq!(taken, (2 * limit / truesize + 1) as usize);
}

#[test]
fn a_new_rate_applies_at_once_and_a_smaller_burst_cuts_the_savings() {
    let mut b = TokenBucket::new(1000, 50);
    b.configure(10, 5);
    let sent = (0..100).filter(|_| b.allow(0)).count();
    assert_eq!(sent, 5);
    // 10 a second: one token every 100 ms.
    assert!(!b.allow(99 * MS));
    assert!(b.allow(100 * MS));
    assert!(!b.allow(100 * MS));
}

#[test]
fn slots_stop_at_the_maximum_and_come_back() {
    let s = Slots::new();
    let taken = (0..10).filter(|_| s.take(4)).count();
    assert_eq!(taken, 4);
    assert_eq!(s.count(), 4);
    s.give();
    assert!(s.take(4));
    assert!(!s.take(4));
    // A lower maximum (the limit changed) refuses until enough are given back.
    assert!(!s.take(2));
    for _ in 0..10 {
        s.give();
    }
    assert_eq!(s.count(), 0);
    assert!(s.take(1));
}
