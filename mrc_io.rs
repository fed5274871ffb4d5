// SPDX-License-Identifier: GPL-2.0

//! The data calls of `AF_MRC` sockets: `sendmsg`, `recvmsg` and the queue
//! `ioctl`s, for both socket types.
//!
//! - `SOCK_SEQPACKET`: a `sendmsg` is one message, a `recvmsg` returns one
//!   whole message (or its first bytes, with `MSG_TRUNC`).
//! - `SOCK_STREAM`: a write is cut into messages ([`Conn::stream_chunk`]:
//!   at most 64 KiB, filling the send buffer); it blocks until every byte
//!   is queued, or returns the bytes queued so far when it times out, is
//!   interrupted or the connection fails, as a TCP write does. A read takes
//!   bytes from the receive queue across packet and message boundaries and
//!   keeps its place inside the first packet, waiting for `SO_RCVLOWAT`
//!   bytes (all of them with `MSG_WAITALL`). `MSG_PEEK` copies without
//!   consuming; `MSG_TRUNC` consumes without copying. Only complete
//!   messages are ever queued, so the bytes a read sees are in order and
//!   final.
//!
//! Both run under the socket lock ([`Sock::lock`]): the one reader of the
//! receive queue, and the one writer of the connection's message queue.
//!
//! [`Conn::stream_chunk`]: crate::mrc_conn::Conn::stream_chunk

use kernel::prelude::*;

use crate::mrc_conn::window_cost;
use crate::mrc_sock::{self, consumed, marks};
use crate::mrc_sys::{
    err, ioctl_cmd, msg_flags, Msg, MsgBuf, SkBuff, Sock, SockGuard, MRC_MAX_MSG,
};

/// `sendmsg()`.
pub(crate) fn sendmsg(sk: &Sock, msg: &mut Msg, len: usize) -> Result<i32> {
    let flags = msg.flags();
    if flags & msg_flags::OOB != 0 {
        return Err(err::not_supported());
    }
    if sk.is_stream() {
        let guard = sk.lock();
        mrc_sock::send_ready(sk, flags)?;
        return send_stream(sk, &guard, msg, len, flags);
    }
    // A message's bytes are copied in before the socket is taken, where
    // nothing needs its lock: meanwhile softirq takes the acknowledgements
    // that arrive, and sends what they let go, at once, rather than leaving
    // them in the backlog for this task to take as it releases the socket.
    // TCP copies under its lock because it appends to its queue's buffers.
    let early = (!sk.copies_unlocked()).then(|| sk.lock());
    mrc_sock::send_ready(sk, flags)?;
    let len32 = u32::try_from(len)
        .ok()
        .filter(|l| *l <= MRC_MAX_MSG)
        .ok_or_else(err::message_too_long)?;
    let buf = msg.copy_in(sk, len)?;
    let guard = early.unwrap_or_else(|| sk.lock());
    send_message(sk, &guard, buf, len32, flags)
}

/// `SOCK_SEQPACKET` send: `buf`, `len` bytes, as one message.
fn send_message(
    sk: &Sock,
    guard: &SockGuard<'_>,
    buf: MsgBuf,
    len: u32,
    flags: i32,
) -> Result<i32> {
    let mut buf = Some(buf);
    let mut timeo = sk.sndtimeo(flags & msg_flags::DONTWAIT != 0);
    let mut result: Result<i32> = Err(EAGAIN);
    let waited = guard.wait(&mut timeo, || {
        if result != Err(EAGAIN) {
            return true;
        }
        result = mrc_sock::queue_message(sk, &mut buf, len);
        if result == Err(EAGAIN) {
            // Only a writer that found no room is woken when there is.
            sk.set_nospace();
            result = mrc_sock::queue_message(sk, &mut buf, len);
        }
        result != Err(EAGAIN)
    });
    match (waited, result) {
        (_, Ok(n)) => Ok(n),
        (_, Err(e)) if e == EPIPE => Err(mrc_sock::pipe(flags)),
        (Err(e), _) => Err(e),
        (Ok(()), Err(e)) => Err(e),
    }
}

/// `SOCK_STREAM` send: all `len` bytes, in messages, unless the wait for
/// room ends first.
fn send_stream(
    sk: &Sock,
    guard: &SockGuard<'_>,
    msg: &mut Msg,
    len: usize,
    flags: i32,
) -> Result<i32> {
    let len = len.min(i32::MAX as usize);
    let mut timeo = sk.sndtimeo(flags & msg_flags::DONTWAIT != 0);
    let mut sent = 0usize;
    while sent < len {
        let mut chunk = Ok(0);
        let waited = guard.wait(&mut timeo, || {
            chunk = mrc_sock::stream_chunk(sk, len - sent);
            if chunk == Ok(0) {
                // As in `send_message`.
                sk.set_nospace();
                chunk = mrc_sock::stream_chunk(sk, len - sent);
            }
            chunk != Ok(0)
        });
        let n = match (waited, chunk) {
            (_, Ok(n)) if n > 0 => n,
            (_, Err(e)) if e == EPIPE => {
                if sent > 0 {
                    break;
                }
                if let Some(e) = sk.take_error() {
                    return Err(e);
                }
                return Err(mrc_sock::pipe(flags));
            }
            (Err(e), _) | (Ok(()), Err(e)) => return partial(sent, e),
            (Ok(()), Ok(_)) => return partial(sent, EAGAIN),
        };
        let mut buf = match msg.copy_in(sk, n as usize) {
            Ok(b) => Some(b),
            Err(e) => return partial(sent, e),
        };
        // The chunk fits: only this writer adds to the send buffer.
        match mrc_sock::queue_message(sk, &mut buf, n) {
            Ok(_) => sent += n as usize,
            Err(e) => return partial(sent, e),
        }
    }
    Ok(sent as i32)
}

/// The bytes moved so far, or `e` if there were none.
fn partial(done: usize, e: Error) -> Result<i32> {
    if done > 0 {
        Ok(done as i32)
    } else {
        Err(e)
    }
}

/// `recvmsg()`.
pub(crate) fn recvmsg(sk: &Sock, msg: &mut Msg, len: usize, flags: i32) -> Result<i32> {
    if flags & msg_flags::OOB != 0 {
        return Err(err::not_supported());
    }
    let mut guard = sk.lock();
    mrc_sock::recv_ready(sk)?;
    if sk.is_stream() {
        recv_stream(sk, &mut guard, msg, len, flags)
    } else {
        recv_message(sk, &mut guard, msg, len, flags)
    }
}

/// `SOCK_SEQPACKET` receive: one whole message, or its first `len` bytes
/// (`MSG_TRUNC` set in the result; with `MSG_TRUNC` in `flags` the
/// message's real length is returned).
fn recv_message(
    sk: &Sock,
    guard: &mut SockGuard<'_>,
    msg: &mut Msg,
    len: usize,
    flags: i32,
) -> Result<i32> {
    let mut timeo = sk.rcvtimeo(flags & msg_flags::DONTWAIT != 0);
    guard.wait(&mut timeo, || {
        sk.queue_len() > 0 || mrc_sock::read_closed(sk)
    })?;
    if sk.queue_len() == 0 {
        if let Some(e) = sk.take_error() {
            return Err(e);
        }
        return Ok(0);
    }
    let peek = flags & msg_flags::PEEK != 0;
    let want = u32::try_from(len).unwrap_or(u32::MAX);
    let mut copied: u32 = 0;
    let mut msg_len: u32 = 0;
    let mut cost = 0u64;
    let mut res = Ok(());
    let mut first = true;
    if peek {
        guard.queue_walk(|skb| {
            let last = marks(skb, &mut first, &mut msg_len);
            res = res.and_then(|()| copy_part(msg, skb, want, &mut copied));
            !last
        });
    } else {
        while let Some(skb) = guard.queue_dequeue() {
            let last = marks(&skb, &mut first, &mut msg_len);
            cost += window_cost(skb.len());
            res = res.and_then(|()| copy_part(msg, &skb, want, &mut copied));
            skb.consume();
            if last {
                break;
            }
            // Packets that arrived meanwhile are taken between the packets
            // of a long message, so that their acknowledgements do not wait
            // for the whole copy.
            if sk.has_deferred() {
                mrc_sock::take_backlog(sk);
            }
        }
        consumed(sk, msg_len, cost, 0);
    }
    res?;
    if msg.wants_name() {
        if let Some(peer) = mrc_sock::peer_addr(sk) {
            msg.set_name(&peer);
        }
    }
    if msg_len > copied {
        msg.add_flags(msg_flags::TRUNC);
    } else {
        msg.add_flags(msg_flags::EOR);
    }
    let n = if flags & msg_flags::TRUNC != 0 {
        msg_len
    } else {
        copied
    };
    Ok(n as i32)
}

/// Copies as much of `skb` as still fits in the user's `want` bytes.
fn copy_part(msg: &mut Msg, skb: &SkBuff, want: u32, copied: &mut u32) -> Result {
    let n = skb.len().min(want.saturating_sub(*copied));
    if n > 0 {
        msg.copy_skb(skb, 0, n)?;
        *copied += n;
    }
    Ok(())
}

/// `SOCK_STREAM` receive: up to `len` bytes.
fn recv_stream(
    sk: &Sock,
    guard: &mut SockGuard<'_>,
    msg: &mut Msg,
    len: usize,
    flags: i32,
) -> Result<i32> {
    let len = len.min(i32::MAX as usize);
    if len == 0 {
        return Ok(0);
    }
    let peek = flags & msg_flags::PEEK != 0;
    let discard = flags & msg_flags::TRUNC != 0;
    let target = sk.rcvlowat(flags & msg_flags::WAITALL != 0 && !peek, len);
    let mut timeo = sk.rcvtimeo(flags & msg_flags::DONTWAIT != 0);
    let mut copied = 0usize;
    let mut res = Ok(());
    loop {
        let mut off = mrc_sock::head_offset(sk);
        let mut whole = 0u32;
        let mut cost = 0u64;
        let before = copied;
        guard.queue_walk(|skb| {
            let n = skb
                .len()
                .saturating_sub(off)
                .min(u32::try_from(len - copied).unwrap_or(u32::MAX));
            if n > 0 && !discard {
                res = msg.copy_skb(skb, off, n);
                if res.is_err() {
                    return false;
                }
            }
            copied += n as usize;
            if off + n < skb.len() {
                off += n;
                return false;
            }
            whole += 1;
            cost += window_cost(skb.len());
            off = 0;
            copied < len
        });
        if !peek {
            for _ in 0..whole {
                if let Some(skb) = guard.queue_dequeue() {
                    skb.consume();
                }
            }
            if copied > before || whole > 0 {
                consumed(sk, (copied - before) as u32, cost, off);
            }
        }
        if res.is_err() || copied >= target || (peek && copied > 0) {
            break;
        }
        if copied > 0 && (sk.has_error() || mrc_sock::read_closed(sk)) {
            break;
        }
        if let Err(e) = guard.wait(&mut timeo, || {
            sk.queue_len() > 0 || sk.has_error() || mrc_sock::read_closed(sk)
        }) {
            return partial(copied, e);
        }
        if sk.queue_len() == 0 {
            // End of the stream, or an error.
            if copied == 0 {
                if let Some(e) = sk.take_error() {
                    return Err(e);
                }
            }
            break;
        }
    }
    match res {
        Err(e) if copied == 0 => Err(e),
        _ => Ok(copied as i32),
    }
}

/// `ioctl()`: `SIOCINQ` is the bytes a read can take now (a stream's
/// unread bytes; the next message's length on a `SOCK_SEQPACKET` socket),
/// `SIOCOUTQ` the bytes queued and not yet acknowledged.
pub(crate) fn ioctl(sk: &Sock, cmd: u32) -> Result<i32> {
    let mut guard = sk.lock();
    let (unread, unacked) = mrc_sock::queued_bytes(sk);
    let val = match cmd {
        ioctl_cmd::INQ if sk.is_stream() => unread,
        ioctl_cmd::INQ => {
            let mut len = 0;
            let mut first = true;
            guard.queue_walk(|skb| {
                marks(skb, &mut first, &mut len);
                false
            });
            u64::from(len)
        }
        ioctl_cmd::OUTQ => unacked,
        _ => return Err(ENOIOCTLCMD),
    };
    Ok(i32::try_from(val).unwrap_or(i32::MAX))
}
