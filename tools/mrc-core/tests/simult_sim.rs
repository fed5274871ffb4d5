// SPDX-License-Identifier: GPL-2.0
//! Seeded simulations of the topology of the kernel's MPTCP selftest `simult_flows.sh`, as
//! `make bench` reproduces it: two links of their own rate and delay (netem's `rate R delay
//! D limit 50` on both ends), four paths on each plus the handshake's path on the first, and
//! a 16 MiB transfer in 16 KiB messages.
//!
//! They check that the transfer finishes within the selftest's time limit and that every
//! path's RTT estimate is its own: an acknowledgement that came back by the other link, of
//! another delay, must not make a 50 ms path look like a 30 ms one.

mod common;

use common::{describe, vm_conn, Sim, SimCfg, EV, MBIT, MS};
use mrc_core::mrc_conn::SendLimit;

/// Packets netem holds per link (`limit 50`), those in its delay line included.
const NETEM_LIMIT: u64 = 50;

/// Runs one case: link rates in Mbit/s, one-way delays in ms.
fn case(rates: [u64; 2], delays: [u64; 2]) {
    // Path 0 is the handshake's, on link 0; paths 1..=EV link 0, the rest link 1.
    let n = 1 + 2 * EV;
    let link = |i: usize| usize::from(i > EV);
    let mut cfg = SimCfg::clean(1, n, MS);
    cfg.conn = vm_conn();
    cfg.bottleneck = (0..n).map(|i| link(i) * (EV + 1)).collect();
    for (i, (c2s, s2c)) in cfg.paths.iter_mut().enumerate() {
        let (r, d) = (rates[link(i)], delays[link(i)]);
        for l in [c2s, s2c] {
            l.rate_bps = r * MBIT;
            l.delay_ns = d * MS + 50_000;
            let in_delay_line = r * MBIT * d / 1000 / 1500;
            l.queue_limit_bytes = (NETEM_LIMIT - in_delay_line) * 1500;
        }
    }
    let mut sim = Sim::new(cfg);
    for i in 0..1024usize {
        sim.queue_message(0, vec![i as u8; 16384]);
    }
    sim.service(0);
    let t0 = sim.now;
    let done = sim.run();
    let problems = sim.check_delivery();
    assert!(
        done && problems.is_empty(),
        "{problems:#?}\n{}",
        describe(&sim)
    );
    // simult_flows.sh: the time at the summed rate plus 10 % for headers, plus 50 ms.
    let limit_ms = (16u64 << 20) * 8 * 11 / 10 / (rates[0] + rates[1]) / 1000 + 50;
    // Until the last message arrived: the closing handshake and TIME_WAIT come after.
    let end = sim.nodes[1].received_at.last().copied().unwrap_or(sim.now);
    let ms = (end - t0) / MS;
    eprintln!("rates {rates:?} delays {delays:?}: {ms} ms, limit {limit_ms} ms");
    // Where the sender's time went, to the end of the run (the close included).
    let times = sim.nodes[0].conn.send_times(sim.now);
    let total = times.iter().sum::<u64>().max(1);
    let shares: Vec<String> = SendLimit::ALL
        .iter()
        .zip(times)
        .filter(|(_, t)| *t > 0)
        .map(|(l, t)| format!("{l:?} {:.1}%", t as f64 * 100.0 / total as f64))
        .collect();
    eprintln!("  sender held back by: {}", shares.join(", "));
    assert!(ms <= limit_ms, "{ms} ms\n{}", describe(&sim));
    for (i, p) in sim.nodes[0].conn.paths().iter() {
        // Both ways' delay: no answer by this path can come sooner.
        let base = 2 * delays[link(i)] * MS;
        let min = p.min_rtt_ns().unwrap_or(0);
        eprintln!(
            "  path {i}: min RTT {} us, at least {} us",
            min / 1000,
            base / 1000
        );
        assert!(
            min * 10 >= base * 8,
            "path {i}: min RTT {min} ns, base {base} ns\n{}",
            describe(&sim)
        );
    }
}

#[test]
fn balanced_bandwidth() {
    case([10, 10], [0, 0]);
}

#[test]
fn balanced_bandwidth_unbalanced_delay() {
    case([10, 10], [1, 25]);
}

#[test]
fn unbalanced_bandwidth() {
    case([10, 3], [0, 0]);
}

#[test]
fn unbalanced_bandwidth_unbalanced_delay() {
    case([10, 3], [1, 25]);
}

#[test]
fn unbalanced_bandwidth_opposed_delay() {
    case([10, 3], [25, 1]);
}
