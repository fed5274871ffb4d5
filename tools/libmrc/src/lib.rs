// SPDX-License-Identifier: GPL-2.0
//! Safe Rust API for MRC sockets.
//!
//! MRC (Multi-path Reliable Connectivity) is a reliable transport over UDP
//! that spreads a connection over several network paths. Its kernel module
//! registers a socket family, AF_MRC, with two socket types:
//! `SOCK_SEQPACKET` (reliable messages) and `SOCK_STREAM` (a byte stream
//! like TCP). Both use the same calls as TCP: bind(), listen(), accept(),
//! connect(), with a `struct sockaddr_mrc` carrying an IPv4 or IPv6 address
//! and a port.
//!
//! This crate mirrors the C header `include/uapi/linux/mrc.h` of the
//! repository (module [`uapi`]: constants, `struct sockaddr_mrc`, `struct
//! mrc_path_req`; its unit tests compare them with the header) and wraps it:
//!
//! * [`family`]: the AF_MRC number of the loaded module (a module
//!   parameter, 23 by default);
//! * [`SockaddrMrc`] conversions to and from [`std::net::SocketAddr`]
//!   (IPv4, IPv6 with scope id);
//! * [`MrcSocket`]: socket creation of both types, bind/listen/accept/
//!   connect, send/recv, timeouts, [`MrcSocket::cookie`] (`SO_COOKIE`, the
//!   key of a connection in `mrc-status conns`);
//! * the `SOL_MRC` options: [`MrcSocket::set_heartbeat_ms`],
//!   [`MrcSocket::set_cc`], [`MrcSocket::add_path`],
//!   [`MrcSocket::del_path`];
//! * [`Endpoint`]: command-line addresses such as `fe80::1%eth0`.
//!
//! Errors are [`std::io::Error`]s carrying the errno of the failed call.
//! Without the module, [`MrcSocket::new`] fails with `EAFNOSUPPORT`.
//!
//! # Examples
//!
//! A byte-stream echo server:
//!
//! ```no_run
//! use libmrc::{MrcSocket, SockType};
//! use std::io::{Read, Write};
//!
//! let addr = "0.0.0.0:7000".parse().unwrap();
//! let listener = MrcSocket::bind_listen(SockType::Stream, &addr, 16)?;
//! loop {
//!     let (mut conn, peer) = listener.accept()?;
//!     println!("connection from {peer}, cookie {}", conn.cookie()?);
//!     let mut buf = [0u8; 65536];
//!     loop {
//!         let n = conn.read(&mut buf)?;
//!         if n == 0 {
//!             break;
//!         }
//!         conn.write_all(&buf[..n])?;
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A message client that sets options before connecting and adds a second
//! path afterwards:
//!
//! ```no_run
//! use libmrc::{MrcSocket, PathSpec, SockType};
//!
//! let sock = MrcSocket::new(SockType::Seqpacket)?;
//! sock.set_heartbeat_ms(50)?;
//! sock.set_cc("delay")?;
//! sock.connect(&"10.0.0.2:7000".parse().unwrap())?;
//! let id = sock.add_path(&PathSpec::new(
//!     "10.1.0.1".parse().unwrap(),
//!     "10.1.0.2".parse().unwrap(),
//! ))?;
//! sock.send(b"one whole message")?;
//! let mut buf = vec![0u8; libmrc::MRC_MAX_MSG];
//! let (n, truncated) = sock.recv_msg(&mut buf)?;
//! assert!(!truncated);
//! println!("reply of {n} bytes; path {id} added");
//! sock.del_path(id)?;
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod addr;
mod endpoint;
mod family;
mod opts;
mod socket;
pub mod uapi;

pub use addr::{inet_sockaddr, SOCKADDR_MRC_LEN};
pub use endpoint::Endpoint;
pub use family::{family, parse_family, MRC_FAMILY_PARAM};
pub use opts::PathSpec;
pub use socket::{MrcSocket, SockType};
pub use uapi::{
    MrcPathReq, SockaddrMrc, MRC_CC, MRC_CC_NAME_MAX, MRC_DEFAULT_FAMILY, MRC_DEFAULT_UDP_PORT,
    MRC_HEARTBEAT_MS, MRC_HEARTBEAT_MS_MAX, MRC_MAX_MSG, MRC_PATH_ADD, MRC_PATH_DEL,
    MRC_PATH_F_BACKUP, SOL_MRC,
};
