// SPDX-License-Identifier: GPL-2.0
//! The user API of `include/uapi/linux/mrc.h`, mirrored in Rust.
//!
//! Every constant and structure here has the name and value of its C
//! counterpart; the unit tests read the header and compare.

/// Default address family of MRC (`MRC_DEFAULT_FAMILY`). The family is a
/// module parameter: see [`crate::family`].
pub const MRC_DEFAULT_FAMILY: i32 = 23;

/// UDP port of the per-namespace MRC tunnel socket (`MRC_DEFAULT_UDP_PORT`,
/// module parameter `port`).
pub const MRC_DEFAULT_UDP_PORT: u16 = 4796;

/// Level of the MRC socket options (`SOL_MRC`).
pub const SOL_MRC: i32 = 299;

/// Probe interval of idle paths in milliseconds (`__u32`, 1..=60000).
pub const MRC_HEARTBEAT_MS: i32 = 1;
/// Congestion controller of the connection's paths (string).
pub const MRC_CC: i32 = 2;
/// Adds a path to a connected socket ([`MrcPathReq`]).
pub const MRC_PATH_ADD: i32 = 3;
/// Removes a path of a connected socket (`__u32` path id).
pub const MRC_PATH_DEL: i32 = 4;

/// Room for a congestion controller name, NUL included.
pub const MRC_CC_NAME_MAX: usize = 16;
/// Largest value of [`MRC_HEARTBEAT_MS`].
pub const MRC_HEARTBEAT_MS_MAX: u32 = 60000;
/// [`MrcPathReq::mpr_flags`]: the path is a backup, used only when no other
/// path is.
pub const MRC_PATH_F_BACKUP: u16 = 1;
/// Largest message accepted by one sendmsg() on a SOCK_SEQPACKET socket.
pub const MRC_MAX_MSG: usize = 1 << 20;

/// `struct sockaddr_mrc`: the address of an MRC socket.
///
/// Build one from a [`std::net::SocketAddr`] with [`SockaddrMrc::new`] and
/// turn it back with [`SockaddrMrc::to_socket_addr`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockaddrMrc {
    /// AF_MRC.
    pub smrc_family: libc::sa_family_t,
    /// MRC port, network byte order.
    pub smrc_port: u16,
    /// AF_INET or AF_INET6, host byte order: which part of `smrc_addr` is
    /// used.
    pub smrc_addr_family: u16,
    /// Must be zero.
    pub smrc_reserved: u16,
    /// IPv6 scope (interface index) for link-local addresses.
    pub smrc_scope_id: u32,
    /// IPv4 address in the first 4 bytes (network byte order), or the IPv6
    /// address.
    pub smrc_addr: [u8; 16],
}

/// `struct mrc_path_req`: a path for [`MRC_PATH_ADD`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrcPathReq {
    /// Out: the new path's id (getsockopt); zero on input.
    pub mpr_path_id: u32,
    /// AF_INET or AF_INET6, the family of both addresses.
    pub mpr_family: u16,
    /// [`MRC_PATH_F_BACKUP`] or zero.
    pub mpr_flags: u16,
    /// UDP source port (the path's entropy value), host byte order; zero
    /// picks one.
    pub mpr_sport: u16,
    /// The peer's UDP port, host byte order; zero means the MRC UDP port.
    pub mpr_dport: u16,
    /// Must be zero.
    pub mpr_reserved: u32,
    /// Local IP address (IPv4 in the first 4 bytes); all zero picks the
    /// route's source address.
    pub mpr_local: [u8; 16],
    /// The peer's IP address, same layout.
    pub mpr_remote: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<SockaddrMrc>() == 28);
const _: () = assert!(std::mem::align_of::<SockaddrMrc>() == 4);
const _: () = assert!(std::mem::size_of::<MrcPathReq>() == 48);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::mem::{offset_of, size_of};

    const HEADER: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../include/uapi/linux/mrc.h"
    );

    /// The `#define NAME VALUE` lines of the header with a numeric value
    /// (`(1U << 20)` included).
    fn defines() -> HashMap<String, u64> {
        let text = std::fs::read_to_string(HEADER).expect("read mrc.h");
        let mut out = HashMap::new();
        for line in text.lines() {
            let mut w = line.split_whitespace();
            if w.next() != Some("#define") {
                continue;
            }
            let (Some(name), Some(first)) = (w.next(), w.next()) else {
                continue;
            };
            let rest: Vec<&str> = std::iter::once(first).chain(w).collect();
            let expr = rest.join(" ");
            let v = if let Some(e) = expr.strip_prefix('(').and_then(|e| e.strip_suffix(')')) {
                let (a, b) = e.split_once("<<").expect("shift");
                let a: u64 = a.trim().trim_end_matches('U').parse().expect("shift base");
                let b: u32 = b.trim().parse().expect("shift count");
                a << b
            } else if let Ok(v) = expr.parse::<u64>() {
                v
            } else {
                continue;
            };
            out.insert(name.to_string(), v);
        }
        out
    }

    #[test]
    fn constants_match_header() {
        let d = defines();
        let want: &[(&str, u64)] = &[
            ("MRC_DEFAULT_FAMILY", MRC_DEFAULT_FAMILY as u64),
            ("MRC_DEFAULT_UDP_PORT", MRC_DEFAULT_UDP_PORT as u64),
            ("SOL_MRC", SOL_MRC as u64),
            ("MRC_HEARTBEAT_MS", MRC_HEARTBEAT_MS as u64),
            ("MRC_CC", MRC_CC as u64),
            ("MRC_PATH_ADD", MRC_PATH_ADD as u64),
            ("MRC_PATH_DEL", MRC_PATH_DEL as u64),
            ("MRC_CC_NAME_MAX", MRC_CC_NAME_MAX as u64),
            ("MRC_HEARTBEAT_MS_MAX", MRC_HEARTBEAT_MS_MAX as u64),
            ("MRC_PATH_F_BACKUP", MRC_PATH_F_BACKUP as u64),
            ("MRC_MAX_MSG", MRC_MAX_MSG as u64),
        ];
        for (name, v) in want {
            assert_eq!(d.get(*name), Some(v), "{name} in mrc.h");
        }
    }

    /// Sizes and offsets of the C structures under the x86_64 and aarch64
    /// ABIs, worked out from the member types in mrc.h (`__kernel_sa_family_t`
    /// and `__be16`/`__u16` are 2 bytes, `__u32`/`__be32` 4, no padding).
    #[test]
    fn struct_layout_matches_header() {
        let text = std::fs::read_to_string(HEADER).expect("read mrc.h");
        for member in [
            "smrc_family",
            "smrc_port",
            "smrc_addr_family",
            "smrc_reserved",
            "smrc_scope_id",
            "smrc_addr",
            "mpr_path_id",
            "mpr_family",
            "mpr_flags",
            "mpr_sport",
            "mpr_dport",
            "mpr_reserved",
            "mpr_local[16]",
            "mpr_remote[16]",
        ] {
            assert!(text.contains(member), "mrc.h has no member {member}");
        }
        assert_eq!(size_of::<SockaddrMrc>(), 28);
        assert_eq!(offset_of!(SockaddrMrc, smrc_family), 0);
        assert_eq!(offset_of!(SockaddrMrc, smrc_port), 2);
        assert_eq!(offset_of!(SockaddrMrc, smrc_addr_family), 4);
        assert_eq!(offset_of!(SockaddrMrc, smrc_reserved), 6);
        assert_eq!(offset_of!(SockaddrMrc, smrc_scope_id), 8);
        assert_eq!(offset_of!(SockaddrMrc, smrc_addr), 12);

        assert_eq!(size_of::<MrcPathReq>(), 48);
        assert_eq!(offset_of!(MrcPathReq, mpr_path_id), 0);
        assert_eq!(offset_of!(MrcPathReq, mpr_family), 4);
        assert_eq!(offset_of!(MrcPathReq, mpr_flags), 6);
        assert_eq!(offset_of!(MrcPathReq, mpr_sport), 8);
        assert_eq!(offset_of!(MrcPathReq, mpr_dport), 10);
        assert_eq!(offset_of!(MrcPathReq, mpr_reserved), 12);
        assert_eq!(offset_of!(MrcPathReq, mpr_local), 16);
        assert_eq!(offset_of!(MrcPathReq, mpr_remote), 32);
    }
}
