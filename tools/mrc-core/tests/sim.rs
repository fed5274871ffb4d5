// SPDX-License-Identifier: GPL-2.0
//! Seeded end-to-end simulations of two `mrc_conn` cores over impaired links.
//!
//! Every run checks that each side received exactly the messages the other sent, intact (length
//! and CRC32C), in order and once, and that both connections closed cleanly.

mod common;

use common::{LinkCfg, Rng, Sim, SimCfg, MS, SEC, US};

fn assert_clean(sim: &Sim, finished: bool) {
    let problems = sim.check_delivery();
    assert!(
        finished && problems.is_empty(),
        "seed {}: finished={finished} t={} problems={problems:#?}\nclient {:?} {:?}\nserver {:?} {:?}\nnet {:?}",
        sim.cfg.seed,
        sim.now,
        sim.nodes[0].conn.state(),
        sim.nodes[0].conn.stats(),
        sim.nodes[1].conn.state(),
        sim.nodes[1].conn.stats(),
        sim.net,
    );
}

#[test]
fn clean_link_small_messages() {
    let mut sim = Sim::new(SimCfg::clean(1, 1, 100 * US));
    for i in 0..10 {
        sim.queue_message(0, vec![i as u8; 1 + i * 100]);
        sim.queue_message(1, vec![i as u8 ^ 0x55; 3 + i]);
    }
    let done = sim.run();
    assert_clean(&sim, done);
    assert_eq!(sim.nodes[1].received.len(), 10);
    assert_eq!(sim.nodes[0].conn.stats().retransmits, 0);
}

#[test]
fn zero_length_message() {
    let mut sim = Sim::new(SimCfg::clean(2, 1, 100 * US));
    sim.queue_message(0, Vec::new());
    sim.queue_message(0, vec![7; 10]);
    let done = sim.run();
    assert_clean(&sim, done);
    assert_eq!(sim.nodes[1].received[0].len, 0);
}

#[test]
fn one_mib_message_over_lossy_link() {
    let mut cfg = SimCfg::clean(3, 1, 200 * US);
    let (c2s, s2c) = &mut cfg.paths[0];
    for l in [c2s, s2c] {
        l.loss_ppm = 30_000;
        l.jitter_ns = 50 * US;
        l.rate_bps = 1_250_000_000;
    }
    let mut sim = Sim::new(cfg);
    let msg: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i * 7 + i / 1000) as u8)
        .collect();
    sim.queue_message(0, msg.clone());
    sim.queue_message(0, msg);
    let done = sim.run();
    assert_clean(&sim, done);
    assert!(sim.nodes[0].conn.stats().retransmits > 0);
}

#[test]
fn slow_reader_window_limits_sender() {
    let mut cfg = SimCfg::clean(4, 1, 100 * US);
    cfg.conn.rcvbuf = 64 << 10;
    cfg.conn.max_msg = 32 << 10;
    cfg.reader_delay_ns = 2 * MS;
    let mut sim = Sim::new(cfg);
    for i in 0..40 {
        sim.queue_message(0, vec![i as u8; 30_000]);
    }
    let done = sim.run();
    assert_clean(&sim, done);
    // The receiver never held more than its buffer: nothing was dropped for lack of space
    // except window probes.
    let rx = sim.nodes[1].conn.stats();
    assert!(rx.rcv_dropped <= sim.nodes[0].conn.stats().window_probes);
}

fn random_run(seed: u64) -> (Sim, bool) {
    let mut rng = Rng(seed ^ 0xA5A5_5A5A_DEAD_BEEF);
    let mut cfg = SimCfg::clean(seed, 1, 100 * US);
    let n_paths = 1 + (rng.below(4) == 0) as usize;
    cfg.paths = (0..n_paths)
        .map(|_| (LinkCfg::random(&mut rng), LinkCfg::random(&mut rng)))
        .collect();
    cfg.max_time_ns = 120 * SEC;
    let mut sim = Sim::new(cfg);
    let a = rng.range(1, 10) as usize;
    let b = rng.range(0, 4) as usize;
    // Only some runs carry messages of up to 1 MiB, to keep the whole set fast.
    let max_len = if seed & 3 == 0 { 1 << 20 } else { 64 << 10 };
    sim.queue_random_messages(0, a, max_len);
    sim.queue_random_messages(1, b, max_len);
    let done = sim.run();
    (sim, done)
}

fn random_runs(range: std::ops::Range<u64>) {
    let mut corrupted = 0;
    let mut retx = 0;
    let (mut msgs, mut bytes, mut pkts, mut vt) = (0usize, 0usize, 0u64, 0u64);
    let first = range.start;
    for seed in range {
        let (sim, done) = random_run(seed);
        assert_clean(&sim, done);
        assert_eq!(
            sim.net.decode_errors + sim.net.udp_checksum_drops,
            sim.net.corrupted,
            "seed {seed}"
        );
        corrupted += sim.net.corrupted;
        for n in &sim.nodes {
            msgs += n.received.len();
            bytes += n.received.iter().map(|d| d.len).sum::<usize>();
        }
        pkts += sim.net.sent;
        vt += sim.now;
        retx += sim.nodes[0].conn.stats().retransmits + sim.nodes[1].conn.stats().retransmits;
    }
    eprintln!(
        "runs from {first}: {msgs} messages, {bytes} bytes, {pkts} datagrams, {retx} \
         retransmissions, {corrupted} corrupted, {} s virtual",
        vt / SEC
    );
    assert!(corrupted > 0 && retx > 0);
}

#[test]
fn seeded_runs_0() {
    random_runs(0..250);
}

#[test]
fn seeded_runs_1() {
    random_runs(250..500);
}

#[test]
fn seeded_runs_2() {
    random_runs(500..750);
}

#[test]
fn seeded_runs_3() {
    random_runs(750..1000);
}

#[test]
fn two_paths_survive_an_outage_of_one() {
    let mut cfg = SimCfg::clean(5, 2, 200 * US);
    let (c2s, s2c) = &mut cfg.paths[0];
    for l in [c2s, s2c] {
        l.outages.push((5 * MS, 300 * MS));
    }
    cfg.paths[1].0.rate_bps = 1_250_000_000;
    cfg.paths[0].0.rate_bps = 1_250_000_000;
    let mut sim = Sim::new(cfg);
    // Enough data to be still sending when the outage starts.
    for i in 0..1000 {
        sim.queue_message(0, vec![i as u8; 20_000]);
    }
    let reached = sim.run_until(|s| s.now >= 5 * MS);
    assert!(
        reached && !sim.nodes[0].conn.all_acked(),
        "done before the outage"
    );
    let done = sim.run();
    assert_clean(&sim, done);
    let c = sim.nodes[0].conn.stats();
    assert!(c.path_losses > 0 || c.rack_losses > 0, "{c:?}");
    assert!(c.rtos <= 2, "failover without waiting for timeouts: {c:?}");
    assert!(
        sim.nodes[0]
            .conn
            .paths()
            .get(0)
            .unwrap()
            .counters()
            .pkts_sent
            > 0
    );
}

#[test]
fn many_small_messages_keep_unacknowledged_ids_within_the_ring() {
    // Thousands of tiny messages through a lossy link: the window holds far more than
    // MSG_QUEUE of them, yet no more than MSG_QUEUE may be unacknowledged at once (the glue
    // checks), or the kernel's ring of message buffers would overwrite one still needed.
    let mut cfg = SimCfg::clean(1, 1, 500 * US);
    cfg.paths[0].0.loss_ppm = 20_000;
    let mut sim = Sim::new(cfg);
    for i in 0..3000 {
        sim.queue_message(0, vec![i as u8; 1 + i % 50]);
    }
    let done = sim.run();
    assert_clean(&sim, done);
    assert!(sim.nodes[0].conn.stats().retransmits > 0);
}

#[test]
fn large_messages_keep_held_payloads_within_the_ring() {
    // 1 MiB messages (745 packets each) with a window of several of them: the receiver holds
    // an incomplete message's payloads while later packets arrive; they must never need more
    // than WINDOW ring slots (the glue checks), or one payload would overwrite another.
    let mut cfg = SimCfg::clean(2, 1, MS);
    cfg.conn.rcvbuf = 8 << 20;
    cfg.conn.sndbuf = 8 << 20;
    cfg.paths[0].0.loss_ppm = 5_000;
    let mut sim = Sim::new(cfg);
    for i in 0..8 {
        sim.queue_message(0, vec![i as u8; 1 << 20]);
    }
    let done = sim.run();
    assert_clean(&sim, done);
}
