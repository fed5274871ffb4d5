// SPDX-License-Identifier: GPL-2.0

//! Per-namespace state: the UDP tunnel sockets, counters and `/proc/net/mrc`.
//!
//! # The batched datapath
//!
//! A datagram costs MRC a trip through routing, the IP output path, the
//! qdisc and the device on the way out, and through the IP and UDP receive
//! paths on the way in, whatever its size. So packets move in batches:
//!
//! - **Send.** The data packets a connection builds for one path in one go
//!   (up to [`mrc_sys::TX_BATCH_SEGS`], [`mrc_sys::TX_BATCH_BYTES`]) leave as one UDP GSO
//!   packet, each `gso_size` chunk a whole MRC packet with its own header
//!   (module parameter `gso`). The stack or the device splits it where the
//!   packet must go out as datagrams; a veth hands it on whole. As TCP and
//!   `UDP_SEGMENT` do, this does not depend on the device's offloads: GSO in
//!   software, after the qdisc, still saves the per-datagram trip above.
//!   A connection sprays its packets over its paths in turn, and a
//!   [`TxChain`] keeps a batch open for each of up to 8 paths at once, so
//!   spraying happens at the granularity of these batches. A message's
//!   bytes are copied once, from the user into page fragments
//!   ([`mrc_sys::MsgBuf`], as TCP keeps a stream's bytes); a packet is its
//!   header, written and sealed in a small fragment of its own
//!   ([`mrc_sys::Frag`]), and page references to the payload's bytes in the
//!   message. Nothing is copied on the way out, retransmissions included,
//!   and a packet costs its own size: no buffer sized for a batch (a packet
//!   that left alone in one used to hold 16 KiB for 1.4 KiB of payload,
//!   and a receiver that kept it ran out of receive buffer long before its
//!   window closed).
//! - **Receive.** Since v6.9, UDP splits every GSO packet bound for a socket
//!   with an `encap_rcv` before it gets there (`udp_unexpected_gso()`), so
//!   the tunnel socket has none. It is a plain kernel UDP socket that
//!   accepts GSO packets (`udp_allow_gso()`), lets UDP GRO aggregate its
//!   flows (`GRO_ENABLED`, for a NIC or a veth with GRO on), and is read
//!   from its `data_ready` callback, in softirq, right after UDP queued a
//!   packet (as SUNRPC reads its sockets). The other way, MRC's own
//!   `gro_receive`/`gro_complete` (Homa's), would batch only what GRO
//!   aggregates, not a sender's GSO packet on a veth, and depends on GRO
//!   internals that change between kernel versions. A GSO packet or GRO
//!   train is split into its datagrams there (`udp_rcv_segment()`, as UDP
//!   would), in the checksum state it arrived in, so that the split sums
//!   no byte (`mrc_udp_dequeue`), and `mrc_rx` gets them together: a run of
//!   datagrams for one connection costs one session lookup and one turn of
//!   the connection's lock (`mrc_sock::input`). Of a DATA packet only the
//!   UDP and MRC headers are made linear and read
//!   (`mrc_proto::decode_data`): MRC's checksum covers the header, the UDP
//!   checksum the payload (see "Checksums" in `mrc_proto`), so no pass of
//!   the CPU over the payload is MRC's. The payload stays where it
//!   arrived, typically in page fragments, until `recvmsg` copies it to the
//!   reader, its only copy on the way in. Other packets are small and are
//!   made linear whole.
//! - **Acknowledgements.** The connection is driven once per run, so an
//!   acknowledgement that several of its packets ask for goes out once;
//!   when one is due is the connection's ACK policy (`mrc_conn`).
//! - **Locks.** Softirq never spins on a connection that a task holds
//!   (`lock_sock`: a writer queueing a message, a reader copying one out),
//!   nor on one that the other CPU's softirq, or a task, is running
//!   (`mrc_sock::run`): a connection's paths are separate flows, which
//!   packet steering spreads over the CPUs, so both CPUs' softirq take
//!   packets of one connection. Softirq puts the run of datagrams in the
//!   socket's backlog instead, as TCP does for a task that holds its
//!   socket. A task that holds the socket takes them the next time it acts
//!   on the connection (before it sends more) or as it releases the socket
//!   (`release_cb`); a run under way takes them before it ends, still
//!   holding the connection's lock, for at most a few turns, and the timer
//!   starts a run shortly for what is left. A timer that fires meanwhile
//!   leaves its work the same way (`Sock::backlog_unless_free`,
//!   `mrc_sys::Run`, `mrc_sock::input`). The backlog holds at most the
//!   socket's receive and send buffers' worth of `truesize` (`rx_backlog`,
//!   `drop_sock_backlog`). Nor does a task wait for a run under way: the
//!   writer hands its message to the run, within the room the connection
//!   had as the last run left it (`Conn::send_room`, `Sock::hand_off`),
//!   and the reader what it read (`Sock::hand_off_read`); the run takes
//!   them before it ends, the messages before anything else is asked of
//!   the connection, and in the order written. A run that starts takes the
//!   messages handed first. So no message overtakes another, nor a FIN a
//!   message. A message's bytes are copied in before its writer takes the
//!   socket (`mrc_io`), so that acknowledgements that arrive meanwhile are
//!   taken at once; a reader copies a message out holding the socket, and
//!   takes what waits in the backlog between its packets.
//! - **Timing.** A packet that waited (for another CPU's softirq, in the
//!   tunnel socket's queue, in the backlog, or behind the packets that
//!   arrived with it) is timed from its arrival at this host: the receive
//!   stack's stamp (`RxClock`, `take_datagram`, `Conn::handle_packet_at`;
//!   `rx_stamped`, `rx_stack_wait_us`). The round trips it ends, and the
//!   delay its acknowledgement reports, leave out this host's wait, which
//!   the delay controller would otherwise read as a queue in the network,
//!   and answer with smaller windows that do not shorten it.
//! - **Memory.** Every packet a connection keeps is charged at its
//!   `truesize` to the MRC socket's receive buffer and to the module-wide
//!   `rmem_max` before the connection takes it (`mrc_limit::admit_rx`);
//!   past either it is dropped and counted (`drop_rcvbuf`, `drop_rmem_max`).
//!   The tunnel socket's own queue holds packets only from their arrival to
//!   the callback that takes them.
//!
//! Teardown order (`stop`), run by the pernet core when a namespace goes
//! away or the module unloads:
//! 1. remove `/proc/net/mrc`, which waits for running readers;
//! 2. release the tunnel sockets; each release clears the socket's user data
//!    and waits for an RCU grace period, so no `data_ready` still uses `self`;
//! 3. the pernet core then drops `self`.

use core::{
    cell::UnsafeCell,
    fmt::Write,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
};
use kernel::{
    c_str,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{new_mutex, Arc, Mutex},
};

use crate::mrc_cc::CcKind;
use crate::mrc_conn::{self, ConnConfig, DropReason as ConnDrop};

/// Reasons a connection ignores a packet, in `/proc/net/mrc` order.
const CONN_DROPS: [ConnDrop; 9] = [
    ConnDrop::WrongSession,
    ConnDrop::BadState,
    ConnDrop::Duplicate,
    ConnDrop::OutOfWindow,
    ConnDrop::NoBuffer,
    ConnDrop::Invalid,
    ConnDrop::BadRst,
    ConnDrop::BadProbe,
    ConnDrop::BadRetry,
];
use crate::mrc_limit::{Slots, TokenBucket};
use crate::mrc_path::PathConfig;
use crate::mrc_proto::{self, DecodeError, Header, Packet, PacketType, HEADER_LEN};
use crate::mrc_sys::{
    self, err, new_spinlock_bh, nl, Counter, Frag, IpAddr, IpFamily, MsgBuf, Net, PerCpuCounters,
    ProcEntry, ProcShow, SeqFile, SkBuff, Sock, SockRef, SpinLockBh, TxChain, TxDest, UdpAddrs,
    UdpTunnel,
};

#[path = "mrc_netlink.rs"]
pub(crate) mod netlink;

/// First and last port handed out to sockets that connect without binding.
const EPHEMERAL_FIRST: u16 = 32768;
const EPHEMERAL_LAST: u16 = 60999;

/// The sockets of a namespace that packets can reach.
struct SockTable {
    /// Connections by session id and role (`true` for the accepting end);
    /// each entry holds a socket reference. Both ends of a connection share
    /// its session id; the role keeps them apart when both live here.
    sessions: RBTree<SessionKey, SockRef>,
    /// Bound and listening sockets by MRC port; each holds a reference.
    ports: RBTree<u16, SockRef>,
    /// Where the search for a free ephemeral port starts.
    next_port: u16,
    /// Bumped whenever a connection is added or removed, so that a dump
    /// split over several reads can tell that the table changed under it.
    generation: u32,
}

/// Connections of closed sockets still finishing, in all namespaces, of
/// at most `max_orphans`.
pub(crate) static ORPHANS: Slots = Slots::new();

/// The key of the connection table: session id, and whether this end
/// accepted the connection.
pub(crate) type SessionKey = (u64, bool);

/// Bytes of the UDP header in front of every MRC packet.
pub(crate) const UDP_HLEN: usize = 8;

/// Bytes of the UDP and MRC headers, what is made linear of a DATA packet.
pub(crate) const RX_HEADERS_LEN: u32 = (UDP_HLEN + HEADER_LEN) as u32;

/// Why a received datagram was dropped, beyond the decoder's own reasons.
#[derive(Clone, Copy)]
enum RxDrop {
    /// The datagram failed to decode.
    Decode(DecodeError),
    /// A well-formed packet for a session id that has no connection.
    NoSession,
    /// Memory was short: the packet could not be made linear, or a SYN's
    /// connection could not be created.
    NoMemory,
    /// A packet for a connection from an address that is none of its
    /// peer's.
    WrongSource,
    /// DATA over the receive memory of its socket.
    RcvBuf,
    /// DATA over the receive memory of all MRC sockets (`rmem_max`).
    RmemMax,
}

/// Receive counters of one namespace.
struct Stats {
    rx_packets: Counter,
    rx_bytes: Counter,
    /// GSO packets and GRO trains received, each of several `rx_packets`.
    rx_gro: Counter,
    /// Datagrams queued for the task that owned their socket.
    rx_backlog: Counter,
    /// Datagrams stamped by the receive stack (see [`RxClock`]), and the
    /// microseconds they waited there in all.
    rx_stamped: Counter,
    rx_stack_wait_us: Counter,
    drop_decode: PerCpuCounters<{ DecodeError::COUNT }>,
    drop_no_session: Counter,
    /// Datagrams dropped for want of memory: not made linear, not split
    /// from their GSO packet or GRO train, or SYNs whose connection could
    /// not be created.
    drop_no_memory: Counter,
    drop_wrong_source: Counter,
    drop_rcvbuf: Counter,
    drop_rmem_max: Counter,
    /// Datagrams with a bad UDP checksum, and DATA packets without one.
    drop_udp_checksum: Counter,
    drop_conn: PerCpuCounters<{ CONN_DROPS.len() }>,
    drop_backlog: Counter,
    /// Datagrams over the backlog of a socket a task owned.
    drop_sock_backlog: Counter,
    /// SYNs whose retry token is not one this namespace made for them, or
    /// has expired.
    drop_bad_token: Counter,
    tx_retransmits: Counter,
    /// New DATA packets received marked ECN "congestion experienced".
    ecn_ce_packets: Counter,
    /// ACKs received that echo a congestion mark.
    ecn_echoes: Counter,
    /// Connections that reached the established state.
    conns_opened: Counter,
    /// Connections closed with an error.
    conns_failed: Counter,
    /// Connections of closed sockets reset after `fin_timeout_ms`.
    orphan_timeouts: Counter,
    /// Connections reset at close: `max_orphans` were finishing already.
    orphans_refused: Counter,
    /// Packets sent by connections, by type (`PacketType::index`).
    tx_by_type: PerCpuCounters<{ PacketType::COUNT }>,
    tx_packets: Counter,
    /// UDP GSO packets sent, each of several of `tx_packets`.
    tx_gso: Counter,
    tx_bytes: Counter,
    tx_rst: Counter,
    /// RSTs for unknown sessions not sent: over the rate limit.
    tx_rst_limited: Counter,
    /// Handshake packets not sent: three times the bytes of the SYNs
    /// received from a peer whose address is not proven were sent already.
    tx_amp_limited: Counter,
    /// RETRYs sent: SYNs answered without a connection, the listener being
    /// under pressure.
    tx_retry: Counter,
    tx_errors: Counter,
}

impl Stats {
    fn new() -> Result<Self> {
        Ok(Self {
            rx_packets: Counter::new()?,
            rx_bytes: Counter::new()?,
            rx_gro: Counter::new()?,
            rx_backlog: Counter::new()?,
            rx_stamped: Counter::new()?,
            rx_stack_wait_us: Counter::new()?,
            drop_decode: PerCpuCounters::new()?,
            drop_no_session: Counter::new()?,
            drop_no_memory: Counter::new()?,
            drop_wrong_source: Counter::new()?,
            drop_rcvbuf: Counter::new()?,
            drop_rmem_max: Counter::new()?,
            drop_udp_checksum: Counter::new()?,
            drop_conn: PerCpuCounters::new()?,
            drop_backlog: Counter::new()?,
            drop_sock_backlog: Counter::new()?,
            drop_bad_token: Counter::new()?,
            tx_retransmits: Counter::new()?,
            ecn_ce_packets: Counter::new()?,
            ecn_echoes: Counter::new()?,
            conns_opened: Counter::new()?,
            conns_failed: Counter::new()?,
            orphan_timeouts: Counter::new()?,
            orphans_refused: Counter::new()?,
            tx_by_type: PerCpuCounters::new()?,
            tx_packets: Counter::new()?,
            tx_gso: Counter::new()?,
            tx_bytes: Counter::new()?,
            tx_rst: Counter::new()?,
            tx_rst_limited: Counter::new()?,
            tx_amp_limited: Counter::new()?,
            tx_retry: Counter::new()?,
            tx_errors: Counter::new()?,
        })
    }

    fn count_drop(&self, why: RxDrop) {
        let counter = match why {
            RxDrop::Decode(e) => return self.drop_decode.add(e.index(), 1),
            RxDrop::NoSession => &self.drop_no_session,
            RxDrop::NoMemory => &self.drop_no_memory,
            RxDrop::WrongSource => &self.drop_wrong_source,
            RxDrop::RcvBuf => &self.drop_rcvbuf,
            RxDrop::RmemMax => &self.drop_rmem_max,
        };
        counter.count(1);
    }
}

/// Tunables of one namespace, read by new connections and changed with
/// netlink `param-set`.
struct Params {
    heartbeat_ms: AtomicU32,
    miss_threshold: AtomicU32,
    ev_per_plane: AtomicU32,
    /// `CcKind` as its index in [`CC_KINDS`].
    cc: AtomicU32,
    user_timeout_ms: AtomicU32,
    data_per_idle_probe: AtomicU32,
    /// Share of a listener's backlog, in percent, that half-open connections
    /// of SYNs without a retry token may hold; beyond it such SYNs get a
    /// RETRY (see `mrc_sock::syn_received`).
    syn_retry_pct: AtomicU32,
}

/// Congestion controllers selectable by name.
const CC_KINDS: [CcKind; 2] = [CcKind::Delay, CcKind::Reno];

/// Smallest probe timeout of a path.
const PROBE_TIMEOUT_MIN_NS: u64 = 10_000_000;

/// Entropy values (UDP source ports) per plane unless configured.
const DEFAULT_EV_PER_PLANE: u32 = 4;

/// How long a connection whose paths are all down waits before it fails
/// with `ETIMEDOUT`, unless configured.
const DEFAULT_USER_TIMEOUT_MS: u32 = 30_000;

/// Share of a listener's backlog half-open connections of unproven SYNs may
/// hold, unless configured.
const DEFAULT_SYN_RETRY_PCT: u32 = 50;

impl Params {
    fn new() -> Self {
        let d = &PathConfig::DEFAULT;
        Self {
            heartbeat_ms: AtomicU32::new((d.heartbeat_busy_ns / 1_000_000) as u32),
            miss_threshold: AtomicU32::new(u32::from(d.miss_threshold)),
            ev_per_plane: AtomicU32::new(DEFAULT_EV_PER_PLANE),
            cc: AtomicU32::new(cc_index(d.cc)),
            user_timeout_ms: AtomicU32::new(DEFAULT_USER_TIMEOUT_MS),
            data_per_idle_probe: AtomicU32::new(d.data_per_idle_probe),
            syn_retry_pct: AtomicU32::new(DEFAULT_SYN_RETRY_PCT),
        }
    }

    fn cc(&self) -> CcKind {
        let i = self.cc.load(Ordering::Relaxed) as usize;
        CC_KINDS.get(i).copied().unwrap_or_default()
    }
}

fn cc_index(kind: CcKind) -> u32 {
    CC_KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u32
}

/// Most local addresses (planes) a namespace offers to connections: as many
/// as one handshake can carry.
const MAX_ENDPOINTS: usize = crate::mrc_proto::MAX_ENDPOINTS;

/// A local address that connections use as one plane.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Endpoint {
    addr: IpAddr,
    /// Interface the address belongs to; 0 when not pinned to one.
    ifindex: u32,
    /// `MRC_ENDPOINT_FLAGS_*`.
    flags: u32,
}

/// A network path to a peer as every connection of the namespace sees it:
/// local address, remote address, UDP source port (the entropy value) and
/// the peer's UDP port.
pub(crate) type PeerKey = (IpAddr, IpAddr, u16, u16);

/// What the connections of a namespace share about one network path to a
/// peer: when a packet of the peer last arrived on it, and when one of them
/// last probed it.
///
/// Connections between the same hosts use the same network paths (same
/// addresses, same entropy values). A path that carries packets for one of
/// them is alive for all, so none of the others needs to probe it, and a
/// probe one of them sent is answered for all: each connection's failure
/// detector takes the shared times as its own (see
/// `mrc_sock::Session::share_liveness`). Without this, N idle paths of N
/// connections over one network path cost N probes per heartbeat.
pub(crate) struct PeerPath {
    key: PeerKey,
    heard_ns: AtomicU64,
    probed_ns: AtomicU64,
}

impl PeerPath {
    /// Records that a packet of the peer arrived on the path at `now`.
    pub(crate) fn heard(&self, now: u64) {
        self.heard_ns.fetch_max(now, Ordering::Relaxed);
    }

    /// When a packet of the peer last arrived on the path (0: never).
    pub(crate) fn heard_ns(&self) -> u64 {
        self.heard_ns.load(Ordering::Relaxed)
    }

    /// Records that a connection sent a PROBE on the path at `now`.
    pub(crate) fn probed(&self, now: u64) {
        self.probed_ns.fetch_max(now, Ordering::Relaxed);
    }

    /// When a connection last sent a PROBE on the path (0: never).
    pub(crate) fn probed_ns(&self) -> u64 {
        self.probed_ns.load(Ordering::Relaxed)
    }
}

/// A peer path and how many connection paths use it.
struct PeerEntry {
    path: Arc<PeerPath>,
    users: u32,
}

/// The peer paths of a namespace; an entry lives while a connection path
/// uses it.
#[pin_data]
pub(crate) struct PeerPaths {
    #[pin]
    tree: SpinLockBh<RBTree<PeerKey, PeerEntry>>,
}

/// A connection path's use of a [`PeerPath`]; dropping it releases the entry.
pub(crate) struct PeerRef {
    table: Arc<PeerPaths>,
    path: Arc<PeerPath>,
}

impl core::ops::Deref for PeerRef {
    type Target = PeerPath;

    fn deref(&self) -> &PeerPath {
        &self.path
    }
}

impl Drop for PeerRef {
    fn drop(&mut self) {
        let removed = {
            let mut t = self.table.tree.lock();
            let key = self.path.key;
            match t.get_mut(&key) {
                Some(e) if e.users > 1 => {
                    e.users -= 1;
                    None
                }
                Some(_) => t.remove(&key),
                None => None,
            }
        };
        // The entry is freed with the table unlocked.
        drop(removed);
    }
}

/// The endpoint table of a namespace.
struct Endpoints {
    /// Bumped by every change, so a dump split over several reads can tell
    /// that the table changed under it.
    generation: u32,
    slots: [Option<Endpoint>; MAX_ENDPOINTS],
}

/// MRC's state in one network namespace.
#[pin_data]
pub(crate) struct MrcNet {
    #[pin]
    endpoints: Mutex<Endpoints>,
    #[pin]
    socks: SpinLockBh<SockTable>,
    /// Bounds the RSTs answering packets of unknown sessions.
    #[pin]
    rst_limit: SpinLockBh<TokenBucket>,
    /// Shared liveness of the network paths to peers.
    peers: Arc<PeerPaths>,
    /// Secret key of the retry tokens of this namespace's listeners.
    retry_key: [u64; 2],
    stats: Stats,
    params: Params,
    /// Set once `start` has finished writing `tunnels`; receive paths only
    /// read `tunnels` after they saw it set.
    ready: AtomicBool,
    /// Written only by `start`/`stop`, which the pernet core serialises.
    tunnels: UnsafeCell<[Option<UdpTunnel>; 2]>,
    /// Written only by `start`/`stop`, as above.
    proc_file: UnsafeCell<Option<ProcEntry>>,
}

// SAFETY: every field but `tunnels` and `proc_file` is `Sync` itself (locks,
// atomics, per-CPU counters, an `Arc` of a locked table, plain data). Of the
// two cells:
// - `proc_file` is touched only by `open` and `close`, which the pernet core
//   runs once each per namespace (`start`, `stop`), never concurrently.
// - `tunnels` is written only by `open`, before it sets `ready` (release),
//   and by `close`, once it cleared `ready` and no reader that saw it set is
//   left. Every reader goes through `tunnel()`, which reads `tunnels` only
//   after it saw `ready` set (acquire), so never while `open` writes it. The
//   readers are the tunnel sockets' receive callbacks (softirq), which
//   `close` waits out (`detach`, `synchronize_net`) before it writes; and
//   what acts for an MRC socket: its calls, timer and work item. Every MRC
//   socket holds a reference to its namespace: `family_create` refuses
//   kernel sockets, which would not, and accepted connections are created
//   holding one. So the pernet exit, and `close` with it, runs only after
//   the last MRC socket of the namespace, with its timer and work item, is
//   gone.
unsafe impl Sync for MrcNet {}

/// The namespace's side of `PernetState` (implemented in `mrc_main`, which
/// tears the namespace's sockets down in between).
impl MrcNet {
    /// The state of a new namespace.
    pub(crate) fn new_state() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            endpoints <- new_mutex!(Endpoints {
                generation: 1,
                slots: [None; MAX_ENDPOINTS],
            }),
            socks <- new_spinlock_bh!(
                SockTable {
                    sessions: RBTree::new(),
                    ports: RBTree::new(),
                    next_port: EPHEMERAL_FIRST,
                    generation: 1,
                },
                "mrc_net_socks"
            ),
            rst_limit <- new_spinlock_bh!(
                TokenBucket::new(TokenBucket::RST_RATE, TokenBucket::RST_BURST),
                "mrc_net_rst_limit"
            ),
            peers: Arc::pin_init(
                pin_init!(PeerPaths {
                    tree <- new_spinlock_bh!(RBTree::new(), "mrc_net_peers"),
                }),
                GFP_KERNEL
            )?,
            retry_key: [mrc_sys::random_u64(), mrc_sys::random_u64()],
            stats: Stats::new()?,
            params: Params::new(),
            ready: AtomicBool::new(false),
            tunnels: UnsafeCell::new([None, None]),
            proc_file: UnsafeCell::new(None),
        })
    }

    /// Opens the namespace's tunnel sockets and `/proc/net/mrc`.
    pub(crate) fn open(&self, net: &Net) -> Result {
        let port = mrc_sys::param_port();
        // SAFETY: only `start`/`stop` touch these cells and they are
        // serialised by the pernet core.
        let (tunnels, proc_file) =
            unsafe { (&mut *self.tunnels.get(), &mut *self.proc_file.get()) };
        // SAFETY: `self` is `net`'s state of the registered pernet subsystem,
        // and `close`, called from `stop`, drops the entry.
        *proc_file = Some(unsafe { ProcEntry::new::<Self>(net, c_str!("mrc")) }?);
        for (slot, family) in tunnels.iter_mut().zip([IpFamily::V4, IpFamily::V6]) {
            // SAFETY: `self` lives in the pernet area until after `stop`, which
            // drops the tunnel first.
            match unsafe { UdpTunnel::new(net, family, port, self) } {
                Ok(t) => *slot = Some(t),
                Err(e)
                    if family == IpFamily::V6
                        && e == mrc_sys::err::address_family_not_supported() =>
                {
                    pr_info!("IPv6 unavailable, MRC tunnel is IPv4 only\n");
                }
                Err(e) => {
                    pr_err!("cannot open UDP port {} ({:?}): {:?}\n", port, family, e);
                    return Err(e);
                }
            }
        }
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Closes what [`MrcNet::open`] opened, once no connection is left.
    pub(crate) fn close(&self) {
        // Quiesce receive before touching `tunnels`: after `detach` no new
        // callback reaches `self`, and `synchronize_net` waits out the ones
        // already running, which may be reading `tunnels` to send a reply.
        self.ready.store(false, Ordering::Release);
        // SAFETY: shared reads; nothing writes `tunnels` concurrently (only
        // `start`/`stop` do, serialised by the pernet core).
        for t in unsafe { &*self.tunnels.get() }.iter().flatten() {
            t.detach();
        }
        mrc_sys::synchronize_net();
        // SAFETY: no receive callback runs any more (above) and `start` and
        // `stop` are serialised by the pernet core.
        let (tunnels, proc_file) =
            unsafe { (&mut *self.tunnels.get(), &mut *self.proc_file.get()) };
        *proc_file = None;
        for t in tunnels.iter_mut() {
            *t = None;
        }
    }
}

// The control buffer (`skb->cb`) of a received datagram is MRC's from
// [`take_datagram`] on, laid out as follows.
/// Where `mrc_sock` marks a delivered packet that starts a message with the
/// message's length (four bytes).
pub(crate) const CB_LEN: usize = 0;
/// Where `mrc_sock` marks a delivered packet that starts or ends a message
/// (one byte).
pub(crate) const CB_FLAGS: usize = 4;
/// Where [`check_data`] marks a DATA packet it checked (one byte).
const CB_CHECKED: usize = 8;
/// Where [`take_datagram`] notes when the datagram arrived (eight bytes).
const CB_ARRIVED: usize = 16;

/// Longest wait in this host's receive stack that a datagram's stamp is
/// taken for (see [`RxClock`]). A longer one is rather a step of the wall
/// clock between the stamp and its reading (time daemons slew small
/// offsets and step only large ones), and the stamp is not used.
const MAX_STACK_WAIT_NS: u64 = 20_000_000;

/// The time a batch of datagrams reached MRC, on the monotonic clock that
/// MRC keeps its time in and on the wall clock of the receive stack's
/// stamps.
///
/// A datagram's round trip ends when it reached this host, not when MRC
/// got to it: the receive stack stamps it on its way in (`netif_rx()`,
/// `netif_receive_skb()`), and the time it then waited (for the softirq
/// of another CPU, behind other packets, in the tunnel socket's queue)
/// is the host's, not the network's. Counted in the round trip, such
/// waits would read as a queue in the network to a delay controller,
/// which would shrink windows that the network had room for; the delay
/// an ACK reports counts from there too, so neither end's wait is
/// counted. Without a stamp a datagram arrived when the batch reached
/// MRC.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxClock {
    mono_ns: u64,
    real_ns: u64,
}

impl RxClock {
    /// Reads both clocks.
    pub(crate) fn now() -> Self {
        Self {
            mono_ns: mrc_sys::now_ns(),
            real_ns: mrc_sys::now_real_ns(),
        }
    }

    /// The time a datagram stamped `stamp` (wall clock) waited in the
    /// receive stack before the batch reached MRC, if the stamp is
    /// believable: not later than now, and not longer ago than
    /// [`MAX_STACK_WAIT_NS`].
    fn stack_wait(&self, stamp: Option<u64>) -> Option<u64> {
        let wait = self.real_ns.checked_sub(stamp?)?;
        (wait <= MAX_STACK_WAIT_NS).then_some(wait)
    }
}

/// Takes a received datagram from the layers below, in a batch that
/// reached MRC at `clock`: its control buffer is MRC's from here, cleared,
/// so that nothing they left in it passes for a mark of [`check_data`]'s,
/// and it notes the time of arrival for [`arrived_ns`] (see [`RxClock`]).
/// Returns how long the datagram had waited in the receive stack, if it
/// was stamped there.
pub(crate) fn take_datagram(skb: &mut SkBuff, clock: &RxClock) -> Option<u64> {
    let wait = clock.stack_wait(skb.rx_stamp());
    let at = clock.mono_ns.saturating_sub(wait.unwrap_or(0));
    let cb = skb.cb_mut();
    cb.fill(0);
    if let Some(slot) = cb.get_mut(CB_ARRIVED..CB_ARRIVED + 8) {
        slot.copy_from_slice(&at.to_ne_bytes());
    }
    wait
}

/// When a datagram taken by [`take_datagram`] arrived: the connection
/// times round trips to it, not to when it got to the datagram, which may
/// be later by the datagrams before it or by a wait in the socket's
/// backlog (`Conn::handle_packet_at`).
pub(crate) fn arrived_ns(skb: &SkBuff) -> Option<u64> {
    let at = skb.cb().get(CB_ARRIVED..CB_ARRIVED + 8)?;
    Some(u64::from_ne_bytes(at.try_into().ok()?))
}

/// Checks a received DATA packet's header, in softirq where it arrived,
/// so that a packet that waits in its socket's backlog is a valid one, as
/// TCP checks a segment before its backlog, and marks it in `skb->cb` so
/// that [`decode_datagram`] does not check it again. `skb` is as `mrc_rx`
/// leaves it (see [`decode_datagram`]), taken by [`take_datagram`]:
/// nothing else marks one.
pub(crate) fn check_data(skb: &mut SkBuff) -> Result<(), DecodeError> {
    let head = skb.linear().get(UDP_HLEN..).unwrap_or(&[]);
    let len = (skb.len() as usize).saturating_sub(UDP_HLEN);
    mrc_proto::decode_data(head, len)?;
    if let Some(mark) = skb.cb_mut().get_mut(CB_CHECKED) {
        *mark = 1;
    }
    Ok(())
}

/// Decodes a received datagram as `mrc_rx` leaves it: `data`
/// at its UDP header, the first [`RX_HEADERS_LEN`] bytes (or all, if fewer)
/// linear, and all of it linear if its fixed header is valid and not DATA's.
///
/// A DATA packet is decoded by [`mrc_proto::decode_data`] from its header
/// alone, or, if [`check_data`] did that already, read again without its
/// checks ([`mrc_proto::redecode_data`]): its payload, which MRC's
/// checksum does not cover (the UDP checksum does, see "Checksums" in
/// `mrc_proto`), stays where it lies, typically in the page fragments it
/// arrived in, and its [`Payload`](mrc_proto::Payload) has a length but no
/// bytes. Any other datagram is decoded by [`mrc_proto::decode`] from the
/// linear area, which holds all of it, or for a fixed header that is not
/// valid, enough of it for the error.
pub(crate) fn decode_datagram(skb: &SkBuff) -> Result<Packet<'_>, DecodeError> {
    let head = skb.linear().get(UDP_HLEN..).unwrap_or(&[]);
    let len = (skb.len() as usize).saturating_sub(UDP_HLEN);
    if skb.cb().get(CB_CHECKED) == Some(&1) {
        return mrc_proto::redecode_data(head, len);
    }
    if !is_data(head) {
        return mrc_proto::decode(head);
    }
    mrc_proto::decode_data(head, len)
}

/// Whether `head`, the first bytes of a datagram, is a valid fixed header
/// whose type field says DATA.
fn is_data(head: &[u8]) -> bool {
    mrc_proto::peek_header(head).is_ok_and(|h| h.packet_type() == Some(PacketType::Data))
}

impl MrcNet {
    /// Counts a datagram of `len` bytes (its UDP header included) received.
    pub(crate) fn count_rx_datagram(&self, len: u32) {
        self.stats.rx_packets.count(1);
        self.stats
            .rx_bytes
            .count(u64::from(len).saturating_sub(UDP_HLEN as u64));
    }

    /// Counts a datagram's wait in the receive stack, if it was stamped.
    pub(crate) fn count_stack_wait(&self, wait_ns: Option<u64>) {
        if let Some(w) = wait_ns {
            self.stats.rx_stamped.count(1);
            self.stats.rx_stack_wait_us.count(w / 1000);
        }
    }

    /// Counts a GSO packet or GRO train received, of several datagrams.
    pub(crate) fn count_rx_train(&self) {
        self.stats.rx_gro.count(1);
    }

    /// Counts `n` datagrams with a bad UDP checksum, or DATA packets without
    /// one.
    pub(crate) fn count_udp_checksum(&self, n: u32) {
        if n > 0 {
            self.stats.drop_udp_checksum.count(u64::from(n));
        }
    }

    /// Counts `n` datagrams of a GSO packet or GRO train that could not be
    /// split, for want of memory.
    pub(crate) fn count_unsplit(&self, n: u32) {
        if n > 0 {
            self.stats.drop_no_memory.count(u64::from(n));
        }
    }

    /// Counts a datagram dropped for want of memory: one that could not be
    /// made linear, or a SYN whose connection could not be created.
    pub(crate) fn count_no_memory(&self) {
        self.stats.count_drop(RxDrop::NoMemory);
    }

    /// Counts a well-formed packet for a session that has no connection.
    pub(crate) fn count_no_session(&self) {
        self.stats.count_drop(RxDrop::NoSession);
    }

    /// Counts a SYN its listener had no room for.
    pub(crate) fn count_syn_refused(&self) {
        self.stats.drop_backlog.count(1);
    }

    /// Counts a SYN whose retry token is not one this namespace made for
    /// it, or has expired.
    pub(crate) fn count_bad_token(&self) {
        self.stats.drop_bad_token.count(1);
    }

    /// Secret key of the retry tokens of this namespace's listeners.
    pub(crate) fn retry_key(&self) -> [u64; 2] {
        self.retry_key
    }

    /// Share of a listener's backlog, in percent, that half-open
    /// connections of SYNs without a retry token may hold.
    pub(crate) fn syn_retry_pct(&self) -> u32 {
        self.params.syn_retry_pct.load(Ordering::Relaxed)
    }

    /// Answers the SYN `syn` from `addrs` with a RETRY carrying `token`. Not
    /// rate-limited: it is smaller than the SYN it answers.
    pub(crate) fn send_retry(&self, addrs: &UdpAddrs, syn: &Header, token: u64) {
        let mut buf = [0u8; HEADER_LEN];
        let Some(len) = mrc_conn::reply_retry(syn, token, &mut buf) else {
            return;
        };
        let (Some(t), Some(pkt)) = (self.tunnel(&addrs.src), buf.get(..len)) else {
            return;
        };
        if t.send(addrs.dst, addrs.dport, addrs.src, addrs.sport, pkt)
            .is_ok()
        {
            self.stats.tx_retry.count(1);
            self.stats.tx_packets.count(1);
            self.stats.tx_bytes.count(len as u64);
        } else {
            self.stats.tx_errors.count(1);
        }
    }

    /// Counts a packet that failed to decode on a connection.
    pub(crate) fn count_decode_drop(&self, e: DecodeError) {
        self.stats.count_drop(RxDrop::Decode(e));
    }

    /// Counts a packet for a connection that came from an address that is
    /// none of its peer's.
    pub(crate) fn count_wrong_source(&self) {
        self.stats.count_drop(RxDrop::WrongSource);
    }

    /// Counts datagrams queued for the task that owned their socket or the
    /// run of their connection under way, and those that did not fit.
    pub(crate) fn count_backlog(&self, queued: u32, dropped: u32) {
        let s = &self.stats;
        s.rx_backlog.count(u64::from(queued));
        if dropped > 0 {
            s.drop_sock_backlog.count(u64::from(dropped));
        }
    }

    /// Counts a DATA packet dropped for want of receive memory: its
    /// socket's, or (`global`) that of all MRC sockets.
    pub(crate) fn count_rx_no_room(&self, global: bool) {
        self.stats.count_drop(if global {
            RxDrop::RmemMax
        } else {
            RxDrop::RcvBuf
        });
    }

    /// Counts a well-formed packet its connection ignored.
    pub(crate) fn count_conn_drop(&self, why: ConnDrop) {
        if let Some(i) = CONN_DROPS.iter().position(|d| *d == why) {
            self.stats.drop_conn.add(i, 1);
        }
    }

    /// The addresses of the endpoint table, their backup flags and the
    /// interfaces they are pinned to (0: none).
    pub(crate) fn endpoint_addrs(&self) -> [Option<(IpAddr, bool, u32)>; MAX_ENDPOINTS] {
        let t = self.endpoints.lock();
        let mut out = [None; MAX_ENDPOINTS];
        for (o, e) in out.iter_mut().zip(t.slots.iter()) {
            *o = e.map(|e| {
                (
                    e.addr,
                    e.flags & nl::MRC_ENDPOINT_FLAGS_BACKUP != 0,
                    e.ifindex,
                )
            });
        }
        out
    }

    /// Busy heartbeat of new connections, in milliseconds.
    pub(crate) fn heartbeat_ms(&self) -> u32 {
        self.params.heartbeat_ms.load(Ordering::Relaxed).max(1)
    }

    /// Congestion controller of new connections.
    pub(crate) fn cc(&self) -> CcKind {
        self.params.cc()
    }

    /// Entropy values (paths) per plane of new connections: 1 to 256, as
    /// the `param-set` policy allows. A connection opens paths up to its
    /// path table's size and no further.
    pub(crate) fn ev_per_plane(&self) -> u16 {
        self.params
            .ev_per_plane
            .load(Ordering::Relaxed)
            .clamp(1, 256) as u16
    }

    /// Counts a packet that could not be sent for want of its contents.
    pub(crate) fn count_tx_error(&self) {
        self.stats.tx_errors.count(1);
    }

    /// Counts a DATA or FIN packet sent again.
    pub(crate) fn count_retransmit(&self) {
        self.stats.tx_retransmits.count(1);
    }

    /// Counts a new DATA packet that arrived marked congestion experienced.
    pub(crate) fn count_ecn_ce(&self) {
        self.stats.ecn_ce_packets.count(1);
    }

    /// Counts an ACK that echoed a congestion mark.
    pub(crate) fn count_ecn_echo(&self) {
        self.stats.ecn_echoes.count(1);
    }

    /// Counts a connection that reached the established state.
    pub(crate) fn count_conn_opened(&self) {
        self.stats.conns_opened.count(1);
    }

    /// Counts a connection closed with an error.
    pub(crate) fn count_conn_failed(&self) {
        self.stats.conns_failed.count(1);
    }

    /// Counts a closed socket's connection reset after `fin_timeout_ms`.
    pub(crate) fn count_orphan_timeout(&self) {
        self.stats.orphan_timeouts.count(1);
    }

    /// Counts handshake packets a connection did not send, to stay within
    /// three times what the peer's SYNs brought.
    pub(crate) fn count_amp_limited(&self, n: u64) {
        if n > 0 {
            self.stats.tx_amp_limited.count(n);
        }
    }

    /// Counts a connection reset at close for want of an orphan slot.
    pub(crate) fn count_orphan_refused(&self) {
        self.stats.orphans_refused.count(1);
    }

    /// Returns the tunables of a new connection.
    pub(crate) fn conn_config(&self, rcvbuf: u32, sndbuf: u32, mtu: u32) -> ConnConfig {
        let p = &self.params;
        let mut cfg = ConnConfig::DEFAULT;
        cfg.mtu = mtu;
        cfg.rcvbuf = rcvbuf;
        cfg.sndbuf = sndbuf;
        cfg.max_msg = mrc_sys::MRC_MAX_MSG;
        // Nine SYNs over 51 s before a connection attempt fails, so a busy
        // listener has time to answer.
        cfg.syn_retries = 8;
        let hb = u64::from(p.heartbeat_ms.load(Ordering::Relaxed)).max(1);
        cfg.path.heartbeat_busy_ns = hb * 1_000_000;
        cfg.path.miss_threshold = p.miss_threshold.load(Ordering::Relaxed).clamp(1, 255) as u8;
        cfg.path.cc = p.cc();
        cfg.path.data_per_idle_probe = p.data_per_idle_probe.load(Ordering::Relaxed);
        cfg.path.pacing = mrc_sys::param_pacing();
        // A path is suspected only after 10 ms without an answer: shorter
        // timeouts mistake scheduling delays of a loaded host for path
        // failures, and every suspicion costs probes and retransmissions.
        cfg.path.probe_timeout_min_ns = cfg.path.probe_timeout_min_ns.max(PROBE_TIMEOUT_MIN_NS);
        cfg.path.mss = mtu.saturating_sub(HEADER_LEN as u32);
        cfg.user_timeout_ns = u64::from(p.user_timeout_ms.load(Ordering::Relaxed)) * 1_000_000;
        cfg.fin_timeout_ns = u64::from(mrc_sys::param_fin_timeout_ms()) * 1_000_000;
        // Probe answers must echo nonces nobody else can predict.
        cfg.nonce_key = [mrc_sys::random_u64(), mrc_sys::random_u64()];
        cfg
    }

    /// Builds the datagram of the MRC control packet `pkt` and queues it on
    /// `chain` for [`Self::flush`]; `dest.tag` is the packet type's index.
    /// Callable under a lock.
    pub(crate) fn queue(&self, chain: &mut TxChain, dest: TxDest, pkt: &[u8]) {
        match UdpTunnel::packet(pkt) {
            Ok(skb) => chain.push(skb, dest),
            Err(_) => {
                self.stats.tx_errors.count(1);
            }
        }
    }

    /// Queues on `chain` the DATA packet whose payload is bytes
    /// `off..off + len` of `msg`; `write_head` writes and seals its header
    /// into the [`HEADER_LEN`] bytes it is given and returns whether it did.
    /// The packet takes the message's memory as it is, with a page
    /// reference: its payload is not copied. Callable under a lock.
    ///
    /// Data packets of one size for the same path are sent as one UDP GSO
    /// packet (module parameter `gso`): one pass through routing, the IP
    /// output path and the device for up to [`mrc_sys::TX_BATCH_SEGS`]
    /// packets.
    pub(crate) fn queue_data(
        &self,
        chain: &mut TxChain,
        dest: TxDest,
        msg: &MsgBuf,
        off: u32,
        len: u32,
        write_head: impl FnOnce(&mut [u8]) -> bool,
    ) {
        let Ok(mut head) = Frag::new(HEADER_LEN) else {
            self.stats.tx_errors.count(1);
            return;
        };
        if !write_head(head.as_mut_slice()) {
            self.stats.tx_errors.count(1);
            return;
        }
        let seg = u16::try_from(HEADER_LEN as u32 + len)
            .ok()
            .filter(|_| mrc_sys::param_gso());
        let head = match seg {
            Some(_) => match chain.append(&dest, head, msg, off, len) {
                Ok(()) => return,
                Err(head) => head,
            },
            None => head,
        };
        match (UdpTunnel::packet_of(head, msg, off, len), seg) {
            (Ok(skb), Some(seg)) => chain.push_open(skb, dest, seg),
            (Ok(skb), None) => chain.push(skb, dest),
            (Err(_), _) => {
                self.stats.tx_errors.count(1);
            }
        }
    }

    /// Sends the packets of `chain`, in order, each on the tunnel of its
    /// addresses' family; calls `down` with the destination of each packet
    /// that could not be sent because the host cannot send there at all (see
    /// [`UdpTunnel::is_local_down`]).
    pub(crate) fn flush(&self, mut chain: TxChain, mut down: impl FnMut(&TxDest)) {
        if chain.is_empty() {
            return;
        }
        mrc_sys::with_bh_disabled(|| {
            while let Some((skb, d)) = chain.pop() {
                let len = u64::from(skb.len());
                let segs = u64::from(skb.segs());
                let Some(t) = self.tunnel(&d.dst) else {
                    self.stats.tx_errors.count(segs);
                    continue;
                };
                let sent = t.xmit(skb, d.src, d.sport, d.dst, d.dport, d.oif);
                if sent.is_ok() {
                    self.stats.tx_by_type.add(usize::from(d.tag), segs);
                    if segs > 1 {
                        self.stats.tx_gso.count(1);
                    }
                    self.stats.tx_packets.count(segs);
                    self.stats.tx_bytes.count(len);
                } else {
                    self.stats.tx_errors.count(segs);
                    if sent.is_err_and(UdpTunnel::is_local_down) {
                        down(&d);
                    }
                }
            }
        });
    }

    /// Returns the local address routing would use towards `dst`, and the
    /// route's MTU.
    pub(crate) fn source_for(&self, dst: IpAddr) -> Result<(IpAddr, u32)> {
        self.tunnel(&dst)
            .ok_or_else(err::address_family_not_supported)?
            .source_for(dst)
    }

    /// Takes a use of the peer path `key`, creating it if needed. `None`
    /// if memory is short: the connection path then relies on its own
    /// packets and probes alone. Callable in atomic context.
    pub(crate) fn peer_path(&self, key: PeerKey) -> Option<PeerRef> {
        let table = self.peers.clone();
        {
            let mut t = table.tree.lock();
            if let Some(e) = t.get_mut(&key) {
                e.users = e.users.saturating_add(1);
                let path = e.path.clone();
                drop(t);
                return Some(PeerRef { table, path });
            }
        }
        let node = RBTreeNodeReservation::new(GFP_ATOMIC).ok()?;
        let fresh = Arc::new(
            PeerPath {
                key,
                heard_ns: AtomicU64::new(0),
                probed_ns: AtomicU64::new(0),
            },
            GFP_ATOMIC,
        )
        .ok()?;
        let path = {
            let mut t = table.tree.lock();
            // Someone may have added it while the table was unlocked.
            if let Some(e) = t.get_mut(&key) {
                e.users = e.users.saturating_add(1);
                e.path.clone()
            } else {
                t.insert(node.into_node(
                    key,
                    PeerEntry {
                        path: fresh.clone(),
                        users: 1,
                    },
                ));
                fresh
            }
        };
        Some(PeerRef { table, path })
    }

    /// Number of peer paths in use (for `/proc/net/mrc`).
    fn peer_paths(&self) -> u64 {
        self.peers.tree.lock().iter().count() as u64
    }

    /// The tunnel socket for `addr`'s family, while the namespace is up.
    fn tunnel(&self, addr: &IpAddr) -> Option<&UdpTunnel> {
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        let family = match addr {
            IpAddr::V4(_) => 0,
            IpAddr::V6(_) => 1,
        };
        // SAFETY: `ready` is set only after `open` wrote `tunnels`, and
        // `close` clears it and waits for receive callbacks before it writes
        // them; the namespace's MRC sockets are gone by then (see the `Sync`
        // impl).
        let tunnels = unsafe { &*self.tunnels.get() };
        tunnels.get(family)?.as_ref()
    }

    /// The connection registered under `sid` in role `passive`.
    pub(crate) fn lookup_session(&self, sid: u64, passive: bool) -> Option<SockRef> {
        self.socks.lock().sessions.get(&(sid, passive)).cloned()
    }

    /// The socket bound to MRC port `port`.
    pub(crate) fn lookup_port(&self, port: u16) -> Option<SockRef> {
        self.socks.lock().ports.get(&port).cloned()
    }

    /// Unregisters and returns any connection (namespace exit).
    pub(crate) fn take_any_session(&self) -> Option<SockRef> {
        let mut t = self.socks.lock();
        let sid = *t.sessions.keys().next()?;
        t.sessions.remove(&sid)
    }

    /// Up to `max` registered connections whose key is `start` or after it
    /// (from the first if `None`), in key order, and the table's generation.
    fn sessions_from(
        &self,
        start: Option<SessionKey>,
        max: usize,
    ) -> Result<(KVec<(SessionKey, SockRef)>, u32)> {
        let mut out = KVec::with_capacity(max, GFP_KERNEL)?;
        let mut t = self.socks.lock();
        let generation = t.generation;
        let mut cur = match start {
            Some(k) => t.sessions.cursor_lower_bound(&k),
            None => t.sessions.cursor_front(),
        };
        while let Some(c) = cur {
            if out.len() >= max {
                break;
            }
            let (k, sk) = c.current();
            out.push((*k, sk.clone()), GFP_ATOMIC)?;
            cur = c.move_next();
        }
        Ok((out, generation))
    }

    /// Number of registered connections.
    fn session_count(&self) -> u64 {
        self.socks.lock().sessions.iter().count() as u64
    }

    /// Registers `sk` under session id and role `key`; `EEXIST` if taken.
    pub(crate) fn insert_session(&self, key: SessionKey, sk: &Sock) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut t = self.socks.lock();
        if t.sessions.get(&key).is_some() {
            return Err(EEXIST);
        }
        t.sessions.insert(node.into_node(key, sk.hold()));
        t.generation = t.generation.wrapping_add(1);
        Ok(())
    }

    /// Unregisters `sk` from `key`.
    pub(crate) fn remove_session(&self, key: SessionKey, sk: &Sock) {
        let removed = {
            let mut t = self.socks.lock();
            if t.sessions.get(&key).is_some_and(|s| s.is(sk)) {
                t.generation = t.generation.wrapping_add(1);
                t.sessions.remove(&key)
            } else {
                None
            }
        };
        // The reference is dropped with the table unlocked.
        drop(removed);
    }

    /// Gives MRC port `port` to `sk`, or a free ephemeral port if `port` is
    /// 0; returns the port. `EADDRINUSE` if it is taken.
    pub(crate) fn bind_port(&self, port: u16, sk: &Sock) -> Result<u16> {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut t = self.socks.lock();
        let port = if port != 0 {
            if t.ports.get(&port).is_some() {
                return Err(err::address_in_use());
            }
            port
        } else {
            let span = u32::from(EPHEMERAL_LAST - EPHEMERAL_FIRST) + 1;
            let mut found = None;
            let mut p = t.next_port;
            for _ in 0..span {
                if !(EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&p) {
                    p = EPHEMERAL_FIRST;
                }
                if t.ports.get(&p).is_none() {
                    found = Some(p);
                    break;
                }
                p = p.wrapping_add(1);
            }
            let p = found.ok_or_else(err::address_in_use)?;
            t.next_port = p.wrapping_add(1);
            p
        };
        t.ports.insert(node.into_node(port, sk.hold()));
        Ok(port)
    }

    /// Releases MRC port `port` if `sk` holds it.
    pub(crate) fn unbind_port(&self, port: u16, sk: &Sock) {
        let removed = {
            let mut t = self.socks.lock();
            if t.ports.get(&port).is_some_and(|s| s.is(sk)) {
                t.ports.remove(&port)
            } else {
                None
            }
        };
        drop(removed);
    }
}

impl MrcNet {
    /// Answers a packet for a session that does not exist with an RST, so a
    /// peer that lost its state (or connects to nobody) learns it at once.
    pub(crate) fn reply_rst(&self, addrs: &UdpAddrs, header: &Header) {
        let mut buf = [0u8; HEADER_LEN];
        let Some(len) = mrc_conn::reply_rst(header, &mut buf) else {
            return;
        };
        let (Some(t), Some(pkt)) = (self.tunnel(&addrs.src), buf.get(..len)) else {
            return;
        };
        // The source may be forged: answer no faster than ICMP errors are.
        let allowed = {
            let mut bucket = self.rst_limit.lock();
            let (rate, burst) = mrc_sys::param_rst_limit();
            bucket.configure(rate, burst);
            bucket.allow(mrc_sys::now_ns())
        };
        if !allowed {
            self.stats.tx_rst_limited.count(1);
            return;
        }
        let sent = t.send(addrs.dst, addrs.dport, addrs.src, addrs.sport, pkt);
        if sent.is_ok() {
            self.stats.tx_rst.count(1);
            self.stats.tx_packets.count(1);
            self.stats.tx_bytes.count(len as u64);
        } else {
            self.stats.tx_errors.count(1);
        }
    }
}

impl ProcShow for MrcNet {
    fn show(&self, out: &mut SeqFile) -> core::fmt::Result {
        let s = &self.stats;
        let get = |c: &Counter| c.total();
        writeln!(out, "rx_packets {}", get(&s.rx_packets))?;
        writeln!(out, "rx_bytes {}", get(&s.rx_bytes))?;
        writeln!(out, "rx_gro {}", get(&s.rx_gro))?;
        writeln!(out, "rx_backlog {}", get(&s.rx_backlog))?;
        writeln!(out, "rx_stamped {}", get(&s.rx_stamped))?;
        writeln!(out, "rx_stack_wait_us {}", get(&s.rx_stack_wait_us))?;
        writeln!(out, "tx_packets {}", get(&s.tx_packets))?;
        writeln!(out, "tx_gso {}", get(&s.tx_gso))?;
        writeln!(out, "tx_bytes {}", get(&s.tx_bytes))?;
        for (i, e) in DecodeError::ALL.iter().enumerate() {
            writeln!(out, "drop_{} {}", e.name(), s.drop_decode.sum(i))?;
        }
        writeln!(out, "drop_no_session {}", get(&s.drop_no_session))?;
        writeln!(out, "drop_no_memory {}", get(&s.drop_no_memory))?;
        writeln!(out, "drop_wrong_source {}", get(&s.drop_wrong_source))?;
        writeln!(out, "drop_rcvbuf {}", get(&s.drop_rcvbuf))?;
        writeln!(out, "drop_rmem_max {}", get(&s.drop_rmem_max))?;
        writeln!(out, "drop_udp_checksum {}", get(&s.drop_udp_checksum))?;
        for (i, why) in CONN_DROPS.iter().enumerate() {
            writeln!(out, "drop_conn_{} {}", why.name(), s.drop_conn.sum(i))?;
        }
        writeln!(out, "drop_backlog {}", get(&s.drop_backlog))?;
        writeln!(out, "drop_sock_backlog {}", get(&s.drop_sock_backlog))?;
        writeln!(out, "drop_bad_token {}", get(&s.drop_bad_token))?;
        writeln!(out, "conns {}", self.session_count())?;
        writeln!(out, "conns_opened {}", get(&s.conns_opened))?;
        writeln!(out, "conns_failed {}", get(&s.conns_failed))?;
        writeln!(out, "orphan_timeouts {}", get(&s.orphan_timeouts))?;
        writeln!(out, "orphans_refused {}", get(&s.orphans_refused))?;
        writeln!(out, "peer_paths {}", self.peer_paths())?;
        // Module-wide, whatever the namespace.
        writeln!(out, "rmem_total {}", mrc_sys::rmem_total())?;
        writeln!(out, "rmem_max {}", mrc_sys::rmem_limit())?;
        writeln!(out, "orphans {}", ORPHANS.count())?;
        writeln!(out, "tx_rst {}", get(&s.tx_rst))?;
        writeln!(out, "tx_rst_limited {}", get(&s.tx_rst_limited))?;
        writeln!(out, "tx_amp_limited {}", get(&s.tx_amp_limited))?;
        writeln!(out, "tx_retry {}", get(&s.tx_retry))?;
        writeln!(out, "tx_retransmits {}", get(&s.tx_retransmits))?;
        writeln!(out, "ecn_ce_packets {}", get(&s.ecn_ce_packets))?;
        writeln!(out, "ecn_echoes {}", get(&s.ecn_echoes))?;
        for (i, t) in PacketType::ALL.iter().enumerate() {
            writeln!(out, "tx_type_{} {}", t.name(), s.tx_by_type.sum(i))?;
        }
        writeln!(out, "tx_errors {}", get(&s.tx_errors))
    }
}
