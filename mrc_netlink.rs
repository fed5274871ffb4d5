// SPDX-License-Identifier: GPL-2.0

//! Generic netlink requests of the `mrc` family (`netlink/mrc.yaml`) that
//! concern a namespace: its counters, tunables and endpoints, and the dump
//! of its connections (each connection's attributes come from
//! `mrc_sock::fill_conn`). A child of `mrc_net`, whose state it reads.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{c_str, prelude::*};

use super::{cc_index, Endpoint, MrcNet, SessionKey};
use crate::mrc_cc::CcKind;
use crate::mrc_proto::DecodeError;
use crate::mrc_sock;
use crate::mrc_sys::{self, err, nl, Counter, GenlDump, GenlInfo, GenlMsg, IpAddr};

/// Netlink attribute of each decoder drop reason, in `DecodeError::ALL` order.
const DROP_ATTRS: [u32; DecodeError::COUNT] = [
    nl::MRC_A_DROPS_SHORT,
    nl::MRC_A_DROPS_BAD_MAGIC,
    nl::MRC_A_DROPS_BAD_VERSION,
    nl::MRC_A_DROPS_LENGTH_MISMATCH,
    nl::MRC_A_DROPS_BAD_CHECKSUM,
    nl::MRC_A_DROPS_UNKNOWN_TYPE,
    nl::MRC_A_DROPS_BAD_FLAGS,
    nl::MRC_A_DROPS_BAD_SACK,
    nl::MRC_A_DROPS_BAD_HANDSHAKE,
    nl::MRC_A_DROPS_BAD_BODY,
];

/// `stats-get`: the counters of the requester's namespace.
pub(crate) fn genl_stats_get(info: &GenlInfo) -> Result {
    let s = &info.mrc_net().stats;
    let get = |c: &Counter| c.total();
    info.reply(nl::MRC_CMD_STATS_GET, |m| {
        m.put_uint(nl::MRC_A_STATS_RX_PACKETS, get(&s.rx_packets))?;
        m.put_uint(nl::MRC_A_STATS_RX_BYTES, get(&s.rx_bytes))?;
        m.put_uint(nl::MRC_A_STATS_TX_PACKETS, get(&s.tx_packets))?;
        m.put_uint(nl::MRC_A_STATS_TX_BYTES, get(&s.tx_bytes))?;
        m.put_uint(nl::MRC_A_STATS_RETRANS_PACKETS, get(&s.tx_retransmits))?;
        m.put_u32(
            nl::MRC_A_STATS_CONNS,
            u32::try_from(info.mrc_net().session_count()).unwrap_or(u32::MAX),
        )?;
        m.put_uint(nl::MRC_A_STATS_CONNS_OPENED, get(&s.conns_opened))?;
        m.put_uint(nl::MRC_A_STATS_CONNS_FAILED, get(&s.conns_failed))?;
        m.put_uint(nl::MRC_A_STATS_ECN_CE_PACKETS, get(&s.ecn_ce_packets))?;
        m.put_uint(nl::MRC_A_STATS_ECN_ECHOES, get(&s.ecn_echoes))?;
        m.put_uint(nl::MRC_A_STATS_TX_RETRY, get(&s.tx_retry))?;
        m.put_uint(nl::MRC_A_STATS_TX_RST, get(&s.tx_rst))?;
        m.put_uint(nl::MRC_A_STATS_TX_RST_LIMITED, get(&s.tx_rst_limited))?;
        m.put_uint(nl::MRC_A_STATS_TX_AMP_LIMITED, get(&s.tx_amp_limited))?;
        m.nest(nl::MRC_A_STATS_DROPS, |m| {
            for (i, attr) in DROP_ATTRS.iter().enumerate() {
                m.put_uint(*attr, s.drop_decode.sum(i))?;
            }
            m.put_uint(nl::MRC_A_DROPS_NO_SESSION, get(&s.drop_no_session))?;
            m.put_uint(nl::MRC_A_DROPS_NO_MEMORY, get(&s.drop_no_memory))?;
            m.put_uint(nl::MRC_A_DROPS_WRONG_SOURCE, get(&s.drop_wrong_source))?;
            m.put_uint(nl::MRC_A_DROPS_RCVBUF, get(&s.drop_rcvbuf))?;
            m.put_uint(nl::MRC_A_DROPS_RMEM_MAX, get(&s.drop_rmem_max))?;
            m.put_uint(nl::MRC_A_DROPS_UDP_CHECKSUM, get(&s.drop_udp_checksum))?;
            m.put_uint(nl::MRC_A_DROPS_SOCK_BACKLOG, get(&s.drop_sock_backlog))?;
            m.put_uint(nl::MRC_A_DROPS_BAD_TOKEN, get(&s.drop_bad_token))
        })
    })
}

/// `param-get`: the tunables of the requester's namespace.
pub(crate) fn genl_param_get(info: &GenlInfo) -> Result {
    let p = &info.mrc_net().params;
    let get = |c: &AtomicU32| c.load(Ordering::Relaxed);
    info.reply(nl::MRC_CMD_PARAM_GET, |m| {
        m.put_u32(nl::MRC_A_PARAMS_HEARTBEAT_MS, get(&p.heartbeat_ms))?;
        m.put_u32(nl::MRC_A_PARAMS_MISS_THRESHOLD, get(&p.miss_threshold))?;
        m.put_u32(nl::MRC_A_PARAMS_EV_PER_PLANE, get(&p.ev_per_plane))?;
        let cc = match p.cc() {
            CcKind::Delay => c_str!("delay"),
            CcKind::Reno => c_str!("reno"),
        };
        m.put_str(nl::MRC_A_PARAMS_CC, cc)?;
        m.put_u32(nl::MRC_A_PARAMS_USER_TIMEOUT_MS, get(&p.user_timeout_ms))?;
        m.put_u32(
            nl::MRC_A_PARAMS_DATA_PER_IDLE_PROBE,
            get(&p.data_per_idle_probe),
        )?;
        m.put_u32(nl::MRC_A_PARAMS_SYN_RETRY_PCT, get(&p.syn_retry_pct))
    })
}

/// `param-set`: changes the given tunables; the policy has checked ranges.
/// Nothing changes unless every given value is valid.
pub(crate) fn genl_param_set(info: &GenlInfo) -> Result {
    let p = &info.mrc_net().params;
    let cc = match info.attr(nl::MRC_A_PARAMS_CC) {
        None => None,
        Some(raw) => {
            let name = raw.split(|b| *b == 0).next().unwrap_or(&[]);
            let kind = core::str::from_utf8(name).ok().and_then(CcKind::from_name);
            if kind.is_none() {
                info.set_bad_attr(
                    nl::MRC_A_PARAMS_CC,
                    c_str!("unknown congestion control: use delay or reno"),
                );
                return Err(EINVAL);
            }
            kind
        }
    };
    let fields = [
        (nl::MRC_A_PARAMS_HEARTBEAT_MS, &p.heartbeat_ms),
        (nl::MRC_A_PARAMS_MISS_THRESHOLD, &p.miss_threshold),
        (nl::MRC_A_PARAMS_EV_PER_PLANE, &p.ev_per_plane),
        (nl::MRC_A_PARAMS_USER_TIMEOUT_MS, &p.user_timeout_ms),
        (nl::MRC_A_PARAMS_DATA_PER_IDLE_PROBE, &p.data_per_idle_probe),
        (nl::MRC_A_PARAMS_SYN_RETRY_PCT, &p.syn_retry_pct),
    ];
    for (attr, field) in fields {
        if let Some(v) = info.attr_u32(attr) {
            field.store(v, Ordering::Relaxed);
        }
    }
    if let Some(kind) = cc {
        p.cc.store(cc_index(kind), Ordering::Relaxed);
    }
    Ok(())
}

/// Parses the endpoint address attribute (4 or 16 bytes) of a request.
fn endpoint_addr(info: &GenlInfo) -> Result<IpAddr> {
    let Some(raw) = info.attr(nl::MRC_A_ENDPOINT_ADDR) else {
        info.set_err_msg(c_str!("missing endpoint address"));
        return Err(EINVAL);
    };
    if let Ok(v4) = <[u8; 4]>::try_from(raw) {
        Ok(IpAddr::V4(v4))
    } else if let Ok(v6) = <[u8; 16]>::try_from(raw) {
        Ok(IpAddr::V6(v6))
    } else {
        info.set_bad_attr(
            nl::MRC_A_ENDPOINT_ADDR,
            c_str!("endpoint address must be 4 (IPv4) or 16 (IPv6) bytes"),
        );
        Err(EINVAL)
    }
}

/// `endpoint-add`: offers a local address to new connections.
pub(crate) fn genl_endpoint_add(info: &GenlInfo) -> Result {
    let ep = Endpoint {
        addr: endpoint_addr(info)?,
        ifindex: info.attr_u32(nl::MRC_A_ENDPOINT_IFINDEX).unwrap_or(0),
        flags: info.attr_u32(nl::MRC_A_ENDPOINT_FLAGS).unwrap_or(0) & nl::MRC_ENDPOINT_FLAGS_BACKUP,
    };
    let mut table = info.mrc_net().endpoints.lock();
    if table.slots.iter().flatten().any(|e| e.addr == ep.addr) {
        info.set_bad_attr(nl::MRC_A_ENDPOINT_ADDR, c_str!("endpoint already exists"));
        return Err(EEXIST);
    }
    let Some(free) = table.slots.iter_mut().find(|s| s.is_none()) else {
        info.set_err_msg(c_str!("endpoint table full (16 endpoints)"));
        return Err(ENOSPC);
    };
    *free = Some(ep);
    table.generation = table.generation.wrapping_add(1);
    let generation = table.generation;
    drop(table);
    info.notify(nl::MRC_CMD_ENDPOINT_ADDED, |m| {
        endpoint_attrs(m, &ep, generation)
    });
    Ok(())
}

/// `endpoint-del`: withdraws a local address from new connections.
pub(crate) fn genl_endpoint_del(info: &GenlInfo) -> Result {
    let addr = endpoint_addr(info)?;
    let ifindex = info.attr_u32(nl::MRC_A_ENDPOINT_IFINDEX);
    let mut table = info.mrc_net().endpoints.lock();
    let Some(slot) = table
        .slots
        .iter_mut()
        .find(|s| s.is_some_and(|e| e.addr == addr && ifindex.map_or(true, |i| i == e.ifindex)))
    else {
        info.set_bad_attr(nl::MRC_A_ENDPOINT_ADDR, c_str!("no such endpoint"));
        return Err(ENOENT);
    };
    let Some(ep) = slot.take() else {
        return Err(ENOENT);
    };
    table.generation = table.generation.wrapping_add(1);
    let generation = table.generation;
    drop(table);
    info.notify(nl::MRC_CMD_ENDPOINT_REMOVED, |m| {
        endpoint_attrs(m, &ep, generation)
    });
    Ok(())
}

/// `endpoint-get` dump: one message per endpoint, resumable by slot index.
pub(crate) fn genl_endpoint_dump(net: &MrcNet, dump: &mut GenlDump) -> Result {
    let table = net.endpoints.lock();
    let generation = table.generation;
    dump.set_generation(generation);
    let mut pos = dump.cursor(0) as usize;
    while let Some(slot) = table.slots.get(pos) {
        if let Some(ep) = slot {
            let added = dump.entry(nl::MRC_CMD_ENDPOINT_GET, |m| {
                endpoint_attrs(m, ep, generation)
            })?;
            if !added {
                break;
            }
        }
        pos += 1;
    }
    dump.set_cursor(0, pos as u64);
    Ok(())
}

/// The attributes of one endpoint (dump entries and events).
fn endpoint_attrs(m: &mut GenlMsg, ep: &Endpoint, generation: u32) -> Result {
    m.put_u32(nl::MRC_A_ENDPOINT_GENERATION, generation)?;
    m.put_ip(nl::MRC_A_ENDPOINT_ADDR, &ep.addr)?;
    m.put_u32(nl::MRC_A_ENDPOINT_IFINDEX, ep.ifindex)?;
    m.put_u32(nl::MRC_A_ENDPOINT_FLAGS, ep.flags)
}

/// Connections a dump takes from the table at a time.
const DUMP_BATCH: usize = 32;

/// The key right after `k` in the table's order; `None` after the last.
fn key_after(k: SessionKey) -> Option<SessionKey> {
    match k {
        (sid, false) => Some((sid, true)),
        (sid, true) => sid.checked_add(1).map(|n| (n, false)),
    }
}

/// Where a `conn-get` dump resumes, kept in the dump's cursor words: the
/// key of the next connection to send and the first of its paths still to
/// send. A key, not a position, so that connections opening or closing
/// between two parts of the dump neither hide nor repeat the others; the
/// generation still marks such a dump as torn.
#[derive(Clone, Copy)]
enum ConnCursor {
    Start,
    At(SessionKey, usize),
    End,
}

impl ConnCursor {
    const SID: usize = 0;
    const FLAGS: usize = 1;
    const PATH: usize = 2;
    const F_AT: u64 = 1;
    const F_PASSIVE: u64 = 2;
    const F_END: u64 = 4;

    fn load(dump: &GenlDump) -> Self {
        let flags = dump.cursor(Self::FLAGS);
        if flags & Self::F_END != 0 {
            ConnCursor::End
        } else if flags & Self::F_AT != 0 {
            let key = (dump.cursor(Self::SID), flags & Self::F_PASSIVE != 0);
            ConnCursor::At(key, dump.cursor(Self::PATH) as usize)
        } else {
            ConnCursor::Start
        }
    }

    fn save(self, dump: &mut GenlDump) {
        let (sid, flags, path) = match self {
            ConnCursor::Start => (0, 0, 0),
            ConnCursor::At((sid, passive), path) => {
                let p = if passive { Self::F_PASSIVE } else { 0 };
                (sid, Self::F_AT | p, path as u64)
            }
            ConnCursor::End => (0, Self::F_END, 0),
        };
        dump.set_cursor(Self::SID, sid);
        dump.set_cursor(Self::FLAGS, flags);
        dump.set_cursor(Self::PATH, path);
    }
}

/// `conn-get` dump: every connection with its paths. A connection whose
/// paths do not fit in one message continues in the next.
pub(crate) fn genl_conn_dump(net: &MrcNet, dump: &mut GenlDump) -> Result {
    let (mut start, mut resume) = match ConnCursor::load(dump) {
        ConnCursor::Start => (None, None),
        ConnCursor::At(k, path) => (Some(k), Some((k, path))),
        ConnCursor::End => return Ok(()),
    };
    let admin = dump.net_admin();
    loop {
        let (batch, generation) = net.sessions_from(start, DUMP_BATCH)?;
        dump.set_generation(generation);
        let Some(&(last, _)) = batch.last() else {
            break;
        };
        for (key, sk) in batch.iter() {
            // The saved connection's remaining paths, or all of any other
            // (the saved one closed meanwhile).
            let path = match resume.take() {
                Some((k, p)) if k == *key => p,
                _ => 0,
            };
            let mut next = None;
            let added = dump.entry(nl::MRC_CMD_CONN_GET, |m| {
                next = mrc_sock::fill_conn(sk, m, generation, path, path == 0, admin)?;
                Ok(())
            });
            let stop_at = match added {
                Ok(true) => next,
                Ok(false) if dump.is_empty() => return Err(err::message_too_long()),
                Ok(false) => Some(path),
                // Closed since the batch was taken: nothing to show.
                Err(e) if e == ENOENT => None,
                Err(e) => return Err(e),
            };
            if let Some(p) = stop_at {
                ConnCursor::At(*key, p).save(dump);
                return Ok(());
            }
        }
        match key_after(last) {
            Some(k) => start = Some(k),
            None => break,
        }
    }
    ConnCursor::End.save(dump);
    Ok(())
}

/// `conn-get` do: one connection, by session id or socket cookie.
pub(crate) fn genl_conn_get(info: &GenlInfo) -> Result {
    let net = info.mrc_net();
    let sid = info.attr_uint(nl::MRC_A_CONN_SESSION_ID);
    let cookie = info.attr_uint(nl::MRC_A_CONN_COOKIE);
    if sid.is_some() == cookie.is_some() {
        info.set_err_msg(c_str!("give exactly one of session-id and cookie"));
        return Err(EINVAL);
    }
    let mut start = None;
    let found = 'search: loop {
        let (batch, generation) = net.sessions_from(start, DUMP_BATCH)?;
        let Some(&(last, _)) = batch.last() else {
            break None;
        };
        for (_, sk) in batch.iter() {
            if let Some((s, c)) = mrc_sock::ids(sk) {
                if sid == Some(s) || cookie == Some(c) {
                    break 'search Some((sk.clone(), generation));
                }
            }
        }
        match key_after(last) {
            Some(k) => start = Some(k),
            None => break None,
        }
    };
    let Some((sk, generation)) = found else {
        let attr = if sid.is_some() {
            nl::MRC_A_CONN_SESSION_ID
        } else {
            nl::MRC_A_CONN_COOKIE
        };
        info.set_bad_attr(attr, c_str!("no such connection"));
        return Err(ENOENT);
    };
    info.reply(nl::MRC_CMD_CONN_GET, |m| {
        match mrc_sock::fill_conn(&sk, m, generation, 0, true, info.net_admin())? {
            None => Ok(()),
            // Too many paths for one message; a dump splits them.
            Some(_) => {
                info.set_err_msg(c_str!("too many paths for one message; dump conn-get"));
                Err(mrc_sys::err::message_too_long())
            }
        }
    })
}
