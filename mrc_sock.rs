// SPDX-License-Identifier: GPL-2.0

//! `AF_MRC` sockets: the socket calls, the glue between them, the UDP
//! tunnel and the sans-IO connection core ([`Conn`]). Child modules, which
//! see this one's state, hold what listeners do with SYNs
//! (`mrc_sock_listen.rs`), what netlink reads of a connection
//! (`mrc_sock_netlink.rs`) and the `SOL_MRC` socket options
//! (`mrc_sockopt.rs`).
//!
//! # Contexts and locks
//!
//! - Socket calls run in process context under the socket lock
//!   ([`Sock::lock`], `lock_sock`), which serialises them per socket and is
//!   dropped while they sleep.
//! - Packets arrive in softirq, a batch at a time (`data_ready` of the tunnel
//!   socket, see `mrc_net`), timers fire in
//!   softirq (hrtimer, soft mode), and listeners finish handshakes in a work
//!   item. All three and the socket calls meet at [`MrcSock::inner`], a
//!   spinlock taken with bottom halves disabled, which guards the connection
//!   core and its buffers. Nothing sleeps or allocates with `GFP_KERNEL`
//!   under it.
//! - Lock order: socket lock, then `inner`, then the namespace's socket
//!   table. Softirq looks a socket up in the table and drops the table lock
//!   before it takes `inner`. No two `inner` locks are ever held together.
//!
//! # Lifetime
//!
//! The user's `struct socket` holds one reference to the `struct sock`;
//! the namespace's session table holds another while the connection is
//! registered, and the port table one while the socket owns a port. A
//! connection outlives `close()` until its FIN exchange is over (or it is
//! reset): it is then an orphan, and when its core reports `Closed` the work
//! item reaps it ([`destroy`]): it is unregistered, its timer is cancelled
//! and its buffers are freed. The timer never holds a reference: it is only
//! armed while the socket is not yet destroyed, and [`destroy`] cancels it
//! synchronously.
//!
//! # Data
//!
//! A sent message is copied from user space into one buffer, kept until
//! the peer has acknowledged it; DATA packets are built from it on each
//! (re)transmission. A received DATA packet's `sk_buff` is kept, trimmed to
//! its payload, under its sequence number; when the core reports a complete
//! message its packets move, in order, to the socket's receive queue, the
//! first marked with the message length and the last with an end mark.
//! Only complete messages are ever in the receive queue.
//!
//! A `SOCK_STREAM` socket runs the same connection; `mrc_io` cuts what the
//! application writes into messages and reads the queue as one run of
//! bytes, across message boundaries.
//!
//! # Memory
//!
//! A connection is one vmalloc'ed `Session` (the core, `Conn`, and the
//! glue's buffers) plus what it keeps per path beyond its first few: the
//! core's path slots, the first 10 inline and the rest in kmalloc'ed chunks
//! of 10 paths (4080 bytes each, see "Memory" in `mrc_path`), and the
//! glue's entries ([`PathGlue`]: addressing, the shared record of the
//! network path, reported state, announcement), the first [`GLUE_CHUNK`]
//! (14) inline and the rest in chunks of as many (1008 bytes each). Chunks
//! are allocated with `GFP_ATOMIC` when a path is added to a chunk not yet
//! present, and freed when the chunk empties or the connection goes; a path
//! whose memory cannot be had is refused (`ENOMEM`).
//!
//! Bytes per connection (x86-64, debug kernel), by number of paths: before,
//! when every per-path array had room for all 256 paths, and since; in
//! parentheses what the allocators hand out (the `Session` rounded to pages,
//! each chunk to its kmalloc size class). Message buffers and packets are
//! not counted.
//!
//! | paths | before            | since             |
//! |-------|-------------------|-------------------|
//! | 1     | 205 616 (208 896) | 94 936 (98 304)   |
//! | 4     | 205 616 (208 896) | 94 936 (98 304)   |
//! | 16    | 205 616 (208 896) | 100 024 (103 424) |
//! | 256   | 205 616 (208 896) | 215 080 (219 136) |
//!
//! The `Session` is 94 936 bytes (was 205 616), 68 040 of them the core
//! (was 162 208). With all 256 paths a connection costs a few percent more
//! than before, the price of the chunks' pointers and of their rounding.

use core::mem::MaybeUninit;
use kernel::prelude::*;

#[path = "mrc_sock_listen.rs"]
mod listen;
#[path = "mrc_sock_netlink.rs"]
mod netlink;
#[path = "mrc_sockopt.rs"]
mod options;

use listen::{hand_to_listener, new_connection};
pub(crate) use listen::{listens_on, syn_received, SynAdmit};
use netlink::{conn_event, path_state};
pub(crate) use netlink::{fill_conn, ids};
pub(crate) use options::{getsockopt, setsockopt};

use crate::mrc_cc::CcKind;
use crate::mrc_conn::{
    self, Conn, ConnConfig, DropReason, Event, Input, SendRoom, State, Transmit, MSG_QUEUE, WINDOW,
};
use crate::mrc_limit;
use crate::mrc_net::{MrcNet, PeerRef, SessionKey, CB_FLAGS, CB_LEN, ORPHANS};
use crate::mrc_path::{plane_count, plane_pair, PathIds, PathState, StateReason, MAX_PATHS};
use crate::mrc_proto::{Body, Endpoint, Header, PacketType, MAX_ENDPOINTS};
use crate::mrc_slots::Slots;
use crate::mrc_sys::{
    self, err, msg_flags, new_spinlock_bh, nl, poll_bits, Backlog, Deferred, Handed, IpAddr,
    MrcAddr, MsgBuf, Read, Run, SkBuff, SkbList, Sock, SockRef, SpinLockBh, TxChain, TxDest,
    UdpAddrs,
};

/// Bytes of the UDP header in front of every MRC packet.
const UDP_HLEN: u32 = 8;

/// Largest datagram a connection sends (the MRC header included): what
/// a 9000-byte link MTU carries under IPv6 and UDP.
const MAX_DGRAM: u32 = 8952;

/// Datagram size when the route's MTU is not known.
const DEFAULT_DGRAM: u32 = 1400;

/// Largest MRC datagram that fits a route MTU of `mtu` bytes without IP
/// fragmentation (room for an IPv6 and a UDP header).
fn dgram_for(mtu: u32) -> u32 {
    if mtu == 0 {
        return DEFAULT_DGRAM;
    }
    mtu.saturating_sub(48).clamp(576, MAX_DGRAM)
}

/// Most datagrams one run of the core sends; the rest follow from the timer,
/// so that no single input or timer keeps a CPU in softirq for long.
const MAX_TX_PER_DRIVE: u32 = 64;

/// Shortest time from now the connection timer is armed for.
const MIN_TIMER_NS: u64 = 100_000;

/// Most connections a listener keeps waiting for `accept`.
const MAX_BACKLOG: usize = 4096;

/// Flags at `CB_FLAGS` of a delivered packet.
const CB_FIRST: u8 = 1;
const CB_LAST: u8 = 2;

/// Where a socket is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Created, maybe bound.
    Open,
    /// Listening for connections.
    Listening,
    /// Handshake in progress.
    Connecting,
    /// Handshake done; may be half-closed.
    Connected,
    /// The connection is over (orderly, reset or failed).
    Closed,
}

/// UDP addressing of the connection's path.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PathAddr {
    local: IpAddr,
    remote: IpAddr,
    /// UDP source port (the path's entropy value).
    sport: u16,
    /// The peer's MRC UDP port.
    dport: u16,
    /// Interface the path's packets leave by (its local endpoint's); 0
    /// lets routing choose.
    oif: u32,
}

impl PathAddr {
    /// Where the path's packets go, tagged `tag`.
    fn dest(&self, tag: u8) -> TxDest {
        TxDest {
            src: self.local,
            dst: self.remote,
            sport: self.sport,
            dport: self.dport,
            oif: self.oif,
            tag,
        }
    }
}

/// What a session keeps for a path index, beside the core's path.
///
/// It is there while the core has a path at the index, and after the path is removed until
/// its removal has been announced.
struct PathGlue {
    /// UDP addressing of the path; `None` once it was removed.
    addr: Option<PathAddr>,
    /// The namespace's shared record of the path's network path.
    peer: Option<PeerRef>,
    /// State last reported.
    state: PathState,
    /// Path id announced (`path-added`) at the index, until its `path-removed`.
    announced: Option<u32>,
}

impl PathGlue {
    /// What a path index has before its first path.
    const EMPTY: PathGlue = PathGlue {
        addr: None,
        peer: None,
        state: PathState::Active,
        announced: None,
    };
}

/// Path entries a session allocates at a time: a chunk is 1008 bytes, a 1 KiB kmalloc
/// object (checked below).
const GLUE_CHUNK: usize = 14;

/// What a session keeps per path index, allocated [`GLUE_CHUNK`] at a time.
type PathGlues = Slots<PathGlue, GLUE_CHUNK, { MAX_PATHS.div_ceil(GLUE_CHUNK) - 1 }>;

// A chunk must fit the 1 KiB kmalloc size class `GLUE_CHUNK` is chosen for.
const _: () = assert!(PathGlues::CHUNK_BYTES <= 1024);

/// The endpoints a connection offers in its handshake, in table order.
#[derive(Clone, Copy)]
struct Locals {
    eps: [Option<Endpoint>; MAX_ENDPOINTS],
    /// Interface each endpoint is pinned to, 0 for none.
    oif: [u32; MAX_ENDPOINTS],
    /// How many of `eps` are set (the first `n`).
    n: usize,
}

/// A connection: the core (about 66 KiB) and the bytes it refers to, so it
/// lives in its own vmalloc'ed block and is initialised in place. What it
/// keeps per path, in the core and here, is allocated as paths are added.
struct Session {
    conn: Conn,
    /// Sent messages not yet acknowledged, by id modulo [`MSG_QUEUE`].
    msgs: [Option<MsgBuf>; MSG_QUEUE],
    /// Id of the oldest message still in `msgs`.
    freed: u64,
    /// [`Session::free_acked`] freed messages that [`drive`] has not yet
    /// reported as room for writers.
    freed_unreported: bool,
    /// Received DATA payloads not yet part of a complete message, by
    /// sequence number modulo [`WINDOW`].
    rx: [Option<SkBuff>; WINDOW],
    /// Addressing, shared record and reported state of each path, by path
    /// index.
    paths: PathGlues,
    /// Local endpoints offered in the handshake (the namespace's endpoint
    /// table when the connection started).
    locals: Locals,
    /// Entropy values per plane.
    ev_per_plane: u16,
    /// A path was added or removed since the last announcement.
    paths_changed: bool,
    /// The core's [`crate::mrc_path::PathTable::state_changes`] when the paths' states were
    /// last reported.
    reported_changes: u64,
    txbuf: [u8; MAX_DGRAM as usize],
}

/// What to do once `inner` is unlocked.
#[derive(Default)]
struct After {
    readable: bool,
    writable: bool,
    state: bool,
    /// The handshake of a not yet accepted connection completed: hand it to
    /// this listener.
    to_parent: Option<SockRef>,
    /// The connection of an orphan is over: reap it.
    reap: bool,
    /// A connection created by this listener failed before it could be
    /// accepted: it no longer counts against the backlog.
    parent_lost: Option<SockRef>,
    /// Packets to send once the lock is released.
    tx: TxChain,
}

/// Destinations [`finish`] could not send to at all, whose paths fail
/// at once ([`Conn::on_send_error`]). Beyond the first few, a path is
/// failed by its next packet.
#[derive(Default)]
struct Unreachable {
    dests: [Option<TxDest>; 4],
}

impl Unreachable {
    fn add(&mut self, d: &TxDest) {
        if self.dests.iter().flatten().any(|x| x.same_path(d)) {
            return;
        }
        if let Some(free) = self.dests.iter_mut().find(|x| x.is_none()) {
            *free = Some(*d);
        }
    }

    fn is_empty(&self) -> bool {
        self.dests.iter().all(Option::is_none)
    }
}

/// The state [`MrcSock::inner`] guards.
struct Inner {
    mode: Mode,
    local: Option<MrcAddr>,
    peer: Option<MrcAddr>,
    /// The port table holds this socket under `local.port`.
    owns_port: bool,
    /// Listener: connections waiting for `accept`, a ring of `backlog` slots.
    acceptq: KVec<Option<SockRef>>,
    aq_head: usize,
    aq_len: usize,
    /// Listener: handshakes in progress.
    children: usize,
    sess: Option<VBox<Session>>,
    /// Session id and role under which the session table holds this socket.
    sid: Option<SessionKey>,
    /// Until accepted: the listener that created this connection.
    parent: Option<SockRef>,
    /// No user holds the socket (closed, or never accepted).
    orphan: bool,
    /// The socket was closed with its connection left to finish, in one of
    /// the `max_orphans` slots (given back by [`destroy`]).
    orphan_slot: bool,
    /// [`destroy`] ran: nothing may arm the timer or queue work any more.
    dead: bool,
    /// The peer has closed its direction and every message of it was queued.
    peer_fin: bool,
    /// `shutdown(SHUT_RD)`.
    rd_shut: bool,
    /// The user closed the socket: a message that arrives now is answered
    /// with RST, as TCP answers data that arrives after close, so that the
    /// peer learns at once that nobody reads what it sends.
    closed: bool,
    /// `shutdown(SHUT_WR)` or close.
    wr_shut: bool,
    /// When the timer is armed for.
    timer_at: Option<u64>,
    /// Core state last seen, and since when (for netlink).
    last_state: State,
    since_ns: u64,
    /// Message bytes the application queued, and received.
    tx_bytes: u64,
    rx_bytes: u64,
    /// Stream: bytes of the first packet of the receive queue already read.
    head_off: u32,
    /// Socket options for the connection (`SOL_MRC`).
    opts: Opts,
}

/// `SOL_MRC` options set on a socket: they replace the namespace's defaults
/// in its connection; accepted connections inherit the listener's.
#[derive(Clone, Copy, Default)]
struct Opts {
    /// `MRC_HEARTBEAT_MS`.
    heartbeat_ms: Option<u32>,
    /// `MRC_CC`.
    cc: Option<CcKind>,
}

impl Opts {
    /// Puts the options into the configuration of a new connection.
    fn apply(&self, cfg: &mut ConnConfig) {
        if let Some(ms) = self.heartbeat_ms {
            cfg.path.heartbeat_busy_ns = u64::from(ms) * 1_000_000;
        }
        if let Some(cc) = self.cc {
            cfg.path.cc = cc;
        }
    }
}

/// State of one MRC socket, stored after its `struct sock`.
#[pin_data]
pub(crate) struct MrcSock {
    #[pin]
    inner: SpinLockBh<Inner>,
}

impl MrcSock {
    /// Checks the arguments of `socket(AF_MRC, sock_type, protocol)`.
    pub(crate) fn check(sock_type: i32, protocol: i32) -> Result {
        if sock_type != mrc_sys::SOCK_SEQPACKET && sock_type != mrc_sys::SOCK_STREAM {
            return Err(err::socket_type_not_supported());
        }
        if protocol != 0 {
            return Err(err::protocol_not_supported());
        }
        Ok(())
    }

    /// Whether the socket holds no connection: it never had one, or
    /// [`destroy`] tore it down. True of every socket being freed.
    pub(crate) fn torn_down(&self) -> bool {
        let inner = self.inner.lock();
        inner.sess.is_none() && inner.sid.is_none()
    }

    /// Returns the initialiser of a fresh socket's state.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock_bh!(
                Inner {
                    mode: Mode::Open,
                    local: None,
                    peer: None,
                    owns_port: false,
                    acceptq: KVec::new(),
                    aq_head: 0,
                    aq_len: 0,
                    children: 0,
                    sess: None,
                    sid: None,
                    parent: None,
                    orphan: false,
                    orphan_slot: false,
                    dead: false,
                    peer_fin: false,
                    rd_shut: false,
                    closed: false,
                    wr_shut: false,
                    timer_at: None,
                    last_state: State::Idle,
                    since_ns: 0,
                    tx_bytes: 0,
                    rx_bytes: 0,
                    head_off: 0,
                    opts: Opts {
                        heartbeat_ms: None,
                        cc: None,
                    },
                },
                "mrc_sock"
            ),
        })
    }
}

/// Names every field of [`Session`] in an exhaustive pattern, so that adding a
/// field stops the build here until [`Session::new`], which must write each
/// field, is updated as well.
const _: fn(&Session) = session_fields_are_initialised;

fn session_fields_are_initialised(s: &Session) {
    let Session {
        conn: _,
        msgs: _,
        freed: _,
        freed_unreported: _,
        rx: _,
        paths: _,
        locals: _,
        ev_per_plane: _,
        paths_changed: _,
        reported_changes: _,
        txbuf: _,
    } = s;
}

impl Session {
    /// Frees the messages the peer has acknowledged, up to
    /// [`Conn::acked_msgs`], and notes it for [`Session::take_freed`].
    fn free_acked(&mut self) {
        let acked = self.conn.acked_msgs();
        if self.freed < acked {
            self.freed_unreported = true;
        }
        while self.freed < acked {
            if let Some(m) = self.msgs.get_mut((self.freed % MSG_QUEUE as u64) as usize) {
                *m = None;
            }
            self.freed += 1;
        }
    }

    /// Whether messages were freed since the last call: writers waiting
    /// for room may go on. Whichever call freed them (`drive`, or
    /// `queue_message` making room for its own message), the wakeup is
    /// given once.
    fn take_freed(&mut self) -> bool {
        core::mem::take(&mut self.freed_unreported)
    }

    /// Allocates a session with a fresh connection core, charged to the
    /// calling task's memory cgroup if `account` (`connect`: the
    /// application pays for its connection, as for its socket; the
    /// listener's work, in a kernel thread, makes the connections it
    /// accepts without).
    fn new(
        net: &MrcNet,
        cfg: ConnConfig,
        path: PathAddr,
        locals: Locals,
        ev_per_plane: u16,
        account: bool,
    ) -> Result<VBox<Session>> {
        let gfp = if account {
            GFP_KERNEL_ACCOUNT
        } else {
            GFP_KERNEL
        };
        // A failure is the caller's ENOMEM (or a SYN dropped and counted),
        // not a reason for vmalloc to dump the stack.
        let mut b = VBox::<Session>::new_uninit(gfp | __GFP_NOWARN)?;
        let p = b.as_mut_ptr();
        // SAFETY: `p` points to uninitialised, writable memory for a
        // `Session`; every field is written once, arrays element by element,
        // so no large temporary is built on the stack. The writes below name
        // every field of `Session` (checked by
        // `session_fields_are_initialised`).
        unsafe {
            let conn = &mut *core::ptr::addr_of_mut!((*p).conn).cast::<MaybeUninit<Conn>>();
            Conn::init_in_place(conn, cfg);
            let msgs = core::ptr::addr_of_mut!((*p).msgs).cast::<Option<MsgBuf>>();
            for i in 0..MSG_QUEUE {
                msgs.add(i).write(None);
            }
            core::ptr::addr_of_mut!((*p).freed).write(0);
            core::ptr::addr_of_mut!((*p).freed_unreported).write(false);
            let rx = core::ptr::addr_of_mut!((*p).rx).cast::<Option<SkBuff>>();
            for i in 0..WINDOW {
                rx.add(i).write(None);
            }
            PathGlues::init_in_place(
                &mut *core::ptr::addr_of_mut!((*p).paths).cast::<MaybeUninit<PathGlues>>(),
            );
            core::ptr::addr_of_mut!((*p).locals).write(locals);
            core::ptr::addr_of_mut!((*p).ev_per_plane).write(ev_per_plane);
            core::ptr::addr_of_mut!((*p).paths_changed).write(false);
            // Not a count the core has had: the first report looks.
            core::ptr::addr_of_mut!((*p).reported_changes).write(u64::MAX);
            core::ptr::addr_of_mut!((*p).txbuf).write_bytes(0, 1);
            let mut s = b.assume_init();
            s.add_path(net, mrc_sys::now_ns(), first_path_ids(), path, false, None)?;
            Ok(s)
        }
    }

    /// Adds a path to the core and its addressing here. `peer_ep` is the
    /// endpoint the peer announced that the path leads to: the core holds
    /// such a path back until the peer answers there, unless the address is
    /// proven already. The handshake's path and the application's own go to
    /// addresses this end chose (`None`). Fails with `ENOSPC` when the
    /// connection has [`MAX_PATHS`] paths, and with `ENOMEM` when the memory
    /// for the path's entries cannot be had; the connection then has no new
    /// path.
    fn add_path(
        &mut self,
        net: &MrcNet,
        now: u64,
        ids: PathIds,
        addr: PathAddr,
        backup: bool,
        peer_ep: Option<&Endpoint>,
    ) -> Result {
        let idx = match peer_ep {
            Some(ep) => self.conn.add_peer_path(now, ids, backup, ep),
            None => self.conn.paths_mut().add(now, ids, backup),
        }
        // Refused by a full table, or for want of memory for the path's slot.
        .ok_or_else(|| {
            if self.conn.paths().len() >= MAX_PATHS {
                ENOSPC
            } else {
                ENOMEM
            }
        })?;
        // A path starts in the state the core gives it (Suspect until validated): only
        // changes from there are reported.
        let state = self
            .conn
            .paths()
            .get(idx)
            .map(|p| p.state())
            .unwrap_or_default();
        // The index may still have the entry of a removed path whose removal is not
        // announced yet; otherwise it needs one, and maybe memory for it.
        let entry = if self.paths.get(idx).is_some() {
            self.paths.get_mut(idx)
        } else {
            self.paths.insert(idx, PathGlue::EMPTY).ok()
        };
        let Some(e) = entry else {
            // The path is new: nothing was sent on it, so the table forgets it directly.
            self.conn.paths_mut().remove(idx);
            return Err(ENOMEM);
        };
        e.state = state;
        e.addr = Some(addr);
        e.peer = net.peer_path((addr.local, addr.remote, addr.sport, addr.dport));
        self.paths_changed = true;
        Ok(())
    }

    /// A path id no path of this connection has, for a path the application
    /// adds: above the ids of the planes' paths, which both ends derive the
    /// same way.
    fn user_path_id(&self) -> Result<u32> {
        let top = self
            .conn
            .paths()
            .iter()
            .map(|(_, p)| p.ids().path_id)
            .filter(|id| *id >= USER_PATH_ID_BASE)
            .max();
        match top {
            None => Ok(USER_PATH_ID_BASE),
            Some(id) => id.checked_add(1).ok_or(ENOSPC),
        }
    }

    /// Removes a path from the core (its packets in flight are resent on
    /// the others) and forgets its addressing. Returns the path's share of
    /// the namespace's record, to be dropped with `inner` unlocked.
    fn remove_path(&mut self, now: u64, path_id: u32) -> Result<Option<PeerRef>> {
        let idx = self.conn.remove_path(now, path_id).map_err(Error::from)?;
        self.paths_changed = true;
        let Some(e) = self.paths.get_mut(idx) else {
            return Ok(None);
        };
        e.addr = None;
        e.state = PathState::Active;
        let peer = e.peer.take();
        // The entry stays until the removal is announced, if the path was.
        if e.announced.is_none() {
            self.paths.take(idx);
        }
        Ok(peer)
    }

    /// Whether `ip` is an address of the peer: the far end of one of the
    /// connection's paths or an endpoint the peer announced. The path the
    /// packet names (`path_id`) is tried first: for the peer's own packets
    /// that is the one, and the check costs no scan of the paths.
    fn is_peer_addr(&self, ip: &IpAddr, path_id: u32) -> bool {
        let named = self
            .conn
            .paths()
            .find(path_id)
            .and_then(|i| self.paths.get(i)?.addr);
        if named.is_some_and(|p| p.remote == *ip) {
            return true;
        }
        let end = self.conn.paths().index_end();
        self.paths
            .iter(end)
            .filter_map(|(_, e)| e.addr)
            .any(|p| p.remote == *ip)
            || self.conn.peer_endpoints().any(|ep| ep_ip(&ep) == *ip)
    }

    /// A packet of the peer arrived on the path with this wire id: tells
    /// every connection over the same network path.
    fn heard_on(&self, path_id: u32, now: u64) {
        let peer = self
            .conn
            .paths()
            .find(path_id)
            .and_then(|i| self.paths.get(i)?.peer.as_ref());
        if let Some(p) = peer {
            p.heard(now);
        }
    }

    /// Gives the failure detector what other connections heard and probed
    /// on this connection's network paths: a path that carries their
    /// packets is alive and needs no probe of its own, and one they just
    /// probed waits for that probe's answer.
    fn share_liveness(&mut self, now: u64) {
        let end = self.conn.paths().index_end();
        for (idx, e) in self.paths.iter(end) {
            let Some(peer) = &e.peer else {
                continue;
            };
            let paths = self.conn.paths_mut();
            let heard = peer.heard_ns().min(now);
            if heard > 0 {
                paths.on_heard(idx, heard);
            }
            let probed = peer.probed_ns().min(now);
            if probed > 0 {
                paths.on_probed_elsewhere(idx, probed);
            }
        }
    }

    /// Opens the paths of every plane that [`plane_pair`] derives from the
    /// two ends' endpoints; each plane gets `ev_per_plane` paths, each with
    /// its own UDP source port (entropy value). Paths that exist are kept.
    fn open_planes(&mut self, net: &MrcNet, now: u64) {
        let blank = Endpoint::v4([0; 4], 0, false);
        let mut peer = [blank; MAX_ENDPOINTS];
        let mut nr = 0;
        for (slot, ep) in peer.iter_mut().zip(self.conn.peer_endpoints()) {
            *slot = ep;
            nr += 1;
        }
        let mut local = [blank; MAX_ENDPOINTS];
        let mut nl = 0;
        for (slot, ep) in local.iter_mut().zip(self.locals.eps.iter().flatten()) {
            *slot = *ep;
            nl += 1;
        }
        let locals = local.get(..nl).unwrap_or(&[]);
        let peers = peer.get(..nr).unwrap_or(&[]);
        let ev = self.ev_per_plane.max(1);
        for plane in 0..plane_count(nl, nr).min(MAX_ENDPOINTS) {
            let Some((li, ri)) = plane_pair(locals, peers, plane) else {
                continue;
            };
            let (Some(local), Some(remote)) = (locals.get(li).copied(), peers.get(ri).copied())
            else {
                continue;
            };
            let oif = self.locals.oif.get(li).copied().unwrap_or(0);
            for k in 0..ev {
                let path_id = 1 + plane as u32 * u32::from(ev) + u32::from(k);
                if self.conn.paths().find(path_id).is_some() {
                    continue;
                }
                let entropy = EV_BASE.wrapping_add((path_id % EV_SPAN) as u16);
                let ids = PathIds {
                    path_id,
                    plane: plane as u8,
                    entropy,
                };
                let addr = PathAddr {
                    local: ep_ip(&local),
                    remote: ep_ip(&remote),
                    sport: entropy,
                    dport: remote.port,
                    oif,
                };
                if self
                    .add_path(
                        net,
                        now,
                        ids,
                        addr,
                        local.backup || remote.backup,
                        Some(&remote),
                    )
                    .is_err()
                {
                    return;
                }
            }
        }
    }

    /// Fails the paths whose packets could not be sent at all.
    fn local_down(&mut self, now: u64, down: &Unreachable) {
        for d in down.dests.iter().flatten() {
            for (idx, e) in self.paths.iter(MAX_PATHS) {
                if e.addr.is_some_and(|p| p.dest(0).same_path(d)) {
                    self.conn.on_send_error(now, idx);
                }
            }
        }
    }

    /// Builds what `poll_transmit` planned and queues it on `chain`. A DATA
    /// packet is written straight into the packet's memory: its header from
    /// `txbuf`, its payload from the message.
    fn transmit(&mut self, net: &MrcNet, chain: &mut TxChain, tx: &Transmit, now: u64) {
        let Some(e) = self.paths.get(tx.path) else {
            return;
        };
        let Some(p) = e.addr else {
            return;
        };
        let dest = p.dest(tx.kind.index() as u8);
        let Some(d) = tx.data else {
            if let Some(pkt) = self.txbuf.get(..tx.len) {
                net.queue(chain, dest, pkt);
            }
            if tx.kind == PacketType::Probe {
                if let Some(peer) = &e.peer {
                    peer.probed(now);
                }
            }
            return;
        };
        if d.retransmit {
            net.count_retransmit();
        }
        let Some(msg) = self
            .msgs
            .get((d.msg_id % MSG_QUEUE as u64) as usize)
            .and_then(|m| m.as_ref())
        else {
            // The core sends only messages it has not seen acknowledged,
            // and their bytes are kept until it has: a hole here is a bug,
            // and the receiver would wait for these bytes until it fails.
            net.count_tx_error();
            mrc_sys::warn_on_once!(true, "DATA of a message whose bytes are gone");
            return;
        };
        let planned = &self.txbuf;
        net.queue_data(chain, dest, msg, d.offset, d.len, |head| {
            mrc_conn::emit_data_head(head, planned, tx).is_ok()
        });
    }

    /// Sends a netlink event for every path added or removed since the
    /// last call.
    fn announce_paths(&mut self, sk: &Sock, now: u64) {
        if !core::mem::take(&mut self.paths_changed) {
            return;
        }
        let sid = self.conn.session_id();
        // Every path of the core has an entry, and so has every path removed whose
        // removal is not announced yet.
        for (i, e) in self.paths.iter_mut(MAX_PATHS) {
            let path = self.conn.paths().get(i);
            let now_id = path.map(|p| p.ids().path_id);
            if e.announced == now_id {
                continue;
            }
            if let Some(old) = core::mem::replace(&mut e.announced, now_id) {
                sk.notify(nl::MRC_CMD_PATH_REMOVED, |m| {
                    m.put_uint(nl::MRC_A_EVENT_SESSION_ID, sid)?;
                    m.put_uint(nl::MRC_A_EVENT_COOKIE, sk.cookie())?;
                    m.put_u32(nl::MRC_A_EVENT_PATH_ID, old)?;
                    m.put_uint(nl::MRC_A_EVENT_TIMESTAMP_NS, now)
                });
            }
            let (Some(p), Some(a)) = (path, e.addr) else {
                continue;
            };
            let ids = p.ids();
            sk.notify(nl::MRC_CMD_PATH_ADDED, |m| {
                m.put_uint(nl::MRC_A_EVENT_SESSION_ID, sid)?;
                m.put_uint(nl::MRC_A_EVENT_COOKIE, sk.cookie())?;
                m.put_u32(nl::MRC_A_EVENT_PATH_ID, ids.path_id)?;
                m.put_u32(nl::MRC_A_EVENT_PLANE, u32::from(ids.plane))?;
                m.put_ip(nl::MRC_A_EVENT_LOCAL_ADDR, &a.local)?;
                m.put_ip(nl::MRC_A_EVENT_PATH_REMOTE_ADDR, &a.remote)?;
                m.put_u16(nl::MRC_A_EVENT_PATH_SPORT, a.sport)?;
                m.put_u16(nl::MRC_A_EVENT_REMOTE_PORT, a.dport)?;
                m.put_u32(nl::MRC_A_EVENT_IFINDEX, a.oif)?;
                m.put_uint(nl::MRC_A_EVENT_TIMESTAMP_NS, now)
            });
        }
        // The removed paths are announced: their entries (whose share of the
        // namespace's record went with the removal) and emptied chunks go.
        self.paths
            .retain(|e| e.addr.is_some() || e.announced.is_some());
    }

    /// Sends a netlink event for every path whose state changed.
    fn report_paths(&mut self, sk: &Sock, now: u64) {
        self.announce_paths(sk, now);
        // Called after every batch: with hundreds of paths, looking at each
        // when none changed state cost more than the rest of the batch.
        let changes = self.conn.paths().state_changes();
        if core::mem::replace(&mut self.reported_changes, changes) == changes {
            return;
        }
        let sid = self.conn.session_id();
        for (i, p) in self.conn.paths().iter() {
            let Some(last) = self.paths.get_mut(i).map(|e| &mut e.state) else {
                continue;
            };
            let new = p.state();
            if *last == new {
                continue;
            }
            let old = core::mem::replace(last, new);
            let reason = match p.state_reason() {
                StateReason::Unspec => nl::MRC_PATH_STATE_REASON_UNSPEC,
                StateReason::LossBurst => nl::MRC_PATH_STATE_REASON_LOSS_BURST,
                StateReason::ProbeTimeout => nl::MRC_PATH_STATE_REASON_PROBE_TIMEOUT,
                StateReason::ProbeAnswered => nl::MRC_PATH_STATE_REASON_PROBE_ANSWERED,
                StateReason::LocalDown => nl::MRC_PATH_STATE_REASON_LOCAL_DOWN,
                StateReason::Unvalidated => nl::MRC_PATH_STATE_REASON_UNVALIDATED,
            };
            sk.notify(nl::MRC_CMD_PATH_STATE_CHANGE, |m| {
                m.put_uint(nl::MRC_A_EVENT_SESSION_ID, sid)?;
                m.put_uint(nl::MRC_A_EVENT_COOKIE, sk.cookie())?;
                m.put_u32(nl::MRC_A_EVENT_PATH_ID, p.ids().path_id)?;
                m.put_u32(nl::MRC_A_EVENT_OLD_STATE, path_state(old))?;
                m.put_u32(nl::MRC_A_EVENT_NEW_STATE, path_state(new))?;
                m.put_u32(nl::MRC_A_EVENT_REASON, reason)?;
                m.put_uint(nl::MRC_A_EVENT_TIMESTAMP_NS, now)
            });
        }
    }

    /// Frees the packets of a complete message nobody will read.
    fn discard(&mut self, first: u64, last: u64) {
        for seq in first..=last {
            if let Some(slot) = self.rx.get_mut((seq % WINDOW as u64) as usize) {
                *slot = None;
            }
        }
    }

    /// Moves the packets of a complete message to the receive queue.
    fn deliver(&mut self, sk: &Sock, first: u64, last: u64, len: u32) {
        let rx = &mut self.rx;
        sk.queue_all(|queue| {
            for seq in first..=last {
                let slot = rx.get_mut((seq % WINDOW as u64) as usize);
                let Some(mut skb) = slot.and_then(|s| s.take()) else {
                    continue;
                };
                let cb = skb.cb_mut();
                let mut flags = 0;
                if seq == first {
                    flags |= CB_FIRST;
                    if let Some(c) = cb.get_mut(CB_LEN..CB_LEN + 4) {
                        c.copy_from_slice(&len.to_ne_bytes());
                    }
                }
                if seq == last {
                    flags |= CB_LAST;
                }
                if let Some(f) = cb.get_mut(CB_FLAGS) {
                    *f = flags;
                }
                queue(skb);
            }
        });
    }
}

/// Runs the core after any input, timer or call: drains its events, frees
/// acknowledged messages, sends what it wants sent, re-arms the timer.
fn drive(sk: &Sock, net: &MrcNet, inner: &mut Inner, now: u64, after: &mut After) {
    let Some(s) = inner.sess.as_deref_mut() else {
        return;
    };
    let mut sent = 0;
    loop {
        let mut busy = false;
        while let Some(ev) = s.conn.poll_event() {
            busy = true;
            match ev {
                Event::Connected => {
                    inner.mode = Mode::Connected;
                    // The peer's endpoints are known now (SYN_ACK).
                    s.open_planes(net, now);
                    net.count_conn_opened();
                    // Only a handshake holds packets back for amplification.
                    net.count_amp_limited(s.conn.stats().amp_limited);
                    sk.notify(nl::MRC_CMD_CONN_ESTABLISHED, |m| {
                        conn_event(m, sk, s.conn.session_id(), &inner.local, &inner.peer, 0)
                    });
                    after.state = true;
                    after.writable = true;
                    after.to_parent = inner.parent.take();
                }
                Event::Message {
                    first_seq,
                    last_seq,
                    len,
                    cost,
                } => {
                    if inner.closed {
                        s.discard(first_seq, last_seq);
                        s.conn.abort(now);
                    } else if inner.rd_shut {
                        // Nobody will read it: drop it and reopen the window.
                        s.discard(first_seq, last_seq);
                        s.conn.release_recv(u64::from(len), cost);
                    } else {
                        s.deliver(sk, first_seq, last_seq, len);
                        after.readable = true;
                    }
                }
                Event::PeerFin => {
                    inner.peer_fin = true;
                    after.readable = true;
                    after.state = true;
                }
                Event::Closed(e) => {
                    if inner.mode == Mode::Connecting {
                        net.count_amp_limited(s.conn.stats().amp_limited);
                    }
                    inner.mode = Mode::Closed;
                    after.parent_lost = inner.parent.take();
                    let errno = e.map_or(0, mrc_sys::errno_of);
                    if e.is_some() {
                        net.count_conn_failed();
                    }
                    if s.conn.stats().orphan_timeouts > 0 {
                        net.count_orphan_timeout();
                    }
                    sk.notify(nl::MRC_CMD_CONN_CLOSED, |m| {
                        conn_event(m, sk, s.conn.session_id(), &inner.local, &inner.peer, errno)
                    });
                    if let Some(e) = e {
                        sk.set_error(e.into());
                    }
                    after.state = true;
                    after.readable = true;
                    after.writable = true;
                }
            }
        }
        s.free_acked();
        if s.take_freed() {
            after.writable = true;
        }
        while sent < MAX_TX_PER_DRIVE {
            let Some(tx) = s.conn.poll_transmit(now, &mut s.txbuf) else {
                break;
            };
            busy = true;
            sent += 1;
            s.transmit(net, &mut after.tx, &tx, now);
        }
        if !busy || sent >= MAX_TX_PER_DRIVE {
            break;
        }
    }
    // More to send than one pass may: the timer continues shortly.
    let more = sent >= MAX_TX_PER_DRIVE;
    let st = s.conn.state();
    if st != inner.last_state {
        inner.last_state = st;
        inner.since_ns = now;
    }
    s.report_paths(sk, now);
    if !inner.dead {
        // A deadline that has passed and that the core did not move is
        // retried after a short pause rather than at once, so a timer can
        // never keep a CPU in softirq.
        let next = if more {
            Some(now)
        } else {
            s.conn.poll_timeout(now)
        };
        if let Some(at) = next.map(|t| t.max(now + MIN_TIMER_NS)) {
            arm_timer(sk, inner, at);
        }
    }
    after.reap = inner.mode == Mode::Closed && inner.orphan && !inner.dead;
}

/// Arms the connection's timer for `at`, unless it is armed for then
/// already; `inner` is held, and the connection has its session and is not
/// destroyed.
fn arm_timer(sk: &Sock, inner: &mut Inner, at: u64) {
    if inner.dead || inner.sess.is_none() || inner.timer_at == Some(at) {
        return;
    }
    inner.timer_at = Some(at);
    // SAFETY: `inner` is held and the connection is not destroyed (`dead`).
    // `destroy` sets `dead` under `inner` before it cancels the timer, so it
    // cancels this one, and until then the session table holds a reference
    // to the socket: a socket gets its session only once it is registered,
    // and stays registered until `destroy` (at namespace exit the table
    // hands its reference to `MrcNet::stop`, which keeps it until
    // `abort_for_exit` has destroyed the connection).
    unsafe { sk.arm_timer(at) };
}

/// Acts on what [`drive`] asked for, with `inner` unlocked; returns where
/// packets could not be sent at all.
fn finish(sk: &Sock, after: After) -> Unreachable {
    let mut down = Unreachable::default();
    sk.mrc_net().flush(after.tx, |d| down.add(d));
    if after.state {
        sk.state_change();
    }
    if after.readable {
        sk.data_ready();
    }
    if after.writable {
        sk.write_space();
    }
    if after.reap {
        sk.queue_work();
    }
    if let Some(parent) = after.to_parent {
        hand_to_listener(&parent, sk);
    }
    if let Some(parent) = after.parent_lost {
        let mut l = parent.state().inner.lock();
        l.children = l.children.saturating_sub(1);
    }
    down
}

/// [`finish`], then, while packets could not be sent at all, fails their
/// paths ([`Session::local_down`]) and drives the connection again: each
/// round fails paths that were not Failed yet.
fn settle(sk: &Sock, net: &MrcNet, after: After) {
    let mut down = finish(sk, after);
    while !down.is_empty() {
        let after = {
            let mut inner = sk.state().inner.lock();
            let now = mrc_sys::now_ns();
            if let Some(s) = inner.sess.as_deref_mut() {
                s.local_down(now, &down);
            }
            let mut after = After::default();
            drive(sk, net, &mut inner, now, &mut after);
            after
        };
        down = finish(sk, after);
    }
}

/// Runs `f` on the locked state of `sk`, then [`drive`] and [`finish`];
/// first whatever softirq left for the socket's owner, so that packets that
/// arrived while the caller held the socket count before it acts.
fn with_conn<R>(sk: &Sock, f: impl FnOnce(&mut Inner, u64) -> R) -> R {
    let (r, d) = sk.start_run();
    run(sk, r, d, f)
}

/// What softirq deferred while a task owned the socket, run by the owner as
/// it releases the socket (`mrc_sys`'s `release_cb`).
pub(crate) fn owner_backlog(sk: &Sock, r: Run<'_>, deferred: Deferred) {
    run(sk, r, deferred, |_, _| ());
}

/// The owner takes what softirq deferred, before it releases the socket,
/// unless a run under way takes it.
pub(crate) fn take_backlog(sk: &Sock) {
    if let Some((r, d)) = sk.start_run_unless_running() {
        run(sk, r, d, |_, _| ());
    }
}

/// Most turns of one [`run`]: the first, and those for what softirq or the
/// timer left while it went on. What is left after them waits for the next
/// run, which the timer starts shortly if nothing else does.
const MAX_RUN_TURNS: u32 = 4;

/// Runs the connection under one turn of its lock: the timer if it fired
/// and the packets in `deferred`, then `f`, then [`drive`]. Then, as long
/// as softirq or the timer left work for the run while it went on (see
/// [`Run`]), that work and [`drive`] again, up to [`MAX_RUN_TURNS`] turns
/// in all; then [`settle`].
fn run<R>(sk: &Sock, r: Run<'_>, deferred: Deferred, f: impl FnOnce(&mut Inner, u64) -> R) -> R {
    let net = sk.mrc_net();
    let mut answer_rst = None;
    let mut gone = SkbList::new();
    let mut after = After::default();
    let result = {
        let mut inner = sk.state().inner.lock();
        let mut now = mrc_sys::now_ns();
        // The writer's messages first: it may be this task, about to queue
        // more or to close.
        queue_handed(&mut inner, sk.take_handed());
        take_in(
            sk,
            net,
            &mut inner,
            deferred,
            now,
            &mut answer_rst,
            &mut gone,
        );
        let result = f(&mut inner, now);
        drive(sk, net, &mut inner, now, &mut after);
        let mut r = r;
        let mut turns = 1;
        loop {
            if turns >= MAX_RUN_TURNS {
                if sk.end_run(r, send_room(&inner)) {
                    arm_timer(sk, &mut inner, now + MIN_TIMER_NS);
                }
                break;
            }
            let Some((next, d, handed)) = sk.continue_run(r, send_room(&inner)) else {
                break;
            };
            r = next;
            turns += 1;
            now = mrc_sys::now_ns();
            queue_handed(&mut inner, handed);
            take_in(sk, net, &mut inner, d, now, &mut answer_rst, &mut gone);
            drive(sk, net, &mut inner, now, &mut after);
        }
        result
    };
    // Packets of a connection that is gone are freed unlocked.
    drop(gone);
    settle(sk, net, after);
    if let Some((h, a)) = answer_rst {
        net.reply_rst(&a, &h);
    }
    result
}

/// One turn of [`run`], under the connection's lock: the timer's work if it
/// fired, then the packets of `deferred`. The packets of a connection that
/// is gone go to `gone`, to be freed unlocked; the last packet to answer
/// with an RST, to `answer_rst`.
fn take_in(
    sk: &Sock,
    net: &MrcNet,
    inner: &mut Inner,
    deferred: Deferred,
    now: u64,
    answer_rst: &mut Option<(Header, UdpAddrs)>,
    gone: &mut SkbList,
) {
    let Deferred {
        mut packets, timer, ..
    } = deferred;
    if timer {
        inner.timer_at = None;
    }
    if !inner.dead {
        let handshake_peer = inner.peer.map(|p| p.ip);
        if let Some(s) = inner.sess.as_deref_mut() {
            if timer {
                s.share_liveness(now);
                s.conn.on_timeout(now);
            }
            while let Some(skb) = packets.pop() {
                if let Some(rst) = input_one(sk, net, s, handshake_peer, skb, now) {
                    *answer_rst = Some(rst);
                }
            }
        }
    }
    gone.append(packets);
}

/// Datagrams for a registered session, in softirq, each with `data` at its
/// UDP header: a run that arrived together (one GSO packet or GRO train).
/// They are taken under one turn of the connection's lock, which the other
/// CPU's softirq, the sender and the timer take too, and the connection
/// answers once for all of them: an acknowledgement that several packets
/// asked for goes out once. While a task owns the socket, or a [`run`] of
/// the connection is under way, they wait in the socket's backlog instead
/// (`Sock::backlog_unless_free`), as TCP's do for a task, so that softirq
/// never spins on a lock held across that work; the owner takes them when
/// it next acts on the connection or releases the socket, the run before
/// it ends. The backlog holds at most the socket's receive and send
/// buffers' worth, as TCP's.
pub(crate) fn input(sk: &Sock, net: &MrcNet, batch: SkbList) {
    let limit = sk.rcvbuf().saturating_add(sk.sndbuf());
    match sk.backlog_unless_free(batch, limit) {
        Backlog::Free(r, d) => run(sk, r, d, |_, _| ()),
        Backlog::Queued { queued, dropped } => net.count_backlog(queued, dropped),
    }
}

/// One datagram of [`input`], under the connection's lock. Returns the
/// header and addresses of a packet to answer with an RST.
fn input_one(
    sk: &Sock,
    net: &MrcNet,
    s: &mut Session,
    handshake_peer: Option<IpAddr>,
    mut skb: SkBuff,
    now: u64,
) -> Option<(Header, UdpAddrs)> {
    let total = skb.len();
    let ce = skb.ecn_ce();
    // A DATA packet's payload is never made linear: only its headers are
    // (`decode_datagram`).
    let pkt = match crate::mrc_net::decode_datagram(&skb) {
        Err(e) => {
            net.count_decode_drop(e);
            return None;
        }
        Ok(pkt) => pkt,
    };
    let payload_len = match pkt.body {
        Body::Data(d) => d.len() as u32,
        _ => 0,
    };
    if pkt.header.flags.ece() && matches!(pkt.body, Body::Ack(_)) {
        net.count_ecn_echo();
    }
    let addrs = skb.udp_addrs();
    // The session id travels in clear text: whoever learnt it must still
    // send from one of the peer's addresses to reach the connection.
    let path_id = pkt.header.path_id;
    let src = addrs.map(|a| a.src);
    if !src.is_some_and(|ip| handshake_peer == Some(ip) || s.is_peer_addr(&ip, path_id)) {
        net.count_wrong_source();
        return None;
    }
    // Payload is charged at its real size before the connection takes (and
    // acknowledges) it.
    if let Body::Data(_) = pkt.body {
        let limit = sk.rcvbuf();
        let in_order = pkt.header.seq == s.conn.rcv_nxt();
        if !mrc_limit::admit_rx(sk.rmem_alloc(), skb.truesize(), limit, in_order) {
            net.count_rx_no_room(false);
            return None;
        }
        // SAFETY: the packet goes, as the connection takes it, into the
        // session's buffers and then the socket's receive queue, or is freed
        // here: all of them are freed before the socket is (`destroy`,
        // `sk_destruct`).
        if !unsafe { skb.charge_rx(sk) } {
            net.count_rx_no_room(true);
            return None;
        }
    }
    s.heard_on(pkt.header.path_id, now);
    let arrived = crate::mrc_net::arrived_ns(&skb).unwrap_or(now);
    match s.conn.handle_packet_at(now, arrived, &pkt, ce) {
        Input::Store { seq } => {
            // Counted here, like the connection's `ce_received`, so a
            // duplicate of a marked packet is not counted twice.
            if ce {
                net.count_ecn_ce();
            }
            // Keep only the payload; the packet was cleaned and charged
            // above. What goes is the headers, which are linear, so the
            // payload stays where it is.
            if skb.pull_front(total - payload_len) {
                if let Some(slot) = s.rx.get_mut((seq % WINDOW as u64) as usize) {
                    *slot = Some(skb);
                }
            }
            None
        }
        Input::Dropped(why) => {
            net.count_conn_drop(why);
            // A connection that is over but not yet unregistered answers as
            // one that is gone, which completes an abort the peer challenged
            // (RFC 5961): its RST then carries the sequence number the
            // peer's ACK asked for.
            if why == DropReason::BadState && matches!(s.conn.state(), State::Closed(_)) {
                return addrs.map(|a| (pkt.header, a));
            }
            None
        }
        Input::Consumed => {
            skb.consume();
            None
        }
    }
}

/// The socket's timer fired (softirq). While a task owns the socket the
/// timer's work waits for it, as the packets do ([`input`]).
pub(crate) fn timer(sk: &Sock) {
    if let Some((r, d)) = sk.timer_fired() {
        run(sk, r, d, |_, _| ());
    }
}

/// The socket's work item (process context): a listener finishes the
/// handshakes of queued SYNs; an orphan whose connection is over is reaped.
pub(crate) fn work(sk: &Sock) {
    let guard = sk.lock();
    let (mode, reap) = {
        let inner = sk.state().inner.lock();
        (
            inner.mode,
            inner.orphan && !inner.dead && inner.mode == Mode::Closed,
        )
    };
    if mode == Mode::Listening {
        while let Some(skb) = guard.queue_dequeue() {
            match new_connection(sk, &skb) {
                Ok(()) => skb.consume(),
                Err(e) => {
                    // The SYN is freed as a drop.
                    drop(skb);
                    pr_debug!("incoming connection dropped: {:?}\n", e);
                    // The client sends its SYN again; until then the drop is
                    // seen in the counters.
                    if e == ENOMEM {
                        sk.mrc_net().count_no_memory();
                    }
                    let mut inner = sk.state().inner.lock();
                    inner.children = inner.children.saturating_sub(1);
                }
            }
        }
    } else if reap {
        destroy(sk);
        guard.queue_purge();
    }
}

/// The window (or send buffer) a connection takes from a socket buffer size:
/// half of it, the other half being the packets' overhead, which receive
/// memory is charged for (`sk_rmem_alloc` may reach the whole buffer).
///
/// Below twice the largest message, large messages no longer stream: they
/// go through the window a part at a time. That is the user's choice.
fn window_of(buf: u32) -> u32 {
    (buf / 2).max(1)
}

/// Identity of a connection's first path, the one of the handshake.
fn first_path_ids() -> PathIds {
    PathIds {
        path_id: 0,
        plane: 0,
        entropy: mrc_sys::param_port(),
    }
}

/// First path id of the paths the application adds (`MRC_PATH_ADD`).
const USER_PATH_ID_BASE: u32 = 1 << 24;

/// First UDP source port of the paths of planes, and how many there are.
const EV_BASE: u16 = 49152;
const EV_SPAN: u32 = 16384;

/// The IP address of a handshake endpoint.
fn ep_ip(ep: &Endpoint) -> IpAddr {
    match ep.ipv4() {
        Some(a) => IpAddr::V4(a),
        None => IpAddr::V6(ep.addr),
    }
}

/// The endpoints a new connection offers: the namespace's endpoint table
/// (entries of `first`'s family), else `first` alone.
fn local_endpoints(net: &MrcNet, first: IpAddr) -> Locals {
    let port = mrc_sys::param_port();
    let mut l = Locals {
        eps: [None; MAX_ENDPOINTS],
        oif: [0; MAX_ENDPOINTS],
        n: 0,
    };
    for (ip, backup, ifindex) in net.endpoint_addrs().iter().flatten() {
        if core::mem::discriminant(ip) != core::mem::discriminant(&first) {
            continue;
        }
        if let (Some(slot), Some(oif)) = (l.eps.get_mut(l.n), l.oif.get_mut(l.n)) {
            *slot = Some(endpoint(*ip, port, *backup));
            *oif = *ifindex;
            l.n += 1;
        }
    }
    if l.n == 0 {
        l.eps[0] = Some(endpoint(first, port, false));
        l.n = 1;
    }
    l
}

/// The handshake endpoint of a local address.
pub(crate) fn endpoint(ip: IpAddr, udp_port: u16, backup: bool) -> Endpoint {
    match ip {
        IpAddr::V4(a) => Endpoint::v4(a, udp_port, backup),
        IpAddr::V6(a) => Endpoint::v6(a, udp_port, backup),
    }
}

/// Unregisters a connection and frees its buffers (process context, socket
/// lock held or the socket unreachable by users). Idempotent. The receive
/// queue, which only the socket lock's holder may purge, is purged by the
/// callers that hold it, or freed with the socket.
fn destroy(sk: &Sock) {
    let (sid, sess) = {
        let mut inner = sk.state().inner.lock();
        if inner.dead {
            return;
        }
        inner.dead = true;
        if core::mem::take(&mut inner.orphan_slot) {
            ORPHANS.give();
        }
        (inner.sid.take(), inner.sess.take())
    };
    // `dead` keeps the timer from being armed again; wait for a running one.
    sk.cancel_timer();
    if let Some(sid) = sid {
        sk.mrc_net().remove_session(sid, sk);
    }
    drop(sess);
}

// --- Socket calls -------------------------------------------------------------------

/// `bind()`: takes the address's port (or a free one for port 0).
///
/// As for TCP: the address must be one of the host's (or unspecified), and
/// a port below `ip_unprivileged_port_start` needs `CAP_NET_BIND_SERVICE`.
pub(crate) fn bind(sk: &Sock, addr: &MrcAddr) -> Result {
    let _guard = sk.lock();
    {
        let inner = sk.state().inner.lock();
        if inner.local.is_some() || inner.mode != Mode::Open {
            return Err(EINVAL);
        }
    }
    if !addr.ip.is_unspecified() && !sk.is_local_addr(&addr.ip) {
        return Err(err::address_not_available());
    }
    if addr.port != 0 && sk.port_denied(addr.port) {
        return Err(EACCES);
    }
    let port = sk.mrc_net().bind_port(addr.port, sk)?;
    let mut inner = sk.state().inner.lock();
    inner.local = Some(MrcAddr { port, ..*addr });
    inner.owns_port = true;
    Ok(())
}

/// `listen()`.
pub(crate) fn listen(sk: &Sock, backlog: i32) -> Result {
    let _guard = sk.lock();
    let cap = usize::try_from(backlog).unwrap_or(0).clamp(1, MAX_BACKLOG);
    {
        let inner = sk.state().inner.lock();
        match inner.mode {
            Mode::Open if inner.owns_port => {}
            Mode::Listening => return Ok(()),
            // Not bound: there is no port to listen on.
            Mode::Open => return Err(err::destination_address_required()),
            _ => return Err(EINVAL),
        }
    }
    let q = KVec::from_elem(None, cap, GFP_KERNEL)?;
    let mut inner = sk.state().inner.lock();
    inner.acceptq = q;
    inner.aq_head = 0;
    inner.aq_len = 0;
    inner.mode = Mode::Listening;
    Ok(())
}

/// `accept()`: the next connection whose handshake has completed.
pub(crate) fn accept(sk: &Sock, nonblock: bool) -> Result<SockRef> {
    let guard = sk.lock();
    let mut timeo = sk.rcvtimeo(nonblock);
    let st = sk.state();
    let mut taken = None;
    guard.wait(&mut timeo, || {
        let mut inner = st.inner.lock();
        if inner.mode != Mode::Listening {
            return true;
        }
        let cap = inner.acceptq.len();
        if inner.aq_len == 0 || cap == 0 {
            return false;
        }
        let head = inner.aq_head;
        taken = inner.acceptq.get_mut(head).and_then(|s| s.take());
        inner.aq_head = (head + 1) % cap;
        inner.aq_len -= 1;
        true
    })?;
    taken.ok_or(EINVAL)
}

/// `connect()`.
pub(crate) fn connect(sk: &Sock, addr: &MrcAddr, nonblock: bool) -> Result {
    let guard = sk.lock();
    let net = sk.mrc_net();
    let local = {
        let inner = sk.state().inner.lock();
        match inner.mode {
            Mode::Open => {}
            Mode::Connecting => return Err(err::already()),
            Mode::Connected => return Err(err::is_connected()),
            Mode::Listening => return Err(EINVAL),
            Mode::Closed => {
                return Err(sk.take_error().unwrap_or_else(err::is_connected));
            }
        }
        inner.local
    };
    if addr.port == 0 || addr.ip.is_unspecified() {
        return Err(err::address_not_available());
    }
    if let Some(l) = &local {
        if core::mem::discriminant(&l.ip) != core::mem::discriminant(&addr.ip) {
            return Err(err::address_family_not_supported());
        }
    }
    let (route_src, mtu) = net.source_for(addr.ip)?;
    let src = match local {
        Some(l) if !l.ip.is_unspecified() => l.ip,
        _ => route_src,
    };
    let port = match local {
        Some(l) => l.port,
        None => {
            let p = net.bind_port(0, sk)?;
            let mut inner = sk.state().inner.lock();
            inner.owns_port = true;
            inner.local = Some(MrcAddr {
                ip: src,
                port: p,
                scope_id: 0,
            });
            p
        }
    };
    let path = PathAddr {
        local: src,
        remote: addr.ip,
        sport: mrc_sys::param_port(),
        dport: mrc_sys::param_port(),
        oif: 0,
    };
    let mut cfg = net.conn_config(
        window_of(sk.rcvbuf()),
        window_of(sk.sndbuf()),
        dgram_for(mtu),
    );
    sk.state().inner.lock().opts.apply(&mut cfg);
    let locals = local_endpoints(net, src);
    let n = locals.n;
    let mut sess = Session::new(net, cfg, path, locals, net.ev_per_plane(), true)?;
    let mut list = [Endpoint::v4([0; 4], 0, false); MAX_ENDPOINTS];
    for (d, e) in list.iter_mut().zip(locals.eps.iter().flatten()) {
        *d = *e;
    }
    sess.conn.set_ports(port, addr.port);
    let mut sid = mrc_sys::random_u64();
    let mut tries = 0;
    loop {
        match net.insert_session((sid, false), sk) {
            Ok(()) => break,
            Err(e) if e == EEXIST && tries < 8 => {
                tries += 1;
                sid = mrc_sys::random_u64();
            }
            Err(e) => return Err(e),
        }
    }
    let started = with_conn(sk, |inner, now| {
        inner.sid = Some((sid, false));
        inner.peer = Some(*addr);
        if let Some(l) = inner.local.as_mut() {
            l.ip = src;
        }
        inner.mode = Mode::Connecting;
        // The handshake's UDP address: the peer's MRC port, as the path's.
        sess.conn
            .set_handshake_peer(endpoint(addr.ip, mrc_sys::param_port(), false));
        let r = sess.conn.connect(
            now,
            sid,
            mrc_sys::random_u64(),
            list.get(..n).unwrap_or(&[]),
        );
        inner.sess = Some(sess);
        r
    });
    if let Err(e) = started {
        let mut inner = sk.state().inner.lock();
        inner.mode = Mode::Closed;
        return Err(e.into());
    }
    if nonblock {
        return Err(err::in_progress());
    }
    let mut timeo = sk.sndtimeo(false);
    let st = sk.state();
    guard.wait(&mut timeo, || st.inner.lock().mode != Mode::Connecting)?;
    if st.inner.lock().mode == Mode::Connected {
        Ok(())
    } else {
        Err(sk.take_error().unwrap_or_else(err::connection_reset))
    }
}

/// `getsockname()` / `getpeername()`.
pub(crate) fn getname(sk: &Sock, peer: bool) -> Result<MrcAddr> {
    let inner = sk.state().inner.lock();
    if peer {
        match inner.mode {
            Mode::Connected | Mode::Closed if inner.peer.is_some() => {
                inner.peer.ok_or_else(err::not_connected)
            }
            _ => Err(err::not_connected()),
        }
    } else {
        Ok(inner.local.unwrap_or(MrcAddr {
            ip: IpAddr::V4([0; 4]),
            port: 0,
            scope_id: 0,
        }))
    }
}

/// `poll()`: the events ready now.
pub(crate) fn poll(sk: &Sock) -> u32 {
    let inner = sk.state().inner.lock();
    let mut mask = 0;
    if sk.has_error() {
        mask |= poll_bits::ERR;
    }
    match inner.mode {
        Mode::Listening => {
            if inner.aq_len > 0 {
                mask |= poll_bits::IN;
            }
        }
        Mode::Open => mask |= poll_bits::OUT,
        Mode::Connecting => {}
        Mode::Connected | Mode::Closed => {
            // A stream is readable once `SO_RCVLOWAT` bytes are queued.
            let enough = !sk.is_stream()
                || inner.sess.as_deref().map_or(true, |s| {
                    s.conn.recv_unread() >= sk.rcvlowat(false, usize::MAX) as u64
                });
            if (sk.queue_len() > 0 && enough) || inner.peer_fin || inner.rd_shut {
                mask |= poll_bits::IN;
            }
            if inner.peer_fin || inner.rd_shut {
                mask |= poll_bits::RDHUP;
            }
            let closed = inner.mode == Mode::Closed;
            if closed || (inner.peer_fin && inner.wr_shut) {
                mask |= poll_bits::HUP;
            }
            // Writable when a write makes progress: a stream write waits
            // for more than a sliver of room (`Conn::stream_chunk`), so a
            // poll loop does not spin on EAGAIN.
            let stream = sk.is_stream();
            let room = inner.sess.as_deref().is_some_and(|s| {
                if stream {
                    s.conn.stream_chunk(usize::MAX) > 0
                } else {
                    s.conn.send_space() > 0
                }
            });
            if closed || inner.wr_shut || room {
                mask |= poll_bits::OUT;
            } else {
                // The lock is held: room made after this check finds it set.
                sk.set_nospace();
            }
        }
    }
    mask
}

/// `shutdown()`: `how` is `SHUT_RD` (0), `SHUT_WR` (1) or `SHUT_RDWR` (2).
pub(crate) fn shutdown(sk: &Sock, how: i32) -> Result {
    if !(0..=2).contains(&how) {
        return Err(EINVAL);
    }
    let _guard = sk.lock();
    let ok = with_conn(sk, |inner, now| {
        if !matches!(inner.mode, Mode::Connected | Mode::Connecting) {
            return false;
        }
        if how != 1 {
            inner.rd_shut = true;
        }
        if how != 0 && !inner.wr_shut {
            inner.wr_shut = true;
            if let Some(s) = inner.sess.as_deref_mut() {
                s.conn.close(now);
            }
        }
        true
    });
    if !ok {
        return Err(err::not_connected());
    }
    sk.state_change();
    Ok(())
}

/// Checks that `sk` may queue data: connected and not shut down for
/// writing. A closed connection reports its error, or `EPIPE`.
pub(crate) fn send_ready(sk: &Sock, flags: i32) -> Result {
    // Room left by the last run means that it found the socket connected
    // and open for sending: the writer need not wait for the lock.
    if sk.has_send_room() {
        return Ok(());
    }
    let inner = sk.state().inner.lock();
    match inner.mode {
        Mode::Connected => {}
        Mode::Closed => {
            if let Some(e) = sk.take_error() {
                return Err(e);
            }
            return Err(pipe(flags));
        }
        _ => return Err(err::not_connected()),
    }
    if inner.wr_shut {
        return Err(pipe(flags));
    }
    Ok(())
}

/// Queues `buf`, `len` bytes, as one message of the connection; `EAGAIN`
/// (and `buf` kept) when the send buffer has no room for it now.
///
/// While a run of the connection is under way (softirq's, sending what
/// acknowledgements let go), the message is handed to it instead, if the
/// connection has room for it (`Sock::hand_off`): the writer does not wait
/// for the connection's lock, which the run holds.
pub(crate) fn queue_message(sk: &Sock, buf: &mut Option<MsgBuf>, len: u32) -> Result<i32> {
    if let Some(b) = buf.take() {
        match sk.hand_off(b, len) {
            Ok(()) => return Ok(len as i32),
            Err(b) => *buf = Some(b),
        }
    }
    with_conn(sk, |inner, _| queue_one(inner, buf, len))
}

/// Queues `buf`, `len` bytes, as the connection's next message, under its
/// lock; `EAGAIN` (and `buf` kept) when the send buffer has no room.
fn queue_one(inner: &mut Inner, buf: &mut Option<MsgBuf>, len: u32) -> Result<i32> {
    let Some(s) = inner.sess.as_deref_mut() else {
        return Err(err::not_connected());
    };
    match s.conn.send_message(len) {
        Ok(id) => {
            // The core takes a new message as soon as acknowledgements make
            // room in the ring of `MSG_QUEUE` ids, and those may have come
            // in this very turn (packets the owner took from the backlog),
            // before `drive` freed their messages: the slot of `id` may
            // still hold the message `MSG_QUEUE` ids older, which `drive`
            // would then free in its place, and the new message would never
            // leave. Free them first.
            s.free_acked();
            if let Some(slot) = s.msgs.get_mut((id % MSG_QUEUE as u64) as usize) {
                *slot = buf.take();
            }
            inner.tx_bytes += u64::from(len);
            Ok(len as i32)
        }
        Err(mrc_conn::SendError::WouldBlock) => Err(EAGAIN),
        Err(mrc_conn::SendError::Shutdown) => Err(EPIPE),
        Err(e) => Err(e.into()),
    }
}

/// Queues the messages the writer handed to a run ([`queue_message`]), in
/// order. They fit the room the connection had (`Conn::send_room`); one it
/// refuses all the same, because it closed meanwhile, is dropped, as a
/// message it took just before it closed would have been.
fn queue_handed(inner: &mut Inner, handed: Handed) {
    let read = handed.read;
    if read.bytes > 0 || read.cost > 0 {
        take_read(inner, read);
    }
    for (buf, len) in handed.into_msgs() {
        let _ = queue_one(inner, &mut Some(buf), len);
    }
}

/// The reader read `read.bytes`, and packets of `read.cost` left the
/// window.
fn take_read(inner: &mut Inner, read: Read) {
    inner.rx_bytes += read.bytes;
    if let Some(s) = inner.sess.as_deref_mut() {
        s.conn.release_recv(read.bytes, read.cost);
    }
}

/// What the connection takes from its writer now, for messages handed
/// off meanwhile (`Sock::hand_off`): nothing unless the socket is open for
/// sending.
fn send_room(inner: &Inner) -> SendRoom {
    if inner.mode != Mode::Connected || inner.wr_shut || inner.closed {
        return SendRoom::default();
    }
    inner
        .sess
        .as_deref()
        .map_or_else(SendRoom::default, |s| s.conn.send_room())
}

/// How many of a stream write's `remaining` bytes to queue as the next
/// message now ([`Conn::stream_chunk`]); 0 to wait, `EPIPE` once the
/// connection can take no more.
pub(crate) fn stream_chunk(sk: &Sock, remaining: usize) -> Result<u32> {
    let inner = sk.state().inner.lock();
    if inner.mode != Mode::Connected || inner.wr_shut {
        return Err(EPIPE);
    }
    Ok(inner
        .sess
        .as_deref()
        .map_or(0, |s| s.conn.stream_chunk(remaining)))
}

/// `EPIPE`, with `SIGPIPE` unless `MSG_NOSIGNAL`.
pub(crate) fn pipe(flags: i32) -> Error {
    if flags & msg_flags::NOSIGNAL == 0 {
        mrc_sys::send_sigpipe();
    }
    EPIPE
}

/// Checks that `sk` has (or had) a connection to read from.
pub(crate) fn recv_ready(sk: &Sock) -> Result {
    // As in `send_ready`: room left by the last run means it found the
    // socket connected.
    if sk.has_send_room() {
        return Ok(());
    }
    let inner = sk.state().inner.lock();
    if matches!(inner.mode, Mode::Open | Mode::Listening | Mode::Connecting) {
        return Err(err::not_connected());
    }
    Ok(())
}

/// Whether nothing more will be queued for reading: the peer closed its
/// direction, the user shut reading down, or the connection is over.
pub(crate) fn read_closed(sk: &Sock) -> bool {
    let inner = sk.state().inner.lock();
    inner.peer_fin || inner.rd_shut || inner.mode == Mode::Closed
}

/// The application read `bytes` of received data, and to the end packets
/// that took `cost` of the window (`mrc_conn::window_cost` of each): they
/// leave the window. `head_off` is how much of the first queued packet is
/// now read (a stream's place; 0 when whole packets were taken).
///
/// Whole messages read while a run of the connection is under way are
/// handed to it (`Sock::hand_off_read`): the reader does not wait for the
/// lock that the run holds. A stream's place in its first packet is kept
/// under the lock, so a stream's reads are taken here.
pub(crate) fn consumed(sk: &Sock, bytes: u32, cost: u64, head_off: u32) {
    let read = Read {
        bytes: u64::from(bytes),
        cost,
    };
    if !sk.is_stream() && sk.hand_off_read(read) {
        return;
    }
    with_conn(sk, |inner, _| {
        inner.head_off = head_off;
        take_read(inner, read);
    });
}

/// The peer's address, once connected.
pub(crate) fn peer_addr(sk: &Sock) -> Option<MrcAddr> {
    sk.state().inner.lock().peer
}

/// Stream: bytes of the first queued packet already read.
pub(crate) fn head_offset(sk: &Sock) -> u32 {
    sk.state().inner.lock().head_off
}

/// Bytes received and not yet read, and bytes queued for sending and not
/// yet acknowledged.
pub(crate) fn queued_bytes(sk: &Sock) -> (u64, u64) {
    let inner = sk.state().inner.lock();
    inner
        .sess
        .as_deref()
        .map_or((0, 0), |s| (s.conn.recv_unread(), s.conn.send_buffered()))
}

/// Reads the marks of one queued packet: returns whether it ends a message;
/// records the message length from the first.
pub(crate) fn marks(skb: &SkBuff, first: &mut bool, msg_len: &mut u32) -> bool {
    let cb = skb.cb();
    let f = cb.get(CB_FLAGS).copied().unwrap_or(CB_LAST);
    if *first {
        *first = false;
        if let Some(b) = cb.get(CB_LEN..CB_LEN + 4) {
            let mut a = [0u8; 4];
            a.copy_from_slice(b);
            *msg_len = u32::from_ne_bytes(a);
        }
    }
    f & CB_LAST != 0
}

/// `close()`: a listener stops at once and aborts the connections nobody
/// accepted; a connection closes gracefully (FIN after every queued
/// message) in the background, or aborts with RST if unread data is left or
/// `SO_LINGER` is on with a zero timeout. With a non-zero linger timeout
/// close waits, up to that long, for the peer to acknowledge everything.
pub(crate) fn release(sk: &Sock) {
    let guard = sk.lock();
    let net = sk.mrc_net();
    let (mode, port) = {
        let inner = sk.state().inner.lock();
        (
            inner.mode,
            inner.local.filter(|_| inner.owns_port).map(|l| l.port),
        )
    };
    if let Some(port) = port {
        net.unbind_port(port, sk);
    }
    match mode {
        Mode::Listening => {
            let pending = {
                let mut inner = sk.state().inner.lock();
                inner.mode = Mode::Closed;
                inner.aq_len = 0;
                core::mem::take(&mut inner.acceptq)
            };
            guard.queue_purge();
            for child in pending.iter().flatten() {
                with_conn(child, |inner, now| {
                    inner.orphan = true;
                    if let Some(s) = inner.sess.as_deref_mut() {
                        s.conn.abort(now);
                    }
                });
            }
            drop(guard);
            destroy(sk);
            return;
        }
        Mode::Connected | Mode::Connecting => {
            let unread = sk.queue_len() > 0;
            let linger = sk.linger();
            // Finishing in the background takes an orphan slot; without one
            // the connection is reset at once, as TCP does past
            // tcp_max_orphans.
            let graceful = linger != Some(0);
            let slot = graceful && ORPHANS.take(mrc_sys::param_max_orphans());
            if graceful && !slot {
                net.count_orphan_refused();
            }
            with_conn(sk, |inner, now| {
                inner.wr_shut = true;
                inner.rd_shut = true;
                inner.closed = true;
                inner.orphan_slot = slot;
                if let Some(s) = inner.sess.as_deref_mut() {
                    if slot {
                        s.conn.release(now, unread);
                    } else {
                        s.conn.abort(now);
                    }
                }
            });
            if let Some(mut timeo) = linger.filter(|t| *t > 0) {
                let st = sk.state();
                let _ = guard.wait(&mut timeo, || {
                    let inner = st.inner.lock();
                    inner.mode == Mode::Closed
                        || inner.sess.as_deref().map_or(true, |s| s.conn.all_acked())
                });
            }
        }
        Mode::Open | Mode::Closed => {}
    }
    let over = {
        let mut inner = sk.state().inner.lock();
        inner.orphan = true;
        inner.mode != Mode::Connected && inner.mode != Mode::Connecting
    };
    // Nobody reads the socket any more: what it still holds is freed now,
    // as TCP frees a closed socket's unread data.
    guard.queue_purge();
    drop(guard);
    if over {
        destroy(sk);
    }
}

/// Tears down every connection of a namespace that is going away.
pub(crate) fn abort_for_exit(sk: &Sock) {
    with_conn(sk, |inner, now| {
        if let Some(s) = inner.sess.as_deref_mut() {
            s.conn.abort(now);
        }
    });
    destroy(sk);
}
