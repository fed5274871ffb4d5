// SPDX-License-Identifier: GPL-2.0
//! The objects of the `mrc` family, decoded from attributes.
//!
//! These structs are also the `--json` output: their field names are a stable
//! interface, documented in README.md and pinned by the tests of
//! `format.rs`. Attributes the kernel did not send are `None` (JSON `null`),
//! except a connection's `session_id`, which is left out of the JSON when the
//! kernel withholds it (from readers without CAP_NET_ADMIN).

use crate::attr::AttrTable;
use crate::attr::Attrs;
use crate::spec::{
    conn, conn_counters, conn_state, drops, endpoint, endpoint_flags, event, output_name, params,
    path, path_state, path_state_reason, send_time, stats,
};
use netlink_packet_core::DecodeError;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A session id, shown and parsed as 16 hexadecimal digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for SessionId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        u64::from_str_radix(hex, 16)
            .map(SessionId)
            .map_err(|_| format!("'{s}' is not a session id (up to 16 hex digits)"))
    }
}

impl Serialize for SessionId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Reply of `stats-get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_packets: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub retrans_packets: Option<u64>,
    pub conns: Option<u32>,
    pub conns_opened: Option<u64>,
    pub conns_failed: Option<u64>,
    pub ecn_ce_packets: Option<u64>,
    pub ecn_echoes: Option<u64>,
    pub tx_retry: Option<u64>,
    pub tx_rst: Option<u64>,
    pub tx_rst_limited: Option<u64>,
    pub tx_amp_limited: Option<u64>,
    /// Drop counters by reason name (`bad_checksum`…); reasons the kernel
    /// does not report are absent.
    pub drops: BTreeMap<String, u64>,
}

/// The counters of nest `kind` (set `set`) by attribute name, dashes made
/// underscores; an attribute this program does not know is named
/// `unknown_N`. `None` without the nest.
fn counter_map(
    a: &Attrs<'_>,
    kind: u16,
    set: AttrTable,
) -> Result<Option<BTreeMap<String, u64>>, DecodeError> {
    let Some(n) = a.nest(kind, set)? else {
        return Ok(None);
    };
    let mut map = BTreeMap::new();
    for (k, _) in n.iter() {
        let name = match set.iter().find(|(_, v, _)| *v == k) {
            Some((name, _, _)) => name.replace('-', "_"),
            None => format!("unknown_{k}"),
        };
        map.insert(name, n.uint(k)?.unwrap_or(0));
    }
    Ok(Some(map))
}

impl Stats {
    /// Decodes a `stats` attribute set.
    pub fn parse(a: &Attrs<'_>) -> Result<Self, DecodeError> {
        let drops_map = counter_map(a, stats::DROPS, drops::ATTRS)?.unwrap_or_default();
        Ok(Stats {
            rx_packets: a.uint(stats::RX_PACKETS)?,
            rx_bytes: a.uint(stats::RX_BYTES)?,
            tx_packets: a.uint(stats::TX_PACKETS)?,
            tx_bytes: a.uint(stats::TX_BYTES)?,
            retrans_packets: a.uint(stats::RETRANS_PACKETS)?,
            conns: a.u32(stats::CONNS)?,
            conns_opened: a.uint(stats::CONNS_OPENED)?,
            conns_failed: a.uint(stats::CONNS_FAILED)?,
            ecn_ce_packets: a.uint(stats::ECN_CE_PACKETS)?,
            ecn_echoes: a.uint(stats::ECN_ECHOES)?,
            tx_retry: a.uint(stats::TX_RETRY)?,
            tx_rst: a.uint(stats::TX_RST)?,
            tx_rst_limited: a.uint(stats::TX_RST_LIMITED)?,
            tx_amp_limited: a.uint(stats::TX_AMP_LIMITED)?,
            drops: drops_map,
        })
    }

    /// Returns the sum of all drop counters.
    pub fn drops_total(&self) -> u64 {
        self.drops.values().fold(0, |s, v| s.saturating_add(*v))
    }
}

/// One path of a connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Path {
    pub id: u32,
    pub state: String,
    pub backup: bool,
    pub plane: Option<u8>,
    pub ev: Option<u16>,
    pub local_addr: Option<IpAddr>,
    pub local_port: Option<u16>,
    pub remote_addr: Option<IpAddr>,
    pub remote_port: Option<u16>,
    pub ifindex: Option<u32>,
    /// Interface name of `ifindex`, looked up on this host.
    pub ifname: Option<String>,
    pub time_in_state_ns: Option<u64>,
    pub srtt_ns: Option<u64>,
    pub rttvar_ns: Option<u64>,
    pub min_rtt_ns: Option<u64>,
    pub cwnd: Option<u32>,
    pub in_flight: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_lost: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub packets_sent: Option<u64>,
    pub packets_acked: Option<u64>,
    pub packets_lost: Option<u64>,
    pub packets_retrans: Option<u64>,
    pub probes_sent: Option<u64>,
    pub probes_missed: Option<u64>,
}

impl Path {
    /// Decodes a `path` nest.
    pub fn parse(a: &Attrs<'_>) -> Result<Self, DecodeError> {
        let state = a.u32(path::STATE)?;
        Ok(Path {
            id: a.required(path::ID, a.u32(path::ID)?)?,
            state: state.map_or_else(|| "unknown".into(), |s| output_name(path_state::ENTRIES, s)),
            backup: a.flag(path::BACKUP),
            plane: a.u8(path::PLANE)?,
            ev: a.u16(path::EV)?,
            local_addr: a.addr(path::LOCAL_ADDR)?,
            local_port: a.u16(path::LOCAL_PORT)?,
            remote_addr: a.addr(path::REMOTE_ADDR)?,
            remote_port: a.u16(path::REMOTE_PORT)?,
            ifindex: a.u32(path::IFINDEX)?,
            ifname: None,
            time_in_state_ns: a.uint(path::TIME_IN_STATE_NS)?,
            srtt_ns: a.uint(path::SRTT_NS)?,
            rttvar_ns: a.uint(path::RTTVAR_NS)?,
            min_rtt_ns: a.uint(path::MIN_RTT_NS)?,
            cwnd: a.u32(path::CWND)?,
            in_flight: a.uint(path::IN_FLIGHT)?,
            bytes_sent: a.uint(path::BYTES_SENT)?,
            bytes_acked: a.uint(path::BYTES_ACKED)?,
            bytes_lost: a.uint(path::BYTES_LOST)?,
            bytes_retrans: a.uint(path::BYTES_RETRANS)?,
            packets_sent: a.uint(path::PACKETS_SENT)?,
            packets_acked: a.uint(path::PACKETS_ACKED)?,
            packets_lost: a.uint(path::PACKETS_LOST)?,
            packets_retrans: a.uint(path::PACKETS_RETRANS)?,
            probes_sent: a.uint(path::PROBES_SENT)?,
            probes_missed: a.uint(path::PROBES_MISSED)?,
        })
    }
}

/// One connection with its paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Conn {
    /// Shown only to readers with CAP_NET_ADMIN: whoever knows it can aim
    /// packets at the connection. Absent from the JSON when not shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    pub cookie: Option<u64>,
    pub state: String,
    pub local_addr: Option<IpAddr>,
    pub local_port: Option<u16>,
    pub remote_addr: Option<IpAddr>,
    pub remote_port: Option<u16>,
    pub cc: Option<String>,
    pub time_in_state_ns: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub rx_bytes: Option<u64>,
    /// Positive errno the connection failed with.
    pub error: Option<u32>,
    /// The connection's counters by name (`retransmits`, `hedges`…).
    pub counters: Option<BTreeMap<String, u64>>,
    /// Nanoseconds the sender was held back by each limit (`app`, `cwnd`…).
    pub send_time_ns: Option<BTreeMap<String, u64>>,
    pub paths: Vec<Path>,
}

impl Conn {
    /// Decodes a `conn` message; a continuation message carries only
    /// `cookie`, `session-id` (if shown) and paths, so the other fields may
    /// be `None`. An older module sent `session-id` in every message and
    /// `cookie` in the first only. A message must name its connection by
    /// one of the two.
    pub fn parse(a: &Attrs<'_>) -> Result<Self, DecodeError> {
        let state = a.u32(conn::STATE)?;
        let session_id = a.uint(conn::SESSION_ID)?.map(SessionId);
        let cookie = a.uint(conn::COOKIE)?;
        if session_id.is_none() && cookie.is_none() {
            return Err(DecodeError::from(
                "connection without attribute 'cookie' or 'session-id'",
            ));
        }
        Ok(Conn {
            session_id,
            cookie,
            state: state.map_or_else(String::new, |s| output_name(conn_state::ENTRIES, s)),
            local_addr: a.addr(conn::LOCAL_ADDR)?,
            local_port: a.u16(conn::LOCAL_PORT)?,
            remote_addr: a.addr(conn::REMOTE_ADDR)?,
            remote_port: a.u16(conn::REMOTE_PORT)?,
            cc: a.string(conn::CC)?,
            time_in_state_ns: a.uint(conn::TIME_IN_STATE_NS)?,
            tx_bytes: a.uint(conn::TX_BYTES)?,
            rx_bytes: a.uint(conn::RX_BYTES)?,
            error: a.u32(conn::ERROR)?,
            counters: counter_map(a, conn::COUNTERS, conn_counters::ATTRS)?,
            send_time_ns: counter_map(a, conn::SEND_TIME, send_time::ATTRS)?,
            paths: a
                .nests(conn::PATH, path::ATTRS)?
                .iter()
                .map(Path::parse)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether `next`, the following message of a dump, continues this
    /// connection: the same cookie, or, when either message lacks one (an
    /// older module sent it in the first message only), the same session id.
    pub fn continued_by(&self, next: &Conn) -> bool {
        match (self.cookie, next.cookie) {
            (Some(a), Some(b)) => a == b,
            _ => self.session_id.is_some() && self.session_id == next.session_id,
        }
    }

    /// Returns the number of paths in the active state.
    pub fn active_paths(&self) -> usize {
        self.paths.iter().filter(|p| p.state == "active").count()
    }

    /// The limits that held the sender back, with their share of its time
    /// in percent, largest first; limits it never met are left out.
    pub fn send_limits(&self) -> Vec<(String, f64)> {
        let Some(t) = &self.send_time_ns else {
            return Vec::new();
        };
        let total = t.values().fold(0u64, |s, v| s.saturating_add(*v));
        if total == 0 {
            return Vec::new();
        }
        let mut v: Vec<(String, f64)> = t
            .iter()
            .filter(|(_, ns)| **ns > 0)
            .map(|(k, ns)| (k.clone(), *ns as f64 * 100.0 / total as f64))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Returns the smallest smoothed RTT over the active paths.
    pub fn best_srtt_ns(&self) -> Option<u64> {
        self.paths
            .iter()
            .filter(|p| p.state == "active")
            .filter_map(|p| p.srtt_ns)
            .min()
    }
}

/// Why a dump could not be assembled.
/// Why a dump could not be read.
#[derive(Debug, PartialEq)]
pub enum DumpError {
    /// A message did not decode.
    Decode(String),
}

impl From<DecodeError> for DumpError {
    fn from(e: DecodeError) -> Self {
        DumpError::Decode(e.to_string())
    }
}

/// A dump that knows whether it shows one moment of its table.
pub trait Snapshot {
    /// Whether every message carried the same table generation.
    fn consistent(&self) -> bool;
    /// Records that the table changed while it was dumped.
    fn mark_torn(&mut self);
}

/// Follows the generation of a dump's messages: the first one seen, and
/// whether a later message carried another.
#[derive(Default)]
struct Generations {
    first: Option<u32>,
    torn: bool,
}

impl Generations {
    fn see(&mut self, now: Option<u32>) {
        match (self.first, now) {
            (Some(f), Some(n)) if f != n => self.torn = true,
            (None, Some(_)) => self.first = now,
            _ => {}
        }
    }
}

/// A dump of the connection table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnDump {
    /// Generation of the first message.
    pub generation: Option<u32>,
    /// False if connections opened or closed while the dump was read: each
    /// connection listed is whole, but the list mixes moments.
    pub consistent: bool,
    pub connections: Vec<Conn>,
}

impl ConnDump {
    /// Assembles the messages of a `conn-get` dump: checks the generation
    /// and joins a connection continued over consecutive messages (see
    /// [`Conn::continued_by`]).
    pub fn assemble<'a>(msgs: impl IntoIterator<Item = Attrs<'a>>) -> Result<ConnDump, DumpError> {
        let mut gens = Generations::default();
        let mut connections: Vec<Conn> = Vec::new();
        for a in msgs {
            gens.see(a.u32(conn::GENERATION)?);
            let c = Conn::parse(&a)?;
            match connections.last_mut() {
                Some(last) if last.continued_by(&c) => {
                    last.session_id = last.session_id.or(c.session_id);
                    last.cookie = last.cookie.or(c.cookie);
                    last.paths.extend(c.paths);
                }
                _ => connections.push(c),
            }
        }
        Ok(ConnDump {
            generation: gens.first,
            consistent: !gens.torn,
            connections,
        })
    }
}

/// A local endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub ifindex: Option<u32>,
    /// Interface name of `ifindex`, looked up on this host.
    pub ifname: Option<String>,
    pub backup: bool,
    /// Raw `endpoint-flags` bits.
    pub flags: u32,
}

impl Endpoint {
    /// Decodes an `endpoint` attribute set.
    pub fn parse(a: &Attrs<'_>) -> Result<Self, DecodeError> {
        let flags = a.u32(endpoint::FLAGS)?.unwrap_or(0);
        Ok(Endpoint {
            addr: a.required(endpoint::ADDR, a.addr(endpoint::ADDR)?)?,
            ifindex: a.u32(endpoint::IFINDEX)?,
            ifname: None,
            backup: flags & endpoint_flags::BACKUP != 0,
            flags,
        })
    }
}

/// A dump of the endpoint table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointDump {
    /// Generation of the first message.
    pub generation: Option<u32>,
    /// False if endpoints were added or removed while the dump was read.
    pub consistent: bool,
    pub endpoints: Vec<Endpoint>,
}

impl EndpointDump {
    /// Assembles the messages of an `endpoint-get` dump.
    pub fn assemble<'a>(
        msgs: impl IntoIterator<Item = Attrs<'a>>,
    ) -> Result<EndpointDump, DumpError> {
        let mut gens = Generations::default();
        let mut endpoints = Vec::new();
        for a in msgs {
            gens.see(a.u32(endpoint::GENERATION)?);
            endpoints.push(Endpoint::parse(&a)?);
        }
        Ok(EndpointDump {
            generation: gens.first,
            consistent: !gens.torn,
            endpoints,
        })
    }
}

/// Reply of `param-get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Params {
    pub heartbeat_ms: Option<u32>,
    pub miss_threshold: Option<u32>,
    pub ev_per_plane: Option<u32>,
    pub cc: Option<String>,
    pub user_timeout_ms: Option<u32>,
    pub data_per_idle_probe: Option<u32>,
    pub syn_retry_pct: Option<u32>,
}

impl Params {
    /// Decodes a `params` attribute set.
    pub fn parse(a: &Attrs<'_>) -> Result<Self, DecodeError> {
        Ok(Params {
            heartbeat_ms: a.u32(params::HEARTBEAT_MS)?,
            miss_threshold: a.u32(params::MISS_THRESHOLD)?,
            ev_per_plane: a.u32(params::EV_PER_PLANE)?,
            cc: a.string(params::CC)?,
            user_timeout_ms: a.u32(params::USER_TIMEOUT_MS)?,
            data_per_idle_probe: a.u32(params::DATA_PER_IDLE_PROBE)?,
            syn_retry_pct: a.u32(params::SYN_RETRY_PCT)?,
        })
    }
}

/// A notification of the `events` group.
///
/// `timestamp_ns` is CLOCK_MONOTONIC: the kernel's when it sends one, else
/// the time the tool received the event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    PathStateChange {
        timestamp_ns: u64,
        session_id: Option<SessionId>,
        path_id: Option<u32>,
        old_state: String,
        new_state: String,
        reason: String,
    },
    ConnEstablished {
        timestamp_ns: u64,
        session_id: Option<SessionId>,
        cookie: Option<u64>,
        local_port: Option<u16>,
        remote_addr: Option<IpAddr>,
        remote_port: Option<u16>,
    },
    ConnClosed {
        timestamp_ns: u64,
        session_id: Option<SessionId>,
        cookie: Option<u64>,
        /// Positive errno; 0 for an orderly close.
        error: u32,
    },
    EndpointAdded {
        timestamp_ns: u64,
        #[serde(flatten)]
        endpoint: Endpoint,
    },
    EndpointRemoved {
        timestamp_ns: u64,
        #[serde(flatten)]
        endpoint: Endpoint,
    },
    PathAdded {
        timestamp_ns: u64,
        session_id: Option<SessionId>,
        cookie: Option<u64>,
        path_id: Option<u32>,
        plane: Option<u32>,
        local_addr: Option<IpAddr>,
        remote_addr: Option<IpAddr>,
        /// UDP source port of the path (its entropy value).
        local_port: Option<u16>,
        remote_port: Option<u16>,
        /// Interface the path leaves by; 0 when routing chooses.
        ifindex: Option<u32>,
        /// Interface name of `ifindex`, looked up on this host.
        ifname: Option<String>,
    },
    PathRemoved {
        timestamp_ns: u64,
        session_id: Option<SessionId>,
        cookie: Option<u64>,
        path_id: Option<u32>,
    },
    /// A notification this build does not know (a newer kernel).
    Unknown { timestamp_ns: u64, cmd: u8 },
}

impl Event {
    /// Decodes a notification with command `cmd` and attributes `raw`;
    /// `now_ns` stands in for a missing kernel timestamp.
    pub fn parse(cmd: u8, raw: &[u8], now_ns: u64) -> Result<Self, DecodeError> {
        use crate::spec::cmd as c;
        let set = match cmd {
            c::ENDPOINT_ADDED | c::ENDPOINT_REMOVED => endpoint::ATTRS,
            _ => event::ATTRS,
        };
        let a = Attrs::parse(raw, set)?;
        let ts =
            || -> Result<u64, DecodeError> { Ok(a.uint(event::TIMESTAMP_NS)?.unwrap_or(now_ns)) };
        let sid = || -> Result<Option<SessionId>, DecodeError> {
            Ok(a.uint(event::SESSION_ID)?.map(SessionId))
        };
        let pstate = |k| -> Result<String, DecodeError> {
            Ok(a.u32(k)?
                .map_or_else(|| "unknown".into(), |v| output_name(path_state::ENTRIES, v)))
        };
        Ok(match cmd {
            c::PATH_STATE_CHANGE => Event::PathStateChange {
                timestamp_ns: ts()?,
                session_id: sid()?,
                path_id: a.u32(event::PATH_ID)?,
                old_state: pstate(event::OLD_STATE)?,
                new_state: pstate(event::NEW_STATE)?,
                reason: output_name(
                    path_state_reason::ENTRIES,
                    a.u32(event::REASON)?.unwrap_or(path_state_reason::UNSPEC),
                ),
            },
            c::CONN_ESTABLISHED => Event::ConnEstablished {
                timestamp_ns: ts()?,
                session_id: sid()?,
                cookie: a.uint(event::COOKIE)?,
                local_port: a.u16(event::LOCAL_PORT)?,
                remote_addr: a.addr(event::REMOTE_ADDR)?,
                remote_port: a.u16(event::REMOTE_PORT)?,
            },
            c::CONN_CLOSED => Event::ConnClosed {
                timestamp_ns: ts()?,
                session_id: sid()?,
                cookie: a.uint(event::COOKIE)?,
                error: a.u32(event::ERROR)?.unwrap_or(0),
            },
            c::ENDPOINT_ADDED => Event::EndpointAdded {
                timestamp_ns: now_ns,
                endpoint: Endpoint::parse(&a)?,
            },
            c::ENDPOINT_REMOVED => Event::EndpointRemoved {
                timestamp_ns: now_ns,
                endpoint: Endpoint::parse(&a)?,
            },
            c::PATH_ADDED => Event::PathAdded {
                timestamp_ns: ts()?,
                session_id: sid()?,
                cookie: a.uint(event::COOKIE)?,
                path_id: a.u32(event::PATH_ID)?,
                plane: a.u32(event::PLANE)?,
                local_addr: a.addr(event::LOCAL_ADDR)?,
                remote_addr: a.addr(event::PATH_REMOTE_ADDR)?,
                local_port: a.u16(event::PATH_SPORT)?,
                remote_port: a.u16(event::REMOTE_PORT)?,
                ifindex: a.u32(event::IFINDEX)?,
                ifname: None,
            },
            c::PATH_REMOVED => Event::PathRemoved {
                timestamp_ns: ts()?,
                session_id: sid()?,
                cookie: a.uint(event::COOKIE)?,
                path_id: a.u32(event::PATH_ID)?,
            },
            _ => Event::Unknown {
                timestamp_ns: now_ns,
                cmd,
            },
        })
    }

    /// Returns the event's interface index and the name slot that is
    /// filled in later, for the events that carry an interface.
    pub fn interface_mut(&mut self) -> Option<(Option<u32>, &mut Option<String>)> {
        match self {
            Event::EndpointAdded { endpoint, .. } | Event::EndpointRemoved { endpoint, .. } => {
                Some((endpoint.ifindex, &mut endpoint.ifname))
            }
            Event::PathAdded {
                ifindex, ifname, ..
            } => Some((*ifindex, ifname)),
            _ => None,
        }
    }
}

/// Implements [`Snapshot`] for dumps that keep the answer in a
/// `consistent` field.
macro_rules! impl_snapshot {
    ($($dump:ty),+ $(,)?) => {$(
        impl Snapshot for $dump {
            fn consistent(&self) -> bool {
                self.consistent
            }
            fn mark_torn(&mut self) {
                self.consistent = false;
            }
        }
    )+};
}

impl_snapshot!(ConnDump, EndpointDump);
