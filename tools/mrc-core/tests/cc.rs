// SPDX-License-Identifier: GPL-2.0
//! Unit tests of the per-path congestion controllers in `mrc_cc.rs`.

use mrc_core::mrc_cc::{
    Cc, CcKind, CongestionControl, Delay, Reno, DEFAULT_DELAY_TARGET_NS, MAX_CWND, MIN_MSS,
};

const MSS: u32 = 1000;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Sends one full window in MSS packets at `now`, acknowledges all of it at
/// `now + rtt` with the given RTT sample and ECN flag, and returns that time.
fn round<C: CongestionControl>(cc: &mut C, now: u64, rtt: u64, ece: bool) -> u64 {
    let pkts = cc.cwnd() / MSS;
    for _ in 0..pkts {
        cc.on_packet_sent(now, MSS);
    }
    let t = now + rtt;
    for _ in 0..pkts {
        cc.on_ack(t, MSS, Some(rtt), ece);
    }
    t
}

#[test]
fn kind_names_round_trip() {
    assert_eq!(CcKind::from_name("reno"), Some(CcKind::Reno));
    assert_eq!(CcKind::from_name("delay"), Some(CcKind::Delay));
    assert_eq!(CcKind::from_name(" Delay\n"), Some(CcKind::Delay));
    assert_eq!(CcKind::from_name("cubic"), None);
    assert_eq!(CcKind::from_name(""), None);
    assert_eq!(CcKind::default(), CcKind::Delay);
    for k in [CcKind::Reno, CcKind::Delay] {
        assert_eq!(CcKind::from_name(k.name()), Some(k));
        assert_eq!(Cc::new(k, MSS).kind(), k);
    }
}

#[test]
fn initial_window_and_mss_clamp() {
    assert_eq!(Reno::new(MSS).cwnd(), 10 * MSS);
    assert_eq!(Delay::new(MSS).cwnd(), 10 * MSS);
    let r = Reno::new(0);
    assert_eq!(r.mss(), MIN_MSS);
    assert_eq!(r.cwnd(), 10 * MIN_MSS);
    assert!(r.in_slow_start());
}

#[test]
fn reno_slow_start_doubles_per_rtt() {
    let mut cc = Reno::new(MSS);
    let mut now = 0;
    let mut expect = 10 * MSS;
    for _ in 0..5 {
        assert_eq!(cc.cwnd(), expect);
        now = round(&mut cc, now, 100 * US, false);
        expect *= 2;
    }
    assert_eq!(cc.cwnd(), 320 * MSS);
    assert!(cc.in_slow_start());
}

#[test]
fn reno_does_not_grow_when_application_limited() {
    let mut cc = Reno::new(MSS);
    for i in 0..100 {
        // One packet in flight at a time: far below the window.
        cc.on_packet_sent(i * MS, MSS);
        cc.on_ack(i * MS + 100 * US, MSS, Some(100 * US), false);
    }
    assert_eq!(cc.cwnd(), 10 * MSS);
}

#[test]
fn reno_halves_on_loss_once_per_rtt() {
    let mut cc = Reno::new(MSS);
    let rtt = 100 * US;
    let mut now = round(&mut cc, 0, rtt, false);
    now = round(&mut cc, now, rtt, false);
    assert_eq!(cc.cwnd(), 40 * MSS);
    cc.on_loss(now, MSS);
    assert_eq!(cc.cwnd(), 20 * MSS);
    assert_eq!(cc.ssthresh(), 20 * MSS);
    assert!(!cc.in_slow_start());
    // More losses of the same window change nothing.
    cc.on_loss(now + 10 * US, MSS);
    cc.on_loss(now + rtt - 1, MSS);
    assert_eq!(cc.cwnd(), 20 * MSS);
    // One RTT later a new loss is a new congestion event.
    cc.on_loss(now + rtt, MSS);
    assert_eq!(cc.cwnd(), 10 * MSS);
}

#[test]
fn reno_congestion_avoidance_adds_one_mss_per_rtt() {
    let mut cc = Reno::new(MSS);
    let rtt = 100 * US;
    let mut now = round(&mut cc, 0, rtt, false);
    cc.on_loss(now, MSS);
    let base = cc.cwnd();
    assert_eq!(base, 10 * MSS);
    // The RTT after the decrease is recovery: no growth.
    now += rtt;
    for i in 1..=5u32 {
        now = round(&mut cc, now, rtt, false);
        assert_eq!(cc.cwnd(), base + i * MSS, "round {i}");
    }
}

#[test]
fn reno_ecn_halves_like_loss() {
    let mut cc = Reno::new(MSS);
    round(&mut cc, 0, 100 * US, true);
    assert_eq!(cc.cwnd(), 5 * MSS);
}

#[test]
fn reno_min_cwnd_and_rto() {
    let mut cc = Reno::new(MSS);
    let mut now = 0;
    for _ in 0..20 {
        cc.on_loss(now, MSS);
        now += 10 * MS;
    }
    assert_eq!(cc.cwnd(), 2 * MSS);
    let mut cc = Reno::new(MSS);
    let now = round(&mut cc, 0, 100 * US, false);
    cc.on_rto(now);
    assert_eq!(cc.cwnd(), 2 * MSS);
    assert_eq!(cc.ssthresh(), 10 * MSS);
    assert!(cc.in_slow_start());
    // Slow start resumes right after the timeout, up to ssthresh.
    let mut t = now;
    for _ in 0..5 {
        t = round(&mut cc, t, 100 * US, false);
    }
    assert!(
        cc.cwnd() >= 10 * MSS && cc.cwnd() <= 12 * MSS,
        "{}",
        cc.cwnd()
    );
}

#[test]
fn delay_fast_start_grows_while_on_target() {
    let mut cc = Delay::new(MSS);
    let mut now = 0;
    for _ in 0..4 {
        now = round(&mut cc, now, 50 * US, false);
    }
    assert_eq!(cc.cwnd(), 160 * MSS);
    assert!(cc.in_slow_start());
    assert_eq!(cc.min_rtt_ns(), Some(50_000));
}

#[test]
fn delay_target_scales_with_base_rtt() {
    let mut cc = Delay::new(MSS);
    assert_eq!(cc.target_ns(), DEFAULT_DELAY_TARGET_NS);
    round(&mut cc, 0, 10 * MS, false);
    assert_eq!(cc.target_ns(), 5_000_000);
    let cc = Delay::with_target(MSS, 7_000);
    assert_eq!(cc.target_ns(), 7_000);
}

#[test]
fn delay_decreases_on_excess_delay_once_per_rtt() {
    let mut cc = Delay::new(MSS);
    let base = 50 * US;
    let mut now = round(&mut cc, 0, base, false);
    now = round(&mut cc, now, base, false);
    assert_eq!(cc.cwnd(), 40 * MSS);
    // Queueing below the 100 us target: still growing.
    now = round(&mut cc, now, base + 90 * US, false);
    assert_eq!(cc.cwnd(), 80 * MSS);
    // 400 us of queueing. The queue is measured by the smallest sample of the
    // current and the previous RTT, so the first round of it still meets the
    // previous round's smaller samples and the window grows once more.
    let rtt = base + 400 * US;
    now = round(&mut cc, now, rtt, false);
    assert_eq!(cc.cwnd(), 160 * MSS);
    // Then excess 300 us of a 450 us RTT, cut 0.8 * 300/450 = 53% capped at
    // one half, once for the whole window.
    now = round(&mut cc, now, rtt, false);
    assert_eq!(cc.cwnd(), 80 * MSS);
    assert!(!cc.in_slow_start());
    // A smaller excess cuts proportionally less: past the hold-off, excess
    // 50 us of a 200 us RTT is a 20% cut.
    let now = now + 600 * US;
    cc.on_ack(now, MSS, Some(base + 150 * US), false);
    let expect = 80 * MSS - 80 * MSS * 204 / 1024;
    assert_eq!(cc.cwnd(), expect);
    // And only once per RTT.
    cc.on_ack(now + US, MSS, Some(base + 400 * US), false);
    assert_eq!(cc.cwnd(), expect);
}

#[test]
fn delay_ignores_isolated_delay_spikes() {
    // A host that stalls now and then (softirq or timers delayed) delays some
    // acknowledgements by milliseconds: the window must not shrink while
    // other samples of the same RTT show no queue.
    let mut cc = Delay::new(MSS);
    let base = 50 * US;
    let mut now = round(&mut cc, 0, base, false);
    now = round(&mut cc, now, base, false);
    now = round(&mut cc, now, base, false);
    let w = cc.cwnd();
    for _ in 0..20 {
        let pkts = cc.cwnd() / MSS;
        for _ in 0..pkts {
            cc.on_packet_sent(now, MSS);
        }
        now += base;
        // Half of each round is acknowledged after a 2 ms stall.
        for i in 0..pkts {
            let rtt = if i % 2 == 0 { base } else { base + 2 * MS };
            cc.on_ack(now, MSS, Some(rtt), false);
        }
    }
    assert!(cc.cwnd() >= w, "cwnd {} fell below {w}", cc.cwnd());
    // A standing queue of the same size is still cut.
    let before = cc.cwnd();
    for _ in 0..3 {
        now = round(&mut cc, now, base + 2 * MS, false);
    }
    assert!(cc.cwnd() < before, "cwnd {} not cut", cc.cwnd());
}

#[test]
fn delay_additive_increase_after_fast_start() {
    let mut cc = Delay::new(MSS);
    let base = 50 * US;
    let mut now = round(&mut cc, 0, base, false);
    // A queue over two RTTs: the second one's samples are the smallest recent ones.
    now = round(&mut cc, now, base + 500 * US, false);
    now = round(&mut cc, now, base + 500 * US, false);
    // Fast start ended with the first congestion signal.
    let w = cc.cwnd();
    assert!(!cc.in_slow_start());
    now += MS;
    for i in 1..=3u32 {
        now = round(&mut cc, now, base, false);
        assert_eq!(cc.cwnd(), w + i * MSS);
    }
}

#[test]
fn delay_ecn_cut_follows_marked_fraction() {
    let mut cc = Delay::new(MSS);
    let rtt = 50 * US;
    let mut now = round(&mut cc, 0, rtt, false);
    now = round(&mut cc, now, rtt, false);
    assert_eq!(cc.cwnd(), 40 * MSS);
    // The marked fraction starts at 1.0 and has decayed over two unmarked
    // windows; the cut is half of it, once for the whole marked window.
    let alpha = cc.ecn_alpha_q10();
    assert!(alpha > 800 && alpha < 1024, "alpha {alpha}");
    now = round(&mut cc, now, rtt, true);
    assert_eq!(cc.cwnd(), 40 * MSS - 40 * MSS * (alpha / 2) / 1024);
    assert!(!cc.in_slow_start());
    // Many RTTs with few marks drive the fraction down, and with it the cut.
    for _ in 0..60 {
        now += rtt;
        cc.on_packet_sent(now, MSS);
        cc.on_ack(now + rtt, MSS, Some(rtt), false);
    }
    let alpha = cc.ecn_alpha_q10();
    assert!(alpha < 100, "alpha {alpha}");
    let before = cc.cwnd();
    now += 10 * MS;
    cc.on_packet_sent(now, MSS);
    cc.on_ack(now + rtt, MSS, Some(rtt), true);
    let cut = before - cc.cwnd();
    assert!(cut > 0 && cut < before / 10, "cut {cut} of {before}");
}

#[test]
fn delay_loss_halves_and_rto_restarts() {
    let mut cc = Delay::new(MSS);
    let now = round(&mut cc, 0, 50 * US, false);
    cc.on_loss(now, MSS);
    assert_eq!(cc.cwnd(), 10 * MSS);
    cc.on_loss(now + 1, MSS);
    assert_eq!(cc.cwnd(), 10 * MSS);
    cc.on_rto(now + 10 * MS);
    assert_eq!(cc.cwnd(), 2 * MSS);
    assert!(cc.in_slow_start());
}

/// Grows a controller of `kind` to 40 MSS, declares `losses` packets of one window lost and
/// then proves `needless` of them needless; returns the window before and after.
fn cut_then_undo(kind: CcKind, losses: u32, needless: u32) -> (u32, u32) {
    let mut cc = Cc::new(kind, MSS);
    let rtt = 100 * US;
    let mut now = 0;
    while cc.cwnd() < 40 * MSS {
        now = round(&mut cc, now, rtt, false);
    }
    let before = cc.cwnd();
    for i in 0..losses {
        cc.on_loss(now + u64::from(i), MSS);
    }
    assert!(cc.cwnd() < before, "{kind:?}: a loss cuts the window");
    for _ in 0..needless {
        cc.on_needless_loss();
    }
    (before, cc.cwnd())
}

#[test]
fn needless_losses_undo_the_cut() {
    for kind in [CcKind::Reno, CcKind::Delay] {
        let (before, after) = cut_then_undo(kind, 3, 3);
        assert_eq!(after, before, "{kind:?}: every loss was needless");
        let (before, after) = cut_then_undo(kind, 3, 2);
        assert_eq!(after, before / 2, "{kind:?}: one loss may be real");
        // Nothing to undo: a needless loss reported without a cut changes nothing.
        let mut cc = Cc::new(kind, MSS);
        cc.on_needless_loss();
        assert_eq!(cc.cwnd(), 10 * MSS);
    }
    // A timeout after the cut is not undone.
    let mut cc = Reno::new(MSS);
    let now = round(&mut cc, 0, 100 * US, false);
    cc.on_loss(now, MSS);
    cc.on_rto(now + 10 * MS);
    cc.on_needless_loss();
    assert_eq!(cc.cwnd(), 2 * MSS);
    // Nor is a decrease for ECN that came after it.
    let mut cc = Reno::new(MSS);
    let now = round(&mut cc, 0, 100 * US, false);
    cc.on_loss(now, MSS);
    assert_eq!(cc.cwnd(), 10 * MSS);
    let now = round(&mut cc, now + 100 * US, 100 * US, true);
    assert_eq!(cc.cwnd(), 5 * MSS);
    cc.on_needless_loss();
    assert_eq!(cc.cwnd(), 5 * MSS, "{now}");
}

#[test]
fn delay_min_cwnd_under_persistent_congestion() {
    let mut cc = Delay::new(MSS);
    let mut now = 0;
    for _ in 0..50 {
        now = round(&mut cc, now, 50 * US, true);
        cc.on_ack(now, MSS, Some(10 * MS), false);
        now += 20 * MS;
    }
    assert_eq!(cc.cwnd(), 2 * MSS);
}

#[test]
fn delay_base_rtt_expires_after_route_change() {
    let mut cc = Delay::new(MSS);
    cc.on_ack(0, MSS, Some(20 * US), false);
    assert_eq!(cc.min_rtt_ns(), Some(20_000));
    // A longer route: within the window the old base is kept.
    cc.on_ack(MS, MSS, Some(2 * MS), false);
    assert_eq!(cc.min_rtt_ns(), Some(20_000));
    cc.on_ack(11_000 * MS, MSS, Some(2 * MS), false);
    assert_eq!(cc.min_rtt_ns(), Some(2_000_000));
}

#[test]
fn cc_dispatch_reset_and_pacing() {
    for kind in [CcKind::Reno, CcKind::Delay] {
        let mut cc = Cc::new(kind, MSS);
        assert_eq!(cc.pacing_rate(), None);
        let now = round(&mut cc, 0, 100 * US, false);
        assert_eq!(cc.cwnd(), 20 * MSS);
        // 20 kB per 100 us is 200 MB/s; the hint is twice that.
        assert_eq!(cc.pacing_rate(), Some(400_000_000));
        cc.on_loss(now, MSS);
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.pacing_rate(), Some(200_000_000));
        cc.reset();
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert!(cc.in_slow_start());
        assert_eq!(cc.kind(), kind);
        assert_eq!(cc.mss(), MSS);
    }
}

/// Tiny deterministic generator, so the test needs no extra crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn arbitrary_event_sequences_keep_window_in_bounds() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for kind in [CcKind::Reno, CcKind::Delay] {
        for mss in [0, 1, 1400, 9000, u32::MAX] {
            let mut cc = Cc::new(kind, mss);
            let min = cc.mss() * 2;
            let mut now = 0u64;
            for _ in 0..20_000 {
                let r = rng.next();
                // Mostly forward, sometimes backwards or huge jumps.
                now = match r % 16 {
                    0 => now.wrapping_sub(r >> 40),
                    1 => u64::MAX - (r >> 50),
                    _ => now.saturating_add((r >> 8) % 500_000),
                };
                let bytes = match (r >> 4) % 4 {
                    0 => 0,
                    1 => u32::MAX,
                    _ => (r >> 20) as u32 % 10_000,
                };
                match (r >> 12) % 5 {
                    0 | 1 => cc.on_packet_sent(now, bytes),
                    2 => {
                        let rtt = match (r >> 24) % 4 {
                            0 => None,
                            1 => Some(0),
                            2 => Some(u64::MAX),
                            _ => Some((r >> 30) % 5_000_000),
                        };
                        cc.on_ack(now, bytes, rtt, r & (1 << 40) != 0)
                    }
                    3 => cc.on_loss(now, bytes),
                    _ => {
                        if r & 127 == 0 {
                            cc.on_rto(now)
                        }
                    }
                }
                let w = cc.cwnd();
                assert!(w >= min && w <= MAX_CWND, "{kind:?} mss {mss}: cwnd {w}");
                let _ = cc.pacing_rate();
            }
        }
    }
}
