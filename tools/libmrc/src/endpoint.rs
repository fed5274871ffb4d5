// SPDX-License-Identifier: GPL-2.0
//! Command-line style addresses: `10.0.0.1`, `fd00::1`, `[fd00::1]`,
//! `fe80::1%eth0`.

use std::ffi::CString;
use std::fmt;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};

/// An IP address, optional IPv6 scope and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The IP address.
    pub ip: IpAddr,
    /// IPv6 scope (interface index), 0 for none.
    pub scope_id: u32,
    /// Port.
    pub port: u16,
}

impl Endpoint {
    /// Parses `10.0.0.1`, `fd00::1`, `[fd00::1]` or `fe80::1%eth0` (scope as
    /// interface name or index).
    ///
    /// ```
    /// let ep = libmrc::Endpoint::parse("[fd00::1]", 7000).unwrap();
    /// assert_eq!(ep.socket_addr().to_string(), "[fd00::1]:7000");
    /// ```
    pub fn parse(addr: &str, port: u16) -> Result<Endpoint, String> {
        let a = addr
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(addr);
        let (ip, scope) = match a.split_once('%') {
            Some((ip, scope)) => (ip, Some(scope)),
            None => (a, None),
        };
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("`{addr}` is not an IPv4 or IPv6 address"))?;
        let scope_id = match scope {
            None => 0,
            Some(_) if ip.is_ipv4() => {
                return Err(format!("`{addr}`: a scope is only valid for IPv6"))
            }
            Some(s) => match s.parse::<u32>() {
                Ok(n) => n,
                Err(_) => if_index(s)?,
            },
        };
        Ok(Endpoint { ip, scope_id, port })
    }

    /// The socket address (with the scope for IPv6).
    pub fn socket_addr(&self) -> SocketAddr {
        match self.ip {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V4(v4), self.port),
            IpAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(v6, self.port, 0, self.scope_id)),
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(a: SocketAddr) -> Endpoint {
        let scope_id = match a {
            SocketAddr::V4(_) => 0,
            SocketAddr::V6(v6) => v6.scope_id(),
        };
        Endpoint {
            ip: a.ip(),
            scope_id,
            port: a.port(),
        }
    }
}

impl fmt::Display for Endpoint {
    /// `10.0.0.1 port 5`, `fe80::1%3 port 80`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ip)?;
        if self.scope_id != 0 {
            write!(f, "%{}", self.scope_id)?;
        }
        write!(f, " port {}", self.port)
    }
}

fn if_index(name: &str) -> Result<u32, String> {
    let c = CString::new(name).map_err(|_| format!("bad interface name `{name}`"))?;
    // SAFETY: c is a valid NUL-terminated string.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(format!("no interface named `{name}`")),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        let e = Endpoint::parse("10.0.0.1", 5).expect("v4");
        assert_eq!(e.ip, "10.0.0.1".parse::<IpAddr>().expect("ip"));
        assert_eq!(e.to_string(), "10.0.0.1 port 5");
        let e = Endpoint::parse("[fd00::1]", 6).expect("v6");
        assert!(e.ip.is_ipv6());
        let e = Endpoint::parse("fe80::1%3", 7).expect("scoped");
        assert_eq!(e.scope_id, 3);
        assert_eq!(e.socket_addr().to_string(), "[fe80::1%3]:7");
        assert_eq!(Endpoint::from(e.socket_addr()), e);
        let e = Endpoint::parse("::1%lo", 1).expect("scope by name");
        assert_eq!(e.scope_id, if_index("lo").expect("lo"));
        assert!(Endpoint::parse("10.0.0.1%3", 1).is_err());
        assert!(Endpoint::parse("nonsense", 1).is_err());
        assert!(Endpoint::parse("fe80::1%no-such-if0", 1).is_err());
    }
}
