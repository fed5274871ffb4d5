// SPDX-License-Identifier: GPL-2.0
//! Fuzz target: the connection state machine must never panic, spin or break an invariant,
//! whatever sequence of packets, timers and calls it is driven with.
//!
//! The input is read as the setup of a world (a connected or connecting client and server, a
//! network between them, perhaps a lone half-open connection) followed by operations: deliver,
//! drop, duplicate or tamper with the peers' packets, forge packets of any type with numbers
//! near the connection's own, feed raw bytes to the decoder, move time, fire timers, send
//! messages, release received bytes, close, abort, add and remove paths. The driver and its
//! invariants are those of the property test `tools/mrc-core/tests/conn_fuzz.rs`, which this
//! target includes; a crash replays on stable Rust with
//! `CONN_FUZZ_INPUT=<file> cargo test -p mrc-core --test conn_fuzz replay_input -- --nocapture`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../mrc-core/tests/conn_fuzz.rs"]
mod conn_fuzz;

fuzz_target!(|data: &[u8]| {
    conn_fuzz::run_bytes(data);
});
