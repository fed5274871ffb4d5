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
