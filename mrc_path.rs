// SPDX-License-Identifier: GPL-2.0
//! Path table, path states, scheduler and failure detector.
//!
//! A connection sprays its packets over up to [`MAX_PATHS`] paths. This module
//! keeps one [`Path`] per path (identity, state, RTT estimate, counters,
//! bytes in flight and a congestion controller) in a [`PathTable`], decides
//! which path carries the next packet, and runs the failure detector. Like
//! the rest of the sans-IO core it depends on `core` only: the glue reports
//! events with the current time in nanoseconds and acts on the returned
//! decisions; nothing here reads a clock, locks, uses floating point or can
//! panic, and the only memory it allocates is the table's chunks of path
//! slots (see "Memory" below).
//!
//! # Path states
//!
//! - [`PathState::Active`]: carries new data.
//! - [`PathState::Suspect`]: a loss burst or a missed heartbeat; carries no
//!   new data and is probed at once, then again each time a probe times out;
//!   each probe missed in a row gives the next one twice the probe timeout
//!   (up to `failed_probe_max_ns`), so that a host that stalls for a few probe
//!   timeouts does not fail its paths.
//! - [`PathState::Failed`]: `miss_threshold` probes in a row went unanswered;
//!   probed with exponential backoff, and no more often than an idle path
//!   while the connection has neither data in flight nor data waiting.
//!
//! Any answered probe makes a path Active again; a path not validated yet (below) is never
//! Active before one is. A busy path (bytes in flight)
//! proves it is alive with its acknowledgements and with any other packet of
//! the peer arriving on it ([`PathTable::on_heard`]). If it stays silent for a
//! probe timeout while the peer acknowledges data sent on other paths after
//! its own unanswered packets, that counts as a missed heartbeat; answers to
//! older packets, which a peer catching up after a stall sends first, do
//! not count. If no path was acknowledged meanwhile, the
//! silence may be the peer's (a full receive buffer, a stalled host), so the
//! path is only probed. An idle path is probed `heartbeat_busy_ns` after its
//! last probe was answered (one probe at a time, so a path with a long RTT is
//! probed about once per RTT) while the connection has data outstanding, and
//! every `heartbeat_idle_ns` otherwise; the accepting end waits a probe
//! timeout longer ([`PathTable::set_heartbeat_yield`]), so on a path that
//! both ends leave idle the connecting end's probes arrive first and are
//! answered, rather than both ends probing it. With the defaults
//! (1 ms heartbeat and probe timeout floor, three misses) a dead busy path
//! among live ones is Suspect about 1 ms after its last acknowledgement and
//! Failed about 6 ms later (probes that wait 2 and 4 ms). The idle
//! heartbeat is 10 s (SCTP's is 30 s): an idle connection has nobody
//! waiting on its paths, a path that died meanwhile is found within
//! milliseconds once data flows again, and a host with thousands of idle
//! connections is not kept busy answering probes.
//!
//! # Idle paths of a busy connection
//!
//! The busy heartbeat of idle paths is paid for by the connection's own data:
//! each data packet sent earns credit, and a heartbeat probe of an idle path
//! with a settled RTT spends `data_per_idle_probe` packets' worth (32 by
//! default; the table holds at most one probe of each path, and starts full).
//! A probe and its answer are two packets, so the idle paths' heartbeats add
//! at most 2 packets per 32 data packets, about 6 %. A bulk transfer of one
//! connection at 1 Gbit/s still earns a probe every 0.36 ms for its idle
//! paths to share. A request/response connection, which keeps one small
//! message in flight on one path, would otherwise send about a probe per
//! round trip on top of its two messages; now its spare paths share one probe
//! per 32 messages. Many connections over the same paths each pay for their
//! own idle paths: at 8 packets a probe, 100 connections over 4 shaped planes
//! sent a PROBE per 5 DATA packets, at 32 one per 12, for a fifth more
//! goodput, with failover gaps within the host's noise (BENCHMARKS.md); at
//! 64, a request/response connection whose two paths die waits 51 ms longer
//! for its round trips in `rr_sim`, against 21 at 8 or 32. Without credit an
//! idle path still gets the idle heartbeat, and a path whose data goes
//! unanswered is found by its silence whatever its credit.
//!
//! # RTT samples
//!
//! An acknowledgement times the packets it acknowledges only if it came back
//! by their path's plane, or by a plane of like minimum RTT: the peer answers
//! by the path of its latest packet, and another plane's way back can be far
//! shorter or longer ([`PathTable::on_ack_by_way_of`]). A path timed only by
//! such answers has a provisional RTT, and is probed at the busy heartbeat
//! even while the connection is idle, since a probe's answer comes back by the
//! path it tests.
//!
//! The probe timeout is the path's srtt + 4 * rttvar, or 5/4 of its largest
//! RTT sample of the last one to two seconds if that is longer, within
//! configured bounds; the upper bound yields to twice the srtt, since a path with a deep
//! queue is slow, not dead. A tick that runs a whole probe timeout after a
//! deadline means this host did not run meanwhile; answers may be waiting
//! unread, so nothing counts as missed and the path is probed again.
//!
//! Loss bursts only make a path Suspect while more than `min_active` paths
//! are Active, so that one bad burst across the fabric cannot stop the whole
//! connection; only missed probes and heartbeats, which are evidence of a
//! dead path rather than of congestion, take the last paths down.
//!
//! # Path validation
//!
//! A path to an address the peer announced, rather than one the handshake proved, could aim
//! this end's traffic at a third party. Such a path is added unvalidated
//! ([`PathTable::add_unvalidated`], [`Path::is_validated`]): Suspect with reason
//! [`StateReason::Unvalidated`], so the scheduler gives it no data, and probed as any Suspect
//! path is, at once and again at each probe timeout, twice as long each time; after
//! `miss_threshold` misses it is Failed with that reason, and probed as a Failed path is. A
//! probe on it answered with the right nonce ([`PathTable::on_probe_answer`]) proves its
//! address and validates it; [`PathTable::validate`] does the same for the other paths to an
//! address proven so. Either way the path becomes Active as a new path starts, with no RTT
//! sample: the probe crossed an empty path, and timed by it a path on a slow link would look
//! silent before its first window drained. A path validated while others run takes their
//! recent RTT peaks where they are higher, as the floor of its timeouts until they age out:
//! the late answers of a stalling host are no news to the others.
//!
//! What goes to an address not proven is bounded as well, so that the probes are no
//! amplifier either: the connection credits the table with three times the bytes of every
//! packet the peer sends ([`PathTable::earn_validation_credit`], at most
//! [`VALIDATION_CREDIT_MAX`]), and each probe of an unvalidated path takes
//! [`PROBE_WIRE_LEN`] of it (a path with none left waits, with no deadline, until the peer
//! sends more), as does anything else the connection sends on it
//! ([`PathTable::spend_validation_credit`]).
//!
//! # Pacing
//!
//! With [`PathConfig::pacing`], a path's data leaves at its congestion
//! controller's pacing rate (twice its window per smoothed RTT) rather than
//! as fast as acknowledgements open its window: acknowledgements come back by
//! whichever path the peer answers on, so they do not clock a path's
//! packets out at its bottleneck's rate as TCP's do. Each path keeps the
//! earliest departure time of its next data packet ([`Path::pace_ns`]); a
//! packet moves it on by its size at the rate. The clock may lag the present
//! by [`PACE_BURST_NS`] (two packets' time at least), so a path sends at most
//! that much at once, as TCP sizes its TSO bursts. The scheduler treats a path
//! that may not send yet like one whose window is full, and
//! [`PathTable::next_departure`] tells the glue when to wake for it. Probes,
//! acknowledgements and other control packets are not paced.
//!
//! # Driving the detector
//!
//! The glue calls [`PathTable::on_tick`] when the time returned by
//! [`PathTable::next_timer`] has come, sends a PROBE on every path in
//! [`TickResult::probe`] and reports each with [`PathTable::on_probe_sent`],
//! which records the probe's nonce and send time. A PROBE_ACK counts only
//! through [`PathTable::on_probe_answer`]: it must arrive on the probed path
//! and echo the nonce of one of its latest two unanswered probes, and its RTT
//! is timed from the recorded send time, so that a forged answer can neither
//! revive a path nor set its RTT.
//! Since sends, acknowledgements and losses move the deadlines, the glue
//! re-reads `next_timer` after reporting events.
//!
//! # Memory
//!
//! A table holds the slots of its first [`PATH_CHUNK`] (10) paths inline, and the others in
//! chunks of as many, allocated when a path is added to a chunk not yet present and freed
//! when the chunk's last path is removed or the table goes ([`crate::mrc_slots`]). A slot
//! holds the [`Path`] (344 bytes), its failure-detector deadline and RTO as last computed
//! (16 bytes, see [`PathTable::poll_timer_waiting`] and [`PathTable::poll_max_rto`]) and
//! what the table's user keeps beside it ([`PathTable::extra`]); the connection keeps its
//! RACK and reorder state of the path there (48 bytes, `ConnPath` in `mrc_conn`), so a
//! chunk of its slots is 4080 bytes, a 4 KiB kmalloc object. A path that cannot get the
//! memory of a new chunk is refused, as one beyond [`MAX_PATHS`] is: [`PathTable::add`]
//! returns `None`.
//!
//! The first chunk is inline because paths are looked up for every packet sent,
//! acknowledged or examined for loss: with every chunk allocated, that lookup's extra load
//! and tests cost 16 % of the goodput of a bulk transfer over one veth in the VM (`make ab`,
//! 7 rounds, 231 against 193 Mbit/s), and the inline chunk won it back (230 against 212).
//!
//! Bytes of a connection's core (`Conn`, 64-bit), by number of paths, when every one of the
//! 256 slots was inline and since (`Conn` plus its chunks; in parentheses with each chunk
//! rounded up to its 4 KiB kmalloc object):
//!
//! | paths | before  | since             |
//! |-------|---------|-------------------|
//! | 1     | 162 208 | 68 040            |
//! | 4     | 162 208 | 68 040            |
//! | 16    | 162 208 | 72 120 (72 136)   |
//! | 256   | 162 208 | 170 040 (170 440) |
//!
//! Of `Conn`'s 68 040 bytes now, 40 KiB are the send ring and 4080 the inline slots. Looking
//! up a path beyond the first chunk costs one more load (the chunk's pointer), and scans stop
//! at the highest index in use as before ([`PathTable::index_end`]), skipping chunks not
//! allocated.

use core::mem::MaybeUninit;
use core::ptr::addr_of_mut;

use super::mrc_cc::{Cc, CcKind, CongestionControl};
use super::mrc_proto::{Endpoint, FAMILY_V4, HEADER_LEN, PROBE_LEN};
use super::mrc_slots::Slots;

/// Largest number of paths one table holds.
pub const MAX_PATHS: usize = 256;

/// Paths whose slots a [`PathTable`] allocates at a time: a chunk of a connection's slots,
/// 408 bytes each with what the connection keeps beside the path, is 4080 bytes, which
/// fills most of a 4 KiB kmalloc object (16 slots, 6272 bytes, would take 8 KiB). See
/// "Memory" in the module docs; the connection checks at build time that its chunks fit.
pub const PATH_CHUNK: usize = 10;

/// Allocated chunks of path slots a [`PathTable`] has room for, beside the one it holds
/// inline: enough for [`MAX_PATHS`].
const PATH_DIR: usize = MAX_PATHS.div_ceil(PATH_CHUNK) - 1;

/// Longest burst of data a paced path sends at once, in time at its pacing rate: the
/// 1 ms that Linux TCP sizes its TSO bursts to (`sk_pacing_shift` 10).
pub const PACE_BURST_NS: u64 = 1_000_000;

/// Default scheduling weight; see [`PathTable::set_weight`].
pub const WEIGHT_DEFAULT: u8 = 16;

/// Bytes of a PROBE or PROBE_ACK on the wire: what one takes of the validation credit (see
/// "Path validation" in the module docs).
pub const PROBE_WIRE_LEN: u64 = (HEADER_LEN + PROBE_LEN) as u64;

/// Most validation credit, in bytes, the table keeps: a connection that received a lot
/// before a path needed validating cannot spend it on that path all at once.
pub const VALIDATION_CREDIT_MAX: u64 = 64 * 1024;

/// Whether two endpoints share a subnet: /24 for IPv4, /64 for IPv6.
pub fn same_subnet(a: &Endpoint, b: &Endpoint) -> bool {
    let n = if a.family == FAMILY_V4 { 3 } else { 8 };
    a.family == b.family && a.addr.get(..n) == b.addr.get(..n)
}

/// Number of planes two ends with `locals` and `peers` endpoints have: as
/// many as the end with more.
pub fn plane_count(locals: usize, peers: usize) -> usize {
    if locals == 0 || peers == 0 {
        0
    } else {
        locals.max(peers)
    }
}

/// The local and peer endpoint (indices into `locals` and `peers`) that
/// plane `plane` joins, or `None` when their families differ.
///
/// Plane `p` takes local endpoint `p` and the peer's endpoint in the same
/// subnet, else the peer's `p`-th. When the peer has more endpoints, the
/// local ones serve again in turn (`p` modulo their number), each time with
/// one of the peer's endpoints no earlier plane took: a host with two
/// interfaces uses both towards a peer with one address, and that peer pairs
/// its address with both of the host's. Ends that list their endpoints in
/// plane order derive the same planes.
pub fn plane_pair(locals: &[Endpoint], peers: &[Endpoint], plane: usize) -> Option<(usize, usize)> {
    if plane >= plane_count(locals.len(), peers.len()) {
        return None;
    }
    let li = plane % locals.len();
    let local = locals.get(li)?;
    let ri = if plane < locals.len() {
        peers
            .iter()
            .position(|p| same_subnet(local, p))
            .unwrap_or(plane % peers.len())
    } else {
        // A local endpoint serving again takes the peer's endpoints that the
        // first round left over, in order.
        let taken = |r: usize| {
            (0..locals.len()).any(|q| plane_pair(locals, peers, q).is_some_and(|p| p.1 == r))
        };
        (0..peers.len())
            .filter(|r| !taken(*r))
            .nth(plane - locals.len())
            .unwrap_or(plane % peers.len())
    };
    let remote = peers.get(ri)?;
    (remote.family == local.family).then_some((li, ri))
}

/// Largest RTT sample taken into account; larger samples are clamped.
const MAX_RTT_NS: u64 = u32::MAX as u64;

/// Planes whose minimum RTTs differ by no more than this are taken for alike: an answer by
/// way of one times a path of the other to within about half of it (see
/// [`PathTable::on_ack_by_way_of`]). It is that large because minimum RTTs measured on a
/// loaded host (softirq work queued behind a transfer) differ by several milliseconds
/// between planes of one link, while planes of different links, as in the MPTCP selftest's
/// topology (1 ms and 25 ms of delay each way), differ by more.
const ALIKE_PLANES_NS: u64 = 20_000_000;

/// Length of the windows over which the largest RTT sample is kept for the probe timeout.
const RTT_PEAK_WINDOW_NS: u64 = 1_000_000_000;

/// Length of the windows over which the largest RTT sample is kept for
/// [`Path::recent_late_answer_ns`]: long enough to span the stalls of a loaded host, which
/// recur every few ms, short enough to forget a queue that drained.
const RTT_SHORT_PEAK_WINDOW_NS: u64 = 125_000_000;

/// Clock granularity term of the RTO (RFC 6298's G).
const RTO_GRANULARITY_NS: u64 = 1_000;

/// Largest backoff exponent for probes of a Failed path; the configured
/// maximum interval usually caps the backoff much earlier.
const MAX_BACKOFF_SHIFT: u8 = 20;

/// A deadline that never comes: a path waiting for validation credit.
const NEVER: u64 = u64::MAX;

/// Fixed-point shift of the window drain rates the scheduler sums (bytes per nanosecond).
const RATE_SHIFT: u32 = 20;

/// Paths up to which [`PathTable::poll_pick_path`] looks at every path for every packet: a
/// pass over a few paths costs less than keeping what the pass found.
const PICK_SCAN_PATHS: usize = 16;

/// How many of the best paths that may send [`PickKept`] keeps.
const PICK_KEPT_BEST: usize = 4;

/// Index of a path in a [`PathTable`], below [`MAX_PATHS`].
pub type PathIdx = usize;

/// Why no path may take a packet of new data now (see [`PathTable::held_back`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldBack {
    /// No path may carry data.
    NoPath,
    /// Every path that may carry data has a full congestion window.
    Window,
    /// A path has window room, but its pacing holds the packet back.
    Pacing,
    /// A path could send, but the packet waits for one that delivers it sooner.
    Waiting,
}

/// Health of a path as seen by the failure detector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathState {
    /// Healthy: carries new data.
    #[default]
    Active,
    /// Possibly broken: carries no new data and is being probed.
    Suspect,
    /// Broken: missed `miss_threshold` probes; probed with backoff.
    Failed,
}

/// Why a path last changed state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StateReason {
    /// The path is new and has not changed state.
    #[default]
    Unspec,
    /// `loss_burst` losses in a row with no acknowledgement between them.
    LossBurst,
    /// A probe, or the heartbeat of a busy path, went unanswered.
    ProbeTimeout,
    /// A probe was answered.
    ProbeAnswered,
    /// Sending on the path failed locally: no route to the peer's address, or the path's
    /// interface is down.
    LocalDown,
    /// The path leads to an address the peer announced and has not proven yet: no probe on
    /// the path has been answered. It carries no data; Suspect while its first probes are
    /// out, Failed once `miss_threshold` of them went unanswered (see "Path validation" in
    /// the module docs).
    Unvalidated,
}

/// Identity of a path on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathIds {
    /// Identifier carried in the header's `path_id` field and echoed in ACKs.
    pub path_id: u32,
    /// Index of the plane (NIC pair) the path runs over.
    pub plane: u8,
    /// Entropy value carried in the UDP source port.
    pub entropy: u16,
}

/// Tunables of the failure detector, scheduler and congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathConfig {
    /// Congestion control algorithm for new paths.
    pub cc: CcKind,
    /// Segment size in bytes the congestion controllers count in.
    pub mss: u32,
    /// Probe interval of an idle path while the connection has data in flight.
    pub heartbeat_busy_ns: u64,
    /// Probe interval of an idle path while the connection has nothing in flight.
    pub heartbeat_idle_ns: u64,
    /// Data packets the connection sends for each heartbeat probe of an idle path while it
    /// has data in flight (0: no such limit); see "Idle paths of a busy connection" in the
    /// module docs.
    pub data_per_idle_probe: u32,
    /// Missed probes or heartbeats in a row that make a path Failed (at least 1).
    pub miss_threshold: u8,
    /// Losses in a row, with no acknowledgement between them, that make a path Suspect.
    pub loss_burst: u8,
    /// Number of Active paths that loss bursts alone cannot go below.
    pub min_active: u8,
    /// Lower bound of the probe timeout.
    pub probe_timeout_min_ns: u64,
    /// Upper bound of the probe timeout, unless twice the smoothed RTT is larger.
    pub probe_timeout_max_ns: u64,
    /// Upper bound of the probe interval of a Failed path.
    pub failed_probe_max_ns: u64,
    /// RTT assumed for a path without samples.
    pub initial_rtt_ns: u64,
    /// Lower bound of the retransmission timeout.
    pub rto_min_ns: u64,
    /// Upper bound of the retransmission timeout.
    pub rto_max_ns: u64,
    /// Whether this end lets the other probe idle paths: it waits a probe timeout longer
    /// than the heartbeat after last hearing a path before probing it itself (see
    /// [`PathTable::set_heartbeat_yield`]).
    pub heartbeat_yield: bool,
    /// Whether each path's data leaves at its congestion controller's pacing rate
    /// (see "Pacing" in the module docs) rather than as fast as its window opens.
    pub pacing: bool,
}

impl PathConfig {
    /// The defaults: 1 ms heartbeat while busy, 10 s while idle, Failed after three misses.
    pub const DEFAULT: PathConfig = PathConfig {
        cc: CcKind::Delay,
        mss: 1400,
        heartbeat_busy_ns: 1_000_000,
        heartbeat_idle_ns: 10_000_000_000,
        data_per_idle_probe: 32,
        miss_threshold: 3,
        loss_burst: 3,
        min_active: 1,
        probe_timeout_min_ns: 1_000_000,
        probe_timeout_max_ns: 100_000_000,
        failed_probe_max_ns: 100_000_000,
        initial_rtt_ns: 1_000_000,
        rto_min_ns: 1_000_000,
        rto_max_ns: 1_000_000_000,
        heartbeat_yield: false,
        pacing: true,
    };
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig::DEFAULT
    }
}

/// Cumulative traffic counters of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounters {
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes acknowledged.
    pub bytes_acked: u64,
    /// Bytes declared lost.
    pub bytes_lost: u64,
    /// Bytes sent as retransmissions.
    pub bytes_retx: u64,
    /// Packets sent, retransmissions included.
    pub pkts_sent: u64,
    /// Packets acknowledged.
    pub pkts_acked: u64,
    /// Packets declared lost.
    pub pkts_lost: u64,
    /// Packets sent as retransmissions.
    pub pkts_retx: u64,
    /// Probes sent.
    pub probes_sent: u32,
    /// Probes that went unanswered, and heartbeats missed by busy paths.
    pub probes_missed: u32,
}

/// The largest RTT sample of the current and of the previous window of fixed length.
#[derive(Clone, Copy, Debug, Default)]
struct Peak {
    cur_ns: u32,
    prev_ns: u32,
    /// Index of the window `cur_ns` belongs to: the time divided by its length, modulo
    /// 2^16 (only whether the window changed, and whether by one, matters).
    window: u16,
}

impl Peak {
    fn get(&self) -> u64 {
        u64::from(self.cur_ns.max(self.prev_ns))
    }

    /// Returns 5/4 of [`Peak::get`].
    fn five_quarters(&self) -> u64 {
        let peak = self.get();
        peak.saturating_add(peak / 4)
    }

    /// Takes sample `r` in window number `window`.
    fn take(&mut self, window: u64, r: u32) {
        let window = u16::try_from(window & 0xffff).unwrap_or(0);
        if window != self.window {
            // After a gap of more than one window (or a clock that jumped), the previous
            // window's peak is no longer recent.
            self.prev_ns = if window == self.window.wrapping_add(1) {
                self.cur_ns
            } else {
                0
            };
            self.cur_ns = 0;
            self.window = window;
        }
        self.cur_ns = self.cur_ns.max(r);
    }
}

/// RFC 6298 RTT estimator in integer nanoseconds; zero means "no sample yet".
#[derive(Clone, Copy, Debug, Default)]
struct RttEstimator {
    srtt_ns: u32,
    rttvar_ns: u32,
    min_rtt_ns: u32,
    /// Whether `min_rtt_ns` comes from answers by the path's own route (see
    /// [`PathTable::on_ack_by_way_of`]) rather than from provisional samples.
    own_min: bool,
    /// Largest sample of the current and of the previous [`RTT_PEAK_WINDOW_NS`].
    peak: Peak,
    /// Largest sample of the current and of the previous [`RTT_SHORT_PEAK_WINDOW_NS`].
    short_peak: Peak,
    /// Send time of the latest packet answered with a sample (the sample's time less its
    /// RTT): the peer had processed what was sent on the path up to then.
    answered_sent_ns: u64,
}

impl RttEstimator {
    /// Returns 5/4 of the largest RTT sample of the last one to two [`RTT_PEAK_WINDOW_NS`],
    /// the floor of the probe timeout and of the RTO: a path whose answers came that late
    /// recently, because a host stalled or its packets queued for a CPU, is not dead when one
    /// is that late again, and srtt + 4 * rttvar forgets such spikes within a few RTTs.
    fn peak_timeout(&self) -> u64 {
        self.peak.five_quarters()
    }

    /// Takes the time an answer took into the recent peak only (the answer to a packet sent
    /// at `now_ns - rtt_ns`): however it came back, how late answers come bounds the
    /// timeouts.
    fn answered(&mut self, now_ns: u64, rtt_ns: u64) -> u32 {
        self.answered_sent_ns = self.answered_sent_ns.max(now_ns.saturating_sub(rtt_ns));
        // Zero would read as "no sample".
        let r = u32::try_from(rtt_ns.clamp(1, MAX_RTT_NS)).unwrap_or(u32::MAX);
        self.peak.take(now_ns / RTT_PEAK_WINDOW_NS, r);
        self.short_peak.take(now_ns / RTT_SHORT_PEAK_WINDOW_NS, r);
        r
    }

    /// Takes an RTT sample; `own` tells whether the answer came back by the path's own
    /// route. Other samples are provisional: they start the smoothed RTT and a minimum that
    /// the first sample of its own replaces. `held_ns` is how long the peer held its answer
    /// (its ACK delay): it comes off the sample for the smoothed and minimum RTT (see
    /// [`RttEstimator::less_held`]), but not for the time answers take, which bounds the
    /// timeouts, nor for the send time of the packet answered. Returns the sample as taken.
    fn sample(&mut self, now_ns: u64, rtt_ns: u64, held_ns: u64, own: bool) -> u64 {
        let raw = self.answered(now_ns, rtt_ns);
        let r = self.less_held(raw, held_ns);
        if own && !self.own_min {
            self.min_rtt_ns = r;
            self.own_min = true;
        } else if own || !self.own_min {
            self.min_rtt_ns = match self.min_rtt_ns {
                0 => r,
                m => m.min(r),
            };
        }
        if self.srtt_ns == 0 {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
            return u64::from(r);
        }
        let diff = u64::from(self.srtt_ns.abs_diff(r));
        let var = u64::from(self.rttvar_ns)
            .saturating_mul(3)
            .saturating_add(diff)
            / 4;
        let srtt = u64::from(self.srtt_ns)
            .saturating_mul(7)
            .saturating_add(u64::from(r))
            / 8;
        self.rttvar_ns = u32::try_from(var).unwrap_or(u32::MAX);
        // Never zero again: (7 * s + r) / 8 >= 1 when s >= 1 and r >= 1.
        self.srtt_ns = u32::try_from(srtt).unwrap_or(u32::MAX).max(1);
        u64::from(r)
    }

    /// Takes the time the peer held an answer off a sample, as QUIC does with its ACK Delay.
    /// The delay is that of the latest packet the answer covers, which every other packet
    /// it newly covers arrived before, so an honest peer's makes no sample shorter than its
    /// own trip. Once there is a minimum RTT, no sample is taken below it, so that a peer
    /// claiming too long a delay cannot make a path look faster than it ever was; the first
    /// sample is taken less the whole delay, lest a delayed first answer set the minimum
    /// for good. Never zero, which would read as "no sample".
    fn less_held(&self, r: u32, held_ns: u64) -> u32 {
        let held = u32::try_from(held_ns).unwrap_or(u32::MAX);
        match self.min_rtt_ns {
            m if m != 0 && r < m.saturating_add(held) => r,
            _ => r.saturating_sub(held).max(1),
        }
    }

    /// Whether the path has been timed, but only by answers that came back by another
    /// plane (see [`PathTable::on_ack_by_way_of`]).
    fn provisional(&self) -> bool {
        self.srtt_ns != 0 && !self.own_min
    }

    /// Returns the minimum RTT if it comes from answers by the path's own route.
    fn own_min(&self) -> Option<u64> {
        (self.own_min && self.min_rtt_ns != 0).then_some(u64::from(self.min_rtt_ns))
    }

    /// Returns (srtt, rttvar), using the initial RTT before the first sample
    /// the way RFC 6298 initialises from the first sample.
    fn srtt_rttvar(&self, initial_rtt_ns: u64) -> (u64, u64) {
        if self.srtt_ns == 0 {
            let r = initial_rtt_ns.clamp(1, MAX_RTT_NS);
            (r, r / 2)
        } else {
            (u64::from(self.srtt_ns), u64::from(self.rttvar_ns))
        }
    }
}

/// One path of a connection.
#[derive(Clone, Copy, Debug)]
pub struct Path {
    ids: PathIds,
    /// Whether the path's remote address is proven (see "Path validation" in the module
    /// docs); an unvalidated path is never Active.
    validated: bool,
    state: PathState,
    prev_state: PathState,
    reason: StateReason,
    backup: bool,
    weight: u8,
    missed_probes: u8,
    consecutive_losses: u8,
    probe_outstanding: bool,
    backoff_shift: u8,
    state_since_ns: u64,
    rtt: RttEstimator,
    inflight: u64,
    /// When the bytes in flight last went from zero to non-zero: a busy path
    /// is not expected to have been heard from before it became busy.
    inflight_since_ns: u64,
    /// Bytes left the path without an answer on it ([`PathTable::on_released`]) since it was
    /// last heard: its silence goes on from `inflight_since_ns` when it sends again.
    released_unheard: bool,
    last_ack_ns: u64,
    /// Last acknowledgement or probe answer: the latest proof of life.
    last_heard_ns: u64,
    last_send_ns: u64,
    last_probe_ns: u64,
    /// Earliest departure time of the path's next data packet (pacing).
    pace_ns: u64,
    /// The latest [`PROBES_REMEMBERED`] probes sent on the path and not yet answered, newest
    /// first: only an answer that echoes one of their nonces counts.
    probes: [SentProbe; PROBES_REMEMBERED],
    counters: PathCounters,
    cc: Cc,
}

/// PROBEs of a path whose answers still count: the latest one and the one before, so that an
/// answer that comes after its probe timed out and the next one went out still proves the
/// path alive, as [`PathTable::on_probe_answer`] promises.
pub const PROBES_REMEMBERED: usize = 2;

/// A PROBE sent and not yet answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SentProbe {
    /// Its nonce; 0 marks an empty entry.
    nonce: u64,
    /// When it was sent: its answer's RTT is measured from here.
    sent_ns: u64,
}

/// A PROBE_ACK whose nonce is not that of a probe of its path awaiting an answer: forged, an
/// answer to a probe of another path, or a repeated answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownProbe;

impl Path {
    fn new(now_ns: u64, ids: PathIds, backup: bool, cfg: &PathConfig) -> Self {
        Path {
            ids,
            validated: true,
            state: PathState::Active,
            prev_state: PathState::Active,
            reason: StateReason::Unspec,
            backup,
            weight: WEIGHT_DEFAULT,
            missed_probes: 0,
            consecutive_losses: 0,
            probe_outstanding: false,
            backoff_shift: 0,
            state_since_ns: now_ns,
            rtt: RttEstimator::default(),
            inflight: 0,
            inflight_since_ns: now_ns,
            released_unheard: false,
            last_ack_ns: 0,
            // A new path counts as heard at creation so that it gets one
            // heartbeat interval before its first probe.
            last_heard_ns: now_ns,
            last_send_ns: 0,
            last_probe_ns: 0,
            pace_ns: 0,
            probes: [SentProbe::default(); PROBES_REMEMBERED],
            counters: PathCounters::default(),
            cc: Cc::new(cfg.cc, cfg.mss),
        }
    }

    /// Returns why the path last changed state.
    pub fn state_reason(&self) -> StateReason {
        self.reason
    }

    /// Returns the path's wire identity.
    pub fn ids(&self) -> PathIds {
        self.ids
    }

    /// Returns whether the path's remote address is proven, so that the path may carry data
    /// once Active (see "Path validation" in the module docs).
    pub fn is_validated(&self) -> bool {
        self.validated
    }

    /// Returns the current state.
    pub fn state(&self) -> PathState {
        self.state
    }

    /// Returns the state before the latest transition.
    pub fn prev_state(&self) -> PathState {
        self.prev_state
    }

    /// Returns when the current state was entered.
    pub fn state_since_ns(&self) -> u64 {
        self.state_since_ns
    }

    /// Returns whether the path is a backup, used only when no other path is Active.
    pub fn is_backup(&self) -> bool {
        self.backup
    }

    /// Returns the scheduling weight.
    pub fn weight(&self) -> u8 {
        self.weight
    }

    /// Returns the smoothed RTT, if the path has an RTT sample.
    pub fn srtt_ns(&self) -> Option<u64> {
        (self.rtt.srtt_ns != 0).then_some(u64::from(self.rtt.srtt_ns))
    }

    /// Returns the RTT variation, if the path has an RTT sample.
    pub fn rttvar_ns(&self) -> Option<u64> {
        (self.rtt.srtt_ns != 0).then_some(u64::from(self.rtt.rttvar_ns))
    }

    /// Returns 5/4 of the largest RTT sample of the last 125 to 250 ms: how late an answer
    /// on this path may come without anything being wrong with it.
    pub fn recent_late_answer_ns(&self) -> u64 {
        self.rtt.short_peak.five_quarters()
    }

    /// Returns the smallest RTT sample seen, if any.
    pub fn min_rtt_ns(&self) -> Option<u64> {
        (self.rtt.min_rtt_ns != 0).then_some(u64::from(self.rtt.min_rtt_ns))
    }

    /// Returns the bytes sent and neither acknowledged nor declared lost.
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// Returns the congestion window in bytes.
    pub fn cwnd(&self) -> u32 {
        self.cc.cwnd()
    }

    /// Returns the congestion controller.
    pub fn cc(&self) -> &Cc {
        &self.cc
    }

    /// Returns the traffic counters.
    pub fn counters(&self) -> &PathCounters {
        &self.counters
    }

    /// Returns the number of probes or heartbeats missed in a row.
    pub fn missed_probes(&self) -> u8 {
        self.missed_probes
    }

    /// Returns whether a probe has been sent and neither answered nor timed out.
    pub fn probe_outstanding(&self) -> bool {
        self.probe_outstanding
    }

    /// Returns when the last acknowledgement arrived (0 if none).
    pub fn last_ack_ns(&self) -> u64 {
        self.last_ack_ns
    }

    /// Returns when the last probe was sent (0 if none).
    pub fn last_probe_ns(&self) -> u64 {
        self.last_probe_ns
    }

    /// Returns when data was last sent (0 if never).
    pub fn last_send_ns(&self) -> u64 {
        self.last_send_ns
    }

    /// Returns the earliest time the path's next data packet may leave: a time
    /// at or before now means it may leave now.
    pub fn pace_ns(&self) -> u64 {
        self.pace_ns
    }

    /// Whether the path may carry new data: Active, and while a non-backup path is Active
    /// (`primary`) not a backup, else a backup.
    fn may_carry_data(&self, primary: bool) -> bool {
        self.state == PathState::Active && self.backup != primary
    }

    fn has_room(&self, bytes: u32) -> bool {
        self.inflight.saturating_add(u64::from(bytes)) <= u64::from(self.cc.cwnd())
    }

    /// Whether a data packet of `bytes` may leave on the path at `now_ns`: its
    /// window has room and its pacing allows it.
    fn can_send(&self, now_ns: u64, bytes: u32) -> bool {
        self.has_room(bytes) && self.pace_ns <= now_ns
    }

    /// Moves the pacing clock on by the time `bytes` take at the pacing rate.
    ///
    /// The clock may lag `now_ns` by at most [`PACE_BURST_NS`] (or two packets' time, if
    /// that is longer), so a path that was idle or held up sends at most that much at once.
    fn pace(&mut self, now_ns: u64, bytes: u32) {
        let Some(rate) = self.cc.pacing_rate().filter(|&r| r > 0) else {
            return;
        };
        let tx_ns = (u64::from(bytes) * 1_000_000_000)
            .checked_div(rate)
            .unwrap_or(0);
        let slack = PACE_BURST_NS.max(tx_ns.saturating_mul(2));
        self.pace_ns = self
            .pace_ns
            .max(now_ns.saturating_sub(slack))
            .saturating_add(tx_ns);
    }

    fn set_state(&mut self, now_ns: u64, to: PathState, why: StateReason) -> Option<Transition> {
        if self.state == to {
            return None;
        }
        let from = self.state;
        self.prev_state = from;
        self.reason = why;
        self.state = to;
        self.state_since_ns = now_ns;
        self.consecutive_losses = 0;
        match to {
            PathState::Active => {
                self.missed_probes = 0;
                self.backoff_shift = 0;
                // Bytes still counted in flight were sent before the outage and
                // will be resolved by loss detection; they must not count as a
                // fresh silence right away.
                self.inflight_since_ns = now_ns;
                self.released_unheard = false;
                if from == PathState::Failed {
                    self.cc.reset();
                }
            }
            PathState::Suspect => {}
            PathState::Failed => {
                // The first probe of a Failed path already waits two timeouts.
                self.backoff_shift = 1;
            }
        }
        Some(Transition {
            from,
            to,
            at_ns: now_ns,
        })
    }
}

/// A change of a path's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// State before.
    pub from: PathState,
    /// State after.
    pub to: PathState,
    /// When it happened.
    pub at_ns: u64,
}

/// A set of path indices, one bit per possible path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathSet {
    bits: [u64; MAX_PATHS / 64],
}

impl PathSet {
    /// The empty set.
    pub const EMPTY: PathSet = PathSet {
        bits: [0; MAX_PATHS / 64],
    };

    /// Adds `idx`; indices at or above [`MAX_PATHS`] are ignored.
    pub fn insert(&mut self, idx: PathIdx) {
        if let Some(w) = self.bits.get_mut(idx / 64) {
            *w |= 1 << (idx % 64);
        }
    }

    /// Removes `idx`.
    pub fn remove(&mut self, idx: PathIdx) {
        if let Some(w) = self.bits.get_mut(idx / 64) {
            *w &= !(1 << (idx % 64));
        }
    }

    /// The indices of `self` that are not in `other`.
    fn without(&self, other: &PathSet) -> PathSet {
        let mut out = *self;
        for (w, o) in out.bits.iter_mut().zip(other.bits.iter()) {
            *w &= !o;
        }
        out
    }

    /// Adds every index of `other`.
    fn add_all(&mut self, other: &PathSet) {
        for (w, o) in self.bits.iter_mut().zip(other.bits.iter()) {
            *w |= o;
        }
    }

    /// Returns whether `idx` is in the set.
    pub fn contains(&self, idx: PathIdx) -> bool {
        self.bits
            .get(idx / 64)
            .is_some_and(|w| w & (1 << (idx % 64)) != 0)
    }

    /// Returns whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }

    /// Returns the number of indices in the set.
    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Iterates over the indices in ascending order.
    pub fn iter(&self) -> PathSetIter {
        PathSetIter {
            set: *self,
            word: 0,
        }
    }
}

/// Iterator over a [`PathSet`] in ascending order.
#[derive(Clone, Debug)]
pub struct PathSetIter {
    set: PathSet,
    word: usize,
}

impl Iterator for PathSetIter {
    type Item = PathIdx;

    fn next(&mut self) -> Option<PathIdx> {
        while let Some(w) = self.set.bits.get_mut(self.word) {
            if *w != 0 {
                let bit = w.trailing_zeros() as usize;
                *w &= w.wrapping_sub(1);
                return Some(self.word.saturating_mul(64).saturating_add(bit));
            }
            self.word = self.word.saturating_add(1);
        }
        None
    }
}

/// What a pass of the choice of a path for new data found so far
/// ([`PathTable::pick_path_or_why`]).
#[derive(Clone, Copy, Debug)]
struct Tally {
    /// The earliest expected delivery of a path that may send, and the path.
    best: Option<(u64, PathIdx)>,
    /// The least that a path that may not send would take to deliver: at least its smoothed
    /// RTT, and twice that if its window is full (see `PathTable::delivery_floor`). With
    /// hundreds of paths, most packets then need no second pass over those paths.
    floor: u64,
    /// Why no path may take the packet, should none.
    why: HeldBack,
}

impl Tally {
    const EMPTY: Tally = Tally {
        best: None,
        floor: u64::MAX,
        why: HeldBack::NoPath,
    };

    /// Counts path `i`, which may carry data, for a packet of `bytes` at `now_ns`.
    fn count<X>(&mut self, t: &PathTable<X>, i: PathIdx, p: &Path, now_ns: u64, bytes: u32) {
        let room = p.has_room(bytes);
        if room && p.pace_ns <= now_ns {
            // A path whose floor is later than the best so far cannot win: no division for
            // the idle paths that the scheduler leaves alone because they are slower.
            if self
                .best
                .is_some_and(|(due, _)| t.delivery_floor(p, true) > due)
            {
                return;
            }
            let d = (t.delivery_estimate(p, bytes), i);
            self.best = Some(self.best.map_or(d, |b| b.min(d)));
            return;
        }
        self.floor = self.floor.min(t.delivery_floor(p, room));
        if room {
            self.why = HeldBack::Pacing;
        } else if self.why == HeldBack::NoPath {
            self.why = HeldBack::Window;
        }
    }
}

/// What the choice of a path for new data keeps between packets
/// ([`PathTable::poll_pick_path`]).
///
/// Every path that may carry data was sorted, as of the last *settling* pass, into those that
/// may send (of which only the best is kept), those whose window was full, and those that
/// only their pacing held back. These last, and every path that changed since, are
/// *unsettled*: looked at in full on every call. The others need not be: a path that may
/// send keeps its expected delivery and stays able to send until it changes, and one whose
/// window is full stays so.
#[derive(Clone, Copy, Debug)]
struct PickKept {
    /// Whether the rest holds, for packets of `bytes` from `at` on while `primary` holds.
    valid: bool,
    bytes: u32,
    at: u64,
    /// Whether an Active non-backup path existed: which paths may carry data.
    primary: bool,
    /// Paths changed since the settling pass, and those that pacing held back then.
    unsettled: PathSet,
    /// The earliest expected deliveries of settled paths that may send, and the paths, in
    /// order ([`PICK_KEPT_BEST`] of them; `(u64::MAX, MAX_PATHS)` where there are fewer).
    /// Every other settled path that may send would deliver later: the first of these that
    /// has not changed since is the best settled path. Most packets take the best, which
    /// changes it; with one kept, nearly every packet made a settling pass.
    best: [(u64, PathIdx); PICK_KEPT_BEST],
    /// Settled paths whose window had no room.
    full: PathSet,
    /// The least [`PathTable::delivery_floor`] of those, as of the settling pass.
    floor: u64,
}

impl PickKept {
    const NONE: PickKept = PickKept {
        valid: false,
        bytes: 0,
        at: 0,
        primary: false,
        unsettled: PathSet::EMPTY,
        best: [(u64::MAX, MAX_PATHS); PICK_KEPT_BEST],
        full: PathSet::EMPTY,
        floor: u64::MAX,
    };
}

/// What [`PathTable::on_tick`] asks of the glue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickResult {
    /// Paths that need a PROBE now.
    pub probe: PathSet,
    /// Paths whose state changed in this tick; [`Path::prev_state`] and
    /// [`Path::state`] tell from what to what.
    pub changed: PathSet,
}

/// Names every field of [`PathTable`] in an exhaustive pattern, so that adding a field stops the
/// build here until [`PathTable::init_in_place`], which must write each field, is updated too.
const _: fn(&PathTable) = table_fields_are_initialised;

fn table_fields_are_initialised<X>(t: &PathTable<X>) {
    let PathTable {
        cfg: _,
        slots: _,
        len: _,
        end: _,
        probe_credit: _,
        validation_credit: _,
        deadline_key: _,
        stale: _,
        keyed: _,
        earliest_kept: _,
        paid_heartbeats: _,
        earliest_heartbeat_kept: _,
        rto_stale: _,
        max_rto_kept: _,
        busy_paths: _,
        pick: _,
        state_changes: _,
    } = t;
}

/// The slots of a [`PathTable`]'s paths.
type PathSlots<X> = Slots<Slot<X>, PATH_CHUNK, PATH_DIR>;

/// A path and what its user keeps with it.
#[derive(Debug)]
struct Slot<X> {
    path: Path,
    extra: X,
    /// The path's failure-detector deadline ([`PathTable::deadline`]) as of the table's
    /// `deadline_key`, unless the table lists the path as `stale`; for a path in the table's
    /// `paid_heartbeats`, when its heartbeat interval starts instead.
    deadline: u64,
    /// The path's RTO ([`PathTable::rto_ns`]), unless the table lists the path in
    /// `rto_stale`.
    rto: u64,
}

/// The paths of one connection, each with a value of type `X` that the user of the table
/// keeps with it ([`PathTable::extra`]; the connection keeps its loss-detection state of the
/// path there).
///
/// The slots of the first [`PATH_CHUNK`] paths are part of the table; the others are
/// allocated in chunks as paths are added (see "Memory" in the module docs).
#[derive(Debug)]
pub struct PathTable<X = ()> {
    cfg: PathConfig,
    slots: PathSlots<X>,
    len: usize,
    /// One past the highest slot in use: scans stop here, so a connection
    /// with a few paths does not walk all `MAX_PATHS` slots on every packet.
    end: usize,
    /// Data packets sent and not yet spent on heartbeat probes of idle paths, up to
    /// `data_per_idle_probe` for each path.
    probe_credit: u32,
    /// Bytes that may still be sent on unvalidated paths: three times what the peer sent,
    /// less what went out on them (see "Path validation" in the module docs).
    validation_credit: u64,
    /// What, beside the path itself, the deadlines kept in the slots were computed with;
    /// `None` after a change of the configuration.
    deadline_key: Option<DeadlineKey>,
    /// Paths changed since their deadline was kept ([`PathTable::get_mut`]).
    stale: PathSet,
    /// Paths whose kept deadline depends on the `deadline_key` (see
    /// [`PathTable::deadline_keyed`]): those to compute again when it changes.
    keyed: PathSet,
    /// The earliest of the deadlines kept of the paths not in `paid_heartbeats` ([`NEVER`] if
    /// none), unless it must be looked for.
    earliest_kept: Option<u64>,
    /// Idle Active paths whose heartbeat the probe credit pays for: their slots keep the
    /// time from which their heartbeat interval runs ([`PathTable::heartbeat_from`]), which
    /// whether the credit pays for it does not move.
    paid_heartbeats: PathSet,
    /// The earliest of those times, unless it must be looked for.
    earliest_heartbeat_kept: Option<u64>,
    /// Paths changed since their RTO was kept.
    rto_stale: PathSet,
    /// The largest RTO kept of the paths that are not Failed and of all paths, unless they
    /// must be looked for ([`PathTable::poll_max_rto`]).
    max_rto_kept: Option<(u64, u64)>,
    /// Paths with bytes in flight.
    busy_paths: u32,
    /// What [`PathTable::poll_pick_path`] keeps between packets.
    pick: PickKept,
    /// Paths added, removed or moved to another state so far ([`PathTable::state_changes`]).
    state_changes: u64,
}

/// What a path's failure-detector deadline depends on beside the path and the
/// configuration (see [`PathTable::deadline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeadlineKey {
    /// The connection has bytes in flight.
    busy: bool,
    /// It has data waiting (see [`PathTable::on_tick_waiting`]).
    data_waiting: bool,
    /// The validation credit pays for a probe of an unvalidated path.
    probe_paid: bool,
}

impl PathTable {
    /// Creates an empty table, with nothing kept beside each path.
    ///
    /// `miss_threshold` and `loss_burst` below 1 are treated as 1.
    pub fn new(cfg: PathConfig) -> Self {
        let mut slot = MaybeUninit::<PathTable>::uninit();
        PathTable::init_in_place(&mut slot, cfg);
        // SAFETY: `init_in_place` initialised every field of `slot`.
        unsafe { slot.assume_init() }
    }
}

impl<X> PathTable<X> {
    /// Bytes of one chunk of path slots, [`PATH_CHUNK`] of them.
    pub const CHUNK_BYTES: usize = PathSlots::<X>::CHUNK_BYTES;

    /// Initialises an empty table in `slot`, the same as [`PathTable::new`] returns, and
    /// returns it.
    ///
    /// No path slot is allocated until a path is added. Whatever `slot` held before is
    /// overwritten without being dropped: a table there would leak its chunks.
    pub fn init_in_place(slot: &mut MaybeUninit<Self>, cfg: PathConfig) -> &mut Self {
        let p = slot.as_mut_ptr();
        // SAFETY: `p` comes from a `&mut MaybeUninit<Self>`, so it is non-null, aligned and
        // valid for writes of a `PathTable`. `addr_of_mut!` projects to each field without
        // creating a reference to uninitialised memory, and `write` does not read or drop the
        // old contents. Every field is written (checked by `table_fields_are_initialised`).
        unsafe {
            addr_of_mut!((*p).cfg).write(cfg);
            PathSlots::init_in_place(
                &mut *addr_of_mut!((*p).slots).cast::<MaybeUninit<PathSlots<X>>>(),
            );
            addr_of_mut!((*p).len).write(0);
            addr_of_mut!((*p).end).write(0);
            addr_of_mut!((*p).probe_credit).write(0);
            addr_of_mut!((*p).validation_credit).write(0);
            addr_of_mut!((*p).deadline_key).write(None);
            addr_of_mut!((*p).stale).write(PathSet::EMPTY);
            addr_of_mut!((*p).keyed).write(PathSet::EMPTY);
            addr_of_mut!((*p).earliest_kept).write(None);
            addr_of_mut!((*p).paid_heartbeats).write(PathSet::EMPTY);
            addr_of_mut!((*p).earliest_heartbeat_kept).write(None);
            addr_of_mut!((*p).rto_stale).write(PathSet::EMPTY);
            addr_of_mut!((*p).max_rto_kept).write(None);
            addr_of_mut!((*p).busy_paths).write(0);
            addr_of_mut!((*p).pick).write(PickKept::NONE);
            addr_of_mut!((*p).state_changes).write(0);
            slot.assume_init_mut()
        }
    }

    /// Returns the configuration.
    pub fn config(&self) -> &PathConfig {
        &self.cfg
    }

    /// Sets the probe interval of idle paths while the connection has data
    /// in flight ([`PathConfig::heartbeat_busy_ns`], at least 1 ns).
    ///
    /// Deadlines are computed from the configuration whenever they are
    /// needed, so the new interval applies from the next
    /// [`PathTable::next_timer`] on; the glue re-reads it afterwards.
    pub fn set_heartbeat_busy_ns(&mut self, ns: u64) {
        self.cfg.heartbeat_busy_ns = ns.max(1);
        self.deadline_key = None;
    }

    /// Makes this end wait for the other end's heartbeat probes on idle Active paths
    /// ([`PathConfig::heartbeat_yield`]); the accepting end of a connection does.
    ///
    /// A probe of the peer that arrives on a path proves it alive ([`PathTable::on_heard`])
    /// and delays this end's own heartbeat there. With equal heartbeats the two ends' probes
    /// cross: each is sent about when the other's would arrive, so every idle path carries
    /// two probes and two answers per heartbeat. An end that yields waits a probe timeout
    /// longer, the peer's probes come first, and it answers them instead: half the packets.
    /// It probes a path itself once the peer's probes stop arriving there for that long.
    pub fn set_heartbeat_yield(&mut self, on: bool) {
        self.cfg.heartbeat_yield = on;
        self.deadline_key = None;
    }

    /// Adds a path in state Active, with `X::default()` kept beside it, and returns its
    /// index, or `None` if the table is full or the memory for its slot cannot be allocated.
    pub fn add(&mut self, now_ns: u64, ids: PathIds, backup: bool) -> Option<PathIdx>
    where
        X: Default,
    {
        let cfg = self.cfg;
        let idx = self.slots.first_free().filter(|&i| i < MAX_PATHS)?;
        let slot = Slot {
            path: Path::new(now_ns, ids, backup, &cfg),
            extra: X::default(),
            deadline: NEVER,
            rto: 0,
        };
        self.slots.insert(idx, slot).ok()?;
        self.stale.insert(idx);
        self.rto_stale.insert(idx);
        self.pick.unsettled.insert(idx);
        self.state_changes = self.state_changes.wrapping_add(1);
        self.len = self.len.saturating_add(1);
        self.end = self.end.max(idx.saturating_add(1));
        self.earn_probe_credit(cfg.data_per_idle_probe);
        Some(idx)
    }

    /// Adds a path whose remote address is not proven, in state Suspect with reason
    /// [`StateReason::Unvalidated`], and returns its index, or `None` if the table is full or
    /// the memory for its slot cannot be allocated.
    ///
    /// It carries no data until a probe on it is answered ([`PathTable::on_probe_answer`])
    /// or its address is proven otherwise ([`PathTable::validate`]). It is probed as any
    /// Suspect or Failed path is, but only as far as the validation credit goes (see "Path
    /// validation" in the module docs).
    pub fn add_unvalidated(&mut self, now_ns: u64, ids: PathIds, backup: bool) -> Option<PathIdx>
    where
        X: Default,
    {
        let idx = self.add(now_ns, ids, backup)?;
        let p = self.get_mut(idx)?;
        p.validated = false;
        p.state = PathState::Suspect;
        p.prev_state = PathState::Suspect;
        p.reason = StateReason::Unvalidated;
        Some(idx)
    }

    /// Takes the remote address of path `idx` as proven: a probe on it, or on another path
    /// to the same address, was answered. The path may carry data from now on and becomes
    /// Active as a new path starts: heard now, no probe outstanding that it must answer in
    /// time, no RTT sample. Returns the transition, if any.
    ///
    /// The answer that proved the address gives no RTT sample: it crossed an empty path,
    /// while the first window of data the path then takes queues at its bottleneck; timed
    /// by it, a path on a slow link would look silent before that window drained. Like a
    /// new path, it is timed by its first answers to data, from the initial RTT until then.
    pub fn validate(&mut self, idx: PathIdx, now_ns: u64) -> Option<Transition> {
        let p = self.get_mut(idx)?;
        if p.validated {
            return None;
        }
        p.validated = true;
        p.missed_probes = 0;
        p.consecutive_losses = 0;
        // The answer to its own validation probe, should it still come, counts as any
        // answer does.
        p.probe_outstanding = false;
        p.last_heard_ns = p.last_heard_ns.max(now_ns);
        let tr = p.set_state(now_ns, PathState::Active, StateReason::ProbeAnswered);
        self.take_recent_peaks(idx);
        self.counted(tr)
    }

    /// A path that joins the running connection (its validation just succeeded) has seen
    /// none of the late answers the others have: it takes their recent RTT peaks where
    /// they are above its own, as the floor of its timeouts and hedging wait, until they
    /// age out (one to two seconds, 125 to 250 ms). A host that stalls makes every path's
    /// answers late, and a path that came in after the stalls began would take the next one
    /// for its failure.
    fn take_recent_peaks(&mut self, idx: PathIdx) {
        let others = || {
            self.iter()
                .filter(|&(j, q)| j != idx && q.validated && q.state == PathState::Active)
        };
        let peak = others().map(|(_, q)| q.rtt.peak).max_by_key(Peak::get);
        let short = others()
            .map(|(_, q)| q.rtt.short_peak)
            .max_by_key(Peak::get);
        let Some(p) = self.get_mut(idx) else {
            return;
        };
        if let Some(k) = peak.filter(|k| k.get() > p.rtt.peak.get()) {
            p.rtt.peak = k;
        }
        if let Some(k) = short.filter(|k| k.get() > p.rtt.short_peak.get()) {
            p.rtt.short_peak = k;
        }
    }

    /// Adds `bytes` to the validation credit, up to [`VALIDATION_CREDIT_MAX`]: the
    /// connection calls it with three times the bytes of every packet the peer sent it.
    pub fn earn_validation_credit(&mut self, bytes: u64) {
        self.validation_credit = self
            .validation_credit
            .saturating_add(bytes)
            .min(VALIDATION_CREDIT_MAX);
    }

    /// Returns the validation credit left, in bytes.
    pub fn validation_credit(&self) -> u64 {
        self.validation_credit
    }

    /// Asks to send `bytes` (not a probe: the detector pays for those) on path `idx`:
    /// always granted on a validated path; on an unvalidated one only within the validation
    /// credit, which it takes.
    pub fn spend_validation_credit(&mut self, idx: PathIdx, bytes: u64) -> bool {
        if !matches!(self.get(idx), Some(p) if !p.validated) {
            return true;
        }
        if self.validation_credit < bytes {
            return false;
        }
        self.validation_credit = self.validation_credit.saturating_sub(bytes);
        true
    }

    /// Whether the detector may send the probe `p` waits for: any path's, but an
    /// unvalidated one's only if the validation credit pays for it.
    fn probe_affordable(&self, p: &Path) -> bool {
        p.validated || self.validation_credit >= PROBE_WIRE_LEN
    }

    /// Removes a path, and what was kept beside it; returns whether it was there. Its index
    /// may be reused. The memory of its slot is freed with the last path of its chunk.
    pub fn remove(&mut self, idx: PathIdx) -> bool {
        let Some(gone) = self.slots.take(idx) else {
            return false;
        };
        if gone.path.inflight > 0 {
            self.busy_paths = self.busy_paths.saturating_sub(1);
        }
        self.keyed.remove(idx);
        self.paid_heartbeats.remove(idx);
        self.pick.unsettled.insert(idx);
        // Its deadline may have been the earliest, and its RTO the largest.
        self.earliest_kept = None;
        self.earliest_heartbeat_kept = None;
        self.max_rto_kept = None;
        self.state_changes = self.state_changes.wrapping_add(1);
        self.len = self.len.saturating_sub(1);
        while self.end > 0 && self.slots.get(self.end - 1).is_none() {
            self.end -= 1;
        }
        true
    }

    /// Returns the path at `idx`.
    #[inline]
    pub fn get(&self, idx: PathIdx) -> Option<&Path> {
        self.slots.get(idx).map(|s| &s.path)
    }

    /// Returns path `idx` to change it; its deadline and RTO are computed again when next
    /// needed.
    #[inline]
    fn get_mut(&mut self, idx: PathIdx) -> Option<&mut Path> {
        self.stale.insert(idx);
        self.rto_stale.insert(idx);
        self.pick.unsettled.insert(idx);
        self.slots.get_mut(idx).map(|s| &mut s.path)
    }

    /// Returns what is kept beside the path at `idx`.
    #[inline]
    pub fn extra(&self, idx: PathIdx) -> Option<&X> {
        self.slots.get(idx).map(|s| &s.extra)
    }

    /// Returns what is kept beside the path at `idx`, mutably.
    #[inline]
    pub fn extra_mut(&mut self, idx: PathIdx) -> Option<&mut X> {
        self.slots.get_mut(idx).map(|s| &mut s.extra)
    }

    /// Returns the number of chunks of path slots allocated.
    pub fn chunks(&self) -> usize {
        self.slots.chunks()
    }

    /// Returns the bytes allocated for path slots, beyond the table's own size.
    pub fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes()
    }

    /// Returns the index of the path with this wire `path_id`.
    pub fn find(&self, path_id: u32) -> Option<PathIdx> {
        // Paths are usually added in path id order from 0: try that slot
        // before the scan.
        let guess = usize::try_from(path_id).unwrap_or(usize::MAX);
        if self.get(guess).is_some_and(|p| p.ids.path_id == path_id) {
            return Some(guess);
        }
        self.iter()
            .find(|(_, p)| p.ids.path_id == path_id)
            .map(|(i, _)| i)
    }

    /// Returns one past the highest index in use: every path's index is below it.
    pub fn index_end(&self) -> usize {
        self.end
    }

    /// Returns the number of paths.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the table has no path.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Iterates over `(index, path)` in ascending index order.
    pub fn iter(&self) -> impl Iterator<Item = (PathIdx, &Path)> + '_ {
        self.slots.iter(self.end).map(|(i, s)| (i, &s.path))
    }

    /// Returns the number of paths in `state`.
    pub fn paths_in_state(&self, state: PathState) -> usize {
        self.iter().filter(|(_, p)| p.state == state).count()
    }

    /// Returns whether a path is in `state`; stops at the first.
    pub fn any_in_state(&self, state: PathState) -> bool {
        self.iter().any(|(_, p)| p.state == state)
    }

    /// Returns the bytes in flight over all paths.
    pub fn total_inflight(&self) -> u64 {
        self.iter()
            .fold(0u64, |acc, (_, p)| acc.saturating_add(p.inflight))
    }

    /// Marks a path as backup (used only when no other path is Active) or not.
    pub fn set_backup(&mut self, idx: PathIdx, backup: bool) {
        if let Some(p) = self.get_mut(idx) {
            p.backup = backup;
        }
    }

    /// Sets the scheduling weight of a path (clamped to at least 1).
    ///
    /// The scheduler divides a path's expected delivery time by
    /// `weight / WEIGHT_DEFAULT`: a path of weight 32 looks twice as fast.
    pub fn set_weight(&mut self, idx: PathIdx, weight: u8) {
        if let Some(p) = self.get_mut(idx) {
            p.weight = weight.max(1);
        }
    }

    /// Returns the retransmission timeout of a path: RFC 6298's, or 5/4 of the largest RTT
    /// sample of the last one to two seconds if that is longer, clamped to the configured
    /// bounds.
    pub fn rto_ns(&self, idx: PathIdx) -> Option<u64> {
        let p = self.get(idx)?;
        let (srtt, var) = p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns);
        // A timeout shorter than a stall that just happened would fire at the next one and
        // declare everything in flight lost.
        let rto = srtt
            .saturating_add(var.saturating_mul(4).max(RTO_GRANULARITY_NS))
            .max(p.rtt.peak_timeout());
        Some(clamp_lo_hi(rto, self.cfg.rto_min_ns, self.cfg.rto_max_ns))
    }

    /// Returns the largest RTO ([`PathTable::rto_ns`]) of the paths that are not Failed and
    /// the largest of all paths, 0 where there is none, from the RTOs kept in the slots: the
    /// connection asks on every acknowledgement that moves its RTO timer, while one changes
    /// a path or a few. The largest are kept as well, and looked for again only when the
    /// path that had one got a smaller RTO or went.
    pub fn poll_max_rto(&mut self) -> (u64, u64) {
        let stale = core::mem::replace(&mut self.rto_stale, PathSet::EMPTY);
        let mut kept = self.max_rto_kept;
        for idx in stale.iter() {
            let Some(p) = self.get(idx) else {
                continue;
            };
            let failed = p.state == PathState::Failed;
            let Some(rto) = self.rto_ns(idx) else {
                continue;
            };
            let live = if failed { 0 } else { rto };
            let Some(s) = self.slots.get_mut(idx) else {
                continue;
            };
            let old = core::mem::replace(&mut s.rto, rto);
            kept = kept.and_then(|(max_live, max_all)| {
                // Whether the path counted as live before is not kept: an old RTO equal to
                // the largest live one is taken for it, at worst a needless search.
                let shrank = |new: u64, max: u64| old == max && new < max;
                if shrank(rto, max_all) || shrank(live, max_live) {
                    None
                } else {
                    Some((max_live.max(live), max_all.max(rto)))
                }
            });
        }
        let max = kept.unwrap_or_else(|| {
            self.slots
                .iter(self.end)
                .fold((0, 0), |(live, all), (_, s)| {
                    let live = if s.path.state == PathState::Failed {
                        live
                    } else {
                        live.max(s.rto)
                    };
                    (live, all.max(s.rto))
                })
        });
        self.max_rto_kept = Some(max);
        max
    }

    /// Returns how long a probe of this path may stay unanswered before it counts as missed.
    pub fn probe_timeout_ns(&self, idx: PathIdx) -> Option<u64> {
        self.get(idx).map(|p| self.probe_timeout(p))
    }

    fn probe_timeout(&self, p: &Path) -> u64 {
        let (srtt, var) = p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns);
        let t = srtt
            .saturating_add(var.saturating_mul(4))
            .max(p.rtt.peak_timeout());
        // The upper bound caps the variance term only: a path whose answers
        // really take longer than the bound (a deep queue) is slow, not dead.
        clamp_lo_hi(
            t,
            self.cfg.probe_timeout_min_ns,
            self.cfg.probe_timeout_max_ns.max(srtt.saturating_mul(2)),
        )
    }

    /// The path's probe timeout doubled `shift` times (at most [`MAX_BACKOFF_SHIFT`]).
    fn backed_off(&self, p: &Path, shift: u8) -> u64 {
        self.probe_timeout(p)
            .saturating_mul(1u64 << shift.min(MAX_BACKOFF_SHIFT))
    }

    fn failed_interval(&self, p: &Path) -> u64 {
        let t = self.backed_off(p, p.backoff_shift);
        t.min(
            self.cfg
                .failed_probe_max_ns
                .max(self.cfg.probe_timeout_min_ns),
        )
    }

    /// Reports that `bytes` of data (a retransmission if `retransmit`) were sent on a path.
    pub fn on_sent(&mut self, idx: PathIdx, now_ns: u64, bytes: u32, retransmit: bool) {
        let pacing = self.cfg.pacing;
        let Some(p) = self.get_mut(idx) else {
            return;
        };
        // A path whose packets all had copies answered elsewhere was not heard meanwhile: it
        // stays silent since its first unanswered packet, or a dead path that the copies
        // empty now and then would never look silent for a whole probe timeout.
        if p.inflight == 0 && !p.released_unheard {
            p.inflight_since_ns = now_ns;
        }
        let went_busy = p.inflight == 0 && bytes > 0;
        p.inflight = p.inflight.saturating_add(u64::from(bytes));
        p.last_send_ns = now_ns;
        if pacing {
            p.pace(now_ns, bytes);
        }
        let c = &mut p.counters;
        c.bytes_sent = c.bytes_sent.saturating_add(u64::from(bytes));
        c.pkts_sent = c.pkts_sent.saturating_add(1);
        if retransmit {
            c.bytes_retx = c.bytes_retx.saturating_add(u64::from(bytes));
            c.pkts_retx = c.pkts_retx.saturating_add(1);
        }
        p.cc.on_packet_sent(now_ns, bytes);
        if went_busy {
            self.busy_paths = self.busy_paths.saturating_add(1);
        }
        self.earn_probe_credit(1);
    }

    /// Takes `bytes` off what is in flight on path `idx`, and counts the path out of those
    /// with bytes in flight if that was the last of them.
    fn take_inflight(&mut self, idx: PathIdx, bytes: u32) {
        let Some(p) = self.get_mut(idx) else {
            return;
        };
        let had = p.inflight > 0;
        p.inflight = p.inflight.saturating_sub(u64::from(bytes));
        if had && p.inflight == 0 {
            self.busy_paths = self.busy_paths.saturating_sub(1);
        }
    }

    /// Most credit the table holds: one heartbeat probe of every path.
    fn probe_credit_cap(&self) -> u32 {
        let paths = u32::try_from(self.len).unwrap_or(u32::MAX);
        self.cfg.data_per_idle_probe.saturating_mul(paths)
    }

    fn earn_probe_credit(&mut self, units: u32) {
        self.probe_credit = self
            .probe_credit
            .saturating_add(units)
            .min(self.probe_credit_cap());
    }

    /// Whether a heartbeat probe of `p`, an idle Active path, spends credit: the connection
    /// has data in flight (`busy`), the limit is on, and the path has a settled RTT.
    fn heartbeat_costs_credit(&self, p: &Path, busy: bool) -> bool {
        busy && self.cfg.data_per_idle_probe > 0 && p.srtt_ns().is_some() && !p.rtt.provisional()
    }

    /// Reports that `bytes` sent on a path were acknowledged.
    ///
    /// `rtt_ns` is the RTT sample of this acknowledgement, if any; `ece` tells
    /// whether the receiver echoed an ECN mark. An acknowledgement proves an
    /// Active path alive, but a Suspect or Failed path becomes Active only by
    /// answering a probe, since a few late acknowledgements from a path that
    /// just broke prove nothing about it now.
    pub fn on_ack(
        &mut self,
        idx: PathIdx,
        now_ns: u64,
        bytes: u32,
        rtt_ns: Option<u64>,
        ece: bool,
    ) {
        self.ack(idx, now_ns, bytes, rtt_ns, 0, true, ece);
    }

    #[allow(clippy::too_many_arguments)]
    fn ack(
        &mut self,
        idx: PathIdx,
        now_ns: u64,
        bytes: u32,
        rtt_ns: Option<u64>,
        held_ns: u64,
        own: bool,
        ece: bool,
    ) {
        self.take_inflight(idx, bytes);
        let Some(p) = self.get_mut(idx) else {
            return;
        };
        let rtt_ns = rtt_ns.map(|r| p.rtt.sample(now_ns, r, held_ns, own));
        p.last_ack_ns = now_ns;
        p.last_heard_ns = now_ns;
        p.released_unheard = false;
        p.counters.bytes_acked = p.counters.bytes_acked.saturating_add(u64::from(bytes));
        p.counters.pkts_acked = p.counters.pkts_acked.saturating_add(1);
        if p.state == PathState::Active {
            p.missed_probes = 0;
            p.consecutive_losses = 0;
            p.probe_outstanding = false;
        }
        p.cc.on_ack(now_ns, bytes, rtt_ns, ece);
    }

    /// Reports that `bytes` sent on path `idx` were acknowledged by an answer that came back
    /// by path `via`, with `rtt_ns` the time it took if that is an RTT sample at all (see
    /// [`PathTable::on_ack`]).
    ///
    /// The answer took `idx`'s way there and `via`'s way back. Paths of one plane share
    /// their route, and planes whose own minimum RTTs differ by no more than
    /// [`ALIKE_PLANES_NS`] are taken for alike: then the answer is an RTT sample of `idx`.
    /// Otherwise `via`'s way back may be shorter or longer by far (over a 1 ms link instead
    /// of a 25 ms one it makes a 50 ms path look like a 27 ms one). Such a sample only starts
    /// a path that has no sample by its own plane yet, and its minimum RTT, which the first
    /// such sample replaces; after that it times nothing, and the acknowledgement counts
    /// for the congestion controller without a sample.
    ///
    /// `held_ns` is how long the peer held the answer after the latest packet it covers
    /// arrived (its ACK delay): that time is no part of the path's RTT.
    #[allow(clippy::too_many_arguments)]
    pub fn on_ack_by_way_of(
        &mut self,
        idx: PathIdx,
        via: Option<PathIdx>,
        now_ns: u64,
        bytes: u32,
        rtt_ns: Option<u64>,
        held_ns: u64,
        ece: bool,
    ) {
        let Some(p) = self.get(idx) else {
            return;
        };
        let own = via.and_then(|v| self.get(v)).is_some_and(|q| {
            p.ids.plane == q.ids.plane
                || matches!((p.rtt.own_min(), q.rtt.own_min()),
                    (Some(x), Some(y)) if x.abs_diff(y) <= ALIKE_PLANES_NS)
        });
        let first = !p.rtt.own_min;
        if own || first {
            self.ack(idx, now_ns, bytes, rtt_ns, held_ns, own, ece);
        } else {
            if let (Some(p), Some(r)) = (self.get_mut(idx), rtt_ns) {
                p.rtt.answered(now_ns, r);
            }
            self.ack(idx, now_ns, bytes, None, 0, false, ece);
        }
    }

    /// Reports that a packet of the peer arrived on a path.
    ///
    /// Any packet proves the path carries traffic now, so an Active path's
    /// silence clock restarts; like [`PathTable::on_ack`] it does not revive a
    /// Suspect or Failed path, which must answer a probe.
    pub fn on_heard(&mut self, idx: PathIdx, now_ns: u64) {
        // The glue tells every path what other connections heard on it, mostly nothing new:
        // a path that this does not change is not marked changed either.
        let news = self.get(idx).is_some_and(|p| {
            p.state == PathState::Active && (now_ns > p.last_heard_ns || p.released_unheard)
        });
        if let Some(p) = self.get_mut(idx).filter(|_| news) {
            p.last_heard_ns = p.last_heard_ns.max(now_ns);
            p.released_unheard = false;
        }
    }

    /// Reports that another connection sent a PROBE at `sent_ns` over the
    /// network path under this path.
    ///
    /// Its answer proves the network path alive for every connection (the
    /// glue reports it with [`PathTable::on_heard`]), so an Active path that
    /// has no probe of its own outstanding counts it as its own last probe
    /// and waits a heartbeat before probing itself. Suspect and Failed paths
    /// still need an answer to their own probe.
    pub fn on_probed_elsewhere(&mut self, idx: PathIdx, sent_ns: u64) {
        // As for `on_heard`: only news marks the path changed.
        let news = self.get(idx).is_some_and(|p| {
            p.state == PathState::Active && !p.probe_outstanding && sent_ns > p.last_probe_ns
        });
        if let Some(p) = self.get_mut(idx).filter(|_| news) {
            p.last_probe_ns = sent_ns;
        }
    }

    /// Reports that `bytes` sent on a path were declared lost.
    ///
    /// `loss_burst` losses in a row make an Active path Suspect, unless only
    /// `min_active` paths are Active. The glue should re-read
    /// [`PathTable::next_timer`] after a transition: a Suspect path wants a
    /// probe at once.
    pub fn on_loss(&mut self, idx: PathIdx, now_ns: u64, bytes: u32) -> Option<Transition> {
        self.count_loss(idx, now_ns, bytes, true)
    }

    /// Reports that `bytes` sent on a path left it without an answer that can be credited to
    /// it: a copy of the packet went on another path as well, and either may have arrived.
    /// Only the bytes in flight change.
    pub fn on_released(&mut self, idx: PathIdx, bytes: u32) {
        self.take_inflight(idx, bytes);
        if let Some(p) = self.get_mut(idx) {
            p.released_unheard = true;
        }
    }

    /// Reports that `bytes` sent on a path were lost to a retransmission timeout.
    ///
    /// Like [`PathTable::on_loss`], except that it does not count towards a loss burst: a
    /// timeout means that no path was acknowledged for a while, which says nothing against
    /// this one (a stalled peer or host); a dead path among live ones is found by the failure
    /// detector long before.
    pub fn on_timeout_loss(&mut self, idx: PathIdx, now_ns: u64, bytes: u32) {
        let _ = self.count_loss(idx, now_ns, bytes, false);
    }

    fn count_loss(
        &mut self,
        idx: PathIdx,
        now_ns: u64,
        bytes: u32,
        burst: bool,
    ) -> Option<Transition> {
        let active = self.paths_in_state(PathState::Active);
        let cfg = self.cfg;
        self.take_inflight(idx, bytes);
        let p = self.get_mut(idx)?;
        p.counters.bytes_lost = p.counters.bytes_lost.saturating_add(u64::from(bytes));
        p.counters.pkts_lost = p.counters.pkts_lost.saturating_add(1);
        p.cc.on_loss(now_ns, bytes);
        if p.state != PathState::Active || !burst {
            return None;
        }
        p.consecutive_losses = p.consecutive_losses.saturating_add(1);
        if p.consecutive_losses >= cfg.loss_burst.max(1) && active > usize::from(cfg.min_active) {
            let tr = p.set_state(now_ns, PathState::Suspect, StateReason::LossBurst);
            return self.counted(tr);
        }
        None
    }

    /// Reports that one loss [`PathTable::on_loss`] was told of proved needless: the packet
    /// arrived after all. Its congestion controller may undo its decrease, and the loss no
    /// longer counts towards a loss burst.
    pub fn on_needless_loss(&mut self, idx: PathIdx) {
        if let Some(p) = self.get_mut(idx) {
            p.cc.on_needless_loss();
            p.consecutive_losses = p.consecutive_losses.saturating_sub(1);
        }
    }

    /// Reports a retransmission timeout on a path to its congestion controller.
    ///
    /// The lost packets themselves are reported with [`PathTable::on_loss`].
    pub fn on_rto(&mut self, idx: PathIdx, now_ns: u64) {
        if let Some(p) = self.get_mut(idx) {
            p.cc.on_rto(now_ns);
        }
    }

    /// Reports that a PROBE with `nonce` was sent on a path.
    ///
    /// The path remembers the nonce and the send time of its latest [`PROBES_REMEMBERED`]
    /// probes for [`PathTable::on_probe_answer`]. The nonce should be unpredictable to anyone
    /// but the peer, who sees it in the probe; a nonce of 0 is remembered as none, so its
    /// answer never counts.
    pub fn on_probe_sent(&mut self, idx: PathIdx, now_ns: u64, nonce: u64) {
        if let Some(p) = self.get_mut(idx) {
            p.probe_outstanding = true;
            p.last_probe_ns = now_ns;
            p.counters.probes_sent = p.counters.probes_sent.saturating_add(1);
            p.probes.rotate_right(1);
            if let Some(first) = p.probes.first_mut() {
                *first = SentProbe {
                    nonce,
                    sent_ns: now_ns,
                };
            }
        }
    }

    /// Reports a PROBE_ACK with `nonce` that arrived on path `idx`.
    ///
    /// It counts only if `nonce` is that of one of the path's latest [`PROBES_REMEMBERED`]
    /// probes not yet answered: then the probe is answered (a repeated answer does not count
    /// again) and the path is handled as by [`PathTable::on_probe_ack`], with the RTT measured
    /// from the time this end sent the probe, whatever the answer claims. Anything else is
    /// [`UnknownProbe`] and changes nothing.
    pub fn on_probe_answer(
        &mut self,
        idx: PathIdx,
        now_ns: u64,
        nonce: u64,
    ) -> Result<Option<Transition>, UnknownProbe> {
        let p = self.get_mut(idx).ok_or(UnknownProbe)?;
        if nonce == 0 {
            return Err(UnknownProbe);
        }
        let entry = p
            .probes
            .iter_mut()
            .find(|e| e.nonce == nonce)
            .ok_or(UnknownProbe)?;
        let sent_ns = entry.sent_ns;
        *entry = SentProbe::default();
        if !p.validated {
            // Its address is proven (see `validate`).
            return Ok(self.validate(idx, now_ns));
        }
        Ok(self.on_probe_ack(idx, now_ns, now_ns.saturating_sub(sent_ns)))
    }

    /// Reports the answer to a PROBE of a path, with the probe's RTT as this end measured it.
    ///
    /// Any answer, even one that arrives after its probe timed out, proves the
    /// path alive and makes it Active. A path coming back from Failed starts
    /// with a fresh congestion controller. The caller has checked that the answer is genuine
    /// (see [`PathTable::on_probe_answer`], which the connection uses).
    pub fn on_probe_ack(&mut self, idx: PathIdx, now_ns: u64, rtt_ns: u64) -> Option<Transition> {
        let p = self.get_mut(idx)?;
        // The answer echoes a probe sent to the path's remote address: it is proven.
        let joins = !p.validated;
        p.validated = true;
        p.rtt.sample(now_ns, rtt_ns, 0, true);
        p.last_heard_ns = now_ns;
        p.released_unheard = false;
        p.probe_outstanding = false;
        p.missed_probes = 0;
        p.consecutive_losses = 0;
        let tr = p.set_state(now_ns, PathState::Active, StateReason::ProbeAnswered);
        if joins {
            self.take_recent_peaks(idx);
        }
        self.counted(tr)
    }

    /// Reports that a packet could not be sent on a path at all: the host has no route to
    /// the peer's address from the path's local address, or the path's interface is down.
    ///
    /// Nothing sent on the path can arrive, so it is Failed at once rather than after the
    /// probes a silent path takes. It comes back as any Failed path does, when a probe is
    /// answered; its probes keep their backoff, and each one that cannot be sent counts as
    /// missed.
    pub fn on_send_error(&mut self, idx: PathIdx, now_ns: u64) -> Option<Transition> {
        let p = self.get_mut(idx)?;
        if p.state == PathState::Failed {
            return None;
        }
        let tr = p.set_state(now_ns, PathState::Failed, StateReason::LocalDown);
        self.counted(tr)
    }

    /// Counts `tr` among the [`PathTable::state_changes`], if it is one.
    fn counted(&mut self, tr: Option<Transition>) -> Option<Transition> {
        if tr.is_some() {
            self.state_changes = self.state_changes.wrapping_add(1);
        }
        tr
    }

    /// Returns a number that changes whenever a path is added or removed or changes state
    /// (it wraps): whoever reports the paths' states need not look at them while it stays.
    pub fn state_changes(&self) -> u64 {
        self.state_changes
    }

    /// Returns when the path next needs the failure detector's attention.
    fn deadline(&self, p: &Path, busy: bool, data_waiting: bool) -> u64 {
        if p.probe_outstanding {
            // Each probe missed in a row gives the next one twice as long, up to the miss
            // that makes the path Failed: a host too busy to answer for a few probe
            // timeouts does not take its paths to Failed, while the first miss still
            // makes a path Suspect and moves its data at once.
            // The doubling stops at the longest wait of a Failed path's probes, so that a
            // path whose RTT is long already fails in about `miss_threshold` timeouts.
            let shift = p
                .missed_probes
                .min(self.cfg.miss_threshold.saturating_sub(1));
            let wait = self
                .backed_off(p, shift)
                .min(self.probe_timeout(p).max(self.cfg.failed_probe_max_ns));
            return p.last_probe_ns.saturating_add(wait);
        }
        if !self.probe_affordable(p) {
            // Its next probe waits for the peer to send more.
            return NEVER;
        }
        let timeout = self.probe_timeout(p);
        match p.state {
            PathState::Active if p.missed_probes > 0 => 0,
            PathState::Active if p.inflight > 0 => p
                .last_heard_ns
                .max(p.inflight_since_ns)
                .saturating_add(timeout),
            PathState::Active => {
                // With one probe at a time, a path whose RTT is long is probed once per RTT;
                // its next probe is not held back by the RTT too, so that a path the
                // scheduler leaves idle because it was slow is found fast again soon.
                // A path timed only by answers that came back by another plane is probed
                // as if busy even on an idle connection: its smoothed RTT holds the other
                // plane's way back (and an acknowledgement's delay), and the scheduler,
                // which may leave it idle for that, would not correct it before the idle
                // heartbeat. A probe's answer comes back by the path it tests.
                let unpaid = self.heartbeat_costs_credit(p, busy) && !self.heartbeat_paid();
                let hb = if (busy || p.rtt.provisional()) && !unpaid {
                    self.cfg.heartbeat_busy_ns
                } else {
                    self.cfg.heartbeat_idle_ns
                };
                self.heartbeat_from(p, timeout).saturating_add(hb)
            }
            PathState::Suspect => 0,
            // Nothing waits for a failed path of an idle connection: probing
            // it more often than an idle path would only load both hosts.
            // Data waiting counts, even with nothing in flight (after every
            // path failed): it resumes as soon as a path answers.
            PathState::Failed if !busy && !data_waiting => p
                .last_probe_ns
                .saturating_add(self.failed_interval(p).max(self.cfg.heartbeat_idle_ns)),
            PathState::Failed => p.last_probe_ns.saturating_add(self.failed_interval(p)),
        }
    }

    /// The time from which an idle Active path's heartbeat interval runs: its latest answer or
    /// probe, a probe `timeout` later if this end yields ([`PathConfig::heartbeat_yield`]).
    fn heartbeat_from(&self, p: &Path, timeout: u64) -> u64 {
        let from = p.last_heard_ns.max(p.last_probe_ns);
        if self.cfg.heartbeat_yield {
            from.saturating_add(timeout)
        } else {
            from
        }
    }

    /// Whether the probe credit pays for a heartbeat of an idle path now.
    fn heartbeat_paid(&self) -> bool {
        self.probe_credit >= self.cfg.data_per_idle_probe
    }

    /// The heartbeat interval of the paths in `paid_heartbeats`: what their deadline is
    /// beyond their [`PathTable::heartbeat_from`].
    fn paid_heartbeat_interval(&self) -> u64 {
        if self.heartbeat_paid() {
            self.cfg.heartbeat_busy_ns
        } else {
            self.cfg.heartbeat_idle_ns
        }
    }

    /// Whether [`PathTable::deadline`] of `p`, with `busy`, is an idle Active path's heartbeat
    /// whose interval the probe credit decides: then the table keeps
    /// [`PathTable::heartbeat_from`] instead, which the credit does not move.
    fn heartbeat_paid_by_credit(&self, p: &Path, busy: bool) -> bool {
        !p.probe_outstanding
            && self.probe_affordable(p)
            && p.state == PathState::Active
            && p.missed_probes == 0
            && p.inflight == 0
            && self.heartbeat_costs_credit(p, busy)
    }

    /// What the table keeps for `p`, with `busy` and `data_waiting`: whether it goes in
    /// `paid_heartbeats`, and its [`PathTable::heartbeat_from`] if so, else its deadline.
    fn kept_deadline(&self, p: &Path, busy: bool, data_waiting: bool) -> (bool, u64) {
        if self.heartbeat_paid_by_credit(p, busy) {
            (true, self.heartbeat_from(p, self.probe_timeout(p)))
        } else {
            (false, self.deadline(p, busy, data_waiting))
        }
    }

    /// Whether [`PathTable::deadline`] of `p` reads what its [`DeadlineKey`] holds: whether
    /// the connection is busy or has data waiting, or whether the validation credit pays for
    /// a probe. Must follow `deadline`'s branches.
    fn deadline_keyed(p: &Path) -> bool {
        if p.probe_outstanding {
            return false;
        }
        if !p.validated {
            // Whether a probe is affordable.
            return true;
        }
        match p.state {
            PathState::Active => p.missed_probes == 0 && p.inflight == 0,
            PathState::Suspect => false,
            PathState::Failed => true,
        }
    }

    /// Runs the failure detector: counts missed probes and heartbeats, changes
    /// states and says which paths need a PROBE now.
    ///
    /// Calling it early or often is harmless; it acts only on deadlines that
    /// have passed. The connection counts as busy while bytes are in flight;
    /// see [`PathTable::on_tick_waiting`] for one with data waiting besides.
    pub fn on_tick(&mut self, now_ns: u64) -> TickResult {
        self.on_tick_waiting(now_ns, false)
    }

    /// [`PathTable::on_tick`] for a connection that may have data waiting
    /// (unacknowledged or queued) with nothing in flight, as after every
    /// path failed and was emptied: with `data_waiting` its failed paths are
    /// probed at the busy backoff, so it resumes as soon as one answers. The
    /// heartbeat of its idle Active paths still follows what is in flight.
    pub fn on_tick_waiting(&mut self, now_ns: u64, data_waiting: bool) -> TickResult {
        let mut out = TickResult::default();
        let busy = self.poll_busy();
        let mut active = self.paths_in_state(PathState::Active);
        let min_active = usize::from(self.cfg.min_active);
        let threshold = self.cfg.miss_threshold.max(1);
        let kept = self.refresh_deadlines(busy, data_waiting);
        for idx in 0..self.end {
            let Some(s) = self.slots.get(idx) else {
                continue;
            };
            let p = &s.path;
            // A path handled earlier in this loop may have spent the validation credit that
            // the deadlines kept assumed: then this one's is computed again. A heartbeat's
            // interval follows the probe credit as it is now.
            let deadline = if self.deadline_key(busy, data_waiting) != kept {
                self.deadline(p, busy, data_waiting)
            } else if self.paid_heartbeats.contains(idx) {
                s.deadline.saturating_add(self.paid_heartbeat_interval())
            } else {
                s.deadline
            };
            if now_ns < deadline {
                continue;
            }
            // The deadline was an idle Active path's heartbeat (see `deadline`).
            let heartbeat = p.state == PathState::Active
                && !p.probe_outstanding
                && p.missed_probes == 0
                && p.inflight == 0
                && self.heartbeat_costs_credit(p, busy);
            // A tick that comes a whole probe timeout after the deadline means
            // this host did not run for that long: answers may be sitting
            // unread, so the path is probed again rather than blamed.
            let late = now_ns.saturating_sub(deadline) > self.probe_timeout(p);
            // A missed probe, or a busy Active path that stayed silent for a
            // whole probe timeout while the peer acknowledged data sent on
            // other paths; otherwise the deadline was a probe's. When no path
            // has been acknowledged since this one went quiet, the silence may
            // be the peer's (a full receive buffer, a stalled host) rather
            // than the path's, so the path is probed before anything is held
            // against it.
            let silent_alone = || {
                let quiet_since = p.last_heard_ns.max(p.inflight_since_ns);
                // Its unanswered packets were sent after its last answered one: only an
                // answer to a packet sent later still, on another path, shows that the
                // peer is processing what was sent at the time. Acknowledgements of older
                // packets, which a peer catching up after a stall sends first, do not.
                let unanswered_from = p.rtt.answered_sent_ns.max(p.inflight_since_ns);
                self.iter().any(|(j, q)| {
                    j != idx
                        && q.last_ack_ns > quiet_since
                        && q.rtt.answered_sent_ns > unanswered_from
                })
            };
            let missed = !late
                && (p.probe_outstanding
                    || (p.state == PathState::Active
                        && p.missed_probes == 0
                        && p.inflight > 0
                        && silent_alone()));
            let Some(p) = self.get_mut(idx) else {
                continue;
            };
            let mut next = p.state;
            let validated = p.validated;
            p.probe_outstanding = false;
            if missed {
                p.missed_probes = p.missed_probes.saturating_add(1);
                p.counters.probes_missed = p.counters.probes_missed.saturating_add(1);
                if p.missed_probes >= threshold {
                    next = PathState::Failed;
                } else if p.state == PathState::Active && active > min_active {
                    next = PathState::Suspect;
                }
                if p.state == PathState::Failed {
                    p.backoff_shift = p.backoff_shift.saturating_add(1).min(MAX_BACKOFF_SHIFT);
                }
            }
            let from = p.state;
            let why = if validated {
                StateReason::ProbeTimeout
            } else {
                StateReason::Unvalidated
            };
            // Only a miss moves a path here; otherwise `next` is its state.
            if p.set_state(now_ns, next, why).is_some() {
                out.changed.insert(idx);
                if from == PathState::Active {
                    active = active.saturating_sub(1);
                }
            }
            // A Failed path waits for its backoff interval; every other path
            // that reached its deadline is probed now, an unvalidated one only if the
            // validation credit pays for the probe (else it waits for credit, without a
            // deadline: see `deadline`).
            if p.state != PathState::Failed || !missed {
                if validated {
                    out.probe.insert(idx);
                    if heartbeat {
                        self.probe_credit = self
                            .probe_credit
                            .saturating_sub(self.cfg.data_per_idle_probe);
                    }
                } else if self.validation_credit >= PROBE_WIRE_LEN {
                    out.probe.insert(idx);
                    self.validation_credit = self.validation_credit.saturating_sub(PROBE_WIRE_LEN);
                }
            }
        }
        let changed = u64::try_from(out.changed.len()).unwrap_or(u64::MAX);
        self.state_changes = self.state_changes.wrapping_add(changed);
        out
    }

    /// Returns when the glue should call [`PathTable::on_tick`] next.
    ///
    /// The time may be at or before `now_ns`, meaning "now". `None` means the
    /// table is empty, or that its only paths are unvalidated ones waiting for validation
    /// credit to probe (see [`PathTable::earn_validation_credit`]).
    pub fn next_timer(&self, now_ns: u64) -> Option<u64> {
        self.next_timer_waiting(now_ns, false)
    }

    /// [`PathTable::next_timer`] with `data_waiting` as in
    /// [`PathTable::on_tick_waiting`]. Computes every path's deadline; see
    /// [`PathTable::poll_timer_waiting`] for the same time from the deadlines kept.
    pub fn next_timer_waiting(&self, now_ns: u64, data_waiting: bool) -> Option<u64> {
        let busy = self.busy();
        earliest(
            self.iter()
                .map(|(_, p)| self.deadline(p, busy, data_waiting)),
            now_ns,
        )
    }

    /// The same as [`PathTable::next_timer_waiting`], from the deadlines kept in the slots.
    ///
    /// The glue asks after every batch of packets and every send, while a packet changes
    /// one path or a few: a path's deadline is computed again only once the path changed
    /// ([`PathTable::get_mut`]), or what all deadlines share did ([`DeadlineKey`]) and the
    /// path's deadline reads it ([`PathTable::deadline_keyed`]; every path after a change
    /// of the configuration). With hundreds of paths, computing them all each time was most
    /// of what the connection did per packet. The probe credit, which is spent and earned
    /// several times per window, moves the heartbeat of every idle path at once; the table
    /// keeps for those paths when their interval starts, and the earliest of those, so that
    /// the credit moves none of what it keeps (`paid_heartbeats`).
    pub fn poll_timer_waiting(&mut self, now_ns: u64, data_waiting: bool) -> Option<u64> {
        let busy = self.poll_busy();
        self.refresh_deadlines(busy, data_waiting);
        let heartbeats = self.paid_heartbeats;
        let earliest_of = |t: &Self, heartbeat: bool| {
            t.slots
                .iter(t.end)
                .filter(|(i, _)| heartbeats.contains(*i) == heartbeat)
                .map(|(_, s)| s.deadline)
                .min()
                .unwrap_or(NEVER)
        };
        let other = match self.earliest_kept {
            Some(t) => t,
            None => {
                let t = earliest_of(self, false);
                self.earliest_kept = Some(t);
                t
            }
        };
        let from = match self.earliest_heartbeat_kept {
            Some(t) => t,
            None => {
                let t = earliest_of(self, true);
                self.earliest_heartbeat_kept = Some(t);
                t
            }
        };
        let heartbeat = if from == NEVER {
            NEVER
        } else {
            from.saturating_add(self.paid_heartbeat_interval())
        };
        let t = other.min(heartbeat);
        (t != NEVER).then(|| t.max(now_ns))
    }

    /// Whether the connection has bytes in flight on any path.
    fn busy(&self) -> bool {
        self.iter().any(|(_, p)| p.inflight > 0)
    }

    /// The same as [`PathTable::busy`], from the count of paths with bytes in flight: the
    /// glue asks after every batch.
    fn poll_busy(&self) -> bool {
        self.busy_paths > 0
    }

    /// What every path's deadline depends on now, beside the path and the configuration.
    fn deadline_key(&self, busy: bool, data_waiting: bool) -> DeadlineKey {
        DeadlineKey {
            busy,
            data_waiting,
            probe_paid: self.validation_credit >= PROBE_WIRE_LEN,
        }
    }

    /// Brings the deadlines kept in the slots up to date; returns what they were computed
    /// with.
    fn refresh_deadlines(&mut self, busy: bool, data_waiting: bool) -> DeadlineKey {
        let key = self.deadline_key(busy, data_waiting);
        match self.deadline_key {
            Some(k) if k == key => {}
            // Only the deadlines that read the key move with it.
            Some(_) => self.stale.add_all(&self.keyed),
            None => {
                self.earliest_kept = None;
                self.earliest_heartbeat_kept = None;
                for idx in 0..self.end {
                    self.stale.insert(idx);
                }
            }
        }
        self.deadline_key = Some(key);
        let stale = core::mem::replace(&mut self.stale, PathSet::EMPTY);
        for idx in stale.iter() {
            let Some((heartbeat, d, keyed)) = self.get(idx).map(|p| {
                let (heartbeat, d) = self.kept_deadline(p, busy, data_waiting);
                (heartbeat, d, Self::deadline_keyed(p))
            }) else {
                continue;
            };
            if keyed {
                self.keyed.insert(idx);
            } else {
                self.keyed.remove(idx);
            }
            let was_heartbeat = self.paid_heartbeats.contains(idx);
            if heartbeat {
                self.paid_heartbeats.insert(idx);
            } else {
                self.paid_heartbeats.remove(idx);
            }
            let Some(s) = self.slots.get_mut(idx) else {
                continue;
            };
            let old = core::mem::replace(&mut s.deadline, d);
            // The earliest of the set the value left moves later if it was that one; the
            // earliest of the set it joined moves earlier if it is before it.
            let (left, joined) = match (was_heartbeat, heartbeat) {
                (false, false) => (&mut self.earliest_kept, None),
                (true, true) => (&mut self.earliest_heartbeat_kept, None),
                (false, true) => (
                    &mut self.earliest_kept,
                    Some(&mut self.earliest_heartbeat_kept),
                ),
                (true, false) => (
                    &mut self.earliest_heartbeat_kept,
                    Some(&mut self.earliest_kept),
                ),
            };
            match joined {
                None => {
                    *left = match *left {
                        Some(t) if d < t => Some(d),
                        // The earliest moved later: another may now be, or the same.
                        Some(t) if old == t && d != t => None,
                        e => e,
                    };
                }
                Some(joined) => {
                    if *left == Some(old) {
                        *left = None;
                    }
                    if let Some(t) = *joined {
                        *joined = Some(t.min(d));
                    }
                }
            }
        }
        key
    }

    /// Returns when the next Active path whose window has room for `bytes` but whose pacing
    /// holds them back may send, if any does: the glue then wakes to send, for nothing
    /// else may happen meanwhile.
    pub fn next_departure(&self, now_ns: u64, bytes: u32) -> Option<u64> {
        self.iter()
            .filter(|(_, p)| {
                p.state == PathState::Active && p.has_room(bytes) && p.pace_ns > now_ns
            })
            .map(|(_, p)| p.pace_ns)
            .min()
    }

    /// Returns the expected delivery time of `bytes` more on a path, scaled by its weight.
    fn delivery_estimate(&self, p: &Path, bytes: u32) -> u64 {
        let (srtt, _) = p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns);
        let queued = p.inflight.saturating_add(u64::from(bytes));
        // The window drains once per RTT, so `queued` bytes take
        // queued / cwnd RTTs to get through.
        let drain = queued
            .saturating_mul(srtt)
            .checked_div(u64::from(p.cc.cwnd()))
            .unwrap_or(u64::MAX);
        let due = srtt.saturating_add(drain);
        if p.weight == WEIGHT_DEFAULT {
            // What the scaling below gives for the default weight, without its division:
            // the scan of every path for every packet makes this the common case's cost.
            return due.min(u64::MAX / u64::from(WEIGHT_DEFAULT));
        }
        due.saturating_mul(u64::from(WEIGHT_DEFAULT))
            .checked_div(u64::from(p.weight))
            .unwrap_or(u64::MAX)
    }

    /// Returns a lower bound of [`PathTable::delivery_estimate`] of a packet on `p`, without
    /// its divisions: with the default weight the estimate is at least the smoothed RTT, and
    /// at least twice it when the window has no `room` for the packet (what is queued then
    /// takes more than an RTT to drain); 0 with another weight.
    fn delivery_floor(&self, p: &Path, room: bool) -> u64 {
        if p.weight != WEIGHT_DEFAULT {
            return 0;
        }
        let (srtt, _) = p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns);
        if room {
            srtt
        } else {
            srtt.saturating_mul(2)
        }
    }

    /// Returns when the paths accepted by `faster`, whose windows are full, would deliver
    /// `backlog` more bytes behind what they have in flight: their lowest smoothed RTT plus
    /// the time their windows, together, take to drain it all. `None` if no path is accepted.
    fn drain_estimate(&self, backlog: u64, faster: impl Fn(PathIdx, &Path) -> bool) -> Option<u64> {
        self.drain_estimate_of(backlog, self.iter(), faster)
    }

    /// [`PathTable::drain_estimate`] of the paths of `paths` that `faster` accepts.
    fn drain_estimate_of<'a>(
        &'a self,
        backlog: u64,
        paths: impl Iterator<Item = (PathIdx, &'a Path)>,
        faster: impl Fn(PathIdx, &Path) -> bool,
    ) -> Option<u64> {
        let mut min_srtt: Option<u64> = None;
        let mut queued = backlog;
        // Sum of cwnd / srtt in bytes per nanosecond, in units of 2^-RATE_SHIFT.
        let mut rate = 0u64;
        for (i, p) in paths {
            if !faster(i, p) {
                continue;
            }
            let (srtt, _) = p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns);
            min_srtt = Some(min_srtt.map_or(srtt, |m| m.min(srtt)));
            queued = queued.saturating_add(p.inflight);
            let r = (u64::from(p.cc.cwnd()) << RATE_SHIFT)
                .checked_div(srtt)
                .unwrap_or(0);
            rate = rate.saturating_add(r);
        }
        let drain = queued
            .saturating_mul(1 << RATE_SHIFT)
            .checked_div(rate)
            .unwrap_or(u64::MAX);
        min_srtt.map(|m| m.saturating_add(drain))
    }

    /// Chooses the path for a new packet of `bytes`, or `None` if it must wait.
    ///
    /// The same as [`PathTable::pick_path_backlog`] with an unlimited backlog: every path
    /// with window room is worth using.
    pub fn pick_path(&self, now_ns: u64, bytes: u32) -> Option<PathIdx> {
        self.pick_path_backlog(now_ns, bytes, u64::MAX)
    }

    /// Chooses the path for a new packet of `bytes`, with `backlog` bytes (this packet
    /// included) ready to be sent now, or `None` if it must wait.
    ///
    /// Among Active non-backup paths whose window has room for the packet and whose pacing
    /// lets it leave now, the one with the earliest expected delivery wins (lowest index on
    /// a tie). If paths that would deliver it earlier are only waiting for window room or
    /// for their pacing, the packet waits for them
    /// unless they could not get the whole backlog through before the chosen path delivers
    /// it (earliest completion first): a path much slower than the others, such as one
    /// whose delay grew by hundreds of milliseconds, then carries nothing, since what it
    /// carried would hold up delivery of everything sent behind it; while the backlog is
    /// large, every path helps and shares follow the windows.
    ///
    /// Backup paths are used only when no non-backup path is Active; a non-backup path
    /// that is Active but whose window is full makes the packet wait instead of spilling
    /// onto a backup.
    pub fn pick_path_backlog(&self, now_ns: u64, bytes: u32, backlog: u64) -> Option<PathIdx> {
        self.pick_path_or_why(now_ns, bytes, backlog).ok()
    }

    /// [`PathTable::pick_path_backlog`], or why it found no path: what
    /// [`PathTable::held_back`] returns then, from the same pass over the paths. With
    /// hundreds of paths whose windows are full, a second pass to tell why cost as much as
    /// the choice.
    pub fn pick_path_or_why(
        &self,
        now_ns: u64,
        bytes: u32,
        backlog: u64,
    ) -> Result<PathIdx, HeldBack> {
        let eligible = self.data_paths();
        let mut tally = Tally::EMPTY;
        for (i, p) in self.iter().filter(|(_, p)| eligible(p)) {
            tally.count(self, i, p, now_ns, bytes);
        }
        self.choose(tally, backlog, self.iter(), eligible, now_ns, bytes)
    }

    /// Chooses, from what a first pass over the paths that may carry data found, the path
    /// for a packet of `bytes` with `backlog` bytes ready, or says why none may take it: the
    /// best path that may send, unless one of `waiting` (every path that may carry data but
    /// not send now, among others that `eligible` refuses) would get the backlog through
    /// sooner (the second pass, which the floor spares most packets).
    fn choose<'a>(
        &'a self,
        tally: Tally,
        backlog: u64,
        waiting: impl Iterator<Item = (PathIdx, &'a Path)>,
        eligible: impl Fn(&Path) -> bool,
        now_ns: u64,
        bytes: u32,
    ) -> Result<PathIdx, HeldBack> {
        let (due, cand) = tally.best.ok_or(tally.why)?;
        if tally.floor >= due {
            return Ok(cand);
        }
        let waiting = self.drain_estimate_of(backlog, waiting, |_, p| {
            if !eligible(p) || p.can_send(now_ns, bytes) {
                return false;
            }
            // The floor first: it needs no division, and rules out most paths.
            self.delivery_floor(p, p.has_room(bytes)) < due
                && self.delivery_estimate(p, bytes) < due
        });
        match waiting {
            Some(t) if t < due => Err(HeldBack::Waiting),
            _ => Ok(cand),
        }
    }

    /// The same as [`PathTable::pick_path_or_why`]; with more than [`PICK_SCAN_PATHS`]
    /// paths, from what the table keeps ([`PathTable::poll_pick_path_kept`]).
    pub fn poll_pick_path(
        &mut self,
        now_ns: u64,
        bytes: u32,
        backlog: u64,
    ) -> Result<PathIdx, HeldBack> {
        if self.end <= PICK_SCAN_PATHS {
            return self.pick_path_or_why(now_ns, bytes, backlog);
        }
        self.poll_pick_path_kept(now_ns, bytes, backlog)
    }

    /// The same as [`PathTable::pick_path_or_why`], looking in full only at the paths that
    /// changed since the last settling pass (see [`PickKept`]).
    ///
    /// With hundreds of paths, a pass over all of them for every packet was the largest part
    /// of what the connection did per packet, while a packet changes one path or a few, and
    /// most paths (those the scheduler leaves idle because they are slower) change only when
    /// probed. The settling pass runs again when the best settled path changed, when the
    /// paths that may carry data did, for a packet larger than those it sorted the paths
    /// for, or when a quarter of the paths changed; a smaller packet (the last of a message)
    /// is placed by a pass over every path. A second pass, over the paths that may not send,
    /// runs as before when one of them might deliver sooner.
    pub fn poll_pick_path_kept(
        &mut self,
        now_ns: u64,
        bytes: u32,
        backlog: u64,
    ) -> Result<PathIdx, HeldBack> {
        let primary = self.any_primary();
        let k = &self.pick;
        if k.valid && bytes < k.bytes {
            // A smaller packet, such as the last of a message: what is kept stays for the
            // largest, which most packets of a transfer are.
            return self.pick_path_or_why(now_ns, bytes, backlog);
        }
        // The best settled path that has not changed since; `None` if those kept all have.
        let settled_best = |k: &PickKept| {
            k.best
                .iter()
                .find(|(_, i)| !k.unsettled.contains(*i))
                .filter(|(_, i)| *i < MAX_PATHS)
                .copied()
        };
        // Only a full list can leave settled paths out: when every path on it changed, the
        // best of the others is not known.
        let best_changed = k.best.iter().all(|(_, i)| k.unsettled.contains(*i));
        if !k.valid
            || bytes != k.bytes
            || now_ns < k.at
            || k.primary != primary
            || best_changed
            || k.unsettled.len() > self.end / 4
        {
            self.settle_pick(now_ns, bytes, primary);
        }
        let k = self.pick;
        let eligible = move |p: &Path| p.may_carry_data(primary);
        let full = k.full.without(&k.unsettled);
        let mut tally = Tally {
            best: settled_best(&k),
            floor: k.floor,
            why: if full.is_empty() {
                HeldBack::NoPath
            } else {
                HeldBack::Window
            },
        };
        for i in k.unsettled.iter() {
            if let Some(p) = self.get(i).filter(|p| eligible(p)) {
                tally.count(self, i, p, now_ns, bytes);
            }
        }
        // Every path that may carry data and may not send is in `full` or unsettled.
        let waiting = full
            .iter()
            .chain(k.unsettled.iter())
            .filter_map(|i| self.get(i).map(|p| (i, p)));
        self.choose(tally, backlog, waiting, eligible, now_ns, bytes)
    }

    /// Sorts every path that may carry data, for packets of `bytes` at `now_ns` (see
    /// [`PickKept`]).
    fn settle_pick(&mut self, now_ns: u64, bytes: u32, primary: bool) {
        let mut k = PickKept {
            valid: true,
            bytes,
            at: now_ns,
            primary,
            ..PickKept::NONE
        };
        for (i, p) in self.iter() {
            if !p.may_carry_data(primary) {
                continue;
            }
            let room = p.has_room(bytes);
            if room && p.pace_ns <= now_ns {
                // As in `pick_path_or_why`: no estimate for a path that cannot win.
                let last = k.best.len() - 1;
                if k.best
                    .get(last)
                    .is_some_and(|(due, _)| self.delivery_floor(p, true) >= *due)
                {
                    continue;
                }
                let d = (self.delivery_estimate(p, bytes), i);
                // Into its place among the kept, the last of which goes.
                let at = k.best.partition_point(|b| *b < d);
                if let Some(tail) = k.best.get_mut(at..).filter(|t| !t.is_empty()) {
                    tail.rotate_right(1);
                    if let Some(first) = tail.first_mut() {
                        *first = d;
                    }
                }
            } else if room {
                // It may send later without changing.
                k.unsettled.insert(i);
            } else {
                k.full.insert(i);
                k.floor = k.floor.min(self.delivery_floor(p, false));
            }
        }
        self.pick = k;
    }

    /// Whether an Active non-backup path exists.
    fn any_primary(&self) -> bool {
        self.iter()
            .any(|(_, p)| p.state == PathState::Active && !p.backup)
    }

    /// Which paths new data may use: the Active non-backup ones, or while there are none the
    /// Active backup ones.
    fn data_paths(&self) -> impl Fn(&Path) -> bool {
        let any_primary = self.any_primary();
        move |p: &Path| p.may_carry_data(any_primary)
    }

    /// Why [`PathTable::pick_path_backlog`] found no path for a packet of `bytes` at
    /// `now_ns`.
    pub fn held_back(&self, now_ns: u64, bytes: u32) -> HeldBack {
        let eligible = self.data_paths();
        let mut why = HeldBack::NoPath;
        for (_, p) in self.iter().filter(|(_, p)| eligible(p)) {
            if p.can_send(now_ns, bytes) {
                return HeldBack::Waiting;
            }
            if p.has_room(bytes) {
                why = HeldBack::Pacing;
            } else if why == HeldBack::NoPath {
                why = HeldBack::Window;
            }
        }
        why
    }

    /// Chooses the path for retransmitting a packet of `bytes` lost on `exclude`.
    ///
    /// The same as [`PathTable::pick_retransmit_path_backlog`] with an unlimited backlog.
    pub fn pick_retransmit_path(
        &self,
        now_ns: u64,
        bytes: u32,
        exclude: Option<PathIdx>,
    ) -> Option<PathIdx> {
        self.pick_retransmit_path_backlog(now_ns, bytes, exclude, u64::MAX)
    }

    /// Chooses the path for retransmitting a packet of `bytes` lost on `exclude`, with
    /// `backlog` bytes of retransmissions (this one included) waiting.
    ///
    /// Prefers the Active non-backup path with the lowest smoothed RTT that may send (window
    /// room and pacing) other than `exclude`, then such a backup path. As for new data, the
    /// packet waits for paths that would deliver it earlier but may not send yet, unless they could
    /// not get the backlog through before the chosen path delivers it. `exclude` itself is
    /// used only when it is the sole Active path: while another Active path exists, waiting
    /// for its window beats resending on the path that just lost the packet. `None` means
    /// the retransmission must wait for window room or a path.
    pub fn pick_retransmit_path_backlog(
        &self,
        now_ns: u64,
        bytes: u32,
        exclude: Option<PathIdx>,
        backlog: u64,
    ) -> Option<PathIdx> {
        let usable = |i: PathIdx, p: &Path| p.state == PathState::Active && Some(i) != exclude;
        let fastest = |backup: bool| {
            let (cand, p) = self
                .iter()
                .filter(|(i, p)| usable(*i, p) && p.can_send(now_ns, bytes) && p.backup == backup)
                .min_by_key(|(i, p)| (p.rtt.srtt_rttvar(self.cfg.initial_rtt_ns).0, *i))?;
            let due = self.delivery_estimate(p, bytes);
            let waiting = self.drain_estimate(backlog, |i, q| {
                usable(i, q)
                    && q.backup == backup
                    && !q.can_send(now_ns, bytes)
                    && self.delivery_estimate(q, bytes) < due
            });
            match waiting {
                Some(t) if t < due => Some(None),
                _ => Some(Some(cand)),
            }
        };
        let pick = match fastest(false) {
            Some(choice) => choice,
            None => fastest(true).flatten(),
        };
        pick.or_else(|| {
            let i = exclude?;
            let p = self.get(i)?;
            let alone = self
                .iter()
                .all(|(j, q)| j == i || q.state != PathState::Active);
            (alone && p.state == PathState::Active && p.can_send(now_ns, bytes)).then_some(i)
        })
    }
}

/// The earliest of `deadlines` that is not [`NEVER`], at `now_ns` if it has passed.
fn earliest(deadlines: impl Iterator<Item = u64>, now_ns: u64) -> Option<u64> {
    deadlines
        .filter(|&t| t != NEVER)
        .map(|t| t.max(now_ns))
        .min()
}

fn clamp_lo_hi(v: u64, lo: u64, hi: u64) -> u64 {
    // Not `clamp`: that panics when a misconfiguration puts lo above hi.
    v.min(hi).max(lo)
}
