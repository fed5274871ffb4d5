// SPDX-License-Identifier: GPL-2.0

//! The `SOL_MRC` socket options of `AF_MRC` sockets: the heartbeat, the
//! congestion controller, and paths added and removed by the application.
//! Part of `mrc_sock`, whose state they change.

use kernel::prelude::*;

use super::{with_conn, Mode, PathAddr, Sock, EV_BASE, EV_SPAN};
use crate::mrc_cc::CcKind;
use crate::mrc_path::{PathIds, MAX_PATHS};
use crate::mrc_sys::{self, err, sockopt, OptIn, OptOut, PathReq};

/// `setsockopt()` at a level other than `SOL_SOCKET`.
pub(crate) fn setsockopt(sk: &Sock, level: i32, name: i32, val: &OptIn) -> Result {
    if level != sockopt::SOL_MRC {
        return Err(err::no_protocol_option());
    }
    let _guard = sk.lock();
    match name {
        sockopt::HEARTBEAT_MS => {
            let ms = val.read_u32()?;
            if !(1..=sockopt::HEARTBEAT_MS_MAX).contains(&ms) {
                return Err(EINVAL);
            }
            // A running connection takes it at once; `drive` re-arms the
            // timer for the new deadlines.
            with_conn(sk, |inner, _| {
                inner.opts.heartbeat_ms = Some(ms);
                if let Some(s) = inner.sess.as_deref_mut() {
                    s.conn.set_heartbeat_busy_ns(u64::from(ms) * 1_000_000);
                }
            });
            Ok(())
        }
        sockopt::CC => {
            let mut buf = [0u8; sockopt::CC_NAME_MAX];
            let n = val.len().min(sockopt::CC_NAME_MAX - 1);
            if n == 0 {
                return Err(EINVAL);
            }
            let name = buf.get_mut(..n).ok_or(EINVAL)?;
            val.read(name)?;
            let end = name.iter().position(|b| *b == 0).unwrap_or(n);
            let name = name.get(..end).ok_or(EINVAL)?;
            let kind = core::str::from_utf8(name)
                .ok()
                .and_then(CcKind::from_name)
                .ok_or(EINVAL)?;
            let mut inner = sk.state().inner.lock();
            // Each path's controller holds the state (window, RTT filters)
            // of one algorithm from the first packet on; switching on a
            // running connection would have to throw that away on every
            // path. The choice is made before the connection starts.
            if !matches!(inner.mode, Mode::Open | Mode::Listening) {
                return Err(err::is_connected());
            }
            inner.opts.cc = Some(kind);
            Ok(())
        }
        sockopt::PATH_ADD => {
            let mut b = [0u8; PathReq::SIZE];
            val.read(&mut b)?;
            path_add(sk, &PathReq::parse(&b)?).map(|_| ())
        }
        sockopt::PATH_DEL => path_del(sk, val.read_u32()?),
        _ => Err(err::no_protocol_option()),
    }
}

/// `getsockopt()` at a level other than `SOL_SOCKET`.
pub(crate) fn getsockopt(sk: &Sock, level: i32, name: i32, out: &OptOut) -> Result {
    if level != sockopt::SOL_MRC {
        return Err(err::no_protocol_option());
    }
    let len = out.len()?;
    let _guard = sk.lock();
    let net = sk.mrc_net();
    match name {
        sockopt::HEARTBEAT_MS => {
            if len < 4 {
                return Err(EINVAL);
            }
            let ms = {
                let inner = sk.state().inner.lock();
                match inner.sess.as_deref() {
                    Some(s) => {
                        let ns = s.conn.paths().config().heartbeat_busy_ns;
                        u32::try_from(ns / 1_000_000).unwrap_or(u32::MAX)
                    }
                    None => inner
                        .opts
                        .heartbeat_ms
                        .unwrap_or_else(|| net.heartbeat_ms()),
                }
            };
            out.write(&ms.to_ne_bytes())
        }
        sockopt::CC => {
            let kind = {
                let inner = sk.state().inner.lock();
                match inner.sess.as_deref() {
                    Some(s) => s.conn.paths().config().cc,
                    None => inner.opts.cc.unwrap_or_else(|| net.cc()),
                }
            };
            let mut buf = [0u8; sockopt::CC_NAME_MAX];
            for (d, c) in buf.iter_mut().zip(kind.name().bytes()) {
                *d = c;
            }
            out.write(buf.get(..len.min(sockopt::CC_NAME_MAX)).unwrap_or(&[]))
        }
        sockopt::PATH_ADD => {
            if len < PathReq::SIZE {
                return Err(EINVAL);
            }
            let mut b = [0u8; PathReq::SIZE];
            out.read(&mut b)?;
            let id = path_add(sk, &PathReq::parse(&b)?)?;
            PathReq::set_path_id(&mut b, id);
            out.write(&b)
        }
        _ => Err(err::no_protocol_option()),
    }
}

/// `MRC_PATH_ADD`: adds a path to a connected socket; returns its id.
fn path_add(sk: &Sock, req: &PathReq) -> Result<u32> {
    let net = sk.mrc_net();
    if sk.state().inner.lock().mode != Mode::Connected {
        return Err(err::not_connected());
    }
    let local = if req.local.is_unspecified() {
        net.source_for(req.remote)?.0
    } else if sk.is_local_addr(&req.local) {
        req.local
    } else {
        return Err(err::address_not_available());
    };
    let dport = if req.dport == 0 {
        mrc_sys::param_port()
    } else {
        req.dport
    };
    with_conn(sk, |inner, now| {
        if inner.mode != Mode::Connected {
            return Err(err::not_connected());
        }
        let s = inner.sess.as_deref_mut().ok_or_else(err::not_connected)?;
        if s.conn.paths().len() >= MAX_PATHS {
            return Err(ENOSPC);
        }
        let path_id = s.user_path_id()?;
        let sport = if req.sport == 0 {
            EV_BASE.wrapping_add((path_id % EV_SPAN) as u16)
        } else {
            req.sport
        };
        let addr = PathAddr {
            local,
            remote: req.remote,
            sport,
            dport,
            oif: 0,
        };
        if s.paths.iter(MAX_PATHS).any(|(_, e)| e.addr == Some(addr)) {
            return Err(EEXIST);
        }
        let ids = PathIds {
            path_id,
            plane: 0,
            entropy: sport,
        };
        s.add_path(net, now, ids, addr, req.backup, None)?;
        Ok(path_id)
    })
}

/// `MRC_PATH_DEL`: removes a path of a connected socket.
fn path_del(sk: &Sock, path_id: u32) -> Result {
    let peer = with_conn(sk, |inner, now| {
        if inner.mode != Mode::Connected {
            return Err(err::not_connected());
        }
        let s = inner.sess.as_deref_mut().ok_or_else(err::not_connected)?;
        s.remove_path(now, path_id)
    })?;
    drop(peer);
    Ok(())
}
