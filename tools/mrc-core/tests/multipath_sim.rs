// SPDX-License-Identifier: GPL-2.0
//! Seeded simulations of one connection over several planes: host stalls, a plane dying
//! mid-transfer, every plane down for a while and past the user timeout, idle probe load,
//! failed paths of an idle connection, and what the receiver's acknowledgement policy costs
//! and saves when packets sprayed over many paths arrive out of order.

mod common;

use common::{describe, Rng, Sim, SimCfg, MS, SEC, US};
use mrc_core::mrc_conn::{ConnError, State};
use mrc_core::mrc_path::PathState;

/// Paths per plane, as the kernel opens them by default.
const EV: usize = 4;

/// `planes` planes of `EV` paths each, 50 Mbit/s per plane split over its paths, 100 us.
fn planes(seed: u64, planes: usize) -> SimCfg {
    let mut cfg = SimCfg::clean(seed, planes * EV, 100 * US);
    for (c2s, s2c) in cfg.paths.iter_mut() {
        for l in [c2s, s2c] {
            l.rate_bps = 6_250_000 / EV as u64;
            l.jitter_ns = 50 * US;
        }
    }
    cfg
}

fn kill_plane(cfg: &mut SimCfg, plane: usize, from: u64, to: u64) {
    for (c2s, s2c) in cfg.paths[plane * EV..(plane + 1) * EV].iter_mut() {
        c2s.outages.push((from, to));
        s2c.outages.push((from, to));
    }
}

fn assert_clean(sim: &Sim, finished: bool) {
    let problems = sim.check_delivery();
    assert!(
        finished && problems.is_empty(),
        "finished={finished} problems={problems:#?}\n{}",
        describe(sim)
    );
}

fn send_mib(sim: &mut Sim, mib: usize) {
    for i in 0..mib * 16 {
        sim.queue_message(0, vec![i as u8; 64 << 10]);
    }
}

#[test]
fn stalled_hosts_keep_every_plane_up() {
    for seed in 0..8 {
        let mut cfg = planes(seed, 4);
        cfg.stalls = Some((20 * MS, 15 * MS));
        let mut sim = Sim::new(cfg);
        send_mib(&mut sim, 4);
        let done = sim.run();
        assert_clean(&sim, done);
        for n in &sim.nodes {
            for (i, p) in n.conn.paths().iter() {
                assert_ne!(p.state(), PathState::Failed, "path {i}\n{}", describe(&sim));
            }
        }
    }
}

#[test]
fn plane_dies_mid_transfer() {
    for seed in 0..8 {
        let mut cfg = planes(seed, 4);
        kill_plane(&mut cfg, 1, 100 * MS, u64::MAX);
        if seed % 2 == 1 {
            cfg.stalls = Some((20 * MS, 10 * MS));
        }
        // Kept open after the transfer: the transfer ends before three probes,
        // each waiting twice as long as the one before, can have gone unanswered
        // on the dead plane.
        cfg.close_when_done = false;
        let mut sim = Sim::new(cfg);
        send_mib(&mut sim, 4);
        sim.run_until(|s| s.now >= SEC);
        assert_eq!(sim.nodes[1].received.len(), 64, "{}", describe(&sim));
        for (i, p) in sim.nodes[0].conn.paths().iter() {
            let dead = i / EV == 1;
            assert_eq!(
                p.state() == PathState::Failed,
                dead,
                "path {i}\n{}",
                describe(&sim)
            );
        }
        sim.cfg.close_when_done = true;
        sim.service(0);
        sim.service(1);
        let done = sim.run();
        assert_clean(&sim, done);
    }
}

#[test]
fn every_plane_down_for_two_seconds_then_back() {
    let mut cfg = planes(3, 4);
    for plane in 0..4 {
        kill_plane(&mut cfg, plane, 100 * MS, 2100 * MS);
    }
    let mut sim = Sim::new(cfg);
    send_mib(&mut sim, 4);
    let done = sim.run();
    assert_clean(&sim, done);
    // When the last message arrived (the close and TIME_WAIT come after).
    let end = sim.nodes[1].received_at.last().copied().unwrap_or(0);
    assert!(end > 2100 * MS, "{}", describe(&sim));
    // With nothing in flight (every path failed and was emptied) but data
    // still unacknowledged, the failed paths are probed at the busy
    // backoff, so the transfer resumes within a few probe intervals.
    assert!(end < 2600 * MS, "{}", describe(&sim));
}

#[test]
fn every_plane_down_past_the_user_timeout() {
    let mut cfg = planes(4, 2);
    cfg.conn.user_timeout_ns = 3 * SEC;
    for plane in 0..2 {
        kill_plane(&mut cfg, plane, 100 * MS, u64::MAX);
    }
    let mut sim = Sim::new(cfg);
    send_mib(&mut sim, 4);
    let failed = sim.run_until(|s| matches!(s.nodes[0].conn.state(), State::Closed(_)));
    assert!(failed, "{}", describe(&sim));
    assert_eq!(sim.nodes[0].conn.error(), Some(ConnError::TimedOut));
    // Heard from last a little after 100 ms; fails 3 s after that, not much later.
    assert!(
        sim.now >= 3 * SEC && sim.now <= 3300 * MS,
        "failed at {} ms",
        sim.now / MS
    );
}

#[test]
fn idle_connection_probes_slowly_and_keeps_nothing_in_flight() {
    let mut cfg = planes(5, 4);
    cfg.close_when_done = false;
    let mut sim = Sim::new(cfg);
    send_mib(&mut sim, 1);
    let t0 = 2 * SEC;
    sim.run_until(|s| s.now >= t0);
    assert_eq!(sim.nodes[1].received.len(), 16, "{}", describe(&sim));
    let before: Vec<u32> = sim.nodes[0]
        .conn
        .paths()
        .iter()
        .map(|(_, p)| p.counters().probes_sent)
        .collect();
    sim.run_until(|s| s.now >= t0 + 10 * SEC);
    for n in &sim.nodes {
        for (i, p) in n.conn.paths().iter() {
            assert_eq!(p.inflight(), 0, "path {i}\n{}", describe(&sim));
            assert_eq!(p.state(), PathState::Active, "path {i}\n{}", describe(&sim));
        }
    }
    for ((i, p), b) in sim.nodes[0].conn.paths().iter().zip(before) {
        let probes = p.counters().probes_sent - b;
        assert!(probes <= 11, "path {i}: {probes} probes in 10 idle seconds");
    }
    assert!(sim.nodes[0].conn.error().is_none());
}

/// Total probes missed over a node's paths.
fn misses(sim: &Sim, node: usize) -> u32 {
    sim.nodes[node]
        .conn
        .paths()
        .iter()
        .map(|(_, p)| p.counters().probes_missed)
        .sum()
}

#[test]
fn slow_reader_is_not_a_path_failure() {
    for seed in 0..4 {
        let mut cfg = planes(seed, 4);
        cfg.reader_delay_ns = 20 * MS;
        cfg.conn.rcvbuf = 256 << 10;
        let mut sim = Sim::new(cfg);
        send_mib(&mut sim, 4);
        let done = sim.run();
        assert_clean(&sim, done);
        assert_eq!(misses(&sim, 0), 0, "{}", describe(&sim));
        let (c, r) = (sim.nodes[0].conn.stats(), sim.nodes[1].conn.stats());
        assert_eq!(c.path_losses, 0, "{}", describe(&sim));
        // Only window probes, and their resends after a timeout, go beyond the window.
        assert!(
            r.rcv_dropped <= c.window_probes + c.rto_losses,
            "{c:?} {r:?}"
        );
    }
}

#[test]
fn slow_reader_on_stalled_hosts_keeps_every_plane() {
    for seed in 0..4 {
        let mut cfg = planes(seed, 4);
        cfg.reader_delay_ns = 20 * MS;
        cfg.conn.rcvbuf = 256 << 10;
        cfg.stalls = Some((20 * MS, 10 * MS));
        let mut sim = Sim::new(cfg);
        send_mib(&mut sim, 4);
        let done = sim.run();
        assert_clean(&sim, done);
        for (i, p) in sim.nodes[0].conn.paths().iter() {
            assert_ne!(p.state(), PathState::Failed, "path {i}\n{}", describe(&sim));
        }
    }
}

#[test]
fn idle_connection_probes_failed_paths_slowly() {
    // Every plane of an idle connection goes down for 10 s: its paths fail,
    // and while nothing is in flight they are probed at the idle heartbeat,
    // not at the busy backoff's 100 ms cap.
    let mut cfg = planes(6, 2);
    cfg.close_when_done = false;
    kill_plane(&mut cfg, 0, 3 * SEC, 13 * SEC);
    kill_plane(&mut cfg, 1, 3 * SEC, 13 * SEC);
    let mut sim = Sim::new(cfg);
    send_mib(&mut sim, 1);
    sim.run_until(|s| s.now >= 3 * SEC);
    assert_eq!(sim.nodes[1].received.len(), 16, "{}", describe(&sim));
    let probes = |sim: &Sim| -> Vec<u32> {
        sim.nodes[0]
            .conn
            .paths()
            .iter()
            .map(|(_, p)| p.counters().probes_sent)
            .collect()
    };
    let before = probes(&sim);
    sim.run_until(|s| s.now >= 13 * SEC);
    for (i, p) in sim.nodes[0].conn.paths().iter() {
        assert_eq!(p.state(), PathState::Failed, "path {i}\n{}", describe(&sim));
    }
    for (i, (a, b)) in probes(&sim).iter().zip(before).enumerate() {
        assert!(a - b <= 14, "path {i}: {} probes in 10 s down", a - b);
    }
    // Back up: the connection carries data again.
    sim.run_until(|s| s.now >= 16 * SEC);
    send_mib(&mut sim, 1);
    sim.run_until(|s| s.nodes[1].received.len() == 32 || s.now >= 40 * SEC);
    assert_eq!(sim.nodes[1].received.len(), 32, "{}", describe(&sim));
    assert!(sim.nodes[0].conn.error().is_none());
}

/// A path removed mid-transfer while its last packets are lost: those packets are resent on
/// the other path and every message arrives.
#[test]
fn path_removed_mid_transfer() {
    for seed in 0..8 {
        let mut cfg = SimCfg::clean(seed, 2, 100 * US);
        for (c2s, s2c) in cfg.paths.iter_mut() {
            for l in [c2s, s2c] {
                l.rate_bps = 6_250_000;
                l.jitter_ns = 20 * US;
            }
        }
        // From 300 us before the removal on, the removed path drops what the client sends,
        // so what is in flight on it at the removal never arrives.
        let at = 50 * MS;
        cfg.paths[0].0.outages.push((at - 300 * US, u64::MAX));
        let mut sim = Sim::new(cfg);
        send_mib(&mut sim, 4);
        let id = common::path_id(0);
        let reached = sim.run_until(|s| {
            s.now >= at
                && s.nodes[0]
                    .conn
                    .paths()
                    .find(id)
                    .and_then(|i| s.nodes[0].conn.paths().get(i))
                    .is_some_and(|p| p.inflight() > 0)
        });
        assert!(reached, "no data in flight on path 0\n{}", describe(&sim));
        let now = sim.now;
        let before = sim.nodes[0].conn.stats().path_losses;
        assert_eq!(sim.nodes[0].conn.remove_path(now, id), Ok(0));
        assert!(sim.nodes[0].conn.stats().path_losses > before);
        sim.service(0);
        let done = sim.run();
        assert_clean(&sim, done);
        assert!(sim.nodes[0].conn.paths().find(id).is_none());
    }
}

/// Figures of one sprayed transfer (see [`sprayed`]).
#[derive(Debug)]
struct Spray {
    /// ACK packets the receiver sent per thousand DATA packets it received.
    acks_permille: u64,
    /// Payload delivered per second, from the first delivery to the last, in Mbit/s.
    goodput_mbit: u64,
    /// Retransmissions by the sender.
    retransmits: u64,
    /// RACK losses and hedges the sender found needless.
    needless: u64,
    /// DATA packets the network dropped: the median and longest time from the drop to the
    /// arrival of a later copy, in us.
    recovery_us: (u64, u64),
}

/// Sixteen paths over four planes, without a rate limit (the windows limit the sender),
/// 200 us one way. With `jitter`, each packet takes up to 100 us more, so packets of one
/// path overtake one another too; without, each path keeps its packets in order but has a
/// one-way delay of its own, from 150 to 250 us. Either way the packets sprayed over the
/// paths arrive out of order.
fn fast_paths(seed: u64, jitter: bool) -> SimCfg {
    let mut cfg = SimCfg::clean(seed, 4 * EV, 200 * US);
    let mut rng = Rng(seed);
    for (c2s, s2c) in cfg.paths.iter_mut() {
        let delay = rng.range(150 * US, 250 * US);
        for l in [c2s, s2c] {
            if jitter {
                l.jitter_ns = 100 * US;
            } else {
                l.delay_ns = delay;
            }
        }
    }
    cfg.planes = (0..4 * EV).map(|i| (i / EV) as u8).collect();
    cfg
}

/// Sends 8 MiB over `cfg`'s paths, every link losing `loss_ppm` of its packets; returns the
/// figures of the transfer.
fn sprayed(mut cfg: SimCfg, loss_ppm: u32) -> Spray {
    for (c2s, s2c) in cfg.paths.iter_mut() {
        c2s.loss_ppm = loss_ppm;
        s2c.loss_ppm = loss_ppm;
    }
    let seed = cfg.seed;
    let mut sim = Sim::new(cfg);
    send_mib(&mut sim, 8);
    let done = sim.run();
    assert_clean(&sim, done);
    let (c, s) = (sim.nodes[0].conn.stats(), sim.nodes[1].conn.stats());
    let at = &sim.nodes[1].received_at;
    let span = at.last().copied().unwrap_or(0) - at.first().copied().unwrap_or(0);
    let first = sim.nodes[1].received.first().map_or(0, |d| d.len as u64);
    let (_, median, longest) = sim.recovery_summary(1);
    let run = Spray {
        acks_permille: s.acks_sent * 1000 / s.data_received.max(1),
        goodput_mbit: (sim.delivered_bytes() - first) * 8 * (SEC / 1_000_000) / span.max(1),
        retransmits: c.retransmits,
        needless: c.spurious_losses + c.spurious_hedges,
        recovery_us: (median / US, longest / US),
    };
    eprintln!(
        "seed {seed} loss {loss_ppm} ppm: {run:?}, {} rtos, {} paths left Active",
        c.rtos, sim.path_downs[0]
    );
    run
}

/// Mean of `f` over `runs`.
fn mean(runs: &[Spray], f: impl Fn(&Spray) -> u64) -> u64 {
    runs.iter().map(f).sum::<u64>() / runs.len().max(1) as u64
}

/// While a packet is missing, a packet that neither opens a hole nor fills the one at the
/// cumulative ack counts towards `ack_every` instead of being acknowledged at once. Over
/// sixteen paths whose packets arrive out of order, that halves the ACKs: before, every
/// packet that found a hole was acknowledged at once, 999 or 1000 ACKs per 1000 DATA packets
/// with jitter and 903 to 946 on paths of their own delays; now 512 to 514 and 601 to 635
/// (the holes that open and close cost the difference).
#[test]
fn sprayed_transfer_acks_every_second_packet() {
    for jitter in [true, false] {
        for seed in 1..=4 {
            let run = sprayed(fast_paths(seed, jitter), 0);
            let bound = if jitter { 550 } else { 700 };
            assert!(run.acks_permille <= bound, "jitter {jitter}: {run:?}");
        }
    }
}

/// With 1 % of the packets lost both ways, fewer ACKs do not slow the sender down: the copy
/// of a dropped packet arrives as soon after the drop as before, and the goodput holds. Means
/// of 8 seeds, before and after:
///
/// | paths     | ACKs/DATA | goodput (Mbit/s) | recovery median | longest | needless/resent |
/// |-----------|-----------|------------------|-----------------|---------|-----------------|
/// | jitter    | 1.000     | 8878             | 837 us          | 1522 us | 16/466          |
/// |           | 0.507     | 8455             | 847 us          | 1630 us | 19/496          |
/// | own delay | 0.999     | 11189            | 661 us          | 1232 us | 0/495           |
/// |           | 0.515     | 11550            | 653 us          | 1124 us | 0/502           |
///
/// The goodput of one seed ranges from 7.7 to 10.7 Gbit/s with jitter; over 16 seeds the
/// means are 8787 and 8800 Mbit/s. A packet whose acknowledgement waits, while that of a
/// later one on its path has gone, loses that much of the sender's reorder window: on paths
/// whose packets overtake one another within it, RACK declares a few more of them lost for
/// nothing (38 and 53 in 16 seeds; 110 when such packets waited the delayed-ACK time),
/// which is why the wait is short.
#[test]
fn sprayed_transfer_with_loss_recovers_as_fast() {
    for jitter in [true, false] {
        let runs: Vec<Spray> = (1..=8)
            .map(|seed| sprayed(fast_paths(seed, jitter), 10_000))
            .collect();
        let acks = mean(&runs, |r| r.acks_permille);
        let goodput = mean(&runs, |r| r.goodput_mbit);
        let median = mean(&runs, |r| r.recovery_us.0);
        let longest = runs.iter().map(|r| r.recovery_us.1).max().unwrap_or(0);
        let needless: u64 = runs.iter().map(|r| r.needless).sum();
        let retransmits: u64 = runs.iter().map(|r| r.retransmits).sum();
        eprintln!(
            "jitter {jitter}: acks {acks} permille, goodput {goodput} Mbit/s, recovery median \
             {median} us longest {longest} us, {retransmits} retransmits ({needless} needless)"
        );
        let (min_goodput, max_median) = if jitter { (7_800, 950) } else { (10_000, 750) };
        assert!(acks <= 560, "{runs:#?}");
        assert!(goodput >= min_goodput, "{runs:#?}");
        assert!(median <= max_median, "{runs:#?}");
        assert!(longest <= 2_500, "{runs:#?}");
        assert!(needless * 16 <= retransmits, "{runs:#?}");
    }
}

#[test]
#[ignore = "exploration: ACK_SEEDS=n prints the figures of n seeds per case"]
fn explore_sprayed() {
    let seeds: u64 = std::env::var("ACK_SEEDS").map_or(8, |v| v.parse().unwrap());
    for jitter in [true, false] {
        for loss in [0, 10_000] {
            let runs: Vec<Spray> = (1..=seeds)
                .map(|seed| sprayed(fast_paths(seed, jitter), loss))
                .collect();
            eprintln!(
                "jitter {jitter} loss {loss}: acks {} permille, goodput {} Mbit/s, recovery \
                 median {} us, longest {} us, retransmits {}, needless {}",
                mean(&runs, |r| r.acks_permille),
                mean(&runs, |r| r.goodput_mbit),
                mean(&runs, |r| r.recovery_us.0),
                runs.iter().map(|r| r.recovery_us.1).max().unwrap_or(0),
                runs.iter().map(|r| r.retransmits).sum::<u64>(),
                runs.iter().map(|r| r.needless).sum::<u64>(),
            );
        }
    }
}
