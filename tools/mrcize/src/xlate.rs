// SPDX-License-Identifier: GPL-2.0
//! Address translation between the program's `sockaddr_in`/`sockaddr_in6`
//! and MRC addresses. Pure functions on bytes, checked as Linux checks the
//! addresses of TCP sockets.
//!
//! The program's socket has the family it asked for (AF_INET or AF_INET6);
//! the MRC socket under it takes IPv4 and IPv6 addresses alike. An AF_INET6
//! program sees IPv4 peers as IPv4-mapped addresses (`::ffff:a.b.c.d`) and
//! the IPv4-mapped addresses it passes become IPv4 MRC addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Length of `struct sockaddr_in`.
pub const SIN_LEN: usize = 16;
/// Length of `struct sockaddr_in6`.
pub const SIN6_LEN: usize = 28;
/// The shortest `sockaddr_in6` Linux accepts (SIN6_LEN_RFC2133: without
/// the scope id).
pub const SIN6_LEN_RFC2133: usize = 24;

/// The call an address is given to; the checks differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Bind,
    Connect,
    /// sendto()/sendmsg(): TCP ignores the address.
    Send,
}

/// What to hand to the kernel for the program's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    /// This address, as a `sockaddr_mrc`.
    Mrc(SocketAddr),
    /// The program's bytes unchanged (AF_UNSPEC in connect(): dissolve the
    /// association; the kernel decides).
    Unchanged,
}

fn family_of(b: &[u8]) -> i32 {
    i32::from(u16::from_ne_bytes([b[0], b[1]]))
}

/// The MRC address for the program's address `b` on a socket the program
/// opened as `family`, or the errno Linux gives a TCP socket for it.
/// `v6only`: IPV6_V6ONLY is set.
pub fn to_mrc(b: &[u8], family: i32, op: Op, v6only: bool) -> Result<In, i32> {
    if b.len() < 2 {
        return Err(libc::EINVAL);
    }
    let fam = family_of(b);
    if fam == libc::AF_UNSPEC && op == Op::Connect {
        return Ok(In::Unchanged);
    }
    let addr = match family {
        libc::AF_INET => {
            // inet_bind() takes AF_UNSPEC with INADDR_ANY for old programs.
            let unspec_any =
                op == Op::Bind && fam == libc::AF_UNSPEC && b.len() >= SIN_LEN && b[4..8] == [0; 4];
            if b.len() < SIN_LEN {
                return Err(libc::EINVAL);
            }
            if fam != libc::AF_INET && !unspec_any {
                return Err(libc::EAFNOSUPPORT);
            }
            let port = u16::from_be_bytes([b[2], b[3]]);
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            SocketAddr::V4(SocketAddrV4::new(ip, port))
        }
        libc::AF_INET6 => {
            if b.len() < SIN6_LEN_RFC2133 {
                return Err(libc::EINVAL);
            }
            if fam != libc::AF_INET6 {
                return Err(libc::EAFNOSUPPORT);
            }
            let port = u16::from_be_bytes([b[2], b[3]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            let ip = Ipv6Addr::from(a);
            let scope = if b.len() >= SIN6_LEN {
                u32::from_ne_bytes([b[24], b[25], b[26], b[27]])
            } else {
                0
            };
            match ip.to_ipv4_mapped() {
                Some(_) if v6only => {
                    return Err(if op == Op::Connect {
                        libc::ENETUNREACH
                    } else {
                        libc::EINVAL
                    })
                }
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                None => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope)),
            }
        }
        _ => return Err(libc::EAFNOSUPPORT),
    };
    Ok(In::Mrc(if op == Op::Connect {
        unspecified_to_loopback(addr)
    } else {
        addr
    }))
}

/// TCP connects to the unspecified address as to the loopback address.
fn unspecified_to_loopback(a: SocketAddr) -> SocketAddr {
    if !a.ip().is_unspecified() {
        return a;
    }
    let ip = match a.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, a.port())
}

/// The program's view of MRC address `a` on a socket opened as `family`:
/// the bytes of a `sockaddr_in` or `sockaddr_in6` and their length.
pub fn from_mrc(a: &SocketAddr, family: i32) -> ([u8; SIN6_LEN], usize) {
    let v4 = match (a, family) {
        (SocketAddr::V4(v4), libc::AF_INET) => Some(*v4),
        (SocketAddr::V6(v6), libc::AF_INET) => v6
            .ip()
            .to_ipv4_mapped()
            .map(|ip| SocketAddrV4::new(ip, v6.port())),
        _ => None,
    };
    let mut b = [0u8; SIN6_LEN];
    if let Some(v4) = v4 {
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&v4.port().to_be_bytes());
        b[4..8].copy_from_slice(&v4.ip().octets());
        return (b, SIN_LEN);
    }
    let (ip, scope) = match a {
        // An unbound socket shows 0.0.0.0; TCP over IPv6 shows `::` there.
        SocketAddr::V4(v4) if v4.ip().is_unspecified() => (Ipv6Addr::UNSPECIFIED, 0),
        SocketAddr::V4(v4) => (v4.ip().to_ipv6_mapped(), 0),
        SocketAddr::V6(v6) => (*v6.ip(), v6.scope_id()),
    };
    b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
    b[2..4].copy_from_slice(&a.port().to_be_bytes());
    b[8..24].copy_from_slice(&ip.octets());
    b[24..28].copy_from_slice(&scope.to_ne_bytes());
    (b, SIN6_LEN)
}

/// How many bytes of a `klen`-byte address to copy into a caller's buffer
/// of `ulen` bytes (the kernel's move_addr_to_user(): the caller then sees
/// `klen` as the length). Errors are errno values.
pub fn copy_len(ulen: i32, klen: usize) -> Result<usize, i32> {
    if ulen < 0 {
        return Err(libc::EINVAL);
    }
    Ok((ulen as usize).min(klen))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sin(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut b = vec![0u8; SIN_LEN];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[4..8].copy_from_slice(&ip);
        b
    }

    fn sin6(ip: &str, port: u16, scope: u32) -> Vec<u8> {
        let ip: Ipv6Addr = ip.parse().expect("ipv6");
        let mut b = vec![0u8; SIN6_LEN];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[4..8].copy_from_slice(&0x12345u32.to_be_bytes()); // flow info, dropped
        b[8..24].copy_from_slice(&ip.octets());
        b[24..28].copy_from_slice(&scope.to_ne_bytes());
        b
    }

    fn mrc(s: &str) -> Result<In, i32> {
        Ok(In::Mrc(s.parse().expect("socket address")))
    }

    #[test]
    fn ipv4_program() {
        let b = sin([10, 0, 0, 1], 5201);
        assert_eq!(
            to_mrc(&b, libc::AF_INET, Op::Connect, false),
            mrc("10.0.0.1:5201")
        );
        assert_eq!(
            to_mrc(&b[..15], libc::AF_INET, Op::Connect, false),
            Err(libc::EINVAL)
        );
        // Longer buffers (sockaddr_storage) are fine.
        let mut long = b.clone();
        long.resize(128, 0xee);
        assert_eq!(
            to_mrc(&long, libc::AF_INET, Op::Bind, false),
            mrc("10.0.0.1:5201")
        );
        let v6 = sin6("fd00::1", 1, 0);
        assert_eq!(
            to_mrc(&v6, libc::AF_INET, Op::Connect, false),
            Err(libc::EAFNOSUPPORT)
        );
        // connect() to 0.0.0.0 reaches the host itself, as with TCP.
        let any = sin([0; 4], 80);
        assert_eq!(
            to_mrc(&any, libc::AF_INET, Op::Connect, false),
            mrc("127.0.0.1:80")
        );
        assert_eq!(
            to_mrc(&any, libc::AF_INET, Op::Bind, false),
            mrc("0.0.0.0:80")
        );
        // AF_UNSPEC: bind() to INADDR_ANY as AF_INET; connect() dissolves.
        let mut unspec = any.clone();
        unspec[..2].copy_from_slice(&(libc::AF_UNSPEC as u16).to_ne_bytes());
        assert_eq!(
            to_mrc(&unspec, libc::AF_INET, Op::Bind, false),
            mrc("0.0.0.0:80")
        );
        assert_eq!(
            to_mrc(&unspec, libc::AF_INET, Op::Connect, false),
            Ok(In::Unchanged)
        );
        assert_eq!(
            to_mrc(&[2], libc::AF_INET, Op::Connect, false),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn ipv6_program() {
        let b = sin6("fe80::1", 443, 3);
        assert_eq!(
            to_mrc(&b, libc::AF_INET6, Op::Connect, false),
            mrc("[fe80::1%3]:443")
        );
        // The RFC 2133 length, without scope id.
        assert_eq!(
            to_mrc(&b[..24], libc::AF_INET6, Op::Bind, false),
            mrc("[fe80::1]:443")
        );
        assert_eq!(
            to_mrc(&b[..23], libc::AF_INET6, Op::Bind, false),
            Err(libc::EINVAL)
        );
        // IPv4-mapped addresses become IPv4 ones unless IPV6_V6ONLY.
        let m = sin6("::ffff:10.0.0.2", 5201, 0);
        assert_eq!(
            to_mrc(&m, libc::AF_INET6, Op::Connect, false),
            mrc("10.0.0.2:5201")
        );
        assert_eq!(
            to_mrc(&m, libc::AF_INET6, Op::Connect, true),
            Err(libc::ENETUNREACH)
        );
        assert_eq!(
            to_mrc(&m, libc::AF_INET6, Op::Bind, true),
            Err(libc::EINVAL)
        );
        // The wildcard stays IPv6: the kernel's listener on it takes IPv4
        // connections too.
        let any = sin6("::", 5201, 0);
        assert_eq!(
            to_mrc(&any, libc::AF_INET6, Op::Bind, false),
            mrc("[::]:5201")
        );
        assert_eq!(
            to_mrc(&any, libc::AF_INET6, Op::Connect, false),
            mrc("[::1]:5201")
        );
        // A sockaddr_in on an AF_INET6 TCP socket: too short, or of the
        // wrong family in a longer buffer (what Linux answers).
        let mut v4 = sin([10, 0, 0, 1], 1);
        assert_eq!(
            to_mrc(&v4, libc::AF_INET6, Op::Connect, false),
            Err(libc::EINVAL)
        );
        v4.resize(SIN6_LEN, 0);
        assert_eq!(
            to_mrc(&v4, libc::AF_INET6, Op::Connect, false),
            Err(libc::EAFNOSUPPORT)
        );
        assert_eq!(
            to_mrc(&v4, libc::AF_INET6, Op::Bind, false),
            Err(libc::EAFNOSUPPORT)
        );
    }

    #[test]
    fn program_view() {
        let v4: SocketAddr = "10.0.0.1:5201".parse().expect("addr");
        let (b, n) = from_mrc(&v4, libc::AF_INET);
        assert_eq!(&b[..n], &sin([10, 0, 0, 1], 5201)[..]);
        let (b, n) = from_mrc(&v4, libc::AF_INET6);
        assert_eq!(n, SIN6_LEN);
        let mut want = sin6("::ffff:10.0.0.1", 5201, 0);
        want[4..8].copy_from_slice(&[0; 4]);
        assert_eq!(&b[..n], &want[..]);
        let v6: SocketAddr = "[fe80::2%7]:80".parse().expect("addr");
        let (b, n) = from_mrc(&v6, libc::AF_INET6);
        let mut want = sin6("fe80::2", 80, 7);
        want[4..8].copy_from_slice(&[0; 4]);
        assert_eq!(&b[..n], &want[..]);
        // Unbound: 0.0.0.0 port 0 from the kernel is `::` for IPv6.
        let none: SocketAddr = "0.0.0.0:0".parse().expect("addr");
        let (b, n) = from_mrc(&none, libc::AF_INET6);
        assert_eq!(
            &b[..n],
            &[&(libc::AF_INET6 as u16).to_ne_bytes()[..], &[0u8; 26][..]].concat()[..]
        );
        // Round trips.
        for (a, fam) in [
            (v4, libc::AF_INET),
            (v4, libc::AF_INET6),
            (v6, libc::AF_INET6),
        ] {
            let (b, n) = from_mrc(&a, fam);
            assert_eq!(to_mrc(&b[..n], fam, Op::Bind, false), Ok(In::Mrc(a)));
        }
    }

    #[test]
    fn truncation() {
        assert_eq!(copy_len(128, SIN6_LEN), Ok(SIN6_LEN));
        assert_eq!(copy_len(16, SIN6_LEN), Ok(16));
        assert_eq!(copy_len(0, SIN_LEN), Ok(0));
        assert_eq!(copy_len(-1, SIN_LEN), Err(libc::EINVAL));
    }
}
