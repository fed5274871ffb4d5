// SPDX-License-Identifier: GPL-2.0
//! The addresses of the host's interfaces, read with an rtnetlink
//! `RTM_GETADDR` dump, for endpoints given by interface (`dev IFNAME`).

use crate::attr::Attrs;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::net::IpAddr;

/// `linux/rtnetlink.h` and `linux/netlink.h`.
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLMSG_HDRLEN: usize = 16;
/// Size of `struct ifaddrmsg`.
const IFADDRMSG_LEN: usize = 8;
/// `IFA_*` attributes (`linux/if_addr.h`).
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
/// `IFA_F_*` address flags. 0x01 is `IFA_F_TEMPORARY` on an IPv6 address
/// and `IFA_F_SECONDARY` on an IPv4 one (another address of a subnet the
/// interface already has: a local address like the first).
pub const IFA_F_TEMPORARY: u32 = 0x01;
pub const IFA_F_DADFAILED: u32 = 0x08;
pub const IFA_F_DEPRECATED: u32 = 0x20;
/// `RT_SCOPE_UNIVERSE`: an address valid beyond this host and link.
pub const RT_SCOPE_UNIVERSE: u8 = 0;

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub prefix_len: u8,
    /// `RT_SCOPE_*`.
    pub scope: u8,
    /// `IFA_F_*`.
    pub flags: u32,
}

impl IfAddr {
    /// Whether the address can serve as an endpoint of an interface
    /// given by name: global scope (which includes private IPv4 ranges and
    /// IPv6 unique local addresses, but not loopback or link-local), unicast,
    /// and neither failed duplicate address detection, deprecated nor a
    /// temporary (privacy) IPv6 address, which comes and goes. A tentative
    /// address, still in duplicate address detection, is taken, and so is
    /// a secondary IPv4 address.
    pub fn is_global_unicast(&self) -> bool {
        let (unicast, unwanted) = match self.addr {
            IpAddr::V4(a) => (
                !(a.is_multicast() || a.is_broadcast() || a.is_unspecified()),
                IFA_F_DADFAILED | IFA_F_DEPRECATED,
            ),
            IpAddr::V6(a) => (
                !(a.is_multicast() || a.is_unspecified()),
                IFA_F_DADFAILED | IFA_F_DEPRECATED | IFA_F_TEMPORARY,
            ),
        };
        self.scope == RT_SCOPE_UNIVERSE && unicast && self.flags & unwanted == 0
    }
}

/// Returns the `RTM_GETADDR` dump request with sequence number `seq`.
fn request(seq: u32) -> Vec<u8> {
    let len = NLMSG_HDRLEN + IFADDRMSG_LEN;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&RTM_GETADDR.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifaddrmsg: AF_UNSPEC, every interface.
    b.extend_from_slice(&[0u8; IFADDRMSG_LEN]);
    b
}

/// What a datagram of the dump held.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    pub addrs: Vec<IfAddr>,
    /// `NLMSG_DONE` was seen.
    pub done: bool,
    /// The address table changed during the dump (`NLM_F_DUMP_INTR`).
    pub interrupted: bool,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2)?.try_into().ok().map(u16::from_ne_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)?.try_into().ok().map(u32::from_ne_bytes)
}

/// Decodes one datagram of the dump with sequence number `seq`: its
/// `RTM_NEWADDR` messages, and whether it ends the dump. A netlink error
/// (or a negative `NLMSG_DONE` code) is returned as the errno it carries.
pub fn parse_batch(data: &[u8], seq: u32) -> Result<Batch, io::Error> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("rtnetlink: {what}"));
    let mut out = Batch::default();
    let mut off = 0;
    while off + NLMSG_HDRLEN <= data.len() {
        let len = u32_at(data, off).ok_or_else(|| bad("short header"))? as usize;
        let kind = u16_at(data, off + 4).ok_or_else(|| bad("short header"))?;
        let flags = u16_at(data, off + 6).ok_or_else(|| bad("short header"))?;
        let mseq = u32_at(data, off + 8).ok_or_else(|| bad("short header"))?;
        if len < NLMSG_HDRLEN || off + len > data.len() {
            return Err(bad("message length out of bounds"));
        }
        let body = &data[off + NLMSG_HDRLEN..off + len];
        off += len.next_multiple_of(4);
        if mseq != seq {
            continue;
        }
        out.interrupted |= flags & NLM_F_DUMP_INTR != 0;
        match kind {
            NLMSG_DONE | NLMSG_ERROR => {
                let code = u32_at(body, 0).map_or(0, |c| c as i32);
                if code < 0 {
                    return Err(io::Error::from_raw_os_error(-code));
                }
                out.done = true;
                return Ok(out);
            }
            RTM_NEWADDR => {
                if body.len() < IFADDRMSG_LEN {
                    return Err(bad("short ifaddrmsg"));
                }
                let family = i32::from(body[0]);
                let ifindex = u32_at(body, 4).unwrap_or(0);
                let a =
                    Attrs::parse(&body[IFADDRMSG_LEN..], &[]).map_err(|e| bad(&e.to_string()))?;
                // IFA_LOCAL is the local address; IFA_ADDRESS is the peer's
                // on a point-to-point link, else the same.
                let raw = a.raw(IFA_LOCAL).or_else(|| a.raw(IFA_ADDRESS));
                let addr = match (family, raw) {
                    (libc::AF_INET, Some(r)) => <[u8; 4]>::try_from(r).ok().map(IpAddr::from),
                    (libc::AF_INET6, Some(r)) => <[u8; 16]>::try_from(r).ok().map(IpAddr::from),
                    _ => None,
                };
                let Some(addr) = addr else { continue };
                let flags = match a.u32(IFA_FLAGS) {
                    Ok(Some(f)) => f,
                    _ => u32::from(body[2]),
                };
                out.addrs.push(IfAddr {
                    ifindex,
                    addr,
                    prefix_len: body[1],
                    scope: body[3],
                    flags,
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Returns every address of every interface of this network namespace, in
/// the kernel's order (IPv4, then IPv6; the primary address of a subnet
/// first). A dump during which the table changed is read again.
pub fn dump() -> io::Result<Vec<IfAddr>> {
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    let mut last = Vec::new();
    for seq in 1..=5u32 {
        sock.send_to(&request(seq), &SocketAddr::new(0, 0), 0)?;
        let mut addrs = Vec::new();
        let mut interrupted = false;
        loop {
            let (data, _) = sock.recv_from_full()?;
            let b = parse_batch(&data, seq)?;
            addrs.extend(b.addrs);
            interrupted |= b.interrupted;
            if b.done {
                break;
            }
        }
        if !interrupted {
            return Ok(addrs);
        }
        last = addrs;
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrWriter;

    fn newaddr(seq: u32, family: u8, scope: u8, ifindex: u32, attrs: Vec<u8>) -> Vec<u8> {
        let len = NLMSG_HDRLEN + IFADDRMSG_LEN + attrs.len();
        let mut b = Vec::new();
        b.extend_from_slice(&(len as u32).to_ne_bytes());
        b.extend_from_slice(&RTM_NEWADDR.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[family, 24, 0x80, scope]);
        b.extend_from_slice(&ifindex.to_ne_bytes());
        b.extend_from_slice(&attrs);
        b
    }

    fn done(seq: u32, code: i32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&20u32.to_ne_bytes());
        b.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&code.to_ne_bytes());
        b
    }

    #[test]
    fn decodes_addresses_and_the_end_of_the_dump() {
        let v4 = AttrWriter::new()
            .bytes(IFA_ADDRESS, &[10, 9, 9, 9])
            .bytes(IFA_LOCAL, &[10, 0, 1, 1])
            .finish();
        let v6 = AttrWriter::new()
            .bytes(
                IFA_ADDRESS,
                &"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            )
            .u32(IFA_FLAGS, IFA_F_DEPRECATED | 0x100)
            .finish();
        let mut data = newaddr(7, libc::AF_INET as u8, 0, 3, v4);
        data.extend(newaddr(7, libc::AF_INET6 as u8, 0, 4, v6));
        // Another request's message is skipped.
        data.extend(newaddr(8, libc::AF_INET as u8, 0, 5, Vec::new()));
        let b = parse_batch(&data, 7).unwrap();
        assert!(!b.done);
        assert_eq!(b.addrs.len(), 2);
        assert_eq!(b.addrs[0].addr, "10.0.1.1".parse::<IpAddr>().unwrap());
        assert_eq!((b.addrs[0].ifindex, b.addrs[0].flags), (3, 0x80));
        assert!(b.addrs[0].is_global_unicast());
        assert_eq!(b.addrs[1].addr, "fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(b.addrs[1].flags, IFA_F_DEPRECATED | 0x100);
        assert!(!b.addrs[1].is_global_unicast());

        let b = parse_batch(&done(7, 0), 7).unwrap();
        assert!(b.done && b.addrs.is_empty());
        let e = parse_batch(&done(7, -libc::EPERM), 7).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let mut short = done(7, 0);
        short[0] = 200;
        assert!(parse_batch(&short, 7).is_err());
    }

    #[test]
    fn global_unicast_only() {
        let a = |addr: &str, scope: u8, flags: u32| IfAddr {
            ifindex: 2,
            addr: addr.parse().unwrap(),
            prefix_len: 24,
            scope,
            flags,
        };
        assert!(a("10.0.1.1", 0, 0).is_global_unicast());
        assert!(a("2001:db8::1", 0, 0x40).is_global_unicast()); // tentative
        assert!(a("10.0.1.2", 0, 0x01).is_global_unicast()); // IPv4 secondary
        assert!(!a("127.0.0.1", 254, 0).is_global_unicast()); // host scope
        assert!(!a("fe80::1", 253, 0).is_global_unicast()); // link scope
        assert!(!a("2001:db8::2", 0, IFA_F_TEMPORARY).is_global_unicast());
        assert!(!a("2001:db8::3", 0, IFA_F_DADFAILED).is_global_unicast());
        assert!(!a("224.0.0.1", 0, 0).is_global_unicast());
    }

    /// The loopback interface of whatever namespace the tests run in has
    /// 127.0.0.1, of host scope.
    #[test]
    fn dumps_the_hosts_addresses() {
        let Ok(all) = dump() else {
            eprintln!("no rtnetlink socket here; skipped");
            return;
        };
        let lo: Vec<_> = all
            .iter()
            .filter(|a| a.addr == IpAddr::from([127, 0, 0, 1]))
            .collect();
        if let Some(lo) = lo.first() {
            assert_eq!(lo.scope, 254);
            assert!(!lo.is_global_unicast());
        }
    }
}
