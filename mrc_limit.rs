// SPDX-License-Identifier: GPL-2.0
//! Limits on what a peer, or anyone who can send to the host, can make it spend.
//!
//! - An RST answering a packet for a session that does not exist costs the sender of that
//!   packet nothing and can be aimed at any address by forging the source. Like ICMP errors
//!   (`icmp_msgs_per_sec`, `icmp_msgs_burst`), such answers are bounded per namespace by a
//!   [`TokenBucket`]; what it refuses is counted, never queued.
//! - Received packets a socket holds are bounded by their real size, not their payload:
//!   [`admit_rx`].
//! - Things of which at most a given number may exist at once, whoever asks (connections of
//!   closed sockets still finishing, as `tcp_max_orphans`): [`Slots`].
//!
//! Sans-IO like the rest of the core: the caller passes the time and holds whatever lock
//! guards the bucket.

/// Nanoseconds per second.
const NS_PER_S: u64 = 1_000_000_000;

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: u32,
    burst: u32,
    tokens: u32,
    /// Time the tokens were last counted up to. Only the time that made whole tokens is
    /// consumed, so a slow, steady caller loses no fraction of a token.
    stamp_ns: u64,
}

impl TokenBucket {
    /// Answers to packets of unknown sessions per second in a namespace (as
    /// `icmp_msgs_per_sec`).
    pub const RST_RATE: u32 = 1000;

    /// Answers to packets of unknown sessions that may go out back to back (as
    /// `icmp_msgs_burst`).
    pub const RST_BURST: u32 = 50;

    /// Returns a full bucket of `burst` tokens that refills at `rate` tokens a second; a zero
    /// `burst` is taken as 1.
    pub const fn new(rate: u32, burst: u32) -> Self {
        let burst = if burst == 0 { 1 } else { burst };
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            stamp_ns: 0,
        }
    }

    /// Changes the rate and the burst (a zero `burst` is taken as 1); tokens saved beyond the
    /// new burst are dropped.
    pub fn configure(&mut self, rate: u32, burst: u32) {
        self.rate = rate;
        self.burst = burst.max(1);
        self.tokens = self.tokens.min(self.burst);
    }

    /// Takes a token if there is one at `now_ns`; returns whether the caller may send.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        self.refill(now_ns);
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }

    /// Tokens available at the last call.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    fn refill(&mut self, now_ns: u64) {
        if self.rate == 0 {
            return;
        }
        if self.tokens >= self.burst {
            // Full: time spent full earns nothing.
            self.stamp_ns = now_ns;
            return;
        }
        let elapsed = now_ns.saturating_sub(self.stamp_ns);
        let per_token = (NS_PER_S / u64::from(self.rate)).max(1);
        let earned = elapsed / per_token;
        if earned == 0 {
            return;
        }
        let room = u64::from(self.burst - self.tokens);
        if earned >= room {
            self.tokens = self.burst;
            self.stamp_ns = now_ns;
        } else {
            // `earned < room <= u32::MAX`, so it fits.
            self.tokens += earned as u32;
            self.stamp_ns = self.stamp_ns.saturating_add(earned * per_token);
        }
    }
}

/// Whether a socket that holds `held` bytes of received packets (their `truesize`) may take
/// one more DATA packet of `truesize` bytes, against its receive memory `limit`.
///
/// The advertised window bounds what an honest peer sends, in payload bytes; this bounds
/// what any peer can make the host hold, in real bytes, whatever it sends: a zero-length
/// message costs what its buffer costs. A packet over the limit is dropped before the
/// connection sees it, so it is not acknowledged and an honest peer sends it again later.
///
/// The packet a connection waits for next (`in_order`) may take up to twice the limit: the
/// packets held out of order behind a hole cannot be given back (they are acknowledged), so
/// refusing the one that fills the hole could stall the connection for good. A reader that
/// does not keep up stops even those, at twice the limit.
pub fn admit_rx(held: u32, truesize: u32, limit: u32, in_order: bool) -> bool {
    held.saturating_add(truesize) <= limit || (in_order && held <= limit.saturating_mul(2))
}

/// A count of things of which at most a given number may exist at once, taken and given back
/// from any context without a lock.
#[derive(Debug, Default)]
pub struct Slots(core::sync::atomic::AtomicU32);

impl Slots {
    /// No slot taken.
    pub const fn new() -> Self {
        Slots(core::sync::atomic::AtomicU32::new(0))
    }

    /// Takes a slot if fewer than `max` are taken; returns whether it did.
    pub fn take(&self, max: u32) -> bool {
        use core::sync::atomic::Ordering::Relaxed;
        self.0
            .fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1))
            .is_ok()
    }

    /// Gives back a slot [`Slots::take`] took.
    pub fn give(&self) {
        use core::sync::atomic::Ordering::Relaxed;
        // Never below zero, whatever the caller does.
        let _ = self
            .0
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// The slots taken.
    pub fn count(&self) -> u32 {
        self.0.load(core::sync::atomic::Ordering::Relaxed)
    }
}
