// SPDX-License-Identifier: GPL-2.0
//! [`MrcSocket`]: an AF_MRC socket of either type.

use crate::addr::mrc_from_storage;
use crate::family::family;
use crate::uapi::SockaddrMrc;
use std::io::{self, Read, Write};
use std::mem;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The two socket types of MRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockType {
    /// `SOCK_SEQPACKET`: reliable messages; one send is one message and one
    /// receive returns one whole message (or flags it `MSG_TRUNC`).
    Seqpacket,
    /// `SOCK_STREAM`: a reliable byte stream, like TCP.
    Stream,
}

impl SockType {
    /// The `SOCK_*` constant.
    pub fn raw(self) -> i32 {
        match self {
            SockType::Seqpacket => libc::SOCK_SEQPACKET,
            SockType::Stream => libc::SOCK_STREAM,
        }
    }
}

/// An MRC socket: `socket(AF_MRC, SOCK_SEQPACKET or SOCK_STREAM, 0)`.
///
/// Its addresses are [`SocketAddr`]s; the conversion to `sockaddr_mrc`
/// happens inside. All calls return [`io::Error`]s with the errno of the
/// failed system call (`EAFNOSUPPORT` from [`MrcSocket::new`] when the module
/// is not loaded). Descriptors are created with `SOCK_CLOEXEC`.
#[derive(Debug)]
pub struct MrcSocket {
    fd: OwnedFd,
    family: i32,
}

pub(crate) fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn cvt_size(rc: libc::ssize_t) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

impl MrcSocket {
    /// A new unconnected socket of type `ty`, in the family of the loaded
    /// module ([`crate::family`]).
    pub fn new(ty: SockType) -> io::Result<MrcSocket> {
        MrcSocket::with_family(family()?, ty)
    }

    /// A new unconnected socket in address family `family` (for a module
    /// loaded with a known `family` parameter).
    pub fn with_family(family: i32, ty: SockType) -> io::Result<MrcSocket> {
        // SAFETY: plain system call.
        let fd = cvt(unsafe { libc::socket(family, ty.raw() | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: fd was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(MrcSocket { fd, family })
    }

    /// Wraps a descriptor that is an MRC socket of address family `family`.
    /// Nothing is checked: calls on another kind of descriptor fail.
    pub fn from_fd(fd: OwnedFd, family: i32) -> MrcSocket {
        MrcSocket { fd, family }
    }

    /// A socket of type `ty` bound to `addr` and listening.
    pub fn bind_listen(ty: SockType, addr: &SocketAddr, backlog: i32) -> io::Result<MrcSocket> {
        let s = MrcSocket::new(ty)?;
        s.bind(addr)?;
        s.listen(backlog)?;
        Ok(s)
    }

    /// A socket of type `ty` connected to `addr`.
    pub fn connect_to(ty: SockType, addr: &SocketAddr) -> io::Result<MrcSocket> {
        let s = MrcSocket::new(ty)?;
        s.connect(addr)?;
        Ok(s)
    }

    /// The address family (AF_MRC) the socket was created in.
    pub fn family(&self) -> i32 {
        self.family
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// bind(): port 0 picks a free MRC port.
    pub fn bind(&self, addr: &SocketAddr) -> io::Result<()> {
        let sa = SockaddrMrc::new(self.family, addr);
        let (p, len) = sa.as_raw();
        // SAFETY: p points to sa, valid for len bytes.
        cvt(unsafe { libc::bind(self.raw(), p, len) }).map(drop)
    }

    /// listen().
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        // SAFETY: plain system call.
        cvt(unsafe { libc::listen(self.raw(), backlog) }).map(drop)
    }

    /// connect(). On a non-blocking socket this fails with `EINPROGRESS`
    /// and the outcome is read with [`MrcSocket::take_error`] once the
    /// socket is writable.
    pub fn connect(&self, addr: &SocketAddr) -> io::Result<()> {
        let sa = SockaddrMrc::new(self.family, addr);
        let (p, len) = sa.as_raw();
        // SAFETY: p points to sa, valid for len bytes.
        cvt(unsafe { libc::connect(self.raw(), p, len) }).map(drop)
    }

    /// Accepts a connection (retrying on `EINTR`); returns it and the
    /// peer's address.
    pub fn accept(&self) -> io::Result<(MrcSocket, SocketAddr)> {
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
        loop {
            let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: ss is writable for len bytes.
            let rc = unsafe {
                libc::accept4(
                    self.raw(),
                    &mut ss as *mut _ as *mut libc::sockaddr,
                    &mut len,
                    libc::SOCK_CLOEXEC,
                )
            };
            match cvt(rc) {
                Ok(fd) => {
                    // SAFETY: fd was just accepted and is owned by nobody else.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    let s = MrcSocket {
                        fd,
                        family: self.family,
                    };
                    return Ok((s, mrc_from_storage(&ss, len)?));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn name(&self, peer: bool) -> io::Result<SocketAddr> {
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = &mut ss as *mut _ as *mut libc::sockaddr;
        // SAFETY: ss is writable for len bytes.
        let rc = unsafe {
            if peer {
                libc::getpeername(self.raw(), p, &mut len)
            } else {
                libc::getsockname(self.raw(), p, &mut len)
            }
        };
        cvt(rc)?;
        mrc_from_storage(&ss, len)
    }

    /// The local address (0.0.0.0 port 0 before bind() or connect()).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.name(false)
    }

    /// The peer's address (`ENOTCONN` if not connected).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.name(true)
    }

    /// send() with `MSG_NOSIGNAL` (a closed peer gives `EPIPE`, no
    /// SIGPIPE). On a SOCK_SEQPACKET socket `buf` is one message of at most
    /// [`crate::MRC_MAX_MSG`] bytes.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for its length.
        cvt_size(unsafe {
            libc::send(
                self.raw(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        })
    }

    /// recv(); 0 is end of stream. On a SOCK_SEQPACKET socket one call
    /// returns one message, cut to `buf.len()` (see [`MrcSocket::recv_msg`]).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is writable for its length.
        cvt_size(unsafe {
            libc::recv(
                self.raw(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        })
    }

    /// Receives one message of a SOCK_SEQPACKET socket: its length and
    /// whether it was longer than `buf` (`MSG_TRUNC`: the rest is lost).
    pub fn recv_msg(&self, buf: &mut [u8]) -> io::Result<(usize, bool)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // SAFETY: the iovec points into buf, writable for its length.
        let n = cvt_size(unsafe { libc::recvmsg(self.raw(), &mut msg, 0) })?;
        Ok((n, msg.msg_flags & libc::MSG_TRUNC != 0))
    }

    /// shutdown().
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let how = match how {
            Shutdown::Read => libc::SHUT_RD,
            Shutdown::Write => libc::SHUT_WR,
            Shutdown::Both => libc::SHUT_RDWR,
        };
        // SAFETY: plain system call.
        cvt(unsafe { libc::shutdown(self.raw(), how) }).map(drop)
    }

    /// Sets or clears `O_NONBLOCK`.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        // SAFETY: plain system call.
        let fl = cvt(unsafe { libc::fcntl(self.raw(), libc::F_GETFL) })?;
        let new = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        // SAFETY: plain system call.
        cvt(unsafe { libc::fcntl(self.raw(), libc::F_SETFL, new) }).map(drop)
    }

    /// `SO_RCVTIMEO`; `None` waits forever.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_timeout(libc::SO_RCVTIMEO, t)
    }

    /// `SO_SNDTIMEO`; `None` waits forever. It also bounds a blocking
    /// connect().
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_timeout(libc::SO_SNDTIMEO, t)
    }

    fn set_timeout(&self, opt: i32, t: Option<Duration>) -> io::Result<()> {
        let t = t.unwrap_or(Duration::ZERO);
        let tv = libc::timeval {
            tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_usec: t.subsec_micros() as libc::suseconds_t,
        };
        self.setsockopt(libc::SOL_SOCKET, opt, &tv)
    }

    /// `SO_ERROR`: the pending error, cleared by reading it.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let e: libc::c_int = self.getsockopt(libc::SOL_SOCKET, libc::SO_ERROR)?;
        Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
    }

    /// The socket type (`SO_TYPE`).
    pub fn sock_type(&self) -> io::Result<SockType> {
        let t: libc::c_int = self.getsockopt(libc::SOL_SOCKET, libc::SO_TYPE)?;
        match t {
            libc::SOCK_SEQPACKET => Ok(SockType::Seqpacket),
            libc::SOCK_STREAM => Ok(SockType::Stream),
            _ => Err(io::Error::from_raw_os_error(libc::EPROTOTYPE)),
        }
    }

    /// The socket cookie (`SO_COOKIE`): the key of the connection in
    /// `mrc-status` (`mrc-status show --cookie N`, `mrc-status paths
    /// --cookie N`; `conns` prints it where the session id is withheld).
    pub fn cookie(&self) -> io::Result<u64> {
        self.getsockopt(libc::SOL_SOCKET, libc::SO_COOKIE)
    }

    /// setsockopt() with a plain-data value.
    pub(crate) fn setsockopt<T: Copy>(&self, level: i32, name: i32, val: &T) -> io::Result<()> {
        self.setsockopt_bytes(
            level,
            name,
            val as *const T as *const u8,
            mem::size_of::<T>(),
        )
    }

    /// setsockopt() with `len` bytes at `p`.
    pub(crate) fn setsockopt_bytes(
        &self,
        level: i32,
        name: i32,
        p: *const u8,
        len: usize,
    ) -> io::Result<()> {
        // SAFETY: callers pass a pointer valid for len bytes.
        cvt(unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                p as *const libc::c_void,
                len as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// getsockopt() of a plain-data value that any bit pattern is valid for
    /// (integers and C structs of integers).
    pub(crate) fn getsockopt<T: Copy + Default>(&self, level: i32, name: i32) -> io::Result<T> {
        let mut v = T::default();
        let mut len = mem::size_of::<T>() as libc::socklen_t;
        // SAFETY: v is writable for len bytes; T is plain data.
        cvt(unsafe {
            libc::getsockopt(
                self.raw(),
                level,
                name,
                &mut v as *mut T as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok(v)
    }

    /// getsockopt() into a byte buffer, returning the length the kernel
    /// wrote.
    pub(crate) fn getsockopt_bytes(
        &self,
        level: i32,
        name: i32,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let mut len = buf.len() as libc::socklen_t;
        // SAFETY: buf is writable for len bytes.
        cvt(unsafe {
            libc::getsockopt(
                self.raw(),
                level,
                name,
                buf.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok((len as usize).min(buf.len()))
    }
}

impl Read for MrcSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Read for &MrcSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv(buf)
    }
}

impl Write for MrcSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &MrcSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for MrcSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for MrcSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl IntoRawFd for MrcSocket {
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

impl From<MrcSocket> for OwnedFd {
    fn from(s: MrcSocket) -> OwnedFd {
        s.fd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module is not loaded on build hosts: family 23 is not
    /// registered, so socket() fails with EAFNOSUPPORT. Where the module is
    /// loaded the socket is created.
    #[test]
    fn new_socket_or_eafnosupport() {
        match MrcSocket::new(SockType::Seqpacket) {
            Ok(s) => assert_eq!(s.sock_type().expect("SO_TYPE"), SockType::Seqpacket),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EAFNOSUPPORT), "{e}"),
        }
    }

    /// The generic calls work on any socket: an AF_UNIX pair stands in for
    /// a connected MRC socket.
    #[test]
    fn generic_calls_on_a_socketpair() {
        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
        // SAFETY: both descriptors were just created.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (a, b) = (MrcSocket::from_fd(a, 23), MrcSocket::from_fd(b, 23));
        assert_eq!(a.sock_type().expect("type"), SockType::Seqpacket);
        assert_ne!(a.cookie().expect("cookie"), b.cookie().expect("cookie"));
        assert_eq!(a.send(b"hello").expect("send"), 5);
        let mut buf = [0u8; 3];
        assert_eq!(b.recv_msg(&mut buf).expect("recv"), (3, true));
        assert_eq!(&buf, b"hel");
        b.set_nonblocking(true).expect("nonblock");
        let e = b.recv(&mut buf).expect_err("empty");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        b.set_read_timeout(Some(Duration::from_millis(10)))
            .expect("timeout");
        assert!(a.take_error().expect("SO_ERROR").is_none());
        a.shutdown(Shutdown::Write).expect("shutdown");
        b.set_nonblocking(false).expect("block");
        assert_eq!(b.recv(&mut buf).expect("eof"), 0);
    }
}
