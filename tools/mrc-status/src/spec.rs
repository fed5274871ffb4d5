// SPDX-License-Identifier: GPL-2.0
//! Values of the generic netlink family `mrc`, mirroring `netlink/mrc.yaml`.
//!
//! Every section keeps, next to its constants, a table of `(spec name, value)`
//! pairs. The unit test at the bottom loads the YAML spec, computes the values
//! the way `ynl-gen-c.py` does and compares them with these tables in both
//! directions, so a change on either side fails the build's tests.

/// Generic netlink family name.
pub const FAMILY_NAME: &str = "mrc";
/// Generic netlink family version.
pub const FAMILY_VERSION: u8 = 1;
/// Multicast group of the notifications.
pub const MCGRP_EVENTS: &str = "events";

/// Entries of one enum or flags definition: spec name and value.
pub type EnumTable = &'static [(&'static str, u32)];

/// Declares the attributes of one attribute set: `NAME = value, "spec-name", "spec-type";`.
macro_rules! attr_set {
    ($(#[$m:meta])* $set:ident = $spec:literal {
        $($name:ident = $val:literal, $aname:literal, $ty:literal;)*
    }) => {
        $(#[$m])*
        pub mod $set {
            $(
                #[doc = concat!("Attribute `", $aname, "` (", $ty, ").")]
                pub const $name: u16 = $val;
            )*
            /// Name of the attribute set in the spec.
            #[cfg(test)]
            pub const SPEC_NAME: &str = $spec;
            /// Every attribute of the set: spec name, value and spec type.
            pub const ATTRS: crate::attr::AttrTable = &[$(($aname, $name, $ty)),*];
        }
    };
}

/// Declares the entries of one enum or flags definition: `NAME = value, "spec-name";`.
macro_rules! spec_enum {
    ($(#[$m:meta])* $set:ident = $spec:literal {
        $($name:ident = $val:literal, $ename:literal;)*
    }) => {
        $(#[$m])*
        pub mod $set {
            $(
                #[doc = concat!("Entry `", $ename, "`.")]
                pub const $name: u32 = $val;
            )*
            /// Name of the definition in the spec.
            #[cfg(test)]
            pub const SPEC_NAME: &str = $spec;
            /// Every entry: spec name and value.
            pub const ENTRIES: super::EnumTable = &[$(($ename, $name)),*];
        }
    };
}

/// Command values (`enum-model: unified`, counted from 1).
pub mod cmd {
    /// Every command and notification: spec name and value.
    #[cfg(test)]
    pub const OPS: &[(&str, u8)] = &[
        ("stats-get", STATS_GET),
        ("conn-get", CONN_GET),
        ("endpoint-add", ENDPOINT_ADD),
        ("endpoint-del", ENDPOINT_DEL),
        ("endpoint-get", ENDPOINT_GET),
        ("param-get", PARAM_GET),
        ("param-set", PARAM_SET),
        ("path-state-change", PATH_STATE_CHANGE),
        ("conn-established", CONN_ESTABLISHED),
        ("conn-closed", CONN_CLOSED),
        ("endpoint-added", ENDPOINT_ADDED),
        ("endpoint-removed", ENDPOINT_REMOVED),
        ("path-added", PATH_ADDED),
        ("path-removed", PATH_REMOVED),
    ];
    /// `stats-get`: the namespace's counters.
    pub const STATS_GET: u8 = 1;
    /// `conn-get`: one connection (do) or all of them (dump).
    pub const CONN_GET: u8 = 2;
    /// `endpoint-add`.
    pub const ENDPOINT_ADD: u8 = 3;
    /// `endpoint-del`.
    pub const ENDPOINT_DEL: u8 = 4;
    /// `endpoint-get` (dump).
    pub const ENDPOINT_GET: u8 = 5;
    /// `param-get`.
    pub const PARAM_GET: u8 = 6;
    /// `param-set`.
    pub const PARAM_SET: u8 = 7;
    /// Notification `path-state-change`.
    pub const PATH_STATE_CHANGE: u8 = 8;
    /// Notification `conn-established`.
    pub const CONN_ESTABLISHED: u8 = 9;
    /// Notification `conn-closed`.
    pub const CONN_CLOSED: u8 = 10;
    /// Notification `endpoint-added`.
    pub const ENDPOINT_ADDED: u8 = 11;
    /// Notification `endpoint-removed`.
    pub const ENDPOINT_REMOVED: u8 = 12;
    /// Notification `path-added`.
    pub const PATH_ADDED: u8 = 13;
    /// Notification `path-removed`.
    pub const PATH_REMOVED: u8 = 14;
}

spec_enum!(
    /// Definition `path-state`.
    path_state = "path-state" {
        ACTIVE = 0, "active";
        SUSPECT = 1, "suspect";
        FAILED = 2, "failed";
    }
);

spec_enum!(
    /// Definition `path-state-reason`.
    path_state_reason = "path-state-reason" {
        UNSPEC = 0, "unspec";
        LOSS_BURST = 1, "loss-burst";
        PROBE_TIMEOUT = 2, "probe-timeout";
        PROBE_ANSWERED = 3, "probe-answered";
        LOCAL_DOWN = 4, "local-down";
        UNVALIDATED = 5, "unvalidated";
    }
);

spec_enum!(
    /// Definition `conn-state`.
    conn_state = "conn-state" {
        IDLE = 0, "idle";
        SYN_SENT = 1, "syn-sent";
        SYN_RECEIVED = 2, "syn-received";
        ESTABLISHED = 3, "established";
        FIN_WAIT = 4, "fin-wait";
        CLOSE_WAIT = 5, "close-wait";
        CLOSING = 6, "closing";
        TIME_WAIT = 7, "time-wait";
        CLOSED = 8, "closed";
    }
);

spec_enum!(
    /// Definition `endpoint-flags` (bit values).
    endpoint_flags = "endpoint-flags" {
        BACKUP = 1, "backup";
    }
);

attr_set!(
    /// Attribute set `drops`: one counter per drop reason.
    drops = "drops" {
        SHORT = 1, "short", "uint";
        BAD_MAGIC = 2, "bad-magic", "uint";
        BAD_VERSION = 3, "bad-version", "uint";
        LENGTH_MISMATCH = 4, "length-mismatch", "uint";
        BAD_CHECKSUM = 5, "bad-checksum", "uint";
        UNKNOWN_TYPE = 6, "unknown-type", "uint";
        BAD_FLAGS = 7, "bad-flags", "uint";
        BAD_SACK = 8, "bad-sack", "uint";
        BAD_HANDSHAKE = 9, "bad-handshake", "uint";
        BAD_BODY = 10, "bad-body", "uint";
        NO_SESSION = 11, "no-session", "uint";
        NO_MEMORY = 12, "no-memory", "uint";
        WRONG_SOURCE = 13, "wrong-source", "uint";
        RCVBUF = 14, "rcvbuf", "uint";
        RMEM_MAX = 15, "rmem-max", "uint";
        UDP_CHECKSUM = 16, "udp-checksum", "uint";
        SOCK_BACKLOG = 17, "sock-backlog", "uint";
        BAD_TOKEN = 18, "bad-token", "uint";
    }
);

attr_set!(
    /// Attribute set `stats`.
    stats = "stats" {
        RX_PACKETS = 1, "rx-packets", "uint";
        RX_BYTES = 2, "rx-bytes", "uint";
        TX_PACKETS = 3, "tx-packets", "uint";
        TX_BYTES = 4, "tx-bytes", "uint";
        RETRANS_PACKETS = 5, "retrans-packets", "uint";
        CONNS = 6, "conns", "u32";
        CONNS_OPENED = 7, "conns-opened", "uint";
        CONNS_FAILED = 8, "conns-failed", "uint";
        DROPS = 9, "drops", "nest";
        ECN_CE_PACKETS = 10, "ecn-ce-packets", "uint";
        ECN_ECHOES = 11, "ecn-echoes", "uint";
        TX_RETRY = 12, "tx-retry", "uint";
        TX_RST = 13, "tx-rst", "uint";
        TX_RST_LIMITED = 14, "tx-rst-limited", "uint";
        TX_AMP_LIMITED = 15, "tx-amp-limited", "uint";
    }
);

attr_set!(
    /// Attribute set `path`.
    path = "path" {
        ID = 1, "id", "u32";
        PLANE = 2, "plane", "u8";
        EV = 3, "ev", "u16";
        LOCAL_ADDR = 4, "local-addr", "binary";
        LOCAL_PORT = 5, "local-port", "u16";
        REMOTE_ADDR = 6, "remote-addr", "binary";
        REMOTE_PORT = 7, "remote-port", "u16";
        IFINDEX = 8, "ifindex", "u32";
        STATE = 9, "state", "u32";
        BACKUP = 10, "backup", "flag";
        TIME_IN_STATE_NS = 11, "time-in-state-ns", "uint";
        SRTT_NS = 12, "srtt-ns", "uint";
        RTTVAR_NS = 13, "rttvar-ns", "uint";
        MIN_RTT_NS = 14, "min-rtt-ns", "uint";
        CWND = 15, "cwnd", "u32";
        IN_FLIGHT = 16, "in-flight", "uint";
        BYTES_SENT = 17, "bytes-sent", "uint";
        BYTES_ACKED = 18, "bytes-acked", "uint";
        BYTES_LOST = 19, "bytes-lost", "uint";
        BYTES_RETRANS = 20, "bytes-retrans", "uint";
        PACKETS_SENT = 21, "packets-sent", "uint";
        PACKETS_ACKED = 22, "packets-acked", "uint";
        PACKETS_LOST = 23, "packets-lost", "uint";
        PACKETS_RETRANS = 24, "packets-retrans", "uint";
        PROBES_SENT = 25, "probes-sent", "uint";
        PROBES_MISSED = 26, "probes-missed", "uint";
    }
);

attr_set!(
    /// Attribute set `conn-counters`.
    conn_counters = "conn-counters" {
        DATA_SENT = 1, "data-sent", "uint";
        RETRANSMITS = 2, "retransmits", "uint";
        RACK_LOSSES = 3, "rack-losses", "uint";
        SPURIOUS_LOSSES = 4, "spurious-losses", "uint";
        RTO_LOSSES = 5, "rto-losses", "uint";
        PATH_LOSSES = 6, "path-losses", "uint";
        RTOS = 7, "rtos", "uint";
        HEDGES = 8, "hedges", "uint";
        SPURIOUS_HEDGES = 9, "spurious-hedges", "uint";
        WINDOW_PROBES = 10, "window-probes", "uint";
        DATA_RECEIVED = 11, "data-received", "uint";
        DUPLICATES = 12, "duplicates", "uint";
        RCV_DROPPED = 13, "rcv-dropped", "uint";
        ACKS_SENT = 14, "acks-sent", "uint";
        ACKS_RECEIVED = 15, "acks-received", "uint";
        CHALLENGE_ACKS = 16, "challenge-acks", "uint";
        ENDPOINTS_REFUSED = 17, "endpoints-refused", "uint";
        AMP_LIMITED = 18, "amp-limited", "uint";
        ACKS_LIMITED = 19, "acks-limited", "uint";
    }
);

attr_set!(
    /// Attribute set `send-time`: nanoseconds the sender spent held back by
    /// each limit.
    send_time = "send-time" {
        APP = 1, "app", "uint";
        RWND = 2, "rwnd", "uint";
        RING = 3, "ring", "uint";
        CWND = 4, "cwnd", "uint";
        PACING = 5, "pacing", "uint";
        SCHED = 6, "sched", "uint";
        NO_PATH = 7, "no-path", "uint";
        SENDING = 8, "sending", "uint";
    }
);

attr_set!(
    /// Attribute set `conn`.
    conn = "conn" {
        GENERATION = 1, "generation", "u32";
        SESSION_ID = 2, "session-id", "uint";
        COOKIE = 3, "cookie", "uint";
        STATE = 4, "state", "u32";
        LOCAL_ADDR = 5, "local-addr", "binary";
        LOCAL_PORT = 6, "local-port", "u16";
        REMOTE_ADDR = 7, "remote-addr", "binary";
        REMOTE_PORT = 8, "remote-port", "u16";
        CC = 9, "cc", "string";
        TIME_IN_STATE_NS = 10, "time-in-state-ns", "uint";
        TX_BYTES = 11, "tx-bytes", "uint";
        RX_BYTES = 12, "rx-bytes", "uint";
        ERROR = 13, "error", "u32";
        PATH = 14, "path", "nest";
        COUNTERS = 15, "counters", "nest";
        SEND_TIME = 16, "send-time", "nest";
    }
);

attr_set!(
    /// Attribute set `endpoint`.
    endpoint = "endpoint" {
        GENERATION = 1, "generation", "u32";
        ADDR = 2, "addr", "binary";
        IFINDEX = 3, "ifindex", "u32";
        FLAGS = 4, "flags", "u32";
    }
);

attr_set!(
    /// Attribute set `params`.
    params = "params" {
        HEARTBEAT_MS = 1, "heartbeat-ms", "u32";
        MISS_THRESHOLD = 2, "miss-threshold", "u32";
        EV_PER_PLANE = 3, "ev-per-plane", "u32";
        CC = 4, "cc", "string";
        USER_TIMEOUT_MS = 5, "user-timeout-ms", "u32";
        DATA_PER_IDLE_PROBE = 6, "data-per-idle-probe", "u32";
        SYN_RETRY_PCT = 7, "syn-retry-pct", "u32";
    }
);

attr_set!(
    /// Attribute set `event`.
    event = "event" {
        SESSION_ID = 1, "session-id", "uint";
        COOKIE = 2, "cookie", "uint";
        PATH_ID = 3, "path-id", "u32";
        OLD_STATE = 4, "old-state", "u32";
        NEW_STATE = 5, "new-state", "u32";
        REASON = 6, "reason", "u32";
        TIMESTAMP_NS = 7, "timestamp-ns", "uint";
        REMOTE_ADDR = 8, "remote-addr", "binary";
        REMOTE_PORT = 9, "remote-port", "u16";
        LOCAL_PORT = 10, "local-port", "u16";
        ERROR = 11, "error", "u32";
        LOCAL_ADDR = 12, "local-addr", "binary";
        PATH_REMOTE_ADDR = 13, "path-remote-addr", "binary";
        PATH_SPORT = 14, "path-sport", "u16";
        PLANE = 15, "plane", "u32";
        IFINDEX = 16, "ifindex", "u32";
    }
);

/// Every attribute set: spec name and attributes.
#[cfg(test)]
pub const ATTR_SETS: &[(&str, crate::attr::AttrTable)] = &[
    (drops::SPEC_NAME, drops::ATTRS),
    (stats::SPEC_NAME, stats::ATTRS),
    (path::SPEC_NAME, path::ATTRS),
    (conn_counters::SPEC_NAME, conn_counters::ATTRS),
    (send_time::SPEC_NAME, send_time::ATTRS),
    (conn::SPEC_NAME, conn::ATTRS),
    (endpoint::SPEC_NAME, endpoint::ATTRS),
    (params::SPEC_NAME, params::ATTRS),
    (event::SPEC_NAME, event::ATTRS),
];

/// Every enum and flags definition: spec name, type and entries.
#[cfg(test)]
pub const DEFINITIONS: &[(&str, &str, EnumTable)] = &[
    (path_state::SPEC_NAME, "enum", path_state::ENTRIES),
    (
        path_state_reason::SPEC_NAME,
        "enum",
        path_state_reason::ENTRIES,
    ),
    (conn_state::SPEC_NAME, "enum", conn_state::ENTRIES),
    (endpoint_flags::SPEC_NAME, "flags", endpoint_flags::ENTRIES),
];

/// Returns the stable output name of an enum entry or attribute: the spec name
/// with `-` turned into `_`, or `unknown_<value>` for a value this build does
/// not know (a newer kernel).
pub fn output_name<V: Copy + PartialEq + std::fmt::Display>(
    entries: &[(&str, V)],
    value: V,
) -> String {
    match entries.iter().find(|(_, v)| *v == value) {
        Some((name, _)) => name.replace('-', "_"),
        None => format!("unknown_{value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use yaml_rust2::{Yaml, YamlLoader};

    fn load_spec() -> Yaml {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../netlink/mrc.yaml");
        let text = std::fs::read_to_string(path).expect("netlink/mrc.yaml is readable");
        YamlLoader::load_from_str(&text)
            .expect("netlink/mrc.yaml is valid YAML")
            .remove(0)
    }

    fn list(y: &Yaml) -> &[Yaml] {
        y.as_vec().map(Vec::as_slice).unwrap_or(&[])
    }

    fn str_of<'a>(y: &'a Yaml, key: &str) -> &'a str {
        y[key]
            .as_str()
            .unwrap_or_else(|| panic!("missing {key}: {y:?}"))
    }

    fn int_of(y: &Yaml, key: &str) -> Option<i64> {
        y[key].as_i64()
    }

    /// Attribute values: from 1, or from an explicit `value`, then counting up.
    fn spec_attr_sets(spec: &Yaml) -> BTreeMap<String, Vec<(String, i64, String)>> {
        let mut sets = BTreeMap::new();
        for set in list(&spec["attribute-sets"]) {
            assert!(set["subset-of"].is_badvalue(), "subsets are not mirrored");
            let mut val = 1;
            let mut attrs = Vec::new();
            for attr in list(&set["attributes"]) {
                if let Some(v) = int_of(attr, "value") {
                    val = v;
                }
                attrs.push((
                    str_of(attr, "name").to_string(),
                    val,
                    str_of(attr, "type").to_string(),
                ));
                val += 1;
            }
            sets.insert(str_of(set, "name").to_string(), attrs);
        }
        sets
    }

    /// Enum values count from `value-start` (default 0); flags are bits from bit 0.
    fn spec_definitions(spec: &Yaml) -> BTreeMap<String, (String, Vec<(String, i64)>)> {
        let mut defs = BTreeMap::new();
        for def in list(&spec["definitions"]) {
            let kind = str_of(def, "type");
            if kind == "const" {
                continue;
            }
            let mut val = int_of(def, "value-start").unwrap_or(0);
            let mut entries = Vec::new();
            for entry in list(&def["entries"]) {
                let name = entry
                    .as_str()
                    .unwrap_or_else(|| str_of(entry, "name"))
                    .to_string();
                if let Some(v) = int_of(entry, "value") {
                    val = v;
                }
                let value = if kind == "flags" { 1 << val } else { val };
                entries.push((name, value));
                val += 1;
            }
            defs.insert(str_of(def, "name").to_string(), (kind.to_string(), entries));
        }
        defs
    }

    #[test]
    fn family_matches_spec() {
        let spec = load_spec();
        assert_eq!(str_of(&spec, "name"), FAMILY_NAME);
        assert_eq!(
            int_of(&spec, "version").unwrap_or(1),
            i64::from(FAMILY_VERSION)
        );
        let groups: Vec<&str> = list(&spec["mcast-groups"]["list"])
            .iter()
            .map(|g| str_of(g, "name"))
            .collect();
        assert_eq!(groups, [MCGRP_EVENTS]);
    }

    #[test]
    fn attribute_sets_match_spec() {
        let spec = spec_attr_sets(&load_spec());
        let ours: BTreeMap<String, Vec<(String, i64, String)>> = ATTR_SETS
            .iter()
            .map(|(set, attrs)| {
                let attrs = attrs
                    .iter()
                    .map(|(n, v, t)| (n.to_string(), i64::from(*v), t.to_string()))
                    .collect();
                (set.to_string(), attrs)
            })
            .collect();
        assert_eq!(ours, spec);
    }

    #[test]
    fn definitions_match_spec() {
        let spec = spec_definitions(&load_spec());
        let ours: BTreeMap<String, (String, Vec<(String, i64)>)> = DEFINITIONS
            .iter()
            .map(|(name, kind, entries)| {
                let entries = entries
                    .iter()
                    .map(|(n, v)| (n.to_string(), i64::from(*v)))
                    .collect();
                (name.to_string(), (kind.to_string(), entries))
            })
            .collect();
        assert_eq!(ours, spec);
    }

    #[test]
    fn operations_match_spec() {
        let spec = load_spec();
        assert!(
            spec["operations"]["enum-model"].is_badvalue(),
            "only the unified model is mirrored"
        );
        let mut val = 1;
        let mut ops = Vec::new();
        for op in list(&spec["operations"]["list"]) {
            if let Some(v) = int_of(op, "value") {
                val = v;
            }
            ops.push((str_of(op, "name").to_string(), val));
            val += 1;
        }
        let ours: Vec<(String, i64)> = cmd::OPS
            .iter()
            .map(|(n, v)| (n.to_string(), i64::from(*v)))
            .collect();
        assert_eq!(ours, ops);
    }

    #[test]
    fn attributes_used_by_enums_name_real_definitions() {
        let spec = load_spec();
        let defs = spec_definitions(&spec);
        for set in list(&spec["attribute-sets"]) {
            for attr in list(&set["attributes"]) {
                if let Some(e) = attr["enum"].as_str() {
                    assert!(defs.contains_key(e), "unknown enum {e}");
                }
                if let Some(n) = attr["nested-attributes"].as_str() {
                    assert!(ATTR_SETS.iter().any(|(s, _)| *s == n), "unknown set {n}");
                }
            }
        }
    }

    #[test]
    fn output_names() {
        assert_eq!(
            output_name(conn_state::ENTRIES, conn_state::SYN_SENT),
            "syn_sent"
        );
        assert_eq!(output_name(path_state::ENTRIES, 9), "unknown_9");
    }
}
