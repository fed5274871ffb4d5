// SPDX-License-Identifier: GPL-2.0
//! Fuzzing of the connection state machine: random sequences of operations on connected pairs
//! of `Conn`s (and on a lone half-open one), with invariants checked after every step.
//!
//! A [`World`] holds a client and a server joined by a network the operations control (each
//! packet delivered in or out of order, duplicated, dropped, marked CE), optionally a third,
//! lone connection in SynSent or SynReceived that hears only forged packets, and a tiny glue
//! per connection: the bytes of every message sent, the payloads received under their sequence
//! numbers, the messages delivered. The operations ([`Op`]) deliver, drop and duplicate the
//! peers' real packets, forge well-formed packets of every type (with the right session id or
//! not, sequence and acknowledgement numbers random or near the target's own), feed arbitrary
//! bytes through `mrc_proto::decode`, move time (by zero, a little or a lot), fire timers
//! early, send messages of any length, release received bytes, close, abort, add and remove
//! paths and report send errors.
//!
//! After every operation the glue drains events and transmissions and fires due timers as the
//! kernel does, and checks:
//!
//! - nothing panics (in the test profile, which keeps debug assertions, an arithmetic
//!   overflow panics too);
//! - `poll_transmit` runs dry within a bound, and every packet it writes decodes, carries the
//!   session id and direction bit of its sender and names message bytes that still exist;
//! - a timer that `next_timeout` reports as due (at or before now) makes progress when fired:
//!   `on_timeout` then `poll_transmit` sends something or moves the timer, so the glue's timer
//!   loop cannot spin;
//! - sequence numbers stay below `SEQ_LIMIT`, `snd_una <= snd_nxt <= snd_una + WINDOW`, and
//!   the counters, cumulative acks and message ids never go back;
//! - an accepting end sends, before its handshake completes, at most three times the bytes of
//!   the SYNs it took (the anti-amplification limit);
//! - nothing but probes, their answers and ACKs goes on a path not validated, and those
//!   within three times the bytes the connection was fed;
//! - a sequence number is stored at most once, every delivered message consists of stored
//!   payloads that add up to its length, messages come in order, and nothing follows
//!   `Event::Closed`;
//! - in honest mode, where the only forged packets carry the wrong session id or sequence and
//!   acknowledgement numbers far outside the windows, every message either end sent arrives
//!   intact and in order, and once the network is left alone the pair delivers everything it
//!   accepted unless one end aborted or timed out.
//!
//! The same driver backs the libFuzzer target `tools/fuzz/fuzz_targets/conn.rs`, which
//! includes this file and builds the operations from the fuzzer's bytes with
//! [`run_bytes`]; the property tests below are compiled only into the test binary.
//!
//! `PROPTEST_CASES` sets the number of cases of each property (default 512, about a second in
//! the test profile); `CONN_FUZZ_LOG=1` logs every operation.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};

use mrc_core::mrc_cc::CcKind;
use mrc_core::mrc_conn::{
    self, Conn, ConnConfig, ConnError, ConnStats, Event, Input, SendError, State, SEQ_LIMIT, WINDOW,
};
use mrc_core::mrc_path::{PathConfig, PathIds};
use mrc_core::mrc_proto::{
    self, decode, Body, Endpoint, Flags, Handshake, Header, PacketType, Probe, Sack, HEADER_LEN,
    MAX_ENDPOINTS, MAX_SACK_BYTES,
};

/// [`WINDOW`] as a sequence number distance.
const W: u64 = WINDOW as u64;
/// Calls of `poll_transmit` one drain may take before it counts as never running dry.
const MAX_TX: usize = 10_000;
/// Events one drain may take.
const MAX_EVENTS: usize = 100_000;
/// Rounds of firing due timers before the timer loop counts as spinning.
const MAX_TIMER_ROUNDS: usize = 1_000;
/// Rounds of firing due timers in a row that may pass without a visible effect.
const MAX_IDLE_ROUNDS: usize = 16;
/// Packets the network holds per direction; the oldest are lost beyond.
const NET_CAP: usize = 4_096;
/// Time never goes beyond this (about 146 years of uptime).
const TIME_CAP: u64 = 1 << 62;
/// Rounds the final settling of an honest pair may take.
const SETTLE_ROUNDS: usize = 5_000_000;
/// Time without progress after which the final settling of an honest pair gives up: twice the
/// user timeout, after which a connection that is still waiting must have failed.
const SETTLE_STALL_NS: u64 = 60_000_000_000;
/// Largest DATA payload a forged packet carries.
const MAX_FORGED_PAYLOAD: usize = 70_000;
/// MRC ports of the pair.
const CLIENT_PORT: u16 = 4791;
const SERVER_PORT: u16 = 80;

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// How a world is built.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Forged packets cannot be accepted (wrong session id, or numbers far outside every
    /// window), and no real packet is tampered with: reliability is checked.
    pub honest: bool,
    /// The handshake runs through the operations (the server accepts the first SYN it is
    /// delivered) instead of completing before them.
    pub handshake_in_ops: bool,
    /// The lone third connection, if any.
    pub lone: Lone,
    /// Paths of each end (1 to 3), path ids 7, 8, 9.
    pub paths: u8,
    /// Datagram size.
    pub mtu: u32,
    /// Receive buffer of the client and of the server.
    pub rcvbuf: [u32; 2],
    /// Send buffer.
    pub sndbuf: u32,
    /// Largest message.
    pub max_msg: u32,
    pub ack_every: u8,
    pub delack_ns: u64,
    pub reno: bool,
    pub pacing: bool,
    /// Initial sequence numbers of client, server and lone connection.
    pub isn: [u64; 3],
    pub session: u64,
    /// Time of the first operation.
    pub start_ns: u64,
    pub nonce_key: [u64; 2],
}

/// The lone third connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lone {
    None,
    /// Connected, waiting for a SYN_ACK that only forged packets can bring.
    SynSent,
    /// Accepted a forged SYN.
    SynReceived,
}

/// How far beyond a window a forged number lies, and on which side, from a [`Num`].
fn far_offset(n: Num) -> (u64, bool) {
    match n {
        Num::Far(k, above) => (u64::from(k), above),
        Num::Near(_, d) => (u64::from(d.unsigned_abs()), d >= 0),
        Num::Raw(r) => (r >> 40, r & 1 == 0),
    }
}

/// A number in a forged header, taken relative to the target connection when the packet is
/// built.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Raw(u64),
    Near(Base, i16),
    Far(u32, bool),
}

/// What [`Num::Near`] is near.
#[derive(Clone, Copy, Debug)]
pub enum Base {
    RcvNxt,
    SndUna,
    SndNxt,
    Isn,
    Zero,
}

/// A forged packet.
#[derive(Clone, Debug)]
pub struct Forged {
    /// Packet type, index into [`PacketType::ALL`] (modulo).
    pub kind: u8,
    /// The target's session id, or this one (made different from the target's).
    pub session: Option<u64>,
    /// Direction bit; `None` for the one the target accepts.
    pub passive: Option<bool>,
    /// Path id: index into the configured ones, or a raw id.
    pub path: Result<u8, u32>,
    pub seq: Num,
    pub ack: Num,
    /// Modifier bits, masked to those the type allows.
    pub modifiers: u16,
    /// DATA payload length (modulo [`MAX_FORGED_PAYLOAD`]).
    pub len: u32,
    /// ACK: dsack, rwnd, delay, base above ack, bitmap.
    pub dsack: Num,
    pub rwnd: u32,
    pub delay: u32,
    pub base_off: u16,
    pub bitmap: Vec<u8>,
    /// SYN, SYN_ACK: initial sequence number, ports matching the target's or these.
    pub initial_seq: u64,
    pub ports: Option<(u16, u16)>,
    pub endpoints: Vec<(bool, [u8; 16], u16, bool)>,
    /// PROBE, PROBE_ACK: nonce (raw, or derived from the target's key with this counter),
    /// timestamp.
    pub nonce: Result<u64, u8>,
    pub ts: u64,
}

/// Which connection an operation acts on: 0 client, 1 server, 2 the lone one (falls back to
/// the client when there is none).
pub type Target = u8;

/// One step.
#[derive(Clone, Debug)]
pub enum Op {
    /// Delivers packet `sel` (modulo) of those on the way to `to` (0 or 1), leaving a copy
    /// on the way if `dup`, marked CE if `ce`.
    Deliver {
        to: u8,
        sel: u16,
        dup: bool,
        ce: bool,
    },
    /// Delivers every packet on the way to `to`, in order.
    DeliverAll {
        to: u8,
    },
    /// Loses packet `sel` on the way to `to`.
    Drop {
        to: u8,
        sel: u16,
    },
    /// Delivers packet `sel` on the way to `to` with bytes changed and the checksum fixed
    /// (not in honest mode).
    Mutate {
        to: u8,
        sel: u16,
        edits: Vec<(u16, u8)>,
    },
    Forge {
        to: Target,
        pkt: Box<Forged>,
    },
    /// Arbitrary bytes; with `fix`, given a valid magic, version and length, this session id
    /// (not in honest mode), and sealed.
    Raw {
        to: Target,
        bytes: Vec<u8>,
        fix: bool,
        own_session: bool,
    },
    Advance(u64),
    /// Moves time to the target's next timer.
    AdvanceToTimer(Target),
    /// Calls `on_timeout` now, due or not.
    Timeout(Target),
    Send {
        on: Target,
        len: u32,
    },
    /// Releases this many received bytes, or all unread ones.
    Release {
        on: Target,
        bytes: Option<u64>,
    },
    Close(Target),
    Abort(Target),
    /// Removes path `sel` (modulo the configured ones).
    RemovePath {
        on: Target,
        sel: u8,
    },
    /// Adds path id `7 + sel % 4` if the connection lacks it.
    AddPath {
        on: Target,
        sel: u8,
        backup: bool,
    },
    /// Reports that a packet could not be sent on path index `sel` (modulo the paths).
    SendFail {
        on: Target,
        sel: u8,
    },
}

// ---------------------------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------------------------

/// A connection and its glue.
struct Peer {
    conn: Box<Conn>,
    name: &'static str,
    /// Bytes of every message accepted, by id.
    msgs_out: Vec<Vec<u8>>,
    /// Payloads stored and not yet part of a delivered message, by sequence number.
    held: HashMap<u64, Vec<u8>>,
    ever_stored: HashSet<u64>,
    /// Messages delivered, in order.
    delivered: Vec<Vec<u8>>,
    /// Delivered bytes not yet released.
    unread: u64,
    /// The receive window those bytes' packets took.
    unread_cost: u64,
    last_msg_seq: Option<u64>,
    connected_seen: bool,
    peer_fin_seen: bool,
    closed_seen: Option<Option<ConnError>>,
    aborted: bool,
    salt: u8,
    prev: Snapshot,
    /// Bytes of the SYNs an accepting end took before its handshake completed.
    amp_in: u64,
    /// Bytes an accepting end sent before its handshake completed.
    amp_out: u64,
    /// Bytes of every packet fed to the connection.
    rx_bytes: u64,
    /// Bytes sent on paths not validated.
    unvalidated_out: u64,
}

/// What must never go back.
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    stats: ConnStats,
    acked_msgs: u64,
    next_msg_id: u64,
    rcv_nxt: u64,
    snd_una: u64,
    snd_nxt: u64,
    send_times: [u64; mrc_conn::SEND_LIMITS],
}

/// Every counter of [`ConnStats`], by name.
fn stat_fields(s: &ConnStats) -> [(&'static str, u64); 24] {
    [
        ("msgs_sent", s.msgs_sent),
        ("msgs_delivered", s.msgs_delivered),
        ("data_sent", s.data_sent),
        ("retransmits", s.retransmits),
        ("rack_losses", s.rack_losses),
        ("spurious_losses", s.spurious_losses),
        ("rto_losses", s.rto_losses),
        ("path_losses", s.path_losses),
        ("rtos", s.rtos),
        ("window_probes", s.window_probes),
        ("data_received", s.data_received),
        ("duplicates", s.duplicates),
        ("rcv_dropped", s.rcv_dropped),
        ("acks_sent", s.acks_sent),
        ("acks_carried", s.acks_carried),
        ("acks_received", s.acks_received),
        ("probes_sent", s.probes_sent),
        ("ce_received", s.ce_received),
        ("ece_received", s.ece_received),
        ("hedges", s.hedges),
        ("spurious_hedges", s.spurious_hedges),
        ("challenge_acks", s.challenge_acks),
        ("endpoints_refused", s.endpoints_refused),
        ("amp_limited", s.amp_limited),
    ]
}

fn path_ids(n: u8) -> Vec<u32> {
    (0..u32::from(n.clamp(1, 3))).map(|i| 7 + i).collect()
}

fn pattern(salt: u8, id: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (id.wrapping_mul(131).wrapping_add(i.wrapping_mul(7)) as u8) ^ salt)
        .collect()
}

impl Setup {
    /// The configuration both ends use; `who` picks the receive buffer.
    fn config(&self, who: usize) -> ConnConfig {
        let mut path = PathConfig::DEFAULT;
        path.mss = self.mtu;
        path.pacing = self.pacing;
        path.cc = if self.reno {
            CcKind::Reno
        } else {
            CcKind::Delay
        };
        ConnConfig {
            mtu: self.mtu,
            rcvbuf: self.rcvbuf[who.min(1)],
            sndbuf: self.sndbuf,
            max_msg: self.max_msg,
            delack_ns: self.delack_ns,
            ack_every: self.ack_every,
            path,
            nonce_key: self.nonce_key,
            ..ConnConfig::DEFAULT
        }
    }
}

impl Peer {
    fn new(cfg: ConnConfig, paths: &[u32], name: &'static str, salt: u8, now: u64) -> Peer {
        let mut conn = Box::new(Conn::new(cfg));
        for (i, &path_id) in paths.iter().enumerate() {
            conn.paths_mut()
                .add(
                    now,
                    PathIds {
                        path_id,
                        plane: (i % 2) as u8,
                        entropy: path_id as u16,
                    },
                    false,
                )
                .expect("room for the paths");
        }
        Peer {
            conn,
            name,
            msgs_out: Vec::new(),
            held: HashMap::new(),
            ever_stored: HashSet::new(),
            delivered: Vec::new(),
            unread: 0,
            unread_cost: 0,
            last_msg_seq: None,
            connected_seen: false,
            peer_fin_seen: false,
            closed_seen: None,
            aborted: false,
            salt,
            prev: Snapshot::default(),
            amp_in: 0,
            amp_out: 0,
            rx_bytes: 0,
            unvalidated_out: 0,
        }
    }

    fn snapshot(&self, now: u64) -> Snapshot {
        let c = &self.conn;
        Snapshot {
            stats: *c.stats(),
            acked_msgs: c.acked_msgs(),
            next_msg_id: c.next_msg_id(),
            rcv_nxt: c.rcv_nxt(),
            snd_una: c.snd_una(),
            snd_nxt: c.snd_nxt(),
            send_times: c.send_times(now),
        }
    }

    /// Checks the invariants that hold after every step.
    fn check(&mut self, now: u64) {
        let name = self.name;
        // The deadlines the path table keeps give the time computing them all gives.
        let computed = self.conn.next_timeout(now);
        assert_eq!(
            self.conn.poll_timeout(now),
            computed,
            "{name}: kept deadlines disagree with computed ones"
        );
        let computed = self.conn.rto_ns();
        assert_eq!(
            self.conn.poll_rto_ns(),
            computed,
            "{name}: kept RTOs disagree with computed ones"
        );
        // The choice of a path says why it found none as a pass of its own would.
        let paths = self.conn.paths();
        for bytes in [64, 1500] {
            for backlog in [u64::from(bytes), 1 << 20, u64::MAX] {
                let told = paths.pick_path_or_why(now, bytes, backlog);
                let looked = paths
                    .pick_path_backlog(now, bytes, backlog)
                    .ok_or_else(|| paths.held_back(now, bytes));
                assert_eq!(told, looked, "{name}: path choice, {bytes} B, {backlog}");
            }
        }
        // The choice from what the table keeps, which it keeps from one step to the next for
        // packets of one size, is the one a pass over every path makes.
        let bytes = 1200;
        for backlog in [u64::from(bytes), 1 << 20, u64::MAX] {
            let kept = self
                .conn
                .paths_mut()
                .poll_pick_path_kept(now, bytes, backlog);
            let told = self.conn.paths().pick_path_or_why(now, bytes, backlog);
            assert_eq!(kept, told, "{name}: kept path choice, {backlog}");
        }
        let c = &self.conn;
        let (una, nxt, rcv) = (c.snd_una(), c.snd_nxt(), c.rcv_nxt());
        assert!(nxt < SEQ_LIMIT, "{name}: snd_nxt {nxt} reached SEQ_LIMIT");
        assert!(rcv < SEQ_LIMIT, "{name}: rcv_nxt {rcv} reached SEQ_LIMIT");
        assert!(una <= nxt, "{name}: snd_una {una} > snd_nxt {nxt}");
        assert!(
            nxt - una <= W,
            "{name}: {una}..{nxt} wider than the send ring"
        );
        assert!(
            c.acked_msgs() <= c.next_msg_id(),
            "{name}: acked_msgs > next_msg_id"
        );
        assert_eq!(
            c.stats().msgs_sent,
            c.next_msg_id(),
            "{name}: msgs_sent != next_msg_id"
        );
        assert_eq!(
            c.next_msg_id(),
            self.msgs_out.len() as u64,
            "{name}: ids do not count messages"
        );
        if matches!(c.state(), State::Closed(_) | State::Idle) {
            assert_eq!(
                c.next_timeout(now),
                None,
                "{name}: timer in {:?}",
                c.state()
            );
        }
        if let Some(e) = self.closed_seen {
            assert_eq!(c.state(), State::Closed(e), "{name}: left Closed");
        }
        let cur = self.snapshot(now);
        let prev = self.prev;
        for ((field, old), (_, new)) in stat_fields(&prev.stats)
            .into_iter()
            .zip(stat_fields(&cur.stats))
        {
            assert!(
                new >= old,
                "{name}: stats.{field} went back from {old} to {new}"
            );
        }
        for (field, old, new) in [
            ("acked_msgs", prev.acked_msgs, cur.acked_msgs),
            ("next_msg_id", prev.next_msg_id, cur.next_msg_id),
            ("rcv_nxt", prev.rcv_nxt, cur.rcv_nxt),
            ("snd_una", prev.snd_una, cur.snd_una),
            ("snd_nxt", prev.snd_nxt, cur.snd_nxt),
        ] {
            assert!(new >= old, "{name}: {field} went back from {old} to {new}");
        }
        for (i, (old, new)) in prev.send_times.iter().zip(cur.send_times).enumerate() {
            assert!(new >= *old, "{name}: send_times[{i}] went back");
        }
        assert!(
            c.stats().msgs_delivered >= self.delivered.len() as u64,
            "{name}: more messages delivered than counted"
        );
        self.prev = cur;
    }
}

/// Describes what can make a connection's timer due, for failure messages.
fn describe(c: &Conn, now: u64) -> String {
    let mut s = format!(
        "state {:?} snd_una {} snd_nxt {} rcv_nxt {} unacked {} rto {} peer_rwnd {} \
         path timer {:?} (data waiting: {:?}) next departure {:?}",
        c.state(),
        c.snd_una(),
        c.snd_nxt(),
        c.rcv_nxt(),
        c.bytes_unacked(),
        c.rto_ns(),
        c.peer_rwnd(),
        c.paths().next_timer_waiting(now, false),
        c.paths().next_timer_waiting(now, true),
        c.paths().next_departure(now, HEADER_LEN as u32 + 1),
    );
    for (i, p) in c.paths().iter() {
        s.push_str(&format!(
            "\n  path {i} id {} {:?} probe_outstanding {} missed {} inflight {} cwnd {} \
             pace {} last_probe {} last_ack {} last_send {}",
            p.ids().path_id,
            p.state(),
            p.probe_outstanding(),
            p.missed_probes(),
            p.inflight(),
            p.cwnd(),
            p.pace_ns(),
            p.last_probe_ns(),
            p.last_ack_ns(),
            p.last_send_ns(),
        ));
    }
    s
}

/// A client, a server, the network between them and perhaps a lone third connection.
pub struct World {
    setup: Setup,
    now: u64,
    peers: Vec<Peer>,
    /// Packets on the way to the client and to the server.
    net: [VecDeque<Vec<u8>>; 2],
    paths: Vec<u32>,
    lone_session: u64,
    buf: Vec<u8>,
    /// Messages of each end already compared with what the other sent.
    checked: [usize; 2],
    pub log: bool,
    /// Whether to count what happens in `tally`.
    pub count: bool,
    /// What happened, for `props::coverage`: packet type and outcome of every input, states
    /// reached.
    pub tally: HashMap<String, u64>,
}

impl World {
    pub fn new(setup: Setup) -> World {
        let now = setup.start_ns.min(TIME_CAP);
        let paths = path_ids(setup.paths);
        let client = Peer::new(setup.config(0), &paths, "client", 0x00, now);
        let server = Peer::new(setup.config(1), &paths, "server", 0x5A, now);
        let lone_session = setup.session ^ 0x00FF_00FF_00FF_00FF;
        let mut w = World {
            now,
            peers: vec![client, server],
            net: [VecDeque::new(), VecDeque::new()],
            paths,
            lone_session,
            buf: vec![0u8; 70_000],
            checked: [0, 0],
            setup,
            log: false,
            count: false,
            tally: HashMap::new(),
        };
        w.start();
        w
    }

    fn start(&mut self) {
        let now = self.now;
        let s = self.setup.clone();
        let c = &mut self.peers[0].conn;
        c.set_ports(CLIENT_PORT, SERVER_PORT);
        c.connect(now, s.session, s.isn[0], &[]).expect("connect");
        if !s.handshake_in_ops {
            for _ in 0..4 {
                self.pump_all();
                self.deliver_all(1);
                self.pump_all();
                self.deliver_all(0);
            }
            assert_eq!(self.peers[0].conn.state(), State::Established);
            assert_eq!(self.peers[1].conn.state(), State::Established);
        }
        match s.lone {
            Lone::None => {}
            Lone::SynSent => {
                let mut p = Peer::new(s.config(0), &self.paths, "lone", 0xA5, now);
                p.conn.set_ports(1000, 2000);
                p.conn
                    .connect(now, self.lone_session, s.isn[2], &[])
                    .expect("connect");
                self.peers.push(p);
            }
            Lone::SynReceived => {
                let mut p = Peer::new(s.config(1), &self.paths, "lone", 0xA5, now);
                let eps = [
                    Endpoint::v4([10, 0, 0, 1], 1, false),
                    Endpoint::v4([127, 0, 0, 1], 2, true),
                    Endpoint::v6(
                        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                        3,
                        false,
                    ),
                ];
                let hs = Handshake::new(s.isn[0] ^ 0x55, 1 << 16, 1000, 2000, &eps);
                let header = Header {
                    flags: Flags::new(PacketType::Syn),
                    session_id: self.lone_session,
                    path_id: self.paths[0],
                    seq: 0,
                    ack: 0,
                    payload_len: 0,
                };
                let mut buf = vec![0u8; 1024];
                let n = mrc_proto::encode(&header, &Body::Syn(hs), &mut buf).expect("SYN encodes");
                let pkt = decode(&buf[..n]).expect("SYN decodes");
                p.conn
                    .set_handshake_peer(Endpoint::v4([192, 0, 2, 1], 1, false));
                p.conn.accept(now, &pkt, s.isn[2], &[]).expect("accept");
                p.amp_in = n as u64;
                p.rx_bytes = n as u64;
                self.peers.push(p);
            }
        }
        self.pump_all();
        self.check_all();
    }

    fn target(&self, t: Target) -> usize {
        let t = usize::from(t % 3);
        if t < self.peers.len() {
            t
        } else {
            0
        }
    }

    /// Drains events and transmissions of peer `i`; returns how many there were.
    fn drain(&mut self, i: usize) -> usize {
        let mut n = 0;
        for _ in 0..MAX_EVENTS {
            let Some(ev) = self.peers[i].conn.poll_event() else {
                break;
            };
            n += 1;
            self.on_event(i, ev);
        }
        assert!(self.peers[i].conn.poll_event().is_none() || n < MAX_EVENTS);
        let now = self.now;
        for k in 0..=MAX_TX {
            assert!(
                k < MAX_TX,
                "{}: poll_transmit never ran dry ({:?})",
                self.peers[i].name,
                self.peers[i].conn.state()
            );
            let mut buf = std::mem::take(&mut self.buf);
            let tx = self.peers[i].conn.poll_transmit(now, &mut buf);
            let Some(tx) = tx else {
                self.buf = buf;
                break;
            };
            n += 1;
            let bytes = self.finish(i, &tx, &mut buf);
            self.buf = buf;
            let p = &mut self.peers[i];
            if p.conn
                .paths()
                .get(tx.path)
                .is_some_and(|q| !q.is_validated())
            {
                assert!(
                    matches!(
                        tx.kind,
                        PacketType::Probe | PacketType::ProbeAck | PacketType::Ack
                    ),
                    "{}: {:?} on an unvalidated path",
                    p.name,
                    tx.kind
                );
                p.unvalidated_out += bytes.len() as u64;
                assert!(
                    p.unvalidated_out <= 3 * p.rx_bytes,
                    "{}: sent {} bytes on unvalidated paths, for {} received",
                    p.name,
                    p.unvalidated_out,
                    p.rx_bytes
                );
            }
            if p.conn.is_passive() && !p.connected_seen {
                p.amp_out += bytes.len() as u64;
                assert!(
                    p.amp_out <= 3 * p.amp_in,
                    "{}: sent {} bytes before the handshake completed, for {} of SYNs",
                    p.name,
                    p.amp_out,
                    p.amp_in
                );
            }
            if i < 2 {
                let q = &mut self.net[1 - i];
                q.push_back(bytes);
                if q.len() > NET_CAP {
                    q.pop_front();
                }
            }
        }
        n
    }

    /// Completes and checks one packet peer `i` wants sent.
    fn finish(&self, i: usize, tx: &mrc_conn::Transmit, buf: &mut [u8]) -> Vec<u8> {
        let p = &self.peers[i];
        let c = &p.conn;
        let name = p.name;
        let len = match tx.data {
            None => tx.len,
            Some(d) => {
                assert!(
                    d.msg_id >= c.acked_msgs() && d.msg_id < c.next_msg_id(),
                    "{name}: DATA of message {} outside the unacknowledged {}..{}",
                    d.msg_id,
                    c.acked_msgs(),
                    c.next_msg_id()
                );
                let msg = &p.msgs_out[d.msg_id as usize];
                let (off, dlen) = (d.offset as usize, d.len as usize);
                assert!(
                    off + dlen <= msg.len(),
                    "{name}: DATA beyond the end of message {}",
                    d.msg_id
                );
                assert!(
                    d.len <= c.config().max_payload(),
                    "{name}: DATA payload above max_payload"
                );
                mrc_conn::finish_data(buf, tx, &msg[off..off + dlen]).expect("DATA completes")
            }
        };
        assert_eq!(len, tx.len, "{name}: Transmit::len");
        let bytes = buf[..len].to_vec();
        let pkt =
            decode(&bytes).unwrap_or_else(|e| panic!("{name}: sent an undecodable packet: {e:?}"));
        let h = pkt.header;
        assert_eq!(h.session_id, c.session_id(), "{name}: session id");
        assert_eq!(h.flags.passive(), c.is_passive(), "{name}: direction bit");
        assert_eq!(h.packet_type(), Some(tx.kind), "{name}: Transmit::kind");
        assert!(
            c.paths().get(tx.path).is_some(),
            "{name}: sent on a path it does not have"
        );
        let allowed: &[PacketType] = match c.state() {
            State::Idle => &[],
            State::SynSent => &[PacketType::Syn, PacketType::Rst],
            State::SynReceived => &[PacketType::SynAck, PacketType::Rst],
            State::TimeWait => &[PacketType::Ack, PacketType::ProbeAck, PacketType::Rst],
            State::Closed(_) => &[PacketType::Rst],
            _ => &PacketType::ALL,
        };
        assert!(
            allowed.contains(&tx.kind),
            "{name}: sent {:?} in {:?}",
            tx.kind,
            c.state()
        );
        if let Some(d) = tx.data {
            assert_eq!(h.seq, d.seq, "{name}: DATA seq");
            assert!(d.seq < SEQ_LIMIT, "{name}: DATA seq beyond SEQ_LIMIT");
            assert_eq!(h.flags.first(), d.offset == 0, "{name}: FIRST flag");
            let end = u64::from(d.offset) + u64::from(d.len);
            assert_eq!(
                h.flags.last(),
                end == p.msgs_out[d.msg_id as usize].len() as u64,
                "{name}: LAST flag"
            );
        }
        bytes
    }

    fn on_event(&mut self, i: usize, ev: Event) {
        let p = &mut self.peers[i];
        let name = p.name;
        assert!(
            p.closed_seen.is_none(),
            "{name}: event {ev:?} after Event::Closed"
        );
        match ev {
            Event::Connected => {
                assert!(!p.connected_seen, "{name}: Connected twice");
                p.connected_seen = true;
            }
            Event::Message {
                first_seq,
                last_seq,
                len,
                cost,
            } => {
                assert!(p.connected_seen, "{name}: message before Connected");
                assert!(
                    first_seq <= last_seq,
                    "{name}: message {first_seq}..={last_seq}"
                );
                assert!(
                    last_seq - first_seq < W,
                    "{name}: message wider than the window"
                );
                assert!(
                    last_seq < p.conn.rcv_nxt(),
                    "{name}: message beyond rcv_nxt"
                );
                if let Some(prev) = p.last_msg_seq {
                    assert!(first_seq > prev, "{name}: messages out of order");
                }
                assert!(
                    len <= p.conn.config().max_msg,
                    "{name}: message above max_msg"
                );
                p.last_msg_seq = Some(last_seq);
                let mut msg = Vec::with_capacity(len as usize);
                for seq in first_seq..=last_seq {
                    let part = p.held.remove(&seq).unwrap_or_else(|| {
                        panic!("{name}: message {first_seq}..={last_seq} names unstored {seq}")
                    });
                    msg.extend_from_slice(&part);
                }
                assert_eq!(msg.len(), len as usize, "{name}: message length");
                p.unread += u64::from(len);
                p.unread_cost += cost;
                p.delivered.push(msg);
            }
            Event::PeerFin => {
                assert!(!p.peer_fin_seen, "{name}: PeerFin twice");
                p.peer_fin_seen = true;
            }
            Event::Closed(e) => {
                assert_eq!(p.conn.state(), State::Closed(e), "{name}: Closed event");
                p.closed_seen = Some(e);
            }
        }
    }

    /// Drains peer `i` and fires its due timers until none is due.
    ///
    /// A due timer must make progress when fired. Some progress is invisible from outside
    /// (a path's failure detector counting a missed probe moves it from Suspect to Failed
    /// before its next probe is due), so only [`MAX_IDLE_ROUNDS`] rounds in a row may pass
    /// without a packet, an event or a moved timer.
    fn pump(&mut self, i: usize) {
        self.drain(i);
        let now = self.now;
        let mut idle = 0;
        for _ in 0..MAX_TIMER_ROUNDS {
            let t = self.peers[i].conn.next_timeout(now);
            match t {
                Some(t) if t <= now => {}
                _ => return,
            }
            self.peers[i].conn.on_timeout(now);
            let n = self.drain(i);
            let t2 = self.peers[i].conn.next_timeout(now);
            idle = if n > 0 || t2 != t { 0 } else { idle + 1 };
            assert!(
                idle < MAX_IDLE_ROUNDS,
                "{}: timer spins: next_timeout {t:?} <= now {now}, and {MAX_IDLE_ROUNDS} \
                 rounds of on_timeout, poll_event and poll_transmit change nothing\n{}",
                self.peers[i].name,
                describe(&self.peers[i].conn, now)
            );
        }
        panic!(
            "{}: timers still due after {MAX_TIMER_ROUNDS} rounds at {now}\n{}",
            self.peers[i].name,
            describe(&self.peers[i].conn, now)
        );
    }

    fn pump_all(&mut self) {
        for i in 0..self.peers.len() {
            self.pump(i);
        }
    }

    fn check_all(&mut self) {
        let now = self.now;
        for p in &mut self.peers {
            p.check(now);
        }
        if self.setup.honest {
            for i in 0..2 {
                let (rx, tx) = (&self.peers[i], &self.peers[1 - i]);
                assert!(
                    rx.delivered.len() <= tx.msgs_out.len(),
                    "{}: more messages delivered than the {} sent",
                    rx.name,
                    tx.name
                );
                for k in self.checked[i]..rx.delivered.len() {
                    assert!(
                        rx.delivered[k] == tx.msgs_out[k],
                        "{}: message {k} delivered corrupted ({} bytes, sent {})",
                        rx.name,
                        rx.delivered[k].len(),
                        tx.msgs_out[k].len()
                    );
                }
                self.checked[i] = rx.delivered.len();
            }
        }
    }

    /// Feeds `bytes` to peer `i` if they decode; `real` for a packet its peer sent.
    fn input(&mut self, i: usize, bytes: &[u8], ce: bool, real: bool) -> Option<Input> {
        let pkt = decode(bytes).ok()?;
        let now = self.now;
        let p = &mut self.peers[i];
        p.rx_bytes += bytes.len() as u64;
        if real && i == 1 && p.conn.state() == State::Idle {
            if let Body::Syn(_) = pkt.body {
                if p.conn.accept(now, &pkt, self.setup.isn[1], &[]).is_ok() {
                    p.amp_in = bytes.len() as u64;
                }
                return Some(Input::Consumed);
            }
        }
        let syn_received = p.conn.state() == State::SynReceived;
        let res = p.conn.handle_packet_ecn(now, &pkt, ce);
        if syn_received && res == Input::Consumed && matches!(pkt.body, Body::Syn(_)) {
            p.amp_in += bytes.len() as u64;
        }
        if self.count {
            let outcome = match res {
                Input::Store { .. } => "Store".to_string(),
                r => format!("{r:?}"),
            };
            let key = format!(
                "{} {} {} {:?} {outcome}",
                if real { "real" } else { "forged" },
                p.name,
                p.conn.state().name(),
                pkt.body.packet_type()
            );
            self.tally(key);
        }
        let p = &mut self.peers[i];
        if let Input::Store { seq } = res {
            let name = p.name;
            let Body::Data(payload) = pkt.body else {
                panic!("{name}: Store for a {:?}", pkt.header.packet_type());
            };
            assert_eq!(seq, pkt.header.seq, "{name}: Store names another seq");
            assert!(seq < SEQ_LIMIT, "{name}: stored seq beyond SEQ_LIMIT");
            assert!(p.ever_stored.insert(seq), "{name}: seq {seq} stored twice");
            p.held.insert(
                seq,
                payload.bytes().expect("decode keeps the bytes").to_vec(),
            );
        }
        Some(res)
    }

    fn tally(&mut self, key: String) {
        if self.count {
            *self.tally.entry(key).or_default() += 1;
        }
    }

    fn deliver_all(&mut self, to: usize) {
        while let Some(b) = self.net[to].pop_front() {
            self.input(to, &b, false, true);
            self.drain(to);
        }
    }

    fn pick(&self, to: usize, sel: u16) -> Option<usize> {
        let n = self.net[to].len();
        (n > 0).then(|| usize::from(sel) % n)
    }

    /// Resolves a sequence number of a forged packet for peer `i`.
    fn seq_num(&self, i: usize, n: Num, far: bool) -> u64 {
        let c = &self.peers[i].conn;
        if far {
            // Outside [rcv_nxt - WINDOW, msg_first + WINDOW), and not rcv_nxt (an RST).
            let (k, above) = far_offset(n);
            let lo = c.rcv_nxt().saturating_sub(2 * W);
            return if above || lo <= k {
                c.rcv_nxt() + 2 * W + k
            } else {
                lo - k - 1
            };
        }
        self.num(i, n)
    }

    /// Resolves an acknowledgement number of a forged packet for peer `i`.
    fn ack_num(&self, i: usize, n: Num, far: bool) -> u64 {
        let c = &self.peers[i].conn;
        if far {
            // Outside [snd_una - WINDOW, snd_nxt], and not the initial sequence number.
            let (k, above) = far_offset(n);
            let lo = c.snd_una().saturating_sub(2 * W);
            return if above || lo <= k {
                c.snd_nxt() + 1 + k
            } else {
                lo - k - 1
            };
        }
        self.num(i, n)
    }

    fn num(&self, i: usize, n: Num) -> u64 {
        let c = &self.peers[i].conn;
        match n {
            Num::Raw(r) => r,
            Num::Far(k, above) => {
                if above {
                    c.snd_nxt().max(c.rcv_nxt()) + 2 * W + u64::from(k)
                } else {
                    u64::from(k)
                }
            }
            Num::Near(base, d) => {
                let b = match base {
                    Base::RcvNxt => c.rcv_nxt(),
                    Base::SndUna => c.snd_una(),
                    Base::SndNxt => c.snd_nxt(),
                    Base::Isn => self.setup.isn[i.min(2)] & ((1 << 61) - 1),
                    Base::Zero => 0,
                };
                b.saturating_add_signed(i64::from(d))
            }
        }
    }

    /// Builds a forged packet for peer `i`; `None` if it does not encode.
    fn forge(&self, i: usize, f: &Forged) -> Option<Vec<u8>> {
        let c = &self.peers[i].conn;
        let ty = PacketType::ALL[usize::from(f.kind) % PacketType::COUNT];
        let session_id = match f.session {
            None => c.session_id(),
            Some(s) if s == c.session_id() => s ^ 1,
            Some(s) => s,
        };
        // In honest mode a packet with the right session id must not carry a number that an
        // attacker who does not see the traffic could not guess.
        let far = self.setup.honest && i < 2 && session_id == c.session_id();
        let passive = f.passive.unwrap_or(!c.is_passive());
        let mut flags = Flags::new(ty);
        flags = flags.with(Flags(f.modifiers & ty.allowed_modifiers()));
        if passive {
            flags = flags.with(Flags::PASSIVE);
        }
        let path_id = match f.path {
            Ok(k) => self.paths[usize::from(k) % self.paths.len()],
            Err(id) => id,
        };
        let header = Header {
            flags,
            session_id,
            path_id,
            seq: self.seq_num(i, f.seq, far),
            ack: self.ack_num(i, f.ack, far),
            payload_len: 0,
        };
        let eps: Vec<Endpoint> = f
            .endpoints
            .iter()
            .take(MAX_ENDPOINTS)
            .map(|&(v6, addr, port, backup)| {
                if v6 {
                    Endpoint::v6(addr, port, backup)
                } else {
                    Endpoint::v4([addr[0], addr[1], addr[2], addr[3]], port, backup)
                }
            })
            .collect();
        let (src, dst) = f.ports.unwrap_or((c.peer_port(), c.local_port()));
        let hs = Handshake::new(f.initial_seq, f.rwnd, src, dst, &eps);
        let payload = pattern(0xEE, u64::from(f.len), f.len as usize % MAX_FORGED_PAYLOAD);
        let bitmap = &f.bitmap[..f.bitmap.len().min(MAX_SACK_BYTES)];
        let dsack = if far {
            // A D-SACK names a duplicate; a blind one names nothing this end sent lately.
            self.ack_num(i, f.dsack, true)
        } else {
            self.num(i, f.dsack)
        };
        let nonce = match f.nonce {
            Ok(n) => n,
            Err(_) if far => mrc_proto::keyed_nonce([1, 2], session_id, 0),
            Err(k) => mrc_proto::keyed_nonce(self.setup.nonce_key, session_id, u64::from(k)),
        };
        let probe = Probe { nonce, ts: f.ts };
        let body = match ty {
            PacketType::Syn => Body::Syn(hs),
            PacketType::SynAck => Body::SynAck(hs),
            PacketType::Ack => Body::Ack(
                Sack::new(
                    dsack,
                    f.rwnd,
                    header.ack.saturating_add(u64::from(f.base_off)),
                    bitmap,
                )
                .with_delay(u64::from(f.delay)),
            ),
            PacketType::Data => Body::data(&payload),
            PacketType::Fin => Body::Fin,
            PacketType::Rst => Body::Rst,
            PacketType::Probe => Body::Probe(probe),
            PacketType::ProbeAck => Body::ProbeAck(probe),
            PacketType::Retry => Body::Retry,
        };
        let mut out = vec![0u8; HEADER_LEN + 512 + payload.len()];
        let n = mrc_proto::encode(&header, &body, &mut out).ok()?;
        out.truncate(n);
        Some(out)
    }

    /// Runs one operation, pumps every connection and checks the invariants.
    pub fn step(&mut self, op: &Op) {
        if self.log {
            eprintln!("t={} {op:?}", self.now);
        }
        let honest = self.setup.honest;
        match op {
            Op::Deliver { to, sel, dup, ce } => {
                let to = usize::from(to % 2);
                if let Some(k) = self.pick(to, *sel) {
                    let b = if *dup {
                        self.net[to][k].clone()
                    } else {
                        self.net[to].remove(k).unwrap_or_default()
                    };
                    self.input(to, &b, *ce, true);
                }
            }
            Op::DeliverAll { to } => self.deliver_all(usize::from(to % 2)),
            Op::Drop { to, sel } => {
                let to = usize::from(to % 2);
                if let Some(k) = self.pick(to, *sel) {
                    self.net[to].remove(k);
                }
            }
            Op::Mutate { to, sel, edits } => {
                let to = usize::from(to % 2);
                if honest {
                    return self.after_step();
                }
                if let Some(k) = self.pick(to, *sel) {
                    let mut b = self.net[to][k].clone();
                    for &(pos, val) in edits {
                        let n = b.len();
                        // Leave the checksum field alone: it is recomputed.
                        let pos = usize::from(pos) % n;
                        if !(40..44).contains(&pos) {
                            b[pos] = val;
                        }
                    }
                    if mrc_proto::seal(&mut b).is_ok() {
                        self.input(to, &b, false, false);
                    }
                }
            }
            Op::Forge { to, pkt } => {
                let i = self.target(*to);
                if let Some(b) = self.forge(i, pkt) {
                    let wrong_session = decode(&b)
                        .map(|p| p.header.session_id != self.peers[i].conn.session_id())
                        .unwrap_or(true);
                    let res = self.input(i, &b, false, false);
                    if wrong_session && self.peers[i].conn.state() != State::Idle {
                        assert!(
                            matches!(res, None | Some(Input::Dropped(_))),
                            "{}: took a packet of another session: {res:?}",
                            self.peers[i].name
                        );
                    }
                    if honest && i < 2 {
                        assert!(
                            !matches!(res, Some(Input::Store { .. })),
                            "{}: stored blind DATA",
                            self.peers[i].name
                        );
                    }
                }
            }
            Op::Raw {
                to,
                bytes,
                fix,
                own_session,
            } => {
                let i = self.target(*to);
                let mut b = bytes.clone();
                if *fix {
                    if b.len() < HEADER_LEN {
                        b.resize(HEADER_LEN, 0);
                    }
                    b[0..4].copy_from_slice(&mrc_proto::MAGIC.to_be_bytes());
                    b[4..6].copy_from_slice(&mrc_proto::VERSION.to_be_bytes());
                    if *own_session && !(honest && i < 2) {
                        let s = self.peers[i].conn.session_id();
                        b[8..16].copy_from_slice(&s.to_be_bytes());
                    }
                    let plen = (b.len() - HEADER_LEN) as u32;
                    b[36..40].copy_from_slice(&plen.to_be_bytes());
                    let _ = mrc_proto::seal(&mut b);
                }
                let right = decode(&b)
                    .map(|p| p.header.session_id == self.peers[i].conn.session_id())
                    .unwrap_or(false);
                if honest && i < 2 && right {
                    // Random bytes that happen to carry the session id: not blind.
                    return self.after_step();
                }
                self.input(i, &b, false, false);
            }
            Op::Advance(dt) => self.now = self.now.saturating_add(*dt).min(TIME_CAP),
            Op::AdvanceToTimer(t) => {
                let i = self.target(*t);
                if let Some(t) = self.peers[i].conn.next_timeout(self.now) {
                    self.now = self.now.max(t.min(TIME_CAP));
                }
            }
            Op::Timeout(t) => {
                let i = self.target(*t);
                self.peers[i].conn.on_timeout(self.now);
            }
            Op::Send { on, len } => {
                let i = self.target(*on);
                let p = &mut self.peers[i];
                match p.conn.send_message(*len) {
                    Ok(id) => {
                        assert_eq!(id, p.msgs_out.len() as u64, "{}: message id", p.name);
                        assert!(
                            *len <= p.conn.max_msg_len(),
                            "{}: a message of {len} bytes taken",
                            p.name
                        );
                        assert!(
                            matches!(p.conn.state(), State::Established | State::CloseWait),
                            "{}: message accepted in {:?}",
                            p.name,
                            p.conn.state()
                        );
                        let salt = p.salt;
                        p.msgs_out.push(pattern(salt, id, *len as usize));
                    }
                    Err(SendError::MsgSize) => {
                        assert!(*len > p.conn.max_msg_len(), "{}: EMSGSIZE", p.name);
                    }
                    Err(_) => {}
                }
            }
            Op::Release { on, bytes } => {
                let i = self.target(*on);
                let p = &mut self.peers[i];
                let n = bytes.unwrap_or(p.unread).min(p.unread);
                // A part of what was read gives back its share of the window.
                let cost = if n == p.unread {
                    p.unread_cost
                } else {
                    p.unread_cost * n / p.unread
                };
                p.conn.release_recv(n, cost);
                p.unread -= n;
                p.unread_cost -= cost;
            }
            Op::Close(t) => {
                let i = self.target(*t);
                let now = self.now;
                self.peers[i].conn.close(now);
            }
            Op::Abort(t) => {
                let i = self.target(*t);
                let now = self.now;
                let p = &mut self.peers[i];
                if !matches!(p.conn.state(), State::Closed(_) | State::Idle) {
                    p.aborted = true;
                }
                p.conn.abort(now);
            }
            Op::RemovePath { on, sel } => {
                let i = self.target(*on);
                let id = self.paths[usize::from(*sel) % self.paths.len()];
                let now = self.now;
                let _ = self.peers[i].conn.remove_path(now, id);
            }
            Op::AddPath { on, sel, backup } => {
                let i = self.target(*on);
                let id = 7 + u32::from(sel % 4);
                let now = self.now;
                let c = &mut self.peers[i].conn;
                if c.paths().find(id).is_none() {
                    let ids = PathIds {
                        path_id: id,
                        plane: sel % 2,
                        entropy: id as u16,
                    };
                    if sel & 4 == 0 {
                        let _ = c.paths_mut().add(now, ids, *backup);
                    } else {
                        // A path to an endpoint of the peer's that nothing has proven.
                        let ep = Endpoint::v4([10, 0, (sel >> 3) % 4, 1], 6000, false);
                        let _ = c.add_peer_path(now, ids, *backup, &ep);
                    }
                }
            }
            Op::SendFail { on, sel } => {
                let i = self.target(*on);
                let now = self.now;
                let c = &mut self.peers[i].conn;
                let n = c.paths().len();
                if n > 0 {
                    let idx = c.paths().iter().nth(usize::from(*sel) % n).map(|(i, _)| i);
                    if let Some(idx) = idx {
                        c.on_send_error(now, idx);
                    }
                }
            }
        }
        self.after_step();
    }

    fn after_step(&mut self) {
        self.pump_all();
        self.check_all();
    }

    fn all_delivered(&self) -> bool {
        (0..2).all(|i| self.peers[i].delivered.len() == self.peers[1 - i].msgs_out.len())
    }

    /// Numbers that grow while the pair makes progress.
    fn progress(&self) -> [u64; 3] {
        let c = |i: usize| &self.peers[i].conn;
        [
            c(0).snd_una().wrapping_add(c(1).snd_una()),
            c(0).rcv_nxt().wrapping_add(c(1).rcv_nxt()),
            (self.peers[0].delivered.len() + self.peers[1].delivered.len()) as u64,
        ]
    }

    /// Leaves the network alone: delivers everything, reads everything and lets timers run
    /// until both ends have delivered every message the other accepted, or nothing has moved
    /// for [`SETTLE_STALL_NS`]. Honest mode only.
    pub fn settle(&mut self) {
        if !self.setup.honest {
            return;
        }
        let mut last = (self.progress(), self.now);
        for _ in 0..SETTLE_ROUNDS {
            if self.all_delivered() {
                self.tally("settle: all delivered".into());
                return;
            }
            if self.net.iter().all(VecDeque::is_empty) {
                let now = self.now;
                let next = (0..2)
                    .filter_map(|i| self.peers[i].conn.next_timeout(now))
                    .min();
                let Some(t) = next else {
                    break;
                };
                if t >= TIME_CAP {
                    // The end of time: nothing more can happen.
                    return;
                }
                self.now = self.now.max(t);
            } else {
                self.deliver_all(0);
                self.deliver_all(1);
            }
            for i in 0..2 {
                let p = &mut self.peers[i];
                p.conn.release_recv(p.unread, p.unread_cost);
                p.unread = 0;
                p.unread_cost = 0;
            }
            self.pump_all();
            self.check_all();
            let key = self.progress();
            if key != last.0 {
                last = (key, self.now);
            } else if self.now - last.1 > SETTLE_STALL_NS {
                break;
            }
        }
        let broken = self.peers[..2].iter().any(|p| {
            p.aborted || matches!(p.conn.state(), State::Closed(Some(_))) || !p.connected_seen
        });
        let key = if broken {
            "settle: liveness not checked"
        } else {
            "settle: liveness checked"
        };
        self.tally(key.to_string());
        if !broken {
            assert!(
                self.all_delivered(),
                "not everything delivered after settling at {} (no progress since {}): client {:?} {}/{} msgs, \
                 server {:?} {}/{} msgs",
                self.now,
                last.1,
                self.peers[0].conn.state(),
                self.peers[0].delivered.len(),
                self.peers[1].msgs_out.len(),
                self.peers[1].conn.state(),
                self.peers[1].delivered.len(),
                self.peers[0].msgs_out.len(),
            );
        }
    }
}

/// Runs a whole case; returns the world for inspection. `count` fills [`World::tally`].
pub fn run_counting(setup: Setup, ops: &[Op], count: bool) -> World {
    let mut w = World::new(setup);
    w.log = std::env::var_os("CONN_FUZZ_LOG").is_some();
    w.count = count;
    for op in ops {
        w.step(op);
    }
    w.settle();
    for i in 0..w.peers.len() {
        let p = &w.peers[i];
        let key = format!(
            "end {} {:?} delivered>0: {}",
            p.name,
            p.conn.state(),
            !p.delivered.is_empty()
        );
        w.tally(key);
    }
    w
}

/// Runs a whole case.
pub fn run(setup: Setup, ops: &[Op]) {
    run_counting(setup, ops, false);
}

// ---------------------------------------------------------------------------------------------
// Operations from bytes (the libFuzzer target)
// ---------------------------------------------------------------------------------------------

/// Reads numbers from a byte string, zeros once it is exhausted.
pub struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = usize::from(self.u8()).min(max).min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }

    fn target(&mut self) -> Target {
        self.u8() % 3
    }

    fn num(&mut self) -> Num {
        match self.u8() % 4 {
            0 => Num::Raw(self.u64()),
            1 => Num::Far(self.u32(), self.bool()),
            _ => {
                let base = match self.u8() % 5 {
                    0 => Base::RcvNxt,
                    1 => Base::SndUna,
                    2 => Base::SndNxt,
                    3 => Base::Isn,
                    _ => Base::Zero,
                };
                Num::Near(base, self.u16() as i16 >> 4)
            }
        }
    }

    fn setup(&mut self) -> Setup {
        let flags = self.u8();
        let max_msg = u32::from(self.u16()) % 20_000;
        Setup {
            honest: flags & 1 != 0,
            handshake_in_ops: flags & 2 != 0,
            lone: match (flags >> 2) % 3 {
                0 => Lone::None,
                1 => Lone::SynSent,
                _ => Lone::SynReceived,
            },
            paths: 1 + (flags >> 4) % 3,
            reno: flags & 0x40 != 0,
            pacing: flags & 0x80 != 0,
            mtu: 45 + u32::from(self.u16()) % 1500,
            rcvbuf: [
                1 + u32::from(self.u16()) * 16,
                1 + u32::from(self.u16()) * 16,
            ],
            sndbuf: 1 + u32::from(self.u16()) * 16,
            max_msg,
            ack_every: self.u8() % 5,
            delack_ns: u64::from(self.u32()),
            isn: [self.u64(), self.u64(), self.u64()],
            session: self.u64(),
            start_ns: self.u64() % (1 << 61),
            nonce_key: [self.u64(), self.u64()],
        }
    }

    fn forged(&mut self) -> Forged {
        Forged {
            kind: self.u8(),
            session: if self.u8() & 3 == 0 {
                Some(self.u64())
            } else {
                None
            },
            passive: match self.u8() % 4 {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            },
            path: if self.bool() {
                Ok(self.u8())
            } else {
                Err(self.u32())
            },
            seq: self.num(),
            ack: self.num(),
            modifiers: self.u16(),
            len: u32::from(self.u16()),
            dsack: self.num(),
            rwnd: self.u32(),
            delay: self.u32(),
            base_off: self.u16() % 2048,
            bitmap: self.bytes(MAX_SACK_BYTES),
            initial_seq: self.u64(),
            ports: if self.bool() {
                Some((self.u16(), self.u16()))
            } else {
                None
            },
            endpoints: (0..self.u8() % 4)
                .map(|_| {
                    let mut addr = [0u8; 16];
                    addr[..4].copy_from_slice(&self.u32().to_be_bytes());
                    (self.bool(), addr, self.u16(), self.bool())
                })
                .collect(),
            nonce: if self.bool() {
                Ok(self.u64())
            } else {
                Err(self.u8() % 8)
            },
            ts: self.u64(),
        }
    }

    /// Reads one operation.
    pub fn op(&mut self) -> Op {
        match self.u8() % 20 {
            0..=3 => Op::Deliver {
                to: self.u8(),
                sel: u16::from(self.u8() % 4),
                dup: self.u8() & 7 == 0,
                ce: self.u8() & 7 == 0,
            },
            4 => Op::DeliverAll { to: self.u8() },
            5 => Op::Drop {
                to: self.u8(),
                sel: self.u16(),
            },
            6 => Op::Mutate {
                to: self.u8(),
                sel: self.u16(),
                edits: (0..1 + self.u8() % 4)
                    .map(|_| (self.u16(), self.u8()))
                    .collect(),
            },
            7 | 8 => Op::Forge {
                to: self.target(),
                pkt: Box::new(self.forged()),
            },
            9 => Op::Raw {
                to: self.target(),
                fix: self.bool(),
                own_session: self.bool(),
                bytes: self.bytes(255),
            },
            10 => Op::Advance(match self.u8() % 4 {
                0 => 0,
                1 => u64::from(self.u16()),
                2 => u64::from(self.u32()),
                _ => self.u64() >> (self.u8() % 64),
            }),
            11 => Op::AdvanceToTimer(self.target()),
            12 => Op::Timeout(self.target()),
            13 | 14 => Op::Send {
                on: self.target(),
                len: if self.u8() == 0 {
                    self.u32()
                } else {
                    u32::from(self.u16() % 8192)
                },
            },
            15 => Op::Release {
                on: self.target(),
                bytes: if self.bool() {
                    None
                } else {
                    Some(u64::from(self.u32()))
                },
            },
            16 => match self.u8() % 4 {
                0 => Op::Abort(self.target()),
                _ => Op::Close(self.target()),
            },
            17 => Op::RemovePath {
                on: self.target(),
                sel: self.u8(),
            },
            18 => Op::AddPath {
                on: self.target(),
                sel: self.u8(),
                backup: self.bool(),
            },
            _ => Op::SendFail {
                on: self.target(),
                sel: self.u8(),
            },
        }
    }
}

/// Interprets `data` as a setup and a sequence of operations and runs them.
pub fn run_bytes(data: &[u8]) {
    let mut r = Bytes(data);
    let setup = r.setup();
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 1_000 {
        ops.push(r.op());
    }
    run(setup, &ops);
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Cases per property unless `PROPTEST_CASES` says otherwise.
    const DEFAULT_CASES: u32 = 512;

    fn config() -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_CASES);
        ProptestConfig {
            cases,
            max_shrink_iters: 2_000,
            ..ProptestConfig::default()
        }
    }

    fn setup(honest: bool) -> impl Strategy<Value = Setup> {
        (
            (any::<bool>(), 0u8..3, 1u8..=3, any::<bool>(), any::<bool>()),
            prop_oneof![Just(1400u32), 45u32..300, 300u32..1500],
            (
                prop_oneof![Just(4u32 << 20), 1u32..5000, 5000u32..200_000],
                prop_oneof![Just(4u32 << 20), 1u32..5000, 5000u32..200_000],
                prop_oneof![Just(4u32 << 20), 1u32..5000, 5000u32..200_000],
            ),
            prop_oneof![Just(1u32 << 20), 0u32..4000, 4000u32..20_000],
            (0u8..5, prop_oneof![Just(1_000_000u64), 0u64..10_000_000]),
            (
                [
                    prop_oneof![0u64..2048, any::<u64>()],
                    prop_oneof![0u64..2048, any::<u64>()],
                    prop_oneof![0u64..2048, any::<u64>()],
                ],
                any::<u64>(),
                prop_oneof![Just(0u64), any::<u64>().prop_map(|t| t % (1 << 61))],
                any::<[u64; 2]>(),
            ),
        )
            .prop_map(
                move |(
                    (hs, lone, paths, reno, pacing),
                    mtu,
                    (rcv0, rcv1, sndbuf),
                    max_msg,
                    (ack_every, delack_ns),
                    (isn, session, start_ns, nonce_key),
                )| Setup {
                    honest,
                    handshake_in_ops: hs,
                    lone: [Lone::None, Lone::SynSent, Lone::SynReceived][usize::from(lone)],
                    paths,
                    mtu,
                    rcvbuf: [rcv0, rcv1],
                    sndbuf,
                    max_msg,
                    ack_every,
                    delack_ns,
                    reno,
                    pacing,
                    isn,
                    session,
                    start_ns,
                    nonce_key,
                },
            )
    }

    fn num() -> impl Strategy<Value = Num> {
        let base = prop_oneof![
            Just(Base::RcvNxt),
            Just(Base::SndUna),
            Just(Base::SndNxt),
            Just(Base::Isn),
            Just(Base::Zero),
        ];
        let delta = prop_oneof![
            4 => -3i16..=3,
            2 => -1100i16..=1100,
            1 => Just(W as i16),
            1 => Just(-(W as i16)),
            1 => any::<i16>(),
        ];
        prop_oneof![
            4 => (base, delta).prop_map(|(b, d)| Num::Near(b, d)),
            1 => any::<u64>().prop_map(Num::Raw),
            1 => (any::<u32>(), any::<bool>()).prop_map(|(k, a)| Num::Far(k, a)),
        ]
    }

    fn forged() -> impl Strategy<Value = Forged> {
        let endpoint = (
            any::<bool>(),
            any::<[u8; 16]>(),
            any::<u16>(),
            any::<bool>(),
        );
        (
            (
                0u8..8,
                prop_oneof![3 => Just(None), 1 => any::<u64>().prop_map(Some)],
                prop_oneof![6 => Just(None), 1 => any::<bool>().prop_map(Some)],
                prop_oneof![4 => any::<u8>().prop_map(Ok), 1 => any::<u32>().prop_map(Err)],
                num(),
                num(),
                any::<u16>(),
            ),
            (
                prop_oneof![4 => 0u32..200, 2 => 0u32..3000, 1 => any::<u16>().prop_map(u32::from)],
                num(),
                prop_oneof![Just(u32::MAX), any::<u32>(), 0u32..100_000],
                any::<u32>(),
                prop_oneof![3 => Just(0u16), 1 => 0u16..1100],
                prop::collection::vec(any::<u8>(), 0..=MAX_SACK_BYTES),
            ),
            (
                any::<u64>(),
                prop_oneof![3 => Just(None), 1 => any::<(u16, u16)>().prop_map(Some)],
                prop::collection::vec(endpoint, 0..4),
                prop_oneof![any::<u64>().prop_map(Ok), (0u8..8).prop_map(Err)],
                any::<u64>(),
            ),
        )
            .prop_map(
                |(
                    (kind, session, passive, path, seq, ack, modifiers),
                    (len, dsack, rwnd, delay, base_off, bitmap),
                    (initial_seq, ports, endpoints, nonce, ts),
                )| Forged {
                    kind,
                    session,
                    passive,
                    path,
                    seq,
                    ack,
                    modifiers,
                    len,
                    dsack,
                    rwnd,
                    delay,
                    base_off,
                    bitmap,
                    initial_seq,
                    ports,
                    endpoints,
                    nonce,
                    ts,
                },
            )
    }

    fn op() -> impl Strategy<Value = Op> {
        let side = || 0u8..2;
        let target = || prop_oneof![4 => 0u8..2, 1 => Just(2u8)];
        prop_oneof![
            60 => (side(), prop_oneof![3 => Just(0u16), 1 => 0u16..16], prop::bool::weighted(0.1), prop::bool::weighted(0.1))
                .prop_map(|(to, sel, dup, ce)| Op::Deliver { to, sel, dup, ce }),
            30 => side().prop_map(|to| Op::DeliverAll { to }),
            15 => (side(), any::<u16>()).prop_map(|(to, sel)| Op::Drop { to, sel }),
            10 => (side(), any::<u16>(), prop::collection::vec(any::<(u16, u8)>(), 1..4))
                .prop_map(|(to, sel, edits)| Op::Mutate { to, sel, edits }),
            40 => (target(), forged()).prop_map(|(to, pkt)| Op::Forge { to, pkt: Box::new(pkt) }),
            5 => (target(), prop::collection::vec(any::<u8>(), 0..120), any::<bool>(), any::<bool>())
                .prop_map(|(to, bytes, fix, own_session)| Op::Raw { to, bytes, fix, own_session }),
            30 => prop_oneof![
                2 => Just(0u64),
                2 => 0u64..100_000,
                2 => 0u64..5_000_000,
                1 => 0u64..2_000_000_000,
            ]
            .prop_map(Op::Advance),
            // Beyond the user timeout.
            1 => prop_oneof![Just(31_000_000_000u64), any::<u64>().prop_map(|t| t >> 10)]
                .prop_map(Op::Advance),
            15 => target().prop_map(Op::AdvanceToTimer),
            5 => target().prop_map(Op::Timeout),
            30 => (target(), prop_oneof![6 => 0u32..1500, 3 => 0u32..20_000, 1 => any::<u32>()])
                .prop_map(|(on, len)| Op::Send { on, len }),
            10 => (target(), prop_oneof![Just(None), any::<u32>().prop_map(|b| Some(u64::from(b)))])
                .prop_map(|(on, bytes)| Op::Release { on, bytes }),
            3 => target().prop_map(Op::Close),
            1 => target().prop_map(Op::Abort),
            3 => (target(), any::<u8>()).prop_map(|(on, sel)| Op::RemovePath { on, sel }),
            3 => (target(), any::<u8>(), any::<bool>())
                .prop_map(|(on, sel, backup)| Op::AddPath { on, sel, backup }),
            3 => (target(), any::<u8>()).prop_map(|(on, sel)| Op::SendFail { on, sel }),
        ]
    }

    /// Prints what the generated cases reach (inputs by state, type and outcome; end
    /// states): `cargo test --release --test conn_fuzz coverage -- --ignored --nocapture`.
    #[test]
    #[ignore = "a report, not a test"]
    fn coverage() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut total: HashMap<String, u64> = HashMap::new();
        let mut runner = TestRunner::new(config());
        for honest in [true, false] {
            let strategy = (setup(honest), prop::collection::vec(op(), 1..150));
            for _ in 0..config().cases {
                let (s, ops) = strategy.new_tree(&mut runner).expect("a case").current();
                for (k, v) in run_counting(s, &ops, true).tally {
                    *total
                        .entry(format!(
                            "{} {k}",
                            if honest { "honest" } else { "adversarial" }
                        ))
                        .or_default() += v;
                }
            }
        }
        let mut lines: Vec<_> = total.into_iter().collect();
        lines.sort();
        for (k, v) in lines {
            println!("{v:>9} {k}");
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// Forged packets are blind (wrong session id or far numbers): everything sent
        /// arrives intact and in order, on top of the invariants of every step.
        #[test]
        fn honest_pair_delivers_everything(
            setup in setup(true),
            ops in prop::collection::vec(op(), 1..300),
        ) {
            run(setup, &ops);
        }

        /// Anything goes: forged packets with the right numbers, tampered packets. Only the
        /// invariants of every step are checked.
        #[test]
        fn adversarial_inputs_keep_invariants(
            setup in setup(false),
            ops in prop::collection::vec(op(), 1..300),
        ) {
            run(setup, &ops);
        }

        /// The libFuzzer target's interpretation of arbitrary bytes.
        #[test]
        fn fuzz_target_bytes(data in prop::collection::vec(any::<u8>(), 0..2000)) {
            run_bytes(&data);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reproducers
// ---------------------------------------------------------------------------------------------

/// Replays the file `CONN_FUZZ_INPUT` names (a libFuzzer crash or corpus entry of the `conn`
/// target) with every operation logged; does nothing without it.
#[cfg(test)]
#[test]
fn replay_input() {
    let Some(path) = std::env::var_os("CONN_FUZZ_INPUT") else {
        return;
    };
    let data = std::fs::read(&path).expect("CONN_FUZZ_INPUT names a readable file");
    let mut r = Bytes(&data);
    let setup = r.setup();
    eprintln!("{setup:?}");
    let mut w = World::new(setup);
    w.log = true;
    while !r.is_empty() {
        w.step(&r.op());
    }
    w.settle();
}

/// A message of more than `WINDOW` packets (1025 one-byte packets with a 45-byte MTU; in the
/// kernel, a 1 MiB message on a 576-byte datagram path) is accepted by `send_message` but can
/// never be delivered: the receiver holds payloads from the start of the message being
/// reassembled and drops everything `WINDOW` or more beyond it, while the sender, once the
/// first 1024 packets are acknowledged, sends packet 1025 and retransmits it on every RTO until
/// the user timeout kills the connection.
#[cfg(test)]
#[test]
fn message_longer_than_the_window_is_refused_and_one_that_fits_is_delivered() {
    let setup = Setup {
        honest: true,
        handshake_in_ops: false,
        lone: Lone::None,
        paths: 1,
        mtu: 45,
        rcvbuf: [4 << 20, 4 << 20],
        sndbuf: 4 << 20,
        max_msg: 1 << 20,
        ack_every: 0,
        delack_ns: 1_000_000,
        reno: false,
        pacing: false,
        isn: [0, 0, 0],
        session: 1,
        start_ns: 0,
        nonce_key: [0, 0],
    };
    let mut w = World::new(setup);
    // `Setup::config` keeps messages within the window; this test needs the real limit.
    let cfg = ConnConfig {
        max_msg: 1 << 20,
        ..*w.peers[0].conn.config()
    };
    assert_eq!(cfg.max_payload(), 1);
    let mut client = Peer::new(cfg, &w.paths, "client", 0, 0);
    let server = Peer::new(cfg, &w.paths, "server", 0x5A, 0);
    client.conn.set_ports(CLIENT_PORT, SERVER_PORT);
    client.conn.connect(0, 1, 0, &[]).expect("connect");
    w.peers[0] = client;
    w.peers[1] = server;
    w.net = [VecDeque::new(), VecDeque::new()];
    for _ in 0..4 {
        w.pump_all();
        w.deliver_all(1);
        w.pump_all();
        w.deliver_all(0);
    }
    assert_eq!(w.peers[1].conn.state(), State::Established);
    // A message the receiver could never hold whole is refused at once...
    assert_eq!(w.peers[0].conn.send_message(1025), Err(SendError::MsgSize));
    assert_eq!(w.peers[0].conn.max_msg_len(), 1024);
    // ... and one that just fits is delivered.
    w.step(&Op::Send { on: 0, len: 1024 });
    w.settle();
    assert_eq!(
        w.peers[1].delivered.len(),
        1,
        "{:?}",
        w.peers[0].conn.state()
    );
}
