// SPDX-License-Identifier: GPL-2.0
//! The address family number of AF_MRC.
//!
//! MRC takes a free address family slot chosen by the module parameter
//! `family` (default [`MRC_DEFAULT_FAMILY`]); the loaded module shows its
//! value in [`MRC_FAMILY_PARAM`].

use crate::uapi::MRC_DEFAULT_FAMILY;
use std::io;

/// Module parameter holding the address family of the loaded MRC module.
pub const MRC_FAMILY_PARAM: &str = "/sys/module/mrc/parameters/family";

/// The address family of MRC: the `family` parameter of the loaded module,
/// or [`MRC_DEFAULT_FAMILY`] when the module is not loaded (creating a
/// socket then fails with `EAFNOSUPPORT`).
///
/// Fails if the parameter file exists but cannot be read or parsed.
pub fn family() -> io::Result<i32> {
    match std::fs::read_to_string(MRC_FAMILY_PARAM) {
        Ok(s) => parse_family(&s).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{MRC_FAMILY_PARAM}: bad value `{}`", s.trim()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MRC_DEFAULT_FAMILY),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("read {MRC_FAMILY_PARAM}: {e}"),
        )),
    }
}

/// Parses the text of [`MRC_FAMILY_PARAM`]: a family number in 1..=255
/// (the kernel's AF_MAX is below that) with optional white space.
pub fn parse_family(s: &str) -> Option<i32> {
    s.trim()
        .parse::<i32>()
        .ok()
        .filter(|f| (1..=255).contains(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parameter_text() {
        assert_eq!(parse_family("23\n"), Some(23));
        assert_eq!(parse_family(" 44 "), Some(44));
        assert_eq!(parse_family(""), None);
        assert_eq!(parse_family("0"), None);
        assert_eq!(parse_family("x"), None);
    }
}
