// SPDX-License-Identifier: GPL-2.0

//! MRC (Multi-path Reliable Connectivity): a reliable, message-oriented
//! transport that sprays each connection over many network paths.
//!
//! Registration order, reversed on unload (field order of [`MrcModule`]):
//! 1. the protocol (`struct proto`, the slab of MRC sockets);
//! 2. the pernet subsystem: per namespace a UDP tunnel socket, counters and
//!    `/proc/net/mrc`;
//! 3. the generic netlink family `mrc`, whose handlers read pernet state;
//! 4. the socket family `AF_MRC`: only now can applications create sockets.

use kernel::{c_str, prelude::*};

// The sans-IO core is public: the same files form the host crate
// `tools/mrc-core`, where they are tested.
pub mod mrc_cc;
pub mod mrc_conn;
pub mod mrc_limit;
pub mod mrc_path;
pub mod mrc_proto;
pub mod mrc_slots;

// What the core allocates comes from here (`tools/mrc-core` has its own).
mod mrc_alloc;
mod mrc_io;
mod mrc_net;
mod mrc_rx;
mod mrc_sock;
mod mrc_sys;

use mrc_sys::{
    FamilyRegistration, GenlRegistration, Net, PernetRegistration, PernetState, ProtoRegistration,
};

/// A namespace's MRC state, from its tunnel sockets up to its connections.
impl PernetState for mrc_net::MrcNet {
    fn new() -> impl PinInit<Self, Error> {
        Self::new_state()
    }

    fn start(&self, net: &Net) -> Result {
        self.open(net)
    }

    fn stop(&self, _net: &Net) {
        // Connections hold their namespace, so normally none is left; tear
        // down whatever still is before the tunnels go.
        while let Some(sk) = self.take_any_session() {
            mrc_sock::abort_for_exit(&sk);
        }
        self.close();
    }
}

module! {
    type: MrcModule,
    name: "mrc",
    author: "MRC for Linux contributors",
    description: "Multi-path Reliable Connectivity transport (AF_MRC)",
    license: "GPL",
}

struct MrcModule {
    // Dropped in declaration order: the reverse of registration.
    _family: FamilyRegistration,
    _genl: GenlRegistration,
    _pernet: PernetRegistration<mrc_net::MrcNet>,
    _proto: ProtoRegistration,
}

impl kernel::Module for MrcModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let family = mrc_sys::param_family();
        if !(1..mrc_sys::AF_MAX).contains(&family) {
            pr_err!(
                "family={} is out of range 1..{}\n",
                family,
                mrc_sys::AF_MAX - 1
            );
            return Err(EINVAL);
        }
        let proto = ProtoRegistration::register(module, c_str!("MRC"))?;
        let pernet = PernetRegistration::register()?;
        let genl = GenlRegistration::register(module)?;
        let fam = FamilyRegistration::register(module, family).inspect_err(|e| {
            pr_err!("cannot register socket family {}: {:?}\n", family, e);
        })?;
        pr_info!("family {}, UDP port {}\n", family, mrc_sys::param_port());
        Ok(Self {
            _family: fam,
            _genl: genl,
            _pernet: pernet,
            _proto: proto,
        })
    }
}
