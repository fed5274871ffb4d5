// SPDX-License-Identifier: GPL-2.0
//! Human-readable output: aligned tables and one-line events.
//!
//! Everything here is a pure function of the decoded objects, so the tests
//! build netlink replies, decode them and check the exact text.

use crate::model::{Conn, ConnDump, Endpoint, EndpointDump, Event, Params, Path, Stats};
use std::fmt::Write as _;
use std::io;
use std::net::IpAddr;

/// Formats a byte count with binary units, like `wg show`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2} {}", UNITS[unit])
}

/// Formats a duration in nanoseconds with the two most significant units.
pub fn duration(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    match ns {
        n if n < US => format!("{n}ns"),
        n if n < MS => format!("{}us", n / US),
        n if n < 10 * MS => format!("{:.2}ms", n as f64 / MS as f64),
        n if n < S => format!("{:.1}ms", n as f64 / MS as f64),
        n if n < 60 * S => format!("{:.1}s", n as f64 / S as f64),
        n if n < 3600 * S => format!("{}m{:02}s", n / (60 * S), n / S % 60),
        n if n < 86400 * S => format!("{}h{:02}m", n / (3600 * S), n / (60 * S) % 60),
        n => format!("{}d{:02}h", n / (86400 * S), n / (3600 * S) % 24),
    }
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "-".into(), f)
}

/// Names a connection in headings: its session id, or, when the kernel
/// withholds it (a reader without CAP_NET_ADMIN), its socket cookie.
fn conn_name(c: &Conn) -> String {
    match (c.session_id, c.cookie) {
        (Some(s), _) => s.to_string(),
        (None, Some(k)) => format!("cookie {k}"),
        (None, None) => "-".into(),
    }
}

/// Formats an address and port: `10.0.0.1:4796`, `[fe80::1]:4796`.
pub fn endpoint(addr: Option<IpAddr>, port: Option<u16>) -> String {
    let a = match addr {
        Some(IpAddr::V6(a)) if port.is_some() => format!("[{a}]"),
        Some(a) => a.to_string(),
        None => "*".into(),
    };
    match port {
        Some(p) => format!("{a}:{p}"),
        None => a,
    }
}

fn dev(ifindex: Option<u32>, ifname: &Option<String>) -> String {
    match (ifname, ifindex) {
        (Some(n), _) => n.clone(),
        (None, Some(i)) => format!("if{i}"),
        (None, None) => "-".into(),
    }
}

fn errno_text(e: u32) -> String {
    let text = io::Error::from_raw_os_error(e as i32).to_string();
    // "Connection timed out (os error 110)" -> "Connection timed out"
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A table whose columns are padded to the widest cell; the last column is
/// not padded so that lines carry no trailing spaces.
struct Table {
    rows: Vec<Vec<String>>,
    indent: &'static str,
}

impl Table {
    fn new(indent: &'static str, headers: &[&str]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
            indent,
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self, out: &mut String) {
        let cols = self.rows[0].len();
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &self.rows {
            let mut line = String::from(self.indent);
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

const PATH_COLUMNS: [&str; 15] = [
    "PATH", "STATE", "FOR", "LOCAL", "REMOTE", "DEV", "EV", "SRTT", "MIN_RTT", "CWND", "INFLIGHT",
    "SENT", "ACKED", "LOST", "RETRANS",
];

fn path_cells(p: &Path) -> Vec<String> {
    let state = if p.backup {
        format!("{} (backup)", p.state)
    } else {
        p.state.clone()
    };
    vec![
        p.id.to_string(),
        state,
        opt(p.time_in_state_ns, duration),
        endpoint(p.local_addr, p.local_port),
        endpoint(p.remote_addr, p.remote_port),
        dev(p.ifindex, &p.ifname),
        opt(p.ev, |v| v.to_string()),
        opt(p.srtt_ns, duration),
        opt(p.min_rtt_ns, duration),
        opt(p.cwnd, |v| bytes(u64::from(v))),
        opt(p.in_flight, bytes),
        opt(p.bytes_sent, bytes),
        opt(p.bytes_acked, bytes),
        opt(p.bytes_lost, bytes),
        opt(p.bytes_retrans, bytes),
    ]
}

/// Counts paths per state: (total, active, suspect, failed).
fn path_counts(conns: &[Conn]) -> (usize, usize, usize, usize) {
    let all = conns.iter().flat_map(|c| &c.paths);
    let count = |s: &str| all.clone().filter(|p| p.state == s).count();
    (
        all.clone().count(),
        count("active"),
        count("suspect"),
        count("failed"),
    )
}

/// `mrc-status show`: a summary, then every connection with its paths.
pub fn show(dump: &ConnDump) -> String {
    let mut out = String::new();
    let (total, active, suspect, failed) = path_counts(&dump.connections);
    let _ = writeln!(
        out,
        "mrc: {} connection{}, {total} path{}: {active} active, {suspect} suspect, {failed} failed",
        dump.connections.len(),
        if dump.connections.len() == 1 { "" } else { "s" },
        if total == 1 { "" } else { "s" },
    );
    for c in &dump.connections {
        out.push('\n');
        let _ = writeln!(out, "connection {}", conn_name(c));
        let mut state = c.state.clone();
        if let Some(t) = c.time_in_state_ns {
            let _ = write!(state, " for {}", duration(t));
        }
        let _ = writeln!(out, "  state: {state}");
        if let Some(e) = c.error {
            let _ = writeln!(out, "  error: {} ({e})", errno_text(e));
        }
        let _ = writeln!(out, "  local: {}", endpoint(c.local_addr, c.local_port));
        let _ = writeln!(out, "  remote: {}", endpoint(c.remote_addr, c.remote_port));
        let mut paths = format!("{} of {} active", c.active_paths(), c.paths.len());
        if let Some(s) = c.best_srtt_ns() {
            let _ = write!(paths, ", best srtt {}", duration(s));
        }
        let _ = writeln!(out, "  paths: {paths}");
        let _ = writeln!(
            out,
            "  transfer: {} sent, {} received",
            opt(c.tx_bytes, bytes),
            opt(c.rx_bytes, bytes)
        );
        if let Some(cc) = &c.cc {
            let _ = writeln!(out, "  cc: {cc}");
        }
        let limits = c.send_limits();
        if !limits.is_empty() {
            let l: Vec<String> = limits
                .iter()
                .map(|(k, pct)| format!("{k} {pct:.1}%"))
                .collect();
            let _ = writeln!(out, "  sender held back by: {}", l.join(", "));
        }
        if let Some(k) = &c.counters {
            let get = |n: &str| k.get(n).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "  retransmits: {} (lost: {} rack, {} rto, {} path; {} rack spurious), {} rtos",
                get("retransmits"),
                get("rack_losses"),
                get("rto_losses"),
                get("path_losses"),
                get("spurious_losses"),
                get("rtos"),
            );
            let _ = writeln!(
                out,
                "  hedges: {} ({} spurious); duplicates received: {}",
                get("hedges"),
                get("spurious_hedges"),
                get("duplicates"),
            );
            // Only an accepting end withholds handshake packets, and only
            // from a peer whose SYNs did not pay for its answers.
            if get("amp_limited") > 0 {
                let _ = writeln!(
                    out,
                    "  handshake packets withheld (anti-amplification): {}",
                    get("amp_limited"),
                );
            }
            // Only a peer that ignores the window makes this end withhold
            // answers to the packets it has no room for.
            if get("acks_limited") > 0 {
                let _ = writeln!(
                    out,
                    "  answers withheld to packets beyond the window: {}",
                    get("acks_limited"),
                );
            }
        }
        if let Some(k) = c.cookie {
            let _ = writeln!(out, "  cookie: {k}");
        }
        if !c.paths.is_empty() {
            out.push('\n');
            let mut t = Table::new("  ", &PATH_COLUMNS);
            for p in &c.paths {
                t.row(path_cells(p));
            }
            t.render(&mut out);
        }
    }
    out
}

/// `mrc-status conns`: one line per connection.
pub fn conns(dump: &ConnDump) -> String {
    let mut t = Table::new(
        "",
        &[
            "SESSION", "STATE", "FOR", "LOCAL", "REMOTE", "PATHS", "SRTT", "TX", "RX", "CC",
        ],
    );
    for c in &dump.connections {
        t.row(vec![
            opt(c.session_id, |s| s.to_string()),
            c.state.clone(),
            opt(c.time_in_state_ns, duration),
            endpoint(c.local_addr, c.local_port),
            endpoint(c.remote_addr, c.remote_port),
            format!("{}/{}", c.active_paths(), c.paths.len()),
            opt(c.best_srtt_ns(), duration),
            opt(c.tx_bytes, bytes),
            opt(c.rx_bytes, bytes),
            c.cc.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut out = String::new();
    t.render(&mut out);
    out
}

/// `mrc-status paths`: one line per path, with its connection.
pub fn paths(dump: &ConnDump) -> String {
    let mut headers = vec!["SESSION"];
    headers.extend(PATH_COLUMNS);
    let mut t = Table::new("", &headers);
    for c in &dump.connections {
        for p in &c.paths {
            let mut cells = vec![opt(c.session_id, |s| s.to_string())];
            cells.extend(path_cells(p));
            t.row(cells);
        }
    }
    let mut out = String::new();
    t.render(&mut out);
    out
}

/// `mrc-status stats`.
pub fn stats(s: &Stats) -> String {
    let n = |v: Option<u64>| opt(v, |v| v.to_string());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "received: {} packets, {}",
        n(s.rx_packets),
        opt(s.rx_bytes, bytes)
    );
    let _ = writeln!(
        out,
        "sent: {} packets, {}",
        n(s.tx_packets),
        opt(s.tx_bytes, bytes)
    );
    let _ = writeln!(out, "retransmitted: {} packets", n(s.retrans_packets));
    let _ = writeln!(
        out,
        "ecn: {} congestion-marked packets received, {} echoes received",
        n(s.ecn_ce_packets),
        n(s.ecn_echoes)
    );
    let _ = writeln!(
        out,
        "connections: {} now, {} opened, {} failed",
        n(s.conns.map(u64::from)),
        n(s.conns_opened),
        n(s.conns_failed)
    );
    let _ = writeln!(
        out,
        "handshake defence: {} retries sent, {} resets sent, {} resets rate-limited, {} packets held by the amplification limit",
        n(s.tx_retry),
        n(s.tx_rst),
        n(s.tx_rst_limited),
        n(s.tx_amp_limited)
    );
    let _ = writeln!(out, "dropped: {} packets", s.drops_total());
    let mut t = Table::new("  ", &["REASON", "PACKETS"]);
    let mut any = false;
    for (reason, count) in s.drops.iter().filter(|(_, c)| **c != 0) {
        t.row(vec![reason.clone(), count.to_string()]);
        any = true;
    }
    if any {
        t.render(&mut out);
    }
    out
}

/// `mrc-status endpoint show`.
pub fn endpoints(dump: &EndpointDump) -> String {
    let mut t = Table::new("", &["ADDRESS", "DEV", "FLAGS"]);
    for e in &dump.endpoints {
        t.row(vec![
            e.addr.to_string(),
            dev(e.ifindex, &e.ifname),
            endpoint_flags(e),
        ]);
    }
    let mut out = String::new();
    t.render(&mut out);
    out
}

fn endpoint_flags(e: &Endpoint) -> String {
    let mut f: Vec<String> = crate::spec::endpoint_flags::ENTRIES
        .iter()
        .filter(|(_, bit)| e.flags & bit != 0)
        .map(|(name, _)| name.replace('-', "_"))
        .collect();
    let known = crate::spec::endpoint_flags::ENTRIES
        .iter()
        .fold(0, |m, (_, bit)| m | bit);
    if e.flags & !known != 0 {
        f.push(format!("{:#x}", e.flags & !known));
    }
    if f.is_empty() {
        "-".into()
    } else {
        f.join(",")
    }
}

/// `mrc-status param show`.
pub fn params(p: &Params) -> String {
    let n = |v: Option<u32>| opt(v, |v| v.to_string());
    let mut t = Table::new("", &["PARAMETER", "VALUE"]);
    t.row(vec!["heartbeat_ms".into(), n(p.heartbeat_ms)]);
    t.row(vec!["miss_threshold".into(), n(p.miss_threshold)]);
    t.row(vec!["ev_per_plane".into(), n(p.ev_per_plane)]);
    t.row(vec![
        "cc".into(),
        p.cc.clone().unwrap_or_else(|| "-".into()),
    ]);
    t.row(vec!["user_timeout_ms".into(), n(p.user_timeout_ms)]);
    t.row(vec!["data_per_idle_probe".into(), n(p.data_per_idle_probe)]);
    t.row(vec!["syn_retry_pct".into(), n(p.syn_retry_pct)]);
    let mut out = String::new();
    t.render(&mut out);
    out
}

/// `mrc-status monitor`: one line per event, prefixed with its CLOCK_MONOTONIC
/// time in seconds like the kernel log.
pub fn event(e: &Event) -> String {
    let sid = |s: &Option<crate::model::SessionId>| opt(*s, |s| s.to_string());
    let (ts, text) = match e {
        Event::PathStateChange {
            timestamp_ns,
            session_id,
            path_id,
            old_state,
            new_state,
            reason,
        } => (
            *timestamp_ns,
            format!(
                "path {} of {}: {old_state} -> {new_state} ({reason})",
                opt(*path_id, |v| v.to_string()),
                sid(session_id)
            ),
        ),
        Event::ConnEstablished {
            timestamp_ns,
            session_id,
            local_port,
            remote_addr,
            remote_port,
            ..
        } => (
            *timestamp_ns,
            format!(
                "connection {} established: port {} <-> {}",
                sid(session_id),
                opt(*local_port, |v| v.to_string()),
                endpoint(*remote_addr, *remote_port)
            ),
        ),
        Event::ConnClosed {
            timestamp_ns,
            session_id,
            error,
            ..
        } => (
            *timestamp_ns,
            if *error == 0 {
                format!("connection {} closed", sid(session_id))
            } else {
                format!(
                    "connection {} failed: {} ({error})",
                    sid(session_id),
                    errno_text(*error)
                )
            },
        ),
        Event::EndpointAdded {
            timestamp_ns,
            endpoint: ep,
        } => (
            *timestamp_ns,
            format!("endpoint added: {}", endpoint_line(ep)),
        ),
        Event::EndpointRemoved {
            timestamp_ns,
            endpoint: ep,
        } => (
            *timestamp_ns,
            format!("endpoint removed: {}", endpoint_line(ep)),
        ),
        Event::PathAdded {
            timestamp_ns,
            session_id,
            path_id,
            plane,
            local_addr,
            remote_addr,
            local_port,
            remote_port,
            ifindex,
            ifname,
            ..
        } => (
            *timestamp_ns,
            format!(
                "path {} of {} added: plane {}, {} <-> {} dev {}",
                opt(*path_id, |v| v.to_string()),
                sid(session_id),
                opt(*plane, |v| v.to_string()),
                endpoint(*local_addr, *local_port),
                endpoint(*remote_addr, *remote_port),
                // 0: no interface chosen, routing picks one per packet.
                dev(ifindex.filter(|i| *i != 0), ifname)
            ),
        ),
        Event::PathRemoved {
            timestamp_ns,
            session_id,
            path_id,
            ..
        } => (
            *timestamp_ns,
            format!(
                "path {} of {} removed",
                opt(*path_id, |v| v.to_string()),
                sid(session_id)
            ),
        ),
        Event::Unknown { timestamp_ns, cmd } => {
            (*timestamp_ns, format!("unknown notification {cmd}"))
        }
    };
    format!(
        "[{:>5}.{:06}] {text}",
        ts / 1_000_000_000,
        ts % 1_000_000_000 / 1_000
    )
}

fn endpoint_line(e: &Endpoint) -> String {
    let mut s = format!("{} dev {}", e.addr, dev(e.ifindex, &e.ifname));
    if e.backup {
        s.push_str(" backup");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::{AttrWriter, Attrs};
    use crate::model::SessionId;
    use crate::spec::{
        self, conn, conn_counters, conn_state, drops, path, path_state, send_time, stats,
    };

    /// Encodes a value with the width the spec gives the attribute, so that
    /// a disagreement between spec types and the decoder fails these tests.
    fn put(w: AttrWriter, set: crate::attr::AttrTable, kind: u16, v: u64) -> AttrWriter {
        let ty = set
            .iter()
            .find(|(_, k, _)| *k == kind)
            .map(|(_, _, t)| *t)
            .expect("attribute in set");
        match ty {
            "u8" => w.u8(kind, v as u8),
            "u16" => w.u16(kind, v as u16),
            "u32" => w.u32(kind, v as u32),
            // The kernel sends 4 bytes while the value fits.
            "uint" if v <= u64::from(u32::MAX) => w.u32(kind, v as u32),
            "uint" => w.uint(kind, v),
            "flag" if v != 0 => w.flag(kind),
            "flag" => w,
            t => panic!("not a number: {t}"),
        }
    }

    fn path_attrs(id: u32, state: u32, plane: u8, srtt: Option<u64>) -> AttrWriter {
        let s = path::ATTRS;
        let mut w = AttrWriter::new();
        for (k, v) in [
            (path::ID, u64::from(id)),
            (path::PLANE, u64::from(plane)),
            (path::EV, 49152 + u64::from(id)),
            (path::LOCAL_PORT, 4796),
            (path::REMOTE_PORT, 4796),
            (path::IFINDEX, 2 + u64::from(plane)),
            (path::STATE, u64::from(state)),
            (path::TIME_IN_STATE_NS, 12_300_000_000),
            (path::MIN_RTT_NS, 60_000),
            (path::CWND, 65536),
            (path::IN_FLIGHT, 12288),
            (path::BYTES_SENT, 1_288_490_189),
            (path::BYTES_ACKED, 1_288_477_901),
            (path::BYTES_LOST, 0),
            (path::BYTES_RETRANS, 0),
            (path::PACKETS_SENT, 900_000),
        ] {
            w = put(w, s, k, v);
        }
        if let Some(v) = srtt {
            w = put(w, s, path::SRTT_NS, v);
        }
        w.addr(path::LOCAL_ADDR, format!("10.0.{plane}.1").parse().unwrap())
            .addr(
                path::REMOTE_ADDR,
                format!("10.0.{plane}.2").parse().unwrap(),
            )
    }

    /// How the module names a connection in its `conn-get` messages.
    #[derive(Clone, Copy)]
    enum Ids {
        /// An older module: the session id in every message, the cookie
        /// in the first only.
        Old { sid: u64, cookie: u64 },
        /// The current module: the cookie in every message, the session id
        /// only for a reader with CAP_NET_ADMIN.
        New { cookie: u64, sid: Option<u64> },
    }

    fn conn_msg(generation: u32, sid: u64, paths: Vec<AttrWriter>, head: bool) -> Vec<u8> {
        conn_msg_ids(generation, Ids::Old { sid, cookie: 4242 }, paths, head)
    }

    fn conn_msg_ids(generation: u32, ids: Ids, paths: Vec<AttrWriter>, head: bool) -> Vec<u8> {
        let s = conn::ATTRS;
        let mut w = put(
            AttrWriter::new(),
            s,
            conn::GENERATION,
            u64::from(generation),
        );
        match ids {
            Ids::Old { sid, cookie } => {
                w = put(w, s, conn::SESSION_ID, sid);
                if head {
                    w = put(w, s, conn::COOKIE, cookie);
                }
            }
            Ids::New { cookie, sid } => {
                w = put(w, s, conn::COOKIE, cookie);
                if let Some(sid) = sid {
                    w = put(w, s, conn::SESSION_ID, sid);
                }
            }
        }
        if head {
            for (k, v) in [
                (conn::STATE, u64::from(conn_state::ESTABLISHED)),
                (conn::LOCAL_PORT, 5000),
                (conn::REMOTE_PORT, 5001),
                (conn::TIME_IN_STATE_NS, 12_345_000_000),
                (conn::TX_BYTES, 1_610_612_736),
                (conn::RX_BYTES, 2_097_152),
            ] {
                w = put(w, s, k, v);
            }
            w = w
                .addr(conn::LOCAL_ADDR, "10.0.0.1".parse().unwrap())
                .addr(conn::REMOTE_ADDR, "10.0.0.2".parse().unwrap())
                .string(conn::CC, "delay");
            let mut k = AttrWriter::new();
            for (a, v) in [
                (conn_counters::DATA_SENT, 1_200_000),
                (conn_counters::RETRANSMITS, 40),
                (conn_counters::RACK_LOSSES, 30),
                (conn_counters::SPURIOUS_LOSSES, 2),
                (conn_counters::RTO_LOSSES, 9),
                (conn_counters::PATH_LOSSES, 1),
                (conn_counters::RTOS, 3),
                (conn_counters::HEDGES, 7),
                (conn_counters::SPURIOUS_HEDGES, 5),
                (conn_counters::DUPLICATES, 6),
                (conn_counters::AMP_LIMITED, 4),
            ] {
                k = put(k, conn_counters::ATTRS, a, v);
            }
            w = w.nest(conn::COUNTERS, k);
            let mut t = AttrWriter::new();
            for (a, v) in [
                (send_time::APP, 2_000_000_000),
                (send_time::CWND, 6_000_000_000),
                (send_time::PACING, 0),
                (send_time::SENDING, 2_000_000_000),
                // A limit a newer kernel reports.
                (99, 0),
            ] {
                t = t.uint(a, v);
            }
            w = w.nest(conn::SEND_TIME, t);
        }
        for p in paths {
            w = w.nest(conn::PATH, p);
        }
        w.finish()
    }

    /// A dump of one connection whose paths span two messages, as an older
    /// module sent it: the cookie in the first message only, so the second
    /// joins it by session id.
    fn sample_dump() -> ConnDump {
        let m1 = conn_msg(
            7,
            0x0123_4567_89ab_cdef,
            vec![
                path_attrs(0, path_state::ACTIVE, 0, Some(85_000)),
                path_attrs(1, path_state::SUSPECT, 1, Some(1_500_000)),
            ],
            true,
        );
        let m2 = conn_msg(
            7,
            0x0123_4567_89ab_cdef,
            vec![path_attrs(2, path_state::FAILED, 2, None)],
            false,
        );
        let msgs = [m1, m2];
        ConnDump::assemble(msgs.iter().map(|m| Attrs::parse(m, conn::ATTRS).unwrap())).unwrap()
    }

    #[test]
    fn dump_joins_continued_connections() {
        let d = sample_dump();
        assert_eq!(d.generation, Some(7));
        assert_eq!(d.connections.len(), 1);
        let c = &d.connections[0];
        assert_eq!(c.paths.len(), 3);
        assert_eq!(c.state, "established");
        assert_eq!(c.active_paths(), 1);
        assert_eq!(c.best_srtt_ns(), Some(85_000));
        assert_eq!(c.paths[2].srtt_ns, None);
        assert_eq!(c.paths[2].state, "failed");
    }

    #[test]
    fn torn_dump_is_detected() {
        let m1 = conn_msg_ids(7, Ids::Old { sid: 1, cookie: 1 }, vec![], true);
        let m2 = conn_msg_ids(8, Ids::Old { sid: 2, cookie: 2 }, vec![], true);
        let msgs = [m1, m2];
        let d = ConnDump::assemble(msgs.iter().map(|m| Attrs::parse(m, conn::ATTRS).unwrap()));
        let d = d.unwrap();
        assert!(!d.consistent);
        assert_eq!(d.generation, Some(7));
        assert_eq!(d.connections.len(), 2);
        assert!(sample_dump().consistent);
    }

    #[test]
    fn large_uint_values_decode() {
        let m = conn_msg(1, u64::MAX, vec![], false);
        let a = Attrs::parse(&m, conn::ATTRS).unwrap();
        let c = Conn::parse(&a).unwrap();
        assert_eq!(c.session_id, Some(SessionId(u64::MAX)));
        assert_eq!(conn_name(&c), "ffffffffffffffff");
    }

    /// A dump from the current module: connection 4242 over two messages,
    /// then connection 4343 in one, with the session ids `sids` (`None`:
    /// withheld from a reader without CAP_NET_ADMIN).
    fn new_dump(sids: [Option<u64>; 2]) -> ConnDump {
        let first = Ids::New {
            cookie: 4242,
            sid: sids[0],
        };
        let second = Ids::New {
            cookie: 4343,
            sid: sids[1],
        };
        let msgs = [
            conn_msg_ids(
                9,
                first,
                vec![
                    path_attrs(0, path_state::ACTIVE, 0, Some(85_000)),
                    path_attrs(1, path_state::SUSPECT, 1, Some(1_500_000)),
                ],
                true,
            ),
            conn_msg_ids(
                9,
                first,
                vec![path_attrs(2, path_state::FAILED, 2, None)],
                false,
            ),
            conn_msg_ids(
                9,
                second,
                vec![path_attrs(0, path_state::ACTIVE, 0, Some(90_000))],
                true,
            ),
        ];
        ConnDump::assemble(msgs.iter().map(|m| Attrs::parse(m, conn::ATTRS).unwrap())).unwrap()
    }

    #[test]
    fn dump_without_session_ids_joins_by_cookie() {
        let d = new_dump([None, None]);
        assert!(d.consistent);
        assert_eq!(d.generation, Some(9));
        assert_eq!(d.connections.len(), 2);
        let (a, b) = (&d.connections[0], &d.connections[1]);
        assert_eq!((a.session_id, a.cookie), (None, Some(4242)));
        assert_eq!((b.session_id, b.cookie), (None, Some(4343)));
        assert_eq!(a.paths.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(a.state, "established");
        assert_eq!(b.paths.len(), 1);

        // With CAP_NET_ADMIN every message carries both.
        let d = new_dump([Some(0x0123_4567_89ab_cdef), Some(0xfeed)]);
        assert_eq!(d.connections.len(), 2);
        let (a, b) = (&d.connections[0], &d.connections[1]);
        assert_eq!(a.session_id, Some(SessionId(0x0123_4567_89ab_cdef)));
        assert_eq!(a.paths.len(), 3);
        assert_eq!(
            (b.session_id, b.cookie),
            (Some(SessionId(0xfeed)), Some(4343))
        );
    }

    #[test]
    fn conn_is_named_by_cookie_or_session_id() {
        let only = |ids: &[(u16, u64)]| {
            let mut w = AttrWriter::new().u32(conn::GENERATION, 1);
            for (k, v) in ids {
                w = w.uint(*k, *v);
            }
            let m = w.finish();
            Conn::parse(&Attrs::parse(&m, conn::ATTRS).unwrap())
        };
        let c = only(&[(conn::COOKIE, 5)]).unwrap();
        assert_eq!((c.session_id, c.cookie), (None, Some(5)));
        assert_eq!(conn_name(&c), "cookie 5");
        let c = only(&[(conn::SESSION_ID, 0xab)]).unwrap();
        assert_eq!((c.session_id, c.cookie), (Some(SessionId(0xab)), None));
        assert!(only(&[]).is_err());
        let m = AttrWriter::new().u32(conn::GENERATION, 1).finish();
        assert!(ConnDump::assemble([Attrs::parse(&m, conn::ATTRS).unwrap()]).is_err());
    }

    #[test]
    fn unknown_session_ids_print_a_dash() {
        let d = new_dump([None, None]);
        let s = show(&d);
        assert!(
            s.starts_with(
                "mrc: 2 connections, 4 paths: 2 active, 1 suspect, 1 failed\n\n\
                 connection cookie 4242\n  state: established for 12.3s\n"
            ),
            "{s}"
        );
        assert!(s.contains("\nconnection cookie 4343\n"), "{s}");
        assert!(s.contains("\n  cookie: 4343\n"), "{s}");
        assert_eq!(
            conns(&d),
            "\
SESSION  STATE        FOR    LOCAL          REMOTE         PATHS  SRTT  TX        RX        CC
-        established  12.3s  10.0.0.1:5000  10.0.0.2:5001  1/3    85us  1.50 GiB  2.00 MiB  delay
-        established  12.3s  10.0.0.1:5000  10.0.0.2:5001  1/1    90us  1.50 GiB  2.00 MiB  delay
"
        );
        let p = paths(&d);
        assert_eq!(p.lines().count(), 5);
        assert!(p.starts_with("SESSION  PATH  STATE"), "{p}");
        assert!(p.lines().skip(1).all(|l| l.starts_with("-        ")), "{p}");

        // Session ids, where shown, head the blocks and fill the column.
        let d = new_dump([None, Some(0xfeed)]);
        let s = show(&d);
        assert!(s.contains("\nconnection cookie 4242\n"), "{s}");
        assert!(s.contains("\nconnection 000000000000feed\n"), "{s}");
        let c = conns(&d);
        assert!(
            c.lines().nth(1).unwrap().starts_with("-                 "),
            "{c}"
        );
        assert!(
            c.lines().nth(2).unwrap().starts_with("000000000000feed  "),
            "{c}"
        );
    }

    #[test]
    fn json_omits_unknown_session_ids() {
        let v = serde_json::to_value(new_dump([None, Some(0xfeed)])).unwrap();
        let a = v["connections"][0].as_object().unwrap();
        assert!(!a.contains_key("session_id"), "{a:?}");
        assert_eq!(a["cookie"], 4242);
        assert_eq!(a.len(), 14);
        let b = &v["connections"][1];
        assert_eq!(b["session_id"], "000000000000feed");
        assert_eq!(b["cookie"], 4343);
    }

    #[test]
    fn show_table() {
        let expected = "\
mrc: 1 connection, 3 paths: 1 active, 1 suspect, 1 failed

connection 0123456789abcdef
  state: established for 12.3s
  local: 10.0.0.1:5000
  remote: 10.0.0.2:5001
  paths: 1 of 3 active, best srtt 85us
  transfer: 1.50 GiB sent, 2.00 MiB received
  cc: delay
  sender held back by: cwnd 60.0%, app 20.0%, sending 20.0%
  retransmits: 40 (lost: 30 rack, 9 rto, 1 path; 2 rack spurious), 3 rtos
  hedges: 7 (5 spurious); duplicates received: 6
  handshake packets withheld (anti-amplification): 4
  cookie: 4242

  PATH  STATE    FOR    LOCAL          REMOTE         DEV  EV     SRTT    MIN_RTT  CWND       INFLIGHT   SENT      ACKED     LOST  RETRANS
  0     active   12.3s  10.0.0.1:4796  10.0.0.2:4796  if2  49152  85us    60us     64.00 KiB  12.00 KiB  1.20 GiB  1.20 GiB  0 B   0 B
  1     suspect  12.3s  10.0.1.1:4796  10.0.1.2:4796  if3  49153  1.50ms  60us     64.00 KiB  12.00 KiB  1.20 GiB  1.20 GiB  0 B   0 B
  2     failed   12.3s  10.0.2.1:4796  10.0.2.2:4796  if4  49154  -       60us     64.00 KiB  12.00 KiB  1.20 GiB  1.20 GiB  0 B   0 B
";
        assert_eq!(show(&sample_dump()), expected);
    }

    #[test]
    fn conns_and_paths_tables() {
        let d = sample_dump();
        assert_eq!(
            conns(&d),
            "\
SESSION           STATE        FOR    LOCAL          REMOTE         PATHS  SRTT  TX        RX        CC
0123456789abcdef  established  12.3s  10.0.0.1:5000  10.0.0.2:5001  1/3    85us  1.50 GiB  2.00 MiB  delay
"
        );
        let p = paths(&d);
        assert_eq!(p.lines().count(), 4);
        assert!(p.starts_with("SESSION           PATH  STATE"), "{p}");
        assert!(p.lines().all(|l| l == l.trim_end()));
    }

    #[test]
    fn json_field_names_are_stable() {
        let v = serde_json::to_value(sample_dump()).unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(keys(&v), ["connections", "consistent", "generation"]);
        let c = &v["connections"][0];
        assert_eq!(
            keys(c),
            [
                "cc",
                "cookie",
                "counters",
                "error",
                "local_addr",
                "local_port",
                "paths",
                "remote_addr",
                "remote_port",
                "rx_bytes",
                "send_time_ns",
                "session_id",
                "state",
                "time_in_state_ns",
                "tx_bytes"
            ]
        );
        assert_eq!(c["counters"]["spurious_hedges"], 5);
        assert_eq!(c["counters"]["amp_limited"], 4);
        assert_eq!(c["send_time_ns"]["cwnd"], 6_000_000_000u64);
        assert_eq!(c["send_time_ns"]["unknown_99"], 0);
        assert_eq!(c["session_id"], "0123456789abcdef");
        assert_eq!(c["remote_addr"], "10.0.0.2");
        assert_eq!(c["error"], serde_json::Value::Null);
        let p = &c["paths"][0];
        assert_eq!(
            keys(p),
            [
                "backup",
                "bytes_acked",
                "bytes_lost",
                "bytes_retrans",
                "bytes_sent",
                "cwnd",
                "ev",
                "id",
                "ifindex",
                "ifname",
                "in_flight",
                "local_addr",
                "local_port",
                "min_rtt_ns",
                "packets_acked",
                "packets_lost",
                "packets_retrans",
                "packets_sent",
                "plane",
                "probes_missed",
                "probes_sent",
                "remote_addr",
                "remote_port",
                "rttvar_ns",
                "srtt_ns",
                "state",
                "time_in_state_ns"
            ]
        );
        assert_eq!(p["state"], "active");
        assert_eq!(p["srtt_ns"], 85_000);
        assert_eq!(c["paths"][2]["srtt_ns"], serde_json::Value::Null);
    }

    fn sample_stats() -> Stats {
        let s = stats::ATTRS;
        let mut w = AttrWriter::new();
        for (k, v) in [
            (stats::RX_PACKETS, 1000),
            (stats::RX_BYTES, 1_048_576),
            (stats::TX_PACKETS, 2000),
            (stats::TX_BYTES, 5_000_000_000),
            (stats::RETRANS_PACKETS, 3),
            (stats::CONNS, 2),
            (stats::CONNS_OPENED, 10),
            (stats::CONNS_FAILED, 1),
            (stats::ECN_CE_PACKETS, 7),
            (stats::ECN_ECHOES, 6),
            (stats::TX_RETRY, 40),
            (stats::TX_RST, 4),
            (stats::TX_RST_LIMITED, 9),
            (stats::TX_AMP_LIMITED, 2),
        ] {
            w = put(w, s, k, v);
        }
        let mut d = AttrWriter::new();
        for (name, k, _) in drops::ATTRS {
            let v = match *name {
                "bad-checksum" => 10,
                "no-session" => 5,
                _ => 0,
            };
            d = put(d, drops::ATTRS, *k, v);
        }
        // A reason this build does not know yet.
        d = d.u32(99, 1);
        let buf = w.nest(stats::DROPS, d).finish();
        Stats::parse(&Attrs::parse(&buf, stats::ATTRS).unwrap()).unwrap()
    }

    #[test]
    fn stats_text_and_json() {
        let s = sample_stats();
        assert_eq!(
            stats(&s),
            "\
received: 1000 packets, 1.00 MiB
sent: 2000 packets, 4.66 GiB
retransmitted: 3 packets
ecn: 7 congestion-marked packets received, 6 echoes received
connections: 2 now, 10 opened, 1 failed
handshake defence: 40 retries sent, 4 resets sent, 9 resets rate-limited, 2 packets held by the amplification limit
dropped: 16 packets
  REASON        PACKETS
  bad_checksum  10
  no_session    5
  unknown_99    1
"
        );
        let v = serde_json::to_value(&s).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "conns",
                "conns_failed",
                "conns_opened",
                "drops",
                "ecn_ce_packets",
                "ecn_echoes",
                "retrans_packets",
                "rx_bytes",
                "rx_packets",
                "tx_amp_limited",
                "tx_bytes",
                "tx_packets",
                "tx_retry",
                "tx_rst",
                "tx_rst_limited"
            ]
        );
        let reasons: Vec<&String> = v["drops"].as_object().unwrap().keys().collect();
        let mut expected: Vec<String> = drops::ATTRS
            .iter()
            .map(|(n, _, _)| n.replace('-', "_"))
            .chain(["unknown_99".to_string()])
            .collect();
        expected.sort();
        assert_eq!(reasons, expected.iter().collect::<Vec<_>>());
        assert_eq!(v["tx_bytes"], 5_000_000_000u64);
    }

    #[test]
    fn endpoints_and_params() {
        use crate::spec::{endpoint, endpoint_flags, params};
        let msgs = [
            AttrWriter::new()
                .u32(endpoint::GENERATION, 3)
                .addr(endpoint::ADDR, "10.0.1.1".parse().unwrap())
                .u32(endpoint::IFINDEX, 3)
                .u32(endpoint::FLAGS, 0)
                .finish(),
            AttrWriter::new()
                .u32(endpoint::GENERATION, 3)
                .addr(endpoint::ADDR, "fd00::1".parse().unwrap())
                .u32(endpoint::IFINDEX, 4)
                .u32(endpoint::FLAGS, endpoint_flags::BACKUP)
                .finish(),
        ];
        let mut d = EndpointDump::assemble(
            msgs.iter()
                .map(|m| Attrs::parse(m, endpoint::ATTRS).unwrap()),
        )
        .unwrap();
        d.endpoints[0].ifname = Some("eth1".into());
        assert_eq!(
            endpoints(&d),
            "ADDRESS   DEV   FLAGS\n10.0.1.1  eth1  -\nfd00::1   if4   backup\n"
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(
            v["endpoints"][1],
            serde_json::json!({"addr": "fd00::1", "ifindex": 4, "ifname": null,
                               "backup": true, "flags": 1})
        );

        let buf = AttrWriter::new()
            .u32(params::HEARTBEAT_MS, 1)
            .u32(params::MISS_THRESHOLD, 3)
            .u32(params::EV_PER_PLANE, 4)
            .string(params::CC, "delay")
            .u32(params::USER_TIMEOUT_MS, 0)
            .u32(params::DATA_PER_IDLE_PROBE, 8)
            .u32(params::SYN_RETRY_PCT, 50)
            .finish();
        let p = Params::parse(&Attrs::parse(&buf, params::ATTRS).unwrap()).unwrap();
        assert_eq!(
            params(&p),
            "PARAMETER            VALUE\nheartbeat_ms         1\nmiss_threshold       3\n\
             ev_per_plane         4\ncc                   delay\nuser_timeout_ms      0\n\
             data_per_idle_probe  8\nsyn_retry_pct        50\n"
        );
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"heartbeat_ms": 1, "miss_threshold": 3, "ev_per_plane": 4,
                               "cc": "delay", "user_timeout_ms": 0, "data_per_idle_probe": 8,
                               "syn_retry_pct": 50})
        );
    }

    #[test]
    fn events_as_lines_and_json() {
        use crate::spec::{cmd, endpoint, event as ev, path_state_reason};
        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 0xabc)
            .u32(ev::PATH_ID, 3)
            .u32(ev::OLD_STATE, path_state::ACTIVE)
            .u32(ev::NEW_STATE, path_state::SUSPECT)
            .u32(ev::REASON, path_state_reason::PROBE_TIMEOUT)
            .uint(ev::TIMESTAMP_NS, 1_234_567_890_123)
            .finish();
        let e = Event::parse(cmd::PATH_STATE_CHANGE, &buf, 0).unwrap();
        assert_eq!(
            event(&e),
            "[ 1234.567890] path 3 of 0000000000000abc: active -> suspect (probe_timeout)"
        );
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"event": "path_state_change", "timestamp_ns": 1_234_567_890_123u64,
                               "session_id": "0000000000000abc", "path_id": 3,
                               "old_state": "active", "new_state": "suspect",
                               "reason": "probe_timeout"})
        );

        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 1)
            .uint(ev::COOKIE, 9)
            .u32(ev::ERROR, 110)
            .finish();
        let e = Event::parse(cmd::CONN_CLOSED, &buf, 5_000_000_000).unwrap();
        assert_eq!(
            event(&e),
            "[    5.000000] connection 0000000000000001 failed: Connection timed out (110)"
        );

        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 1)
            .u16(ev::LOCAL_PORT, 5000)
            .addr(ev::REMOTE_ADDR, "fd00::2".parse().unwrap())
            .u16(ev::REMOTE_PORT, 5001)
            .uint(ev::TIMESTAMP_NS, 1)
            .finish();
        let e = Event::parse(cmd::CONN_ESTABLISHED, &buf, 0).unwrap();
        assert_eq!(
            event(&e),
            "[    0.000000] connection 0000000000000001 established: port 5000 <-> [fd00::2]:5001"
        );

        let buf = AttrWriter::new()
            .addr(endpoint::ADDR, "10.0.1.1".parse().unwrap())
            .u32(endpoint::IFINDEX, 3)
            .u32(endpoint::FLAGS, 1)
            .finish();
        let e = Event::parse(cmd::ENDPOINT_ADDED, &buf, 2_000_000).unwrap();
        assert_eq!(
            event(&e),
            "[    0.002000] endpoint added: 10.0.1.1 dev if3 backup"
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "endpoint_added");
        assert_eq!(v["addr"], "10.0.1.1");

        let e = Event::parse(200, &[], 0).unwrap();
        assert_eq!(serde_json::to_value(&e).unwrap()["event"], "unknown");
        let _ = spec::FAMILY_NAME;
    }

    #[test]
    fn path_events_as_lines_and_json() {
        use crate::spec::{cmd, event as ev};
        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 0xabc)
            .uint(ev::COOKIE, 4242)
            .u32(ev::PATH_ID, 5)
            .u32(ev::PLANE, 1)
            .addr(ev::LOCAL_ADDR, "10.0.1.1".parse().unwrap())
            .addr(ev::PATH_REMOTE_ADDR, "10.0.1.2".parse().unwrap())
            .u16(ev::PATH_SPORT, 49157)
            .u16(ev::REMOTE_PORT, 5001)
            .u32(ev::IFINDEX, 3)
            .uint(ev::TIMESTAMP_NS, 1_234_567_890_123)
            .finish();
        let mut e = Event::parse(cmd::PATH_ADDED, &buf, 0).unwrap();
        assert_eq!(
            e,
            Event::PathAdded {
                timestamp_ns: 1_234_567_890_123,
                session_id: Some(crate::model::SessionId(0xabc)),
                cookie: Some(4242),
                path_id: Some(5),
                plane: Some(1),
                local_addr: Some("10.0.1.1".parse().unwrap()),
                remote_addr: Some("10.0.1.2".parse().unwrap()),
                local_port: Some(49157),
                remote_port: Some(5001),
                ifindex: Some(3),
                ifname: None,
            }
        );
        assert_eq!(
            event(&e),
            "[ 1234.567890] path 5 of 0000000000000abc added: plane 1, \
             10.0.1.1:49157 <-> 10.0.1.2:5001 dev if3"
        );
        let (index, name) = e.interface_mut().unwrap();
        assert_eq!(index, Some(3));
        *name = Some("eth1".into());
        assert_eq!(
            event(&e),
            "[ 1234.567890] path 5 of 0000000000000abc added: plane 1, \
             10.0.1.1:49157 <-> 10.0.1.2:5001 dev eth1"
        );
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"event": "path_added", "timestamp_ns": 1_234_567_890_123u64,
                               "session_id": "0000000000000abc", "cookie": 4242,
                               "path_id": 5, "plane": 1, "local_addr": "10.0.1.1",
                               "remote_addr": "10.0.1.2", "local_port": 49157,
                               "remote_port": 5001, "ifindex": 3, "ifname": "eth1"})
        );

        // An IPv6 path that routing places (ifindex 0), without a kernel stamp.
        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 1)
            .uint(ev::COOKIE, 9)
            .u32(ev::PATH_ID, 0)
            .u32(ev::PLANE, 0)
            .addr(ev::LOCAL_ADDR, "fd00::1".parse().unwrap())
            .addr(ev::PATH_REMOTE_ADDR, "fd00::2".parse().unwrap())
            .u16(ev::PATH_SPORT, 49152)
            .u16(ev::REMOTE_PORT, 5001)
            .u32(ev::IFINDEX, 0)
            .finish();
        let e = Event::parse(cmd::PATH_ADDED, &buf, 3_000_000).unwrap();
        assert_eq!(
            event(&e),
            "[    0.003000] path 0 of 0000000000000001 added: plane 0, \
             [fd00::1]:49152 <-> [fd00::2]:5001 dev -"
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["timestamp_ns"], 3_000_000);
        assert_eq!(v["ifindex"], 0);
        assert_eq!(v["ifname"], serde_json::Value::Null);

        let buf = AttrWriter::new()
            .uint(ev::SESSION_ID, 0xabc)
            .uint(ev::COOKIE, 4242)
            .u32(ev::PATH_ID, 5)
            .uint(ev::TIMESTAMP_NS, 1_234_567_890_123)
            .finish();
        let mut e = Event::parse(cmd::PATH_REMOVED, &buf, 0).unwrap();
        assert_eq!(
            e,
            Event::PathRemoved {
                timestamp_ns: 1_234_567_890_123,
                session_id: Some(crate::model::SessionId(0xabc)),
                cookie: Some(4242),
                path_id: Some(5),
            }
        );
        assert!(e.interface_mut().is_none());
        assert_eq!(
            event(&e),
            "[ 1234.567890] path 5 of 0000000000000abc removed"
        );
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"event": "path_removed", "timestamp_ns": 1_234_567_890_123u64,
                               "session_id": "0000000000000abc", "cookie": 4242,
                               "path_id": 5})
        );
    }

    #[test]
    fn units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(duration(999), "999ns");
        assert_eq!(duration(85_000), "85us");
        assert_eq!(duration(1_500_000), "1.50ms");
        assert_eq!(duration(250_000_000), "250.0ms");
        assert_eq!(duration(192_000_000_000), "3m12s");
        assert_eq!(duration(7_500_000_000_000), "2h05m");
        assert_eq!(endpoint(None, Some(1)), "*:1");
        assert_eq!(endpoint(Some("::1".parse().unwrap()), None), "::1");
    }
}
