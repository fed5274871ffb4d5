// SPDX-License-Identifier: GPL-2.0
//! Deterministic network simulator for two `mrc_conn` endpoints.
//!
//! Two [`Node`]s, a client (index 0) and a server (index 1), each own a `Conn` and a tiny glue:
//! a send queue of messages the application wants to send, the message bytes the core refers
//! to by id, a store of received payloads keyed by sequence number, and the messages delivered
//! so far. They are joined by N paths, each a pair of one-way links with its own rate,
//! delay, jitter, loss, duplication, corruption, reordering and outage schedule. Everything
//! runs in virtual nanoseconds off one seeded generator, so a seed replays exactly.
//!
//! Corrupted datagrams get one byte flipped. One flipped in a DATA payload, which MRC's
//! checksum leaves to the UDP checksum, is dropped as the receiver's UDP layer would drop it
//! (a UDP checksum catches every single flipped byte); any other is fed to the decoder, which
//! must reject it. The simulator counts both and never hands such a packet to the core. As in
//! the module, a DATA packet is decoded by `mrc_proto::decode_data` from its header, its
//! payload kept by the glue, and every other packet by `mrc_proto::decode`; every DATA
//! datagram also goes through `decode`, which must agree.
//!
//! Shared by the simulator tests (and meant for later multipath tests), so not every item is
//! used by every test binary.

#![allow(dead_code)]

use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::rc::Rc;

use mrc_core::mrc_conn::{self, Conn, ConnConfig, ConnError, Event, Input, State};
use mrc_core::mrc_path::PathIds;
use mrc_core::mrc_proto::{self, Body, DecodeError, Endpoint, Packet, PacketType, HEADER_LEN};

/// One microsecond in nanoseconds.
pub const US: u64 = 1_000;
/// One millisecond in nanoseconds.
pub const MS: u64 = 1_000_000;
/// One second in nanoseconds.
pub const SEC: u64 = 1_000_000_000;
/// MRC port of the client's socket.
pub const CLIENT_PORT: u16 = 40_000;
/// MRC port the server listens on.
pub const SERVER_PORT: u16 = 7;

/// SplitMix64: small, fast, good enough for test schedules.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Returns a value in `0..n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Returns a value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// Returns true with probability `ppm` / 1e6.
    pub fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.below(1_000_000) < u64::from(ppm)
    }
}

/// One direction of one path.
#[derive(Clone, Debug)]
pub struct LinkCfg {
    /// Fixed one-way delay.
    pub delay_ns: u64,
    /// Extra random delay, uniform in `0..=jitter_ns` (this alone reorders packets).
    pub jitter_ns: u64,
    /// Bottleneck rate in bytes per second; 0 means unlimited.
    pub rate_bps: u64,
    /// Loss probability in parts per million.
    pub loss_ppm: u32,
    /// Duplication probability in parts per million.
    pub dup_ppm: u32,
    /// Probability in parts per million that one byte is corrupted.
    pub corrupt_ppm: u32,
    /// Probability in parts per million that a packet is held back by `reorder_extra_ns`.
    pub reorder_ppm: u32,
    /// Extra delay of a reordered packet.
    pub reorder_extra_ns: u64,
    /// Time ranges `[start, end)` during which everything sent is lost.
    pub outages: Vec<(u64, u64)>,
    /// Largest backlog in bytes waiting for the bottleneck; a datagram that would exceed it
    /// is dropped (tail drop, as a tc qdisc's limit). 0 means unbounded.
    pub queue_limit_bytes: u64,
    /// Changes of `delay_ns` over time: (from this time on, new one-way delay), in time
    /// order, as `tc qdisc change … netem delay` mid-transfer.
    pub delay_changes: Vec<(u64, u64)>,
}

impl LinkCfg {
    /// A clean link with the given delay and no rate limit.
    pub fn clean(delay_ns: u64) -> Self {
        LinkCfg {
            delay_ns,
            jitter_ns: 0,
            rate_bps: 0,
            loss_ppm: 0,
            dup_ppm: 0,
            corrupt_ppm: 0,
            reorder_ppm: 0,
            reorder_extra_ns: 0,
            outages: Vec::new(),
            queue_limit_bytes: 0,
            delay_changes: Vec::new(),
        }
    }

    /// One-way delay of a datagram sent at `now`.
    pub fn delay_at(&self, now: u64) -> u64 {
        self.delay_changes
            .iter()
            .rev()
            .find(|&&(at, _)| now >= at)
            .map_or(self.delay_ns, |&(_, d)| d)
    }

    /// A random impaired link: up to 10% loss, 2% duplication, 1% corruption, 10% reordering.
    pub fn random(rng: &mut Rng) -> Self {
        let delay_ns = rng.range(20 * US, 2 * MS);
        let rates = [0, 125_000_000, 1_250_000_000, 12_500_000];
        LinkCfg {
            delay_ns,
            jitter_ns: rng.below(delay_ns / 2 + 1),
            rate_bps: rates[rng.below(rates.len() as u64) as usize],
            loss_ppm: rng.below(100_001) as u32,
            dup_ppm: rng.below(20_001) as u32,
            corrupt_ppm: rng.below(10_001) as u32,
            reorder_ppm: rng.below(100_001) as u32,
            reorder_extra_ns: rng.range(US, 2 * delay_ns),
            outages: Vec::new(),
            queue_limit_bytes: 0,
            delay_changes: Vec::new(),
        }
    }
}

/// Simulation parameters.
#[derive(Clone, Debug)]
pub struct SimCfg {
    /// Seed of every random choice.
    pub seed: u64,
    /// Per path: (client to server, server to client).
    pub paths: Vec<(LinkCfg, LinkCfg)>,
    /// Configuration of both connections.
    pub conn: ConnConfig,
    /// Give up (and report unfinished) at this virtual time.
    pub max_time_ns: u64,
    /// Close both directions once every message has been accepted by the core.
    pub close_when_done: bool,
    /// The server application reads a delivered message only this long after delivery.
    pub reader_delay_ns: u64,
    /// Host stalls: (mean interval, longest stall). Each node now and then stops handling
    /// packets and timers for a random time, the way a loaded or emulated host delays softirq
    /// and timer work; what arrives meanwhile is handled when the stall ends.
    pub stalls: Option<(u64, u64)>,
    /// Per path, the bottleneck it queues at (paths of one plane share their plane's); empty
    /// means one bottleneck per path. A shared bottleneck takes its rate and queue limit from
    /// the first path that uses it.
    pub bottleneck: Vec<usize>,
    /// Per node, a CPU-bound host: packets wait for processing in CPU queues (see [`CpuModel`]).
    pub cpu: Option<CpuModel>,
    /// Per path, the plane (NIC pair) it runs over; empty means the plane of its bottleneck,
    /// or a plane per path without shared bottlenecks.
    pub planes: Vec<u8>,
    /// Whether the ends open their paths as the kernel does: each end announces an endpoint
    /// per plane in its handshake, the handshake goes on path 0, and the other paths are
    /// opened to the peer's endpoints (the client's once the handshake completes), those on
    /// other planes than path 0's validated by a probe before they carry data. Without it,
    /// both ends have every path from the start, all of them carrying data at once.
    pub announced: bool,
}

/// A host whose packet processing, not its links, is the bottleneck: each node has `queues`
/// CPUs, path `i` is handled by CPU `i % queues` (as RSS spreads flows), and every CPU handles
/// what arrives for it in order, `rx_ns` per packet, and spends `tx_ns` on every packet it
/// sends (which leaves only once that is done). The RTT then grows with the packets queued at
/// the CPUs, whatever the links do. Each CPU of a node with `stalls` also stalls now and then
/// on its own: (mean interval, longest stall), as softirq work on a loaded or emulated host is
/// delayed; timers still fire on time.
#[derive(Clone, Copy, Debug)]
pub struct CpuModel {
    /// Processing time of a received packet.
    pub rx_ns: u64,
    /// Processing time of a sent packet.
    pub tx_ns: u64,
    /// CPUs per node.
    pub queues: usize,
    /// Per node (client, server), stalls of each of its CPUs: (mean interval, longest stall).
    pub stalls: [Option<(u64, u64)>; 2],
    /// Packets of one path a CPU takes at once, as GRO hands the glue a train of them: it
    /// processes those waiting at the head of its queue (at most this many, at least one)
    /// together, hands them to the core one after the other and only then lets the glue send
    /// (one transmit poll per batch). 0 or 1: one packet at a time.
    pub rx_batch: usize,
}

/// One CPU of a [`CpuModel`] host.
#[derive(Clone, Debug, Default)]
struct Cpu {
    /// Received datagrams waiting: (path, bytes).
    fifo: VecDeque<(usize, Vec<u8>)>,
    /// When the CPU is free again.
    free_at: u64,
    /// Whether a `CpuDone` event is pending.
    running: bool,
    /// Packets at the head of `fifo` the running CPU processes (see [`CpuModel::rx_batch`]).
    batch: usize,
    /// (stalled until, next stall starts at).
    stall: (u64, u64),
}

/// Counters of a [`CpuModel`] host.
#[derive(Clone, Debug, Default)]
pub struct CpuStats {
    /// Per node, time its CPUs spent processing packets.
    pub busy_ns: [u64; 2],
    /// Per node, time its CPUs spent stalled, summed over the CPUs.
    pub stalled_ns: [u64; 2],
    /// Per node, packets received and processed.
    pub rx_pkts: [u64; 2],
    /// Per node, batches of received packets processed (one transmit poll each).
    pub rx_batches: [u64; 2],
    /// Per node, packets sent.
    pub tx_pkts: [u64; 2],
}

impl SimCfg {
    /// One clean path of the given one-way delay, default connection settings.
    pub fn clean(seed: u64, paths: usize, delay_ns: u64) -> Self {
        SimCfg {
            seed,
            paths: (0..paths)
                .map(|_| (LinkCfg::clean(delay_ns), LinkCfg::clean(delay_ns)))
                .collect(),
            conn: ConnConfig::default(),
            max_time_ns: 60 * SEC,
            close_when_done: true,
            reader_delay_ns: 0,
            stalls: None,
            bottleneck: Vec::new(),
            cpu: None,
            planes: Vec::new(),
            announced: true,
        }
    }
}

/// Counters of the network.
#[derive(Clone, Debug, Default)]
pub struct NetStats {
    /// Datagrams handed to links.
    pub sent: u64,
    /// Datagrams dropped by loss or outage.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Datagrams with a flipped byte.
    pub corrupted: u64,
    /// Datagrams `decode` rejected.
    pub decode_errors: u64,
    /// Corrupted datagrams whose flipped byte was in a DATA payload, dropped by the UDP
    /// checksum.
    pub udp_checksum_drops: u64,
    /// Datagrams delivered to a core.
    pub delivered: u64,
    /// Datagrams dropped because a bottleneck queue was full.
    pub queue_drops: u64,
    /// Per bottleneck and direction (client to server, server to client), the longest
    /// backlog in bytes a datagram found waiting ahead of it.
    pub peak_backlog: Vec<[u64; 2]>,
}

/// Paths per plane, as the kernel opens them by default (`MRC_EV_PER_PLANE`).
pub const EV: usize = 4;

/// One megabit per second in bytes per second.
pub const MBIT: u64 = 125_000;

/// Datagram size on a 1500-byte MTU, as the glue computes it (IPv6 and UDP headers off).
pub const DGRAM: u32 = 1452;

/// The connection settings of the kernel glue (`conn_config` in `mrc_net.rs`).
pub fn vm_conn() -> ConnConfig {
    let mut c = ConnConfig {
        mtu: DGRAM,
        max_msg: 1 << 20,
        // The socket's buffers are at least two largest messages and 1 MiB.
        rcvbuf: 3 << 20,
        sndbuf: 3 << 20,
        syn_retries: 8,
        ..ConnConfig::default()
    };
    c.path.probe_timeout_min_ns = 10 * MS;
    c.path.mss = DGRAM - mrc_proto::HEADER_LEN as u32;
    c
}

/// The path id both ends use for path `i`.
pub fn path_id(i: usize) -> u32 {
    100 + i as u32
}

/// The endpoint node `node` announces for plane `plane`.
pub fn endpoint(node: usize, plane: u8) -> Endpoint {
    Endpoint::v4([10, 0, plane, 1 + node as u8], 6000, false)
}

/// The endpoints node `node` announces: one per plane of the paths, in order of first use.
fn endpoints(cfg: &SimCfg, node: usize) -> Vec<Endpoint> {
    let mut planes: Vec<u8> = Vec::new();
    for i in 0..cfg.paths.len() {
        let p = ids(cfg, i).plane;
        if !planes.contains(&p) {
            planes.push(p);
        }
    }
    planes.into_iter().map(|p| endpoint(node, p)).collect()
}

/// Opens paths `1..` of `conn`, which node `node` has, to the peer's endpoints (see
/// [`SimCfg::announced`]).
fn open_announced(cfg: &SimCfg, conn: &mut Conn, node: usize, now: u64) {
    for i in 1..cfg.paths.len() {
        let ids = ids(cfg, i);
        let remote = endpoint(1 - node, ids.plane);
        conn.add_peer_path(now, ids, false, &remote);
    }
}

/// The ids of path `i`, on the plane [`SimCfg::planes`] gives it.
fn ids(cfg: &SimCfg, i: usize) -> PathIds {
    let plane = cfg
        .planes
        .get(i)
        .copied()
        .unwrap_or(cfg.bottleneck.get(i).copied().unwrap_or(i) as u8);
    PathIds {
        path_id: path_id(i),
        plane,
        entropy: 49152 + i as u16,
    }
}

/// Expected content of a message: length and CRC32C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    /// Length in bytes.
    pub len: usize,
    /// CRC32C of the bytes.
    pub crc: u32,
}

impl Digest {
    /// Digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest {
            len: bytes.len(),
            crc: mrc_proto::crc32c(0, bytes),
        }
    }
}

/// One endpoint: a connection and its glue.
pub struct Node {
    /// The core under test.
    pub conn: Box<Conn>,
    /// Messages the application still wants to send.
    pub app_queue: VecDeque<Vec<u8>>,
    /// Digests of every message handed to the core, in order.
    pub sent: Vec<Digest>,
    /// Accepted messages not yet acknowledged: (id, bytes).
    unacked: VecDeque<(u64, Vec<u8>)>,
    /// Received payloads by sequence number.
    rx_store: HashMap<u64, Vec<u8>>,
    /// Digests of delivered messages, in order.
    pub received: Vec<Digest>,
    /// When each delivered message was delivered, in order.
    pub received_at: Vec<u64>,
    /// Delivered messages not yet read: (readable at, length).
    unread: VecDeque<(u64, u32, u64)>,
    /// Every event other than messages, in order.
    pub events: Vec<Event>,
    /// Whether `close` has been called.
    pub closed_by_app: bool,
    timer_at: Option<u64>,
}

impl Node {
    fn new(cfg: ConnConfig) -> Self {
        Node {
            conn: Box::new(Conn::new(cfg)),
            app_queue: VecDeque::new(),
            sent: Vec::new(),
            unacked: VecDeque::new(),
            rx_store: HashMap::new(),
            received: Vec::new(),
            received_at: Vec::new(),
            unread: VecDeque::new(),
            events: Vec::new(),
            closed_by_app: false,
            timer_at: None,
        }
    }

    /// Whether the node saw `Event::PeerFin`.
    pub fn saw_peer_fin(&self) -> bool {
        self.events.contains(&Event::PeerFin)
    }

    /// Number of payloads held by the glue.
    pub fn stored(&self) -> usize {
        self.rx_store.len()
    }
}

#[derive(Debug)]
enum Ev {
    Arrive {
        to: usize,
        path: usize,
        bytes: Vec<u8>,
    },
    Timer {
        node: usize,
    },
    Read {
        node: usize,
    },
    /// A CPU of a [`CpuModel`] host finished the packet at the head of its queue.
    CpuDone {
        node: usize,
        cpu: usize,
    },
}

struct Item {
    at: u64,
    order: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Item {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// The simulation: two nodes, the links between them, virtual time.
pub struct Sim {
    /// Virtual time in nanoseconds.
    pub now: u64,
    /// Parameters.
    pub cfg: SimCfg,
    /// Client (0) and server (1).
    pub nodes: [Node; 2],
    /// Network counters.
    pub net: NetStats,
    rng: Rng,
    /// Per path, per direction (0: client to server): when the bottleneck is free again.
    busy_until: Vec<[u64; 2]>,
    queue: BinaryHeap<Reverse<Item>>,
    order: u64,
    buf: Vec<u8>,
    /// Every error found by the glue checks; a correct run leaves it empty.
    pub violations: Vec<String>,
    /// Per node: (stalled until, next stall starts at).
    stall: [(u64, u64); 2],
    /// Per node, the CPUs of a [`CpuModel`] host (empty without one).
    cpus: [Vec<Cpu>; 2],
    /// Counters of the CPU model.
    pub cpu_stats: CpuStats,
    /// Per node, the state of each path after the last event, to count transitions; `None`
    /// for a path not seen yet, whose first state (Suspect while unvalidated) is no
    /// transition.
    path_states: [Vec<Option<mrc_core::mrc_path::PathState>>; 2],
    /// Per node, transitions of a path from Active to Suspect or Failed.
    pub path_downs: [u64; 2],
    /// Per node, those of `path_downs` caused by a loss burst.
    pub loss_burst_downs: [u64; 2],
    /// A bottleneck the client-to-server direction of every path shares with other
    /// simulations (see [`Dumbbell`]), in place of the links' own rate and queue.
    shared: Option<Rc<RefCell<SharedLink>>>,
    /// Per node, the DATA packets it sent that the network dropped and that have not arrived
    /// since (by sequence number): when the first copy was dropped.
    dropped_data: [HashMap<u64, u64>; 2],
    /// Per receiving node, how long each DATA packet the network dropped took to arrive after
    /// all: from the drop of its first copy to the arrival of a later one, in arrival order.
    pub recoveries: [Vec<u64>; 2],
}

impl Sim {
    /// Builds the simulation and starts the client's connect.
    pub fn new(cfg: SimCfg) -> Self {
        Self::build(cfg, 0, None)
    }

    /// Builds a simulation whose client connects at `start_ns` and whose client-to-server
    /// traffic goes through `shared` (see [`Dumbbell`]).
    pub fn new_shared(cfg: SimCfg, start_ns: u64, shared: Rc<RefCell<SharedLink>>) -> Self {
        Self::build(cfg, start_ns, Some(shared))
    }

    fn build(cfg: SimCfg, start: u64, shared: Option<Rc<RefCell<SharedLink>>>) -> Self {
        let mut rng = Rng(cfg.seed);
        let mut client = Node::new(cfg.conn);
        let n_open = if cfg.announced { 1 } else { cfg.paths.len() };
        for i in 0..n_open {
            client.conn.paths_mut().add(start, ids(&cfg, i), false);
        }
        let session = rng.next_u64();
        let isn = rng.next_u64();
        client.conn.set_ports(CLIENT_PORT, SERVER_PORT);
        let eps = if cfg.announced {
            client
                .conn
                .set_handshake_peer(endpoint(1, ids(&cfg, 0).plane));
            endpoints(&cfg, 0)
        } else {
            Vec::new()
        };
        client
            .conn
            .connect(start, session, isn, &eps)
            .expect("connect");
        let server = Node::new(cfg.conn);
        let n = cfg.paths.len();
        let mut sim = Sim {
            now: start,
            nodes: [client, server],
            net: NetStats::default(),
            rng,
            busy_until: vec![[0, 0]; n],
            queue: BinaryHeap::new(),
            order: 0,
            buf: vec![0u8; 70_000],
            violations: Vec::new(),
            stall: [(0, 0); 2],
            cpus: [Vec::new(), Vec::new()],
            cpu_stats: CpuStats::default(),
            path_states: [Vec::new(), Vec::new()],
            path_downs: [0; 2],
            loss_burst_downs: [0; 2],
            shared,
            dropped_data: [HashMap::new(), HashMap::new()],
            recoveries: [Vec::new(), Vec::new()],
            cfg,
        };
        if let Some(m) = sim.cfg.cpu {
            let q = m.queues.max(1);
            sim.cpus = [vec![Cpu::default(); q], vec![Cpu::default(); q]];
        }
        sim.service(0);
        sim
    }

    /// Queues `msg` for sending by node `node`.
    pub fn queue_message(&mut self, node: usize, msg: Vec<u8>) {
        self.nodes[node].app_queue.push_back(msg);
    }

    /// Generates `count` messages of random sizes (1 B to `max_len`) for node `node`.
    pub fn queue_random_messages(&mut self, node: usize, count: usize, max_len: usize) {
        for _ in 0..count {
            let class = self.rng.below(100);
            let len = match class {
                0..=49 => self.rng.range(1, 200),
                50..=79 => self.rng.range(1, 16 << 10),
                80..=94 => self.rng.range(1, 128 << 10),
                _ => self.rng.range(1, 1 << 20),
            } as usize;
            let len = len.min(max_len).max(1);
            let mut msg = vec![0u8; len];
            let mut x = self.rng.next_u64();
            for chunk in msg.chunks_mut(8) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let bytes = x.to_le_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
            self.queue_message(node, msg);
        }
        self.service(node);
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.order += 1;
        self.queue.push(Reverse(Item {
            at,
            order: self.order,
            ev,
        }));
    }

    /// Puts a datagram from node `from` on path `path`.
    fn transmit(&mut self, from: usize, path: usize, bytes: Vec<u8>) {
        self.net.sent += 1;
        let Some((c2s, s2c)) = self.cfg.paths.get(path) else {
            self.violations
                .push(format!("transmit on unknown path {path}"));
            return;
        };
        let link = if from == 0 { c2s } else { s2c }.clone();
        let to = 1 - from;
        // A CPU-bound host spends `tx_ns` on the packet before it leaves.
        let mut depart = self.now;
        if let Some(m) = self.cfg.cpu {
            let n = self.cpus[from].len().max(1);
            if let Some(c) = self.cpus[from].get_mut(path % n) {
                let start = self.now.max(c.free_at);
                c.free_at = start + m.tx_ns;
                depart = c.free_at;
                self.cpu_stats.busy_ns[from] += m.tx_ns;
                self.cpu_stats.tx_pkts[from] += 1;
            }
        }
        if link
            .outages
            .iter()
            .any(|&(s, e)| self.now >= s && self.now < e)
            || self.rng.chance(link.loss_ppm)
        {
            self.net.lost += 1;
            self.note_dropped(from, &bytes);
            return;
        }
        if from == 0 {
            if let Some(shared) = self.shared.clone() {
                let queued = shared.borrow_mut().enqueue(self.now, bytes.len() as u64);
                match queued {
                    Some(at) => depart = depart.max(at),
                    None => {
                        self.net.queue_drops += 1;
                        self.net.lost += 1;
                        self.note_dropped(from, &bytes);
                        return;
                    }
                }
                let at = depart + link.delay_at(self.now);
                self.push(at, Ev::Arrive { to, path, bytes });
                return;
            }
        }
        let q = self.cfg.bottleneck.get(path).copied().unwrap_or(path);
        let (rate, limit) =
            self.cfg
                .paths
                .get(q)
                .map_or((link.rate_bps, link.queue_limit_bytes), |(c2s, s2c)| {
                    let l = if from == 0 { c2s } else { s2c };
                    (l.rate_bps, l.queue_limit_bytes)
                });
        if rate > 0 {
            let busy = &mut self.busy_until[q][from];
            let start = (*busy).max(self.now);
            let backlog = (start - self.now) * rate / SEC;
            if self.net.peak_backlog.len() <= q {
                self.net.peak_backlog.resize(q + 1, [0; 2]);
            }
            let peak = &mut self.net.peak_backlog[q][from.min(1)];
            *peak = (*peak).max(backlog);
            if limit > 0 && backlog + bytes.len() as u64 > limit {
                self.net.queue_drops += 1;
                self.net.lost += 1;
                self.note_dropped(from, &bytes);
                return;
            }
            let ser = (bytes.len() as u64 * SEC).div_ceil(rate);
            *busy = start + ser;
            depart = *busy;
        }
        let delay_ns = link.delay_at(self.now);
        let copies = if self.rng.chance(link.dup_ppm) { 2 } else { 1 };
        for copy in 0..copies {
            let mut b = bytes.clone();
            if copy == 1 {
                self.net.duplicated += 1;
            }
            if self.rng.chance(link.corrupt_ppm) && !b.is_empty() {
                let i = self.rng.below(b.len() as u64) as usize;
                let flip = 1 + self.rng.below(255) as u8;
                let in_payload = i >= HEADER_LEN
                    && mrc_proto::peek_header(&b)
                        .is_ok_and(|h| h.packet_type() == Some(PacketType::Data));
                b[i] ^= flip;
                self.net.corrupted += 1;
                if in_payload {
                    self.net.udp_checksum_drops += 1;
                    continue;
                }
            }
            let mut at = depart + delay_ns + self.rng.below(link.jitter_ns + 1);
            if self.rng.chance(link.reorder_ppm) {
                at += link.reorder_extra_ns;
            }
            self.push(at, Ev::Arrive { to, path, bytes: b });
        }
    }

    /// Remembers when a DATA packet node `from` sent was first dropped by the network.
    fn note_dropped(&mut self, from: usize, bytes: &[u8]) {
        let Ok(pkt) = mrc_proto::decode(bytes) else {
            return;
        };
        if matches!(pkt.body, Body::Data(_)) {
            let now = self.now;
            self.dropped_data[from].entry(pkt.header.seq).or_insert(now);
        }
    }

    /// Figures of [`Sim::recoveries`] for node `to`: (count, median, largest) in ns.
    pub fn recovery_summary(&self, to: usize) -> (usize, u64, u64) {
        let mut r = self.recoveries[to].clone();
        r.sort_unstable();
        let n = r.len();
        let median = if n == 0 { 0 } else { r[n / 2] };
        (n, median, r.last().copied().unwrap_or(0))
    }

    /// Hands a datagram that arrived for node `to` to its core, then lets the glue act.
    fn arrive(&mut self, to: usize, path: usize, bytes: &[u8]) {
        self.handle_arrival(to, path, bytes);
        self.service(to);
    }

    /// Decodes a datagram as the module does: a DATA packet (by its type field) with
    /// `decode_data`, which reads only the header, any other with `decode`. Records a violation where `decode_data` and `decode`
    /// disagree on a DATA datagram.
    fn decode_as_module<'a>(&mut self, bytes: &'a [u8]) -> Result<Packet<'a>, DecodeError> {
        let decoded = mrc_proto::decode(bytes);
        let is_data =
            mrc_proto::peek_header(bytes).is_ok_and(|h| h.packet_type() == Some(PacketType::Data));
        if !is_data {
            return decoded;
        }
        let head = bytes.get(..HEADER_LEN).unwrap_or(bytes);
        let fast = mrc_proto::decode_data(head, bytes.len());
        let summary = |r: &Result<Packet<'_>, DecodeError>| {
            r.map(|p| (p.header, p.body.packet_type(), p.body.wire_len()))
        };
        if summary(&fast) != summary(&decoded) {
            self.violations.push(format!(
                "decode_data gave {:?}, decode {:?}",
                summary(&fast),
                summary(&decoded)
            ));
        }
        fast
    }

    /// Hands a datagram that arrived for node `to` to its core (or its listener).
    fn handle_arrival(&mut self, to: usize, path: usize, bytes: &[u8]) {
        let pkt = match self.decode_as_module(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.net.decode_errors += 1;
                return;
            }
        };
        self.net.delivered += 1;
        // Only the server (the accepting end) sets the direction bit.
        if pkt.header.flags.passive() != (to == 0) {
            self.violations.push(format!(
                "node {to}: received {:?} with PASSIVE {}",
                pkt.header.packet_type(),
                pkt.header.flags.passive()
            ));
        }
        let now = self.now;
        let node = &mut self.nodes[to];
        if node.conn.state() == State::Idle {
            // The listener on SERVER_PORT: a SYN for it creates the connection.
            let Body::Syn(hs) = pkt.body else {
                return;
            };
            if hs.dst_port != SERVER_PORT {
                self.violations
                    .push(format!("SYN for port {}", hs.dst_port));
                return;
            }
            let announced = self.cfg.announced;
            let n_open = if announced { 1 } else { self.cfg.paths.len() };
            for i in 0..n_open {
                node.conn.paths_mut().add(now, ids(&self.cfg, i), false);
            }
            let eps = if announced {
                node.conn
                    .set_handshake_peer(endpoint(0, ids(&self.cfg, 0).plane));
                endpoints(&self.cfg, 1)
            } else {
                Vec::new()
            };
            let isn = self.rng.next_u64();
            if let Err(e) = self.nodes[to].conn.accept(now, &pkt, isn, &eps) {
                self.violations.push(format!("accept failed: {e:?}"));
            }
            if announced {
                open_announced(&self.cfg, &mut self.nodes[to].conn, to, now);
            }
            let conn = &self.nodes[to].conn;
            if (conn.local_port(), conn.peer_port()) != (SERVER_PORT, CLIENT_PORT) {
                self.violations.push(format!(
                    "accepted with ports {} <- {}",
                    conn.local_port(),
                    conn.peer_port()
                ));
            }
            return;
        }
        let _ = path;
        let node = &mut self.nodes[to];
        match node.conn.handle_packet(now, &pkt) {
            Input::Store { seq } => {
                if let Some(at) = self.dropped_data[1 - to].remove(&seq) {
                    self.recoveries[to].push(now - at);
                }
                let node = &mut self.nodes[to];
                let Body::Data(data) = pkt.body else {
                    self.violations.push("Store for a non-DATA packet".into());
                    return;
                };
                // The payload stays in the datagram, as in the module's socket buffer.
                let Some(payload) = bytes.get(HEADER_LEN..).filter(|p| p.len() == data.len())
                else {
                    self.violations
                        .push(format!("node {to}: DATA of {} bytes", data.len()));
                    return;
                };
                // The kernel holds payloads in a ring of WINDOW slots by `seq % WINDOW`.
                let w = mrc_conn::WINDOW as u64;
                if let Some(other) = node
                    .rx_store
                    .keys()
                    .find(|&&k| k != seq && k % w == seq % w)
                {
                    self.violations.push(format!(
                        "node {to}: seq {seq} would overwrite the payload of seq {other} in the ring"
                    ));
                }
                if node.rx_store.insert(seq, payload.to_vec()).is_some() {
                    self.violations
                        .push(format!("node {to}: seq {seq} stored twice"));
                }
            }
            Input::Consumed | Input::Dropped(_) => {}
        }
    }

    /// Lets node `i`'s glue do everything it can now: events, reads, sends, transmissions,
    /// timer.
    pub fn service(&mut self, i: usize) {
        let now = self.now;
        // Events.
        while let Some(ev) = self.nodes[i].conn.poll_event() {
            match ev {
                Event::Message {
                    first_seq,
                    last_seq,
                    len,
                    cost,
                } => {
                    let node = &mut self.nodes[i];
                    let mut msg = Vec::with_capacity(len as usize);
                    let mut ok = true;
                    for seq in first_seq..=last_seq {
                        match node.rx_store.remove(&seq) {
                            Some(p) => msg.extend_from_slice(&p),
                            None => ok = false,
                        }
                    }
                    if !ok || msg.len() != len as usize {
                        self.violations.push(format!(
                            "node {i}: message {first_seq}..={last_seq} incomplete \
                             (len {} of {len})",
                            msg.len()
                        ));
                    }
                    node.received.push(Digest::of(&msg));
                    node.received_at.push(now);
                    let at = now + self.cfg.reader_delay_ns;
                    node.unread.push_back((at, len, cost));
                    if self.cfg.reader_delay_ns > 0 {
                        self.push(at, Ev::Read { node: i });
                    }
                }
                other => {
                    // The client opens its other paths once the SYN_ACK told it the
                    // server's endpoints, as the kernel's glue does.
                    if other == Event::Connected && i == 0 && self.cfg.announced {
                        open_announced(&self.cfg, &mut self.nodes[0].conn, 0, now);
                    }
                    self.nodes[i].events.push(other)
                }
            }
        }
        // The application reads.
        {
            let node = &mut self.nodes[i];
            while let Some(&(at, len, cost)) = node.unread.front() {
                if at > now {
                    break;
                }
                node.unread.pop_front();
                node.conn.release_recv(u64::from(len), cost);
            }
        }
        // The application sends.
        let close_when_done = self.cfg.close_when_done;
        {
            let node = &mut self.nodes[i];
            let acked = node.conn.acked_msgs();
            while node.unacked.front().is_some_and(|(id, _)| *id < acked) {
                node.unacked.pop_front();
            }
            while let Some(msg) = node.app_queue.front() {
                match node.conn.send_message(msg.len() as u32) {
                    Ok(id) => {
                        let msg = node.app_queue.pop_front().unwrap_or_default();
                        node.sent.push(Digest::of(&msg));
                        node.unacked.push_back((id, msg));
                        // The kernel keeps message bytes in a ring of MSG_QUEUE slots by id.
                        if node.unacked.len() > mrc_conn::MSG_QUEUE {
                            self.violations.push(format!(
                                "node {i}: {} messages unacknowledged, more than MSG_QUEUE",
                                node.unacked.len()
                            ));
                        }
                    }
                    Err(_) => break,
                }
            }
            if close_when_done
                && node.app_queue.is_empty()
                && !node.closed_by_app
                && matches!(node.conn.state(), State::Established | State::CloseWait)
            {
                node.closed_by_app = true;
                node.conn.close(now);
            }
            let acked = node.conn.acked_msgs();
            while node.unacked.front().is_some_and(|(id, _)| *id < acked) {
                node.unacked.pop_front();
            }
        }
        // Transmissions.
        let mut buf = std::mem::take(&mut self.buf);
        let mut out = Vec::new();
        loop {
            let node = &mut self.nodes[i];
            let Some(tx) = node.conn.poll_transmit(now, &mut buf) else {
                break;
            };
            let len = match tx.data {
                None => tx.len,
                Some(d) => {
                    let Some(front) = node.unacked.front().map(|(id, _)| *id) else {
                        self.violations
                            .push(format!("node {i}: data for freed msg {d:?}"));
                        continue;
                    };
                    let Some((_, msg)) = d
                        .msg_id
                        .checked_sub(front)
                        .and_then(|k| node.unacked.get(k as usize))
                    else {
                        self.violations
                            .push(format!("node {i}: data for unknown msg {d:?}"));
                        continue;
                    };
                    let s = d.offset as usize;
                    let e = s + d.len as usize;
                    match msg.get(s..e) {
                        Some(payload) => {
                            mrc_conn::finish_data(&mut buf, &tx, payload).expect("finish_data")
                        }
                        None => {
                            self.violations.push(format!("node {i}: bad range {d:?}"));
                            continue;
                        }
                    }
                }
            };
            out.push((tx.path, buf[..len].to_vec()));
        }
        self.buf = buf;
        for (path, bytes) in out {
            self.transmit(i, path, bytes);
        }
        // Timer.
        let next = self.nodes[i].conn.poll_timeout(now);
        // The deadlines the path table keeps give the time computing them all gives.
        assert_eq!(
            next,
            self.nodes[i].conn.next_timeout(now),
            "node {i} at {now}"
        );
        let rto = self.nodes[i].conn.rto_ns();
        assert_eq!(self.nodes[i].conn.poll_rto_ns(), rto, "node {i} at {now}");
        if let Some(t) = next {
            let t = t.max(now);
            if self.nodes[i].timer_at != Some(t) {
                self.nodes[i].timer_at = Some(t);
                self.push(t, Ev::Timer { node: i });
            }
        } else {
            self.nodes[i].timer_at = None;
        }
    }

    /// Moves an event of a stalled node to the end of the stall.
    fn defer(&mut self, node: usize, item: Item, until: u64) {
        if matches!(item.ev, Ev::Timer { .. }) && self.nodes[node].timer_at == Some(item.at) {
            self.nodes[node].timer_at = Some(until);
        }
        self.push(until, item.ev);
    }

    /// Queues a datagram that arrived for node `to` at the CPU that handles `path`.
    fn cpu_enqueue(&mut self, to: usize, path: usize, bytes: Vec<u8>) {
        let n = self.cpus[to].len().max(1);
        let cpu = path % n;
        if let Some(c) = self.cpus[to].get_mut(cpu) {
            c.fifo.push_back((path, bytes));
        }
        self.cpu_kick(to, cpu);
    }

    /// Starts the next packet on an idle CPU that has one waiting; a CPU that is due to
    /// stall stalls first.
    fn cpu_kick(&mut self, node: usize, cpu: usize) {
        let Some(m) = self.cfg.cpu else {
            return;
        };
        let now = self.now;
        let Some(c) = self.cpus[node].get_mut(cpu) else {
            return;
        };
        if c.running || c.fifo.is_empty() {
            return;
        }
        let mut start = now.max(c.free_at);
        if let Some((interval, longest)) = m.stalls[node] {
            if start >= c.stall.1 {
                let len = self.rng.below(longest + 1);
                let until = start + len;
                c.stall = (
                    until,
                    until + self.rng.range(interval / 2, interval * 3 / 2),
                );
                self.cpu_stats.stalled_ns[node] += len;
            }
            start = start.max(c.stall.0);
        }
        let first = c.fifo.front().map(|(p, _)| *p);
        let batch = c
            .fifo
            .iter()
            .take(m.rx_batch.max(1))
            .take_while(|(p, _)| Some(*p) == first)
            .count()
            .max(1);
        c.batch = batch;
        c.running = true;
        c.free_at = start + m.rx_ns * batch as u64;
        let at = c.free_at;
        self.cpu_stats.busy_ns[node] += m.rx_ns * batch as u64;
        self.push(at, Ev::CpuDone { node, cpu });
    }

    /// Counts paths of either node that left Active since the last call.
    fn track_paths(&mut self) {
        use mrc_core::mrc_path::PathState;
        for i in 0..2 {
            let conn = &self.nodes[i].conn;
            let states = &mut self.path_states[i];
            for (idx, p) in conn.paths().iter() {
                if states.len() <= idx {
                    states.resize(idx + 1, None);
                }
                if states[idx] == Some(PathState::Active) && p.state() != PathState::Active {
                    self.path_downs[i] += 1;
                    if p.state_reason() == mrc_core::mrc_path::StateReason::LossBurst {
                        self.loss_burst_downs[i] += 1;
                    }
                }
                states[idx] = Some(p.state());
            }
        }
    }

    /// Time of the next event, if any.
    pub fn next_event_at(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse(item)| item.at)
    }

    /// Payload bytes of the messages delivered to the server so far.
    pub fn delivered_bytes(&self) -> u64 {
        self.nodes[1].received.iter().map(|d| d.len as u64).sum()
    }

    /// Runs one event; returns false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        let Some(Reverse(item)) = self.queue.pop() else {
            return false;
        };
        debug_assert!(item.at >= self.now);
        self.now = item.at;
        let node = match &item.ev {
            Ev::Arrive { to, .. } => *to,
            Ev::Timer { node } | Ev::Read { node } | Ev::CpuDone { node, .. } => *node,
        };
        if let Some((interval, longest)) = self.cfg.stalls {
            let (until, next) = self.stall[node];
            if self.now < until {
                // Handled once the stall is over.
                self.defer(node, item, until);
                return true;
            }
            if self.now >= next {
                let until = self.now + self.rng.below(longest + 1);
                let next = until + self.rng.range(interval / 2, interval * 3 / 2);
                self.stall[node] = (until, next);
                self.defer(node, item, until);
                return true;
            }
        }
        match item.ev {
            Ev::Arrive { to, path, bytes } if self.cfg.cpu.is_some() => {
                self.cpu_enqueue(to, path, bytes);
            }
            Ev::Arrive { to, path, bytes } => self.arrive(to, path, &bytes),
            Ev::CpuDone { node, cpu } => {
                let batch: Vec<(usize, Vec<u8>)> = self.cpus[node]
                    .get_mut(cpu)
                    .map(|c| {
                        c.running = false;
                        let n = c.batch.clamp(1, c.fifo.len().max(1));
                        c.fifo.drain(..n.min(c.fifo.len())).collect()
                    })
                    .unwrap_or_default();
                if !batch.is_empty() {
                    self.cpu_stats.rx_batches[node] += 1;
                    for (path, bytes) in batch {
                        self.cpu_stats.rx_pkts[node] += 1;
                        self.handle_arrival(node, path, &bytes);
                    }
                    self.service(node);
                }
                self.cpu_kick(node, cpu);
            }
            Ev::Timer { node } => {
                if self.nodes[node].timer_at == Some(item.at) {
                    self.nodes[node].timer_at = None;
                    self.nodes[node].conn.on_timeout(self.now);
                    self.service(node);
                }
            }
            Ev::Read { node } => self.service(node),
        }
        self.track_paths();
        true
    }

    /// Whether both connections are closed.
    pub fn both_closed(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| matches!(n.conn.state(), State::Closed(_)))
    }

    /// Runs until `done` holds, the queue runs dry or `max_time_ns` passes.
    pub fn run_until(&mut self, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let mut same_time = 0u64;
        let mut last = self.now;
        while !done(self) {
            if self.now > self.cfg.max_time_ns {
                return false;
            }
            if !self.step() {
                return done(self);
            }
            if self.now == last {
                same_time += 1;
                assert!(
                    same_time < 1_000_000,
                    "livelock at t={} (seed {})",
                    self.now,
                    self.cfg.seed
                );
            } else {
                same_time = 0;
                last = self.now;
            }
        }
        true
    }

    /// Runs every event due up to `until_ns`, then sets the clock to it: an application
    /// that acts at fixed times (see [`Sim::queue_message`]) acts then, however long the
    /// connections stay idle in between.
    pub fn run_to(&mut self, until_ns: u64) {
        while self.queue.peek().is_some_and(|Reverse(i)| i.at <= until_ns) {
            self.step();
        }
        self.now = self.now.max(until_ns);
    }

    /// Runs to completion: every message delivered both ways and both ends closed.
    pub fn run(&mut self) -> bool {
        self.run_until(|s| s.both_closed())
    }

    /// Checks that each node received exactly what the other sent, in order, and that the
    /// connection closed cleanly; returns a description of every problem.
    pub fn check_delivery(&self) -> Vec<String> {
        let mut problems = self.violations.clone();
        for i in 0..2 {
            let sender = &self.nodes[1 - i];
            let receiver = &self.nodes[i];
            let expected: Vec<Digest> = sender
                .sent
                .iter()
                .copied()
                .chain(sender.app_queue.iter().map(|m| Digest::of(m)))
                .collect();
            if receiver.received != expected {
                let first_bad = receiver
                    .received
                    .iter()
                    .zip(&expected)
                    .position(|(a, b)| a != b);
                problems.push(format!(
                    "node {i}: received {} messages, expected {} (first mismatch {:?})",
                    receiver.received.len(),
                    expected.len(),
                    first_bad
                ));
            }
            if receiver.stored() != 0 {
                problems.push(format!(
                    "node {i}: {} payloads left in store",
                    receiver.stored()
                ));
            }
            match receiver.conn.state() {
                State::Closed(None) => {}
                s => problems.push(format!("node {i}: ended in {s:?}")),
            }
        }
        problems
    }
}

/// Returns the error a node's connection failed with, if any.
pub fn conn_error(node: &Node) -> Option<ConnError> {
    node.conn.error()
}

/// Describes a simulation for a failed assertion: time, network and CPU counters, and per node
/// its connection's state and counters and every path's state, window, RTTs and counters.
pub fn describe(sim: &Sim) -> String {
    let mut s = format!(
        "seed {} t={}ms net {:?}\n",
        sim.cfg.seed,
        sim.now / MS,
        sim.net
    );
    if sim.cfg.cpu.is_some() {
        s += &format!("cpu {:?}\n", sim.cpu_stats);
    }
    for n in &sim.nodes {
        s += &format!("{:?} {:?}\n", n.conn.state(), n.conn.stats());
        for (i, p) in n.conn.paths().iter() {
            s += &format!(
                "  path {i} {:?} cwnd {} inflight {} srtt {:?} min {:?} {:?}\n",
                p.state(),
                p.cwnd(),
                p.inflight(),
                p.srtt_ns(),
                p.min_rtt_ns(),
                p.counters()
            );
        }
    }
    s
}

/// A rate-limited bottleneck with a bounded FIFO (tail-drop) queue, shared by the
/// client-to-server traffic of several simulations.
#[derive(Clone, Debug, Default)]
pub struct SharedLink {
    /// Rate in bytes per second (datagram bytes, as the links of [`LinkCfg`] count them).
    pub rate_bps: u64,
    /// Largest backlog in bytes; a datagram that would exceed it is dropped.
    pub queue_limit_bytes: u64,
    /// When the link is free again.
    busy_until: u64,
    /// Per datagram queued: (time it arrived, time it waited before its serialisation).
    pub delays: Vec<(u64, u64)>,
    /// Datagrams dropped because the queue was full.
    pub drops: u64,
    /// Datagrams that got through.
    pub pkts: u64,
}

impl SharedLink {
    /// A link of `rate_bps` bytes per second that holds at most `queue_limit_bytes`.
    pub fn new(rate_bps: u64, queue_limit_bytes: u64) -> Self {
        SharedLink {
            rate_bps,
            queue_limit_bytes,
            ..SharedLink::default()
        }
    }

    /// Queues a datagram of `len` bytes arriving at `now`; returns when it has left the
    /// link, or None if the queue was full.
    fn enqueue(&mut self, now: u64, len: u64) -> Option<u64> {
        let start = self.busy_until.max(now);
        let backlog = (start - now) * self.rate_bps / SEC;
        if backlog + len > self.queue_limit_bytes {
            self.drops += 1;
            return None;
        }
        self.delays.push((now, start - now));
        self.pkts += 1;
        self.busy_until = start + (len * SEC).div_ceil(self.rate_bps.max(1));
        Some(self.busy_until)
    }

    /// Queueing delays of the datagrams that arrived in `[from, to)`, sorted.
    pub fn delays_between(&self, from: u64, to: u64) -> Vec<u64> {
        let mut d: Vec<u64> = self
            .delays
            .iter()
            .filter(|&&(at, _)| at >= from && at < to)
            .map(|&(_, d)| d)
            .collect();
        d.sort_unstable();
        d
    }
}

/// Several connections, each its own [`Sim`] (a client and a server), whose client-to-server
/// traffic shares one [`SharedLink`]: a dumbbell with the bottleneck on the forward side. The
/// simulations run in one virtual time, event by event in time order (ties go to the lower
/// index), so the whole stays deterministic.
pub struct Dumbbell {
    /// The connections.
    pub sims: Vec<Sim>,
    /// The bottleneck they share.
    pub link: Rc<RefCell<SharedLink>>,
    /// Per connection, the length of the messages its client keeps queued (bulk sender).
    bulk: Vec<usize>,
    /// Virtual time: every event up to it has run.
    pub now: u64,
}

impl Dumbbell {
    /// A dumbbell without connections around `link`.
    pub fn new(link: SharedLink) -> Self {
        Dumbbell {
            sims: Vec::new(),
            link: Rc::new(RefCell::new(link)),
            bulk: Vec::new(),
            now: 0,
        }
    }

    /// Adds a connection whose client connects now and then sends messages of `msg_len` bytes
    /// for as long as the simulation runs; returns its index.
    ///
    /// The client-to-server links of `cfg` give each connection its own one-way delay after
    /// the bottleneck (no jitter, duplication or corruption there); their rate and queue
    /// limit are not used. The server-to-client links are used as they are.
    pub fn add_bulk(&mut self, mut cfg: SimCfg, msg_len: usize) -> usize {
        cfg.close_when_done = false;
        self.sims
            .push(Sim::new_shared(cfg, self.now, Rc::clone(&self.link)));
        self.bulk.push(msg_len);
        self.sims.len() - 1
    }

    /// Runs every event up to and including `until_ns`.
    pub fn run_until(&mut self, until_ns: u64) {
        loop {
            let next = self
                .sims
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.next_event_at().map(|at| (at, i)))
                .min();
            let Some((_, i)) = next.filter(|&(at, _)| at <= until_ns) else {
                self.now = self.now.max(until_ns);
                return;
            };
            let sim = &mut self.sims[i];
            sim.step();
            let len = self.bulk[i];
            if sim.nodes[0].app_queue.len() < 2 {
                for _ in 0..4 {
                    sim.queue_message(0, vec![i as u8; len]);
                }
            }
        }
    }

    /// Payload bytes delivered so far, per connection.
    pub fn delivered(&self) -> Vec<u64> {
        self.sims.iter().map(Sim::delivered_bytes).collect()
    }
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has everything.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * sq)
}
