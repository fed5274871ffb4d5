// SPDX-License-Identifier: GPL-2.0
//! Unit tests of the path table, failure detector and scheduler in `mrc_path.rs`.

use mrc_core::mrc_cc::{CcKind, CongestionControl};
use mrc_core::mrc_path::{
    HeldBack, Path, PathConfig, PathIds, PathIdx, PathSet, PathState, PathTable, StateReason,
    TickResult, Transition, UnknownProbe, MAX_PATHS, PATH_CHUNK, PROBES_REMEMBERED, PROBE_WIRE_LEN,
    VALIDATION_CREDIT_MAX, WEIGHT_DEFAULT,
};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const MSS: u32 = 1400;

fn ids(n: u32) -> PathIds {
    PathIds {
        path_id: 1000 + n,
        plane: (n % 4) as u8,
        entropy: 49152 + n as u16,
    }
}

/// A table of `n` paths with the default configuration except a 100 ms idle heartbeat, which
/// keeps the timelines below short.
fn table(n: u32) -> PathTable {
    let cfg = PathConfig {
        heartbeat_idle_ns: 100 * MS,
        ..PathConfig::default()
    };
    table_cfg(n, cfg)
}

/// A table whose paths each have one 100 us RTT sample from time 0, so that
/// probe timeouts are at their 1 ms floor.
fn primed(n: u32) -> PathTable {
    let mut t = table(n);
    for i in 0..n as PathIdx {
        t.on_probe_ack(i, 0, 100 * US);
    }
    t
}

fn table_cfg(n: u32, cfg: PathConfig) -> PathTable {
    let mut t = PathTable::new(cfg);
    for i in 0..n {
        assert_eq!(t.add(0, ids(i), false), Some(i as PathIdx));
    }
    t
}

/// Runs one tick at `now`, sends the requested probes and answers those of
/// paths not in `dead` 50 us later.
fn service(t: &mut PathTable, now: u64, dead: &[PathIdx]) -> TickResult {
    let r = t.on_tick(now);
    for i in r.probe.iter() {
        t.on_probe_sent(i, now, 1);
        if !dead.contains(&i) {
            t.on_probe_ack(i, now + 50 * US, 50 * US);
        }
    }
    r
}

/// Sends one packet on path `idx` at `at` and acknowledges it at once, so
/// the peer is seen acknowledging data elsewhere than on a silent path.
fn ack_on(t: &mut PathTable, idx: PathIdx, at: u64) {
    t.on_sent(idx, at, 1000, false);
    t.on_ack(idx, at, 1000, Some(0), false);
}

/// Follows `next_timer` from `from` to `to`, servicing each tick, and returns
/// the probe times and state changes of path `watch`.
fn run(
    t: &mut PathTable,
    from: u64,
    to: u64,
    dead: &[PathIdx],
    watch: PathIdx,
) -> (Vec<u64>, Vec<(u64, PathState)>) {
    let mut probes = Vec::new();
    let mut changes = Vec::new();
    let mut now = from;
    for _ in 0..100_000 {
        let Some(next) = t.next_timer(now) else {
            break;
        };
        if next > to {
            break;
        }
        now = next;
        let r = service(t, now, dead);
        if r.probe.contains(watch) {
            probes.push(now);
        }
        if r.changed.contains(watch) {
            changes.push((now, t.get(watch).unwrap().state()));
        }
        // Answers land 50 us after the tick; never stall on one instant.
        now += 1;
    }
    (probes, changes)
}

#[test]
fn path_is_small() {
    let size = core::mem::size_of::<Path>();
    // 248 B before the recent-RTT peak of the probe timeout and the delay controller's slack
    // and packet-size floor (32 B more, 8 KiB per table of MAX_PATHS), and the send time of
    // the latest answered packet (8 B more), and the pacing clock (8 B more), and the
    // 125 ms RTT peak that bounds the wait before hedging (16 B more, 4 KiB per table), and
    // the nonces and send times of the latest two probes (32 B more, 8 KiB per table).
    assert!(size <= 344, "Path is {size} bytes");
    // The table holds the slots of its first `PATH_CHUNK` paths and the others in chunks
    // allocated as paths are added (88 176 B with every slot inline): beside those, only the
    // configuration, counters and a pointer per chunk. A slot keeps the path's deadline and
    // RTO besides (16 B), and the table which of those are stale and the earliest deadline
    // (88 B): 3752 B before, 3992 B since; and the largest RTOs, the number of paths with
    // bytes in flight, which deadlines depend on what all paths share, which are heartbeats
    // that the probe credit decides and the earliest of those, and what the choice of a
    // path keeps between packets (272 B), so that the connection need not look at every
    // path for them: 4264 B.
    let table = core::mem::size_of::<PathTable>();
    eprintln!("Path {size} B, PathTable {table} B");
    assert!(
        table <= PATH_CHUNK * (size + 16) + 672,
        "PathTable is {table} bytes"
    );
}

#[test]
fn add_remove_find_iterate() {
    let mut t = PathTable::new(PathConfig::default());
    assert!(t.is_empty());
    assert_eq!(t.next_timer(0), None);
    for i in 0..MAX_PATHS as u32 {
        assert_eq!(t.add(5, ids(i), i % 2 == 1), Some(i as usize));
    }
    assert_eq!(t.add(5, ids(999), false), None);
    assert_eq!(t.len(), MAX_PATHS);
    assert_eq!(t.paths_in_state(PathState::Active), MAX_PATHS);
    assert_eq!(t.find(1000 + 77), Some(77));
    assert_eq!(t.find(7), None);
    let p = t.get(77).unwrap();
    assert_eq!(p.ids(), ids(77));
    assert!(p.is_backup());
    assert_eq!(p.state(), PathState::Active);
    assert_eq!(p.state_since_ns(), 5);
    assert_eq!(p.weight(), WEIGHT_DEFAULT);
    assert_eq!(p.srtt_ns(), None);
    assert_eq!(p.cwnd(), 10 * MSS);
    assert_eq!(p.cc().kind(), CcKind::Delay);
    assert!(t.remove(77));
    assert!(!t.remove(77));
    assert!(!t.remove(MAX_PATHS));
    assert_eq!(t.len(), MAX_PATHS - 1);
    assert!(t.get(77).is_none());
    assert_eq!(t.iter().count(), MAX_PATHS - 1);
    assert!(t.iter().all(|(i, p)| p.ids() == ids(i as u32)));
    // The freed slot is reused.
    assert_eq!(t.add(6, ids(500), false), Some(77));
}

#[test]
fn find_by_path_id_wherever_the_path_sits() {
    // Path ids equal to their slot (the usual order) and ids elsewhere.
    let mut t = PathTable::new(PathConfig::default());
    let id = |path_id| PathIds {
        path_id,
        plane: 0,
        entropy: 1,
    };
    assert_eq!(t.index_end(), 0);
    assert_eq!(t.add(1, id(0), false), Some(0));
    assert_eq!(t.add(1, id(1), false), Some(1));
    assert_eq!(t.add(1, id(0x1_0000), false), Some(2));
    // Slot 3 holds id 2, so the slot that id 3 suggests is wrong.
    assert_eq!(t.add(1, id(2), false), Some(3));
    assert_eq!(t.add(1, id(3), false), Some(4));
    assert_eq!(t.index_end(), 5);
    assert_eq!(t.find(0), Some(0));
    assert_eq!(t.find(1), Some(1));
    assert_eq!(t.find(2), Some(3));
    assert_eq!(t.find(3), Some(4));
    assert_eq!(t.find(0x1_0000), Some(2));
    assert_eq!(t.find(4), None);
    assert_eq!(t.find(u32::MAX), None);
    assert!(t.remove(4));
    assert_eq!(t.index_end(), 4);
    assert_eq!(t.find(3), None);
}

#[test]
fn removing_the_highest_paths_keeps_the_rest_visible() {
    // Scans stop after the highest slot in use; removals from the top move
    // that mark down past every hole, and additions move it up again.
    let mut t = table(6);
    assert!(t.remove(2));
    assert!(t.remove(5));
    assert!(t.remove(4));
    let seen: Vec<usize> = t.iter().map(|(i, _)| i).collect();
    assert_eq!(seen, vec![0, 1, 3]);
    assert_eq!(t.find(1003), Some(3));
    assert!(t.remove(3));
    assert_eq!(t.iter().map(|(i, _)| i).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(t.add(7, ids(40), false), Some(2));
    assert_eq!(t.add(7, ids(41), false), Some(3));
    assert_eq!(
        t.iter().map(|(i, _)| i).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(t.find(1041), Some(3));
    // Every path, however high its slot, is still ticked and probed.
    let res = t.on_tick(10_000 * MS);
    assert_eq!(res.probe.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
}

#[test]
fn init_in_place_equals_new() {
    let cfg = PathConfig {
        mss: 9000,
        miss_threshold: 5,
        ..PathConfig::default()
    };
    let mut slot: Box<std::mem::MaybeUninit<PathTable>> = Box::new(std::mem::MaybeUninit::uninit());
    // SAFETY: the box holds room for one `PathTable`, and a `MaybeUninit` may hold any bytes.
    unsafe { std::ptr::write_bytes(slot.as_mut_ptr(), 0xAA, 1) };
    let t = PathTable::init_in_place(&mut slot, cfg);
    assert_eq!(format!("{t:?}"), format!("{:?}", PathTable::new(cfg)));
    assert!(t.is_empty());
    assert_eq!(t.config(), &cfg);
    assert_eq!(t.iter().count(), 0);
    // Every slot is free and usable.
    for i in 0..MAX_PATHS as u32 {
        assert_eq!(t.add(0, ids(i), false), Some(i as PathIdx));
    }
    assert_eq!(t.get(3).unwrap().cwnd(), 10 * 9000);
}

#[test]
fn path_set_operations() {
    let mut s = PathSet::EMPTY;
    assert!(s.is_empty());
    for i in [0, 63, 64, 200, 255, 256, 10_000] {
        s.insert(i);
    }
    assert_eq!(s.len(), 5);
    assert!(s.contains(63) && s.contains(255) && !s.contains(256) && !s.contains(1));
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 200, 255]);
    s.remove(64);
    s.remove(9999);
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 200, 255]);
}

#[test]
fn rtt_estimation_follows_rfc6298() {
    let mut t = table(1);
    t.on_sent(0, 0, 1000, false);
    t.on_ack(0, 100 * US, 1000, Some(100 * US), false);
    let p = t.get(0).unwrap();
    assert_eq!(p.srtt_ns(), Some(100_000));
    assert_eq!(p.rttvar_ns(), Some(50_000));
    assert_eq!(p.min_rtt_ns(), Some(100_000));
    t.on_ack(0, 200 * US, 0, Some(200 * US), false);
    let p = t.get(0).unwrap();
    // rttvar = 3/4 * 50 + 1/4 * |100 - 200|; srtt = 7/8 * 100 + 1/8 * 200.
    assert_eq!(p.rttvar_ns(), Some(62_500));
    assert_eq!(p.srtt_ns(), Some(112_500));
    t.on_probe_ack(0, 300 * US, 50 * US);
    let p = t.get(0).unwrap();
    assert_eq!(p.rttvar_ns(), Some(62_500));
    assert_eq!(p.srtt_ns(), Some(104_687));
    assert_eq!(p.min_rtt_ns(), Some(50_000));
    // srtt + 4 * rttvar = 354 us, below the 1 ms floors.
    assert_eq!(t.rto_ns(0), Some(MS));
    assert_eq!(t.probe_timeout_ns(0), Some(MS));
    // Large samples raise both; the RTO is capped.
    for _ in 0..50 {
        t.on_ack(0, 400 * US, 0, Some(5_000 * MS), false);
    }
    assert_eq!(t.rto_ns(0), Some(1_000 * MS));
    // The probe timeout's cap gives way to a slow path's own RTT.
    let srtt = t.get(0).unwrap().srtt_ns().unwrap();
    let pto = t.probe_timeout_ns(0).unwrap();
    assert!(pto > srtt && pto <= 2 * srtt, "{pto} vs srtt {srtt}");
    assert_eq!(t.rto_ns(1), None);
    // Degenerate samples are clamped, not trusted blindly.
    let mut t = table(1);
    t.on_ack(0, 0, 0, Some(0), false);
    assert_eq!(t.get(0).unwrap().srtt_ns(), Some(1));
    t.on_ack(0, 0, 0, Some(u64::MAX), false);
    assert!(t.get(0).unwrap().srtt_ns().unwrap() <= u64::from(u32::MAX));
}

/// A stall shows as one long RTT sample among short ones. srtt + 4 * rttvar forgets it within
/// a few samples, and an RTO that short would fire at the next stall and declare everything
/// in flight lost; the RTO keeps 5/4 of the largest sample of the last one to two seconds.
#[test]
fn rto_remembers_recent_rtt_spikes() {
    let mut t = table(1);
    let mut now = 100 * MS;
    let sample = |t: &mut PathTable, now: u64, rtt: u64| {
        t.on_sent(0, now - rtt, 1000, false);
        t.on_ack(0, now, 1000, Some(rtt), false);
    };
    for _ in 0..20 {
        now += MS;
        sample(&mut t, now, 2 * MS);
    }
    // Steady 2 ms samples: 5/4 of them.
    assert_eq!(t.rto_ns(0), Some(2500 * US));
    now += 20 * MS;
    sample(&mut t, now, 20 * MS);
    for _ in 0..30 {
        now += MS;
        sample(&mut t, now, 2 * MS);
    }
    let srtt = t.get(0).unwrap().srtt_ns().unwrap();
    let var = t.get(0).unwrap().rttvar_ns().unwrap();
    assert!(srtt + 4 * var < 4 * MS, "srtt {srtt} rttvar {var}");
    assert_eq!(t.rto_ns(0), Some(25 * MS));
    // Two seconds of short samples later, the spike is forgotten.
    for _ in 0..2100 {
        now += MS;
        sample(&mut t, now, 2 * MS);
    }
    assert!(t.rto_ns(0).unwrap() < 4 * MS, "{:?}", t.rto_ns(0));
}

#[test]
fn counters_and_inflight() {
    let mut t = table(1);
    t.on_sent(0, 0, 1000, false);
    t.on_sent(0, 1, 1000, false);
    t.on_sent(0, 2, 500, true);
    assert_eq!(t.get(0).unwrap().inflight(), 2500);
    assert_eq!(t.total_inflight(), 2500);
    t.on_ack(0, 10, 1000, None, false);
    t.on_loss(0, 11, 1000);
    let p = t.get(0).unwrap();
    assert_eq!(p.inflight(), 500);
    assert_eq!(p.last_send_ns(), 2);
    assert_eq!(p.last_ack_ns(), 10);
    let c = p.counters();
    assert_eq!((c.bytes_sent, c.pkts_sent), (2500, 3));
    assert_eq!((c.bytes_retx, c.pkts_retx), (500, 1));
    assert_eq!((c.bytes_acked, c.pkts_acked), (1000, 1));
    assert_eq!((c.bytes_lost, c.pkts_lost), (1000, 1));
    // More acknowledged than in flight saturates at zero.
    t.on_ack(0, 12, 9000, None, false);
    assert_eq!(t.get(0).unwrap().inflight(), 0);
}

#[test]
fn idle_heartbeat_slow_when_idle_fast_when_busy() {
    // The busy path below sends 20 packets a millisecond: at the default 32 packets a
    // probe that earns one every 1.6 ms, so the credit is set not to bind here (see
    // `idle_paths_of_a_busy_connection_cost_one_probe_per_data_packets` for the credit).
    let mut t = table_cfg(
        2,
        PathConfig {
            heartbeat_idle_ns: 100 * MS,
            data_per_idle_probe: 8,
            ..PathConfig::default()
        },
    );
    // Nothing in flight anywhere: 100 ms heartbeat.
    assert_eq!(t.next_timer(0), Some(100 * MS));
    assert_eq!(t.on_tick(99 * MS), TickResult::default());
    let r = service(&mut t, 100 * MS, &[]);
    assert_eq!(r.probe.iter().collect::<Vec<_>>(), vec![0, 1]);
    assert!(r.changed.is_empty());
    let p = t.get(0).unwrap();
    assert_eq!(p.counters().probes_sent, 1);
    assert!(!p.probe_outstanding());
    assert_eq!(p.last_probe_ns(), 100 * MS);
    // Answered at 100.05 ms: next heartbeat 100 ms after the answer.
    assert_eq!(t.next_timer(100 * MS + 60 * US), Some(200 * MS + 50 * US));
    // Path 0 gets busy and keeps being acknowledged: path 1 is now probed
    // every millisecond, path 0 not at all.
    let (mut probes0, mut probes1) = (0, 0);
    let mut now = 101 * MS;
    while now < 111 * MS {
        t.on_sent(0, now, 1000, false);
        t.on_ack(0, now + 100 * US, 1000, Some(100 * US), false);
        t.on_sent(0, now + 100 * US, 1000, false);
        let r = service(&mut t, now + 100 * US, &[]);
        probes0 += usize::from(r.probe.contains(0));
        probes1 += usize::from(r.probe.contains(1));
        now += 100 * US;
        t.on_ack(0, now, 1000, Some(100 * US), false);
    }
    assert_eq!(probes0, 0);
    assert!((9..=11).contains(&probes1), "{probes1} probes");
    assert_eq!(t.paths_in_state(PathState::Active), 2);
}

/// One small message every 2 ms on path 0 of three, each answered 100 us later, for 200 ms;
/// returns the messages sent and the probes of the idle paths 1 and 2.
fn sparse_messages(mut t: PathTable) -> (u32, u32) {
    let (mut sent, mut probes) = (0u32, 0u32);
    let mut now = MS;
    while now < 201 * MS {
        t.on_sent(0, now, 100, false);
        sent += 1;
        let r = service(&mut t, now, &[]);
        assert!(!r.probe.contains(0));
        probes += r.probe.len() as u32;
        t.on_ack(0, now + 100 * US, 100, Some(100 * US), false);
        now += 2 * MS;
    }
    assert_eq!(t.paths_in_state(PathState::Active), 3);
    (sent, probes)
}

/// The busy heartbeat of the idle paths of a connection with data in flight is paid for by
/// the connection's own data: one probe per `data_per_idle_probe` data packets, after one
/// probe of each path to start with. Without the limit, every message here would have both
/// idle paths probed.
#[test]
fn idle_paths_of_a_busy_connection_cost_one_probe_per_data_packets() {
    let primed_cfg = |data_per_idle_probe| {
        let mut t = table_cfg(
            3,
            PathConfig {
                data_per_idle_probe,
                ..PathConfig::default()
            },
        );
        for i in 0..3 {
            t.on_probe_ack(i, 0, 100 * US);
        }
        t
    };
    // The default: the table starts with credit for one probe of each path (96); the
    // first message finds it full, the other 99 add one each: 195 / 32 = 6 probes.
    assert_eq!(PathConfig::default().data_per_idle_probe, 32);
    assert_eq!(sparse_messages(primed_cfg(32)), (100, 6));
    // At 8 packets a probe, (24 + 99) / 8 = 15; at 4, (12 + 99) / 4 = 27.
    assert_eq!(sparse_messages(primed_cfg(8)), (100, 15));
    assert_eq!(sparse_messages(primed_cfg(4)), (100, 27));
    assert_eq!(sparse_messages(primed_cfg(0)), (100, 200));
}

#[test]
fn busy_dead_path_goes_suspect_then_failed_with_backoff() {
    let mut t = table(2);
    t.on_sent(0, 0, 1000, false);
    t.on_ack(0, 100 * US, 1000, Some(100 * US), false);
    t.on_sent(0, 200 * US, 1000, false);
    // The peer keeps acknowledging path 1.
    ack_on(&mut t, 1, 300 * US);
    // Silent for a probe timeout (1 ms) after becoming busy.
    assert_eq!(t.next_timer(300 * US), Some(1200 * US));
    let (probes, changes) = run(&mut t, 200 * US, 300 * MS, &[0], 0);
    let p = t.get(0).unwrap();
    assert_eq!(p.state(), PathState::Failed);
    assert_eq!(p.prev_state(), PathState::Suspect);
    assert_eq!(p.state_reason(), StateReason::ProbeTimeout);
    assert_eq!(
        changes,
        vec![
            (1200 * US, PathState::Suspect),
            (7200 * US, PathState::Failed)
        ]
    );
    // Suspect: probed at once and again when each probe times out, each
    // missed probe doubling the next one's timeout. Failed: backoff doubling
    // on from four timeouts up to the 100 ms cap.
    let gaps: Vec<u64> = probes.windows(2).map(|w| (w[1] - w[0]) / US).collect();
    assert_eq!(probes[0], 1200 * US);
    assert_eq!(
        gaps,
        vec![2000, 4000, 4000, 8000, 16000, 32000, 64000, 100000]
    );
    assert_eq!(t.get(1).unwrap().state(), PathState::Active);
    assert!(p.counters().probes_missed >= 3);
}

/// Bytes that leave a path because a copy on another path was answered are no answer: a dead
/// path whose packets all get copies stays silent since its first unanswered packet, however
/// often the copies empty it, until it is heard from.
#[test]
fn released_bytes_do_not_restart_a_busy_paths_silence_clock() {
    let mut t = primed(2);
    // Path 0 sends at 1 ms; the copy's answer on path 1 releases it at 1.5 ms, and it sends
    // again at 1.6 ms, while path 1 is acknowledged for data sent later.
    t.on_sent(0, MS, 1000, false);
    t.on_released(0, 1000);
    assert_eq!(t.get(0).unwrap().inflight(), 0);
    t.on_sent(0, MS + 600 * US, 1000, false);
    ack_on(&mut t, 1, MS + 700 * US);
    // Silent since 1 ms, not 1.6 ms: one probe timeout (1 ms) later it is Suspect.
    assert_eq!(t.next_timer(MS + 700 * US), Some(2 * MS));
    let r = t.on_tick(2 * MS);
    assert!(r.changed.contains(0));
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);

    // A path heard from between the release and its next packet starts afresh.
    let mut t = primed(2);
    t.on_sent(0, MS, 1000, false);
    t.on_released(0, 1000);
    t.on_heard(0, MS + 500 * US);
    t.on_sent(0, MS + 600 * US, 1000, false);
    ack_on(&mut t, 1, MS + 700 * US);
    assert_eq!(t.next_timer(MS + 700 * US), Some(2 * MS + 600 * US));
}

/// An answer the peer held (its ACK delay) times the path without the hold, but it still
/// answers the packet when it was sent: the hold does not make the peer look as if it had
/// processed packets sent after that.
#[test]
fn held_answers_time_the_path_without_the_hold() {
    let mut t = primed(2);
    assert_eq!(t.get(1).unwrap().srtt_ns(), Some(100 * US));
    // Path 1's packet of 9.5 ms is answered at 11.5 ms after a 1.5 ms hold: a 0.5 ms sample.
    t.on_sent(0, 10 * MS, 1000, false);
    t.on_sent(1, 9 * MS + 500 * US, 1000, false);
    t.on_ack_by_way_of(
        1,
        Some(1),
        11 * MS + 500 * US,
        1000,
        Some(2 * MS),
        1500 * US,
        false,
    );
    assert_eq!(t.get(1).unwrap().srtt_ns(), Some(150 * US));
    assert_eq!(t.get(1).unwrap().min_rtt_ns(), Some(100 * US));
    // Path 0's packet of 10 ms is unanswered a probe timeout (1 ms) later, but the only
    // answer elsewhere is to a packet sent before it: path 0 is probed, not blamed.
    let r = t.on_tick(11 * MS + 500 * US);
    assert!(r.probe.contains(0) && r.changed.is_empty());
    assert_eq!(t.get(0).unwrap().missed_probes(), 0);
    // No sample is taken below the minimum RTT, whatever hold the peer claims.
    t.on_ack_by_way_of(1, Some(1), 12 * MS, 0, Some(300 * US), 10 * MS, false);
    assert_eq!(t.get(1).unwrap().min_rtt_ns(), Some(100 * US));
    assert_eq!(t.get(1).unwrap().srtt_ns(), Some((7 * 150 + 300) * US / 8));
}

/// A peer catching up after a stall acknowledges what it received first: answers to packets
/// sent before a path's own unanswered ones are no sign that the path lost them.
#[test]
fn answers_to_older_packets_do_not_make_a_busy_path_silent_alone() {
    let mut t = primed(2);
    t.on_sent(1, 4 * MS, 1000, false);
    t.on_sent(1, 5 * MS, 1000, false);
    t.on_sent(0, 5 * MS + 500 * US, 1000, false);
    // Path 1's packet of 4 ms is acknowledged at 6 ms, late: path 0 is only probed when
    // its probe timeout (1 ms) runs out.
    t.on_ack(1, 6 * MS, 1000, Some(2 * MS), false);
    let r = t.on_tick(6 * MS + 500 * US);
    assert!(r.probe.contains(0) && r.changed.is_empty());
    assert_eq!(t.get(0).unwrap().missed_probes(), 0);
    t.on_probe_sent(0, 6 * MS + 500 * US, 1);
    // The probe's answer is late too, but path 0 was answered meanwhile: still Active.
    t.on_ack(0, 7 * MS, 1000, Some(1500 * US), false);
    t.on_probe_ack(0, 7 * MS + 100 * US, 600 * US);
    assert_eq!(t.get(0).unwrap().state(), PathState::Active);
    // Path 1's packet of 5 ms is acknowledged; path 0's packet of 7.5 ms is not, and an
    // answer to path 1's packet sent after it makes path 0 Suspect once its timeout is up.
    t.on_sent(0, 7 * MS + 500 * US, 1000, false);
    t.on_sent(1, 7 * MS + 600 * US, 1000, false);
    t.on_ack(1, 8 * MS, 1000, Some(3 * MS), false);
    t.on_ack(1, 8 * MS + 100 * US, 1000, Some(500 * US), false);
    let (_, changes) = run(&mut t, 8 * MS + 100 * US, 12 * MS, &[0], 0);
    assert_eq!(changes.first().map(|c| c.1), Some(PathState::Suspect));
    assert!(changes[0].0 > 8 * MS + 600 * US, "{changes:?}");
}

#[test]
fn a_probe_of_another_connection_stands_in_for_an_active_paths_own() {
    let mut t = primed(2);
    // Path 0's network path was probed by another connection at 90 ms: its
    // own heartbeat moves from 100 ms to 190 ms; path 1's stays.
    t.on_probed_elsewhere(0, 90 * MS);
    assert_eq!(t.get(0).unwrap().last_probe_ns(), 90 * MS);
    let r = t.on_tick(100 * MS);
    assert_eq!(r.probe.iter().collect::<Vec<_>>(), vec![1]);
    t.on_probe_sent(1, 100 * MS, 1);
    t.on_probe_ack(1, 100 * MS + 50 * US, 50 * US);
    // The answer reaches the other connection; this one hears of it.
    t.on_heard(0, 90 * MS + 50 * US);
    assert_eq!(t.on_tick(189 * MS).probe.iter().count(), 0);
    // Nobody heard anything since: path 0 probes itself at 190.05 ms, and a
    // probe elsewhere no longer moves an Active path with one outstanding.
    let r = t.on_tick(190 * MS + 50 * US);
    assert_eq!(r.probe.iter().collect::<Vec<_>>(), vec![0]);
    t.on_probe_sent(0, 190 * MS + 50 * US, 1);
    t.on_probed_elsewhere(0, 190 * MS + 60 * US);
    assert_eq!(t.get(0).unwrap().last_probe_ns(), 190 * MS + 50 * US);
    // Unanswered: Suspect at its own probe timeout, and then only its own
    // answer counts.
    let r = t.on_tick(191 * MS + 50 * US);
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    assert!(r.probe.contains(0));
    t.on_probe_sent(0, 191 * MS + 50 * US, 1);
    t.on_probed_elsewhere(0, 191 * MS + 60 * US);
    t.on_heard(0, 191 * MS + 70 * US);
    assert_eq!(t.get(0).unwrap().last_probe_ns(), 191 * MS + 50 * US);
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    t.on_probe_ack(0, 191 * MS + 80 * US, 30 * US);
    assert_eq!(t.get(0).unwrap().state(), PathState::Active);
}

#[test]
fn idle_dead_path_misses_probes() {
    let mut t = primed(3);
    // Heartbeat at 100 ms, Suspect at 101 ms; each probe missed in a row
    // gives the next twice as long: Failed at 107 ms.
    let (probes, changes) = run(&mut t, 0, 107 * MS + 500 * US, &[2], 2);
    assert_eq!(probes, vec![100 * MS, 101 * MS, 103 * MS]);
    assert_eq!(
        changes,
        vec![
            (101 * MS, PathState::Suspect),
            (107 * MS, PathState::Failed)
        ]
    );
    assert_eq!(t.paths_in_state(PathState::Active), 2);
    assert_eq!(t.paths_in_state(PathState::Failed), 1);
}

/// The doubling of a missed probe's successor stops at the longest wait of a Failed
/// path's probes (100 ms): a path whose RTT is long fails in about three of its own probe
/// timeouts, not in seven.
#[test]
fn long_rtt_dead_path_fails_without_backoff() {
    let mut t = table(2);
    // One 200 ms RTT sample: a probe timeout of 400 ms (twice the smoothed RTT, which
    // caps the variance term).
    t.on_probe_ack(0, 0, 200 * MS);
    t.on_probe_ack(1, 0, 200 * MS);
    assert_eq!(t.probe_timeout_ns(0), Some(400 * MS));
    // Heartbeat at 100 ms, Suspect at 500 ms, probes that wait 400 ms each: Failed at
    // 1.3 s (with the doubling, 2.9 s).
    let (probes, changes) = run(&mut t, 0, 3 * 1000 * MS, &[0], 0);
    assert_eq!(&probes[..3], &[100 * MS, 500 * MS, 900 * MS]);
    assert_eq!(
        changes,
        vec![
            (500 * MS, PathState::Suspect),
            (1300 * MS, PathState::Failed)
        ]
    );
}

#[test]
fn probe_ack_returns_suspect_and_failed_to_active() {
    let mut t = primed(2);
    t.on_sent(0, 0, 1000, false);
    ack_on(&mut t, 1, 10);
    let r = service(&mut t, MS, &[0]);
    assert!(r.changed.contains(0) && r.probe.contains(0));
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    // A late data acknowledgement does not clear suspicion; a probe answer does.
    t.on_ack(0, MS + 10, 1000, Some(900 * US), false);
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    let tr = t.on_probe_ack(0, MS + 100 * US, 100 * US);
    assert_eq!(
        tr,
        Some(Transition {
            from: PathState::Suspect,
            to: PathState::Active,
            at_ns: MS + 100 * US
        })
    );
    assert_eq!(t.get(0).unwrap().missed_probes(), 0);
    assert_eq!(t.get(0).unwrap().state_reason(), StateReason::ProbeAnswered);
    // Busy and silent again: Failed this time. The late 900 us sample above is a recent RTT
    // peak, so the probe timeout is 5/4 of it (1.125 ms) rather than the 1 ms floor; the
    // second and third probes wait two and four of it.
    t.on_sent(0, 2 * MS, 1000, false);
    ack_on(&mut t, 1, 2 * MS + 10);
    let (_, changes) = run(&mut t, 2 * MS, 10 * MS, &[0], 0);
    assert_eq!(
        changes,
        vec![
            (3 * MS + 125 * US, PathState::Suspect),
            (9 * MS + 875 * US, PathState::Failed)
        ]
    );
    let tr = t.on_probe_ack(0, 20 * MS, 100 * US).unwrap();
    assert_eq!((tr.from, tr.to), (PathState::Failed, PathState::Active));
    let p = t.get(0).unwrap();
    assert_eq!(p.cwnd(), 10 * MSS);
    assert!(p.cc().in_slow_start());
    // A second answer is no transition.
    assert_eq!(t.on_probe_ack(0, 21 * MS, 100 * US), None);
}

#[test]
fn failed_path_window_is_reset_on_recovery() {
    let mut t = table(2);
    // Grow path 0's window, then fail it.
    let mut now = 0;
    for _ in 0..5 {
        let w = t.get(0).unwrap().cwnd();
        for _ in 0..w / MSS {
            t.on_sent(0, now, MSS, false);
        }
        now += 100 * US;
        for _ in 0..w / MSS {
            t.on_ack(0, now, MSS, Some(100 * US), false);
        }
    }
    assert!(t.get(0).unwrap().cwnd() > 100 * MSS);
    t.on_sent(0, now, MSS, false);
    run(&mut t, now, now + 10 * MS, &[0], 0);
    assert_eq!(t.get(0).unwrap().state(), PathState::Failed);
    t.on_probe_ack(0, now + 20 * MS, 100 * US);
    assert_eq!(t.get(0).unwrap().cwnd(), 10 * MSS);
}

#[test]
fn loss_burst_makes_suspect_and_acks_reset_the_count() {
    let mut t = table(2);
    for i in 0..10 {
        t.on_sent(0, i, MSS, false);
    }
    assert_eq!(t.on_loss(0, 20, MSS), None);
    assert_eq!(t.on_loss(0, 21, MSS), None);
    t.on_ack(0, 22, MSS, Some(100 * US), false);
    assert_eq!(t.on_loss(0, 23, MSS), None);
    assert_eq!(t.on_loss(0, 24, MSS), None);
    let tr = t.on_loss(0, 25, MSS).unwrap();
    assert_eq!(
        (tr.from, tr.to, tr.at_ns),
        (PathState::Active, PathState::Suspect, 25)
    );
    assert_eq!(t.get(0).unwrap().state_reason(), StateReason::LossBurst);
    // Suspect wants a probe at once.
    assert_eq!(t.next_timer(30), Some(30));
    let r = t.on_tick(30);
    assert!(r.probe.contains(0) && !r.changed.contains(0));
    // Losses on a path that is not Active change nothing.
    assert_eq!(t.on_loss(0, 31, MSS), None);
    assert_eq!(t.on_loss(9, 31, MSS), None);
}

#[test]
fn timeout_losses_are_no_loss_burst() {
    let mut t = table(2);
    for i in 0..10 {
        t.on_sent(0, i, MSS, false);
    }
    for i in 0..5 {
        t.on_timeout_loss(0, 20 + i, MSS);
    }
    let p = t.get(0).unwrap();
    assert_eq!(p.state(), PathState::Active);
    assert_eq!(p.counters().pkts_lost, 5);
    assert_eq!(p.inflight(), u64::from(5 * MSS));
    // They do not count towards a later burst either.
    assert_eq!(t.on_loss(0, 30, MSS), None);
    assert_eq!(t.on_loss(0, 31, MSS), None);
    assert!(t.on_loss(0, 32, MSS).is_some());
}

#[test]
fn active_floor_survives_loss_bursts() {
    let mut t = table(3);
    for idx in 0..3 {
        for i in 0..4 {
            t.on_loss(idx, i, MSS);
        }
    }
    // With min_active = 1 the last Active path stays Active.
    assert_eq!(t.paths_in_state(PathState::Suspect), 2);
    assert_eq!(t.get(2).unwrap().state(), PathState::Active);
    assert!(t.pick_path(10, MSS).is_some());
    let cfg = PathConfig {
        min_active: 2,
        ..PathConfig::default()
    };
    let mut t = table_cfg(3, cfg);
    for idx in 0..3 {
        for i in 0..4 {
            t.on_loss(idx, i, MSS);
        }
    }
    assert_eq!(t.paths_in_state(PathState::Active), 2);
}

#[test]
fn active_floor_yields_to_real_probe_misses() {
    // A single busy path that goes silent is probed first (nothing tells a
    // dead path from a peer that stopped acknowledging), then stays Active
    // (it is the floor) and keeps carrying data while it misses probes, and
    // fails after three misses, the probe timeout doubling with each.
    let mut t = primed(1);
    t.on_sent(0, 0, 1000, false);
    let r = service(&mut t, MS, &[0]);
    assert!(r.probe.contains(0) && r.changed.is_empty());
    assert_eq!(t.get(0).unwrap().missed_probes(), 0);
    let r = service(&mut t, 2 * MS, &[0]);
    assert!(r.probe.contains(0) && r.changed.is_empty());
    let p = t.get(0).unwrap();
    assert_eq!(p.state(), PathState::Active);
    assert_eq!(p.missed_probes(), 1);
    assert_eq!(t.pick_path(2 * MS, MSS), Some(0));
    let (_, changes) = run(&mut t, 2 * MS + 1, 10 * MS, &[0], 0);
    // Misses at 2 ms, then 2 ms later, then 4 ms later.
    assert_eq!(changes, vec![(8 * MS, PathState::Failed)]);
    assert_eq!(t.pick_path(10 * MS, MSS), None);
    // An acknowledgement while still Active clears the misses.
    let mut t = primed(1);
    t.on_sent(0, 0, 1000, false);
    service(&mut t, MS, &[0]);
    service(&mut t, 2 * MS, &[0]);
    assert_eq!(t.get(0).unwrap().missed_probes(), 1);
    t.on_ack(0, 2 * MS + 10, 1000, None, false);
    assert_eq!(t.get(0).unwrap().missed_probes(), 0);
}

#[test]
fn miss_threshold_one_fails_at_once() {
    let cfg = PathConfig {
        miss_threshold: 0,
        ..PathConfig::default()
    };
    let mut t = table_cfg(2, cfg);
    t.on_probe_ack(1, 0, 100 * US);
    t.on_sent(1, 0, 1000, false);
    ack_on(&mut t, 0, 10);
    let r = service(&mut t, MS, &[1]);
    assert!(r.changed.contains(1) && !r.probe.contains(1));
    assert_eq!(t.get(1).unwrap().state(), PathState::Failed);
    assert_eq!(t.get(1).unwrap().prev_state(), PathState::Active);
}

#[test]
fn scheduler_prefers_fast_path_and_skips_full_windows() {
    let mut t = table(2);
    t.on_probe_ack(0, 0, 100 * US);
    t.on_probe_ack(1, 0, MS);
    let mut picks = Vec::new();
    while let Some(i) = t.pick_path(0, MSS) {
        t.on_sent(i, 0, MSS, false);
        picks.push(i);
        assert!(picks.len() < 100);
    }
    // Path 0 fills its window first (its worst estimate, 200 us, beats path
    // 1's best, 1.1 ms), then path 1, then nothing has room.
    let mut expect = vec![0; 10];
    expect.extend(vec![1; 10]);
    assert_eq!(picks, expect);
    // An acknowledgement frees room on path 0 only.
    t.on_ack(0, 100 * US, MSS, Some(100 * US), false);
    assert_eq!(t.pick_path(0, MSS), Some(0));
    // A packet larger than any room waits (slow start grew path 0's window
    // by the acknowledged bytes, so it has room for two segments).
    assert_eq!(t.pick_path(0, 3 * MSS), None);
}

#[test]
fn scheduler_balances_equal_paths_and_honours_weight() {
    let mut t = table(4);
    for i in 0..4 {
        t.on_probe_ack(i, 0, 100 * US);
    }
    let mut count = [0; 4];
    for _ in 0..20 {
        let i = t.pick_path(0, MSS).unwrap();
        t.on_sent(i, 0, MSS, false);
        count[i] += 1;
    }
    assert_eq!(count, [5; 4]);
    let mut t = table(2);
    t.on_probe_ack(0, 0, 100 * US);
    t.on_probe_ack(1, 0, 100 * US);
    t.set_weight(1, 2 * WEIGHT_DEFAULT);
    assert_eq!(t.pick_path(0, MSS), Some(1));
    t.set_weight(1, 0);
    assert_eq!(t.get(1).unwrap().weight(), 1);
    assert_eq!(t.pick_path(0, MSS), Some(0));
}

#[test]
fn backup_used_only_without_active_primary() {
    let mut t = table(1);
    let b = t.add(0, ids(9), true).unwrap();
    t.on_probe_ack(0, 0, MS);
    t.on_probe_ack(b, 0, 10 * US);
    // The faster backup is ignored while the primary is Active ...
    assert_eq!(t.pick_path(0, MSS), Some(0));
    // ... even when the primary's window is full.
    for _ in 0..10 {
        t.on_sent(0, 0, MSS, false);
    }
    assert_eq!(t.pick_path(0, MSS), None);
    // Primary Suspect: the backup carries the data.
    t.set_backup(b, true);
    for i in 0..3 {
        t.on_loss(0, 10 + i, MSS);
    }
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    assert_eq!(t.pick_path(20, MSS), Some(b));
    t.on_probe_ack(0, 30, MS);
    for _ in 0..10 {
        t.on_ack(0, 31, MSS, None, false);
    }
    assert_eq!(t.pick_path(31, MSS), Some(0));
    // Unmarking the backup makes it a regular, and here faster, path.
    t.set_backup(b, false);
    assert_eq!(t.pick_path(31, MSS), Some(b));
}

#[test]
fn retransmit_avoids_the_path_it_was_lost_on() {
    let mut t = table(3);
    t.set_backup(2, true);
    t.on_probe_ack(0, 0, 100 * US);
    t.on_probe_ack(1, 0, 200 * US);
    t.on_probe_ack(2, 0, 50 * US);
    assert_eq!(t.pick_retransmit_path(10, MSS, None), Some(0));
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(0)), Some(1));
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(1)), Some(0));
    // Path 1 Suspect: the backup is next in line.
    for i in 0..3 {
        t.on_loss(1, i, MSS);
    }
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(0)), Some(2));
    // The backup full too: wait for its window rather than resend on path 0.
    for _ in 0..10 {
        t.on_sent(2, 5, MSS, false);
    }
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(0)), None);
    // With no other Active path, the original path is the last resort.
    for i in 0..3 {
        t.on_loss(2, 6 + i, MSS);
    }
    assert_eq!(t.get(2).unwrap().state(), PathState::Suspect);
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(0)), Some(0));
    // The original path not Active either: wait.
    let cfg = PathConfig {
        min_active: 0,
        ..PathConfig::default()
    };
    let mut t = table_cfg(1, cfg);
    for i in 0..3 {
        t.on_loss(0, i, MSS);
    }
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    assert_eq!(t.pick_retransmit_path(10, MSS, Some(0)), None);
    assert_eq!(t.pick_retransmit_path(10, MSS, None), None);
}

#[test]
fn suspect_and_failed_paths_get_no_new_data() {
    let mut t = primed(3);
    for i in 0..3 {
        t.on_loss(1, i, MSS);
    }
    t.on_sent(2, 0, 1000, false);
    run(&mut t, 0, 10 * MS, &[2], 2);
    assert_eq!(t.get(1).unwrap().state(), PathState::Active);
    assert_eq!(t.get(2).unwrap().state(), PathState::Failed);
    for _ in 0..100 {
        let Some(i) = t.pick_path(10 * MS, MSS) else {
            break;
        };
        assert_ne!(i, 2);
        t.on_sent(i, 10 * MS, MSS, false);
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
fn arbitrary_event_sequences_do_not_panic() {
    let mut rng = XorShift(0x0123_4567_89AB_CDEF);
    for round in 0..4 {
        let cfg = PathConfig {
            cc: if round % 2 == 0 {
                CcKind::Delay
            } else {
                CcKind::Reno
            },
            miss_threshold: round as u8,
            loss_burst: round as u8,
            min_active: round as u8,
            probe_timeout_min_ns: if round == 3 { u64::MAX } else { MS },
            failed_probe_max_ns: if round == 2 { 0 } else { 100 * MS },
            rto_min_ns: if round == 1 { u64::MAX } else { MS },
            ..PathConfig::default()
        };
        let mut t = PathTable::new(cfg);
        let mut now = 0u64;
        for _ in 0..50_000 {
            let r = rng.next();
            now = match r % 32 {
                0 => now.wrapping_sub(r >> 44),
                1 => u64::MAX - (r >> 50),
                _ => now.saturating_add((r >> 8) % 2_000_000),
            };
            let idx = ((r >> 16) % 300) as usize;
            let bytes = ((r >> 28) % 3000) as u32;
            match (r >> 40) % 13 {
                0 => {
                    if r & 2 == 0 {
                        t.add(now, ids(idx as u32), r & 1 == 0);
                    } else {
                        t.add_unvalidated(now, ids(idx as u32), r & 1 == 0);
                    }
                }
                1 => {
                    if r & 7 == 0 {
                        t.remove(idx);
                    }
                }
                2 | 3 => t.on_sent(idx, now, bytes, r & 2 == 0),
                4 | 5 => t.on_ack(idx, now, bytes, Some(r >> 45), r & 4 == 0),
                6 => {
                    t.on_loss(idx, now, bytes);
                }
                7 => t.on_probe_sent(idx, now, 1),
                8 => {
                    t.on_probe_ack(idx, now, r >> 40);
                }
                9 => {
                    let res = t.on_tick(now);
                    for i in res.probe.iter() {
                        t.on_probe_sent(i, now, 1);
                    }
                }
                10 => {
                    if let Some(i) = t.pick_path(now, bytes) {
                        assert!(t.get(i).unwrap().is_validated());
                        t.on_sent(i, now, bytes, false);
                    }
                    if let Some(i) = t.pick_retransmit_path(now, bytes, Some(idx)) {
                        assert!(t.get(i).unwrap().is_validated());
                    }
                }
                11 => t.on_rto(idx, now),
                _ => {
                    t.set_weight(idx, r as u8);
                    t.set_backup(idx, r & 8 == 0);
                    t.next_timer(now);
                    t.rto_ns(idx);
                    t.earn_validation_credit(r >> 52);
                    if r & 16 == 0 {
                        t.validate(idx, now);
                    }
                    t.spend_validation_credit(idx, bytes.into());
                }
            }
            for (_, p) in t.iter() {
                assert!(p.is_validated() || p.state() != PathState::Active);
            }
        }
        assert!(t.len() <= MAX_PATHS);
        assert_eq!(t.iter().count(), t.len());
    }
}

#[test]
fn late_tick_probes_again_instead_of_counting_a_miss() {
    let mut t = primed(2);
    let r = service(&mut t, 100 * MS, &[0]);
    assert!(r.probe.contains(0));
    assert!(t.get(0).unwrap().probe_outstanding());
    // The probe times out at 101 ms, but this host only runs again at 103 ms:
    // its answer may be waiting unread, so the path is probed again.
    let r = service(&mut t, 103 * MS, &[0]);
    assert!(r.probe.contains(0) && r.changed.is_empty());
    let p = t.get(0).unwrap();
    assert_eq!((p.state(), p.missed_probes()), (PathState::Active, 0));
    // On time, the same silence counts.
    assert_eq!(t.next_timer(103 * MS), Some(104 * MS));
    let r = service(&mut t, 104 * MS, &[0]);
    assert!(r.changed.contains(0));
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
}

#[test]
fn any_packet_on_a_busy_path_restarts_its_silence_clock() {
    let mut t = primed(2);
    t.on_sent(0, 0, 1000, false);
    t.on_sent(1, 0, 1000, false);
    t.on_heard(0, 900 * US);
    // At 1 ms path 1 is due (and probed: nobody acknowledged anything), path 0 is not.
    let r = service(&mut t, MS, &[]);
    assert!(r.probe.contains(1) && !r.probe.contains(0));
    // A Suspect path is not revived by traffic, only by a probe answer.
    ack_on(&mut t, 1, 1000 * US);
    let r = service(&mut t, 1900 * US, &[0]);
    assert!(r.changed.contains(0));
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
    t.on_heard(0, 2 * MS);
    assert_eq!(t.get(0).unwrap().state(), PathState::Suspect);
}

#[test]
fn busy_heartbeat_changes_take_effect_at_once() {
    // Path 0 is busy and was just heard from; path 1 is idle and was last
    // heard at 0, so it is due for its busy heartbeat (1 ms) long ago.
    let mut t = primed(2);
    t.on_sent(0, 0, MSS, false);
    t.on_heard(0, 10 * MS);
    assert_eq!(t.next_timer(10 * MS), Some(10 * MS));
    // A 50 ms heartbeat puts path 1's probe at 50 ms: next comes path 0's
    // silence deadline, one probe timeout (1 ms) after it was heard.
    t.set_heartbeat_busy_ns(50 * MS);
    assert_eq!(t.config().heartbeat_busy_ns, 50 * MS);
    assert_eq!(t.next_timer(10 * MS), Some(11 * MS));
    assert!(!t.on_tick(10 * MS).probe.contains(1));
    // Back to 1 ms: path 1 is due again.
    t.set_heartbeat_busy_ns(MS);
    assert_eq!(t.next_timer(10 * MS), Some(10 * MS));
    assert!(t.on_tick(10 * MS).probe.contains(1));
    t.set_heartbeat_busy_ns(0);
    assert_eq!(t.config().heartbeat_busy_ns, 1);
}

/// The two ends of a connection, 100 us apart, each with a busy path 0 and an idle path 1
/// ([`primed`]: 1 ms probe timeout). End 0 connected; end 1 yields its heartbeat if
/// `yield_1`. From `cut` on, end 0's packets on path 1 are lost. Returns the probes each end
/// sent on path 1 before `cut`, when end 1 last heard path 1 before its first probe after
/// `cut`, and when it sent that probe.
fn two_ends(yield_1: bool, cut: u64) -> ([u32; 2], u64, Option<u64>) {
    const D: u64 = 100 * US;
    let mut ends = [primed(2), primed(2)];
    ends[1].set_heartbeat_yield(yield_1);
    // Packets on the wire: (arrival, receiving end, probe or answer, probe sent at).
    let mut wire: Vec<(u64, usize, bool, u64)> = Vec::new();
    let mut probes = [0u32; 2];
    let mut heard_1 = 0;
    for e in ends.iter_mut() {
        e.on_sent(0, 0, MSS, false);
    }
    let mut now = 0;
    while now < cut + 10 * MS {
        for e in ends.iter_mut() {
            e.on_ack(0, now, MSS, Some(2 * D), false);
            e.on_sent(0, now, MSS, false);
        }
        let mut i = 0;
        while i < wire.len() {
            let (at, to, probe, sent) = wire[i];
            if at > now {
                i += 1;
                continue;
            }
            wire.swap_remove(i);
            ends[to].on_heard(1, at);
            if to == 1 {
                heard_1 = at;
            }
            if probe {
                wire.push((at + D, 1 - to, false, sent));
            } else {
                ends[to].on_probe_ack(1, at, at - sent);
            }
        }
        wire.retain(|&(_, to, _, sent)| !(to == 1 && sent >= cut));
        for k in 0..2 {
            if ends[k].next_timer(now).is_some_and(|t| t <= now) {
                let r = ends[k].on_tick(now);
                for j in r.probe.iter() {
                    ends[k].on_probe_sent(j, now, 1);
                    if j != 1 {
                        continue;
                    }
                    if now < cut {
                        probes[k] += 1;
                    } else if k == 1 {
                        return (probes, heard_1, Some(now));
                    }
                    wire.push((now + D, 1 - k, true, now));
                }
            }
        }
        now += 10 * US;
    }
    (probes, heard_1, None)
}

#[test]
fn accepting_end_lets_the_connecting_end_probe_idle_paths() {
    // Equal heartbeats: the probes cross and both ends probe the idle path.
    let (probes, _, _) = two_ends(false, 20 * MS);
    assert!(probes[0] >= 5 && probes[1] >= 5, "{probes:?}");
    // Yielding: only the connecting end probes, about every 1.2 ms (heartbeat and answer).
    let (probes, heard, first) = two_ends(true, 20 * MS);
    assert_eq!(probes[1], 0, "{probes:?}");
    assert!((15..=18).contains(&probes[0]), "{probes:?}");
    // Its probes stop arriving: the yielding end probes a heartbeat and a probe timeout
    // after it last heard one.
    let first = first.expect("the yielding end never probed");
    assert!(
        heard < 20 * MS + 200 * US && heard > 18 * MS,
        "last heard at {heard}"
    );
    assert!(
        (heard + 2 * MS..=heard + 2 * MS + 10 * US).contains(&first),
        "heard at {heard}, probed at {first}"
    );
}

// --- Planes -------------------------------------------------------------------------------

mod planes {
    use mrc_core::mrc_path::{plane_count, plane_pair};
    use mrc_core::mrc_proto::Endpoint;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> Endpoint {
        Endpoint::v4([a, b, c, d], 9000, false)
    }

    fn pairs(l: &[Endpoint], r: &[Endpoint]) -> Vec<Option<(usize, usize)>> {
        (0..plane_count(l.len(), r.len()))
            .map(|p| plane_pair(l, r, p))
            .collect()
    }

    #[test]
    fn equal_lists_pair_by_subnet() {
        let a = [v4(10, 0, 1, 1), v4(10, 0, 2, 1), v4(10, 0, 3, 1)];
        // The peer lists its planes in another order: the subnet decides.
        let b = [v4(10, 0, 3, 2), v4(10, 0, 1, 2), v4(10, 0, 2, 2)];
        assert_eq!(
            pairs(&a, &b),
            vec![Some((0, 1)), Some((1, 2)), Some((2, 0))]
        );
    }

    #[test]
    fn unmatched_subnets_pair_by_index() {
        let a = [v4(10, 0, 1, 1), v4(10, 0, 2, 1)];
        let b = [v4(10, 9, 1, 2), v4(10, 9, 2, 2)];
        assert_eq!(pairs(&a, &b), vec![Some((0, 0)), Some((1, 1))]);
    }

    #[test]
    fn two_interfaces_to_one_address_use_both() {
        // The client of simult_flows: two interfaces, a server behind a router.
        let client = [v4(10, 0, 1, 1), v4(10, 0, 2, 1)];
        let server = [v4(10, 0, 3, 3)];
        assert_eq!(pairs(&client, &server), vec![Some((0, 0)), Some((1, 0))]);
        // The server derives the same two planes, its address serving twice.
        assert_eq!(pairs(&server, &client), vec![Some((0, 0)), Some((0, 1))]);
    }

    #[test]
    fn reused_endpoint_does_not_repeat_its_subnet_match() {
        // Plane 1 reuses local 0; its subnet peer is plane 0's, so it takes peer 1.
        let a = [v4(10, 0, 1, 1)];
        let b = [v4(10, 0, 1, 2), v4(10, 0, 2, 2)];
        assert_eq!(pairs(&a, &b), vec![Some((0, 0)), Some((0, 1))]);
        // Also when the subnet match is not the peer's first endpoint.
        let c = [v4(10, 0, 2, 2), v4(10, 0, 3, 2), v4(10, 0, 1, 2)];
        assert_eq!(
            pairs(&a, &c),
            vec![Some((0, 2)), Some((0, 0)), Some((0, 1))]
        );
    }

    #[test]
    fn families_must_match_and_empty_lists_have_no_planes() {
        let a = [v4(10, 0, 1, 1)];
        let b = [Endpoint::v6([0xfd; 16], 9000, false)];
        assert_eq!(pairs(&a, &b), vec![None]);
        assert_eq!(plane_count(0, 3), 0);
        assert_eq!(plane_count(3, 0), 0);
        assert_eq!(plane_pair(&a, &[], 0), None);
        assert_eq!(plane_pair(&a, &a, 1), None);
    }
}

#[test]
fn probe_answer_needs_the_nonce_of_a_recent_probe_of_its_path() {
    let mut t = table(2);
    assert_eq!(PROBES_REMEMBERED, 2);
    t.on_probe_sent(0, MS, 11);
    t.on_probe_sent(0, 2 * MS, 22);
    t.on_probe_sent(0, 3 * MS, 33);
    t.on_probe_sent(1, 3 * MS, 44);
    // Path 0's oldest probe is forgotten; a nonce of another path or none counts for nothing.
    for (idx, nonce) in [(0, 11), (0, 44), (1, 33), (0, 0), (1, 0), (7, 33)] {
        assert_eq!(
            t.on_probe_answer(idx, 4 * MS, nonce),
            Err(UnknownProbe),
            "path {idx} nonce {nonce}"
        );
    }
    assert_eq!(t.get(0).unwrap().srtt_ns(), None);
    // The one before the latest still counts, timed from its own departure.
    assert_eq!(t.on_probe_answer(0, 4 * MS, 22), Ok(None));
    assert_eq!(t.get(0).unwrap().srtt_ns(), Some(2 * MS));
    // Once.
    assert_eq!(t.on_probe_answer(0, 5 * MS, 22), Err(UnknownProbe));
    assert_eq!(t.on_probe_answer(0, 3 * MS + 500 * US, 33), Ok(None));
    assert_eq!(t.get(0).unwrap().min_rtt_ns(), Some(500 * US));
    // A Failed path comes back only by a genuine answer.
    t.on_send_error(1, 5 * MS);
    assert_eq!(t.on_probe_answer(1, 6 * MS, 45), Err(UnknownProbe));
    assert_eq!(t.get(1).unwrap().state(), PathState::Failed);
    let tr = t.on_probe_answer(1, 6 * MS, 44).unwrap().unwrap();
    assert_eq!((tr.from, tr.to), (PathState::Failed, PathState::Active));
    assert_eq!(t.get(1).unwrap().srtt_ns(), Some(3 * MS));
}

/// Paths 0 and 1 on planes 0 and 1 with the default 1 ms busy heartbeat and a 100 ms idle
/// one; path 0 is timed by a probe's answer at 20 ms, path 1 only by an acknowledgement that
/// came back by path 0 (of a packet sent at 10 ms, answered at 12 ms).
fn timed_across_planes() -> PathTable {
    let mut t = table(2);
    t.on_probe_ack(0, 0, 20 * MS);
    t.on_sent(1, 10 * MS, 1000, false);
    t.on_ack_by_way_of(1, Some(0), 12 * MS, 1000, Some(2 * MS), 0, false);
    t
}

#[test]
fn answer_by_another_plane_only_starts_a_path() {
    let mut t = timed_across_planes();
    // The first such answer starts path 1: it has an RTT, and it was acknowledged.
    let p = t.get(1).unwrap();
    assert_eq!((p.srtt_ns(), p.min_rtt_ns()), (Some(2 * MS), Some(2 * MS)));
    assert_eq!(p.counters().bytes_acked, 1000);
    // A probe's answer is its own: it replaces the provisional minimum even if larger.
    t.on_probe_sent(1, 20 * MS, 1);
    t.on_probe_ack(1, 25 * MS, 5 * MS);
    assert_eq!(t.get(1).unwrap().min_rtt_ns(), Some(5 * MS));
    // The planes' own minimums, 20 ms and 5 ms, are within ALIKE_PLANES_NS: an answer by
    // path 0 times path 1 again.
    t.on_sent(1, 30 * MS, 1000, false);
    t.on_ack_by_way_of(1, Some(0), 34 * MS, 1000, Some(4 * MS), 0, false);
    assert_eq!(t.get(1).unwrap().min_rtt_ns(), Some(4 * MS));
    // Once they are not (path 0's own minimum 40 ms below path 1's), it no longer does:
    // path 1's minimum and smoothed RTT stay its own, though the bytes count as
    // acknowledged.
    let mut t = timed_across_planes();
    t.on_probe_ack(1, 25 * MS, 60 * MS);
    let before = t.get(1).unwrap().srtt_ns();
    t.on_sent(1, 30 * MS, 1000, false);
    t.on_ack_by_way_of(1, Some(0), 31 * MS, 1000, Some(MS), 0, false);
    let p = t.get(1).unwrap();
    assert_eq!((p.min_rtt_ns(), p.srtt_ns()), (Some(60 * MS), before));
    assert_eq!((p.inflight(), p.counters().bytes_acked), (0, 2000));
}

#[test]
fn path_timed_only_by_another_plane_is_probed_while_idle() {
    let mut t = timed_across_planes();
    // Nothing in flight. Path 0 waits for the idle heartbeat, 100 ms after its answer;
    // path 1 gets the busy one, 1 ms after it was heard.
    assert_eq!(t.next_timer(12 * MS), Some(13 * MS));
    let r = t.on_tick(13 * MS);
    assert_eq!(r.probe.iter().collect::<Vec<_>>(), vec![1]);
    t.on_probe_sent(1, 13 * MS, 1);
    t.on_probe_ack(1, 15 * MS, 2 * MS);
    // Its own answer ends that: both wait for the idle heartbeat, path 0 from 0 ms and
    // path 1 from 15 ms.
    assert_eq!(t.next_timer(15 * MS), Some(100 * MS));
    let r = t.on_tick(100 * MS);
    assert_eq!(r.probe.iter().collect::<Vec<_>>(), vec![0]);
}

/// Gives every path of `t` one 10 ms RTT sample, so its controller paces at twice its
/// 14 kB window per 10 ms: 2.8 MB/s, 500 us per 1400-byte packet.
fn paced(t: &mut PathTable) {
    for i in 0..t.len() {
        t.on_sent(i, 0, MSS, false);
        t.on_ack(i, 10 * MS, MSS, Some(10 * MS), false);
        assert_eq!(t.get(i).unwrap().cc().pacing_rate(), Some(2_800_000));
    }
}

/// Sends on the paths `pick_path` chooses at `now` until it chooses none; returns how many
/// packets each path took.
fn burst_at(t: &mut PathTable, now: u64) -> Vec<u32> {
    let mut on = vec![0; t.len()];
    while let Some(i) = t.pick_path(now, MSS) {
        t.on_sent(i, now, MSS, false);
        on[i] += 1;
    }
    on
}

#[test]
fn paced_path_sends_a_burst_of_one_millisecond_then_one_packet_per_interval() {
    let mut t = table(1);
    paced(&mut t);
    let now = 20 * MS;
    // 1 ms of credit is two packets' time; the third packet's own time ends now.
    assert_eq!(burst_at(&mut t, now), [3]);
    assert_eq!(t.get(0).unwrap().pace_ns(), now + 500 * US);
    assert_eq!(t.next_departure(now, MSS), Some(now + 500 * US));
    assert_eq!(t.pick_path(now + 499 * US, MSS), None);
    for k in 1..=4 {
        let at = now + k * 500 * US;
        assert_eq!(t.pick_path(at, MSS), Some(0), "packet {k}");
        t.on_sent(0, at, MSS, false);
        assert_eq!(t.pick_path(at, MSS), None, "packet {k}");
    }
    // Seven packets in flight: the window (10) still has room, so only pacing holds.
    assert_eq!(t.get(0).unwrap().inflight(), 7 * u64::from(MSS));
    assert_eq!(t.next_departure(now + 2 * MS, MSS), Some(now + 2500 * US));
    // Once the window is full, nothing waits for the pacing clock.
    for k in 0..3 {
        t.on_sent(0, now + 3 * MS + k, MSS, false);
    }
    assert!(t.get(0).unwrap().pace_ns() > now + 3 * MS);
    assert_eq!(t.next_departure(now + 3 * MS, MSS), None);
}

#[test]
fn unpaced_path_sends_its_whole_window_at_once() {
    let cfg = PathConfig {
        pacing: false,
        ..PathConfig::default()
    };
    let mut t = table_cfg(1, cfg);
    paced(&mut t);
    let now = 20 * MS;
    assert_eq!(burst_at(&mut t, now), [10]);
    assert_eq!(t.next_departure(now, MSS), None);
}

#[test]
fn path_held_by_its_pacing_leaves_packets_to_the_others() {
    let mut t = table(2);
    paced(&mut t);
    let now = 20 * MS;
    assert_eq!(burst_at(&mut t, now), [3, 3]);
    // A retransmission waits for the paths' pacing as new data does.
    assert_eq!(t.pick_retransmit_path(now, MSS, Some(0)), None);
    assert_eq!(
        t.pick_retransmit_path(now + 500 * US, MSS, Some(0)),
        Some(1)
    );
}

/// What the choice of a path for new data says, checked against a pass of its own over the
/// paths ([`PathTable::held_back`]).
fn choice(t: &PathTable, now: u64, backlog: u64) -> Result<PathIdx, HeldBack> {
    let told = t.pick_path_or_why(now, MSS, backlog);
    let looked = t
        .pick_path_backlog(now, MSS, backlog)
        .ok_or_else(|| t.held_back(now, MSS));
    assert_eq!(told, looked);
    told
}

#[test]
fn no_path_for_new_data_says_why() {
    let mut t = table(2);
    paced(&mut t);
    let now = 20 * MS;
    assert_eq!(choice(&t, now, u64::MAX), Ok(0));
    burst_at(&mut t, now);
    assert_eq!(choice(&t, now, u64::MAX), Err(HeldBack::Pacing));
    // Path 0's window fills up; path 1 is still held by its pacing only.
    while t.get(0).unwrap().inflight() + u64::from(MSS) <= u64::from(t.get(0).unwrap().cwnd()) {
        t.on_sent(0, now, MSS, false);
    }
    assert_eq!(choice(&t, now, u64::MAX), Err(HeldBack::Pacing));
    while t.get(1).unwrap().inflight() + u64::from(MSS) <= u64::from(t.get(1).unwrap().cwnd()) {
        t.on_sent(1, now, MSS, false);
    }
    assert_eq!(choice(&t, now, u64::MAX), Err(HeldBack::Window));
    t.on_send_error(0, now);
    t.on_send_error(1, now);
    assert_eq!(choice(&t, now, u64::MAX), Err(HeldBack::NoPath));

    // Path 0 delivers in 1 ms but its window is full; path 1 has room but takes 100 ms. A
    // small backlog waits for path 0, a large one goes on path 1 as well.
    let mut t = table(2);
    for (i, rtt) in [(0, MS), (1, 100 * MS)] {
        t.on_sent(i, 0, MSS, false);
        t.on_ack(i, rtt, MSS, Some(rtt), false);
    }
    let now = 200 * MS;
    while t.get(0).unwrap().inflight() + u64::from(MSS) <= u64::from(t.get(0).unwrap().cwnd()) {
        t.on_sent(0, now, MSS, false);
    }
    assert_eq!(choice(&t, now, u64::from(MSS)), Err(HeldBack::Waiting));
    assert_eq!(choice(&t, now, u64::MAX), Ok(1));
}

/// A small deterministic generator for the operations below.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn kept_choice_of_a_path_is_the_full_pass() {
    // Many paths, changed one or a few at a time as a connection changes them: sends,
    // answers with RTT samples, losses, a weight, backup paths, failures, probes, removals
    // and new paths, pacing. After every change the choice from what the table keeps is
    // the one a pass over every path makes, for full-size and smaller packets.
    for seed in 1..=12u64 {
        let mut rng = Lcg(seed);
        let mut t = table(48);
        let mut now = MS;
        // RTTs from 100 us to 24 ms: the long ones pace a path to a packet every few ms.
        for i in 0..48u64 {
            let rtt = (1 + i % 7) * 100 * US * (1 + 39 * (i % 3 / 2));
            t.on_sent(i as PathIdx, 0, MSS, false);
            t.on_ack(i as PathIdx, rtt, MSS, Some(rtt), false);
        }
        for step in 0..3000 {
            // Runs of changes at one time, as a batch brings them, then time passes: paths
            // that just sent wait for their pacing, and may send again later unchanged.
            if rng.below(4) == 0 {
                now += rng.below(2000) * US;
            }
            let i = rng.below(t.index_end() as u64) as PathIdx;
            match rng.below(20) {
                0..=3 => t.on_sent(i, now, MSS, false),
                // A burst on one of a few paths, which then waits for its pacing.
                4..=7 => {
                    let j = rng.below(6) as PathIdx;
                    for _ in 0..1 + rng.below(6) {
                        t.on_sent(j, now, MSS, false);
                    }
                }
                8..=12 => {
                    let rtt = (50 + rng.below(3000) * (1 + 9 * rng.below(2))) * US;
                    t.on_ack(i, now, MSS, Some(rtt), false);
                }
                13 => {
                    t.on_loss(i, now, MSS);
                }
                14 => t.set_weight(i, 1 + rng.below(200) as u8),
                15 => t.set_backup(i, rng.below(4) == 0),
                16 => {
                    t.on_send_error(i, now);
                }
                17 => {
                    t.on_probe_ack(i, now, (50 + rng.below(500)) * US);
                }
                18 => {
                    if t.len() > 20 {
                        t.remove(i);
                    }
                }
                _ => {
                    let _ = t.add(now, ids(1000 + step), false);
                }
            }
            for bytes in [MSS, MSS / 3] {
                for backlog in [u64::from(bytes), 20 * u64::from(MSS), u64::MAX] {
                    let kept = t.poll_pick_path_kept(now, bytes, backlog);
                    let full = t.pick_path_or_why(now, bytes, backlog);
                    assert_eq!(kept, full, "seed {seed} step {step}: {bytes} B, {backlog}");
                }
            }
        }
    }
}

#[test]
fn kept_choice_finds_the_next_best_once_the_kept_ones_changed() {
    // 48 idle paths, each a little slower than the one before. Each packet goes on the best
    // path, which it makes slower than the next: the choice walks down the paths, past the
    // few best it keeps, while too few paths changed for a settling pass of their own.
    let mut t = table(48);
    for i in 0..48u64 {
        let rtt = 1000 * US + i * 10 * US;
        t.on_sent(i as PathIdx, 0, MSS, false);
        t.on_ack(i as PathIdx, rtt, MSS, Some(rtt), false);
    }
    let now = 100 * MS;
    for k in 0..8 {
        let kept = t.poll_pick_path_kept(now, MSS, u64::MAX);
        assert_eq!(kept, t.pick_path_or_why(now, MSS, u64::MAX), "packet {k}");
        assert_eq!(kept, Ok(k), "packet {k}");
        t.on_sent(k, now, MSS, false);
    }
}

#[test]
fn send_error_fails_a_path_at_once_until_a_probe_is_answered() {
    let mut t = primed(3);
    let now = 5 * MS;
    let tr = t.on_send_error(1, now).expect("Active to Failed");
    assert_eq!(
        (tr.from, tr.to, tr.at_ns),
        (PathState::Active, PathState::Failed, now)
    );
    assert_eq!(t.get(1).unwrap().state_reason(), StateReason::LocalDown);
    // It carries no data; the others are untouched.
    assert_eq!(t.paths_in_state(PathState::Active), 2);
    assert!(t.on_send_error(1, now + MS).is_none(), "already Failed");
    assert!(t.on_send_error(7, now).is_none(), "no such path");
    // A Failed path is probed on its backoff; while sending fails, its probes go
    // unanswered and it stays Failed.
    let (probes, changes) = run(&mut t, now, now + 1000 * MS, &[1], 1);
    assert!(!probes.is_empty());
    assert_eq!(t.get(1).unwrap().state(), PathState::Failed);
    assert!(changes.is_empty(), "{changes:?}");
    // Once it can send again, the first answered probe brings it back.
    let back = t
        .on_probe_ack(1, now + 1001 * MS, 100 * US)
        .expect("Failed to Active");
    assert_eq!(back.to, PathState::Active);
    assert_eq!(t.get(1).unwrap().state_reason(), StateReason::ProbeAnswered);
}

// ---------------------------------------------------------------------------------------------
// Path validation
// ---------------------------------------------------------------------------------------------

#[test]
fn an_unvalidated_path_is_probed_only_as_far_as_the_credit_goes() {
    let mut t = primed(1);
    let u = t.add_unvalidated(0, ids(1), false).unwrap();
    let p = t.get(u).unwrap();
    assert!(!p.is_validated());
    assert_eq!(p.state(), PathState::Suspect);
    assert_eq!(p.state_reason(), StateReason::Unvalidated);
    // No credit: no probe, and no deadline for it (the other path's heartbeat is later).
    assert!(t.next_timer(MS).unwrap() > MS);
    assert!(!t.on_tick(MS).probe.contains(u));
    // Two probes' worth: one now, one when it times out; then it waits for credit.
    t.earn_validation_credit(2 * PROBE_WIRE_LEN);
    assert_eq!(t.next_timer(MS), Some(MS));
    let mut now = MS;
    let mut probes = 0;
    for _ in 0..50 {
        let r = t.on_tick(now);
        if r.probe.contains(u) {
            t.on_probe_sent(u, now, 7);
            probes += 1;
        }
        match t.next_timer(now) {
            Some(n) if n < 50 * MS => now = n.max(now + 1),
            _ => break,
        }
    }
    assert_eq!(probes, 2);
    assert_eq!(t.validation_credit(), 0);
    let p = t.get(u).unwrap();
    assert_eq!(p.state(), PathState::Suspect);
    assert_eq!(p.missed_probes(), 2);
    // More credit: the third probe goes unanswered too, and the path is Failed for good
    // reason.
    t.earn_validation_credit(PROBE_WIRE_LEN);
    run(&mut t, now, now + 50 * MS, &[u], u);
    let p = t.get(u).unwrap();
    assert_eq!(p.state(), PathState::Failed);
    assert_eq!(p.state_reason(), StateReason::Unvalidated);
    assert_eq!(t.validation_credit(), 0);
}

#[test]
fn an_unvalidated_path_gets_no_data_until_a_probe_is_answered() {
    let mut t = primed(1);
    let u = t.add_unvalidated(0, ids(1), false).unwrap();
    // Path 0's window full, or path 0 gone: still nothing for the unvalidated path.
    for _ in 0..1000 {
        match t.pick_path(MS, MSS) {
            Some(i) => {
                assert_eq!(i, 0);
                t.on_sent(i, MS, MSS, false);
            }
            None => break,
        }
    }
    assert_eq!(t.pick_retransmit_path(MS, MSS, Some(0)), None);
    t.on_send_error(0, MS);
    assert_eq!(t.pick_path(2 * MS, MSS), None);
    assert_eq!(t.pick_retransmit_path(2 * MS, MSS, None), None);
    // Sending anything else on it takes credit, which there is none of yet.
    assert!(!t.spend_validation_credit(u, 60));
    assert!(t.spend_validation_credit(0, 60));
    t.earn_validation_credit(100);
    assert!(t.spend_validation_credit(u, 60));
    assert!(!t.spend_validation_credit(u, 60));
    // A genuine answer proves its address.
    t.earn_validation_credit(PROBE_WIRE_LEN);
    assert!(t.on_tick(3 * MS).probe.contains(u));
    t.on_probe_sent(u, 3 * MS, 9);
    assert_eq!(t.on_probe_answer(u, 3 * MS + 40 * US, 8), Err(UnknownProbe));
    assert!(!t.get(u).unwrap().is_validated());
    let tr = t.on_probe_answer(u, 3 * MS + 50 * US, 9).unwrap();
    assert_eq!(
        tr.map(|x| (x.from, x.to)),
        Some((PathState::Suspect, PathState::Active))
    );
    let p = t.get(u).unwrap();
    assert!(p.is_validated());
    assert_eq!(p.state_reason(), StateReason::ProbeAnswered);
    assert_eq!(t.pick_path(4 * MS, MSS), Some(u));
}

#[test]
fn validate_proves_a_path_as_a_new_one_starts() {
    let mut t = primed(1);
    let u = t.add_unvalidated(0, ids(1), false).unwrap();
    assert_eq!(t.pick_path(MS, MSS), Some(0));
    let tr = t.validate(u, MS).unwrap();
    assert_eq!((tr.from, tr.to), (PathState::Suspect, PathState::Active));
    assert!(t.get(u).unwrap().is_validated());
    assert_eq!(t.validate(u, MS), None);
    assert_eq!(t.validate(0, MS), None);
    t.on_send_error(0, MS);
    assert_eq!(t.pick_path(MS, MSS), Some(u));
}

#[test]
fn validation_credit_is_capped() {
    let mut t = table(1);
    t.earn_validation_credit(u64::MAX);
    assert_eq!(t.validation_credit(), VALIDATION_CREDIT_MAX);
}

/// `state_changes` moves with every path added or removed and every change of state, by
/// whatever moved it, and with nothing else: the glue reports the paths' states only when it
/// moved.
#[test]
fn state_changes_count_what_the_glue_reports() {
    let mut t = primed(3);
    let mut seen = t.state_changes();
    let mut moved = |t: &PathTable| {
        let now = t.state_changes();
        core::mem::replace(&mut seen, now) != now
    };
    // Traffic that changes no state.
    t.on_sent(0, MS, MSS, false);
    t.on_ack(0, 2 * MS, MSS, Some(100 * US), false);
    assert!(t.next_timer(2 * MS).is_some());
    assert!(!moved(&t));
    // A send error fails the path at once; a second one changes nothing.
    assert!(t.on_send_error(1, 3 * MS).is_some());
    assert!(moved(&t));
    assert!(t.on_send_error(1, 3 * MS).is_none());
    assert!(!moved(&t));
    // An answered probe makes it Active again.
    t.on_probe_sent(1, 4 * MS, 7);
    assert!(t.on_probe_ack(1, 4 * MS + 50 * US, 50 * US).is_some());
    assert_eq!(t.get(1).map(|p| p.state()), Some(PathState::Active));
    assert!(moved(&t));
    // A probe that goes unanswered makes a path Suspect in a tick.
    let now = t.next_timer(5 * MS).expect("a heartbeat is due");
    let r = t.on_tick(now);
    for i in r.probe.iter() {
        t.on_probe_sent(i, now, 9);
    }
    assert!(!r.probe.is_empty());
    assert!(!moved(&t));
    let later = t.next_timer(now).expect("a probe times out");
    let r = t.on_tick(later);
    assert!(!r.changed.is_empty(), "{r:?}");
    assert!(moved(&t));
    // Paths added and removed.
    assert_eq!(t.add(6 * MS, ids(7), false), Some(3));
    assert!(moved(&t));
    assert!(t.remove(3));
    assert!(moved(&t));
    assert!(!t.remove(3));
    assert!(!moved(&t));
}
