// SPDX-License-Identifier: GPL-2.0

//! `AF_MRC` sockets: what `socket()` accepts and the state each socket keeps.

use kernel::prelude::*;

use crate::mrc_sys::{self, SockState};

/// State of one MRC socket, stored after its `struct sock`.
pub(crate) struct MrcSock {
    /// Protocol number given to `socket()` (only 0 exists today).
    _protocol: i32,
}

impl SockState for MrcSock {
    fn create(sock_type: i32, protocol: i32) -> Result<Self> {
        if sock_type != mrc_sys::SOCK_SEQPACKET {
            return Err(mrc_sys::err::socket_type_not_supported());
        }
        if protocol != 0 {
            return Err(mrc_sys::err::protocol_not_supported());
        }
        Ok(Self {
            _protocol: protocol,
        })
    }
}
