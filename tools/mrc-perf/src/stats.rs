// SPDX-License-Identifier: GPL-2.0
//! Measurements of one connection and the reports printed at the end.

use crate::error::Error;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::Xxh3;

/// Gaps between consecutive messages at least this long are kept with their
/// place in the timeline.
pub const GAP_KEPT: Duration = Duration::from_millis(5);

/// At most this many such gaps are kept (the first ones).
const GAPS_MAX: usize = 1024;

/// Bytes per fixed interval, the longest gap between two consecutive
/// messages, and where the long gaps were.
#[derive(Debug, Clone)]
pub struct Timeline {
    start: Instant,
    interval_ns: u128,
    samples: Vec<u64>,
    last: Option<Instant>,
    max_gap: Duration,
    /// Gaps of at least [`GAP_KEPT`]: start (the earlier message) from
    /// `start`, and length, in microseconds.
    gaps: Vec<[u64; 2]>,
}

impl Timeline {
    pub fn new(start: Instant, interval: Duration) -> Self {
        Timeline {
            start,
            interval_ns: interval.as_nanos().max(1),
            samples: Vec::new(),
            last: None,
            max_gap: Duration::ZERO,
            gaps: Vec::new(),
        }
    }

    /// Restarts the timeline at `start`, dropping everything recorded.
    pub fn restart(&mut self, start: Instant) {
        *self = Timeline {
            start,
            interval_ns: self.interval_ns,
            samples: Vec::new(),
            last: None,
            max_gap: Duration::ZERO,
            gaps: Vec::new(),
        };
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// A message of `bytes` bytes at `now`.
    pub fn record(&mut self, now: Instant, bytes: usize) {
        let i = (now.saturating_duration_since(self.start).as_nanos() / self.interval_ns) as usize;
        if i >= self.samples.len() {
            self.samples.resize(i + 1, 0);
        }
        self.samples[i] += bytes as u64;
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last);
            self.max_gap = self.max_gap.max(gap);
            if gap >= GAP_KEPT && self.gaps.len() < GAPS_MAX {
                let at = last.saturating_duration_since(self.start).as_micros() as u64;
                self.gaps.push([at, gap.as_micros() as u64]);
            }
        }
        self.last = Some(now);
    }

    pub fn samples(&self) -> &[u64] {
        &self.samples
    }

    pub fn max_gap_us(&self) -> u64 {
        self.max_gap.as_micros() as u64
    }

    pub fn gaps_us(&self) -> &[[u64; 2]] {
        &self.gaps
    }
}

/// Round-trip percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rtt {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

/// Nearest-rank percentiles of round trips given in nanoseconds; sorts
/// `ns`. `None` when there are none.
pub fn percentiles(ns: &mut [u64]) -> Option<Rtt> {
    if ns.is_empty() {
        return None;
    }
    ns.sort_unstable();
    let at = |p: f64| {
        let rank = (p * ns.len() as f64).ceil() as usize;
        ns[rank.clamp(1, ns.len()) - 1] as f64 / 1000.0
    };
    Some(Rtt {
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
    })
}

/// Megabits (10^6 bits) per second.
pub fn goodput_mbps(bytes: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        bytes as f64 * 8.0 / elapsed_s / 1e6
    } else {
        0.0
    }
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Element-wise sum of sample arrays of different lengths.
pub fn sum_samples<'a>(all: impl IntoIterator<Item = &'a [u64]>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for s in all {
        if s.len() > out.len() {
            out.resize(s.len(), 0);
        }
        for (o, v) in out.iter_mut().zip(s) {
            *o += v;
        }
    }
    out
}

/// Running state of one connection.
pub struct Progress {
    pub msgs: u64,
    pub bytes: u64,
    /// XXH3-128 of the message bytes so far.
    pub digest: Xxh3,
    pub timeline: Timeline,
    /// Round trips in nanoseconds (latency mode, client).
    pub rtts: Vec<u64>,
    /// Messages that failed verification, and the first failure.
    pub bad_msgs: u64,
    pub first_bad: Option<String>,
    /// When the client's hello went out.
    pub hello_at: Option<Instant>,
}

impl Progress {
    pub fn new(start: Instant, interval: Duration) -> Self {
        Progress {
            msgs: 0,
            bytes: 0,
            digest: Xxh3::new(),
            timeline: Timeline::new(start, interval),
            rtts: Vec::new(),
            bad_msgs: 0,
            first_bad: None,
            hello_at: None,
        }
    }

    /// The digest of the message bytes so far, as hex.
    pub fn digest_hex(&self) -> String {
        hex(&self.digest.digest128().to_be_bytes())
    }

    /// One message of `data` sent or received at `now`.
    pub fn record(&mut self, now: Instant, data: &[u8]) {
        self.digest.update(data);
        self.msgs += 1;
        self.bytes += data.len() as u64;
        self.timeline.record(now, data.len());
    }

    pub fn bad(&mut self, why: String) {
        self.bad_msgs += 1;
        if self.first_bad.is_none() {
            self.first_bad = Some(why);
        }
    }
}

/// Fields present in latency mode only.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyFields {
    /// Round-trip percentiles (client; null on the server and when no round
    /// trip completed).
    pub rtt_us: Option<Rtt>,
    /// Completed round trips (client) or echoed messages (server).
    pub count: u64,
}

/// Result of one connection: one JSON line (server) or one element of the
/// client's `conns` array.
#[derive(Debug, Clone, Serialize)]
pub struct ConnReport {
    pub role: &'static str,
    pub proto: &'static str,
    pub mode: &'static str,
    /// Connection index (from the client's hello on the server); null if the
    /// server failed before learning it.
    pub conn: Option<u32>,
    pub msgs: u64,
    pub bytes: u64,
    /// XXH3-128 (hex) of all message bytes sent (client) or received
    /// (server), in order.
    pub digest: String,
    pub ok: bool,
    pub error: Option<String>,
    pub errno: Option<i32>,
    pub elapsed_s: f64,
    pub goodput_mbps: f64,
    pub max_gap_us: u64,
    /// Gaps between consecutive messages of at least 5 ms (the first 1024):
    /// [start, length] in microseconds, the start from the first sample's.
    pub gaps_us: Vec<[u64; 2]>,
    pub interval_ms: u64,
    /// Bytes per interval: received (server) or handed to send() (client).
    pub samples: Vec<u64>,
    /// Seed of this connection (base seed + conn).
    pub seed: u64,
    pub msg_size: String,
    /// Messages with a wrong length or content (server).
    pub bad_msgs: u64,
    /// Microseconds from the start until the hello was sent (client; null
    /// if it was not): a connection whose thread got no CPU for a while
    /// starts late.
    pub hello_us: Option<u64>,
    #[serde(flatten)]
    pub latency: Option<LatencyFields>,
}

/// What a connection ran with, for its report.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub role: &'static str,
    pub proto: &'static str,
    pub mode: &'static str,
    pub conn: Option<u32>,
    pub seed: u64,
    pub msg_size: String,
    pub interval_ms: u64,
    pub latency: bool,
}

impl ConnReport {
    /// The report of a connection that ran until `end` and ended with
    /// `result`.
    pub fn new(
        info: &ConnInfo,
        p: &mut Progress,
        end: Instant,
        result: Result<(), Error>,
    ) -> ConnReport {
        let elapsed_s = end
            .saturating_duration_since(p.timeline.start())
            .as_secs_f64();
        let (error, errno) = match result {
            Err(e) => (Some(e.to_string()), e.errno),
            Ok(()) => match &p.first_bad {
                Some(why) if p.bad_msgs > 1 => (
                    Some(format!("{why} (and {} more bad messages)", p.bad_msgs - 1)),
                    None,
                ),
                Some(why) => (Some(why.clone()), None),
                None => (None, None),
            },
        };
        let latency = info.latency.then(|| LatencyFields {
            count: if info.role == "client" {
                p.rtts.len() as u64
            } else {
                p.msgs
            },
            rtt_us: percentiles(&mut p.rtts),
        });
        ConnReport {
            role: info.role,
            proto: info.proto,
            mode: info.mode,
            conn: info.conn,
            msgs: p.msgs,
            bytes: p.bytes,
            digest: p.digest_hex(),
            ok: error.is_none(),
            error,
            errno,
            elapsed_s,
            goodput_mbps: goodput_mbps(p.bytes, elapsed_s),
            max_gap_us: p.timeline.max_gap_us(),
            gaps_us: p.timeline.gaps_us().to_vec(),
            interval_ms: info.interval_ms,
            samples: p.timeline.samples().to_vec(),
            seed: info.seed,
            msg_size: info.msg_size.clone(),
            bad_msgs: p.bad_msgs,
            hello_us: p
                .hello_at
                .map(|t| t.saturating_duration_since(p.timeline.start()).as_micros() as u64),
            latency,
        }
    }

    /// A report for a failure before any message.
    pub fn failed(info: &ConnInfo, e: &Error) -> ConnReport {
        let now = Instant::now();
        let mut p = Progress::new(now, Duration::from_millis(info.interval_ms.max(1)));
        ConnReport::new(info, &mut p, now, Err(e.clone()))
    }

    /// One human-readable line.
    pub fn line(&self) -> String {
        let conn = match self.conn {
            Some(c) => format!("conn {c}"),
            None => "conn ?".to_string(),
        };
        let mut s = format!(
            "{} {conn} {} {}: {} msgs, {} bytes in {:.3} s, {:.1} Mbit/s, max gap {} us",
            self.role,
            self.proto,
            self.mode,
            self.msgs,
            self.bytes,
            self.elapsed_s,
            self.goodput_mbps,
            self.max_gap_us,
        );
        if let Some(l) = &self.latency {
            if let Some(r) = &l.rtt_us {
                let _ = write!(
                    s,
                    ", {} round trips: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
                    l.count, r.p50, r.p99, r.p999
                );
            } else if self.role == "server" {
                let _ = write!(s, ", {} echoed", l.count);
            }
        }
        let _ = write!(s, ", digest {}", self.digest);
        match &self.error {
            None => s.push_str(", OK"),
            Some(e) => {
                let _ = write!(s, ", FAILED: {e}");
            }
        }
        s
    }
}

/// The client's single JSON object: totals over all connections, plus each
/// connection in `conns`.
#[derive(Debug, Clone, Serialize)]
pub struct ClientReport {
    pub role: &'static str,
    pub proto: &'static str,
    pub mode: &'static str,
    /// 0 with one connection; null with several (see `conns`).
    pub conn: Option<u32>,
    /// Number of connections.
    pub parallel: u32,
    pub msgs: u64,
    pub bytes: u64,
    /// The connection's digest with one connection; null with several.
    pub digest: Option<String>,
    pub ok: bool,
    /// First error (prefixed with its connection when there are several).
    pub error: Option<String>,
    pub errno: Option<i32>,
    /// Longest connection.
    pub elapsed_s: f64,
    /// Total bytes over `elapsed_s`.
    pub goodput_mbps: f64,
    pub max_gap_us: u64,
    pub interval_ms: u64,
    /// Sum over the connections.
    pub samples: Vec<u64>,
    /// Base seed S (connection i uses S + i).
    pub seed: u64,
    pub msg_size: String,
    #[serde(flatten)]
    pub latency: Option<LatencyFields>,
    pub conns: Vec<ConnReport>,
}

impl ClientReport {
    /// Totals of `conns`; `all_rtts` holds the round trips of every
    /// connection; `fatal` is an error that stopped the client before or
    /// outside the connections.
    pub fn new(
        info: &ConnInfo,
        conns: Vec<ConnReport>,
        mut all_rtts: Vec<u64>,
        fatal: Option<Error>,
    ) -> ClientReport {
        let single = conns.len() == 1 && fatal.is_none();
        let msgs = conns.iter().map(|c| c.msgs).sum();
        let bytes = conns.iter().map(|c| c.bytes).sum();
        let elapsed_s = conns.iter().map(|c| c.elapsed_s).fold(0.0, f64::max);
        let (error, errno) = match &fatal {
            Some(e) => (Some(e.to_string()), e.errno),
            None => match conns.iter().find(|c| !c.ok) {
                Some(c) if !single => (
                    c.error
                        .as_ref()
                        .map(|e| format!("conn {}: {e}", c.conn.unwrap_or(0))),
                    c.errno,
                ),
                Some(c) => (c.error.clone(), c.errno),
                None => (None, None),
            },
        };
        ClientReport {
            role: "client",
            proto: info.proto,
            mode: info.mode,
            conn: if single { Some(0) } else { None },
            parallel: conns.len() as u32,
            msgs,
            bytes,
            digest: if single {
                Some(conns[0].digest.clone())
            } else {
                None
            },
            ok: error.is_none(),
            error,
            errno,
            elapsed_s,
            goodput_mbps: goodput_mbps(bytes, elapsed_s),
            max_gap_us: conns.iter().map(|c| c.max_gap_us).max().unwrap_or(0),
            interval_ms: info.interval_ms,
            samples: sum_samples(conns.iter().map(|c| c.samples.as_slice())),
            seed: info.seed,
            msg_size: info.msg_size.clone(),
            latency: info.latency.then(|| LatencyFields {
                count: all_rtts.len() as u64,
                rtt_us: percentiles(&mut all_rtts),
            }),
            conns,
        }
    }

    /// Human-readable lines: one per connection, then the total when there
    /// are several. None when no connection was made (the error is printed
    /// on stderr).
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.conns.iter().map(ConnReport::line).collect();
        if self.conns.len() > 1 {
            let mut s = format!(
                "client total {} {}: {} conns, {} msgs, {} bytes in {:.3} s, {:.1} Mbit/s",
                self.proto,
                self.mode,
                self.parallel,
                self.msgs,
                self.bytes,
                self.elapsed_s,
                self.goodput_mbps
            );
            if let Some(LatencyFields {
                rtt_us: Some(r),
                count,
            }) = &self.latency
            {
                let _ = write!(
                    s,
                    ", {count} round trips: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
                    r.p50, r.p99, r.p999
                );
            }
            match &self.error {
                None => s.push_str(", OK"),
                Some(e) => {
                    let _ = write!(s, ", FAILED: {e}");
                }
            }
            out.push(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_intervals_and_gap() {
        let t0 = Instant::now();
        let mut t = Timeline::new(t0, Duration::from_millis(10));
        t.record(t0 + Duration::from_millis(1), 100);
        t.record(t0 + Duration::from_millis(9), 50);
        t.record(t0 + Duration::from_millis(35), 7);
        assert_eq!(t.samples(), &[150, 0, 0, 7]);
        assert_eq!(t.max_gap_us(), 26_000);
        // Gaps of 5 ms or more, from the earlier message.
        assert_eq!(t.gaps_us(), &[[1_000, 8_000], [9_000, 26_000]]);
        t.record(t0 + Duration::from_millis(39), 1);
        assert_eq!(t.gaps_us().len(), 2, "a 4 ms gap is not kept");
    }

    #[test]
    fn percentile_ranks() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        v.reverse();
        let r = percentiles(&mut v).expect("non-empty");
        assert_eq!(r.p50, 500.0);
        assert_eq!(r.p99, 990.0);
        assert_eq!(r.p999, 999.0);
        let r = percentiles(&mut [5000]).expect("one");
        assert_eq!((r.p50, r.p99, r.p999), (5.0, 5.0, 5.0));
        assert!(percentiles(&mut []).is_none());
    }

    #[test]
    fn sums_and_rates() {
        assert_eq!(
            sum_samples([&[1u64, 2][..], &[10, 20, 30][..]]),
            vec![11, 22, 30]
        );
        assert_eq!(goodput_mbps(1_000_000, 1.0), 8.0);
        assert_eq!(goodput_mbps(5, 0.0), 0.0);
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }

    #[test]
    fn digest_is_xxh3_128() {
        let mut p = Progress::new(Instant::now(), Duration::from_millis(10));
        // The reference implementation's XXH3-128 of no input.
        assert_eq!(p.digest_hex(), "99aa06d3014798d86001c324468d497f");
        // Split updates give the digest of the whole stream.
        p.record(Instant::now(), b"multipath ");
        p.record(Instant::now(), b"reliable");
        assert_eq!(
            p.digest.digest128(),
            xxhash_rust::xxh3::xxh3_128(b"multipath reliable")
        );
    }
}
