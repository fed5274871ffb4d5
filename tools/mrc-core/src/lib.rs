// SPDX-License-Identifier: GPL-2.0
//! Host build of the MRC sans-IO core.
//!
//! These are the very files that `mrc.ko` compiles; they depend on `core`
//! only, so the host can unit-test, property-test, simulate and fuzz them.

#![no_std]

extern crate alloc;

/// What the core allocates comes from here; the module build has its own.
pub mod mrc_alloc;

#[path = "../../../mrc_proto.rs"]
pub mod mrc_proto;

#[path = "../../../mrc_path.rs"]
pub mod mrc_path;

#[path = "../../../mrc_cc.rs"]
pub mod mrc_cc;

#[path = "../../../mrc_conn.rs"]
pub mod mrc_conn;

#[path = "../../../mrc_limit.rs"]
pub mod mrc_limit;

#[path = "../../../mrc_slots.rs"]
pub mod mrc_slots;
