// SPDX-License-Identifier: GPL-2.0
//! Per-path congestion control.
//!
//! Every path of a connection owns one controller. It sees only that path's
//! sends, acknowledgements and losses and answers with a congestion window in
//! bytes; the scheduler in `mrc_path` keeps each path's bytes in flight below
//! that window. Controllers are plain state machines: time comes in as a
//! nanosecond argument, nothing here reads a clock, allocates, locks or uses
//! floating point, and every computation saturates instead of overflowing so
//! that no input can panic the kernel.
//!
//! Two algorithms implement [`CongestionControl`]:
//! - [`Delay`], the default: fast start, additive increase, multiplicative
//!   decrease when the queueing delay over the path's base RTT exceeds a target
//!   or when the receiver echoes ECN marks (scaled DCTCP-style by the fraction
//!   of marked bytes);
//! - [`Reno`], a NewReno-style reference: slow start, AIMD, halving on loss.
//!
//! Both decrease at most once per smoothed RTT, because the acknowledgements
//! and losses reported during the RTT after a decrease describe packets sent
//! with the old, larger window. [`Cc`] dispatches between them without
//! allocation so that a path table can hold either by value, and [`CcKind`]
//! names them for socket options and module parameters.

/// Smallest segment size accepted, so a window is never zero or tiny.
pub const MIN_MSS: u32 = 64;

/// Largest congestion window in bytes; keeps window arithmetic far from `u32::MAX`.
pub const MAX_CWND: u32 = 1 << 30;

/// Initial window in segments (as IW10 in RFC 6928).
pub const INITIAL_CWND_SEGMENTS: u32 = 10;

/// Smallest window in segments.
///
/// Two segments keep acknowledgements flowing on a congested path so that it
/// still produces RTT samples and liveness evidence.
pub const MIN_CWND_SEGMENTS: u32 = 2;

/// Default queueing-delay target of [`Delay`] above the path's base RTT.
///
/// The effective target is the larger of this and half the base RTT, so long
/// paths, whose RTT jitters more in absolute terms, are not starved.
pub const DEFAULT_DELAY_TARGET_NS: u32 = 100_000;

/// RTT assumed for the decrease hold-off before the first sample arrives.
const INITIAL_RTT_NS: u32 = 1_000_000;

/// Largest RTT sample taken into account; larger samples are clamped.
///
/// Keeping RTTs in `u32` nanoseconds (about 4.3 s) keeps the per-path state
/// small, and a path with a multi-second RTT is dead for this transport anyway.
const MAX_RTT_NS: u64 = u32::MAX as u64;

/// How long the minimum RTT is trusted before a fresh sample may replace it.
///
/// A route change can make the base RTT longer; without expiry the delay
/// controller would then see permanent queueing and shrink the window to the
/// minimum.
const MIN_RTT_WINDOW_NS: u64 = 10_000_000_000;

/// Largest delay [`Delay`] tolerates above its target for not responding to the window, in
/// base RTTs.
const MAX_SLACK_BASE_MULT: u64 = 8;

/// Fixed-point unit of fractions (Q10: 1024 means 1.0).
const Q10: u64 = 1024;

/// Gain of the ECN-fraction moving average (DCTCP's g = 1/16), as a shift.
const ECN_GAIN_SHIFT: u32 = 4;

/// Delay decrease factor (Swift's beta = 0.8) in Q10.
const DELAY_BETA_Q10: u64 = 819;

/// Largest single multiplicative decrease in Q10 (one half).
const MAX_DECREASE_Q10: u64 = 512;

/// A pluggable per-path congestion controller.
///
/// The path layer calls the `on_*` methods as events happen on the path and
/// reads [`cwnd`](CongestionControl::cwnd) before sending. Implementations
/// must tolerate any sequence of calls (bytes acked that were never sent,
/// time going backwards, zero RTT samples) without panicking.
pub trait CongestionControl {
    /// Notes that `bytes` were put on the wire on this path.
    fn on_packet_sent(&mut self, now_ns: u64, bytes: u32);

    /// Notes that `bytes_acked` were acknowledged.
    ///
    /// `rtt_sample_ns` is the RTT measured by this acknowledgement, if any;
    /// `ece` is set when the receiver echoed a congestion-experienced mark.
    fn on_ack(&mut self, now_ns: u64, bytes_acked: u32, rtt_sample_ns: Option<u64>, ece: bool);

    /// Notes that `bytes_lost` were declared lost.
    fn on_loss(&mut self, now_ns: u64, bytes_lost: u32);

    /// Notes that one loss reported by [`on_loss`](CongestionControl::on_loss) was needless:
    /// the packet arrived after all. Once every loss since the latest loss-driven decrease has
    /// proven needless, the decrease is undone, as TCP undoes one on D-SACK.
    fn on_needless_loss(&mut self) {}

    /// Notes a retransmission timeout: everything outstanding is presumed lost.
    fn on_rto(&mut self, now_ns: u64);

    /// Returns the congestion window in bytes.
    fn cwnd(&self) -> u32;

    /// Returns whether the controller is still in slow start (fast start).
    fn in_slow_start(&self) -> bool;

    /// Returns a pacing rate hint in bytes per second, if the controller has one.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
}

/// Names of the available congestion control algorithms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CcKind {
    /// NewReno-style reference algorithm.
    Reno,
    /// Delay- and ECN-driven default algorithm.
    #[default]
    Delay,
}

impl CcKind {
    /// Parses an algorithm name as given to a socket option or module parameter.
    ///
    /// Surrounding ASCII whitespace is ignored because sysfs writes of module
    /// parameters usually end in a newline; the match is case-insensitive.
    pub fn from_name(name: &str) -> Option<CcKind> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("reno") {
            Some(CcKind::Reno)
        } else if name.eq_ignore_ascii_case("delay") {
            Some(CcKind::Delay)
        } else {
            None
        }
    }

    /// Returns the canonical name, the inverse of [`CcKind::from_name`].
    pub fn name(self) -> &'static str {
        match self {
            CcKind::Reno => "reno",
            CcKind::Delay => "delay",
        }
    }
}

/// Window bookkeeping shared by both algorithms.
#[derive(Clone, Copy, Debug)]
struct Window {
    mss: u32,
    /// Largest packet sent, which can exceed `mss` by the headers the sender counts.
    max_pkt: u16,
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged in congestion avoidance since the last +1 MSS step.
    ca_acc: u32,
    /// Bytes in flight as seen by this controller; used only to tell whether
    /// the window is actually being used before growing it.
    in_flight: u32,
    /// Largest `in_flight` of the current RTT: acknowledgements drain
    /// `in_flight` within a round, so the peak is what shows window use.
    peak_in_flight: u32,
    peak_window_end_ns: u64,
    /// Smoothed RTT (EWMA 1/8), zero before the first sample.
    srtt_ns: u32,
    /// Minimum RTT seen within `MIN_RTT_WINDOW_NS`, zero before the first sample.
    min_rtt_ns: u32,
    min_rtt_stamp_ns: u64,
    /// No decrease and no growth before this time: see the module doc.
    hold_until_ns: u64,
    /// Window before the latest decrease for loss, while it may be undone; 0 if none.
    undo_cwnd: u32,
    /// Losses since that decrease not yet proven needless.
    undo_losses: u16,
}

fn clamp_rtt(rtt_ns: u64) -> u32 {
    // A zero sample would read as "no sample" and is below any real RTT.
    u32::try_from(rtt_ns.clamp(1, MAX_RTT_NS)).unwrap_or(u32::MAX)
}

fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Window {
    fn new(mss: u32) -> Self {
        let mss = mss.clamp(MIN_MSS, MAX_CWND / INITIAL_CWND_SEGMENTS);
        Window {
            mss,
            max_pkt: 0,
            cwnd: mss.saturating_mul(INITIAL_CWND_SEGMENTS),
            ssthresh: MAX_CWND,
            ca_acc: 0,
            in_flight: 0,
            peak_in_flight: 0,
            peak_window_end_ns: 0,
            srtt_ns: 0,
            min_rtt_ns: 0,
            min_rtt_stamp_ns: 0,
            hold_until_ns: 0,
            undo_cwnd: 0,
            undo_losses: 0,
        }
    }

    /// Two of the largest packets sent: the path layer counts whole datagrams in flight
    /// against the window, so a floor of two payloads would hold only one of them.
    fn min_cwnd(&self) -> u32 {
        self.mss
            .max(u32::from(self.max_pkt))
            .saturating_mul(MIN_CWND_SEGMENTS)
    }

    fn srtt_or_initial(&self) -> u32 {
        if self.srtt_ns == 0 {
            INITIAL_RTT_NS
        } else {
            self.srtt_ns
        }
    }

    fn sample_rtt(&mut self, now_ns: u64, rtt_ns: u64) {
        let r = clamp_rtt(rtt_ns);
        if self.srtt_ns == 0 {
            self.srtt_ns = r;
        } else {
            let s = u64::from(self.srtt_ns);
            self.srtt_ns = to_u32(s.saturating_mul(7).saturating_add(u64::from(r)) / 8);
        }
        if self.min_rtt_ns == 0
            || r <= self.min_rtt_ns
            || now_ns.saturating_sub(self.min_rtt_stamp_ns) > MIN_RTT_WINDOW_NS
        {
            self.min_rtt_ns = r;
            self.min_rtt_stamp_ns = now_ns;
        }
    }

    fn on_sent(&mut self, bytes: u32) {
        self.max_pkt = self.max_pkt.max(u16::try_from(bytes).unwrap_or(u16::MAX));
        self.in_flight = self.in_flight.saturating_add(bytes);
        self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
    }

    /// Removes acknowledged or lost bytes.
    fn on_gone(&mut self, bytes: u32) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
    }

    /// Starts a new peak measurement once per RTT, before `bytes_acked` are removed;
    /// returns whether it did, which starts the per-RTT windows of [`Delay`] too.
    ///
    /// A clock that jumps backwards by more than any RTT restarts the
    /// measurement too, so that the peak cannot freeze for the jump's length.
    fn roll_peak(&mut self, now_ns: u64) -> bool {
        if now_ns >= self.peak_window_end_ns
            || now_ns < self.peak_window_end_ns.saturating_sub(MAX_RTT_NS)
        {
            self.peak_in_flight = self.in_flight;
            self.peak_window_end_ns = now_ns.saturating_add(u64::from(self.srtt_or_initial()));
            return true;
        }
        false
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Tells whether the sender was limited by the window rather than by the
    /// application; growing an unused window would make it meaningless.
    fn cwnd_limited(&self) -> bool {
        let peak = self.peak_in_flight;
        if self.in_slow_start() {
            peak.saturating_mul(2) >= self.cwnd
        } else {
            peak.saturating_add(self.mss.saturating_mul(2)) >= self.cwnd
        }
    }

    fn grow(&mut self, now_ns: u64, bytes_acked: u32) {
        if now_ns < self.hold_until_ns || !self.cwnd_limited() {
            return;
        }
        if self.in_slow_start() {
            self.cwnd = self
                .cwnd
                .saturating_add(bytes_acked)
                .min(self.ssthresh)
                .min(MAX_CWND);
        } else {
            // One MSS per window of acknowledged bytes: +1 MSS per RTT.
            self.ca_acc = self.ca_acc.saturating_add(bytes_acked);
            if self.ca_acc >= self.cwnd {
                self.ca_acc = self.ca_acc.saturating_sub(self.cwnd);
                self.cwnd = self.cwnd.saturating_add(self.mss).min(MAX_CWND);
            }
        }
    }

    fn may_decrease(&self, now_ns: u64) -> bool {
        now_ns >= self.hold_until_ns
    }

    /// Cuts the window by `fraction_q10`/1024 and leaves slow start.
    fn decrease(&mut self, now_ns: u64, fraction_q10: u64) {
        let frac = fraction_q10.min(Q10);
        let cut = u64::from(self.cwnd).saturating_mul(frac) / Q10;
        let new = to_u32(u64::from(self.cwnd).saturating_sub(cut)).max(self.min_cwnd());
        self.cwnd = new;
        self.ssthresh = new;
        self.ca_acc = 0;
        self.hold_until_ns = now_ns.saturating_add(u64::from(self.srtt_or_initial()));
        self.undo_cwnd = 0;
    }

    /// A loss: halves the window at most once per RTT, remembering the window before the cut
    /// for [`Window::on_needless_loss`].
    fn on_loss(&mut self, now_ns: u64) {
        if self.may_decrease(now_ns) {
            let before = self.cwnd;
            self.decrease(now_ns, Q10 / 2);
            self.undo_cwnd = before;
            self.undo_losses = 1;
        } else if self.undo_cwnd != 0 {
            self.undo_losses = self.undo_losses.saturating_add(1);
        }
    }

    /// One loss proved needless: the cut is undone once all of its losses have. The window
    /// comes back, and congestion avoidance goes on from it.
    fn on_needless_loss(&mut self) {
        if self.undo_cwnd == 0 {
            return;
        }
        self.undo_losses = self.undo_losses.saturating_sub(1);
        if self.undo_losses == 0 {
            self.cwnd = self.cwnd.max(self.undo_cwnd);
            self.ssthresh = self.ssthresh.max(self.undo_cwnd);
            self.undo_cwnd = 0;
        }
    }

    fn on_rto(&mut self, now_ns: u64) {
        self.undo_cwnd = 0;
        self.ssthresh = (self.cwnd / 2).max(self.min_cwnd());
        self.cwnd = self.min_cwnd();
        self.ca_acc = 0;
        self.in_flight = 0;
        self.peak_in_flight = 0;
        // Slow start restarts at once: the timeout already waited long enough.
        self.hold_until_ns = now_ns;
    }

    fn pacing_rate(&self) -> Option<u64> {
        if self.srtt_ns == 0 {
            return None;
        }
        // Twice cwnd per srtt, as Linux's tcp_pacing_ss_ratio: a window leaves
        // over half a round rather than at once, yet pacing is seldom the limit,
        // in slow start, where the window doubles within the round, or on a host
        // whose stalls bunch acknowledgements up (a quarter more, as TCP paces
        // after slow start, lost a third of cpu_sim's goodput).
        let per_sec = u64::from(self.cwnd).saturating_mul(2_000_000_000);
        per_sec.checked_div(u64::from(self.srtt_ns))
    }
}

/// NewReno-style reference controller.
///
/// Slow start doubles the window per RTT up to `ssthresh`, congestion
/// avoidance adds one MSS per RTT, a loss or an ECN echo halves the window at
/// most once per RTT, and a retransmission timeout restarts slow start from the
/// minimum window.
#[derive(Clone, Copy, Debug)]
pub struct Reno {
    w: Window,
}

impl Reno {
    /// Creates a controller for segments of `mss` bytes (clamped to at least [`MIN_MSS`]).
    pub fn new(mss: u32) -> Self {
        Reno {
            w: Window::new(mss),
        }
    }

    /// Returns the slow-start threshold in bytes.
    pub fn ssthresh(&self) -> u32 {
        self.w.ssthresh
    }

    /// Returns the segment size the controller counts in.
    pub fn mss(&self) -> u32 {
        self.w.mss
    }

    fn congestion(&mut self, now_ns: u64) {
        if self.w.may_decrease(now_ns) {
            self.w.decrease(now_ns, Q10 / 2);
        }
    }
}

impl CongestionControl for Reno {
    fn on_packet_sent(&mut self, _now_ns: u64, bytes: u32) {
        self.w.on_sent(bytes);
    }

    fn on_ack(&mut self, now_ns: u64, bytes_acked: u32, rtt_sample_ns: Option<u64>, ece: bool) {
        let _ = self.w.roll_peak(now_ns);
        self.w.on_gone(bytes_acked);
        if let Some(rtt) = rtt_sample_ns {
            self.w.sample_rtt(now_ns, rtt);
        }
        if ece {
            self.congestion(now_ns);
        } else {
            self.w.grow(now_ns, bytes_acked);
        }
    }

    fn on_loss(&mut self, now_ns: u64, bytes_lost: u32) {
        self.w.on_gone(bytes_lost);
        self.w.on_loss(now_ns);
    }

    fn on_needless_loss(&mut self) {
        self.w.on_needless_loss();
    }

    fn on_rto(&mut self, now_ns: u64) {
        self.w.on_rto(now_ns);
    }

    fn cwnd(&self) -> u32 {
        self.w.cwnd
    }

    fn in_slow_start(&self) -> bool {
        self.w.in_slow_start()
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.w.pacing_rate()
    }
}

/// Delay- and ECN-driven controller, the default.
///
/// The window grows (fast start, then one MSS per RTT) while the queueing
/// delay, the standing RTT (the smallest sample of the last one or two RTTs)
/// minus the path's base RTT, stays below the target.
/// Above the target it shrinks in proportion to the excess, as Swift does;
/// on ECN echoes it shrinks by half the smoothed fraction of marked bytes, as
/// DCTCP does; on loss it halves. Decreases happen at most once per RTT and
/// never below two segments.
#[derive(Clone, Copy, Debug)]
pub struct Delay {
    w: Window,
    target_ns: u32,
    /// Smoothed fraction of ECN-marked bytes in Q10; starts at 1.0 so that
    /// the first mark halves the window like a loss would.
    alpha_q10: u32,
    ecn_acked: u32,
    ecn_marked: u32,
    /// Smallest RTT sample of the current round (see [`Window::roll_peak`]), zero if none.
    win_min_rtt_ns: u32,
    /// Smallest RTT sample of the round before, zero if none.
    prev_min_rtt_ns: u32,
    /// Standing RTT at the last decrease for delay, zero if none is pending evaluation.
    cut_rtt_ns: u32,
    /// Delay above the target that did not respond to decreases (see [`Delay::slack_ns`]).
    slack_ns: u32,
}

impl Delay {
    /// Creates a controller with the default queueing-delay target.
    pub fn new(mss: u32) -> Self {
        Self::with_target(mss, DEFAULT_DELAY_TARGET_NS)
    }

    /// Creates a controller whose queueing-delay target is at least `target_ns`.
    pub fn with_target(mss: u32, target_ns: u32) -> Self {
        Delay {
            w: Window::new(mss),
            target_ns,
            alpha_q10: Q10 as u32,
            ecn_acked: 0,
            ecn_marked: 0,
            win_min_rtt_ns: 0,
            prev_min_rtt_ns: 0,
            cut_rtt_ns: 0,
            slack_ns: 0,
        }
    }

    /// Returns the delay above the target that the controller currently tolerates because
    /// it did not respond to the window.
    ///
    /// A network queue drains when the windows that fill it shrink. Delay added by the hosts
    /// (a CPU that processes packets in turn, softirq work held up on a loaded or emulated
    /// machine) does not: it stays when the window has already been cut to its floor, where
    /// the path can do no more and the delay keeps it there. So when the standing RTT a round
    /// after a decrease for delay that reached the floor is no lower than it was at the
    /// decrease, the excess that stayed is taken for such delay
    /// and tolerated on top of the target; it decays by an eighth per round, so a queue that
    /// builds later is answered again, and it is at most [`MAX_SLACK_BASE_MULT`] base RTTs.
    pub fn slack_ns(&self) -> u32 {
        self.slack_ns
    }

    /// Returns the queueing delay currently tolerated above the base RTT.
    pub fn target_ns(&self) -> u32 {
        self.target_ns.max(self.w.min_rtt_ns / 2)
    }

    /// Returns the base (minimum) RTT, if a sample has been seen.
    pub fn min_rtt_ns(&self) -> Option<u32> {
        (self.w.min_rtt_ns != 0).then_some(self.w.min_rtt_ns)
    }

    /// Returns the smoothed fraction of ECN-marked bytes in 1/1024 units.
    pub fn ecn_alpha_q10(&self) -> u32 {
        self.alpha_q10
    }

    /// Returns the segment size the controller counts in.
    pub fn mss(&self) -> u32 {
        self.w.mss
    }

    /// Counts acknowledged and marked bytes; at the start of a round (`rolled`) folds the
    /// round that ended into the smoothed marked fraction.
    fn update_ecn(&mut self, rolled: bool, bytes: u32, ece: bool) {
        self.ecn_acked = self.ecn_acked.saturating_add(bytes);
        if ece {
            self.ecn_marked = self.ecn_marked.saturating_add(bytes);
        }
        if !rolled {
            return;
        }
        if self.ecn_acked > 0 {
            let frac = u64::from(self.ecn_marked)
                .saturating_mul(Q10)
                .checked_div(u64::from(self.ecn_acked))
                .unwrap_or(0)
                .min(Q10);
            let a = u64::from(self.alpha_q10);
            let a = a
                .saturating_sub(a >> ECN_GAIN_SHIFT)
                .saturating_add(frac >> ECN_GAIN_SHIFT);
            self.alpha_q10 = to_u32(a.min(Q10));
        }
        self.ecn_acked = 0;
        self.ecn_marked = 0;
    }

    /// Takes an RTT sample, if any, into the standing RTT and returns it: the smallest
    /// sample of the current and the previous round (one smoothed RTT each).
    ///
    /// As in Copa, the smallest recent sample rather than each one measures the queue: a
    /// standing queue raises every sample, while a host that stalls (softirq or timer work
    /// delayed on a loaded or emulated machine) or acknowledgements that bunch up raise
    /// only some of them. Reading those as queueing would keep the windows near their floor
    /// and leave fast paths idle.
    ///
    /// An acknowledgement without a sample (one that came back by another plane) leaves the
    /// standing RTT as the samples before it made it: the window then grows only while that
    /// is on target, as it would have with a sample of its own.
    fn standing_rtt(&mut self, rolled: bool, rtt_ns: Option<u64>) -> Option<u64> {
        if rolled {
            self.prev_min_rtt_ns = self.win_min_rtt_ns;
            self.win_min_rtt_ns = 0;
        }
        if let Some(rtt) = rtt_ns {
            let r = clamp_rtt(rtt);
            self.win_min_rtt_ns = match self.win_min_rtt_ns {
                0 => r,
                m => m.min(r),
            };
        }
        let m = match (self.prev_min_rtt_ns, self.win_min_rtt_ns) {
            (0, 0) => return None,
            (0, w) => w,
            (p, 0) => p,
            (p, w) => p.min(w),
        };
        Some(u64::from(m))
    }

    /// Learns, from the standing RTT after a decrease for delay, how much delay does not
    /// respond to the window; see [`Delay::slack_ns`].
    fn learn_slack(&mut self, now_ns: u64, rolled: bool, standing: Option<u64>) {
        if rolled {
            self.slack_ns = self.slack_ns.saturating_sub(self.slack_ns / 8);
        }
        let Some(standing) = standing else {
            return;
        };
        if self.cut_rtt_ns == 0 || !self.w.may_decrease(now_ns) {
            return;
        }
        let standing = u64::from(clamp_rtt(standing));
        // The round after the decrease is over: did the delay fall?
        if standing >= u64::from(self.cut_rtt_ns) {
            let base = u64::from(self.w.min_rtt_ns);
            let excess = standing
                .saturating_sub(base)
                .saturating_sub(u64::from(self.target_ns()));
            let cap = base.saturating_mul(MAX_SLACK_BASE_MULT);
            self.slack_ns = to_u32(excess.min(cap)).max(self.slack_ns);
        }
        self.cut_rtt_ns = 0;
    }

    /// Returns the decrease (Q10) the RTT sample asks for, zero if on target.
    fn delay_decrease(&self, rtt_ns: u64) -> u64 {
        let rtt = u64::from(clamp_rtt(rtt_ns));
        let allowed = u64::from(self.w.min_rtt_ns)
            .saturating_add(u64::from(self.target_ns()))
            .saturating_add(u64::from(self.slack_ns));
        let excess = rtt.saturating_sub(allowed);
        if excess == 0 {
            return 0;
        }
        excess
            .saturating_mul(DELAY_BETA_Q10)
            .checked_div(rtt)
            .unwrap_or(MAX_DECREASE_Q10)
            .clamp(1, MAX_DECREASE_Q10)
    }
}

impl CongestionControl for Delay {
    fn on_packet_sent(&mut self, _now_ns: u64, bytes: u32) {
        self.w.on_sent(bytes);
    }

    fn on_ack(&mut self, now_ns: u64, bytes_acked: u32, rtt_sample_ns: Option<u64>, ece: bool) {
        // The sample first, so that the first round lasts the first RTT measured.
        if let Some(rtt) = rtt_sample_ns {
            self.w.sample_rtt(now_ns, rtt);
        }
        let rolled = self.w.roll_peak(now_ns);
        self.w.on_gone(bytes_acked);
        let mut cut = 0;
        let standing = self.standing_rtt(rolled, rtt_sample_ns);
        self.learn_slack(now_ns, rolled, standing);
        let mut delay_cut = false;
        if let Some(standing) = standing {
            cut = self.delay_decrease(standing);
            delay_cut = cut > 0;
        }
        if ece {
            // The fraction as of the previous observation window, as in DCTCP.
            cut = cut.max(u64::from(self.alpha_q10) / 2).max(1);
        }
        self.update_ecn(rolled, bytes_acked, ece);
        if cut > 0 {
            if self.w.may_decrease(now_ns) {
                self.w.decrease(now_ns, cut);
                // Only a window cut down to its floor tells: a larger one can still shrink.
                if delay_cut && self.w.cwnd <= self.w.min_cwnd().saturating_mul(2) {
                    self.cut_rtt_ns = standing.map_or(0, clamp_rtt);
                }
            }
        } else {
            self.w.grow(now_ns, bytes_acked);
        }
    }

    fn on_loss(&mut self, now_ns: u64, bytes_lost: u32) {
        self.w.on_gone(bytes_lost);
        self.w.on_loss(now_ns);
    }

    fn on_needless_loss(&mut self) {
        self.w.on_needless_loss();
    }

    fn on_rto(&mut self, now_ns: u64) {
        self.w.on_rto(now_ns);
    }

    fn cwnd(&self) -> u32 {
        self.w.cwnd
    }

    fn in_slow_start(&self) -> bool {
        self.w.in_slow_start()
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.w.pacing_rate()
    }
}

/// A congestion controller of any kind, held by value.
///
/// The kernel side has no `Box<dyn CongestionControl>`, so the path table
/// stores this enum and the trait is implemented by dispatch.
#[derive(Clone, Copy, Debug)]
pub enum Cc {
    /// The NewReno-style reference.
    Reno(Reno),
    /// The delay- and ECN-driven default.
    Delay(Delay),
}

impl Cc {
    /// Creates a fresh controller of the given kind.
    pub fn new(kind: CcKind, mss: u32) -> Self {
        match kind {
            CcKind::Reno => Cc::Reno(Reno::new(mss)),
            CcKind::Delay => Cc::Delay(Delay::new(mss)),
        }
    }

    /// Returns which algorithm this is.
    pub fn kind(&self) -> CcKind {
        match self {
            Cc::Reno(_) => CcKind::Reno,
            Cc::Delay(_) => CcKind::Delay,
        }
    }

    /// Returns the segment size the controller counts in.
    pub fn mss(&self) -> u32 {
        match self {
            Cc::Reno(c) => c.mss(),
            Cc::Delay(c) => c.mss(),
        }
    }

    /// Forgets all history, as for a path that comes back after failing.
    ///
    /// The route behind a recovered path may differ from the one that failed,
    /// so its old window and base RTT are not trusted; a [`Delay`] keeps its
    /// configured target.
    pub fn reset(&mut self) {
        *self = match self {
            Cc::Reno(c) => Cc::Reno(Reno::new(c.mss())),
            Cc::Delay(c) => Cc::Delay(Delay::with_target(c.mss(), c.target_ns)),
        };
    }
}

impl CongestionControl for Cc {
    fn on_packet_sent(&mut self, now_ns: u64, bytes: u32) {
        match self {
            Cc::Reno(c) => c.on_packet_sent(now_ns, bytes),
            Cc::Delay(c) => c.on_packet_sent(now_ns, bytes),
        }
    }

    fn on_ack(&mut self, now_ns: u64, bytes_acked: u32, rtt_sample_ns: Option<u64>, ece: bool) {
        match self {
            Cc::Reno(c) => c.on_ack(now_ns, bytes_acked, rtt_sample_ns, ece),
            Cc::Delay(c) => c.on_ack(now_ns, bytes_acked, rtt_sample_ns, ece),
        }
    }

    fn on_loss(&mut self, now_ns: u64, bytes_lost: u32) {
        match self {
            Cc::Reno(c) => c.on_loss(now_ns, bytes_lost),
            Cc::Delay(c) => c.on_loss(now_ns, bytes_lost),
        }
    }

    fn on_needless_loss(&mut self) {
        match self {
            Cc::Reno(c) => c.on_needless_loss(),
            Cc::Delay(c) => c.on_needless_loss(),
        }
    }

    fn on_rto(&mut self, now_ns: u64) {
        match self {
            Cc::Reno(c) => c.on_rto(now_ns),
            Cc::Delay(c) => c.on_rto(now_ns),
        }
    }

    fn cwnd(&self) -> u32 {
        match self {
            Cc::Reno(c) => c.cwnd(),
            Cc::Delay(c) => c.cwnd(),
        }
    }

    fn in_slow_start(&self) -> bool {
        match self {
            Cc::Reno(c) => c.in_slow_start(),
            Cc::Delay(c) => c.in_slow_start(),
        }
    }

    fn pacing_rate(&self) -> Option<u64> {
        match self {
            Cc::Reno(c) => c.pacing_rate(),
            Cc::Delay(c) => c.pacing_rate(),
        }
    }
}
