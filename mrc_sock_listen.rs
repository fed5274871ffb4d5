// SPDX-License-Identifier: GPL-2.0

//! Listening `AF_MRC` sockets: which SYNs a listener takes (its backlog and
//! the share of it that SYNs of unproven sources may hold), the
//! connections its work item creates for them, and their hand-over to
//! `accept` once their handshake completes. Part of `mrc_sock`, whose state
//! it uses.

use kernel::prelude::*;

use super::{
    dgram_for, endpoint, local_endpoints, window_of, with_conn, Mode, PathAddr, Session, Sock,
    UDP_HLEN,
};
use crate::mrc_proto::{self, Body, Endpoint, MAX_ENDPOINTS};
use crate::mrc_sys::{self, IpAddr, MrcAddr, SkBuff};

/// Whether the listener `sk` takes SYNs sent to `dst`: it is bound to that
/// address or to none.
pub(crate) fn listens_on(sk: &Sock, dst: &IpAddr) -> bool {
    let inner = sk.state().inner.lock();
    inner
        .local
        .map_or(true, |l| l.ip.is_unspecified() || l.ip == *dst)
}

/// What a listener does with a SYN for no existing session.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SynAdmit {
    /// Queued for the work item, which creates its connection.
    Queued,
    /// Not queued: answer it with a RETRY, so that a SYN that proves its source comes back.
    Retry,
    /// Not queued: the backlog is full, or the socket no longer listens.
    Full,
}

/// Half-open connections a listener with `backlog` slots creates for SYNs
/// whose source is not proven: `retry_pct` percent of the backlog, rounded
/// down, and never the last slot, which only a SYN with a valid retry token
/// can take. 0: every such SYN gets a RETRY.
fn unproven_cap(backlog: usize, retry_pct: u32) -> usize {
    let pct = usize::try_from(retry_pct.min(100)).unwrap_or(100);
    (backlog.saturating_mul(pct) / 100).min(backlog.saturating_sub(1))
}

/// A SYN for no existing session arrived for the listener `sk` (softirq).
///
/// It is queued for the work item while the listener's half-open
/// connections and its connections waiting for `accept` leave room in the
/// backlog, and, unless the SYN carries a valid retry token (`proven`), while
/// the half-open connections are fewer than `retry_pct` percent of the
/// backlog; beyond that it gets a RETRY and costs nothing. So SYNs from
/// forged sources hold at most that share of the backlog, and a client
/// that answers the RETRY finds the rest free.
pub(crate) fn syn_received(sk: &Sock, skb: SkBuff, proven: bool, retry_pct: u32) -> SynAdmit {
    {
        let mut inner = sk.state().inner.lock();
        let backlog = inner.acceptq.len();
        if inner.mode != Mode::Listening || inner.children + inner.aq_len >= backlog {
            return SynAdmit::Full;
        }
        if !proven && inner.children >= unproven_cap(backlog, retry_pct) {
            drop(inner);
            // The caller answers it with a RETRY: it served its purpose.
            skb.consume();
            return SynAdmit::Retry;
        }
        inner.children += 1;
    }
    sk.queue_all(|queue| queue(skb));
    sk.queue_work();
    SynAdmit::Queued
}

/// Creates the connection a queued SYN asks for (listener work).
pub(super) fn new_connection(listener: &Sock, skb: &SkBuff) -> Result {
    let net = listener.mrc_net();
    let addrs = skb.udp_addrs().ok_or(EINVAL)?;
    let data = skb.linear().get(UDP_HLEN as usize..).ok_or(EINVAL)?;
    let pkt = mrc_proto::decode(data).map_err(|_| EINVAL)?;
    let Body::Syn(hs) = pkt.body else {
        return Err(EINVAL);
    };
    let sid = pkt.header.session_id;
    if net.lookup_session(sid, true).is_some() {
        // A retransmitted SYN of a connection already being set up.
        return Err(EEXIST);
    }
    let child = Sock::new_child(listener)?;
    let path = PathAddr {
        local: addrs.dst,
        remote: addrs.src,
        sport: mrc_sys::param_port(),
        dport: addrs.sport,
        oif: 0,
    };
    // The reply goes back the way the SYN came: size datagrams for that route.
    let mtu = net.source_for(addrs.src).map_or(0, |(_, m)| m);
    let mut cfg = net.conn_config(
        window_of(child.rcvbuf()),
        window_of(child.sndbuf()),
        dgram_for(mtu),
    );
    let opts = listener.state().inner.lock().opts;
    opts.apply(&mut cfg);
    let locals = local_endpoints(net, addrs.dst);
    let mut sess = Session::new(net, cfg, path, locals, net.ev_per_plane(), false)?;
    let now = mrc_sys::now_ns();
    let offered = locals.eps.get(..locals.n).unwrap_or(&[]);
    let mut list = [Endpoint::v4([0; 4], 0, false); MAX_ENDPOINTS];
    for (d, e) in list.iter_mut().zip(offered.iter().flatten()) {
        *d = *e;
    }
    sess.conn
        .set_handshake_peer(endpoint(addrs.src, addrs.sport, false));
    sess.conn
        .accept(
            now,
            &pkt,
            mrc_sys::random_u64(),
            list.get(..locals.n).unwrap_or(&[]),
        )
        .map_err(Error::from)?;
    sess.open_planes(net, now);
    let local = MrcAddr {
        ip: addrs.dst,
        port: hs.dst_port,
        scope_id: 0,
    };
    let peer = MrcAddr {
        ip: addrs.src,
        port: hs.src_port,
        scope_id: 0,
    };
    net.insert_session((sid, true), &child)?;
    with_conn(&child, |inner, _| {
        inner.sid = Some((sid, true));
        inner.local = Some(local);
        inner.peer = Some(peer);
        inner.mode = Mode::Connecting;
        inner.orphan = true;
        inner.parent = Some(listener.hold());
        inner.opts = opts;
        inner.sess = Some(sess);
    });
    Ok(())
}

/// A connection created by `listener` completed its handshake: queue it for
/// `accept`, or abort it if the listener is gone or full.
pub(super) fn hand_to_listener(listener: &Sock, child: &Sock) {
    // The child stops being an orphan before `accept` can see it: an
    // `accept` and `close` racing with this would otherwise orphan it
    // again first, and the late clear below would leave it owned by nobody.
    with_conn(child, |inner, _| inner.orphan = false);
    let queued = {
        let mut l = listener.state().inner.lock();
        l.children = l.children.saturating_sub(1);
        let cap = l.acceptq.len();
        if l.mode == Mode::Listening && l.aq_len < cap {
            let idx = (l.aq_head + l.aq_len) % cap;
            if let Some(slot) = l.acceptq.get_mut(idx) {
                *slot = Some(child.hold());
                l.aq_len += 1;
            }
            true
        } else {
            false
        }
    };
    if queued {
        listener.data_ready();
    } else {
        with_conn(child, |inner, now| {
            inner.orphan = true;
            if let Some(s) = inner.sess.as_deref_mut() {
                s.conn.abort(now);
            }
        });
    }
}
