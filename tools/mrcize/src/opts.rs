// SPDX-License-Identifier: GPL-2.0
//! The TCP, IP and IPv6 socket options mrcize stands in for, and the
//! SOL_SOCKET options it records to carry them over to a TCP fallback.
//!
//! MRC sockets know only SOL_SOCKET and SOL_MRC options. A program written
//! for TCP sets options at IPPROTO_TCP, IPPROTO_IP and IPPROTO_IPV6 and may
//! read them back; mrcize answers those itself: it checks the value as
//! Linux does (length and range), remembers it per descriptor and returns
//! it from getsockopt() (or Linux's default when unset). Options listed
//! here with [`Act::Kernel`] are SOL_SOCKET options handed to the kernel
//! unchanged and only recorded. The meaning of each option for MRC is in
//! tools/mrcize/README.md.

/// What mrcize does with an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Answered by mrcize: remembered, returned by getsockopt().
    Emulate,
    /// A SOL_SOCKET option: the kernel handles it; mrcize records the value
    /// to set it again on a TCP fallback socket.
    Kernel,
}

/// One option.
#[derive(Debug, Clone, Copy)]
pub struct OptDef {
    pub level: i32,
    pub name: i32,
    /// getsockopt() value when the program did not set it (Linux's
    /// default for a new socket).
    pub default: i32,
    /// Smallest and largest value setsockopt() accepts (EINVAL outside).
    pub min: i32,
    pub max: i32,
    /// Values are normalised to 0 or 1.
    pub boolean: bool,
    /// -1 means "back to the default" (IP_TTL, IPV6_UNICAST_HOPS).
    pub minus_one_resets: bool,
    pub act: Act,
}

const fn opt(level: i32, name: i32, default: i32, min: i32, max: i32) -> OptDef {
    OptDef {
        level,
        name,
        default,
        min,
        max,
        boolean: false,
        minus_one_resets: false,
        act: Act::Emulate,
    }
}

const fn flag(level: i32, name: i32) -> OptDef {
    OptDef {
        boolean: true,
        ..opt(level, name, 0, i32::MIN, i32::MAX)
    }
}

const fn hops(level: i32, name: i32) -> OptDef {
    OptDef {
        minus_one_resets: true,
        ..opt(level, name, 64, -1, 255)
    }
}

const fn kernel(name: i32) -> OptDef {
    OptDef {
        act: Act::Kernel,
        ..opt(libc::SOL_SOCKET, name, 0, i32::MIN, i32::MAX)
    }
}

const TCP: i32 = libc::IPPROTO_TCP;
const IP: i32 = libc::IPPROTO_IP;
const IP6: i32 = libc::IPPROTO_IPV6;

/// MSS reported for TCP_MAXSEG when the program did not set one: that of
/// TCP over Ethernet with timestamps. MRC's own packet size is not exposed.
pub const DEFAULT_MSS: i32 = 1448;
/// Size of `struct tcp_info` returned for TCP_INFO (that of the uapi
/// headers of Linux 6.x this was written against; the caller's length
/// limits it as the kernel does).
pub const TCP_INFO_LEN: usize = 232;
/// TCP_CONGESTION name room, NUL included (TCP_CA_NAME_MAX).
pub const TCP_CA_NAME_MAX: usize = 16;
/// TCP_INFO's tcpi_state values.
pub const TCP_ESTABLISHED: u8 = 1;
pub const TCP_CLOSE: u8 = 7;
pub const TCP_LISTEN: u8 = 10;

/// Every option mrcize knows, by index into each slot's option array.
pub const OPTS: [OptDef; N_OPTS] = [
    flag(TCP, libc::TCP_NODELAY),
    opt(TCP, libc::TCP_MAXSEG, DEFAULT_MSS, 0, 65535),
    flag(TCP, libc::TCP_CORK),
    opt(TCP, libc::TCP_KEEPIDLE, 7200, 1, 32767),
    opt(TCP, libc::TCP_KEEPINTVL, 75, 1, 32767),
    opt(TCP, libc::TCP_KEEPCNT, 9, 1, 127),
    opt(TCP, libc::TCP_SYNCNT, 6, 1, 127),
    opt(TCP, libc::TCP_LINGER2, 60, i32::MIN, i32::MAX),
    opt(TCP, libc::TCP_DEFER_ACCEPT, 0, i32::MIN, i32::MAX),
    opt(TCP, libc::TCP_WINDOW_CLAMP, 0, 0, i32::MAX),
    OptDef {
        default: 1,
        ..flag(TCP, libc::TCP_QUICKACK)
    },
    flag(TCP, libc::TCP_THIN_LINEAR_TIMEOUTS),
    opt(TCP, libc::TCP_USER_TIMEOUT, 0, 0, i32::MAX),
    opt(TCP, libc::TCP_NOTSENT_LOWAT, -1, i32::MIN, i32::MAX),
    opt(IP, libc::IP_TOS, 0, i32::MIN, i32::MAX),
    hops(IP, libc::IP_TTL),
    opt(IP, libc::IP_MTU_DISCOVER, 1, 0, 5),
    flag(IP, libc::IP_RECVERR),
    flag(IP, libc::IP_FREEBIND),
    flag(IP, libc::IP_TRANSPARENT),
    flag(IP, libc::IP_BIND_ADDRESS_NO_PORT),
    hops(IP6, libc::IPV6_UNICAST_HOPS),
    opt(IP6, libc::IPV6_MTU_DISCOVER, 1, 0, 5),
    flag(IP6, libc::IPV6_RECVERR),
    flag(IP6, libc::IPV6_V6ONLY),
    opt(IP6, libc::IPV6_TCLASS, 0, -1, 255),
    flag(IP6, libc::IPV6_FREEBIND),
    flag(IP6, libc::IPV6_TRANSPARENT),
    kernel(libc::SO_REUSEADDR),
    kernel(libc::SO_REUSEPORT),
    kernel(libc::SO_KEEPALIVE),
    kernel(libc::SO_SNDBUF),
    kernel(libc::SO_RCVBUF),
    kernel(libc::SO_PRIORITY),
    kernel(libc::SO_OOBINLINE),
    kernel(libc::SO_RCVLOWAT),
    kernel(libc::SO_MARK),
];
pub const N_OPTS: usize = 37;

/// Index of IPV6_V6ONLY in [`OPTS`].
pub fn v6only_index() -> usize {
    index(IP6, libc::IPV6_V6ONLY).unwrap_or(usize::MAX)
}

/// The index of an option in [`OPTS`].
pub fn index(level: i32, name: i32) -> Option<usize> {
    OPTS.iter().position(|o| o.level == level && o.name == name)
}

/// Reads the value of a setsockopt() of `def` from the caller's bytes and
/// checks it. `Ok(None)`: back to the default. Errors are errno values.
pub fn parse_set(def: &OptDef, val: &[u8]) -> Result<Option<i32>, i32> {
    let v = if val.len() >= 4 {
        i32::from_ne_bytes([val[0], val[1], val[2], val[3]])
    } else if def.level == IP && !val.is_empty() {
        // ip_setsockopt() takes a single byte for integer options.
        i32::from(val[0])
    } else {
        return Err(libc::EINVAL);
    };
    if def.minus_one_resets && v == -1 {
        return Ok(None);
    }
    if def.boolean {
        return Ok(Some(i32::from(v != 0)));
    }
    if v < def.min || v > def.max {
        return Err(libc::EINVAL);
    }
    Ok(Some(v))
}

/// The bytes getsockopt() returns for integer `v` of an option at `level`
/// when the caller gave `len` bytes of room, as Linux does: at most an int;
/// IPPROTO_IP gives one byte for a short buffer and a value in 0..=255.
/// Errors are errno values.
pub fn int_out(level: i32, v: i32, len: i32) -> Result<([u8; 4], usize), i32> {
    if len < 0 {
        return Err(libc::EINVAL);
    }
    if level == IP && len < 4 && len > 0 && (0..=255).contains(&v) {
        return Ok(([v as u8, 0, 0, 0], 1));
    }
    Ok((v.to_ne_bytes(), (len as usize).min(4)))
}

/// The `struct tcp_info` mrcize reports: all zero but `tcpi_state`.
pub fn tcp_info(state: u8) -> [u8; TCP_INFO_LEN] {
    let mut b = [0u8; TCP_INFO_LEN];
    b[0] = state;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        assert_eq!(OPTS.len(), N_OPTS);
        for (i, o) in OPTS.iter().enumerate() {
            assert_eq!(
                index(o.level, o.name),
                Some(i),
                "duplicate {}/{}",
                o.level,
                o.name
            );
            assert!(o.min <= o.default || o.boolean || o.minus_one_resets || o.default == -1);
            assert_eq!(o.act == Act::Kernel, o.level == libc::SOL_SOCKET);
        }
        assert_eq!(OPTS[v6only_index()].name, libc::IPV6_V6ONLY);
        assert_eq!(index(TCP, libc::TCP_INFO), None);
        assert_eq!(index(TCP, libc::TCP_FASTOPEN), None);
    }

    fn def(level: i32, name: i32) -> OptDef {
        OPTS[index(level, name).expect("known option")]
    }

    #[test]
    fn set_values() {
        let nodelay = def(TCP, libc::TCP_NODELAY);
        assert_eq!(parse_set(&nodelay, &7i32.to_ne_bytes()), Ok(Some(1)));
        assert_eq!(parse_set(&nodelay, &0i32.to_ne_bytes()), Ok(Some(0)));
        assert_eq!(parse_set(&nodelay, &[1, 0]), Err(libc::EINVAL));
        let idle = def(TCP, libc::TCP_KEEPIDLE);
        assert_eq!(parse_set(&idle, &30i32.to_ne_bytes()), Ok(Some(30)));
        assert_eq!(parse_set(&idle, &0i32.to_ne_bytes()), Err(libc::EINVAL));
        assert_eq!(parse_set(&idle, &40000i32.to_ne_bytes()), Err(libc::EINVAL));
        let tos = def(IP, libc::IP_TOS);
        assert_eq!(parse_set(&tos, &[0x10]), Ok(Some(0x10)));
        let ttl = def(IP, libc::IP_TTL);
        assert_eq!(parse_set(&ttl, &(-1i32).to_ne_bytes()), Ok(None));
        assert_eq!(parse_set(&ttl, &300i32.to_ne_bytes()), Err(libc::EINVAL));
        let hops6 = def(IP6, libc::IPV6_UNICAST_HOPS);
        assert_eq!(parse_set(&hops6, &[5]), Err(libc::EINVAL));
    }

    #[test]
    fn get_values() {
        assert_eq!(int_out(TCP, 5, 4), Ok((5i32.to_ne_bytes(), 4)));
        assert_eq!(int_out(TCP, 5, 100), Ok((5i32.to_ne_bytes(), 4)));
        assert_eq!(int_out(TCP, 5, 2).map(|(_, n)| n), Ok(2));
        assert_eq!(int_out(TCP, 5, -1), Err(libc::EINVAL));
        assert_eq!(int_out(IP, 0x10, 1), Ok(([0x10, 0, 0, 0], 1)));
        assert_eq!(int_out(IP, 0x10, 0).map(|(_, n)| n), Ok(0));
    }

    #[test]
    fn tcp_info_state() {
        let b = tcp_info(TCP_ESTABLISHED);
        assert_eq!(b[0], 1);
        assert!(b[1..].iter().all(|x| *x == 0));
    }
}
