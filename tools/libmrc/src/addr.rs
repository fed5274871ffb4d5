// SPDX-License-Identifier: GPL-2.0
//! Conversions between [`SockaddrMrc`], [`std::net::SocketAddr`] and the
//! C library's `sockaddr_in`/`sockaddr_in6`.
//!
//! MRC addresses are IP addresses and ports like TCP's: `sockaddr_mrc`
//! carries an IPv4 or IPv6 address, an IPv6 scope id and a port. The IPv6
//! flow label has no place in it and is dropped.

use crate::uapi::SockaddrMrc;
use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Size of `struct sockaddr_mrc`.
pub const SOCKADDR_MRC_LEN: usize = mem::size_of::<SockaddrMrc>();

impl SockaddrMrc {
    /// The MRC address of `addr`, with `smrc_family` set to `family` (the
    /// AF_MRC value of the loaded module, see [`crate::family`]).
    ///
    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) stays an IPv6
    /// address: the caller decides whether it means IPv4.
    pub fn new(family: i32, addr: &SocketAddr) -> SockaddrMrc {
        let mut sa = SockaddrMrc {
            smrc_family: family as libc::sa_family_t,
            smrc_port: addr.port().to_be(),
            smrc_addr_family: 0,
            smrc_reserved: 0,
            smrc_scope_id: 0,
            smrc_addr: [0; 16],
        };
        match addr {
            SocketAddr::V4(a) => {
                sa.smrc_addr_family = libc::AF_INET as u16;
                sa.smrc_addr[..4].copy_from_slice(&a.ip().octets());
            }
            SocketAddr::V6(a) => {
                sa.smrc_addr_family = libc::AF_INET6 as u16;
                sa.smrc_addr = a.ip().octets();
                sa.smrc_scope_id = a.scope_id();
            }
        }
        sa
    }

    /// The IP address and port; `None` if `smrc_addr_family` is neither
    /// AF_INET nor AF_INET6.
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        let port = u16::from_be(self.smrc_port);
        match i32::from(self.smrc_addr_family) {
            libc::AF_INET => {
                let [a, b, c, d, ..] = self.smrc_addr;
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::new(a, b, c, d),
                    port,
                )))
            }
            libc::AF_INET6 => Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(self.smrc_addr),
                port,
                0,
                self.smrc_scope_id,
            ))),
            _ => None,
        }
    }

    /// The structure's bytes, as the kernel reads them.
    pub fn to_bytes(&self) -> [u8; SOCKADDR_MRC_LEN] {
        let mut b = [0u8; SOCKADDR_MRC_LEN];
        b[..2].copy_from_slice(&self.smrc_family.to_ne_bytes());
        b[2..4].copy_from_slice(&self.smrc_port.to_ne_bytes());
        b[4..6].copy_from_slice(&self.smrc_addr_family.to_ne_bytes());
        b[6..8].copy_from_slice(&self.smrc_reserved.to_ne_bytes());
        b[8..12].copy_from_slice(&self.smrc_scope_id.to_ne_bytes());
        b[12..].copy_from_slice(&self.smrc_addr);
        b
    }

    /// Parses the bytes of a `struct sockaddr_mrc` as the kernel writes it;
    /// `None` if `b` is shorter than the structure.
    pub fn from_bytes(b: &[u8]) -> Option<SockaddrMrc> {
        let b: &[u8; SOCKADDR_MRC_LEN] = b.get(..SOCKADDR_MRC_LEN)?.try_into().ok()?;
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        let mut smrc_addr = [0u8; 16];
        smrc_addr.copy_from_slice(&b[12..]);
        Some(SockaddrMrc {
            smrc_family: u16_at(0),
            smrc_port: u16_at(2),
            smrc_addr_family: u16_at(4),
            smrc_reserved: u16_at(6),
            smrc_scope_id: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            smrc_addr,
        })
    }

    /// Pointer and length for bind(), connect() and sendto().
    pub fn as_raw(&self) -> (*const libc::sockaddr, libc::socklen_t) {
        (
            self as *const SockaddrMrc as *const libc::sockaddr,
            SOCKADDR_MRC_LEN as libc::socklen_t,
        )
    }
}

/// The `sockaddr_in` or `sockaddr_in6` of `addr` in a `sockaddr_storage`,
/// with its length: the address of a TCP, UDP or other IP socket.
pub fn inet_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and at least as aligned
            // as sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Reads a `sockaddr_mrc` that the kernel wrote into `ss` (`len` bytes).
pub(crate) fn mrc_from_storage(
    ss: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> io::Result<SocketAddr> {
    let len = (len as usize).min(mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: ss is a valid sockaddr_storage and len is within it.
    let b = unsafe { std::slice::from_raw_parts(ss as *const _ as *const u8, len) };
    SockaddrMrc::from_bytes(b)
        .and_then(|sa| sa.to_socket_addr())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
}

/// An `IpAddr` as the 16 address bytes of MRC structures (IPv4 in the
/// first 4).
pub(crate) fn ip_bytes(ip: &IpAddr) -> (u16, [u8; 16]) {
    let mut b = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            b[..4].copy_from_slice(&v4.octets());
            (libc::AF_INET as u16, b)
        }
        IpAddr::V6(v6) => (libc::AF_INET6 as u16, v6.octets()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_bytes() {
        let a: SocketAddr = "10.1.2.3:4660".parse().expect("addr");
        let sa = SockaddrMrc::new(23, &a);
        let b = sa.to_bytes();
        let mut want = [0u8; 28];
        want[..2].copy_from_slice(&23u16.to_ne_bytes());
        want[2..4].copy_from_slice(&[0x12, 0x34]);
        want[4..6].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        want[12..16].copy_from_slice(&[10, 1, 2, 3]);
        assert_eq!(b, want);
        assert_eq!(SockaddrMrc::from_bytes(&b), Some(sa));
        assert_eq!(sa.to_socket_addr(), Some(a));
    }

    #[test]
    fn v6_scope_round_trip() {
        let a = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().expect("ip"), 80, 0, 9));
        let sa = SockaddrMrc::new(40, &a);
        let b = sa.to_bytes();
        assert_eq!(&b[..2], &40u16.to_ne_bytes());
        assert_eq!(&b[2..4], &[0, 80]);
        assert_eq!(&b[4..6], &(libc::AF_INET6 as u16).to_ne_bytes());
        assert_eq!(&b[8..12], &9u32.to_ne_bytes());
        assert_eq!(b[12], 0xfe);
        assert_eq!(b[27], 1);
        assert_eq!(
            SockaddrMrc::from_bytes(&b).and_then(|s| s.to_socket_addr()),
            Some(a)
        );
    }

    #[test]
    fn bad_family_and_short_input() {
        let mut sa = SockaddrMrc::new(23, &"1.2.3.4:5".parse().expect("addr"));
        sa.smrc_addr_family = 99;
        assert_eq!(sa.to_socket_addr(), None);
        assert_eq!(SockaddrMrc::from_bytes(&[0u8; 27]), None);
    }

    #[test]
    fn inet_round_trip() {
        for s in ["192.0.2.7:443", "[2001:db8::5]:8080"] {
            let a: SocketAddr = s.parse().expect("addr");
            let (ss, len) = inet_sockaddr(&a);
            let want = if a.is_ipv4() { 16 } else { 28 };
            assert_eq!(len as usize, want);
            assert_eq!(
                i32::from(ss.ss_family),
                if a.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                }
            );
        }
    }
}
