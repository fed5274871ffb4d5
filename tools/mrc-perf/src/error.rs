// SPDX-License-Identifier: GPL-2.0
//! Errors of `mrc-perf`: what failed and, for system calls, the errno.

use std::ffi::CStr;
use std::fmt;

/// A failure. `what` names the operation (and connection); `errno` is set
/// when a system call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub what: String,
    pub errno: Option<i32>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A failed system call, with the errno it left.
    pub fn last_os(what: impl Into<String>) -> Error {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        Error::os(what, errno)
    }

    /// A failed system call with a known errno.
    pub fn os(what: impl Into<String>, errno: i32) -> Error {
        Error {
            what: what.into(),
            errno: Some(errno),
        }
    }

    /// A failed call that returned an `io::Error`: its errno when it has
    /// one, else its text.
    pub fn io(what: impl fmt::Display, e: &std::io::Error) -> Error {
        match e.raw_os_error() {
            Some(errno) => Error::os(what.to_string(), errno),
            None => Error::msg(format!("{what}: {e}")),
        }
    }

    /// A failure that is not a system call error (a verification or protocol
    /// error).
    pub fn msg(what: impl Into<String>) -> Error {
        Error {
            what: what.into(),
            errno: None,
        }
    }

    /// The same error with `prefix: ` in front of `what`.
    pub fn context(self, prefix: impl fmt::Display) -> Error {
        Error {
            what: format!("{prefix}: {}", self.what),
            errno: self.errno,
        }
    }
}

/// The C library's description of an errno value.
pub fn strerror(errno: i32) -> String {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: the buffer is valid for its length; the XSI strerror_r writes a
    // NUL-terminated string into it (truncated if needed).
    let rc = unsafe { libc::strerror_r(errno, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return format!("Unknown error {errno}");
    }
    // SAFETY: strerror_r succeeded, so the buffer holds a C string.
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
    s.to_string_lossy().into_owned()
}

impl fmt::Display for Error {
    /// `<what>: <strerror> (errno N)` for system call errors, `<what>`
    /// otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errno {
            Some(e) => write!(f, "{}: {} (errno {e})", self.what, strerror(e)),
            None => f.write_str(&self.what),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_errno() {
        let e = Error::os("connect", libc::ECONNREFUSED).context("conn 1");
        assert_eq!(
            e.to_string(),
            "conn 1: connect: Connection refused (errno 111)"
        );
    }

    #[test]
    fn display_without_errno() {
        assert_eq!(Error::msg("bad length").to_string(), "bad length");
    }
}
