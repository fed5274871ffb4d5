// SPDX-License-Identifier: GPL-2.0
//! The `SOL_MRC` socket options of [`MrcSocket`].

use crate::addr::ip_bytes;
use crate::socket::MrcSocket;
use crate::uapi::{
    MrcPathReq, MRC_CC, MRC_CC_NAME_MAX, MRC_HEARTBEAT_MS, MRC_PATH_ADD, MRC_PATH_DEL,
    MRC_PATH_F_BACKUP, SOL_MRC,
};
use std::io;
use std::mem;
use std::net::IpAddr;

/// A path to add to a connected socket with [`MrcSocket::add_path`].
///
/// Both addresses must be of the same family. Ports are UDP ports of the
/// tunnel: `sport` 0 picks a source port, `dport` 0 is the peer's MRC UDP
/// port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    /// Local address; the unspecified address (`0.0.0.0`, `::`) picks the
    /// route's source address.
    pub local: IpAddr,
    /// The peer's address.
    pub remote: IpAddr,
    /// UDP source port, 0 to pick one.
    pub sport: u16,
    /// The peer's UDP port, 0 for the MRC port.
    pub dport: u16,
    /// A backup path is used only when no other path is.
    pub backup: bool,
}

impl PathSpec {
    /// A path from `local` to `remote` with default ports, not a backup.
    pub fn new(local: IpAddr, remote: IpAddr) -> PathSpec {
        PathSpec {
            local,
            remote,
            sport: 0,
            dport: 0,
            backup: false,
        }
    }

    /// The `struct mrc_path_req` for it; `EINVAL` if the families differ.
    pub fn to_req(&self) -> io::Result<MrcPathReq> {
        let (lf, local) = ip_bytes(&self.local);
        let (rf, remote) = ip_bytes(&self.remote);
        if lf != rf {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(MrcPathReq {
            mpr_path_id: 0,
            mpr_family: lf,
            mpr_flags: if self.backup { MRC_PATH_F_BACKUP } else { 0 },
            mpr_sport: self.sport,
            mpr_dport: self.dport,
            mpr_reserved: 0,
            mpr_local: local,
            mpr_remote: remote,
        })
    }
}

impl MrcSocket {
    /// `MRC_HEARTBEAT_MS`: probe interval of the idle paths of a connection
    /// with data in flight, 1..=60000 ms. Before connect() or listen()
    /// (accepted connections inherit it) or on a running connection.
    pub fn set_heartbeat_ms(&self, ms: u32) -> io::Result<()> {
        self.setsockopt(SOL_MRC, MRC_HEARTBEAT_MS, &ms)
    }

    /// The probe interval in force, in milliseconds.
    pub fn heartbeat_ms(&self) -> io::Result<u32> {
        self.getsockopt(SOL_MRC, MRC_HEARTBEAT_MS)
    }

    /// `MRC_CC`: the congestion controller of the connection's paths,
    /// `"delay"` or `"reno"` (others: `EINVAL`). Only before connect() or
    /// listen() (`EISCONN` afterwards).
    pub fn set_cc(&self, name: &str) -> io::Result<()> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() >= MRC_CC_NAME_MAX || b.contains(&0) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.setsockopt_bytes(SOL_MRC, MRC_CC, b.as_ptr(), b.len())
    }

    /// The congestion controller's name.
    pub fn cc(&self) -> io::Result<String> {
        let mut buf = [0u8; MRC_CC_NAME_MAX];
        let n = self.getsockopt_bytes(SOL_MRC, MRC_CC, &mut buf)?;
        let name = &buf[..n];
        let end = name.iter().position(|b| *b == 0).unwrap_or(n);
        Ok(String::from_utf8_lossy(&name[..end]).into_owned())
    }

    /// `MRC_PATH_ADD` (as getsockopt, which reports the id): adds a path to
    /// a connected socket and returns its id. `ENOTCONN`, `ENOSPC` (path
    /// table full), `EEXIST` (same addresses and ports).
    pub fn add_path(&self, path: &PathSpec) -> io::Result<u32> {
        let mut req = path.to_req()?;
        let mut len = mem::size_of::<MrcPathReq>() as libc::socklen_t;
        // SAFETY: req is readable and writable for len bytes; the kernel
        // reads the request from it and writes it back with the id set.
        crate::socket::cvt(unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(self),
                SOL_MRC,
                MRC_PATH_ADD,
                &mut req as *mut MrcPathReq as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok(req.mpr_path_id)
    }

    /// `MRC_PATH_DEL`: removes path `id`; what was in flight on it is
    /// resent on the others. `ENOENT` for an unknown id, `EBUSY` for the
    /// last path.
    pub fn del_path(&self, id: u32) -> io::Result<()> {
        self.setsockopt(SOL_MRC, MRC_PATH_DEL, &id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_req_fields() {
        let mut p = PathSpec::new(
            "10.0.0.1".parse().expect("ip"),
            "10.0.1.1".parse().expect("ip"),
        );
        p.sport = 5000;
        p.backup = true;
        let r = p.to_req().expect("req");
        assert_eq!(r.mpr_family, libc::AF_INET as u16);
        assert_eq!(r.mpr_flags, MRC_PATH_F_BACKUP);
        assert_eq!(r.mpr_sport, 5000);
        assert_eq!(r.mpr_dport, 0);
        assert_eq!(&r.mpr_local[..4], &[10, 0, 0, 1]);
        assert_eq!(&r.mpr_remote[..5], &[10, 0, 1, 1, 0]);
        let mixed = PathSpec::new(
            "10.0.0.1".parse().expect("ip"),
            "fd00::1".parse().expect("ip"),
        );
        assert_eq!(
            mixed.to_req().map_err(|e| e.raw_os_error()),
            Err(Some(libc::EINVAL))
        );
    }
}
