// SPDX-License-Identifier: GPL-2.0
//! Settings from the environment, read once when the library is loaded, and
//! the AF_MRC number, read once on first need.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};

/// Environment variable: fall back to TCP when no MRC peer answers.
pub const ENV_FALLBACK: &str = "MRCIZE_FALLBACK";
/// Environment variable: how long a non-blocking connect() waits for MRC's
/// answer when falling back is on, in milliseconds.
pub const ENV_FALLBACK_WAIT: &str = "MRCIZE_FALLBACK_WAIT_MS";
/// Its default: MRC's first SYN timeout is 100 ms and doubles; a second
/// covers three tries.
pub const DEFAULT_FALLBACK_WAIT_MS: i32 = 1000;

static FALLBACK: AtomicBool = AtomicBool::new(false);
static FALLBACK_WAIT_MS: AtomicI32 = AtomicI32::new(DEFAULT_FALLBACK_WAIT_MS);
/// The process whose memory the descriptor table describes; 0 if not
/// known yet.
static OWNER: AtomicI32 = AtomicI32::new(0);
/// AF_MRC; 0 until looked up.
static FAMILY: AtomicI32 = AtomicI32::new(0);

/// Whether an environment value turns a switch on: set, not empty, not
/// "0".
pub fn is_on(v: Option<&std::ffi::OsStr>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0")
}

/// Reads the environment and notes the process (the library's
/// constructor calls this).
pub fn load() {
    FALLBACK.store(is_on(std::env::var_os(ENV_FALLBACK).as_deref()), Relaxed);
    let wait = parse_ms(std::env::var(ENV_FALLBACK_WAIT).ok().as_deref());
    FALLBACK_WAIT_MS.store(wait, Relaxed);
    note_owner();
    // SAFETY: registers a plain function, run in the child after fork()
    // (not after vfork(), whose child shares our memory).
    unsafe { libc::pthread_atfork(None, None, Some(after_fork)) };
}

extern "C" fn after_fork() {
    note_owner();
}

fn note_owner() {
    // SAFETY: plain system call.
    OWNER.store(unsafe { libc::getpid() }, Relaxed);
}

/// Whether this is the child of a vfork() (or of a clone() sharing
/// memory): its close() and dup2() calls before exec must not change the
/// parent's records, which are in the memory they share.
pub fn borrowed_memory() -> bool {
    let owner = OWNER.load(Relaxed);
    // SAFETY: plain system call.
    owner != 0 && owner != unsafe { libc::getpid() }
}

/// A wait in milliseconds from the environment: 0..=60000, else the
/// default.
pub fn parse_ms(v: Option<&str>) -> i32 {
    v.and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|ms| (0..=60_000).contains(ms))
        .unwrap_or(DEFAULT_FALLBACK_WAIT_MS)
}

/// How long a non-blocking connect() waits for MRC's answer before it
/// returns EINPROGRESS (with falling back on).
pub fn fallback_wait_ms() -> i32 {
    FALLBACK_WAIT_MS.load(Relaxed)
}

/// Whether refused MRC connections fall back to TCP.
pub fn fallback() -> bool {
    FALLBACK.load(Relaxed)
}

/// The AF_MRC number: the loaded module's `family` parameter, else the
/// default (socket() then fails with EAFNOSUPPORT and mrcize uses TCP).
pub fn mrc_family() -> i32 {
    let f = FAMILY.load(Relaxed);
    if f != 0 {
        return f;
    }
    let f = libmrc::family().unwrap_or(libmrc::MRC_DEFAULT_FAMILY);
    FAMILY.store(f, Relaxed);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn wait_values() {
        assert_eq!(parse_ms(None), DEFAULT_FALLBACK_WAIT_MS);
        assert_eq!(parse_ms(Some("250")), 250);
        assert_eq!(parse_ms(Some("0")), 0);
        assert_eq!(parse_ms(Some("-1")), DEFAULT_FALLBACK_WAIT_MS);
        assert_eq!(parse_ms(Some("x")), DEFAULT_FALLBACK_WAIT_MS);
    }

    #[test]
    fn switch_values() {
        assert!(!is_on(None));
        assert!(!is_on(Some(OsStr::new(""))));
        assert!(!is_on(Some(OsStr::new("0"))));
        assert!(is_on(Some(OsStr::new("1"))));
        assert!(is_on(Some(OsStr::new("yes"))));
    }
}
