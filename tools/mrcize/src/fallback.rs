// SPDX-License-Identifier: GPL-2.0
//! MRCIZE_FALLBACK: when an MRC connect() fails for want of an MRC peer,
//! the connection is made over TCP on the same descriptor (see
//! [`falls_back`] for when).
//!
//! A TCP socket of the program's family is created with the descriptor's
//! O_NONBLOCK and FD_CLOEXEC, given the options the program set (recorded
//! by mrcize) and its bound address, put in place of the MRC socket with
//! dup3(), and connected to the program's address.

use crate::fdtab::{Kind, Slot, F_BOUND};
use crate::opts::OPTS;
use crate::xlate::{self, In, Op};
use crate::{log, real};
use libc::{c_int, c_void, sockaddr, socklen_t};
use std::fmt;
use std::mem;

fn errno() -> c_int {
    // SAFETY: __errno_location() returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// Whether a connect() that failed with `errno` falls back to TCP:
/// `ECONNREFUSED` (the peer's MRC answered that nobody listens on the
/// port) and `ETIMEDOUT` (nothing answered MRC's handshake: no MRC module
/// on the peer, whose UDP port then only draws ICMP errors, which MRC does
/// not act on; or the peer is unreachable, and TCP will time out too).
pub fn falls_back(errno: c_int) -> bool {
    errno == libc::ECONNREFUSED || errno == libc::ETIMEDOUT
}

/// Waits up to `ms` milliseconds for the outcome of a non-blocking MRC
/// connect() on `fd`: `Some(0)` connected, `Some(errno)` failed (the error
/// is taken from the socket, as SO_ERROR does), `None` still in progress.
pub fn wait_outcome(fd: c_int, ms: i32) -> Option<c_int> {
    let saved = errno();
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(ms.max(0) as u64);
    let ready = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // SAFETY: p is one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, left.as_millis() as c_int) };
        if rc >= 0 || errno() != libc::EINTR {
            break rc > 0;
        }
    };
    let out = if ready {
        let mut v: c_int = 0;
        let mut len = mem::size_of::<c_int>() as socklen_t;
        // SAFETY: v is writable for len bytes.
        let rc = unsafe {
            real::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut v as *mut c_int as *mut c_void,
                &mut len,
            )
        };
        Some(if rc < 0 { errno() } else { v })
    } else {
        None
    };
    set_errno(saved);
    out
}

/// The program's address for the log line.
struct Shown<'a>(&'a [u8], i32);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match xlate::to_mrc(self.0, self.1, Op::Bind, false) {
            Ok(In::Mrc(a)) => write!(f, "{a}"),
            _ => f.write_str("?"),
        }
    }
}

/// Sets on `new` the options the program set on `old`: those mrcize
/// answered itself, the recorded SOL_SOCKET ones, and SO_LINGER,
/// SO_RCVTIMEO and SO_SNDTIMEO as the kernel has them. Failures are
/// ignored, as the program's own setsockopt() calls succeeded.
fn copy_options(old: c_int, new: c_int, slot: &Slot) {
    for (i, o) in OPTS.iter().enumerate() {
        let Some(v) = slot.opt(i) else { continue };
        // SAFETY: v is an int, valid for its size.
        unsafe {
            real::setsockopt(
                new,
                o.level,
                o.name,
                &v as *const c_int as *const c_void,
                mem::size_of::<c_int>() as socklen_t,
            )
        };
    }
    let cc = slot.cc();
    let n = cc.iter().position(|c| *c == 0).unwrap_or(cc.len());
    if n > 0 {
        // SAFETY: cc is valid for n bytes.
        unsafe {
            real::setsockopt(
                new,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr() as *const c_void,
                n as socklen_t,
            )
        };
    }
    for name in [libc::SO_LINGER, libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        let mut buf = [0u8; 32];
        let mut len = buf.len() as socklen_t;
        // SAFETY: buf is writable for len bytes.
        let rc = unsafe {
            real::getsockopt(
                old,
                libc::SOL_SOCKET,
                name,
                buf.as_mut_ptr() as *mut c_void,
                &mut len,
            )
        };
        if rc == 0 && buf[..len as usize].iter().any(|b| *b != 0) {
            // SAFETY: buf holds len bytes written by the kernel.
            unsafe {
                real::setsockopt(
                    new,
                    libc::SOL_SOCKET,
                    name,
                    buf.as_ptr() as *const c_void,
                    len,
                )
            };
        }
    }
}

/// Replaces MRC socket `fd`, whose connect() to `dest` (the program's
/// address, of `family`) failed with `why`, by a TCP socket and connects
/// that. Returns what connect() returns, with its errno.
///
/// # Safety
///
/// `fd` must be the program's MRC socket described by `slot`.
pub unsafe fn to_tcp(fd: c_int, slot: &Slot, family: i32, dest: &[u8], why: c_int) -> c_int {
    // SAFETY: F_GETFL and F_GETFD take no argument.
    let (fl, fdfl) = unsafe {
        (
            real::fcntl(fd, libc::F_GETFL, 0),
            real::fcntl(fd, libc::F_GETFD, 0),
        )
    };
    if fl < 0 || fdfl < 0 {
        return -1;
    }
    let mut ty = libc::SOCK_STREAM;
    if fl & libc::O_NONBLOCK != 0 {
        ty |= libc::SOCK_NONBLOCK;
    }
    let cloexec = fdfl & libc::FD_CLOEXEC != 0;
    if cloexec {
        ty |= libc::SOCK_CLOEXEC;
    }
    // SAFETY: plain system call.
    let tcp = unsafe { real::socket(family, ty, libc::IPPROTO_TCP) };
    if tcp < 0 {
        return -1;
    }
    let give_up = |e: c_int| {
        // SAFETY: tcp is our own descriptor.
        unsafe { real::close(tcp) };
        set_errno(e);
        -1
    };
    copy_options(fd, tcp, slot);
    if slot.state().has(F_BOUND) {
        let (b, n) = slot.bound.load();
        // SAFETY: b is valid for n bytes.
        if n > 0 && unsafe { real::bind(tcp, b.as_ptr() as *const sockaddr, n as socklen_t) } < 0 {
            return give_up(errno());
        }
    }
    let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: plain system call; fd is replaced atomically.
    if unsafe { real::dup3(tcp, fd, flags) } < 0 {
        return give_up(errno());
    }
    // SAFETY: tcp is our own descriptor, now duplicated onto fd.
    unsafe { real::close(tcp) };
    slot.reset(Kind::Plain, 0);
    let what = if why == libc::ECONNREFUSED {
        "no MRC listener"
    } else {
        "no MRC answer"
    };
    log::line(format_args!(
        "fd {fd}: {what} at {} ({}): falling back to TCP",
        Shown(dest, family),
        log::Errno(why)
    ));
    // SAFETY: dest is valid for its length.
    unsafe {
        real::connect(
            fd,
            dest.as_ptr() as *const sockaddr,
            dest.len() as socklen_t,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A non-blocking TCP connect on loopback: to a closed port the wait
    /// sees the refusal, to a listener the connection.
    #[test]
    fn waits_for_the_outcome() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let open = listener.local_addr().expect("addr").port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
            l.local_addr().expect("addr").port()
        };
        for (port, want) in [(closed, libc::ECONNREFUSED), (open, 0)] {
            // SAFETY: plain system calls on our own socket; sin is valid.
            let out = unsafe {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
                assert!(fd >= 0);
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
                    },
                    sin_zero: [0; 8],
                };
                let rc = libc::connect(
                    fd,
                    &sin as *const _ as *const sockaddr,
                    mem::size_of::<libc::sockaddr_in>() as socklen_t,
                );
                let out = if rc == 0 {
                    Some(0)
                } else {
                    wait_outcome(fd, 5000)
                };
                libc::close(fd);
                out
            };
            assert_eq!(out, Some(want), "port {port}");
        }
    }

    #[test]
    fn fallback_errors() {
        assert!(falls_back(libc::ECONNREFUSED));
        assert!(falls_back(libc::ETIMEDOUT));
        assert!(!falls_back(libc::ENETUNREACH));
        assert!(!falls_back(libc::EINPROGRESS));
        assert_eq!(
            Shown(
                &[2, 0, 0, 80, 10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0],
                libc::AF_INET
            )
            .to_string(),
            "10.0.0.2:80"
        );
    }
}
