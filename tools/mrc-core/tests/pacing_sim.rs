// SPDX-License-Identifier: GPL-2.0
//! Seeded simulations of pacing (`PathConfig::pacing`): a path's data leaves at its pacing
//! rate, in bursts of at most `PACE_BURST_NS` at that rate, so an application that writes in
//! bursts does not queue a whole window at once at the path's bottleneck.

mod common;

use common::{Sim, SimCfg, MBIT, MS, SEC};
use mrc_core::mrc_cc::CongestionControl;
use mrc_core::mrc_path::PACE_BURST_NS;

/// Messages of the bursty sender.
const COUNT: u64 = 20;

/// Message length: 64 KiB, which the path's window lets go at once.
const LEN: usize = 64 << 10;

/// Figures of one run.
#[derive(Debug)]
struct Run {
    /// Longest backlog a datagram found at the bottleneck, from the fourth message on.
    peak: u64,
    /// The path's pacing rate at the end, in bytes per second.
    rate: u64,
    /// The path's window at the end.
    cwnd: u32,
}

/// One message every 100 ms over one path of 5 ms each way behind a 1 Gbit/s bottleneck.
fn bursts(seed: u64, pacing: bool) -> Run {
    let mut cfg = SimCfg::clean(seed, 1, 5 * MS);
    cfg.paths[0].0.rate_bps = 1000 * MBIT;
    cfg.conn.path.pacing = pacing;
    cfg.close_when_done = false;
    let mut sim = Sim::new(cfg);
    let mut peak = 0;
    for i in 0..COUNT {
        let m: Vec<u8> = (0..LEN).map(|j| (i as usize * 7 + j) as u8).collect();
        sim.queue_message(0, m);
        sim.service(0);
        sim.run_to((i + 1) * 100 * MS);
        // The first messages find the window still growing.
        if i >= 3 {
            peak = peak.max(sim.net.peak_backlog.first().map_or(0, |d| d[0]));
        }
        sim.net.peak_backlog.clear();
        // Every message arrived intact, in order, within its 100 ms.
        assert_eq!(sim.nodes[1].received, sim.nodes[0].sent, "seed {seed}");
        assert_eq!(sim.nodes[1].received.len() as u64, i + 1, "seed {seed}");
    }
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert_eq!(sim.net.queue_drops, 0);
    let p = sim.nodes[0].conn.paths().get(0).expect("path");
    let run = Run {
        peak,
        rate: p.cc().pacing_rate().unwrap_or(0),
        cwnd: p.cwnd(),
    };
    eprintln!("seed {seed} pacing {pacing}: {run:?}");
    run
}

#[test]
fn paced_bursts_keep_the_bottleneck_queue_short() {
    // The links are clean, so the seed changes nothing.
    let paced = bursts(1, true);
    let unpaced = bursts(1, false);
    // Without pacing, the window lets the whole message go at once: at least 3/4 of it
    // waits at the bottleneck (measured: 67200 B).
    assert!(unpaced.cwnd as usize > LEN, "{unpaced:?}");
    assert!(unpaced.peak >= LEN as u64 * 3 / 4, "{unpaced:?}");
    // With it, no more than one burst of the pacing clock's slack and a datagram
    // (measured: 26600 B at 26.7 MB/s).
    let burst = paced.rate * PACE_BURST_NS / SEC + 1500;
    assert!(paced.cwnd as usize > LEN, "{paced:?}");
    assert!(paced.peak <= burst, "{paced:?}, burst {burst} B");
    assert!(paced.peak * 2 <= unpaced.peak, "{paced:?} {unpaced:?}");
}
