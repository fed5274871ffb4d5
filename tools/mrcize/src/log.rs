// SPDX-License-Identifier: GPL-2.0
//! One-line messages on stderr, formatted on the stack (no allocation, one
//! write() so that lines of several threads do not mix).

use std::fmt::{self, Write};

/// A fixed buffer that drops what does not fit.
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Formats `mrcize: <args>` followed by a newline.
fn format(args: fmt::Arguments<'_>) -> Line {
    let mut l = Line {
        buf: [0; 512],
        len: 0,
    };
    let _ = l.write_str("mrcize: ");
    let _ = l.write_fmt(args);
    l.buf[l.len] = b'\n';
    l.len += 1;
    l
}

/// Writes `mrcize: <args>` as one line to stderr.
pub fn line(args: fmt::Arguments<'_>) {
    let l = format(args);
    // SAFETY: the buffer is valid for l.len bytes; errno is kept so that
    // logging does not change what the caller reports.
    unsafe {
        let e = *libc::__errno_location();
        libc::write(2, l.buf.as_ptr() as *const libc::c_void, l.len);
        *libc::__errno_location() = e;
    }
}

/// The C library's text for an errno value, without allocation.
pub struct Errno(pub i32);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0 as libc::c_char; 128];
        // SAFETY: buf is valid for its length; the XSI strerror_r writes a
        // NUL-terminated string into it.
        let rc = unsafe { libc::strerror_r(self.0, buf.as_mut_ptr(), buf.len()) };
        if rc != 0 {
            return write!(f, "errno {}", self.0);
        }
        // SAFETY: strerror_r succeeded, so buf holds a C string.
        let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        write!(f, "{}", s.to_string_lossy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_truncates() {
        let l = format(format_args!("fd {}: {}", 3, Errno(libc::ECONNREFUSED)));
        assert_eq!(&l.buf[..l.len], b"mrcize: fd 3: Connection refused\n");
        let long = "x".repeat(2000);
        let l = format(format_args!("{long}"));
        assert_eq!(l.len, 512);
        assert_eq!(l.buf[511], b'\n');
    }
}
