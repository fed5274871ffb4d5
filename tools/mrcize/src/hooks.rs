// SPDX-License-Identifier: GPL-2.0
//! The C library functions mrcize replaces. Each one passes the call
//! through unchanged unless it is about a TCP socket that mrcize turned
//! into an MRC socket.
//!
//! Calls that carry no address (read, write, send, recv, poll, ...) are not
//! replaced: MRC SOCK_STREAM sockets behave like TCP ones for them.

use crate::fallback;
use crate::fdtab::{self, Kind, Slot, F_BOUND, F_NB_CONNECT};
use crate::opts::{self, Act, OPTS};
use crate::xlate::{self, In, Op};
use crate::{config, log, real};
use libc::{c_int, c_void, size_t, sockaddr, socklen_t, ssize_t};
use libmrc::SockaddrMrc;
use std::mem;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

fn errno() -> c_int {
    // SAFETY: __errno_location() returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

fn err(e: c_int) -> c_int {
    set_errno(e);
    -1
}

fn err_s(e: c_int) -> ssize_t {
    set_errno(e);
    -1
}

const STORAGE: usize = mem::size_of::<libc::sockaddr_storage>();

fn storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    unsafe { mem::zeroed() }
}

/// An MRC socket standing in for a TCP socket.
#[derive(Clone, Copy)]
struct Mrc {
    /// AF_INET or AF_INET6: what the program asked for.
    family: i32,
    /// Its record; None for descriptors beyond the table.
    slot: Option<&'static Slot>,
}

impl Mrc {
    fn v6only(&self) -> bool {
        self.slot
            .and_then(|s| s.opt(opts::v6only_index()))
            .is_some_and(|v| v != 0)
    }
}

/// An integer socket option read with the C library's getsockopt().
fn sockopt_int(fd: c_int, level: c_int, name: c_int) -> Result<c_int, c_int> {
    let mut v: c_int = 0;
    let mut len = mem::size_of::<c_int>() as socklen_t;
    // SAFETY: v is writable for len bytes.
    let rc = unsafe {
        real::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut c_int as *mut c_void,
            &mut len,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(v)
    }
}

/// The local or peer address of an MRC socket.
fn mrc_name(fd: c_int, peer: bool) -> Option<SocketAddr> {
    let mut ss = storage();
    let mut len = STORAGE as socklen_t;
    let p = &mut ss as *mut _ as *mut sockaddr;
    // SAFETY: ss is writable for len bytes.
    let rc = unsafe {
        if peer {
            real::getpeername(fd, p, &mut len)
        } else {
            real::getsockname(fd, p, &mut len)
        }
    };
    if rc < 0 {
        return None;
    }
    parse_mrc(&ss, len)
}

fn parse_mrc(ss: &libc::sockaddr_storage, len: socklen_t) -> Option<SocketAddr> {
    let len = (len as usize).min(STORAGE);
    // SAFETY: ss is a sockaddr_storage, valid for len <= STORAGE bytes.
    let b = unsafe { std::slice::from_raw_parts(ss as *const _ as *const u8, len) };
    SockaddrMrc::from_bytes(b)?.to_socket_addr()
}

/// What a descriptor mrcize has no record of is: an inherited MRC stream
/// socket (its family taken from its bound or peer address), or not one.
/// None if the descriptor is not open.
fn probe(fd: c_int) -> Option<Option<i32>> {
    let saved = errno();
    let r = match sockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN) {
        Err(libc::EBADF) => None,
        Err(_) => Some(None),
        Ok(d) if d != config::mrc_family() => Some(None),
        Ok(_) if sockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) != Ok(libc::SOCK_STREAM) => {
            Some(None)
        }
        Ok(_) => {
            let v6 = |a: Option<SocketAddr>| match a {
                Some(SocketAddr::V6(v6)) => Some(v6.ip().to_ipv4_mapped().is_none()),
                Some(SocketAddr::V4(v4)) if !v4.ip().is_unspecified() => Some(false),
                _ => None,
            };
            let is_v6 = v6(mrc_name(fd, false)).or_else(|| v6(mrc_name(fd, true)));
            Some(Some(if is_v6 == Some(true) {
                libc::AF_INET6
            } else {
                libc::AF_INET
            }))
        }
    };
    set_errno(saved);
    r
}

/// Whether `fd` is an MRC socket standing in for TCP.
fn classify(fd: c_int) -> Option<Mrc> {
    let slot = fdtab::get(fd);
    if let Some(s) = slot {
        let st = s.state();
        match st.kind() {
            Kind::Mrc => {
                return Some(Mrc {
                    family: st.family(),
                    slot,
                })
            }
            Kind::Plain => return None,
            Kind::Unknown => {}
        }
    }
    let found = probe(fd)?;
    let slot = fdtab::get_or_alloc(fd);
    match found {
        Some(family) => {
            if let Some(s) = slot {
                s.reset(Kind::Mrc, family);
            }
            Some(Mrc { family, slot })
        }
        None => {
            if let Some(s) = slot {
                s.reset(Kind::Plain, 0);
            }
            None
        }
    }
}

fn mark(fd: c_int, kind: Kind, family: i32) {
    if let Some(s) = fdtab::get_or_alloc(fd) {
        s.reset(kind, family);
    }
}

/// The bytes of a caller's address argument, checked as the kernel does.
///
/// # Safety
///
/// `p` must be valid for `len` bytes if not null.
unsafe fn user_addr<'a>(p: *const sockaddr, len: socklen_t) -> Result<&'a [u8], c_int> {
    let len = len as i32;
    if len < 0 || len as usize > STORAGE {
        return Err(libc::EINVAL);
    }
    if p.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(libc::EFAULT) };
    }
    // SAFETY: the caller guarantees p is valid for len bytes.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len as usize) })
}

/// Checks a caller's (address, length) output pair before the call:
/// returns the room the caller gave.
///
/// # Safety
///
/// `len` must be valid if not null.
unsafe fn out_room(addr: *mut sockaddr, len: *mut socklen_t) -> Result<i32, c_int> {
    if len.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: len is valid (caller).
    let room = unsafe { *len } as i32;
    if room < 0 {
        return Err(libc::EINVAL);
    }
    if addr.is_null() && room > 0 {
        return Err(libc::EFAULT);
    }
    Ok(room)
}

/// Gives the caller the program's view of the MRC address the kernel wrote
/// (`klen` bytes of `ss`), cut to `room` bytes; `*len` becomes the full
/// length.
///
/// # Safety
///
/// `addr` must be writable for `room` bytes and `len` valid.
unsafe fn put_addr(
    ss: &libc::sockaddr_storage,
    klen: socklen_t,
    family: i32,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    room: i32,
) {
    let (buf, n);
    let src: &[u8] = match parse_mrc(ss, klen) {
        Some(a) => {
            (buf, n) = xlate::from_mrc(&a, family);
            &buf[..n]
        }
        None => {
            let k = (klen as usize).min(STORAGE);
            // SAFETY: ss is valid for STORAGE bytes.
            unsafe { std::slice::from_raw_parts(ss as *const _ as *const u8, k) }
        }
    };
    let copy = xlate::copy_len(room, src.len()).unwrap_or(0);
    // SAFETY: addr is writable for room >= copy bytes (caller); len valid.
    unsafe {
        if copy > 0 {
            std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, copy);
        }
        *len = src.len() as socklen_t;
    }
}

/// The MRC form of a translated address.
fn mrc_addr(a: &SocketAddr) -> SockaddrMrc {
    SockaddrMrc::new(config::mrc_family(), a)
}

static UNAVAILABLE_LOGGED: AtomicBool = AtomicBool::new(false);

/// socket(): TCP sockets of AF_INET and AF_INET6 become AF_MRC SOCK_STREAM
/// sockets; without MRC (module not loaded, or without SOCK_STREAM) they
/// stay TCP and one line says so.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let tcp = (domain == libc::AF_INET || domain == libc::AF_INET6)
        && base == libc::SOCK_STREAM
        && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    if tcp {
        let f = config::mrc_family();
        // SAFETY: plain system call.
        let fd = unsafe { real::socket(f, ty, 0) };
        if fd >= 0 {
            mark(fd, Kind::Mrc, domain);
            return fd;
        }
        let e = errno();
        if !matches!(
            e,
            libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT | libc::ESOCKTNOSUPPORT | libc::EPROTOTYPE
        ) {
            return err(e);
        }
        if !UNAVAILABLE_LOGGED.swap(true, Relaxed) {
            log::line(format_args!(
                "no MRC stream sockets (AF_MRC {f}: {}): using TCP",
                log::Errno(e)
            ));
        }
    }
    // SAFETY: plain system call.
    let fd = unsafe { real::socket(domain, ty, protocol) };
    if fd >= 0 {
        mark(fd, Kind::Plain, 0);
    }
    fd
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(m) = classify(fd) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::bind(fd, addr, len) };
    };
    // SAFETY: addr is valid for len bytes (caller).
    let b = match unsafe { user_addr(addr, len) } {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    match xlate::to_mrc(b, m.family, Op::Bind, m.v6only()) {
        Err(e) => err(e),
        // SAFETY: the caller's arguments, passed on.
        Ok(In::Unchanged) => unsafe { real::bind(fd, addr, len) },
        Ok(In::Mrc(a)) => {
            let sa = mrc_addr(&a);
            let (p, l) = sa.as_raw();
            // SAFETY: p points to sa, valid for l bytes.
            let rc = unsafe { real::bind(fd, p, l) };
            if rc == 0 {
                if let Some(s) = m.slot {
                    s.bound.store(b);
                    s.set_flag(F_BOUND, true);
                }
            }
            rc
        }
    }
}

/// connect(); with MRCIZE_FALLBACK, a refused connection is made again
/// over TCP on the same descriptor (see the fallback module).
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let Some(m) = classify(fd) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::connect(fd, addr, len) };
    };
    // SAFETY: addr is valid for len bytes (caller).
    let b = match unsafe { user_addr(addr, len) } {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    let rc = match xlate::to_mrc(b, m.family, Op::Connect, m.v6only()) {
        Err(e) => return err(e),
        // SAFETY: the caller's arguments, passed on.
        Ok(In::Unchanged) => return unsafe { real::connect(fd, addr, len) },
        Ok(In::Mrc(a)) => {
            let sa = mrc_addr(&a);
            let (p, l) = sa.as_raw();
            // SAFETY: p points to sa, valid for l bytes.
            unsafe { real::connect(fd, p, l) }
        }
    };
    let Some(s) = m.slot.filter(|_| config::fallback()) else {
        return rc;
    };
    if rc == 0 {
        s.set_flag(F_NB_CONNECT, false);
        return 0;
    }
    match errno() {
        e if fallback::falls_back(e) => {
            s.set_flag(F_NB_CONNECT, false);
            // SAFETY: fd is the caller's MRC socket.
            unsafe { fallback::to_tcp(fd, s, m.family, b, e) }
        }
        libc::EINPROGRESS => match fallback::wait_outcome(fd, config::fallback_wait_ms()) {
            // Connected within the wait: a non-blocking connect() may say so.
            Some(0) => 0,
            Some(e) if fallback::falls_back(e) => {
                // SAFETY: fd is the caller's MRC socket.
                unsafe { fallback::to_tcp(fd, s, m.family, b, e) }
            }
            Some(e) => err(e),
            None => {
                s.dest.store(b);
                s.set_flag(F_NB_CONNECT, true);
                err(libc::EINPROGRESS)
            }
        },
        e => err(e),
    }
}

/// accept() and accept4(): the connection inherits the listener's family
/// and the options mrcize stands in for, as TCP's do.
///
/// # Safety
///
/// As for the C function.
unsafe fn do_accept(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: Option<c_int>,
) -> c_int {
    let Some(m) = classify(fd) else {
        // SAFETY: the caller's arguments, passed on.
        let nfd = unsafe {
            match flags {
                Some(f) => real::accept4(fd, addr, len, f),
                None => real::accept(fd, addr, len),
            }
        };
        if nfd >= 0 {
            mark(nfd, Kind::Plain, 0);
        }
        return nfd;
    };
    let room = if addr.is_null() {
        None
    } else {
        // SAFETY: len is valid if not null (caller).
        match unsafe { out_room(addr, len) } {
            Ok(r) => Some(r),
            Err(e) => return err(e),
        }
    };
    let mut ss = storage();
    let mut klen = STORAGE as socklen_t;
    // SAFETY: ss is writable for klen bytes.
    let nfd = unsafe {
        real::accept4(
            fd,
            &mut ss as *mut _ as *mut sockaddr,
            &mut klen,
            flags.unwrap_or(0),
        )
    };
    if nfd < 0 {
        return nfd;
    }
    if let Some(s) = fdtab::get_or_alloc(nfd) {
        match m.slot {
            Some(l) => {
                s.copy_from(l);
                s.set_flag(F_BOUND | F_NB_CONNECT, false);
            }
            None => s.reset(Kind::Mrc, m.family),
        }
    }
    if let Some(room) = room {
        // SAFETY: addr is writable for room bytes, len valid (caller).
        unsafe { put_addr(&ss, klen, m.family, addr, len, room) };
    }
    nfd
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_accept(fd, addr, len, None) }
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_accept(fd, addr, len, Some(flags)) }
}

/// # Safety
///
/// As for getsockname()/getpeername().
unsafe fn do_name(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, peer: bool) -> c_int {
    let call = |a, l| {
        // SAFETY: a and l are the caller's or ours, valid.
        unsafe {
            if peer {
                real::getpeername(fd, a, l)
            } else {
                real::getsockname(fd, a, l)
            }
        }
    };
    let Some(m) = classify(fd) else {
        return call(addr, len);
    };
    // SAFETY: len is valid if not null (caller).
    let room = match unsafe { out_room(addr, len) } {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    let mut ss = storage();
    let mut klen = STORAGE as socklen_t;
    if call(&mut ss as *mut _ as *mut sockaddr, &mut klen) < 0 {
        return -1;
    }
    // SAFETY: addr is writable for room bytes, len valid (caller).
    unsafe { put_addr(&ss, klen, m.family, addr, len, room) };
    0
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_name(fd, addr, len, false) }
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_name(fd, addr, len, true) }
}

/// The MRC address to send with for a program's sendto()/sendmsg()
/// address: None when it is not a valid address of the program's family
/// (TCP ignores the address of a send; so does mrcize then).
fn send_addr(fd: c_int, b: &[u8]) -> Option<Option<SockaddrMrc>> {
    let m = classify(fd)?;
    Some(match xlate::to_mrc(b, m.family, Op::Send, m.v6only()) {
        Ok(In::Mrc(a)) => Some(mrc_addr(&a)),
        _ => None,
    })
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if !addr.is_null() {
        // SAFETY: addr is valid for len bytes (caller).
        let b = match unsafe { user_addr(addr, len) } {
            Ok(b) => b,
            Err(e) => return err_s(e),
        };
        if let Some(sa) = send_addr(fd, b) {
            let (p, l) = match &sa {
                Some(sa) => sa.as_raw(),
                None => (std::ptr::null(), 0),
            };
            // SAFETY: buf is the caller's; p is null or points to sa.
            return unsafe { real::sendto(fd, buf, n, flags, p, l) };
        }
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { real::sendto(fd, buf, n, flags, addr, len) }
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    // SAFETY: msg is valid if not null (caller).
    if let Some(h) = unsafe { msg.as_ref() } {
        if !h.msg_name.is_null() {
            // SAFETY: msg_name is valid for msg_namelen bytes (caller).
            let b = match unsafe { user_addr(h.msg_name as *const sockaddr, h.msg_namelen) } {
                Ok(b) => b,
                Err(e) => return err_s(e),
            };
            if let Some(sa) = send_addr(fd, b) {
                let mut local = *h;
                match &sa {
                    Some(sa) => {
                        let (p, l) = sa.as_raw();
                        local.msg_name = p as *mut c_void;
                        local.msg_namelen = l;
                    }
                    None => {
                        local.msg_name = std::ptr::null_mut();
                        local.msg_namelen = 0;
                    }
                }
                // SAFETY: local is the caller's header with our address.
                return unsafe { real::sendmsg(fd, &local, flags) };
            }
        }
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { real::sendmsg(fd, msg, flags) }
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    let m = if addr.is_null() { None } else { classify(fd) };
    let Some(m) = m else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::recvfrom(fd, buf, n, flags, addr, len) };
    };
    // SAFETY: len is valid if not null (caller).
    let room = match unsafe { out_room(addr, len) } {
        Ok(r) => r,
        Err(e) => return err_s(e),
    };
    let mut ss = storage();
    let mut klen = STORAGE as socklen_t;
    // SAFETY: buf is the caller's; ss is writable for klen bytes.
    let r = unsafe {
        real::recvfrom(
            fd,
            buf,
            n,
            flags,
            &mut ss as *mut _ as *mut sockaddr,
            &mut klen,
        )
    };
    if r >= 0 {
        if klen == 0 {
            // SAFETY: len is valid (checked above).
            unsafe { *len = 0 };
        } else {
            // SAFETY: addr is writable for room bytes, len valid (caller).
            unsafe { put_addr(&ss, klen, m.family, addr, len, room) };
        }
    }
    r
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    // SAFETY: msg is valid if not null (caller).
    let Some(h) = (unsafe { msg.as_mut() }) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::recvmsg(fd, msg, flags) };
    };
    let m = if h.msg_name.is_null() {
        None
    } else {
        classify(fd)
    };
    let Some(m) = m else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::recvmsg(fd, msg, flags) };
    };
    let room = h.msg_namelen as i32;
    if room < 0 {
        return err_s(libc::EINVAL);
    }
    let mut ss = storage();
    let mut local = *h;
    local.msg_name = &mut ss as *mut _ as *mut c_void;
    local.msg_namelen = STORAGE as socklen_t;
    // SAFETY: local is the caller's header with our address buffer.
    let r = unsafe { real::recvmsg(fd, &mut local, flags) };
    if r >= 0 {
        h.msg_controllen = local.msg_controllen;
        h.msg_flags = local.msg_flags;
        if local.msg_namelen == 0 {
            h.msg_namelen = 0;
        } else {
            let name = h.msg_name as *mut sockaddr;
            // SAFETY: msg_name is writable for room bytes (caller).
            unsafe {
                put_addr(
                    &ss,
                    local.msg_namelen,
                    m.family,
                    name,
                    &mut h.msg_namelen,
                    room,
                )
            };
        }
    }
    r
}

/// Hands an integer option value to a getsockopt() caller.
///
/// # Safety
///
/// `val` must be writable for `*len` bytes, `len` valid if not null.
unsafe fn put_int(level: c_int, v: i32, val: *mut c_void, len: *mut socklen_t) -> c_int {
    if len.is_null() {
        return err(libc::EFAULT);
    }
    // SAFETY: len is valid (caller).
    let room = unsafe { *len } as i32;
    match opts::int_out(level, v, room) {
        Err(e) => err(e),
        Ok((_, n)) if n > 0 && val.is_null() => err(libc::EFAULT),
        Ok((b, n)) => {
            // SAFETY: val is writable for room >= n bytes; len valid.
            unsafe {
                std::ptr::copy_nonoverlapping(b.as_ptr(), val as *mut u8, n);
                *len = n as socklen_t;
            }
            0
        }
    }
}

/// Hands bytes to a getsockopt() caller, cut to its room.
///
/// # Safety
///
/// As for [`put_int`].
unsafe fn put_bytes(b: &[u8], val: *mut c_void, len: *mut socklen_t) -> c_int {
    if len.is_null() {
        return err(libc::EFAULT);
    }
    // SAFETY: len is valid (caller).
    let room = unsafe { *len } as i32;
    let n = match xlate::copy_len(room, b.len()) {
        Ok(n) => n,
        Err(e) => return err(e),
    };
    if n > 0 && val.is_null() {
        return err(libc::EFAULT);
    }
    // SAFETY: val is writable for room >= n bytes; len valid.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), val as *mut u8, n);
        *len = n as socklen_t;
    }
    0
}

/// tcpi_state for TCP_INFO: established if the socket has a peer,
/// listening if it listens, else closed.
fn tcp_state(fd: c_int) -> u8 {
    let saved = errno();
    let s = if mrc_name(fd, true).is_some() {
        opts::TCP_ESTABLISHED
    } else if sockopt_int(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) == Ok(1) {
        opts::TCP_LISTEN
    } else {
        opts::TCP_CLOSE
    };
    set_errno(saved);
    s
}

/// The congestion controller name reported for TCP_CONGESTION: the
/// program's, else MRC's.
fn cc_name(fd: c_int, m: &Mrc) -> [u8; opts::TCP_CA_NAME_MAX] {
    if let Some(c) = m.slot.map(|s| s.cc()).filter(|c| c[0] != 0) {
        return c;
    }
    let mut b = [0u8; opts::TCP_CA_NAME_MAX];
    let mut len = (b.len() - 1) as socklen_t;
    // SAFETY: b is writable for len bytes.
    let rc = unsafe {
        real::getsockopt(
            fd,
            libmrc::SOL_MRC,
            libmrc::MRC_CC,
            b.as_mut_ptr() as *mut c_void,
            &mut len,
        )
    };
    if rc < 0 {
        b = [0; opts::TCP_CA_NAME_MAX];
        b[..4].copy_from_slice(b"reno");
    }
    b
}

/// SO_ERROR; after a failed non-blocking connect with MRCIZE_FALLBACK,
/// starts the TCP fallback and reports its outcome instead.
///
/// # Safety
///
/// As for getsockopt().
unsafe fn so_error(fd: c_int, m: &Mrc, val: *mut c_void, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    let rc = unsafe { real::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, val, len) };
    let Some(s) = m.slot.filter(|s| s.state().has(F_NB_CONNECT)) else {
        return rc;
    };
    // SAFETY: len is valid after a successful call.
    if rc != 0 || val.is_null() || (unsafe { *len } as usize) < mem::size_of::<c_int>() {
        return rc;
    }
    // SAFETY: val holds the int the kernel wrote.
    let v = unsafe { *(val as *const c_int) };
    if v == 0 {
        // Still connecting, or connected (then no fallback any more).
        if mrc_name(fd, true).is_some() {
            s.set_flag(F_NB_CONNECT, false);
        }
        return rc;
    }
    s.set_flag(F_NB_CONNECT, false);
    if !fallback::falls_back(v) || !config::fallback() {
        return rc;
    }
    let (dest, n) = s.dest.load();
    // SAFETY: fd is the program's MRC socket.
    let r = unsafe { fallback::to_tcp(fd, s, m.family, &dest[..n], v) };
    let e = if r == 0 || errno() == libc::EINPROGRESS {
        0
    } else {
        errno()
    };
    // SAFETY: val is writable for an int (checked above).
    unsafe { *(val as *mut c_int) = e };
    0
}

/// getsockopt(): SO_DOMAIN and SO_PROTOCOL say TCP of the program's
/// family; TCP, IP and IPv6 options are answered by mrcize (see opts);
/// everything else goes to the kernel.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let ours = match level {
        libc::SOL_SOCKET => matches!(name, libc::SO_DOMAIN | libc::SO_PROTOCOL | libc::SO_ERROR),
        libc::IPPROTO_TCP | libc::IPPROTO_IP | libc::IPPROTO_IPV6 => true,
        _ => false,
    };
    let m = if ours { classify(fd) } else { None };
    let Some(m) = m else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::getsockopt(fd, level, name, val, len) };
    };
    // What to answer; the value is written out below. Byte answers go to
    // `bytes`.
    enum Answer {
        Int(i32),
        Bytes(usize),
        SoError,
    }
    let mut bytes = [0u8; opts::TCP_INFO_LEN];
    let answer = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => Answer::Int(m.family),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => Answer::Int(libc::IPPROTO_TCP),
        (libc::SOL_SOCKET, _) => Answer::SoError,
        // What Linux answers for a TCP socket of AF_INET.
        (libc::IPPROTO_IPV6, _) if m.family != libc::AF_INET6 => return err(libc::EOPNOTSUPP),
        (libc::IPPROTO_TCP, libc::TCP_INFO) => {
            bytes = opts::tcp_info(tcp_state(fd));
            Answer::Bytes(opts::TCP_INFO_LEN)
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
            bytes[..opts::TCP_CA_NAME_MAX].copy_from_slice(&cc_name(fd, &m));
            Answer::Bytes(opts::TCP_CA_NAME_MAX)
        }
        _ => match opts::index(level, name) {
            Some(i) => Answer::Int(m.slot.and_then(|s| s.opt(i)).unwrap_or(OPTS[i].default)),
            None => return err(libc::ENOPROTOOPT),
        },
    };
    match answer {
        // SAFETY: val and len are the caller's, valid as for getsockopt().
        Answer::Int(v) => unsafe { put_int(level, v, val, len) },
        // SAFETY: as above.
        Answer::Bytes(n) => unsafe { put_bytes(&bytes[..n], val, len) },
        // SAFETY: as above.
        Answer::SoError => unsafe { so_error(fd, &m, val, len) },
    }
}

/// TCP_CONGESTION: remembered; a name MRC knows also selects MRC's
/// controller (before connect() only, as MRC_CC allows).
///
/// # Safety
///
/// `val` must be valid for `len` bytes.
unsafe fn set_cc(fd: c_int, m: &Mrc, val: *const c_void, len: socklen_t) -> c_int {
    // SAFETY: val is valid for len bytes (caller).
    let b = match unsafe { user_addr(val as *const sockaddr, len.min(STORAGE as socklen_t)) } {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    let b = &b[..b.len().min(opts::TCP_CA_NAME_MAX - 1)];
    let name = &b[..b.iter().position(|c| *c == 0).unwrap_or(b.len())];
    if name.is_empty() {
        return err(libc::ENOENT);
    }
    let saved = errno();
    // SAFETY: name is valid for its length. Refusals (unknown name,
    // already connected) leave MRC's controller as it is.
    unsafe {
        real::setsockopt(
            fd,
            libmrc::SOL_MRC,
            libmrc::MRC_CC,
            name.as_ptr() as *const c_void,
            name.len() as socklen_t,
        )
    };
    set_errno(saved);
    if let Some(s) = m.slot {
        s.set_cc(name);
    }
    0
}

/// setsockopt(): SOL_SOCKET goes to the kernel (and is recorded for a TCP
/// fallback); TCP, IP and IPv6 options are checked and remembered by
/// mrcize (see opts); other levels go to the kernel.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    let ours = matches!(
        level,
        libc::SOL_SOCKET | libc::IPPROTO_TCP | libc::IPPROTO_IP | libc::IPPROTO_IPV6
    );
    let m = if ours { classify(fd) } else { None };
    let Some(m) = m else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::setsockopt(fd, level, name, val, len) };
    };
    let idx = opts::index(level, name);
    if level == libc::SOL_SOCKET {
        // SAFETY: the caller's arguments, passed on.
        let rc = unsafe { real::setsockopt(fd, level, name, val, len) };
        if let (0, Some(i), Some(s)) = (rc, idx, m.slot) {
            if OPTS[i].act == Act::Kernel
                && !val.is_null()
                && len as usize >= mem::size_of::<c_int>()
            {
                // SAFETY: val holds at least an int (checked).
                s.set_opt(
                    i,
                    Some(unsafe { std::ptr::read_unaligned(val as *const c_int) }),
                );
            }
        }
        return rc;
    }
    if level == libc::IPPROTO_IPV6 && m.family != libc::AF_INET6 {
        return err(libc::ENOPROTOOPT);
    }
    if level == libc::IPPROTO_TCP && name == libc::TCP_CONGESTION {
        // SAFETY: the caller's arguments.
        return unsafe { set_cc(fd, &m, val, len) };
    }
    let Some(i) = idx else {
        return err(libc::ENOPROTOOPT);
    };
    if val.is_null() {
        return err(libc::EFAULT);
    }
    // SAFETY: val is valid for len bytes (caller).
    let b = match unsafe { user_addr(val as *const sockaddr, len.min(STORAGE as socklen_t)) } {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    let v = match opts::parse_set(&OPTS[i], b) {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    if i == opts::v6only_index() {
        // IPV6_V6ONLY cannot change once the socket is bound.
        let bound = m.slot.is_some_and(|s| s.state().has(F_BOUND))
            || mrc_name(fd, false).is_some_and(|a| a.port() != 0);
        if bound {
            return err(libc::EINVAL);
        }
    }
    if let Some(s) = m.slot {
        s.set_opt(i, v);
    }
    0
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    fdtab::forget(fd);
    // SAFETY: plain system call.
    unsafe { real::close(fd) }
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: plain system call.
    let n = unsafe { real::dup(fd) };
    if n >= 0 {
        fdtab::dup(fd, n);
    }
    n
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: plain system call.
    let n = unsafe { real::dup2(old, new) };
    if n >= 0 && old != new {
        fdtab::dup(old, n);
    }
    n
}

/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: plain system call.
    let n = unsafe { real::dup3(old, new, flags) };
    if n >= 0 {
        fdtab::dup(old, n);
    }
    n
}

fn after_fcntl(fd: c_int, cmd: c_int, r: c_int) -> c_int {
    if r >= 0 && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) {
        fdtab::dup(fd, r);
    }
    r
}

/// fcntl(): F_DUPFD and F_DUPFD_CLOEXEC duplicate the record.
///
/// fcntl() is variadic in C; its optional argument (an int or a pointer)
/// is taken here as one machine word, where the x86-64 and AArch64 Linux
/// calling conventions put it for variadic and fixed arguments alike.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    after_fcntl(fd, cmd, unsafe { real::fcntl(fd, cmd, arg) })
}

/// fcntl64(), the name glibc gives fcntl() for programs built with 64-bit
/// file offsets.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    after_fcntl(fd, cmd, unsafe { real::fcntl64(fd, cmd, arg) })
}
