// SPDX-License-Identifier: GPL-2.0
//! Connection state machine and reliability core.
//!
//! A [`Conn`] is one MRC connection seen from one end: handshake, message segmentation,
//! cumulative and selective acknowledgement, loss detection and retransmission, delayed
//! acknowledgements, the receive window and orderly (FIN) or abortive (RST) close. Like the rest
//! of the sans-IO core it depends on `core` only: nothing here locks, reads a clock, uses
//! floating point or can panic, and the only memory it allocates is its path table's chunks
//! (see "Memory" in `mrc_path`). The glue drives it with four kinds of calls:
//!
//! - input: [`Conn::handle_packet`] with a packet decoded by [`mrc_proto::decode`], and the
//!   application calls [`Conn::connect`], [`Conn::accept`], [`Conn::send_message`],
//!   [`Conn::release_recv`], [`Conn::close`], [`Conn::abort`];
//! - output: [`Conn::poll_transmit`] until it returns `None`, sending each datagram on the
//!   path it names;
//! - events: [`Conn::poll_event`] until it returns `None` (connected, a complete message to
//!   deliver, the peer's FIN, closed);
//! - timers: arm one timer at [`Conn::next_timeout`] and call [`Conn::on_timeout`] when it
//!   fires.
//!
//! After any input or timer the glue drains events, then transmissions, then re-arms the timer.
//!
//! # Ports
//!
//! A socket address is an IP address and a 16-bit MRC port. The connecting end names both
//! ports with [`Conn::set_ports`] before [`Conn::connect`]; the accepting end takes them from
//! the SYN in [`Conn::accept`]. Every SYN and SYN_ACK carries the sender's port as `src_port`
//! and the receiver's as `dst_port`; a SYN_ACK (or repeated SYN) whose ports are not this
//! connection's, seen from the other end, is dropped as [`DropReason::Invalid`].
//!
//! # Direction
//!
//! Both directions of a connection share one session id. So that the two ends of one
//! connection can live on the same host (a connection to a local address) and still be told
//! apart, every packet carries [`Flags::PASSIVE`] iff it is sent by the end that accepted the
//! connection: a connection started with [`Conn::accept`] sets it on everything it sends
//! ([`Conn::is_passive`]), one started with [`Conn::connect`] never does. The glue
//! demultiplexes by session id and this bit, and [`Conn::handle_packet`] drops a packet whose
//! bit says it was sent by an end of this connection's own role as [`DropReason::Invalid`];
//! [`Conn::accept`] likewise refuses a SYN that carries the bit. [`reply_rst`] answers with the
//! opposite direction of the packet it answers.
//!
//! # Blind attacks
//!
//! The session id is 64 random bits, but every packet carries it, so whoever saw one packet
//! knows it. Such an attacker, who does not see the connection's traffic, must still not be
//! able to close, stall or corrupt it; so packets are checked as TCP checks its segments:
//!
//! - An RST is accepted in SynSent only if its ack is this end's initial sequence number (it
//!   answers the SYN), later only if its sequence number is exactly the next one expected.
//!   One within the receive window but not at its start gets a challenge ACK, which a peer
//!   that really aborted answers with an RST carrying the right number; challenge ACKs are
//!   limited to four per 100 ms (RFC 5961, 3). Other RSTs are dropped as
//!   [`DropReason::BadRst`].
//! - A cumulative ack beyond `snd_nxt` or more than [`WINDOW`] below `snd_una` is invalid and
//!   nothing of its SACK or window is taken (RFC 5961, 5). DATA and FIN are checked against
//!   the receive window first: the ack of a packet beyond the window, or of a duplicate more
//!   than a window old, is ignored, and a packet within the window whose ack is invalid is
//!   dropped unstored and answered with a challenge ACK.
//! - A PROBE's nonce is SipHash-2-4 of the session id and a counter under the secret
//!   [`ConnConfig::nonce_key`]. A PROBE_ACK counts only if it arrives on the probed path
//!   and echoes the nonce of one of that path's latest two unanswered probes
//!   ([`DropReason::BadProbe`] otherwise), and the RTT it gives is timed from when this end
//!   sent the probe, not from the timestamp it echoes.
//! - The endpoints the peer announces in its SYN or SYN_ACK are kept only if they are
//!   routable unicast addresses, loopback and link-local ones only if the handshake itself
//!   came from such an address ([`Conn::set_handshake_peer`],
//!   [`mrc_proto::screen_peer_endpoint`]).
//!
//! # Anti-amplification
//!
//! A SYN's source address may be forged, and the accepting end answers it there: without a
//! limit, one small spoofed SYN would make it send a SYN_ACK and every retransmission of it
//! (each larger than the SYN when this end announces more endpoints) to whatever address the
//! SYN named. So, as QUIC does before it has validated a client's address (RFC 9000, 8.1),
//! the accepting end sends at most [`AMPLIFICATION_FACTOR`] (3) times the bytes it has
//! received in the peer's SYNs until the handshake completes: the first SYN and every repeated
//! one count as received, every SYN_ACK (first, retransmitted or challenge) and an RST as
//! sent. A packet that would go beyond is not sent ([`ConnStats::amp_limited`]); the
//! handshake timer runs on, so a SYN nobody repeats fails with [`ConnError::TimedOut`] after
//! [`ConnConfig::syn_retries`] as an unanswered handshake does, with at most three times its
//! bytes sent towards its source. A repeated SYN raises the limit and is answered at once, so
//! an honest client whose SYN_ACKs were lost still completes: its retransmitted SYN brings
//! the SYN_ACK it waits for. A SYN_ACK more than three times the size of the SYN (this end
//! announces many more endpoints than the peer) waits for the SYNs that make room for it.
//! The peer's ACK, DATA or PROBE echoes this end's initial sequence number, which went only
//! to the SYN's source, so it proves that the peer receives there, and the limit ends. The
//! connecting end chose the address it sends to and has no such limit.
//!
//! # Retry
//!
//! A listener whose half-open connections fill a share of its backlog answers a SYN without
//! a token with a RETRY and keeps no state for it (QUIC's Retry, RFC 9000, 8.1.2; see "Retry"
//! in [`mrc_proto`]); only a SYN that echoes a valid token, which proves that its sender
//! receives at its source address, gets a connection. The connecting end takes a RETRY in
//! SynSent only if its ack is this end's initial sequence number (it answers this SYN, which
//! went only to the listener), and at most [`MAX_RETRIES`] of them: it sends the SYN again at
//! once, with the same session id, initial sequence number, ports and endpoints and the token
//! as its ack, and so every later retransmission of it. The SYN's retransmission timer and
//! the handshake's deadline run on: a RETRY does not give the handshake more time. Any other
//! RETRY is dropped as [`DropReason::BadRetry`].
//!
//! # Path validation
//!
//! The endpoints the peer announces are screened (above), but a peer could still announce
//! the address of a third party: paths there would carry this end's data with a full window.
//! So, as QUIC validates a new path before it sends there (RFC 9000, 8.2 and 9), a path the
//! glue opens to an announced endpoint with [`Conn::add_peer_path`] carries no DATA until its
//! address is proven: it is the handshake's address ([`Conn::set_handshake_peer`]; address
//! and UDP port), or a probe on a path to it was answered with the nonce of that path's
//! probe, which only a receiver at that address saw. Until then the path is Suspect with
//! reason `Unvalidated`, out of the scheduler (no new data, no retransmission, no copy), and
//! probed (Failed with that reason if its probes go unanswered, and probed as Failed paths
//! are). Once an answer proves an endpoint, every path to it becomes Active as a new path
//! does. A forged or misplaced answer ([`DropReason::BadProbe`]) proves nothing.
//!
//! Nothing but probes, answers to the peer's probes on that path (the peer validates its own
//! paths with them) and ACKs of the DATA that came by it go to an address not proven, and
//! they take at most three times the bytes the peer has sent this connection (see "Path
//! validation" in `mrc_path`): whatever a peer announces, it gets at most three bytes sent
//! to others for each byte it sends. Other control packets go by a validated path. Paths the
//! application adds itself ([`Conn::paths_mut`]) go to addresses it chose, as the one it
//! connected to, and need no validation.
//!
//! The peer's probes can overtake its handshake ACK on another path: in SynReceived a PROBE
//! that acknowledges this end's initial sequence number completes the handshake as an ACK
//! does.
//!
//! # Message bytes stay in the glue
//!
//! The core never sees message contents. [`Conn::send_message`] takes a length and returns a
//! message id; each DATA packet [`Conn::poll_transmit`] plans names `(msg_id, offset, len)`,
//! and the glue copies those bytes behind the header the core wrote, then seals the packet with
//! [`mrc_proto::seal`] (or [`finish_data`]). The glue frees a message once
//! [`Conn::acked_msgs`] has passed its id. On receive, [`Conn::handle_packet`] answers
//! [`Input::Store`] for every new DATA packet: the glue keeps that payload under its sequence
//! number until an [`Event::Message`] names the contiguous range of sequence numbers that make
//! up a complete message, which the glue concatenates and queues for the application.
//!
//! # Sequence space and scoreboard
//!
//! Each direction has its own sequence space, starting at the initial sequence number the
//! sender chose (supplied by the glue, which draws randomness; kept below [`SEQ_LIMIT`] so that
//! no sequence arithmetic can overflow). Every DATA packet and the FIN take one sequence
//! number; retransmissions keep theirs. The sender keeps a ring of [`WINDOW`] slots, one per
//! sequence number between the cumulative ack and the next new sequence number, with the
//! message fragment, path, send time and state (in flight, selectively acked, lost) of each.
//! The window equals the number of packets one SACK bitmap can describe, so the receiver can
//! always report everything it holds.
//!
//! # Loss detection
//!
//! Loss is detected per path by time, RACK-style: a packet is lost once a packet sent later on
//! the same path has been acknowledged and the packet is older than the path's smoothed RTT
//! plus a reorder window (a quarter of the minimum RTT, at least
//! [`ConnConfig::reorder_min_ns`]). A loss that proves needless (the receiver reports the
//! retransmission as a duplicate in a D-SACK, or the original is acknowledged before the
//! retransmission leaves) doubles that path's window, up to its smoothed RTT; the window
//! halves again after each 8 s without one (RFC 8985, 6.2). A retransmission timeout (RFC
//! 6298 estimators kept per path by `mrc_path`, at least 5/4 of the path's largest recent RTT
//! sample, exponential backoff capped at the largest RTO) is the last resort. The connection
//! fails with [`ConnError::TimedOut`] only when it has waited [`ConnConfig::user_timeout_ns`]
//! without progress: data outstanding and nothing newly acknowledged, or no Active path at
//! all. Counting retransmission timeouts instead would kill a connection whose peer is merely
//! slow to answer or whose paths are down for a moment. A path that the failure detector takes
//! out of Active gives up its packets in flight as lost at once. Lost packets are retransmitted
//! on another healthy path chosen by [`PathTable::pick_retransmit_path`].
//!
//! # Hedging
//!
//! Per-path RACK cannot see a path that went dark: nothing later on it is ever acknowledged,
//! so its packets wait for the failure detector, a probe timeout (at least 5/4 of the path's
//! RTT peak of the last second or two) after it was last heard, while everything sent behind
//! them on other paths is held up at the receiver. So a packet that a later packet on another
//! path has overtaken, and that is overdue on its own path by the path's srtt + 4 * rttvar
//! (or the reorder window, or 5/4 of the path's RTT peak of the last 125 to 250 ms, whichever
//! is longest), gets a copy on another path while the original stays in flight. Nothing is
//! declared lost: the path's window, congestion controller and failure detector see nothing
//! (declaring such packets lost cut windows and made paths Suspect on hosts whose CPUs lag
//! one another). Whichever copy arrives first is delivered. Its acknowledgement credits the
//! original's path only if it came back by that path, so that a dead path is not kept alive
//! by its copies. A D-SACK shows a copy was needless: it times the original and doubles the
//! path's wait, which halves again every 8 s, and doubles once the wait of the plane's other
//! paths, which share its queues (see `Conn::widen`).
//!
//! # Acknowledgements
//!
//! The receiver acknowledges at once what the sender's loss recovery waits for: a hole that
//! opens, the packet that fills the hole at the cumulative ack, a duplicate (with a D-SACK),
//! the FIN, a CE mark. Other packets count towards [`ConnConfig::ack_every`]: in order they
//! wait up to [`ConnConfig::delack_ns`], so that a reply carries the acknowledgement, behind
//! a hole a 64th of the RTT, so that packets sprayed over many paths that arrive together
//! share one ACK (see `Conn::schedule_ack`).
//!
//! # Flow control
//!
//! The receiver advertises its free buffer space in bytes (in SYN, SYN_ACK and every ACK). The
//! sender keeps the packets it has sent and not yet seen acknowledged within that window;
//! when the window is closed and nothing is outstanding it sends one packet per backed-off RTO
//! (a window probe), which the receiver answers with its current window.
//!
//! A packet takes its payload's length of the window, and at least [`MIN_WINDOW_COST`]
//! ([`window_cost`]), at both ends alike. A host holds a received packet at its real size,
//! payload plus a buffer's overhead of about a kilobyte, and charges that to the socket's
//! receive memory, of which the window is half (see the glue). Counted by payload alone, a
//! window would let a peer send hundreds of one-byte or empty messages for each one the
//! receiver has memory for, only to see them dropped and sent again; counted this way, an
//! honest sender of small messages is held back by the window before the receiver's memory
//! runs out, and full-sized packets cost what they always did.
//!
//! # Close and orphans
//!
//! [`Conn::close`] closes this end's direction (`shutdown(SHUT_WR)`): a FIN follows the
//! queued messages, and the connection goes to FinWait (or Closing, if the peer's FIN came
//! first) and keeps receiving. Once both FINs are acknowledged, the end that closed first
//! lingers in TimeWait ([`ConnConfig::time_wait_ns`], at least two RTOs) to acknowledge a
//! retransmitted FIN again, then ends without error; the other ends at once.
//!
//! [`Conn::release`] is the application letting go of the connection (`close()` of the
//! socket): it closes as above, or aborts if received data will never be read, and makes the
//! connection an orphan ([`Conn::is_orphan`]). An end that still has its application may wait
//! for the peer for ever, as TCP's FIN_WAIT_2 does after a half close: the peer may still have
//! data to send. An orphan is bounded instead, like TCP's orphans by `tcp_fin_timeout`:
//!
//! - Once its FIN is sent, it waits for the peer's FIN, and for the acknowledgement of its
//!   own, at most [`ConnConfig::fin_timeout_ns`] after the latest of the FIN's first
//!   transmission, the FIN's acknowledgement and the release. The acknowledgement restarts
//!   the wait, as entering FIN_WAIT_2 starts TCP's timer, so a peer that acknowledges the FIN
//!   late still gets the whole timeout to send its own.
//! - Before that, while the peer's window holds queued messages back (persist), it waits at
//!   most `fin_timeout_ns` after the later of the window closing and the release: a peer
//!   that answers every window probe, or accepts one probe at a time, but never opens its
//!   window would otherwise keep the orphan for as long as the messages take to trickle
//!   out. The clock restarts only when a packet goes out within the window.
//!
//! When that time is up, the orphan sends an RST, so the peer learns at once, and fails with
//! [`ConnError::TimedOut`], counted in [`ConnStats::orphan_timeouts`]. Otherwise an orphan
//! fails like any connection: with [`ConnError::TimedOut`] after
//! [`ConnConfig::user_timeout_ns`] without progress (data or FIN outstanding and nothing newly
//! acknowledged, or no Active path), or with the peer's RST.
//!
//! # Size
//!
//! A `Conn` is about 66 KiB on a 64-bit target (the send ring 40 KiB, the slots of its first
//! 10 paths 4 KiB), plus about 4 KiB for each 10 paths beyond, whose slots its path table
//! allocates a chunk at a time as paths are added (see "Memory" in [`crate::mrc_path`]). The kernel keeps it in a heap-allocated connection,
//! which it initialises with [`Conn::init_in_place`] since [`Conn::new`] returns the whole
//! structure by value and kernel stacks are 16 KiB. Apart from `Conn::new`, no function keeps
//! more than a few hundred bytes on its stack.

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use super::mrc_limit::TokenBucket;
use super::mrc_path::{
    HeldBack, PathConfig, PathIds, PathIdx, PathSet, PathState, PathTable, UnknownProbe,
};
use super::mrc_proto::{
    self, Body, EncodeError, Endpoint, Flags, Handshake, Header, Packet, PacketType, Probe, Sack,
    ENDPOINT_LEN, HANDSHAKE_FIXED_LEN, HEADER_LEN, MAX_CONTROL_PACKET_LEN, MAX_ENDPOINTS,
    MAX_SACK_BITS, MAX_SACK_BYTES, SACK_FIXED_LEN,
};

/// Packets in flight one connection tracks per direction: what one SACK bitmap describes.
///
/// The receiver keeps payloads from the first packet of the message it is reassembling
/// (`msg_first`, at most the cumulative ack) and accepts packets below `msg_first + WINDOW`
/// only, so the glue can hold payloads in a ring of `WINDOW` slots indexed by `seq % WINDOW`.
/// The sender, which knows where the message at its cumulative ack began, sends no further.
pub const WINDOW: usize = MAX_SACK_BITS;

/// [`WINDOW`] as a sequence number distance.
const WINDOW_SEQ: u64 = WINDOW as u64;

/// Sequence numbers are kept below this bound, so no sequence arithmetic can overflow.
pub const SEQ_LIMIT: u64 = 1 << 62;

/// Mask applied to initial sequence numbers to keep them below [`SEQ_LIMIT`] / 2.
const ISN_MASK: u64 = (1 << 61) - 1;

/// Messages accepted by [`Conn::send_message`] and not yet fully segmented.
pub const MSG_QUEUE: usize = 256;

/// Least receive window a DATA packet takes, whatever its payload: about what a received
/// packet's buffer costs the host beyond its payload, so that a window half the size of the
/// receive memory (the payload's share) covers small packets too. See "Flow control".
pub const MIN_WINDOW_COST: u32 = 1024;

/// The receive window a DATA packet of `len` payload bytes takes, at both ends.
pub fn window_cost(len: u32) -> u64 {
    u64::from(len.max(MIN_WINDOW_COST))
}

/// Largest message a byte stream is cut into ([`Conn::stream_chunk`]).
pub const STREAM_MSG: u32 = 64 << 10;

/// Events waiting for [`Conn::poll_event`].
pub const EVENT_QUEUE: usize = 256;

/// Events kept free for state changes, so a queue full of messages cannot hide them.
const EVENT_RESERVE: usize = 4;

/// PROBE_ACKs waiting to be sent; more probes than this at once are dropped unanswered.
const PROBE_REPLY_QUEUE: usize = 16;

/// Challenge ACKs (see [`Conn::handle_packet`]) one connection sends at most per
/// [`CHALLENGE_ACK_INTERVAL_NS`]: enough for the peer's genuine RST to be answered even if a
/// challenge is lost, few enough that forged packets cannot make the connection flood the
/// network with ACKs.
const CHALLENGE_ACK_LIMIT: u8 = 4;

/// Interval over which [`CHALLENGE_ACK_LIMIT`] applies.
const CHALLENGE_ACK_INTERVAL_NS: u64 = 100_000_000;

/// ACKs a connection sends at most per second in answer to DATA packets it cannot take
/// (beyond its receive window, or beyond its buffer): see [`Conn::answer_refused`].
const REFUSAL_ACK_RATE: u32 = 50;

/// Such answers that may go out back to back.
const REFUSAL_ACK_BURST: u32 = 8;

/// Until the handshake completes, the accepting end sends at most this many times the bytes
/// it received in the peer's SYNs (QUIC's anti-amplification limit, RFC 9000, 8.1): see
/// "Anti-amplification" in the module documentation.
pub const AMPLIFICATION_FACTOR: u64 = 3;

/// RETRYs the connecting end takes per [`Conn::connect`]: the first, and one more should the
/// token have expired before a lost SYN was repeated (see "Retry" in the module
/// documentation).
pub const MAX_RETRIES: u8 = 2;

/// While a packet is missing, an acknowledgement waits at most the minimum RTT divided by
/// this (see [`Conn::schedule_ack`]).
const GAP_ACK_RTT_DIV: u64 = 64;

/// Recent RACK loss declarations and hedges remembered to match D-SACKs against.
///
/// A D-SACK comes back a round trip after the resend or copy went out, so the ring must hold
/// what a burst of them sends in a round trip. With 32, a path whose packets all got copies
/// (its host's CPU stalled) overwrote every entry before its D-SACK came back: no copy proved
/// needless, the path's hedge wait never widened, and it took no RTT sample (the answers to
/// hedged packets time nothing), so the copies went on, 7028 in one of `cpu_sim`'s
/// two-CPU transfers (one in 96). With 128, at most 163 in those 96.
const RACK_LOST_RING: usize = 128;

/// Marks a hedge, rather than a RACK loss, in [`Conn::rack_lost`].
const HEDGE_MARK: u16 = 0x8000;

/// Largest multiple of the base reorder window a path's window grows to.
const REORDER_MULT_MAX: u8 = 64;

/// A widened reorder window halves after each such period without a needless retransmission:
/// long enough to outlast the bursts of reordering a busy host causes, as RFC 8985 keeps its
/// multiplier for 16 recoveries.
const REORDER_DECAY_NS: u64 = 8_000_000_000;

/// Largest ACK on the wire: what one takes of the validation credit at most.
const MAX_ACK_LEN: u64 = (HEADER_LEN + SACK_FIXED_LEN + MAX_SACK_BYTES) as u64;

/// [`ConnPath`]'s `remote` of a path that leads to none of the peer's announced endpoints.
const NO_REMOTE: u8 = u8::MAX;

/// Smallest buffer [`Conn::poll_transmit`] accepts: room for any control packet.
pub const MIN_TX_BUF: usize = MAX_CONTROL_PACKET_LEN;

/// Largest DATA payload; keeps a datagram below the UDP limit.
const MAX_PAYLOAD: u32 = 65_000;

/// Largest backoff exponent for RTO and handshake timers.
const MAX_BACKOFF_SHIFT: u8 = 30;

/// Tunables of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnConfig {
    /// Largest datagram (UDP payload) in bytes, header included; DATA payloads are this minus
    /// [`HEADER_LEN`].
    pub mtu: u32,
    /// Receive buffer in bytes: the window this end advertises. Should be at least the largest
    /// message, or large messages trickle in one window probe at a time.
    pub rcvbuf: u32,
    /// Send buffer in bytes: message bytes accepted and not yet acknowledged.
    pub sndbuf: u32,
    /// Largest message in bytes, in both directions.
    pub max_msg: u32,
    /// Longest an acknowledgement is delayed. A request's answer sent within it carries the
    /// acknowledgement, and no ACK packet goes out on its own; bulk data is acknowledged
    /// every [`ConnConfig::ack_every`] packets regardless.
    pub delack_ns: u64,
    /// DATA packets received that force an acknowledgement (at least 1).
    pub ack_every: u8,
    /// Floor of the RACK reorder window.
    pub reorder_min_ns: u64,
    /// How long the connection waits without progress (data outstanding and nothing newly
    /// acknowledged, or no Active path) before it fails with [`ConnError::TimedOut`].
    pub user_timeout_ns: u64,
    /// First SYN / SYN_ACK retransmission timeout (doubled at each retry).
    pub syn_rto_ns: u64,
    /// SYN / SYN_ACK retransmissions before the handshake fails.
    pub syn_retries: u8,
    /// How long TimeWait lasts at least (see [`Conn::time_wait`]).
    pub time_wait_ns: u64,
    /// How long an orphan (a connection the application has let go of, see
    /// [`Conn::release`]) waits for the peer to finish, like `tcp_fin_timeout`: once its FIN
    /// is sent, at most this long after the FIN was sent, acknowledged or the connection
    /// orphaned, whichever is latest, for the peer's FIN (or the acknowledgement of its own);
    /// before that, at most this long after the peer's window closed or the connection was
    /// orphaned, whichever is later, for the window to reopen. It then resets the
    /// connection and fails with [`ConnError::TimedOut`] (see "Close and orphans" in the
    /// module documentation). A connection the application still holds never ends this way.
    pub fin_timeout_ns: u64,
    /// Path table, failure detector and congestion control tunables.
    pub path: PathConfig,
    /// Secret key of the PROBE nonces: each probe's nonce is SipHash-2-4 under this key of the
    /// session id and a per-connection counter ([`mrc_proto::keyed_nonce`]), so that only the
    /// peer, which sees the probe, can answer it. The glue fills it with random bytes for each
    /// connection; with the default (zero) key the nonces are predictable.
    pub nonce_key: [u64; 2],
}

impl ConnConfig {
    /// The defaults: 1400-byte datagrams, 4 MiB buffers, 1 MiB messages, 1 ms delayed ACKs.
    pub const DEFAULT: ConnConfig = ConnConfig {
        mtu: 1400,
        rcvbuf: 4 << 20,
        sndbuf: 4 << 20,
        max_msg: 1 << 20,
        // An application's reply on a loaded host takes a few hundred microseconds. TCP
        // waits at least 40 ms; this stays at the probe timeout's default floor, so that
        // a lone packet's acknowledgement comes before its path could count as silent.
        delack_ns: PathConfig::DEFAULT.probe_timeout_min_ns,
        ack_every: 2,
        reorder_min_ns: 50_000,
        user_timeout_ns: 30_000_000_000,
        syn_rto_ns: 100_000_000,
        syn_retries: 6,
        time_wait_ns: 1_000_000_000,
        fin_timeout_ns: 60_000_000_000,
        path: PathConfig::DEFAULT,
        nonce_key: [0; 2],
    };

    /// Returns the largest DATA payload in bytes (at least 1).
    pub fn max_payload(&self) -> u32 {
        let hdr = HEADER_LEN as u32;
        self.mtu.saturating_sub(hdr).clamp(1, MAX_PAYLOAD)
    }
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig::DEFAULT
    }
}

/// Why a connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnError {
    /// The peer stopped answering: handshake or data retransmissions exhausted (`ETIMEDOUT`).
    TimedOut,
    /// The peer aborted the connection with RST (`ECONNRESET`).
    Reset,
    /// The peer answered the SYN with RST: nobody listens (`ECONNREFUSED`).
    Refused,
    /// The peer broke the protocol, for example with a message above the size limit (`EPROTO`).
    Protocol,
}

/// State of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// Fresh: neither [`Conn::connect`] nor [`Conn::accept`] has been called.
    #[default]
    Idle,
    /// SYN sent, waiting for SYN_ACK.
    SynSent,
    /// SYN received and SYN_ACK sent, waiting for the peer's first ACK or DATA.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// This end has closed (FIN queued or sent); the peer may still send.
    FinWait,
    /// The peer has closed; this end may still send.
    CloseWait,
    /// Both ends have closed; this end's FIN is not yet acknowledged.
    Closing,
    /// Both FINs are acknowledged; lingers to re-acknowledge a retransmitted FIN.
    TimeWait,
    /// Finished: `None` after an orderly close or a local abort, else the error.
    Closed(Option<ConnError>),
}

impl State {
    /// Returns a stable lower-case name, such as `"syn_sent"`.
    pub const fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::SynSent => "syn_sent",
            State::SynReceived => "syn_received",
            State::Established => "established",
            State::FinWait => "fin_wait",
            State::CloseWait => "close_wait",
            State::Closing => "closing",
            State::TimeWait => "time_wait",
            State::Closed(_) => "closed",
        }
    }

    /// Returns whether the handshake has completed and the connection is not yet finished.
    pub const fn is_synchronized(self) -> bool {
        matches!(
            self,
            State::Established | State::FinWait | State::CloseWait | State::Closing
        )
    }
}

/// Something the glue must act on, returned by [`Conn::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed; the connection is Established.
    Connected,
    /// A complete message: the payloads of sequence numbers `first_seq..=last_seq`, in order,
    /// `len` bytes in all. The glue delivers it and later calls [`Conn::release_recv`].
    Message {
        /// Sequence number of the first packet.
        first_seq: u64,
        /// Sequence number of the last packet.
        last_seq: u64,
        /// Message length in bytes.
        len: u32,
        /// Receive window its packets take ([`window_cost`] of each), which
        /// [`Conn::release_recv`] gives back once the application has read them.
        cost: u64,
    },
    /// The peer closed its direction: every message it sent has been delivered (end of file).
    PeerFin,
    /// The connection is finished; see [`State::Closed`].
    Closed(Option<ConnError>),
}

/// What [`Conn::handle_packet`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Processed; nothing to keep.
    Consumed,
    /// New DATA: the glue keeps the payload under `seq` until an [`Event::Message`] names it.
    Store {
        /// Sequence number of the packet.
        seq: u64,
    },
    /// Ignored; the reason is for counters.
    Dropped(DropReason),
}

/// Why [`Conn::handle_packet`] ignored a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The session id does not match this connection.
    WrongSession,
    /// The packet makes no sense in the current state.
    BadState,
    /// DATA or FIN already received.
    Duplicate,
    /// DATA beyond the receive window, or beyond the peer's FIN.
    OutOfWindow,
    /// DATA while the receive buffer is full.
    NoBuffer,
    /// An acknowledgement of data never sent or far older than the oldest data outstanding,
    /// a handshake with the wrong numbers or ports, or a packet whose direction
    /// ([`Flags::PASSIVE`]) is this end's own.
    Invalid,
    /// An RST whose numbers do not prove that it comes from the peer (see
    /// [`Conn::handle_packet`]); one within the receive window is answered with a challenge
    /// ACK.
    BadRst,
    /// A PROBE_ACK that answers no probe this end sent on the path it arrived on and still
    /// waits for.
    BadProbe,
    /// A RETRY that does not echo this end's initial sequence number, that came after
    /// [`MAX_RETRIES`] others, or outside SynSent.
    BadRetry,
}

impl DropReason {
    /// Returns a stable lower-case name, such as `"no_buffer"`, for counters.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::WrongSession => "wrong_session",
            DropReason::BadState => "bad_state",
            DropReason::Duplicate => "duplicate",
            DropReason::OutOfWindow => "out_of_window",
            DropReason::NoBuffer => "no_buffer",
            DropReason::Invalid => "invalid",
            DropReason::BadRst => "bad_rst",
            DropReason::BadProbe => "bad_probe",
            DropReason::BadRetry => "bad_retry",
        }
    }
}

/// A datagram [`Conn::poll_transmit`] wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Path to send it on (index into [`Conn::paths`]).
    pub path: PathIdx,
    /// Datagram length: `buf[..len]` is the packet once complete.
    pub len: usize,
    /// For DATA, the message bytes the glue must put behind the header; `None` means
    /// `buf[..len]` is already complete and sealed.
    pub data: Option<DataRef>,
    /// Type of the packet.
    pub kind: PacketType,
}

/// The payload of a planned DATA packet: bytes `offset..offset + len` of message `msg_id`.
///
/// The header is in `buf[..HEADER_LEN]` with `payload_len` set and a zero checksum; the glue
/// copies the bytes to `buf[HEADER_LEN..]` and calls [`mrc_proto::seal`] on the whole packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRef {
    /// Sequence number of the packet.
    pub seq: u64,
    /// Message id returned by [`Conn::send_message`].
    pub msg_id: u64,
    /// Offset of the payload in the message.
    pub offset: u32,
    /// Payload length in bytes.
    pub len: u32,
    /// Whether this is a retransmission.
    pub retransmit: bool,
}

/// Why [`Conn::send_message`] refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendError {
    /// The connection is not (yet) established (`ENOTCONN`).
    NotConnected,
    /// This end has closed its direction (`EPIPE`).
    Shutdown,
    /// The message is larger than [`ConnConfig::max_msg`] (`EMSGSIZE`).
    MsgSize,
    /// The send buffer or message queue is full; retry later (`EAGAIN`).
    WouldBlock,
    /// The connection failed with this error.
    Failed(ConnError),
}

/// What [`Conn::send_message`] takes now without refusing: any messages, up to `msgs` of
/// them, of up to `max_msg` bytes each and `bytes` in all ([`Conn::send_room`]).
///
/// Nothing but the writer's messages shrinks it (acknowledgements grow it), so a writer
/// that counts what it queued since it read the room may queue within the rest without
/// asking the connection again; a connection that closes meanwhile refuses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendRoom {
    /// Messages.
    pub msgs: u32,
    /// Bytes of all of them.
    pub bytes: u64,
    /// Bytes of each.
    pub max_msg: u32,
}

impl SendRoom {
    /// Takes a message of `len` bytes out of the room, if it fits.
    pub fn take(&mut self, len: u32) -> bool {
        if self.msgs == 0 || len > self.max_msg || u64::from(len) > self.bytes {
            return false;
        }
        self.msgs -= 1;
        self.bytes -= u64::from(len);
        true
    }
}

/// Why [`Conn::remove_path`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovePathError {
    /// No path has this path id (`ENOENT`).
    NotFound,
    /// It is the connection's only path (`EBUSY`).
    LastPath,
}

/// Why [`Conn::connect`] or [`Conn::accept`] refused to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenError {
    /// The connection was already started (`EISCONN`).
    AlreadyStarted,
    /// The path table is empty: the glue must add a path first (`EINVAL`).
    NoPath,
    /// [`Conn::accept`] was given a packet that is not a SYN (or a SYN carrying
    /// [`Flags::PASSIVE`]), or too many endpoints (`EINVAL`).
    Invalid,
}

/// What held back the sender's new data, as [`Conn::send_times`] accounts it.
///
/// The sender is in one of these from the first time it looks for new data to send: the
/// reason the last look stopped, or [`SendLimit::Sending`] when it found some.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum SendLimit {
    /// No message queued: the application is the limit.
    #[default]
    App = 0,
    /// The peer's receive window is full: the receiving application is the limit.
    Rwnd,
    /// The send ring is full: [`WINDOW`] packets between the oldest unacknowledged one and
    /// the next.
    Ring,
    /// Every path that may carry data has a full congestion window.
    Cwnd,
    /// A path has window room but its pacing holds the packet back.
    Pacing,
    /// A path could send, but the packet waits for a path that delivers it sooner.
    Sched,
    /// No path may carry data (none Active).
    NoPath,
    /// New data was going out when the sender last looked: it stopped because the glue
    /// sends a bounded number of packets per pass, so the CPU is the limit.
    Sending,
}

/// Number of [`SendLimit`] values.
pub const SEND_LIMITS: usize = 8;

impl SendLimit {
    /// Every value, in the order of [`SendTimes`].
    pub const ALL: [SendLimit; SEND_LIMITS] = [
        SendLimit::App,
        SendLimit::Rwnd,
        SendLimit::Ring,
        SendLimit::Cwnd,
        SendLimit::Pacing,
        SendLimit::Sched,
        SendLimit::NoPath,
        SendLimit::Sending,
    ];
}

/// Nanoseconds the sender spent in each [`SendLimit`], indexed by its value.
pub type SendTimes = [u64; SEND_LIMITS];

/// Where the sender's time goes (see [`SendLimit`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SendClock {
    /// The current limit and since when; `None` before the sender first looked.
    now: Option<(SendLimit, u64)>,
    /// Time of the limits left before.
    spent: SendTimes,
}

impl SendClock {
    fn set(&mut self, now_ns: u64, limit: SendLimit) {
        match self.now {
            Some((l, _)) if l == limit => {}
            Some((l, since)) => {
                if let Some(t) = self.spent.get_mut(l as usize) {
                    *t = t.saturating_add(now_ns.saturating_sub(since));
                }
                self.now = Some((limit, now_ns.max(since)));
            }
            None => self.now = Some((limit, now_ns)),
        }
    }

    fn times(&self, now_ns: u64) -> SendTimes {
        let mut t = self.spent;
        if let Some((l, since)) = self.now {
            if let Some(v) = t.get_mut(l as usize) {
                *v = v.saturating_add(now_ns.saturating_sub(since));
            }
        }
        t
    }
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Messages accepted by [`Conn::send_message`].
    pub msgs_sent: u64,
    /// Messages delivered by [`Event::Message`].
    pub msgs_delivered: u64,
    /// DATA packets sent, retransmissions included.
    pub data_sent: u64,
    /// DATA and FIN packets retransmitted.
    pub retransmits: u64,
    /// Packets declared lost by RACK.
    pub rack_losses: u64,
    /// RACK losses found needless: the packet arrived after all (a D-SACK or a late ack).
    pub spurious_losses: u64,
    /// Packets declared lost by a retransmission timeout.
    pub rto_losses: u64,
    /// Packets declared lost because their path left Active.
    pub path_losses: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Window probes sent while the peer's window was closed.
    pub window_probes: u64,
    /// New DATA packets received.
    pub data_received: u64,
    /// Duplicate DATA or FIN packets received.
    pub duplicates: u64,
    /// DATA packets dropped for lack of buffer or window.
    pub rcv_dropped: u64,
    /// ACK packets sent.
    pub acks_sent: u64,
    /// Delayed ACKs not sent because a DATA or FIN packet carried the acknowledgement.
    pub acks_carried: u64,
    /// ACK packets received.
    pub acks_received: u64,
    /// PROBE packets sent.
    pub probes_sent: u64,
    /// New DATA packets that arrived marked congestion experienced (ECN CE).
    pub ce_received: u64,
    /// ACK packets received with [`Flags::ECE`].
    pub ece_received: u64,
    /// Copies of overdue packets sent on another path, the original left in flight (see
    /// [`Conn::detect_losses`]).
    pub hedges: u64,
    /// Hedges found needless: the peer received both copies (a D-SACK).
    pub spurious_hedges: u64,
    /// Challenge ACKs sent: answers to an RST within the receive window that did not match
    /// the next expected sequence number, or to DATA or FIN with an unacceptable
    /// acknowledgement (see [`Conn::handle_packet`]).
    pub challenge_acks: u64,
    /// ACKs not sent in answer to DATA packets beyond the receive window or buffer, over the
    /// limit of [`REFUSAL_ACK_RATE`] a second (see [`Conn::answer_refused`]).
    pub acks_limited: u64,
    /// Endpoints the peer announced in its SYN or SYN_ACK that were refused (see
    /// [`mrc_proto::screen_peer_endpoint`]).
    pub endpoints_refused: u64,
    /// Handshake packets (SYN_ACKs, an RST) not sent because the accepting end had sent as
    /// much as [`AMPLIFICATION_FACTOR`] times the bytes of the peer's SYNs already (see
    /// "Anti-amplification" in the module documentation).
    pub amp_limited: u64,
    /// RETRYs taken: the listener asked for the SYN again with a token (see "Retry" in the
    /// module documentation).
    pub retries: u64,
    /// Orphans reset after [`ConnConfig::fin_timeout_ns`]: the peer did not finish the close
    /// (its FIN, or the acknowledgement of this end's FIN, never came) or kept its window
    /// closed.
    pub orphan_timeouts: u64,
}

/// Send ring slot states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum SlotState {
    /// Not in use.
    #[default]
    Free,
    /// Sent, not acknowledged, not declared lost.
    InFlight,
    /// Selectively acknowledged.
    Sacked,
    /// Declared lost, waiting for retransmission.
    Lost,
}

/// Slot flag: first packet of a message.
const SF_FIRST: u8 = 1;
/// Slot flag: last packet of a message.
const SF_LAST: u8 = 2;
/// Slot flag: the FIN.
const SF_FIN: u8 = 4;
/// Send slot flag: the latest loss declaration of the packet was RACK's.
const SF_RACK: u8 = 16;
/// Receive slot flag: the packet has arrived.
const SF_ARRIVED: u8 = 8;
/// Send slot flag: the packet is overdue on its path and a copy should go out on another.
const SF_HEDGE_DUE: u8 = 32;
/// Send slot flag: a copy of the packet is in flight on `SendSlot::hedge_path` as well.
const SF_HEDGED: u8 = 64;

/// One sent packet.
#[derive(Clone, Copy, Debug, Default)]
struct SendSlot {
    msg_id: u64,
    /// Time of the latest transmission.
    sent_ns: u64,
    /// Connection-wide transmission counter at the latest transmission: orders packets by
    /// send time even within one nanosecond.
    tx_order: u64,
    offset: u32,
    len: u32,
    path: u16,
    /// Path of the copy in flight, with [`SF_HEDGED`].
    hedge_path: u16,
    state: SlotState,
    flags: u8,
    tx_count: u8,
}

/// Where an acknowledgement came from.
#[derive(Clone, Copy, Debug)]
struct AckFrom {
    /// The path the packet carrying it arrived on, if the connection has that path.
    path: Option<PathIdx>,
    /// Whether it echoes an ECN mark (an ACK with [`Flags::ECE`]).
    ece: bool,
    /// How long the peer held it after the latest packet it acknowledges arrived
    /// ([`Sack::delay_ns`]).
    delay_ns: u64,
    /// When the packet carrying it arrived (see [`Conn::handle_packet_at`]): the end of the
    /// round trips it times.
    at_ns: u64,
}

impl AckFrom {
    /// An acknowledgement without an ECN echo or a delay, as DATA and FIN carry, in a packet
    /// that arrived at `at_ns`.
    fn plain(path: Option<PathIdx>, at_ns: u64) -> Self {
        AckFrom {
            path,
            ece: false,
            delay_ns: 0,
            at_ns,
        }
    }
}

/// Where a DATA or FIN packet's sequence number falls relative to the receive window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RcvSeq {
    /// Within the window: the packet may be new.
    InWindow,
    /// Below the cumulative ack: a duplicate.
    Old,
    /// Beyond the peer's FIN, or a FIN other than the one already received.
    AfterFin,
    /// Beyond the window, or a FIN below data already received.
    Beyond,
}

/// A packet sent again that perhaps was not lost, remembered to match D-SACKs against.
#[derive(Clone, Copy, Debug)]
struct Resent {
    seq: u64,
    /// Path of the original, with [`HEDGE_MARK`] for a hedge; `u16::MAX` for none.
    path: u16,
    /// Send time of the original, for a hedge.
    sent_ns: u64,
}

impl Resent {
    const NONE: Resent = Resent {
        seq: 0,
        path: u16::MAX,
        sent_ns: 0,
    };
}

/// A multiple of a base wait that needless retransmissions raise and time lowers.
#[derive(Clone, Copy, Debug, Default)]
struct Widening {
    /// Multiple of the base, 0 or 1 meaning the base.
    mult: u8,
    /// Time of the latest needless retransmission, from which the multiple decays.
    since_ns: u64,
}

impl Widening {
    /// Returns the multiple at `now_ns`: it halves every [`REORDER_DECAY_NS`] after the
    /// latest needless retransmission.
    fn get(&self, now_ns: u64) -> u64 {
        let halvings = now_ns.saturating_sub(self.since_ns) / REORDER_DECAY_NS;
        u64::from(self.mult)
            .checked_shr(u32::try_from(halvings).unwrap_or(u32::MAX))
            .unwrap_or(0)
            .max(1)
    }

    /// A retransmission proved needless: the multiple doubles, at most once per `srtt_ns`.
    fn widen(&mut self, now_ns: u64, srtt_ns: u64) {
        let mult = self.get(now_ns);
        let grow = self.mult <= 1 || now_ns.saturating_sub(self.since_ns) >= srtt_ns;
        let next = if grow { mult.saturating_mul(2) } else { mult };
        self.mult = u8::try_from(next.min(u64::from(REORDER_MULT_MAX))).unwrap_or(REORDER_MULT_MAX);
        self.since_ns = now_ns;
    }
}

/// A path's RACK reorder window (RFC 8985, 6.2) and the wait before a copy of its overdue
/// packets goes on another path, each widened by needless retransmissions.
#[derive(Clone, Copy, Debug, Default)]
struct Reorder {
    rack: Widening,
    hedge: Widening,
}

/// What the connection keeps for each path, in the path's slot of its [`PathTable`]
/// ([`PathTable::extra`]): a new path starts with the default, and it goes with the path.
#[derive(Clone, Copy, Debug)]
pub struct ConnPath {
    /// Largest `tx_order` of a packet sent on the path and acknowledged (by an answer that
    /// can be its own): RACK's most recently delivered packet of the path.
    rack_order: u64,
    /// Reorder window of the path.
    reorder: Reorder,
    /// Index in `peer_eps` of the endpoint the path leads to ([`Conn::add_peer_path`]), or
    /// [`NO_REMOTE`].
    remote: u8,
}

// A chunk of a connection's path slots must fit the 4 KiB kmalloc size class that
// `PATH_CHUNK` is chosen for; a `Path` or `ConnPath` that grows past it calls for a smaller
// `PATH_CHUNK`.
const _: () = assert!(PathTable::<ConnPath>::CHUNK_BYTES <= 4096);

impl ConnPath {
    /// Returns the multiple of its base that the path's hedge wait has at `now_ns`: 1 unless
    /// needless copies raised it (see "Hedging" in the module docs).
    pub fn hedge_mult(&self, now_ns: u64) -> u64 {
        self.reorder.hedge.get(now_ns)
    }
}

impl Default for ConnPath {
    fn default() -> Self {
        ConnPath {
            rack_order: 0,
            reorder: Reorder::default(),
            remote: NO_REMOTE,
        }
    }
}

/// One received packet not yet below the cumulative ack.
#[derive(Clone, Copy, Debug, Default)]
struct RecvSlot {
    len: u32,
    flags: u8,
}

fn slot_of(seq: u64) -> usize {
    // Below WINDOW, so the conversion cannot truncate.
    (seq % WINDOW_SEQ) as usize
}

/// The [`Transmit`] of send slot `slot` (sequence number `seq`), `len` bytes written for
/// `path`.
fn slot_transmit(
    slot: &SendSlot,
    seq: u64,
    path: PathIdx,
    len: usize,
    retransmit: bool,
) -> Transmit {
    let fin = slot.flags & SF_FIN != 0;
    let data = (!fin).then_some(DataRef {
        seq,
        msg_id: slot.msg_id,
        offset: slot.offset,
        len: slot.len,
        retransmit,
    });
    let kind = if fin {
        PacketType::Fin
    } else {
        PacketType::Data
    };
    Transmit {
        path,
        len,
        data,
        kind,
    }
}

fn wire_len(payload: u32) -> u32 {
    payload.saturating_add(HEADER_LEN as u32)
}

/// Whether two endpoints name the same UDP address (family, address and port).
fn same_endpoint(a: &Endpoint, b: &Endpoint) -> bool {
    a.family == b.family && a.addr == b.addr && a.port == b.port
}

/// Returns the datagram length of a SYN or SYN_ACK with the body `hs`, as its sender wrote it.
fn handshake_len(hs: &Handshake<'_>) -> u64 {
    let eps = u64::try_from(hs.endpoint_count()).unwrap_or(u64::MAX);
    eps.saturating_mul(ENDPOINT_LEN as u64)
        .saturating_add((HEADER_LEN + HANDSHAKE_FIXED_LEN) as u64)
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn backoff(base: u64, shift: u8, cap: u64) -> u64 {
    let shift = u32::from(shift.min(MAX_BACKOFF_SHIFT));
    base.saturating_mul(1u64 << shift).min(cap.max(base))
}

/// Encodes a control packet; returns its length.
#[allow(clippy::too_many_arguments)]
fn encode_control(
    buf: &mut [u8],
    session_id: u64,
    path_id: u32,
    flags: Flags,
    seq: u64,
    ack: u64,
    body: &Body<'_>,
) -> Option<usize> {
    let header = Header {
        flags,
        session_id,
        path_id,
        seq,
        ack,
        payload_len: 0,
    };
    mrc_proto::encode(&header, body, buf).ok()
}

/// Writes an RST answering `header`, a packet for which there is no connection; returns its
/// length, or `None` if no answer is due (the packet is itself an RST or a RETRY) or `out` is
/// too small.
///
/// The RST goes back to the opposite role: it carries [`Flags::PASSIVE`] iff `header` does
/// not.
///
/// A connection attempt to a port nobody listens on is answered this way, which the connecting
/// end reports as [`ConnError::Refused`]. The RST's sequence number is the answered packet's
/// ack and its ack the packet's sequence number, the numbers a connection checks an RST by
/// (see [`Conn::handle_packet`]): answering the challenge ACK of a connection whose peer is
/// gone, it resets that connection.
pub fn reply_rst(header: &Header, out: &mut [u8]) -> Option<usize> {
    if matches!(
        header.packet_type(),
        Some(PacketType::Rst | PacketType::Retry)
    ) {
        return None;
    }
    let flags = if header.flags.passive() {
        Flags::new(PacketType::Rst)
    } else {
        Flags::new(PacketType::Rst).with(Flags::PASSIVE)
    };
    encode_control(
        out,
        header.session_id,
        header.path_id,
        flags,
        header.ack,
        header.seq,
        &Body::Rst,
    )
}

/// Writes a RETRY answering the SYN `syn` with `token` (see "Retry" in [`mrc_proto`]); returns
/// its length, or `None` if `syn` is not a SYN, `token` is 0 or `out` is too small.
///
/// It goes back to the connecting end with the SYN's session id and path id, the token as its
/// sequence number and the SYN's sequence number (the connecting end's initial sequence number)
/// as its ack. It is [`HEADER_LEN`] bytes, fewer than any SYN.
pub fn reply_retry(syn: &Header, token: u64, out: &mut [u8]) -> Option<usize> {
    if syn.packet_type() != Some(PacketType::Syn) || syn.flags.passive() || token == 0 {
        return None;
    }
    encode_control(
        out,
        syn.session_id,
        syn.path_id,
        Flags::new(PacketType::Retry).with(Flags::PASSIVE),
        token,
        syn.seq,
        &Body::Retry,
    )
}

/// Completes a DATA packet planned by [`Conn::poll_transmit`]: copies `payload` behind the
/// header in `buf` and seals it; returns the datagram length.
///
/// `payload` must be exactly the `data.len` bytes the [`Transmit`] names.
pub fn finish_data(buf: &mut [u8], tx: &Transmit, payload: &[u8]) -> Result<usize, EncodeError> {
    let data = tx.data.ok_or(EncodeError::LengthMismatch)?;
    if usize::try_from(data.len).ok() != Some(payload.len()) {
        return Err(EncodeError::LengthMismatch);
    }
    let total = HEADER_LEN
        .checked_add(payload.len())
        .ok_or(EncodeError::TooLong)?;
    let dst = buf
        .get_mut(HEADER_LEN..total)
        .ok_or(EncodeError::BufferTooSmall)?;
    dst.copy_from_slice(payload);
    let pkt = buf.get_mut(..total).ok_or(EncodeError::BufferTooSmall)?;
    mrc_proto::seal(pkt)?;
    Ok(total)
}

/// Writes the header of a DATA packet planned by [`Conn::poll_transmit`] into `head`, exactly
/// [`HEADER_LEN`] bytes, sealed for a payload that lies elsewhere (the glue's packets take
/// the message's memory as it is): `planned` is the buffer `poll_transmit` wrote the header
/// into. The checksum covers the header alone (see "Checksums" in `mrc_proto`).
pub fn emit_data_head(head: &mut [u8], planned: &[u8], tx: &Transmit) -> Result<(), EncodeError> {
    let data = tx.data.ok_or(EncodeError::LengthMismatch)?;
    let header = planned
        .get(..HEADER_LEN)
        .ok_or(EncodeError::BufferTooSmall)?;
    if head.len() != HEADER_LEN {
        return Err(EncodeError::LengthMismatch);
    }
    head.copy_from_slice(header);
    if mrc_proto::peek_header(head).map(|h| h.payload_len) != Ok(data.len) {
        return Err(EncodeError::LengthMismatch);
    }
    mrc_proto::seal_head(head)
}

/// One MRC connection: handshake, reliability, flow control and close, sans-IO.
///
/// See the module documentation for how the glue drives it. About 66 KiB, plus the slots of
/// its paths beyond the first 10; keep it on the heap.
#[derive(Debug)]
pub struct Conn {
    cfg: ConnConfig,
    state: State,
    /// This end entered CloseWait before closing: it needs no TimeWait.
    passive_close: bool,
    /// This end was started by [`Conn::accept`]: it sets [`Flags::PASSIVE`] on every packet.
    passive: bool,
    session_id: u64,
    /// MRC port of this end's socket.
    local_port: u16,
    /// MRC port of the peer's socket.
    peer_port: u16,
    paths: PathTable<ConnPath>,
    local_eps: [Option<Endpoint>; MAX_ENDPOINTS],
    peer_eps: [Option<Endpoint>; MAX_ENDPOINTS],

    // Handshake.
    hs_due: bool,
    hs_deadline: Option<u64>,
    hs_backoff: u8,
    hs_sent_ns: u64,
    hs_path_id: u32,
    /// The listener's retry token, echoed in the SYNs sent after its RETRY (0: none).
    retry_token: u64,
    /// RETRYs taken since [`Conn::connect`], at most [`MAX_RETRIES`].
    retries: u8,

    // Send side.
    isn: u64,
    snd_una: u64,
    snd_nxt: u64,
    send: [SendSlot; WINDOW],
    tx_order: u64,
    /// Right edge of the peer's receive window, in window ([`window_cost`]) since the
    /// handshake.
    peer_edge: u64,
    /// Window taken by the new (not retransmitted) packets sent since the handshake.
    snd_new_bytes: u64,
    /// Payload bytes sent and neither cumulatively nor selectively acknowledged.
    snd_unknown: u64,
    lost_count: u32,
    /// No Lost slot below this sequence number.
    retx_cursor: u64,
    /// Slots flagged [`SF_HEDGE_DUE`].
    hedge_due: u32,
    /// Largest `tx_order` of a packet acknowledged (by an answer that can be its own, as for
    /// `rack_order`): at least every path's `rack_order` ([`ConnPath`]).
    acked_order: u64,
    msgq: [u32; MSG_QUEUE],
    msgq_head: usize,
    msgq_len: usize,
    /// Id of the message at the head of the queue.
    msgq_head_id: u64,
    /// Bytes of the head message already segmented.
    head_offset: u32,
    next_msg_id: u64,
    acked_msgs: u64,
    /// Message bytes accepted and not yet cumulatively acknowledged.
    snd_buffered: u64,
    /// Message bytes accepted and not yet segmented into packets.
    snd_queued: u64,
    fin_queued: bool,
    fin_seq: Option<u64>,
    fin_acked: bool,
    /// When this end's FIN was first sent, and again when it was acknowledged.
    fin_since_ns: u64,
    /// When the application let go of the connection ([`Conn::release`]): it is an orphan.
    orphan_ns: Option<u64>,
    /// Since when the peer's window has held back the next new packet, none having been
    /// sent within the window since; `None` while it fits or nothing is queued.
    rwnd_closed_ns: Option<u64>,
    rto_deadline: Option<u64>,
    rto_backoff: u8,
    /// Last time the connection was not waiting or made progress; see [`Conn::waiting`].
    progress_ns: u64,
    /// The RTO timer runs as a persist timer: the peer's window is closed.
    persist: bool,
    /// One packet may ignore the peer's window.
    persist_probe: bool,
    /// The latest window probe, while it may still be outstanding.
    wprobe_seq: Option<u64>,
    rack_deadline: Option<u64>,
    /// Recent RACK losses and hedges (sequence number, path, with [`HEDGE_MARK`] for a
    /// hedge), matched against D-SACKs.
    rack_lost: [Resent; RACK_LOST_RING],
    rack_lost_next: usize,
    probe_due: PathSet,
    /// Probes sent: the counter the next probe's nonce is derived from.
    probe_count: u64,
    probe_replies: [(u32, Probe); PROBE_REPLY_QUEUE],
    probe_replies_len: usize,
    rst_due: Option<u32>,
    /// Start of the current interval of the challenge ACK limit.
    challenge_since_ns: u64,
    /// Challenge ACKs sent in that interval.
    challenge_count: u8,
    /// Limit of the ACKs that answer DATA packets this end cannot take
    /// ([`Conn::answer_refused`]).
    refusal_acks: TokenBucket,
    /// Address the handshake's packets come from ([`Conn::set_handshake_peer`]).
    hs_peer_addr: Option<Endpoint>,
    /// The peer's address is not proven yet: what this end sends is held within
    /// [`AMPLIFICATION_FACTOR`] times `amp_rx` (set by [`Conn::accept`], cleared when the
    /// handshake completes).
    amp_limited: bool,
    /// Bytes of the peer's SYNs received while `amp_limited`.
    amp_rx: u64,
    /// Bytes sent while `amp_limited`.
    amp_tx: u64,
    /// Bit `i` set: `peer_eps[i]` is proven, a probe sent there was answered.
    proven_eps: u32,

    // Receive side.
    peer_isn: u64,
    rcv_nxt: u64,
    /// One past the highest sequence number received.
    rcv_high: u64,
    recv: [RecvSlot; WINDOW],
    /// Window taken ([`window_cost`]) by packets received and not yet part of a delivered
    /// message.
    rcv_held: u64,
    /// Window taken by packets delivered and not yet released by the application.
    rcv_unread: u64,
    /// Payload bytes delivered and not yet released by the application.
    rcv_unread_bytes: u64,
    msg_first: u64,
    msg_len: u64,
    /// Window taken by the packets of the message being reassembled.
    msg_cost: u64,
    peer_fin: Option<u64>,
    peer_fin_done: bool,
    ack_pending: bool,
    /// When the latest DATA or FIN arrived: the next ACK tells the peer how long it held
    /// its answer since ([`Sack::delay_ns`]).
    arrived_ns: u64,
    ack_now: bool,
    /// A DATA packet arrived marked CE: the next ACK carries [`Flags::ECE`].
    ece_pending: bool,
    /// D-SACK the next ACK carries: one more than a duplicate's sequence number, or 0.
    dsack: u64,
    ack_deadline: Option<u64>,
    unacked_pkts: u8,
    ack_path_id: u32,
    last_adv_rwnd: u32,
    /// Window released since the handshake: taken by delivered packets the application
    /// consumed or discarded.
    rcv_released: u64,
    /// `rcv_released` when the last ACK went out: the peer knows the window edge it gave.
    adv_released: u64,

    tw_deadline: Option<u64>,
    /// Latest time seen by any entry point, for transitions made while draining events.
    last_now: u64,
    events: [Event; EVENT_QUEUE],
    ev_head: usize,
    ev_len: usize,
    stats: ConnStats,
    send_clock: SendClock,
}

/// Names every field of [`Conn`] in an exhaustive pattern, so that adding a field stops the
/// build here until [`Conn::init_in_place`], which must write each field, is updated as well.
const _: fn(&Conn) = conn_fields_are_initialised;

fn conn_fields_are_initialised(c: &Conn) {
    let Conn {
        cfg: _,
        state: _,
        passive_close: _,
        passive: _,
        session_id: _,
        local_port: _,
        peer_port: _,
        paths: _,
        local_eps: _,
        peer_eps: _,
        hs_due: _,
        hs_deadline: _,
        hs_backoff: _,
        hs_sent_ns: _,
        hs_path_id: _,
        retry_token: _,
        retries: _,
        isn: _,
        snd_una: _,
        snd_nxt: _,
        send: _,
        tx_order: _,
        peer_edge: _,
        snd_new_bytes: _,
        snd_unknown: _,
        lost_count: _,
        retx_cursor: _,
        hedge_due: _,
        acked_order: _,
        msgq: _,
        msgq_head: _,
        msgq_len: _,
        msgq_head_id: _,
        head_offset: _,
        next_msg_id: _,
        acked_msgs: _,
        snd_buffered: _,
        snd_queued: _,
        fin_queued: _,
        fin_seq: _,
        fin_acked: _,
        fin_since_ns: _,
        orphan_ns: _,
        rwnd_closed_ns: _,
        rto_deadline: _,
        rto_backoff: _,
        progress_ns: _,
        persist: _,
        persist_probe: _,
        wprobe_seq: _,
        rack_deadline: _,
        rack_lost: _,
        rack_lost_next: _,
        probe_due: _,
        probe_count: _,
        probe_replies: _,
        probe_replies_len: _,
        rst_due: _,
        challenge_since_ns: _,
        challenge_count: _,
        refusal_acks: _,
        hs_peer_addr: _,
        amp_limited: _,
        amp_rx: _,
        amp_tx: _,
        proven_eps: _,
        peer_isn: _,
        rcv_nxt: _,
        rcv_high: _,
        recv: _,
        rcv_held: _,
        rcv_unread: _,
        rcv_unread_bytes: _,
        msg_first: _,
        msg_len: _,
        msg_cost: _,
        peer_fin: _,
        peer_fin_done: _,
        ack_pending: _,
        arrived_ns: _,
        ack_now: _,
        ece_pending: _,
        dsack: _,
        ack_deadline: _,
        unacked_pkts: _,
        ack_path_id: _,
        last_adv_rwnd: _,
        rcv_released: _,
        adv_released: _,
        tw_deadline: _,
        last_now: _,
        events: _,
        ev_head: _,
        ev_len: _,
        stats: _,
        send_clock: _,
    } = c;
}

impl Conn {
    /// Returns a fresh connection in state [`State::Idle`] with an empty path table.
    ///
    /// This returns about 66 KiB by value; where the stack is small (the kernel), use
    /// [`Conn::init_in_place`] on heap memory instead. Both give the same connection.
    pub fn new(cfg: ConnConfig) -> Self {
        let mut slot = MaybeUninit::<Conn>::uninit();
        Conn::init_in_place(&mut slot, cfg);
        // SAFETY: `init_in_place` initialised every field of `slot`.
        unsafe { slot.assume_init() }
    }

    /// Initialises a fresh connection in `slot`, the same as [`Conn::new`] returns, and returns
    /// it.
    ///
    /// Fields are written one at a time and the arrays one element at a time, so no temporary
    /// larger than a few hundred bytes is put on the stack: this is how the kernel sets up a
    /// connection in heap memory. Whatever `slot` held before is overwritten without being
    /// dropped: a connection there would leak its path slots.
    pub fn init_in_place(slot: &mut MaybeUninit<Conn>, cfg: ConnConfig) -> &mut Conn {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` comes from a `&mut MaybeUninit<Conn>`, so it is non-null, aligned and
        // valid for writes of a `Conn`. `addr_of_mut!` projects to each field without creating
        // a reference to uninitialised memory, and `write` does not read or drop the old
        // contents. Each array is written element by element through a pointer to its first
        // element, for indices below its length. `MaybeUninit<PathTable>` has the layout of
        // `PathTable`, so the `paths` field may be viewed as one for `PathTable::init_in_place`.
        // The list below names every field of `Conn` (checked by `conn_fields_are_initialised`).
        unsafe {
            addr_of_mut!((*p).cfg).write(cfg);
            addr_of_mut!((*p).state).write(State::Idle);
            addr_of_mut!((*p).passive_close).write(false);
            addr_of_mut!((*p).passive).write(false);
            addr_of_mut!((*p).session_id).write(0);
            addr_of_mut!((*p).local_port).write(0);
            addr_of_mut!((*p).peer_port).write(0);
            PathTable::init_in_place(
                &mut *addr_of_mut!((*p).paths).cast::<MaybeUninit<PathTable<ConnPath>>>(),
                cfg.path,
            );
            let local_eps = addr_of_mut!((*p).local_eps).cast::<Option<Endpoint>>();
            let peer_eps = addr_of_mut!((*p).peer_eps).cast::<Option<Endpoint>>();
            for i in 0..MAX_ENDPOINTS {
                local_eps.add(i).write(None);
                peer_eps.add(i).write(None);
            }
            addr_of_mut!((*p).hs_due).write(false);
            addr_of_mut!((*p).hs_deadline).write(None);
            addr_of_mut!((*p).hs_backoff).write(0);
            addr_of_mut!((*p).hs_sent_ns).write(0);
            addr_of_mut!((*p).hs_path_id).write(0);
            addr_of_mut!((*p).retry_token).write(0);
            addr_of_mut!((*p).retries).write(0);
            addr_of_mut!((*p).isn).write(0);
            addr_of_mut!((*p).snd_una).write(0);
            addr_of_mut!((*p).snd_nxt).write(0);
            let send = addr_of_mut!((*p).send).cast::<SendSlot>();
            let recv = addr_of_mut!((*p).recv).cast::<RecvSlot>();
            for i in 0..WINDOW {
                send.add(i).write(SendSlot::default());
                recv.add(i).write(RecvSlot::default());
            }
            addr_of_mut!((*p).tx_order).write(0);
            addr_of_mut!((*p).peer_edge).write(0);
            addr_of_mut!((*p).snd_new_bytes).write(0);
            addr_of_mut!((*p).snd_unknown).write(0);
            addr_of_mut!((*p).lost_count).write(0);
            addr_of_mut!((*p).retx_cursor).write(0);
            addr_of_mut!((*p).hedge_due).write(0);
            addr_of_mut!((*p).acked_order).write(0);
            let msgq = addr_of_mut!((*p).msgq).cast::<u32>();
            for i in 0..MSG_QUEUE {
                msgq.add(i).write(0);
            }
            addr_of_mut!((*p).msgq_head).write(0);
            addr_of_mut!((*p).msgq_len).write(0);
            addr_of_mut!((*p).msgq_head_id).write(0);
            addr_of_mut!((*p).head_offset).write(0);
            addr_of_mut!((*p).next_msg_id).write(0);
            addr_of_mut!((*p).acked_msgs).write(0);
            addr_of_mut!((*p).snd_buffered).write(0);
            addr_of_mut!((*p).snd_queued).write(0);
            addr_of_mut!((*p).fin_queued).write(false);
            addr_of_mut!((*p).fin_seq).write(None);
            addr_of_mut!((*p).fin_acked).write(false);
            addr_of_mut!((*p).fin_since_ns).write(0);
            addr_of_mut!((*p).orphan_ns).write(None);
            addr_of_mut!((*p).rwnd_closed_ns).write(None);
            addr_of_mut!((*p).rto_deadline).write(None);
            addr_of_mut!((*p).rto_backoff).write(0);
            addr_of_mut!((*p).progress_ns).write(0);
            addr_of_mut!((*p).persist).write(false);
            addr_of_mut!((*p).persist_probe).write(false);
            addr_of_mut!((*p).wprobe_seq).write(None);
            addr_of_mut!((*p).rack_deadline).write(None);
            let rack_lost = addr_of_mut!((*p).rack_lost).cast::<Resent>();
            for i in 0..RACK_LOST_RING {
                rack_lost.add(i).write(Resent::NONE);
            }
            addr_of_mut!((*p).rack_lost_next).write(0);
            addr_of_mut!((*p).probe_due).write(PathSet::EMPTY);
            addr_of_mut!((*p).probe_count).write(0);
            let probe_replies = addr_of_mut!((*p).probe_replies).cast::<(u32, Probe)>();
            for i in 0..PROBE_REPLY_QUEUE {
                probe_replies.add(i).write((0, Probe::default()));
            }
            addr_of_mut!((*p).probe_replies_len).write(0);
            addr_of_mut!((*p).rst_due).write(None);
            addr_of_mut!((*p).challenge_since_ns).write(0);
            addr_of_mut!((*p).challenge_count).write(0);
            addr_of_mut!((*p).refusal_acks)
                .write(TokenBucket::new(REFUSAL_ACK_RATE, REFUSAL_ACK_BURST));
            addr_of_mut!((*p).hs_peer_addr).write(None);
            addr_of_mut!((*p).amp_limited).write(false);
            addr_of_mut!((*p).amp_rx).write(0);
            addr_of_mut!((*p).amp_tx).write(0);
            addr_of_mut!((*p).proven_eps).write(0);
            addr_of_mut!((*p).peer_isn).write(0);
            addr_of_mut!((*p).rcv_nxt).write(0);
            addr_of_mut!((*p).rcv_high).write(0);
            addr_of_mut!((*p).rcv_held).write(0);
            addr_of_mut!((*p).rcv_unread).write(0);
            addr_of_mut!((*p).rcv_unread_bytes).write(0);
            addr_of_mut!((*p).msg_first).write(0);
            addr_of_mut!((*p).msg_len).write(0);
            addr_of_mut!((*p).msg_cost).write(0);
            addr_of_mut!((*p).peer_fin).write(None);
            addr_of_mut!((*p).peer_fin_done).write(false);
            addr_of_mut!((*p).ack_pending).write(false);
            addr_of_mut!((*p).arrived_ns).write(0);
            addr_of_mut!((*p).ack_now).write(false);
            addr_of_mut!((*p).ece_pending).write(false);
            addr_of_mut!((*p).dsack).write(0);
            addr_of_mut!((*p).ack_deadline).write(None);
            addr_of_mut!((*p).unacked_pkts).write(0);
            addr_of_mut!((*p).ack_path_id).write(0);
            addr_of_mut!((*p).last_adv_rwnd).write(0);
            addr_of_mut!((*p).rcv_released).write(0);
            addr_of_mut!((*p).adv_released).write(0);
            addr_of_mut!((*p).tw_deadline).write(None);
            addr_of_mut!((*p).last_now).write(0);
            let events = addr_of_mut!((*p).events).cast::<Event>();
            for i in 0..EVENT_QUEUE {
                events.add(i).write(Event::Connected);
            }
            addr_of_mut!((*p).ev_head).write(0);
            addr_of_mut!((*p).ev_len).write(0);
            addr_of_mut!((*p).stats).write(ConnStats::default());
            addr_of_mut!((*p).send_clock).write(SendClock::default());
            slot.assume_init_mut()
        }
    }

    // -----------------------------------------------------------------------------------------
    // Accessors
    // -----------------------------------------------------------------------------------------

    /// Returns the configuration.
    pub fn config(&self) -> &ConnConfig {
        &self.cfg
    }

    /// Returns the state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Returns the error the connection failed with, if any.
    pub fn error(&self) -> Option<ConnError> {
        match self.state {
            State::Closed(e) => e,
            _ => None,
        }
    }

    /// Returns whether this end is the passive one, started by [`Conn::accept`]: it sets
    /// [`Flags::PASSIVE`] on every packet it sends and accepts only packets without it. False
    /// before the connection starts and for a connection started by [`Conn::connect`].
    pub fn is_passive(&self) -> bool {
        self.passive
    }

    /// Returns flags of type `ty` with this end's direction bit.
    fn flags(&self, ty: PacketType) -> Flags {
        if self.passive {
            Flags::new(ty).with(Flags::PASSIVE)
        } else {
            Flags::new(ty)
        }
    }

    /// Returns the session id (zero before the handshake starts).
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// Returns the MRC port of this end's socket (zero until set or adopted).
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// Returns the MRC port of the peer's socket (zero until set or adopted).
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// Sets the MRC ports of this end's socket and of the peer's, which every SYN and SYN_ACK
    /// carries.
    ///
    /// The glue calls it before [`Conn::connect`]; [`Conn::accept`] takes the ports from the
    /// SYN instead. A SYN_ACK is accepted only if it comes from `peer` to `local`.
    pub fn set_ports(&mut self, local: u16, peer: u16) {
        self.local_port = local;
        self.peer_port = peer;
    }

    /// Sets the address the peer's handshake comes from: on the connecting end the address it
    /// connects to, on the accepting end the source address of the SYN, each with its UDP
    /// port. The glue calls it before [`Conn::connect`] or [`Conn::accept`].
    ///
    /// The endpoints the peer announces are screened against it (see
    /// [`mrc_proto::screen_peer_endpoint`], which looks at the family and address only):
    /// loopback endpoints are kept only if it is a loopback address, link-local ones only if
    /// it is link-local. Without it, both are refused. The handshake proves it: a path
    /// [`Conn::add_peer_path`] opens to it (address and port) needs no validation.
    pub fn set_handshake_peer(&mut self, addr: Endpoint) {
        self.hs_peer_addr = Some(addr);
    }

    /// Returns whether a handshake body comes from the peer's port to this end's.
    fn ports_match(&self, hs: &Handshake<'_>) -> bool {
        hs.src_port == self.peer_port && hs.dst_port == self.local_port
    }

    /// Returns the path table.
    pub fn paths(&self) -> &PathTable<ConnPath> {
        &self.paths
    }

    /// Returns the path table, for adding and configuring paths. Paths of a connection that
    /// may have data in flight are removed with [`Conn::remove_path`].
    pub fn paths_mut(&mut self) -> &mut PathTable<ConnPath> {
        &mut self.paths
    }

    /// Sets the probe interval of idle paths while data is in flight (see
    /// [`PathConfig::heartbeat_busy_ns`]) for this connection, also while it runs. The glue
    /// re-reads [`Conn::next_timeout`] afterwards.
    pub fn set_heartbeat_busy_ns(&mut self, ns: u64) {
        let ns = ns.max(1);
        self.cfg.path.heartbeat_busy_ns = ns;
        self.paths.set_heartbeat_busy_ns(ns);
    }

    /// Removes the path with wire id `path_id` and returns the index it had.
    ///
    /// Nothing sent on it is lost: every packet still in flight on the path is declared lost
    /// at once and retransmitted on the remaining paths, as when a path fails. The last path
    /// cannot be removed. The index may be reused by the next path added; the glue forgets
    /// what it kept per index.
    pub fn remove_path(&mut self, now_ns: u64, path_id: u32) -> Result<PathIdx, RemovePathError> {
        let idx = self.paths.find(path_id).ok_or(RemovePathError::NotFound)?;
        if self.paths.len() <= 1 {
            return Err(RemovePathError::LastPath);
        }
        self.last_now = self.last_now.max(now_ns);
        self.evacuate_path(now_ns, idx);
        // Packets waiting for retransmission no longer name the path, so a new path that
        // takes its index is not avoided for them.
        let mut seq = self.snd_una;
        while seq < self.snd_nxt {
            if let Some(slot) = self.send.get_mut(slot_of(seq)) {
                if slot.state == SlotState::Lost && usize::from(slot.path) == idx {
                    slot.path = u16::MAX;
                }
            }
            seq = seq.saturating_add(1);
        }
        self.probe_due.remove(idx);
        // What the connection kept for the path goes with its slot.
        self.paths.remove(idx);
        Ok(idx)
    }

    /// Adds a path to `remote`, an endpoint the peer announced ([`Conn::peer_endpoints`]),
    /// and returns its index, or `None` if the table is full or the memory for its slot
    /// cannot be allocated.
    ///
    /// A path to an address already proven is added as [`PathTable::add`] adds one: the
    /// address the handshake came from (or went to, [`Conn::set_handshake_peer`]; the
    /// handshake proves it), or an endpoint to which another path was validated. Any other
    /// path is added unvalidated ([`PathTable::add_unvalidated`]): it carries no data until
    /// a probe on it is answered, which proves its endpoint for every path to it (see "Path
    /// validation" in the module documentation). Paths the application adds itself, to
    /// addresses it chose as it chose the one it connected to, go through
    /// [`Conn::paths_mut`].
    pub fn add_peer_path(
        &mut self,
        now_ns: u64,
        ids: PathIds,
        backup: bool,
        remote: &Endpoint,
    ) -> Option<PathIdx> {
        let tag = self
            .peer_eps
            .iter()
            .position(|e| e.is_some_and(|e| same_endpoint(&e, remote)))
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(NO_REMOTE);
        let idx = if self.remote_proven(remote, tag) {
            self.paths.add(now_ns, ids, backup)?
        } else {
            self.paths.add_unvalidated(now_ns, ids, backup)?
        };
        if let Some(e) = self.paths.extra_mut(idx) {
            e.remote = tag;
        }
        Some(idx)
    }

    /// Whether `remote` (the announced endpoint `tag`, or [`NO_REMOTE`]) is proven: the
    /// handshake's address, or an endpoint a probe has proven.
    fn remote_proven(&self, remote: &Endpoint, tag: u8) -> bool {
        self.hs_peer_addr.is_some_and(|h| same_endpoint(&h, remote))
            || 1u32
                .checked_shl(u32::from(tag))
                .is_some_and(|bit| self.proven_eps & bit != 0)
    }

    /// A probe's answer validated path `idx`: its endpoint is proven, and so is every other
    /// path to it.
    fn on_path_validated(&mut self, now_ns: u64, idx: PathIdx) {
        let tag = self.paths.extra(idx).map_or(NO_REMOTE, |e| e.remote);
        let Some(bit) = 1u32.checked_shl(u32::from(tag)) else {
            return;
        };
        self.proven_eps |= bit;
        for j in 0..self.paths.index_end() {
            if j != idx && self.paths.extra(j).is_some_and(|e| e.remote == tag) {
                self.paths.validate(j, now_ns);
            }
        }
    }

    /// Returns the counters.
    pub fn stats(&self) -> &ConnStats {
        &self.stats
    }

    /// Nanoseconds the sender has spent in each [`SendLimit`] up to `now_ns`, from the first
    /// time it looked for new data to send.
    pub fn send_times(&self, now_ns: u64) -> SendTimes {
        self.send_clock.times(now_ns)
    }

    /// Returns the endpoints the peer announced in its SYN or SYN_ACK that this end accepted
    /// (see [`Conn::set_handshake_peer`]).
    pub fn peer_endpoints(&self) -> impl Iterator<Item = Endpoint> + '_ {
        self.peer_eps.iter().filter_map(|e| *e)
    }

    /// Returns the id of the oldest message not yet fully acknowledged: every message with a
    /// smaller id has arrived and its bytes may be freed.
    pub fn acked_msgs(&self) -> u64 {
        self.acked_msgs
    }

    /// Returns the id the next message accepted by [`Conn::send_message`] will get.
    pub fn next_msg_id(&self) -> u64 {
        self.next_msg_id
    }

    /// Returns how many message bytes [`Conn::send_message`] would accept now (zero if the
    /// message queue is full); for `EPOLLOUT`.
    pub fn send_space(&self) -> u64 {
        if self.msg_ring_full() {
            return 0;
        }
        u64::from(self.cfg.sndbuf).saturating_sub(self.snd_buffered)
    }

    /// Returns what [`Conn::send_message`] takes now: nothing unless the connection is open
    /// for sending, and otherwise messages while the ring of [`MSG_QUEUE`] ids and the send
    /// buffer have room. (An empty buffer takes any one message; that is left out here.)
    pub fn send_room(&self) -> SendRoom {
        let open = matches!(self.state, State::Established | State::CloseWait) && !self.fin_queued;
        if !open {
            return SendRoom::default();
        }
        let used = (self.msgq_len as u64).max(self.next_msg_id.saturating_sub(self.acked_msgs));
        SendRoom {
            msgs: u32::try_from((MSG_QUEUE as u64).saturating_sub(used)).unwrap_or(0),
            bytes: u64::from(self.cfg.sndbuf).saturating_sub(self.snd_buffered),
            max_msg: self.max_msg_len(),
        }
    }

    /// Returns the message bytes queued and not yet acknowledged (`SIOCOUTQ`).
    pub fn send_buffered(&self) -> u64 {
        self.snd_buffered
    }

    /// Returns the bytes of complete messages delivered and not yet released by
    /// [`Conn::release_recv`] (`SIOCINQ` of a stream).
    pub fn recv_unread(&self) -> u64 {
        self.rcv_unread_bytes
    }

    /// Returns how many bytes of a byte stream's next write to queue as one message now, out
    /// of `remaining`; zero means wait for the peer to acknowledge.
    ///
    /// A stream is cut into messages of at most [`STREAM_MSG`] bytes: small enough that the
    /// receiver can read a message's bytes soon after the first of them left, large enough
    /// that per-message costs stay small next to the copy. A chunk fills the free send buffer,
    /// but when only a sliver is free the writer waits for a quarter of the buffer (as
    /// `sk_stream_memory_free` wakes writers) rather than queue a flood of tiny messages. An
    /// empty buffer takes a chunk of any size, so a send buffer smaller than one chunk cannot
    /// block forever.
    pub fn stream_chunk(&self, remaining: usize) -> u32 {
        let cap = STREAM_MSG.min(self.max_msg_len()).max(1);
        let want = u32::try_from(remaining).unwrap_or(u32::MAX).min(cap);
        if want == 0 || self.msg_ring_full() {
            return 0;
        }
        if self.snd_buffered == 0 {
            return want;
        }
        let space = u32::try_from(self.send_space()).unwrap_or(u32::MAX);
        let sliver = (self.cfg.sndbuf / 4).min(cap);
        if space >= want {
            want
        } else if space >= sliver {
            space
        } else {
            0
        }
    }

    /// Whether [`MSG_QUEUE`] messages are accepted and not yet acknowledged: the ids of
    /// unacknowledged messages always fit one ring of that size, so the glue can keep their
    /// bytes in a ring indexed by `id % MSG_QUEUE` until [`Conn::acked_msgs`] passes them.
    fn msg_ring_full(&self) -> bool {
        self.msgq_len >= MSG_QUEUE
            || self.next_msg_id.saturating_sub(self.acked_msgs) >= MSG_QUEUE as u64
    }

    /// Returns whether every message accepted has been acknowledged, and the
    /// FIN too once [`Conn::close`] has queued one.
    pub fn all_acked(&self) -> bool {
        self.msgq_len == 0 && self.snd_una == self.snd_nxt && (!self.fin_queued || self.fin_acked)
    }

    /// Returns the receive window this end advertises now, in bytes.
    pub fn rwnd(&self) -> u32 {
        let used = self.rcv_held.saturating_add(self.rcv_unread);
        let free = u64::from(self.cfg.rcvbuf).saturating_sub(used);
        u32::try_from(free).unwrap_or(u32::MAX)
    }

    /// Returns the room left in the peer's receive window, in bytes.
    pub fn peer_rwnd(&self) -> u32 {
        let room = self.peer_edge.saturating_sub(self.snd_new_bytes);
        u32::try_from(room).unwrap_or(u32::MAX)
    }

    /// Returns the right edge of this end's receive window as ACKs carry it.
    fn rwnd_edge(&self) -> u32 {
        // Truncation intended: the edge travels modulo 2^32.
        self.rcv_released.saturating_add(u64::from(self.cfg.rcvbuf)) as u32
    }

    /// Takes a window edge from an ACK; an edge behind the known one is an older ACK's.
    fn update_peer_edge(&mut self, edge: u32) {
        // Truncation intended: compare modulo 2^32 like the wire does.
        let ahead = edge.wrapping_sub(self.peer_edge as u32);
        if ahead < 1 << 31 {
            self.peer_edge = self.peer_edge.saturating_add(u64::from(ahead));
        }
    }

    /// Returns the payload bytes sent and not yet known to have arrived.
    pub fn bytes_unacked(&self) -> u64 {
        self.snd_unknown
    }

    /// Returns the current retransmission timeout, backoff included.
    pub fn rto_ns(&self) -> u64 {
        backoff(self.rto_base(), self.rto_backoff, self.cfg.path.rto_max_ns)
    }

    /// The same as [`Conn::rto_ns`], from the RTOs the path table keeps
    /// ([`PathTable::poll_max_rto`]): what arms the RTO timer.
    pub fn poll_rto_ns(&mut self) -> u64 {
        let (rto, all) = self.paths.poll_max_rto();
        backoff(
            self.rto_base_of(rto, all),
            self.rto_backoff,
            self.cfg.path.rto_max_ns,
        )
    }

    /// Returns the next sequence number this end will send.
    pub fn snd_nxt(&self) -> u64 {
        self.snd_nxt
    }

    /// Returns the lowest sequence number this end sent that is not cumulatively acknowledged.
    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }

    /// Returns the cumulative ack this end sends: every peer sequence number below it arrived.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    // -----------------------------------------------------------------------------------------
    // Opening and closing
    // -----------------------------------------------------------------------------------------

    fn set_local_eps(&mut self, endpoints: &[Endpoint]) -> Result<(), OpenError> {
        if endpoints.len() > MAX_ENDPOINTS || !endpoints.iter().all(Endpoint::is_valid) {
            return Err(OpenError::Invalid);
        }
        for (i, slot) in self.local_eps.iter_mut().enumerate() {
            *slot = endpoints.get(i).copied();
        }
        Ok(())
    }

    /// Keeps the endpoints of the peer's handshake that pass
    /// [`mrc_proto::screen_peer_endpoint`] against the handshake's address
    /// ([`Conn::set_handshake_peer`]), counting the others in
    /// [`ConnStats::endpoints_refused`].
    fn take_peer_eps(&mut self, hs: &Handshake<'_>) {
        let from = self.hs_peer_addr;
        let mut n = 0usize;
        self.peer_eps = [None; MAX_ENDPOINTS];
        for ep in hs.endpoints() {
            if !mrc_proto::screen_peer_endpoint(&ep, from.as_ref()) {
                self.stats.endpoints_refused = self.stats.endpoints_refused.saturating_add(1);
                continue;
            }
            if let Some(slot) = self.peer_eps.get_mut(n) {
                *slot = Some(ep);
                n = n.saturating_add(1);
            }
        }
    }

    fn first_path_id(&self) -> Option<u32> {
        self.paths.iter().next().map(|(_, p)| p.ids().path_id)
    }

    fn start_send_side(&mut self, isn: u64) {
        let isn = isn & ISN_MASK;
        self.isn = isn;
        self.snd_una = isn;
        self.snd_nxt = isn;
        self.retx_cursor = isn;
    }

    fn start_recv_side(&mut self, peer_isn: u64) {
        let peer_isn = peer_isn & ISN_MASK;
        self.peer_isn = peer_isn;
        self.rcv_nxt = peer_isn;
        self.rcv_high = peer_isn;
        self.msg_first = peer_isn;
    }

    /// Starts an active open: sends SYN with `session_id` and initial sequence number `isn`
    /// (both random, drawn by the glue) and the local `endpoints`.
    ///
    /// The glue adds at least one path to [`Conn::paths_mut`] first; the SYN goes on the first.
    /// It names the ports with [`Conn::set_ports`] first too; the SYN carries the local port as
    /// `src_port` and the peer's as `dst_port`. Only the low 61 bits of `isn` are used.
    pub fn connect(
        &mut self,
        now_ns: u64,
        session_id: u64,
        isn: u64,
        endpoints: &[Endpoint],
    ) -> Result<(), OpenError> {
        if self.state != State::Idle {
            return Err(OpenError::AlreadyStarted);
        }
        let path_id = self.first_path_id().ok_or(OpenError::NoPath)?;
        self.set_local_eps(endpoints)?;
        self.passive = false;
        // This end chose the address it connects to; nobody makes it send there.
        self.amp_limited = false;
        self.session_id = session_id;
        self.start_send_side(isn);
        self.hs_path_id = path_id;
        self.retry_token = 0;
        self.retries = 0;
        self.state = State::SynSent;
        self.hs_due = true;
        self.hs_backoff = 0;
        self.hs_deadline = Some(now_ns.saturating_add(self.cfg.syn_rto_ns));
        Ok(())
    }

    /// Starts a passive open from a received SYN: adopts its session id and ports and answers
    /// SYN_ACK with initial sequence number `isn` (random, drawn by the glue) and the local
    /// `endpoints`.
    ///
    /// The local port becomes the SYN's `dst_port` and the peer port its `src_port`, replacing
    /// any set with [`Conn::set_ports`].
    ///
    /// The glue adds the path the SYN came on to [`Conn::paths_mut`] first. The connection
    /// becomes Established (and reports [`Event::Connected`]) when the peer's first ACK or DATA
    /// arrives.
    pub fn accept(
        &mut self,
        now_ns: u64,
        syn: &Packet<'_>,
        isn: u64,
        endpoints: &[Endpoint],
    ) -> Result<(), OpenError> {
        if self.state != State::Idle {
            return Err(OpenError::AlreadyStarted);
        }
        let Body::Syn(hs) = syn.body else {
            return Err(OpenError::Invalid);
        };
        // A SYN comes from the active end, which never sets the direction bit.
        if syn.header.flags.passive() {
            return Err(OpenError::Invalid);
        }
        if self.paths.is_empty() {
            return Err(OpenError::NoPath);
        }
        self.set_local_eps(endpoints)?;
        self.take_peer_eps(&hs);
        self.passive = true;
        // The SYN's source address may be forged: until the peer proves it receives there
        // (the handshake completes), the SYN's bytes bound what goes back.
        self.amp_limited = true;
        self.amp_rx = handshake_len(&hs);
        self.amp_tx = 0;
        self.paths
            .earn_validation_credit(self.amp_rx.saturating_mul(AMPLIFICATION_FACTOR));
        self.paths.set_heartbeat_yield(true);
        self.session_id = syn.header.session_id;
        self.local_port = hs.dst_port;
        self.peer_port = hs.src_port;
        self.start_send_side(isn);
        self.start_recv_side(hs.initial_seq);
        self.peer_edge = u64::from(hs.rwnd);
        self.hs_path_id = if self.paths.find(syn.header.path_id).is_some() {
            syn.header.path_id
        } else {
            self.first_path_id().unwrap_or(0)
        };
        self.state = State::SynReceived;
        self.hs_due = true;
        self.hs_backoff = 0;
        self.hs_deadline = Some(now_ns.saturating_add(self.cfg.syn_rto_ns));
        Ok(())
    }

    /// Closes this end's direction (shutdown for writing): a FIN follows every queued message.
    ///
    /// Before the handshake completes this abandons the connection instead (with an RST once
    /// the peer may know it). Receiving continues until the peer's FIN, for as long as the
    /// peer takes: only [`Conn::release`] bounds the wait (see [`ConnConfig::fin_timeout_ns`]).
    pub fn close(&mut self, now_ns: u64) {
        match self.state {
            State::Idle => self.enter_closed(None),
            State::SynSent | State::SynReceived => self.abort(now_ns),
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.passive_close = true;
                self.state = State::Closing;
            }
            _ => {}
        }
    }

    /// Closes the connection for good as the application releases it, like `close()` on a
    /// TCP socket: with an RST if data it received will never be read, which is
    /// `unread_delivered` (complete messages it has not read) or any part of a message
    /// still being received, else with a FIN after every queued message.
    ///
    /// From now on the connection is an orphan ([`Conn::is_orphan`]): nobody reads from it
    /// or waits on it, so it no longer waits for the peer indefinitely. If the peer does not
    /// finish the close, or keeps its window closed on the messages still queued, for
    /// [`ConnConfig::fin_timeout_ns`], the connection resets the peer and fails with
    /// [`ConnError::TimedOut`]. [`Conn::close`] alone (`shutdown(SHUT_WR)`) does not orphan
    /// the connection.
    pub fn release(&mut self, now_ns: u64, unread_delivered: bool) {
        if self.orphan_ns.is_none() {
            self.orphan_ns = Some(now_ns);
        }
        if unread_delivered || self.rcv_held > 0 {
            self.abort(now_ns);
        } else {
            self.close(now_ns);
        }
    }

    /// Returns whether the application has let go of the connection ([`Conn::release`]).
    pub fn is_orphan(&self) -> bool {
        self.orphan_ns.is_some()
    }

    /// Aborts the connection: sends one RST and closes at once, without error.
    pub fn abort(&mut self, _now_ns: u64) {
        match self.state {
            State::Idle | State::Closed(_) => {}
            State::TimeWait => self.enter_closed(None),
            _ => {
                self.rst_due = Some(self.hs_path_id_or_first());
                self.enter_closed(None);
            }
        }
    }

    fn hs_path_id_or_first(&self) -> u32 {
        if self.paths.find(self.hs_path_id).is_some() {
            self.hs_path_id
        } else {
            self.first_path_id().unwrap_or(self.hs_path_id)
        }
    }

    fn enter_closed(&mut self, err: Option<ConnError>) {
        if matches!(self.state, State::Closed(_)) {
            return;
        }
        self.state = State::Closed(err);
        self.hs_due = false;
        self.hs_deadline = None;
        self.rto_deadline = None;
        self.rack_deadline = None;
        self.ack_deadline = None;
        self.tw_deadline = None;
        self.ack_now = false;
        self.ack_pending = false;
        self.ece_pending = false;
        self.probe_due = PathSet::EMPTY;
        self.probe_replies_len = 0;
        self.push_event(Event::Closed(err));
    }

    fn enter_time_wait(&mut self, now_ns: u64) {
        self.state = State::TimeWait;
        self.rto_deadline = None;
        self.rack_deadline = None;
        self.probe_due = PathSet::EMPTY;
        self.tw_deadline = Some(now_ns.saturating_add(self.time_wait()));
    }

    /// Returns how long TimeWait lasts: [`ConnConfig::time_wait_ns`], or two retransmission
    /// timeouts if that is longer, so that when the last acknowledgement is lost, the
    /// retransmission it leaves the peer waiting for still finds this end there to answer.
    fn time_wait(&self) -> u64 {
        self.cfg.time_wait_ns.max(self.rto_ns().saturating_mul(2))
    }

    /// Both FINs are done (ours acknowledged, the peer's delivered): finish.
    fn maybe_finish(&mut self, now_ns: u64) {
        if !(self.fin_acked && self.peer_fin_done) {
            return;
        }
        if self.passive_close {
            self.enter_closed(None);
        } else {
            self.enter_time_wait(now_ns);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Events
    // -----------------------------------------------------------------------------------------

    fn push_event(&mut self, ev: Event) -> bool {
        if self.ev_len >= EVENT_QUEUE {
            return false;
        }
        let idx = (self.ev_head.wrapping_add(self.ev_len)) % EVENT_QUEUE;
        if let Some(slot) = self.events.get_mut(idx) {
            *slot = ev;
            self.ev_len = self.ev_len.saturating_add(1);
            true
        } else {
            false
        }
    }

    /// Returns the next event for the glue, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.ev_len == 0 {
            return None;
        }
        let ev = self.events.get(self.ev_head).copied();
        self.ev_head = self.ev_head.wrapping_add(1) % EVENT_QUEUE;
        self.ev_len = self.ev_len.saturating_sub(1);
        // Delivery stops while the queue is full; make up for it.
        self.advance_rcv();
        ev
    }

    // -----------------------------------------------------------------------------------------
    // Sending messages
    // -----------------------------------------------------------------------------------------

    /// Returns the largest message this end can send: [`ConnConfig::max_msg`], and no more
    /// packets than the receiver holds of one message ([`WINDOW`] of them; a message spans
    /// them all only on a route with a small MTU).
    pub fn max_msg_len(&self) -> u32 {
        let ring = u64::from(self.cfg.max_payload()).saturating_mul(WINDOW_SEQ);
        self.cfg
            .max_msg
            .min(u32::try_from(ring).unwrap_or(u32::MAX))
    }

    /// Queues a message of `len` bytes; returns its id, which [`DataRef::msg_id`] names.
    ///
    /// Ids count up from zero without gaps. The glue keeps the message bytes until
    /// [`Conn::acked_msgs`] is above the id. A message longer than [`Conn::max_msg_len`]
    /// is refused with [`SendError::MsgSize`].
    pub fn send_message(&mut self, len: u32) -> Result<u64, SendError> {
        match self.state {
            State::Established | State::CloseWait => {}
            State::Closed(Some(e)) => return Err(SendError::Failed(e)),
            State::FinWait | State::Closing | State::TimeWait | State::Closed(None) => {
                return Err(SendError::Shutdown)
            }
            State::Idle | State::SynSent | State::SynReceived => {
                return Err(SendError::NotConnected)
            }
        }
        if self.fin_queued {
            return Err(SendError::Shutdown);
        }
        if len > self.max_msg_len() {
            return Err(SendError::MsgSize);
        }
        let fits = self.snd_buffered.saturating_add(u64::from(len)) <= u64::from(self.cfg.sndbuf);
        // An empty buffer takes any message that passed the size check, so a send buffer
        // smaller than the largest message cannot block forever.
        if self.msg_ring_full() || !(fits || self.snd_buffered == 0) {
            return Err(SendError::WouldBlock);
        }
        let idx = self.msgq_head.wrapping_add(self.msgq_len) % MSG_QUEUE;
        let Some(slot) = self.msgq.get_mut(idx) else {
            return Err(SendError::WouldBlock);
        };
        *slot = len;
        self.msgq_len = self.msgq_len.saturating_add(1);
        let id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.saturating_add(1);
        self.snd_buffered = self.snd_buffered.saturating_add(u64::from(len));
        self.snd_queued = self.snd_queued.saturating_add(u64::from(len));
        self.stats.msgs_sent = self.stats.msgs_sent.saturating_add(1);
        Ok(id)
    }

    // -----------------------------------------------------------------------------------------
    // Transmission
    // -----------------------------------------------------------------------------------------

    fn path_id_of(&self, idx: PathIdx) -> u32 {
        self.paths.get(idx).map_or(0, |p| p.ids().path_id)
    }

    /// Chooses a path for a control packet: the one named if it is validated and not Failed,
    /// else the first Active one, else the one named if validated, else any validated one.
    /// `None` only if no path is validated. (Probes, their answers and ACKs may go by a path
    /// not validated, within the validation credit; they choose their paths themselves.)
    fn control_path(&self, path_id: u32) -> Option<PathIdx> {
        let named = self
            .paths
            .find(path_id)
            .filter(|&i| self.paths.get(i).is_some_and(|p| p.is_validated()));
        if let Some(i) = named {
            if self
                .paths
                .get(i)
                .is_some_and(|p| p.state() != PathState::Failed)
            {
                return Some(i);
            }
        }
        self.paths
            .iter()
            .find(|(_, p)| p.state() == PathState::Active)
            .map(|(i, _)| i)
            .or(named)
            .or_else(|| {
                self.paths
                    .iter()
                    .find(|(_, p)| p.is_validated())
                    .map(|(i, _)| i)
            })
    }

    /// Returns the next datagram to send, written into `buf`, or `None` when there is nothing
    /// to send now (call again after the next input, event or timer).
    ///
    /// `buf` must hold at least [`MIN_TX_BUF`] bytes; for DATA it must also have room for the
    /// payload behind the header (see [`DataRef`]).
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < MIN_TX_BUF {
            return None;
        }
        self.last_now = self.last_now.max(now_ns);
        self.note_progress(now_ns);
        if let Some(path_id) = self.rst_due.take() {
            if let Some(tx) = self.build_rst(path_id, buf) {
                return Some(tx);
            }
        }
        match self.state {
            State::Idle | State::Closed(_) => None,
            State::SynSent | State::SynReceived => self.build_handshake(now_ns, buf),
            State::TimeWait => {
                // Still answer probes: the peer may be waiting for its path to come back to
                // retransmit its FIN.
                if self.ack_now {
                    if let Some(tx) = self.build_ack(now_ns, buf) {
                        return Some(tx);
                    }
                }
                self.build_probe_reply(buf)
            }
            State::Established | State::FinWait | State::CloseWait | State::Closing => {
                if self.ack_due(now_ns) {
                    if let Some(tx) = self.build_ack(now_ns, buf) {
                        return Some(tx);
                    }
                }
                if let Some(tx) = self.build_probe_reply(buf) {
                    return Some(tx);
                }
                if let Some(tx) = self.build_probe(now_ns, buf) {
                    return Some(tx);
                }
                if let Some(tx) = self.build_retransmit(now_ns, buf) {
                    return Some(tx);
                }
                if let Some(tx) = self.build_hedge(now_ns, buf) {
                    return Some(tx);
                }
                if let Some(tx) = self.build_new_data(now_ns, buf) {
                    return Some(tx);
                }
                self.build_fin(now_ns, buf)
            }
        }
    }

    fn build_rst(&mut self, path_id: u32, buf: &mut [u8]) -> Option<Transmit> {
        let path = self.control_path(path_id)?;
        let pid = self.path_id_of(path);
        let len = encode_control(
            buf,
            self.session_id,
            pid,
            self.flags(PacketType::Rst),
            self.snd_nxt,
            self.rcv_nxt,
            &Body::Rst,
        )?;
        if !self.amp_allow(len) {
            return None;
        }
        Some(Transmit {
            path,
            len,
            data: None,
            kind: PacketType::Rst,
        })
    }

    /// Takes a packet of `len` bytes about to be sent against the anti-amplification limit:
    /// returns whether it may go, and counts it in [`ConnStats::amp_limited`] if not.
    fn amp_allow(&mut self, len: usize) -> bool {
        if !self.amp_limited {
            return true;
        }
        let len = u64::try_from(len).unwrap_or(u64::MAX);
        let sent = self.amp_tx.saturating_add(len);
        if sent > self.amp_rx.saturating_mul(AMPLIFICATION_FACTOR) {
            self.stats.amp_limited = self.stats.amp_limited.saturating_add(1);
            return false;
        }
        self.amp_tx = sent;
        true
    }

    fn build_handshake(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        if !self.hs_due {
            return None;
        }
        let path = self.control_path(self.hs_path_id)?;
        let pid = self.path_id_of(path);
        let rwnd = self.rwnd();
        let mut eps = [Endpoint::v4([0; 4], 0, false); MAX_ENDPOINTS];
        let mut n = 0usize;
        for (dst, src) in eps.iter_mut().zip(self.local_eps.iter().flatten()) {
            *dst = *src;
            n = n.saturating_add(1);
        }
        let eps = eps.get(..n).unwrap_or(&[]);
        let hs = Handshake::new(self.isn, rwnd, self.local_port, self.peer_port, eps);
        let (body, ack) = if self.state == State::SynSent {
            (Body::Syn(hs), self.retry_token)
        } else {
            (Body::SynAck(hs), self.rcv_nxt)
        };
        let len = encode_control(
            buf,
            self.session_id,
            pid,
            self.flags(body.packet_type()),
            self.isn,
            ack,
            &body,
        )?;
        self.hs_due = false;
        if !self.amp_allow(len) {
            // Withheld: a repeated SYN raises the limit and asks for it again.
            return None;
        }
        self.hs_sent_ns = now_ns;
        self.last_adv_rwnd = rwnd;
        Some(Transmit {
            path,
            len,
            data: None,
            kind: body.packet_type(),
        })
    }

    fn ack_due(&self, now_ns: u64) -> bool {
        self.ack_now || (self.ack_pending && self.ack_deadline.is_some_and(|d| d <= now_ns))
    }

    fn build_ack(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        // An ACK goes back by the path of the latest DATA even if this end has not validated
        // that path yet (the peer has, or it would not send there), within the validation
        // credit: the DATA paid for far more. Elsewhere, the sender would time the path the
        // ACK takes by packets of another, and the ACKs of every path not yet validated here
        // would crowd onto one.
        let unvalidated = self.paths.find(self.ack_path_id).filter(|&i| {
            self.paths
                .get(i)
                .is_some_and(|p| !p.is_validated() && p.state() != PathState::Failed)
                && self.paths.validation_credit() >= MAX_ACK_LEN
        });
        let path = match unvalidated {
            Some(i) => i,
            None => self.control_path(self.ack_path_id)?,
        };
        // The header names the path the ACK goes by, which the sender times it on; that is
        // another than the latest DATA's when this end holds that one Failed.
        let pid = self.paths.get(path)?.ids().path_id;
        let mut bitmap = [0u8; MAX_SACK_BYTES];
        let span = self.rcv_high.saturating_sub(self.rcv_nxt).min(WINDOW_SEQ);
        let mut used = 0usize;
        for off in 1..span {
            let seq = self.rcv_nxt.saturating_add(off);
            let arrived = self
                .recv
                .get(slot_of(seq))
                .is_some_and(|s| s.flags & SF_ARRIVED != 0);
            if arrived {
                // `off` is below WINDOW, so both conversions are exact.
                let byte = (off / 8) as usize;
                if let Some(b) = bitmap.get_mut(byte) {
                    *b |= 1 << (off % 8);
                    used = byte.saturating_add(1);
                }
            }
        }
        let rwnd = self.rwnd();
        let sack = Sack::new(
            self.dsack,
            self.rwnd_edge(),
            self.rcv_nxt,
            bitmap.get(..used).unwrap_or(&[]),
        )
        .with_delay(now_ns.saturating_sub(self.arrived_ns));
        let mut flags = self.flags(PacketType::Ack);
        // An echo counts against the packets of the path the ACK names, so it goes only by
        // the path of the marked packet.
        if self.ece_pending && pid == self.ack_path_id {
            flags = flags.with(Flags::ECE);
        }
        let len = encode_control(
            buf,
            self.session_id,
            pid,
            flags,
            self.snd_nxt,
            self.rcv_nxt,
            &Body::Ack(sack),
        )?;
        if unvalidated.is_some() {
            // Within the credit, checked above against the largest ACK.
            self.paths
                .spend_validation_credit(path, u64::try_from(len).unwrap_or(u64::MAX));
        }
        self.ack_now = false;
        self.ack_pending = false;
        self.ece_pending = false;
        self.dsack = 0;
        self.ack_deadline = None;
        self.unacked_pkts = 0;
        self.last_adv_rwnd = rwnd;
        self.adv_released = self.rcv_released;
        self.stats.acks_sent = self.stats.acks_sent.saturating_add(1);
        Some(Transmit {
            path,
            len,
            data: None,
            kind: PacketType::Ack,
        })
    }

    /// A DATA or FIN packet just carried the cumulative ack: the delayed ACK is dropped when
    /// it would tell the peer nothing more, as TCP drops its delayed ACK when data goes out.
    ///
    /// It would tell more while data is missing (its SACK bitmap), while a CE mark waits for
    /// its echo, or once the window edge the peer knows leaves it less than half a buffer of
    /// room: the edge travels only in ACKs, and a peer that ran into it could be kept waiting
    /// for one by replies that carry none.
    fn ack_carried(&mut self) {
        if !self.ack_pending || self.ack_now || self.ece_pending || self.rcv_high != self.rcv_nxt {
            return;
        }
        let received = self
            .rcv_released
            .saturating_add(self.rcv_unread)
            .saturating_add(self.rcv_held);
        let edge = self.adv_released.saturating_add(u64::from(self.cfg.rcvbuf));
        if edge.saturating_sub(received) < u64::from(self.cfg.rcvbuf / 2) {
            return;
        }
        self.ack_pending = false;
        self.ack_deadline = None;
        self.unacked_pkts = 0;
        self.stats.acks_carried = self.stats.acks_carried.saturating_add(1);
    }

    fn build_probe_reply(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        while self.probe_replies_len > 0 {
            self.probe_replies_len = self.probe_replies_len.saturating_sub(1);
            let (path_id, probe) = *self.probe_replies.get(self.probe_replies_len)?;
            // A probe is answered by the path it tests, whatever this end thinks of that
            // path: the prober times the path by the answer, and one that came back by
            // another path would hold that path's delay. Only a path this end does not have
            // yet falls back.
            let Some(path) = self
                .paths
                .find(path_id)
                .or_else(|| self.control_path(path_id))
            else {
                continue;
            };
            let len = encode_control(
                buf,
                self.session_id,
                path_id,
                self.flags(PacketType::ProbeAck),
                self.snd_nxt,
                self.rcv_nxt,
                &Body::ProbeAck(probe),
            )?;
            // The peer validates its own paths with these answers; one on a path this end
            // has not validated goes to an address not proven, within the validation
            // credit.
            let bytes = u64::try_from(len).unwrap_or(u64::MAX);
            if !self.paths.spend_validation_credit(path, bytes) {
                continue;
            }
            return Some(Transmit {
                path,
                len,
                data: None,
                kind: PacketType::ProbeAck,
            });
        }
        None
    }

    fn build_probe(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        let idx = self.probe_due.iter().next()?;
        self.probe_due.remove(idx);
        let pid = self.paths.get(idx)?.ids().path_id;
        self.probe_count = self.probe_count.wrapping_add(1);
        // Zero is no nonce to the path table.
        let nonce =
            mrc_proto::keyed_nonce(self.cfg.nonce_key, self.session_id, self.probe_count).max(1);
        let probe = Probe { nonce, ts: now_ns };
        let len = encode_control(
            buf,
            self.session_id,
            pid,
            self.flags(PacketType::Probe),
            self.snd_nxt,
            self.rcv_nxt,
            &Body::Probe(probe),
        )?;
        self.paths.on_probe_sent(idx, now_ns, nonce);
        self.stats.probes_sent = self.stats.probes_sent.saturating_add(1);
        Some(Transmit {
            path: idx,
            len,
            data: None,
            kind: PacketType::Probe,
        })
    }

    /// Writes the header of the DATA or FIN packet of send slot `seq`, addressed to `path`,
    /// into `buf`; returns the packet's length.
    fn encode_slot(&self, seq: u64, path: PathIdx, buf: &mut [u8]) -> Option<usize> {
        let pid = self.path_id_of(path);
        let slot = self.send.get(slot_of(seq))?;
        if slot.flags & SF_FIN != 0 {
            encode_control(
                buf,
                self.session_id,
                pid,
                self.flags(PacketType::Fin),
                seq,
                self.rcv_nxt,
                &Body::Fin,
            )
        } else {
            let mut flags = self.flags(PacketType::Data);
            if slot.flags & SF_FIRST != 0 {
                flags |= Flags::FIRST;
            }
            if slot.flags & SF_LAST != 0 {
                flags |= Flags::LAST;
            }
            let header = Header {
                flags,
                session_id: self.session_id,
                path_id: pid,
                seq,
                ack: self.rcv_nxt,
                payload_len: slot.len,
            };
            mrc_proto::encode_header(&header, buf).ok()?;
            HEADER_LEN.checked_add(usize::try_from(slot.len).ok()?)
        }
    }

    /// Writes the header of the packet of send slot `seq` for `path` and records the send.
    fn emit_slot(
        &mut self,
        now_ns: u64,
        seq: u64,
        path: PathIdx,
        retransmit: bool,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let len = self.encode_slot(seq, path, buf)?;
        let mut slot = *self.send.get(slot_of(seq))?;
        let fin = slot.flags & SF_FIN != 0;
        self.ack_carried();
        self.tx_order = self.tx_order.saturating_add(1);
        slot.sent_ns = now_ns;
        slot.tx_order = self.tx_order;
        slot.path = u16::try_from(path).unwrap_or(u16::MAX);
        slot.state = SlotState::InFlight;
        slot.tx_count = slot.tx_count.saturating_add(1);
        if let Some(s) = self.send.get_mut(slot_of(seq)) {
            *s = slot;
        }
        self.paths
            .on_sent(path, now_ns, wire_len(slot.len), retransmit);
        if !fin {
            self.stats.data_sent = self.stats.data_sent.saturating_add(1);
        }
        if retransmit {
            self.stats.retransmits = self.stats.retransmits.saturating_add(1);
        }
        if self.rto_deadline.is_none() || self.persist {
            self.persist = false;
            self.rto_deadline = Some(now_ns.saturating_add(self.poll_rto_ns()));
        }
        Some(slot_transmit(&slot, seq, path, len, retransmit))
    }

    fn build_retransmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        if self.lost_count == 0 {
            return None;
        }
        let mut seq = self.retx_cursor.max(self.snd_una);
        while seq < self.snd_nxt {
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            if slot.state == SlotState::Lost {
                self.retx_cursor = seq;
                let backlog = u64::from(self.lost_count)
                    .saturating_mul(u64::from(wire_len(self.cfg.max_payload())));
                let path = self.paths.pick_retransmit_path_backlog(
                    now_ns,
                    wire_len(slot.len),
                    Some(usize::from(slot.path)),
                    backlog,
                )?;
                self.lost_count = self.lost_count.saturating_sub(1);
                self.retx_cursor = seq.saturating_add(1);
                return self.emit_slot(now_ns, seq, path, true, buf);
            }
            seq = seq.saturating_add(1);
        }
        // Nothing Lost in range: the count was stale (acknowledged after being declared lost).
        self.lost_count = 0;
        self.retx_cursor = self.snd_nxt;
        None
    }

    /// Sends a copy of the oldest packet flagged [`SF_HEDGE_DUE`] on another path, leaving
    /// the original in flight on its own (see [`Conn::detect_losses`]).
    fn build_hedge(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        if self.hedge_due == 0 {
            return None;
        }
        let mut seq = self.snd_una;
        while seq < self.snd_nxt {
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            if slot.flags & SF_HEDGE_DUE != 0 {
                let own = usize::from(slot.path);
                let bytes = wire_len(slot.len);
                let path =
                    self.paths
                        .pick_retransmit_path_backlog(now_ns, bytes, Some(own), u64::MAX)?;
                self.hedge_due = self.hedge_due.saturating_sub(1);
                let s = self.send.get_mut(slot_of(seq))?;
                s.flags &= !SF_HEDGE_DUE;
                if path == own {
                    // The packet's own path is the only one left: a copy would follow it.
                    return None;
                }
                let len = self.encode_slot(seq, path, buf)?;
                let s = self.send.get_mut(slot_of(seq))?;
                s.flags |= SF_HEDGED;
                s.hedge_path = u16::try_from(path).unwrap_or(u16::MAX);
                self.remember_for_dsack(seq, slot.path | HEDGE_MARK, slot.sent_ns);
                self.ack_carried();
                self.tx_order = self.tx_order.saturating_add(1);
                self.paths.on_sent(path, now_ns, bytes, true);
                if slot.flags & SF_FIN == 0 {
                    self.stats.data_sent = self.stats.data_sent.saturating_add(1);
                }
                self.stats.hedges = self.stats.hedges.saturating_add(1);
                return Some(slot_transmit(&slot, seq, path, len, true));
            }
            seq = seq.saturating_add(1);
        }
        self.hedge_due = 0;
        None
    }

    /// Drops the hedge state of send slot `seq`: a copy not yet sent is no longer wanted,
    /// and the bytes of a copy in flight leave its path's count (as lost if `lost`).
    /// Returns the path of the copy in flight, if there was one.
    fn clear_hedge(&mut self, now_ns: u64, seq: u64, lost: bool) -> Option<PathIdx> {
        let slot = self.send.get_mut(slot_of(seq))?;
        let flags = slot.flags;
        slot.flags &= !(SF_HEDGE_DUE | SF_HEDGED);
        let (copy, bytes) = (usize::from(slot.hedge_path), wire_len(slot.len));
        if flags & SF_HEDGE_DUE != 0 {
            self.hedge_due = self.hedge_due.saturating_sub(1);
        }
        if flags & SF_HEDGED == 0 {
            return None;
        }
        if lost {
            self.paths.on_timeout_loss(copy, now_ns, bytes);
        } else {
            self.paths.on_released(copy, bytes);
        }
        Some(copy)
    }

    /// Returns the new data, in wire bytes, that could be sent now if the paths had window
    /// room: the queued messages, as far as the peer's window and the send ring allow.
    fn sendable_bytes(&self) -> u64 {
        let used = self.snd_nxt.saturating_sub(self.peer_hold_base());
        let pkts = WINDOW_SEQ.saturating_sub(used);
        let mss = u64::from(self.cfg.max_payload());
        let payload = self
            .snd_queued
            .min(u64::from(self.peer_rwnd()))
            .min(pkts.saturating_mul(mss))
            .max(1);
        // Every packet but each message's last is full, so this rounds up slightly.
        payload.saturating_add(
            payload
                .div_ceil(mss.max(1))
                .saturating_mul(HEADER_LEN as u64),
        )
    }

    fn ring_full(&self) -> bool {
        self.snd_nxt.saturating_sub(self.peer_hold_base()) >= WINDOW_SEQ
    }

    /// Returns the first sequence number of the message at the cumulative ack: the peer keeps
    /// the payloads of an incomplete message, so its ring starts there (see [`WINDOW`]).
    fn peer_hold_base(&self) -> u64 {
        if self.snd_una >= self.snd_nxt {
            return self.snd_una;
        }
        let slot = self
            .send
            .get(slot_of(self.snd_una))
            .copied()
            .unwrap_or_default();
        // Every fragment but a message's last carries exactly `max_payload` bytes.
        let before = u64::from(slot.offset) / u64::from(self.cfg.max_payload().max(1));
        self.snd_una.saturating_sub(before)
    }

    fn build_new_data(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        let r = self.try_new_data(now_ns, buf);
        let limit = match r {
            Ok(_) => SendLimit::Sending,
            Err(l) => l,
        };
        self.send_clock.set(now_ns, limit);
        r.ok()
    }

    /// [`Conn::build_new_data`], or what held the data back.
    fn try_new_data(&mut self, now_ns: u64, buf: &mut [u8]) -> Result<Transmit, SendLimit> {
        if self.msgq_len == 0 {
            self.rwnd_closed_ns = None;
            return Err(SendLimit::App);
        }
        let msg_len = *self.msgq.get(self.msgq_head).ok_or(SendLimit::App)?;
        let remaining = msg_len.saturating_sub(self.head_offset);
        let len = remaining.min(self.cfg.max_payload());
        let in_window = self.snd_new_bytes.saturating_add(window_cost(len)) <= self.peer_edge;
        if in_window {
            self.rwnd_closed_ns = None;
        } else if self.rwnd_closed_ns.is_none() {
            self.rwnd_closed_ns = Some(now_ns);
        }
        if self.ring_full() {
            return Err(SendLimit::Ring);
        }
        let probe = !in_window && self.persist_probe;
        if !in_window && !probe {
            if self.snd_una == self.snd_nxt && self.rto_deadline.is_none() {
                // Closed window and nothing outstanding: only a window probe can reopen it
                // if the window update gets lost.
                self.persist = true;
                self.rto_deadline = Some(now_ns.saturating_add(self.poll_rto_ns()));
            }
            return Err(SendLimit::Rwnd);
        }
        // A window probe goes out alone whatever the backlog.
        let backlog = if probe {
            u64::MAX
        } else {
            self.sendable_bytes()
        };
        let bytes = wire_len(len);
        let path = self
            .paths
            .poll_pick_path(now_ns, bytes, backlog)
            .map_err(|why| match why {
                HeldBack::NoPath => SendLimit::NoPath,
                HeldBack::Window => SendLimit::Cwnd,
                HeldBack::Pacing => SendLimit::Pacing,
                HeldBack::Waiting => SendLimit::Sched,
            })?;
        if probe {
            self.persist_probe = false;
            self.stats.window_probes = self.stats.window_probes.saturating_add(1);
        }
        let mut flags = 0;
        if self.head_offset == 0 {
            flags |= SF_FIRST;
        }
        if len == remaining {
            flags |= SF_LAST;
        }
        let seq = self.snd_nxt;
        if probe {
            self.wprobe_seq = Some(seq);
        }
        let slot = self.send.get_mut(slot_of(seq)).ok_or(SendLimit::Ring)?;
        *slot = SendSlot {
            msg_id: self.msgq_head_id,
            offset: self.head_offset,
            len,
            flags,
            ..SendSlot::default()
        };
        self.snd_nxt = seq.saturating_add(1);
        self.snd_unknown = self.snd_unknown.saturating_add(u64::from(len));
        self.snd_new_bytes = self.snd_new_bytes.saturating_add(window_cost(len));
        self.snd_queued = self.snd_queued.saturating_sub(u64::from(len));
        if flags & SF_LAST != 0 {
            self.msgq_head = self.msgq_head.wrapping_add(1) % MSG_QUEUE;
            self.msgq_len = self.msgq_len.saturating_sub(1);
            self.msgq_head_id = self.msgq_head_id.saturating_add(1);
            self.head_offset = 0;
        } else {
            self.head_offset = self.head_offset.saturating_add(len);
        }
        self.emit_slot(now_ns, seq, path, false, buf)
            .ok_or(SendLimit::App)
    }

    fn build_fin(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<Transmit> {
        if !self.fin_queued || self.fin_seq.is_some() || self.msgq_len != 0 || self.ring_full() {
            return None;
        }
        let path = self
            .paths
            .pick_path(now_ns, wire_len(0))
            .or_else(|| self.paths.pick_retransmit_path(now_ns, wire_len(0), None))?;
        let seq = self.snd_nxt;
        let slot = self.send.get_mut(slot_of(seq))?;
        *slot = SendSlot {
            msg_id: self.next_msg_id,
            flags: SF_FIN,
            ..SendSlot::default()
        };
        self.fin_seq = Some(seq);
        self.fin_since_ns = now_ns;
        self.snd_nxt = seq.saturating_add(1);
        self.emit_slot(now_ns, seq, path, false, buf)
    }

    // -----------------------------------------------------------------------------------------
    // Input
    // -----------------------------------------------------------------------------------------

    /// Processes one packet that [`mrc_proto::decode`] accepted for this connection.
    ///
    /// A packet of another session is dropped as [`DropReason::WrongSession`], one whose
    /// [`Flags::PASSIVE`] bit equals this end's own ([`Conn::is_passive`]), so that it cannot
    /// come from the peer, as [`DropReason::Invalid`]. RSTs, acknowledgements and PROBE_ACKs
    /// count only with numbers that an attacker who knows the session id but does not see
    /// the traffic cannot guess (see "Blind attacks" in the module documentation).
    ///
    /// Afterwards the glue drains [`Conn::poll_event`] and [`Conn::poll_transmit`] and re-arms
    /// the timer.
    pub fn handle_packet(&mut self, now_ns: u64, pkt: &Packet<'_>) -> Input {
        self.handle_packet_ecn(now_ns, pkt, false)
    }

    /// [`Conn::handle_packet`] for a packet whose IP header's ECN field said congestion
    /// experienced (`ce`).
    ///
    /// ECN works per path. A new DATA packet that arrived marked is acknowledged at once, on
    /// the path it came by, with [`Flags::ECE`]; the sender charges the mark to the packets
    /// that ACK newly acknowledges on that path (the header's `path_id`), whose congestion
    /// controller then backs off by the marked fraction. Marks on other packet types carry
    /// no information about data and are ignored.
    pub fn handle_packet_ecn(&mut self, now_ns: u64, pkt: &Packet<'_>, ce: bool) -> Input {
        self.handle_packet_at(now_ns, now_ns, pkt, ce)
    }

    /// [`Conn::handle_packet_ecn`] for a packet that arrived at `arrived_ns` and is handled
    /// only now, at `now_ns`: it waited behind the packets that arrived with it, or for the
    /// task that held the connection.
    ///
    /// The round trips the packet ends (an acknowledgement of DATA, a probe's answer) are
    /// timed to its arrival, and the time this end holds an acknowledgement it owes (the
    /// delay it reports, [`Sack::delay_ns`]) from it. So a wait in this host, behind its own
    /// work, is not taken for a queue in the network: a delay-based congestion controller
    /// would shrink the paths' windows for it, and no smaller window makes it shorter. Times
    /// after `now_ns` are taken for `now_ns`.
    pub fn handle_packet_at(
        &mut self,
        now_ns: u64,
        arrived_ns: u64,
        pkt: &Packet<'_>,
        ce: bool,
    ) -> Input {
        let at_ns = arrived_ns.min(now_ns);
        let h = &pkt.header;
        self.last_now = self.last_now.max(now_ns);
        self.note_progress(now_ns);
        if h.session_id != self.session_id {
            return Input::Dropped(DropReason::WrongSession);
        }
        if matches!(self.state, State::Idle | State::Closed(_)) {
            return Input::Dropped(DropReason::BadState);
        }
        // Only the other role's packets are for this end: the active end receives packets
        // with the direction bit, the passive end packets without it.
        if h.flags.passive() == self.passive {
            return Input::Dropped(DropReason::Invalid);
        }
        // What the peer sends pays for what goes to its addresses not yet proven.
        let wire = h
            .wire_len()
            .map_or(0, |n| u64::try_from(n).unwrap_or(u64::MAX));
        self.paths
            .earn_validation_credit(wire.saturating_mul(AMPLIFICATION_FACTOR));
        match self.state {
            State::Idle | State::Closed(_) => Input::Dropped(DropReason::BadState),
            State::SynSent => self.input_syn_sent(now_ns, pkt),
            State::SynReceived => match pkt.body {
                Body::Syn(hs) => {
                    if !self.ports_match(&hs) {
                        return Input::Dropped(DropReason::Invalid);
                    }
                    // Our SYN_ACK was lost: send it again. The SYN adds to what may be sent.
                    self.amp_rx = self.amp_rx.saturating_add(handshake_len(&hs));
                    self.hs_due = true;
                    Input::Consumed
                }
                Body::Rst => self.input_rst(now_ns, h),
                // Whatever the peer sends once it has the SYN_ACK acknowledges it: the
                // probes with which it validates the paths to this end's endpoints too,
                // which can overtake its ACK by another path.
                Body::Ack(_) | Body::Data(_) | Body::Fin | Body::Probe(_) => {
                    if h.ack != self.isn {
                        return Input::Dropped(DropReason::Invalid);
                    }
                    self.establish(now_ns);
                    self.input_synchronized(now_ns, at_ns, pkt, ce)
                }
                _ => Input::Dropped(DropReason::BadState),
            },
            State::Established
            | State::FinWait
            | State::CloseWait
            | State::Closing
            | State::TimeWait => self.input_synchronized(now_ns, at_ns, pkt, ce),
        }
    }

    fn handshake_rtt_sample(&mut self, now_ns: u64) {
        // Karn: a retransmitted SYN makes the sample ambiguous.
        if self.hs_backoff != 0 {
            return;
        }
        if let Some(idx) = self.paths.find(self.hs_path_id) {
            let rtt = now_ns.saturating_sub(self.hs_sent_ns);
            self.paths.on_ack(idx, now_ns, 0, Some(rtt), false);
        }
    }

    fn establish(&mut self, now_ns: u64) {
        self.handshake_rtt_sample(now_ns);
        self.state = State::Established;
        // The peer echoed this end's initial sequence number, which only went to its
        // handshake address: it receives there.
        self.amp_limited = false;
        self.hs_due = false;
        self.hs_deadline = None;
        self.hs_backoff = 0;
        self.progress_ns = now_ns;
        self.push_event(Event::Connected);
    }

    fn input_syn_sent(&mut self, now_ns: u64, pkt: &Packet<'_>) -> Input {
        match pkt.body {
            Body::SynAck(hs) => {
                if pkt.header.ack != self.isn || !self.ports_match(&hs) {
                    return Input::Dropped(DropReason::Invalid);
                }
                self.take_peer_eps(&hs);
                self.start_recv_side(hs.initial_seq);
                self.peer_edge = u64::from(hs.rwnd);
                self.establish(now_ns);
                // The third leg of the handshake.
                self.ack_path_id = pkt.header.path_id;
                self.ack_now = true;
                Input::Consumed
            }
            Body::Rst => self.input_rst(now_ns, &pkt.header),
            Body::Retry => self.input_retry(&pkt.header),
            _ => Input::Dropped(DropReason::BadState),
        }
    }

    /// Takes a RETRY in SynSent: the listener asks for the SYN again with the token it carries
    /// (see "Retry" in [`mrc_proto`]). It must echo this end's initial sequence number, which
    /// only went to the listener, and at most [`MAX_RETRIES`] are taken per connect, so a
    /// forged or looping RETRY cannot keep the handshake from completing or failing.
    fn input_retry(&mut self, h: &Header) -> Input {
        if h.ack != self.isn || h.seq == 0 || self.retries >= MAX_RETRIES {
            return Input::Dropped(DropReason::BadRetry);
        }
        self.retries = self.retries.saturating_add(1);
        self.retry_token = h.seq;
        self.stats.retries = self.stats.retries.saturating_add(1);
        // At once, whatever the SYN's retransmission timer says.
        self.hs_due = true;
        Input::Consumed
    }

    /// Processes an RST, accepted only if its numbers show it comes from the peer (RFC 5961,
    /// 3.2), as an attacker who knows the session id but sees none of its packets cannot
    /// guess them.
    ///
    /// In SynSent its ack must be this end's initial sequence number: it answers the SYN.
    /// Later its sequence number must be exactly the next one expected (`rcv_nxt`): an RST
    /// the peer's connection sends carries its `snd_nxt`, one answering a packet of a session
    /// the peer no longer has carries that packet's ack. An RST within the receive window but
    /// not at its start gets a challenge ACK (see [`Conn::challenge_ack`]): if the peer really
    /// aborted, with data still on the way, its answer to the ACK is an RST with the right
    /// number. Every other RST is dropped.
    fn input_rst(&mut self, now_ns: u64, h: &Header) -> Input {
        if self.state == State::SynSent {
            if h.ack != self.isn {
                return Input::Dropped(DropReason::BadRst);
            }
            self.enter_closed(Some(ConnError::Refused));
            return Input::Consumed;
        }
        if h.seq == self.rcv_nxt {
            let err = if self.state == State::TimeWait {
                None
            } else {
                Some(ConnError::Reset)
            };
            self.enter_closed(err);
            return Input::Consumed;
        }
        if h.seq > self.rcv_nxt && h.seq < self.rcv_nxt.saturating_add(WINDOW_SEQ) {
            self.challenge_ack(now_ns, h.path_id);
        }
        Input::Dropped(DropReason::BadRst)
    }

    /// Asks for an ACK in answer to a DATA packet this end cannot take: beyond its receive
    /// window, or beyond its buffer. It tells an honest sender the window and what arrived;
    /// the window updates that follow as the application reads tell it the rest. A peer
    /// that ignores the window would get one ACK for each packet it floods, so at most
    /// [`REFUSAL_ACK_RATE`] go out a second (as TCP limits its answers to segments outside
    /// its window, `tcp_invalid_ratelimit`); an ACK already due answers the packet too. The
    /// answers not sent are counted in [`ConnStats::acks_limited`].
    fn answer_refused(&mut self, now_ns: u64) {
        if self.ack_now {
            return;
        }
        if self.refusal_acks.allow(now_ns) {
            self.ack_now = true;
        } else {
            self.stats.acks_limited = self.stats.acks_limited.saturating_add(1);
        }
    }

    /// Sends a challenge ACK (RFC 5961, 3.2 and 5.2), which tells the peer this end's
    /// `rcv_nxt` and `snd_nxt`, on the path `path_id` if the connection has it; in
    /// SynReceived, where no ACK goes out, the SYN_ACK is sent again instead. At most
    /// [`CHALLENGE_ACK_LIMIT`] go out per [`CHALLENGE_ACK_INTERVAL_NS`]; the rest are not
    /// sent.
    fn challenge_ack(&mut self, now_ns: u64, path_id: u32) {
        let since = self.challenge_since_ns;
        if now_ns < since || now_ns.saturating_sub(since) >= CHALLENGE_ACK_INTERVAL_NS {
            self.challenge_since_ns = now_ns;
            self.challenge_count = 0;
        }
        if self.challenge_count >= CHALLENGE_ACK_LIMIT {
            return;
        }
        self.challenge_count = self.challenge_count.saturating_add(1);
        self.stats.challenge_acks = self.stats.challenge_acks.saturating_add(1);
        if self.state == State::SynReceived {
            self.hs_due = true;
            return;
        }
        // An ECN echo stays on the path of the marked packet, as in `input_data`.
        if !self.ece_pending && self.paths.find(path_id).is_some() {
            self.ack_path_id = path_id;
        }
        self.ack_now = true;
    }

    fn input_synchronized(&mut self, now_ns: u64, at_ns: u64, pkt: &Packet<'_>, ce: bool) -> Input {
        let h = &pkt.header;
        // The path the packet arrived on, if the connection has it; nothing below adds or
        // removes paths.
        let arrived = self.paths.find(h.path_id);
        if let Some(idx) = arrived {
            self.paths.on_heard(idx, now_ns);
        }
        match pkt.body {
            Body::Rst => self.input_rst(now_ns, h),
            Body::Syn(_) => Input::Dropped(DropReason::BadState),
            Body::Retry => Input::Dropped(DropReason::BadRetry),
            Body::SynAck(hs) => {
                if !self.ports_match(&hs) {
                    return Input::Dropped(DropReason::Invalid);
                }
                // Our handshake ACK was lost and the peer repeats its SYN_ACK.
                if self.rcv_nxt == self.peer_isn {
                    self.ack_path_id = h.path_id;
                    self.ack_now = true;
                }
                Input::Consumed
            }
            Body::Ack(sack) => {
                self.stats.acks_received = self.stats.acks_received.saturating_add(1);
                if self.state == State::TimeWait {
                    return Input::Consumed;
                }
                if h.flags.ece() {
                    self.stats.ece_received = self.stats.ece_received.saturating_add(1);
                }
                let from = AckFrom {
                    path: arrived,
                    ece: h.flags.ece(),
                    delay_ns: u64::from(sack.delay_ns),
                    at_ns,
                };
                if self.process_ack(now_ns, h.ack, Some(&sack), from) {
                    Input::Consumed
                } else {
                    Input::Dropped(DropReason::Invalid)
                }
            }
            Body::Data(payload) => {
                self.input_data(now_ns, at_ns, h, payload.len(), false, ce, arrived)
            }
            Body::Fin => self.input_data(now_ns, at_ns, h, 0, true, false, arrived),
            Body::Probe(probe) => {
                if self.probe_replies_len < PROBE_REPLY_QUEUE {
                    if let Some(slot) = self.probe_replies.get_mut(self.probe_replies_len) {
                        *slot = (h.path_id, probe);
                        self.probe_replies_len = self.probe_replies_len.saturating_add(1);
                    }
                }
                Input::Consumed
            }
            Body::ProbeAck(probe) => {
                // Only the answer to a probe of the path it arrived on counts; its RTT is
                // timed from when this end sent the probe, not from the echoed `ts`.
                let Some(idx) = arrived else {
                    return Input::Dropped(DropReason::BadProbe);
                };
                let unvalidated = self.paths.get(idx).is_some_and(|p| !p.is_validated());
                match self.paths.on_probe_answer(idx, at_ns, probe.nonce) {
                    Ok(_) => {
                        if unvalidated {
                            self.on_path_validated(now_ns, idx);
                        }
                        Input::Consumed
                    }
                    Err(UnknownProbe) => Input::Dropped(DropReason::BadProbe),
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Acknowledgements received
    // -----------------------------------------------------------------------------------------

    /// Marks the packet at `seq` as delivered; returns whether it was newly so.
    fn deliver_slot(&mut self, now_ns: u64, seq: u64, from: AckFrom) -> bool {
        let Some(slot) = self.send.get(slot_of(seq)).copied() else {
            return false;
        };
        match slot.state {
            SlotState::InFlight if slot.flags & SF_HEDGED != 0 => {
                // Either copy may have arrived. The peer answers by the path of the latest
                // packet it got, so an answer by the original's path credits that path (with
                // no RTT sample: the copy may have arrived first); any other answer credits
                // neither, lest a dead path be kept alive by its copies.
                self.clear_hedge(now_ns, seq, false);
                let (path, bytes) = (usize::from(slot.path), wire_len(slot.len));
                if from.path == Some(path) {
                    self.paths
                        .on_ack_by_way_of(path, from.path, now_ns, bytes, None, 0, false);
                } else {
                    self.paths.on_released(path, bytes);
                }
            }
            SlotState::InFlight => {
                self.clear_hedge(now_ns, seq, false);
                let path = usize::from(slot.path);
                let ece = from.ece && from.path == Some(path);
                let sample = from.at_ns.saturating_sub(slot.sent_ns);
                let rtt = (slot.tx_count == 1).then_some(sample);
                let len = wire_len(slot.len);
                self.paths
                    .on_ack_by_way_of(path, from.path, now_ns, len, rtt, from.delay_ns, ece);
                // The acknowledgement of a resend may be the original's, which came by
                // another path: it tells something about the resend only if it came back by
                // the resend's path (the peer answers by the path of the packet it got last)
                // and no faster than that path's fastest RTT.
                let plausible = slot.tx_count == 1
                    || (from.path == Some(path)
                        && sample
                            >= self
                                .paths
                                .get(path)
                                .and_then(|p| p.min_rtt_ns())
                                .unwrap_or(0));
                if plausible {
                    if let Some(e) = self.paths.extra_mut(path) {
                        e.rack_order = e.rack_order.max(slot.tx_order);
                    }
                    self.acked_order = self.acked_order.max(slot.tx_order);
                }
            }
            SlotState::Lost => {
                // Arrived after all; its retransmission is no longer needed.
                self.lost_count = self.lost_count.saturating_sub(1);
                if slot.flags & SF_RACK != 0 {
                    self.on_spurious_loss(now_ns, usize::from(slot.path));
                }
            }
            SlotState::Sacked | SlotState::Free => return false,
        }
        self.snd_unknown = self.snd_unknown.saturating_sub(u64::from(slot.len));
        if let Some(s) = self.send.get_mut(slot_of(seq)) {
            s.state = SlotState::Sacked;
        }
        true
    }

    /// Processes a cumulative ack and an optional SACK; returns false, and changes nothing, if
    /// the ack is invalid: beyond `snd_nxt` (data never sent) or more than [`WINDOW`] below
    /// `snd_una`, older than any the peer can have sent since this end had that much in
    /// flight (TCP's `SND.UNA - MAX.SND.WND`, RFC 5961, 5.2), which a blind attacker is
    /// likely to send. `from` tells the path the acknowledgement came by and whether it
    /// echoes an ECN mark: the newly acknowledged packets of that path count as marked.
    fn process_ack(
        &mut self,
        now_ns: u64,
        cum: u64,
        sack: Option<&Sack<'_>>,
        from: AckFrom,
    ) -> bool {
        if cum > self.snd_nxt || cum < self.snd_una.saturating_sub(WINDOW_SEQ) {
            return false;
        }
        if let Some(seq) = sack.and_then(|s| s.dsack.checked_sub(1)) {
            self.on_dsack(now_ns, seq, from);
        }
        let mut progress = false;
        while self.snd_una < cum {
            let seq = self.snd_una;
            self.deliver_slot(now_ns, seq, from);
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            self.snd_buffered = self.snd_buffered.saturating_sub(u64::from(slot.len));
            if slot.flags & SF_LAST != 0 {
                self.acked_msgs = self.acked_msgs.max(slot.msg_id.saturating_add(1));
            }
            if slot.flags & SF_FIN != 0 {
                self.fin_acked = true;
                self.fin_since_ns = now_ns;
            }
            if let Some(s) = self.send.get_mut(slot_of(seq)) {
                *s = SendSlot::default();
            }
            self.snd_una = seq.saturating_add(1);
            progress = true;
        }
        if let Some(sack) = sack {
            self.update_peer_edge(sack.rwnd);
            for seq in sack.sacked() {
                if seq >= self.snd_nxt {
                    break;
                }
                if seq >= self.snd_una && self.deliver_slot(now_ns, seq, from) {
                    progress = true;
                }
            }
            self.resend_window_probe(now_ns);
            if self.persist || self.peer_rwnd() < self.cfg.max_payload() {
                // The peer is alive and has told its window: a closed window is not a dead
                // peer, and waiting for it to open is no lack of progress, even while a window
                // probe it had no room for is outstanding (RFC 1122, 4.2.2.17: the sender stays
                // open as long as the receiver answers its probes). The probes still back off:
                // an answer that keeps the window closed does not reset the backoff.
                self.progress_ns = now_ns;
                if self.snd_una == self.snd_nxt {
                    self.rto_deadline = None;
                    self.persist = false;
                }
            }
        }
        if progress {
            self.progress_ns = now_ns;
            self.rto_backoff = 0;
            self.persist = false;
            self.rto_deadline = if self.snd_una < self.snd_nxt {
                Some(now_ns.saturating_add(self.poll_rto_ns()))
            } else {
                None
            };
            self.detect_losses(now_ns);
        }
        if self.fin_acked {
            match self.state {
                State::FinWait | State::Closing => self.maybe_finish(now_ns),
                _ => {}
            }
        }
        true
    }

    /// Declares the latest window probe lost once the peer's window has opened without it
    /// being acknowledged.
    ///
    /// A probe sent into a closed window is usually dropped by the receiver, and its path
    /// cannot tell that by time (RACK looks at one path, and nothing else is sent on that
    /// path meanwhile), so it would otherwise wait for a retransmission timeout while the
    /// packets sent behind it on other paths are held up at the receiver.
    fn resend_window_probe(&mut self, now_ns: u64) {
        let Some(seq) = self.wprobe_seq else {
            return;
        };
        let in_flight = seq >= self.snd_una
            && seq < self.snd_nxt
            && self
                .send
                .get(slot_of(seq))
                .is_some_and(|s| s.state == SlotState::InFlight);
        if !in_flight {
            self.wprobe_seq = None;
        } else if self.peer_rwnd() >= self.cfg.max_payload() {
            self.wprobe_seq = None;
            self.mark_lost(now_ns, seq);
        }
    }

    /// Returns the multiple of the base reorder window a path uses at `now_ns`: it halves
    /// every [`REORDER_DECAY_NS`] after the latest needless retransmission.
    fn reorder_mult(&self, path: PathIdx, now_ns: u64) -> u64 {
        self.paths
            .extra(path)
            .map_or(1, |e| e.reorder.rack.get(now_ns))
    }

    /// Returns the RACK reorder window of a path: a quarter of its minimum RTT (at least
    /// [`ConnConfig::reorder_min_ns`]), times a multiple that needless retransmissions raise,
    /// but no more than the smoothed RTT (RFC 8985, 6.2).
    fn reorder_window(&self, path: PathIdx, now_ns: u64) -> u64 {
        let p = self.paths.get(path);
        let min_rtt = p.and_then(|p| p.min_rtt_ns()).unwrap_or(0);
        let base = (min_rtt / 4).max(self.cfg.reorder_min_ns);
        let cap = p.and_then(|p| p.srtt_ns()).unwrap_or(0).max(base);
        base.saturating_mul(self.reorder_mult(path, now_ns))
            .min(cap)
    }

    /// A RACK loss on `path` proved needless: the path reorders more than its window allows.
    /// The window doubles, at most once per round trip, and the path's congestion controller
    /// may undo its cut.
    fn on_spurious_loss(&mut self, now_ns: u64, path: PathIdx) {
        self.stats.spurious_losses = self.stats.spurious_losses.saturating_add(1);
        self.paths.on_needless_loss(path);
        self.widen(now_ns, path, false);
    }

    /// Widens `path`'s hedge wait if `hedge`, else its reorder window, after a needless
    /// retransmission (see [`Widening::widen`]); a needless copy also doubles the hedge
    /// wait of the plane's other paths that have not widened theirs.
    ///
    /// The paths of a plane share its queues: a copy that proved needless says that the
    /// plane holds packets longer than the wait, on any of its paths. Each path learning
    /// alone learned too slowly where many connections share a deep queue: with 100
    /// connections of 17 paths each over four 50 Mbit/s planes, 11 % of the DATA packets
    /// were copies or resends, nearly all of which arrived second. The other paths take the
    /// lesson once (to twice the base), not each time: a path whose own copies proved
    /// needless waits longer still, while one that goes dark is not held to all that its
    /// neighbours learned, which would lengthen the gap when a plane fails.
    fn widen(&mut self, now_ns: u64, path: PathIdx, hedge: bool) {
        let Some(plane) = self.paths.get(path).map(|p| p.ids().plane) else {
            return;
        };
        self.widen_one(now_ns, path, hedge, u64::MAX);
        if !hedge {
            return;
        }
        for idx in 0..self.paths.index_end() {
            if idx != path && self.paths.get(idx).is_some_and(|p| p.ids().plane == plane) {
                self.widen_one(now_ns, idx, true, 2);
            }
        }
    }

    /// Widens the hedge wait (`hedge`) or the reorder window of path `idx`, unless its
    /// multiple has reached `below` already.
    fn widen_one(&mut self, now_ns: u64, idx: PathIdx, hedge: bool, below: u64) {
        let srtt = self.paths.get(idx).and_then(|p| p.srtt_ns()).unwrap_or(0);
        if let Some(e) = self.paths.extra_mut(idx) {
            let r = &mut e.reorder;
            let w = if hedge { &mut r.hedge } else { &mut r.rack };
            if w.get(now_ns) < below {
                w.widen(now_ns, srtt);
            }
        }
    }

    /// The peer received `seq` twice: if RACK had declared it lost, or a copy of it went on
    /// another path, that was needless.
    ///
    /// A needless hedge also means that the original arrived after all, just late: the
    /// D-SACK times it (at most this late; the copy may have been the one that came second),
    /// so that the scheduler learns how slow its path has become, which the copy's answer
    /// hid.
    fn on_dsack(&mut self, now_ns: u64, seq: u64, from: AckFrom) {
        let hit = self
            .rack_lost
            .iter_mut()
            .find(|e| e.seq == seq && e.path != u16::MAX);
        if let Some(entry) = hit {
            let e = *entry;
            *entry = Resent::NONE;
            let (path, hedge) = (usize::from(e.path & !HEDGE_MARK), e.path & HEDGE_MARK != 0);
            if hedge {
                self.stats.spurious_hedges = self.stats.spurious_hedges.saturating_add(1);
                let rtt = from.at_ns.saturating_sub(e.sent_ns);
                self.paths
                    .on_ack_by_way_of(path, from.path, now_ns, 0, Some(rtt), 0, false);
                self.widen(now_ns, path, true);
            } else {
                self.on_spurious_loss(now_ns, path);
            }
        }
    }

    /// RACK: declares lost every packet in flight that was sent before an acknowledged packet
    /// on the same path and is older than that path's RTT plus the reorder window; flags for a
    /// hedge every packet that only packets on other paths have overtaken and that is older
    /// than [`Conn::hedge_wait`] (see the module documentation); arms the reorder timer for
    /// the ones that are not old enough yet.
    fn detect_losses(&mut self, now_ns: u64) {
        self.rack_deadline = None;
        let mut seq = self.snd_una;
        while seq < self.snd_nxt {
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            if slot.state == SlotState::InFlight {
                if slot.tx_count == 1 && slot.tx_order >= self.acked_order {
                    // First transmissions leave in sequence order, and a packet's send order
                    // only grows when it is resent: every packet from here on was sent after
                    // the newest one acknowledged, so nothing has overtaken it.
                    break;
                }
                let path = usize::from(slot.path);
                let newest = self.paths.extra(path).map_or(0, |e| e.rack_order);
                if slot.tx_order < newest {
                    let srtt = self
                        .paths
                        .get(path)
                        .and_then(|p| p.srtt_ns())
                        .unwrap_or(self.cfg.path.initial_rtt_ns);
                    let due = slot
                        .sent_ns
                        .saturating_add(srtt)
                        .saturating_add(self.reorder_window(path, now_ns));
                    if now_ns >= due {
                        self.mark_lost(now_ns, seq);
                        self.note_rack_loss(seq, slot.path);
                        self.stats.rack_losses = self.stats.rack_losses.saturating_add(1);
                    } else {
                        self.rack_deadline = min_opt(self.rack_deadline, Some(due));
                    }
                } else if slot.tx_order < self.acked_order
                    && slot.flags & (SF_HEDGE_DUE | SF_HEDGED) == 0
                {
                    let due = self
                        .hedge_wait(path, now_ns)
                        .map(|w| slot.sent_ns.saturating_add(w));
                    if due.is_some_and(|d| now_ns >= d) {
                        if let Some(s) = self.send.get_mut(slot_of(seq)) {
                            s.flags |= SF_HEDGE_DUE;
                            self.hedge_due = self.hedge_due.saturating_add(1);
                        }
                    } else {
                        self.rack_deadline = min_opt(self.rack_deadline, due);
                    }
                }
            }
            seq = seq.saturating_add(1);
        }
    }

    /// Returns how long after it was sent a packet on `path` that nothing later on that path
    /// has overtaken is overdue, once a packet sent after it on another path was
    /// acknowledged: the path's srtt plus four times its variance or plus its reorder window,
    /// whichever is longer, at least 5/4 of its RTT peak of the last 125 to 250 ms, times the
    /// multiple that needless hedges raised. `None` while the path has no RTT sample: nothing
    /// says yet how late is late.
    fn hedge_wait(&self, path: PathIdx, now_ns: u64) -> Option<u64> {
        let p = self.paths.get(path)?;
        let srtt = p.srtt_ns()?;
        let var = p.rttvar_ns().unwrap_or(0);
        let mult = self
            .paths
            .extra(path)
            .map_or(1, |e| e.reorder.hedge.get(now_ns));
        Some(
            srtt.saturating_add(var.saturating_mul(4).max(self.reorder_window(path, now_ns)))
                .max(p.recent_late_answer_ns())
                .saturating_mul(mult),
        )
    }

    /// Remembers a RACK loss declaration, so that a D-SACK or a late ack can prove it needless.
    fn note_rack_loss(&mut self, seq: u64, path: u16) {
        if let Some(s) = self.send.get_mut(slot_of(seq)) {
            s.flags |= SF_RACK;
        }
        self.remember_for_dsack(seq, path, 0);
    }

    /// Remembers `seq`, sent again although it was perhaps not lost on `path` (a RACK loss,
    /// or a hedge with [`HEDGE_MARK`], of the original sent at `sent_ns`), so that a D-SACK
    /// can prove that needless.
    fn remember_for_dsack(&mut self, seq: u64, path: u16, sent_ns: u64) {
        if let Some(e) = self.rack_lost.get_mut(self.rack_lost_next) {
            *e = Resent { seq, path, sent_ns };
        }
        self.rack_lost_next = (self.rack_lost_next + 1) % RACK_LOST_RING;
    }

    fn mark_lost(&mut self, now_ns: u64, seq: u64) {
        self.mark_lost_by(now_ns, seq, false);
    }

    /// [`Conn::mark_lost`], for a loss declared by the retransmission timeout if `timeout`.
    fn mark_lost_by(&mut self, now_ns: u64, seq: u64, timeout: bool) {
        let Some(slot) = self.send.get_mut(slot_of(seq)) else {
            return;
        };
        if slot.state != SlotState::InFlight {
            return;
        }
        let (path, len) = (usize::from(slot.path), slot.len);
        if let Some(copy) = self.clear_hedge(now_ns, seq, timeout) {
            if !timeout {
                // The copy on another path stands in for the lost original.
                let _ = self.paths.on_loss(path, now_ns, wire_len(len));
                self.tx_order = self.tx_order.saturating_add(1);
                if let Some(slot) = self.send.get_mut(slot_of(seq)) {
                    slot.path = u16::try_from(copy).unwrap_or(u16::MAX);
                    slot.sent_ns = now_ns;
                    slot.tx_order = self.tx_order;
                    slot.tx_count = slot.tx_count.saturating_add(1);
                }
                return;
            }
        }
        let Some(slot) = self.send.get_mut(slot_of(seq)) else {
            return;
        };
        slot.state = SlotState::Lost;
        slot.flags &= !SF_RACK;
        self.lost_count = self.lost_count.saturating_add(1);
        self.retx_cursor = self.retx_cursor.min(seq);
        // The path's state change, if any, is picked up by the failure detector's timer.
        if timeout {
            self.paths.on_timeout_loss(path, now_ns, wire_len(len));
        } else {
            let _ = self.paths.on_loss(path, now_ns, wire_len(len));
        }
    }

    /// Returns the RFC 6298 RTO before backoff: the largest over the paths that can carry data.
    fn rto_base(&self) -> u64 {
        let mut rto = 0u64;
        let mut all = 0u64;
        for (i, p) in self.paths.iter() {
            let r = self.paths.rto_ns(i).unwrap_or(0);
            all = all.max(r);
            if p.state() != PathState::Failed {
                rto = rto.max(r);
            }
        }
        self.rto_base_of(rto, all)
    }

    /// [`Conn::rto_base`] from the largest RTO of the paths not Failed and of all paths.
    fn rto_base_of(&self, rto: u64, all: u64) -> u64 {
        let rto = if rto == 0 { all } else { rto };
        if rto == 0 {
            self.cfg
                .path
                .initial_rtt_ns
                .saturating_mul(3)
                .max(self.cfg.path.rto_min_ns)
                .max(1)
        } else {
            rto
        }
    }

    // -----------------------------------------------------------------------------------------
    // Data received
    // -----------------------------------------------------------------------------------------

    /// Returns where a DATA (or, with `fin`, FIN) packet with sequence number `seq` falls
    /// relative to the receive window.
    fn rcv_seq_check(&self, seq: u64, fin: bool) -> RcvSeq {
        if self.peer_fin.is_some_and(|f| seq > f || (fin && seq != f)) {
            RcvSeq::AfterFin
        } else if seq < self.rcv_nxt {
            RcvSeq::Old
        } else if seq >= self.msg_first.saturating_add(WINDOW_SEQ) || (fin && seq < self.rcv_high) {
            // Payloads are held from the start of the message being reassembled (see
            // [`WINDOW`]).
            RcvSeq::Beyond
        } else {
            RcvSeq::InWindow
        }
    }

    /// Processes a DATA (or, with `fin`, FIN) packet that arrived on path `arrived`, with its
    /// acknowledgement unless in TimeWait.
    ///
    /// The sequence number is checked first, as TCP does: the acknowledgement of a packet
    /// outside the receive window is ignored, since an attacker who knows the session id
    /// could otherwise acknowledge data the peer never received by luck. The ack of a
    /// duplicate less than [`WINDOW`] old still counts, as Linux accepts segments from the
    /// last window it advertised: a retransmission or hedged copy carries its sender's
    /// latest ack, which the peer may have sent nowhere else. A packet within the window
    /// whose ack is invalid (see [`Conn::process_ack`]) is dropped unstored and answered with
    /// a challenge ACK.
    #[allow(clippy::too_many_arguments)]
    fn input_data(
        &mut self,
        now_ns: u64,
        at_ns: u64,
        h: &Header,
        len: usize,
        fin: bool,
        ce: bool,
        arrived: Option<PathIdx>,
    ) -> Input {
        let seq = h.seq;
        self.arrived_ns = at_ns;
        // The ACK goes back by the latest path, except that an ECN echo stays on the path of
        // the marked packet it reports.
        if ce || !self.ece_pending {
            self.ack_path_id = h.path_id;
        }
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let check = self.rcv_seq_check(seq, fin);
        let ack_counts = match check {
            RcvSeq::InWindow => true,
            RcvSeq::Old => seq >= self.rcv_nxt.saturating_sub(WINDOW_SEQ),
            RcvSeq::AfterFin | RcvSeq::Beyond => false,
        };
        let ack_ok = !ack_counts
            || self.state == State::TimeWait
            || self.process_ack(now_ns, h.ack, None, AckFrom::plain(arrived, at_ns));
        match check {
            RcvSeq::AfterFin => {
                self.ack_now = true;
                return Input::Dropped(DropReason::OutOfWindow);
            }
            RcvSeq::Old => {
                // The peer has not seen our ack: tell it again.
                self.ack_now = true;
                if self.state == State::TimeWait {
                    // A retransmission: the peer still needs us, so linger as long again.
                    self.tw_deadline = Some(now_ns.saturating_add(self.time_wait()));
                }
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                self.dsack = seq.saturating_add(1);
                return Input::Dropped(DropReason::Duplicate);
            }
            RcvSeq::Beyond => {
                self.answer_refused(now_ns);
                self.stats.rcv_dropped = self.stats.rcv_dropped.saturating_add(1);
                return Input::Dropped(DropReason::OutOfWindow);
            }
            RcvSeq::InWindow => {}
        }
        if !ack_ok {
            // TCP drops a segment with an unacceptable ack and answers with an ACK.
            self.challenge_ack(now_ns, h.path_id);
            return Input::Dropped(DropReason::Invalid);
        }
        let Some(slot) = self.recv.get(slot_of(seq)).copied() else {
            return Input::Dropped(DropReason::OutOfWindow);
        };
        if slot.flags & SF_ARRIVED != 0 {
            self.ack_now = true;
            self.stats.duplicates = self.stats.duplicates.saturating_add(1);
            self.dsack = seq.saturating_add(1);
            return Input::Dropped(DropReason::Duplicate);
        }
        if !fin {
            let used = self.rcv_held.saturating_add(self.rcv_unread);
            let fits = used.saturating_add(window_cost(len)) <= u64::from(self.cfg.rcvbuf);
            // The packet at the cumulative ack is always taken while the application has
            // nothing to read, or a buffer full of out-of-order data would block forever. The
            // send ring bounds what this can hold.
            let head = seq == self.rcv_nxt && self.rcv_unread == 0;
            if !(fits || head) {
                self.answer_refused(now_ns);
                self.stats.rcv_dropped = self.stats.rcv_dropped.saturating_add(1);
                return Input::Dropped(DropReason::NoBuffer);
            }
        }
        let mut flags = SF_ARRIVED;
        if fin {
            flags |= SF_FIN;
            self.peer_fin = Some(seq);
        } else {
            if h.flags.first() {
                flags |= SF_FIRST;
            }
            if h.flags.last() {
                flags |= SF_LAST;
            }
            self.rcv_held = self.rcv_held.saturating_add(window_cost(len));
            self.stats.data_received = self.stats.data_received.saturating_add(1);
            if ce {
                self.stats.ce_received = self.stats.ce_received.saturating_add(1);
                self.ece_pending = true;
            }
        }
        if let Some(s) = self.recv.get_mut(slot_of(seq)) {
            *s = RecvSlot { len, flags };
        }
        let had_gap = self.rcv_high > self.rcv_nxt;
        let in_order = seq == self.rcv_nxt;
        self.rcv_high = self.rcv_high.max(seq.saturating_add(1));
        self.advance_rcv();
        self.schedule_ack(now_ns, fin, had_gap, in_order, arrived);
        if fin {
            Input::Consumed
        } else {
            Input::Store { seq }
        }
    }

    /// Decides when the DATA or FIN packet just stored is acknowledged: the receiver's
    /// acknowledgement policy. `had_gap` tells whether a packet was missing before it came,
    /// `in_order` whether it is the one at `rcv_nxt`, `arrived` the path it came by.
    ///
    /// An ACK is due at once (at the next [`Conn::poll_transmit`]) when the packet
    ///
    /// - opens a hole: it lies beyond `rcv_nxt` while nothing was missing, so the sender
    ///   learns at once that a packet is missing, and which;
    /// - fills the hole at the cumulative ack: it is the packet at `rcv_nxt` while later
    ///   ones wait. That is the oldest packet the sender has no news of: the one its RACK
    ///   timer is closest to declaring lost, or the retransmission its recovery waits for;
    ///   and the ACK moves the sender's `snd_una`, which frees its ring and its messages;
    /// - is a FIN, or carries a CE mark to echo (on its own path, see [`Conn::build_ack`]);
    /// - makes [`ConnConfig::ack_every`] packets unacknowledged.
    ///
    /// [`Conn::input_data`] also answers at once, without coming here, a duplicate (with a
    /// D-SACK), a packet beyond the window or after the FIN, one dropped for lack of buffer,
    /// and one whose ack is invalid (a challenge ACK).
    ///
    /// Any other packet counts towards `ack_every` and waits:
    ///
    /// - in order with nothing missing, for at most [`ConnConfig::delack_ns`], so that the
    ///   reply to a request carries the acknowledgement (see [`Conn::ack_carried`]);
    /// - behind a hole (it neither opens a hole nor fills the one at `rcv_nxt`: most of the
    ///   packets that spraying over paths brings out of order), for at most a 64th of the
    ///   path's minimum RTT (see [`Conn::gap_ack_delay`]). Packets that arrive together, in
    ///   one batch from the glue or within microseconds of each other over several paths,
    ///   share an ACK; one that arrives alone is answered almost at once, by its own path.
    ///
    /// Every packet that found or left a hole used to be acknowledged at once: with packets
    /// sprayed over many paths, nearly one ACK per DATA packet (0.6 to 0.9 measured on
    /// hosts, 0.93 to 1.0 in the simulations). Now 0.51 to 0.61 in `multipath_sim`'s sprayed
    /// transfers, and 0.74 (0.66 in batches) between `cpu_sim`'s two-CPU hosts, whose packets
    /// arrive apart. What the sender's loss recovery waits for still leaves at once, and a
    /// sender whose window is full is not starved: fewer than `ack_every` packets wait, and
    /// not for long. When the glue hands over several packets before it polls, any number
    /// of triggers among them give one ACK.
    ///
    /// The wait behind a hole is short for two reasons. One ACK answers packets of several
    /// paths by one of them (the latest packet's, see [`Conn::input_data`]), while the sender
    /// times a path, credits a hedged packet's path and tells a silent path by the answers that
    /// come back by that path; where each host's CPUs serve some of the paths (RSS), an answer
    /// by another path carries other CPUs' queues. Between `cpu_sim`'s two-CPU hosts, waiting a
    /// 16th of the RTT made paths leave Active for nothing 38 times in 48 transfers rather than
    /// 19 (a 64th: 11), and sent 58 % more copies of overdue packets on other paths (hedges).
    /// And a late packet whose ACK waits, while that of a later one on its path has gone, loses
    /// as much of the sender's reorder window (RACK declares a packet lost once a later one on
    /// its path is acknowledged and it is older than the srtt plus a quarter of the minimum
    /// RTT): waiting [`ConnConfig::delack_ns`] there declared 2.9 times as many packets lost
    /// for nothing over `multipath_sim`'s paths that reorder within that window, a 64th of the
    /// RTT 1.4 times (the packets that arrive together).
    ///
    /// The sender cannot ask for an ACK (for the last packet it may send before its window
    /// is full, say, or a retransmission above the cumulative ack): that needs a flag on DATA,
    /// a change of the wire format (every spare bit must be zero, see [`mrc_proto::Flags`]).
    fn schedule_ack(
        &mut self,
        now_ns: u64,
        fin: bool,
        had_gap: bool,
        in_order: bool,
        arrived: Option<PathIdx>,
    ) {
        self.ack_pending = true;
        self.unacked_pkts = self.unacked_pkts.saturating_add(1);
        let opens = !had_gap && !in_order;
        let fills = had_gap && in_order;
        if fin
            || opens
            || fills
            || self.ece_pending
            || self.unacked_pkts >= self.cfg.ack_every.max(1)
        {
            self.ack_now = true;
            return;
        }
        let wait = if self.rcv_high > self.rcv_nxt {
            self.gap_ack_delay(arrived)
        } else {
            self.cfg.delack_ns
        };
        self.ack_deadline = min_opt(self.ack_deadline, Some(now_ns.saturating_add(wait)));
    }

    /// Returns how long an acknowledgement may wait while a packet is missing (see
    /// [`Conn::schedule_ack`]): a 64th of the minimum RTT of the path the latest packet came
    /// by, or of the handshake's path while that one has none (a receiver times only the
    /// paths it probes), or of [`PathConfig::initial_rtt_ns`] without either; at most
    /// [`ConnConfig::delack_ns`].
    fn gap_ack_delay(&self, arrived: Option<PathIdx>) -> u64 {
        let min_rtt = |idx: Option<PathIdx>| {
            idx.and_then(|i| self.paths.get(i))
                .and_then(|p| p.min_rtt_ns())
        };
        let rtt = min_rtt(arrived)
            .or_else(|| min_rtt(self.paths.find(self.hs_path_id)))
            .unwrap_or(self.cfg.path.initial_rtt_ns);
        (rtt / GAP_ACK_RTT_DIV).min(self.cfg.delack_ns)
    }

    /// Moves the cumulative ack over every packet that has arrived in order, reporting each
    /// completed message and the peer's FIN.
    fn advance_rcv(&mut self) {
        while self.rcv_nxt < self.rcv_high {
            let idx = slot_of(self.rcv_nxt);
            let Some(slot) = self.recv.get(idx).copied() else {
                return;
            };
            if slot.flags & SF_ARRIVED == 0 {
                return;
            }
            if self.ev_len >= EVENT_QUEUE.saturating_sub(EVENT_RESERVE) {
                return;
            }
            let seq = self.rcv_nxt;
            if slot.flags & SF_FIN != 0 {
                self.push_event(Event::PeerFin);
                self.on_peer_fin_delivered();
            } else {
                if slot.flags & SF_FIRST != 0 {
                    self.msg_first = seq;
                    self.msg_len = 0;
                    self.msg_cost = 0;
                }
                self.msg_len = self.msg_len.saturating_add(u64::from(slot.len));
                self.msg_cost = self.msg_cost.saturating_add(window_cost(slot.len));
                if self.msg_len > u64::from(self.cfg.max_msg) {
                    self.rst_due = Some(self.ack_path_id);
                    self.enter_closed(Some(ConnError::Protocol));
                    return;
                }
                if slot.flags & SF_LAST != 0 {
                    let len = u32::try_from(self.msg_len).unwrap_or(u32::MAX);
                    self.push_event(Event::Message {
                        first_seq: self.msg_first,
                        last_seq: seq,
                        len,
                        cost: self.msg_cost,
                    });
                    self.rcv_held = self.rcv_held.saturating_sub(self.msg_cost);
                    self.rcv_unread = self.rcv_unread.saturating_add(self.msg_cost);
                    self.rcv_unread_bytes = self.rcv_unread_bytes.saturating_add(self.msg_len);
                    self.stats.msgs_delivered = self.stats.msgs_delivered.saturating_add(1);
                    self.msg_len = 0;
                    self.msg_cost = 0;
                    self.msg_first = seq.saturating_add(1);
                }
            }
            if let Some(s) = self.recv.get_mut(idx) {
                *s = RecvSlot::default();
            }
            self.rcv_nxt = seq.saturating_add(1);
        }
    }

    fn on_peer_fin_delivered(&mut self) {
        self.peer_fin_done = true;
        self.ack_now = true;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait => {
                self.state = State::Closing;
                self.maybe_finish(self.last_now);
            }
            _ => {}
        }
    }

    /// Reports that the application consumed (or discarded) `bytes` of delivered messages,
    /// and whole packets of them that took `cost` of the receive window ([`window_cost`] of
    /// each; a packet read in part gives its window back once it is read to the end). This
    /// reopens the window.
    pub fn release_recv(&mut self, bytes: u64, cost: u64) {
        self.rcv_unread_bytes = self.rcv_unread_bytes.saturating_sub(bytes);
        let cost = cost.min(self.rcv_unread);
        self.rcv_unread = self.rcv_unread.saturating_sub(cost);
        self.rcv_released = self.rcv_released.saturating_add(cost);
        if !self.state.is_synchronized() {
            return;
        }
        let now = self.rwnd();
        let mss = self.cfg.max_payload();
        let step = (self.cfg.rcvbuf / 4).max(mss.saturating_mul(2));
        // Tell the sender when the window grew enough to matter, not at every read.
        if now >= self.last_adv_rwnd.saturating_add(step)
            || (self.last_adv_rwnd < mss && now >= mss)
        {
            self.ack_now = true;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Timers
    // -----------------------------------------------------------------------------------------

    /// Returns when [`Conn::on_timeout`] should be called next, or `None` if no timer is needed.
    ///
    /// The time may be at or before `now_ns`, meaning "now".
    pub fn next_timeout(&self, now_ns: u64) -> Option<u64> {
        match self.own_timeout(now_ns) {
            (t, true) => min_opt(
                t,
                self.paths.next_timer_waiting(now_ns, self.data_waiting()),
            ),
            (t, false) => t,
        }
    }

    /// The same as [`Conn::next_timeout`], cheaper with many paths: the failure detector's
    /// part comes from the deadlines the path table keeps (see
    /// [`PathTable::poll_timer_waiting`]). The glue asks this after every batch.
    pub fn poll_timeout(&mut self, now_ns: u64) -> Option<u64> {
        match self.own_timeout(now_ns) {
            (t, true) => {
                let data_waiting = self.data_waiting();
                min_opt(t, self.paths.poll_timer_waiting(now_ns, data_waiting))
            }
            (t, false) => t,
        }
    }

    /// The connection's own next deadline, and whether the failure detector's count too.
    fn own_timeout(&self, now_ns: u64) -> (Option<u64>, bool) {
        match self.state {
            State::Idle | State::Closed(_) => (None, false),
            State::SynSent | State::SynReceived => (self.hs_deadline, false),
            State::TimeWait => (self.tw_deadline, false),
            State::Established | State::FinWait | State::CloseWait | State::Closing => {
                let ack = if self.ack_pending && !self.ack_now {
                    self.ack_deadline
                } else {
                    None
                };
                let t = min_opt(ack, self.rack_deadline);
                let t = min_opt(t, self.rto_deadline);
                let t = min_opt(t, self.user_deadline());
                let t = min_opt(t, self.orphan_deadline());
                (min_opt(t, self.pacing_deadline(now_ns)), true)
            }
        }
    }

    /// Runs every timer that is due at `now_ns`; calling it early is harmless.
    pub fn on_timeout(&mut self, now_ns: u64) {
        self.last_now = self.last_now.max(now_ns);
        match self.state {
            State::Idle | State::Closed(_) => {}
            State::SynSent | State::SynReceived => {
                if self.hs_deadline.is_some_and(|d| d <= now_ns) {
                    self.hs_backoff = self.hs_backoff.saturating_add(1);
                    if self.hs_backoff > self.cfg.syn_retries {
                        self.enter_closed(Some(ConnError::TimedOut));
                        return;
                    }
                    self.hs_due = true;
                    let t = backoff(self.cfg.syn_rto_ns, self.hs_backoff, u64::MAX);
                    self.hs_deadline = Some(now_ns.saturating_add(t));
                }
            }
            State::TimeWait => {
                if self.tw_deadline.is_some_and(|d| d <= now_ns) {
                    self.enter_closed(None);
                }
            }
            State::Established | State::FinWait | State::CloseWait | State::Closing => {
                if self.orphan_deadline().is_some_and(|d| d <= now_ns) {
                    // Nobody waits for the outcome; the RST tells the peer at once.
                    self.stats.orphan_timeouts = self.stats.orphan_timeouts.saturating_add(1);
                    self.rst_due = Some(self.hs_path_id_or_first());
                    self.enter_closed(Some(ConnError::TimedOut));
                    return;
                }
                if self.user_deadline().is_some_and(|d| d <= now_ns) {
                    self.enter_closed(Some(ConnError::TimedOut));
                    return;
                }
                self.note_progress(now_ns);
                if self.ack_pending && self.ack_deadline.is_some_and(|d| d <= now_ns) {
                    self.ack_now = true;
                    self.ack_deadline = None;
                }
                if self.rack_deadline.is_some_and(|d| d <= now_ns) {
                    self.detect_losses(now_ns);
                }
                if self.rto_deadline.is_some_and(|d| d <= now_ns) {
                    self.on_rto(now_ns);
                    if !self.state.is_synchronized() {
                        return;
                    }
                }
                let data_waiting = self.data_waiting();
                if self
                    .paths
                    .poll_timer_waiting(now_ns, data_waiting)
                    .is_some_and(|t| t <= now_ns)
                {
                    self.path_tick(now_ns);
                }
            }
        }
    }

    /// Returns when a path's pacing next lets data leave, if data is ready to go and a
    /// path with window room is held back only by its pacing.
    fn pacing_deadline(&self, now_ns: u64) -> Option<u64> {
        let ready =
            self.lost_count > 0 || self.hedge_due > 0 || (self.msgq_len > 0 && !self.ring_full());
        if !ready {
            return None;
        }
        self.paths.next_departure(now_ns, wire_len(1))
    }

    /// Whether data is unacknowledged or queued. Failed paths are then
    /// probed at the busy backoff even with nothing in flight on them, so
    /// the connection resumes as soon as one answers.
    fn data_waiting(&self) -> bool {
        self.snd_una < self.snd_nxt || self.msgq_len > 0
    }

    /// Whether the connection is waiting for the peer: data or FIN
    /// outstanding, or no path Active to send on.
    fn waiting(&self) -> bool {
        self.snd_una < self.snd_nxt || !self.paths.any_in_state(PathState::Active)
    }

    /// Restarts the user timeout while the connection is not waiting.
    fn note_progress(&mut self, now_ns: u64) {
        if self.state.is_synchronized() && !self.waiting() {
            self.progress_ns = self.progress_ns.max(now_ns);
        }
    }

    /// Returns when the connection fails for lack of progress, if it is waiting.
    fn user_deadline(&self) -> Option<u64> {
        self.waiting()
            .then(|| self.progress_ns.saturating_add(self.cfg.user_timeout_ns))
    }

    /// Returns when an orphan gives up on its peer (see [`ConnConfig::fin_timeout_ns`]): with
    /// its FIN sent, `fin_timeout_ns` after the FIN was sent or acknowledged or the
    /// connection orphaned, whichever is latest; before that, with messages held back by
    /// the peer's closed window, `fin_timeout_ns` after the window closed or the connection
    /// was orphaned, whichever is later.
    fn orphan_deadline(&self) -> Option<u64> {
        let orphan_ns = self.orphan_ns?;
        let since = if self.fin_seq.is_some() {
            self.fin_since_ns
        } else if self.msgq_len > 0 {
            self.rwnd_closed_ns?
        } else {
            return None;
        };
        Some(orphan_ns.max(since).saturating_add(self.cfg.fin_timeout_ns))
    }

    fn on_rto(&mut self, now_ns: u64) {
        if self.persist && self.snd_una == self.snd_nxt {
            // Window probe: the peer is not known to be dead, so this does not count as a retry
            // unless the probe itself goes unanswered.
            self.persist_probe = true;
            self.rto_backoff = self.rto_backoff.saturating_add(1).min(MAX_BACKOFF_SHIFT);
            self.rto_deadline = None;
            return;
        }
        self.persist = false;
        self.rto_backoff = self.rto_backoff.saturating_add(1).min(MAX_BACKOFF_SHIFT);
        self.stats.rtos = self.stats.rtos.saturating_add(1);
        let mut hit = PathSet::EMPTY;
        let mut seq = self.snd_una;
        while seq < self.snd_nxt {
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            if slot.state == SlotState::InFlight {
                hit.insert(usize::from(slot.path));
                self.mark_lost_by(now_ns, seq, true);
                self.stats.rto_losses = self.stats.rto_losses.saturating_add(1);
            }
            seq = seq.saturating_add(1);
        }
        for idx in hit.iter() {
            self.paths.on_rto(idx, now_ns);
        }
        self.rack_deadline = None;
        self.rto_deadline = Some(now_ns.saturating_add(self.poll_rto_ns()));
    }

    fn path_tick(&mut self, now_ns: u64) {
        let res = self.paths.on_tick_waiting(now_ns, self.data_waiting());
        for idx in res.probe.iter() {
            self.probe_due.insert(idx);
        }
        for idx in res.changed.iter() {
            let down = self
                .paths
                .get(idx)
                .is_some_and(|p| p.state() != PathState::Active);
            if down {
                self.evacuate_path(now_ns, idx);
            }
        }
    }

    /// Reports that the glue could not send a packet on path `idx` at all (see
    /// [`PathTable::on_send_error`]): the path is Failed at once and what it had in flight is
    /// resent on the other paths.
    pub fn on_send_error(&mut self, now_ns: u64, idx: PathIdx) {
        if self.paths.on_send_error(idx, now_ns).is_some() {
            self.evacuate_path(now_ns, idx);
        }
    }

    /// Declares lost everything in flight on a path that left Active, so it is resent
    /// elsewhere at once instead of after a timeout.
    fn evacuate_path(&mut self, now_ns: u64, idx: PathIdx) {
        let mut seq = self.snd_una;
        while seq < self.snd_nxt {
            let slot = self.send.get(slot_of(seq)).copied().unwrap_or_default();
            if slot.state == SlotState::InFlight && usize::from(slot.path) == idx {
                self.mark_lost(now_ns, seq);
                self.stats.path_losses = self.stats.path_losses.saturating_add(1);
            } else if slot.flags & SF_HEDGED != 0 && usize::from(slot.hedge_path) == idx {
                // The copy is gone with its path; the original is still in flight.
                self.clear_hedge(now_ns, seq, true);
            }
            seq = seq.saturating_add(1);
        }
    }
}
