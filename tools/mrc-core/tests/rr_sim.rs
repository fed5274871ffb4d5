// SPDX-License-Identifier: GPL-2.0
//! Seeded simulations of request/response traffic: one small message at a time each way
//! over the four paths of one plane, as the latency benchmark and RPC-style applications
//! send. A connection always has a message in flight then, but never more data than one
//! path takes: the other paths stay idle, and how often they are probed is what a round
//! trip costs beyond its two messages.

mod common;

use common::{vm_conn, Sim, SimCfg, EV, MS, SEC, US};

/// Round trips of a run.
const COUNT: usize = 3000;

/// Figures of one run.
#[derive(Debug)]
struct Run {
    /// PROBEs sent by the client and by the server.
    probes: [u64; 2],
    /// Virtual time the round trips took.
    elapsed_ns: u64,
}

/// `COUNT` round trips of 64-byte messages over one plane of `EV` paths, `one_way` each way;
/// the server replies as soon as a request is delivered. Paths in `dead_from` stop carrying
/// anything either way from the given time on.
fn ping_pong(seed: u64, one_way: u64, dead_from: &[(usize, u64)]) -> Run {
    let mut cfg = SimCfg::clean(seed, EV, one_way);
    cfg.planes = vec![0; EV];
    cfg.conn = vm_conn();
    cfg.close_when_done = false;
    for &(path, at) in dead_from {
        cfg.paths[path].0.outages.push((at, u64::MAX));
        cfg.paths[path].1.outages.push((at, u64::MAX));
    }
    let mut sim = Sim::new(cfg);
    let start = sim.now;
    for i in 0..COUNT {
        sim.queue_message(0, vec![i as u8; 64]);
        sim.service(0);
        assert!(
            sim.run_until(|s| s.nodes[1].received.len() > i),
            "request {i} not delivered"
        );
        sim.queue_message(1, vec![!(i as u8); 64]);
        sim.service(1);
        assert!(
            sim.run_until(|s| s.nodes[0].received.len() > i),
            "reply {i} not delivered"
        );
    }
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert_eq!(sim.nodes[1].received, sim.nodes[0].sent);
    assert_eq!(sim.nodes[0].received, sim.nodes[1].sent);
    let run = Run {
        probes: [0, 1].map(|n| sim.nodes[n].conn.stats().probes_sent),
        elapsed_ns: sim.now - start,
    };
    eprintln!("seed {seed} one-way {one_way} ns dead {dead_from:?}: {run:?}");
    run
}

/// The paths left idle cost at most one PROBE per `data_per_idle_probe` messages sent, not
/// one per busy heartbeat (1 ms) each: before that limit the client sent 2076 PROBEs in 3000
/// round trips of 300 us, about one per round trip on top of its two messages.
#[test]
fn idle_paths_of_a_request_response_connection_are_probed_sparingly() {
    let per = u64::from(vm_conn().path.data_per_idle_probe);
    assert!(per > 1);
    for one_way in [50 * US, 150 * US, 500 * US] {
        let run = ping_pong(1, one_way, &[]);
        // Each end sends COUNT messages; before its paths have RTT samples, each is probed
        // as often as it needs to get one (a few per path).
        let bound = COUNT as u64 / per + 4 * EV as u64;
        for (end, &p) in run.probes.iter().enumerate() {
            assert!(
                p <= bound,
                "end {end}: {p} PROBEs, at most {bound} expected: {run:?}"
            );
        }
        // The round trips themselves stay clear of them: one message each way.
        assert!(run.elapsed_ns <= COUNT as u64 * (2 * one_way + 2 * one_way / 10) + SEC);
    }
}

/// A path that dies under request/response traffic costs the round trips about two probe
/// timeouts (10 ms floor here) at most, even when the path the requests move to died too;
/// every single path and every pair is tried. Answers on the spare paths are what lets the
/// dead one be blamed rather than the peer. With them probed at every busy heartbeat
/// (1 ms), the worst runs took 21 ms longer (one path) and 28 ms (two); with one probe per
/// 8 messages, 3 and 21 ms, and the same per 32 (the default); per 64, 1 and 51 ms, too
/// few. Earlier, with fixed intervals for the killed paths 0 and 0+1: every 4 ms, 22 and
/// 29 ms; every 8 ms, 39 and 29 ms; every 16 ms, 53 and 41 ms.
#[test]
fn request_response_survives_dead_paths() {
    let one_way = 150 * US;
    let base = ping_pong(2, one_way, &[]);
    let singles = (0..EV).map(|a| vec![(a, 100 * MS)]);
    let pairs = (0..EV).flat_map(|a| (a + 1..EV).map(move |b| vec![(a, 100 * MS), (b, 100 * MS)]));
    for dead in singles.chain(pairs) {
        let run = ping_pong(2, one_way, &dead);
        let extra = run.elapsed_ns.saturating_sub(base.elapsed_ns);
        eprintln!("{dead:?}: {} us longer", extra / US);
        assert!(
            extra <= 32 * MS,
            "{dead:?}: {} ms longer: {run:?}",
            extra / MS
        );
    }
}
