// SPDX-License-Identifier: GPL-2.0

//! What `AF_MRC` sockets tell the generic netlink family: a connection's
//! attributes, counters and paths for `conn-get`, and the attributes of the
//! events a connection sends. Part of `mrc_sock`, whose state it reads.

use kernel::prelude::*;

use super::Sock;
use crate::mrc_conn::{ConnStats, SendLimit, State};
use crate::mrc_path::PathState;
use crate::mrc_sys::{self, nl, GenlMsg, MrcAddr};

/// Netlink value of a path state.
pub(super) fn path_state(s: PathState) -> u32 {
    match s {
        PathState::Active => nl::MRC_PATH_STATE_ACTIVE,
        PathState::Suspect => nl::MRC_PATH_STATE_SUSPECT,
        PathState::Failed => nl::MRC_PATH_STATE_FAILED,
    }
}

/// Netlink value of a connection state.
fn conn_state(s: State) -> u32 {
    match s {
        State::Idle => nl::MRC_CONN_STATE_IDLE,
        State::SynSent => nl::MRC_CONN_STATE_SYN_SENT,
        State::SynReceived => nl::MRC_CONN_STATE_SYN_RECEIVED,
        State::Established => nl::MRC_CONN_STATE_ESTABLISHED,
        State::FinWait => nl::MRC_CONN_STATE_FIN_WAIT,
        State::CloseWait => nl::MRC_CONN_STATE_CLOSE_WAIT,
        State::Closing => nl::MRC_CONN_STATE_CLOSING,
        State::TimeWait => nl::MRC_CONN_STATE_TIME_WAIT,
        State::Closed(_) => nl::MRC_CONN_STATE_CLOSED,
    }
}

/// The attributes of a connection-established or -closed event.
pub(super) fn conn_event(
    m: &mut GenlMsg,
    sk: &Sock,
    sid: u64,
    local: &Option<MrcAddr>,
    peer: &Option<MrcAddr>,
    errno: u32,
) -> Result {
    m.put_uint(nl::MRC_A_EVENT_SESSION_ID, sid)?;
    m.put_uint(nl::MRC_A_EVENT_COOKIE, sk.cookie())?;
    if let Some(p) = peer {
        m.put_ip(nl::MRC_A_EVENT_REMOTE_ADDR, &p.ip)?;
        m.put_u16(nl::MRC_A_EVENT_REMOTE_PORT, p.port)?;
    }
    if let Some(l) = local {
        m.put_u16(nl::MRC_A_EVENT_LOCAL_PORT, l.port)?;
    }
    m.put_u32(nl::MRC_A_EVENT_ERROR, errno)?;
    m.put_uint(nl::MRC_A_EVENT_TIMESTAMP_NS, mrc_sys::now_ns())
}

/// Returns the session id of a registered connection and its socket cookie.
pub(crate) fn ids(sk: &Sock) -> Option<(u64, u64)> {
    let inner = sk.state().inner.lock();
    inner.sid.map(|(sid, _)| (sid, sk.cookie()))
}

/// Writes a connection for `conn-get`: with `head`, the connection's own
/// attributes, then its paths from index `from` on. Returns `Some(i)` when
/// path `i` did not fit (the caller continues it in another message).
///
/// The session id goes only to a reader with `show_sid`: whoever knows it
/// can aim packets at the connection, so it is for the namespace's
/// administrator, as TCP's sequence numbers are for nobody.
pub(crate) fn fill_conn(
    sk: &Sock,
    m: &mut GenlMsg,
    generation: u32,
    from: usize,
    head: bool,
    show_sid: bool,
) -> Result<Option<usize>> {
    let now = mrc_sys::now_ns();
    let inner = sk.state().inner.lock();
    let Some(s) = inner.sess.as_deref() else {
        return Err(ENOENT);
    };
    m.put_u32(nl::MRC_A_CONN_GENERATION, generation)?;
    // Every message names its connection, continuations too.
    m.put_uint(nl::MRC_A_CONN_COOKIE, sk.cookie())?;
    if show_sid {
        m.put_uint(nl::MRC_A_CONN_SESSION_ID, s.conn.session_id())?;
    }
    if head {
        m.put_u32(nl::MRC_A_CONN_STATE, conn_state(s.conn.state()))?;
        if let Some(l) = &inner.local {
            m.put_ip(nl::MRC_A_CONN_LOCAL_ADDR, &l.ip)?;
            m.put_u16(nl::MRC_A_CONN_LOCAL_PORT, l.port)?;
        }
        if let Some(p) = &inner.peer {
            m.put_ip(nl::MRC_A_CONN_REMOTE_ADDR, &p.ip)?;
            m.put_u16(nl::MRC_A_CONN_REMOTE_PORT, p.port)?;
        }
        let cc = s.conn.paths().config().cc.name();
        m.put_string(nl::MRC_A_CONN_CC, cc)?;
        m.put_uint(
            nl::MRC_A_CONN_TIME_IN_STATE_NS,
            now.saturating_sub(inner.since_ns),
        )?;
        m.put_uint(nl::MRC_A_CONN_TX_BYTES, inner.tx_bytes)?;
        m.put_uint(nl::MRC_A_CONN_RX_BYTES, inner.rx_bytes)?;
        if let Some(e) = s.conn.error() {
            m.put_u32(nl::MRC_A_CONN_ERROR, mrc_sys::errno_of(e))?;
        }
        put_counters(m, s.conn.stats())?;
        let times = s.conn.send_times(now);
        m.nest(nl::MRC_A_CONN_SEND_TIME, |m| {
            for (l, t) in SendLimit::ALL.iter().zip(times) {
                m.put_uint(send_time_attr(*l), t)?;
            }
            Ok(())
        })?;
    }
    for (n, (idx, p)) in s.conn.paths().iter().enumerate().skip(from) {
        let Some(addr) = s.paths.get(idx).and_then(|e| e.addr) else {
            continue;
        };
        let res = m.nest(nl::MRC_A_CONN_PATH, |m| {
            let ids = p.ids();
            let c = p.counters();
            m.put_u32(nl::MRC_A_PATH_ID, ids.path_id)?;
            m.put_bytes(nl::MRC_A_PATH_PLANE, &[ids.plane])?;
            m.put_u16(nl::MRC_A_PATH_EV, ids.entropy)?;
            m.put_ip(nl::MRC_A_PATH_LOCAL_ADDR, &addr.local)?;
            m.put_u16(nl::MRC_A_PATH_LOCAL_PORT, addr.sport)?;
            m.put_ip(nl::MRC_A_PATH_REMOTE_ADDR, &addr.remote)?;
            m.put_u16(nl::MRC_A_PATH_REMOTE_PORT, addr.dport)?;
            m.put_u32(nl::MRC_A_PATH_STATE, path_state(p.state()))?;
            if p.is_backup() {
                m.put_flag(nl::MRC_A_PATH_BACKUP)?;
            }
            m.put_uint(
                nl::MRC_A_PATH_TIME_IN_STATE_NS,
                now.saturating_sub(p.state_since_ns()),
            )?;
            if let Some(v) = p.srtt_ns() {
                m.put_uint(nl::MRC_A_PATH_SRTT_NS, v)?;
            }
            if let Some(v) = p.rttvar_ns() {
                m.put_uint(nl::MRC_A_PATH_RTTVAR_NS, v)?;
            }
            if let Some(v) = p.min_rtt_ns() {
                m.put_uint(nl::MRC_A_PATH_MIN_RTT_NS, v)?;
            }
            m.put_u32(nl::MRC_A_PATH_CWND, p.cwnd())?;
            m.put_uint(nl::MRC_A_PATH_IN_FLIGHT, p.inflight())?;
            m.put_uint(nl::MRC_A_PATH_BYTES_SENT, c.bytes_sent)?;
            m.put_uint(nl::MRC_A_PATH_BYTES_ACKED, c.bytes_acked)?;
            m.put_uint(nl::MRC_A_PATH_BYTES_LOST, c.bytes_lost)?;
            m.put_uint(nl::MRC_A_PATH_BYTES_RETRANS, c.bytes_retx)?;
            m.put_uint(nl::MRC_A_PATH_PACKETS_SENT, c.pkts_sent)?;
            m.put_uint(nl::MRC_A_PATH_PACKETS_ACKED, c.pkts_acked)?;
            m.put_uint(nl::MRC_A_PATH_PACKETS_LOST, c.pkts_lost)?;
            m.put_uint(nl::MRC_A_PATH_PACKETS_RETRANS, c.pkts_retx)?;
            m.put_uint(nl::MRC_A_PATH_PROBES_SENT, u64::from(c.probes_sent))?;
            m.put_uint(nl::MRC_A_PATH_PROBES_MISSED, u64::from(c.probes_missed))
        });
        if res.is_err() {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// The `conn-counters` nest of a connection.
fn put_counters(m: &mut GenlMsg, c: &ConnStats) -> Result {
    m.nest(nl::MRC_A_CONN_COUNTERS, |m| {
        for (attr, v) in [
            (nl::MRC_A_CONN_COUNTERS_DATA_SENT, c.data_sent),
            (nl::MRC_A_CONN_COUNTERS_RETRANSMITS, c.retransmits),
            (nl::MRC_A_CONN_COUNTERS_RACK_LOSSES, c.rack_losses),
            (nl::MRC_A_CONN_COUNTERS_SPURIOUS_LOSSES, c.spurious_losses),
            (nl::MRC_A_CONN_COUNTERS_RTO_LOSSES, c.rto_losses),
            (nl::MRC_A_CONN_COUNTERS_PATH_LOSSES, c.path_losses),
            (nl::MRC_A_CONN_COUNTERS_RTOS, c.rtos),
            (nl::MRC_A_CONN_COUNTERS_HEDGES, c.hedges),
            (nl::MRC_A_CONN_COUNTERS_SPURIOUS_HEDGES, c.spurious_hedges),
            (nl::MRC_A_CONN_COUNTERS_WINDOW_PROBES, c.window_probes),
            (nl::MRC_A_CONN_COUNTERS_DATA_RECEIVED, c.data_received),
            (nl::MRC_A_CONN_COUNTERS_DUPLICATES, c.duplicates),
            (nl::MRC_A_CONN_COUNTERS_RCV_DROPPED, c.rcv_dropped),
            (nl::MRC_A_CONN_COUNTERS_ACKS_SENT, c.acks_sent),
            (nl::MRC_A_CONN_COUNTERS_ACKS_RECEIVED, c.acks_received),
            (nl::MRC_A_CONN_COUNTERS_CHALLENGE_ACKS, c.challenge_acks),
            (
                nl::MRC_A_CONN_COUNTERS_ENDPOINTS_REFUSED,
                c.endpoints_refused,
            ),
            (nl::MRC_A_CONN_COUNTERS_AMP_LIMITED, c.amp_limited),
            (nl::MRC_A_CONN_COUNTERS_ACKS_LIMITED, c.acks_limited),
        ] {
            m.put_uint(attr, v)?;
        }
        Ok(())
    })
}

/// The `send-time` attribute of `limit`.
fn send_time_attr(limit: SendLimit) -> u32 {
    match limit {
        SendLimit::App => nl::MRC_A_SEND_TIME_APP,
        SendLimit::Rwnd => nl::MRC_A_SEND_TIME_RWND,
        SendLimit::Ring => nl::MRC_A_SEND_TIME_RING,
        SendLimit::Cwnd => nl::MRC_A_SEND_TIME_CWND,
        SendLimit::Pacing => nl::MRC_A_SEND_TIME_PACING,
        SendLimit::Sched => nl::MRC_A_SEND_TIME_SCHED,
        SendLimit::NoPath => nl::MRC_A_SEND_TIME_NO_PATH,
        SendLimit::Sending => nl::MRC_A_SEND_TIME_SENDING,
    }
}
