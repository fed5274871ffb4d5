// SPDX-License-Identifier: GPL-2.0
//! `libmrcize.so`: an LD_PRELOAD library that turns the TCP sockets of an
//! unmodified program into MRC SOCK_STREAM sockets.
//!
//! `socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP)` creates an
//! `AF_MRC` `SOCK_STREAM` socket instead; the calls that carry addresses
//! translate between the program's `sockaddr_in`/`sockaddr_in6` and
//! `sockaddr_mrc`; TCP, IP and IPv6 socket options are answered in place
//! of the kernel. Everything else reaches the C library unchanged. The
//! launcher is `mrcize run CMD`; tools/mrcize/README.md lists the calls,
//! the option mapping and the limits.
//!
//! Modules: [`hooks`] (the replaced functions), [`xlate`] (address
//! translation), [`opts`] (socket options), [`fdtab`] (per-descriptor
//! records), [`fallback`] (TCP fallback), [`real`] (the C library's
//! functions), [`config`], [`log`].

// The unit tests build this crate as a program: the replaced functions
// are left out of it (they would replace the test harness's own calls),
// and what only they use is then unused.
#![cfg_attr(test, allow(dead_code))]

pub mod config;
pub mod fallback;
pub mod fdtab;
#[cfg(not(test))]
pub mod hooks;
pub mod log;
pub mod opts;
pub mod real;
pub mod xlate;

/// Runs when the library is loaded, before the program's main(): looks up
/// the C library's functions and reads the environment.
#[cfg(not(test))]
extern "C" fn init() {
    real::resolve_all();
    config::load();
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
