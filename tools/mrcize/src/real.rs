// SPDX-License-Identifier: GPL-2.0
//! The C library's own functions behind the ones mrcize replaces, found
//! with `dlsym(RTLD_NEXT, name)`.
//!
//! All are looked up when the library is loaded ([`resolve_all`], from the
//! constructor) so that no lookup happens later, in a thread or after
//! fork(); a function called before that (by another library's
//! constructor) is looked up on first use. A missing function fails with
//! ENOSYS.

use libc::{c_int, c_void, size_t, sockaddr, socklen_t, ssize_t};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

fn set_errno(e: c_int) {
    // SAFETY: __errno_location() returns this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// Looks `name` (NUL terminated) up in the libraries after this one.
fn lookup(cache: &AtomicUsize, name: &[u8]) -> usize {
    let p = cache.load(Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: name is NUL terminated; dlsym is thread safe.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const libc::c_char) } as usize;
    cache.store(f, Relaxed);
    f
}

macro_rules! real {
    ($($name:ident($($arg:ident: $t:ty),*) -> $ret:ty;)*) => {
        mod cache {
            use std::sync::atomic::AtomicUsize;
            $(
                #[allow(non_upper_case_globals)]
                pub static $name: AtomicUsize = AtomicUsize::new(0);
            )*
        }

        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            ///
            /// As for the C function: pointers must be valid for the
            /// lengths given.
            pub unsafe fn $name($($arg: $t),*) -> $ret {
                let f = lookup(&cache::$name, concat!(stringify!($name), "\0").as_bytes());
                if f == 0 {
                    set_errno(libc::ENOSYS);
                    return -1;
                }
                // SAFETY: f is the address of the C function of this name,
                // whose prototype is the one written here.
                let f: unsafe extern "C" fn($($t),*) -> $ret = unsafe { std::mem::transmute(f) };
                // SAFETY: the caller upholds the C function's contract.
                unsafe { f($($arg),*) }
            }
        )*

        /// Looks every function up.
        pub fn resolve_all() {
            $( lookup(&cache::$name, concat!(stringify!($name), "\0").as_bytes()); )*
            lookup(&FCNTL, b"fcntl\0");
            lookup(&FCNTL64, b"fcntl64\0");
        }
    };
}

real! {
    socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t;
    recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t;
    getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
    setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
    close(fd: c_int) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(old: c_int, new: c_int) -> c_int;
    dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
}

static FCNTL: AtomicUsize = AtomicUsize::new(0);
static FCNTL64: AtomicUsize = AtomicUsize::new(0);

type Fcntl = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;

/// # Safety
///
/// As for [`fcntl`].
unsafe fn fcntl_via(cache: &AtomicUsize, name: &[u8], fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let mut f = lookup(cache, name);
    if f == 0 {
        f = lookup(&FCNTL, b"fcntl\0");
    }
    if f == 0 {
        set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: f is the C library's fcntl (or fcntl64), a variadic function
    // of this prototype.
    let f: Fcntl = unsafe { std::mem::transmute(f) };
    // SAFETY: the third argument is passed through as the caller gave it
    // (an integer or a pointer, one machine word); commands without one
    // ignore it.
    unsafe { f(fd, cmd, arg) }
}

/// The C library's fcntl(), with its optional argument as a machine word.
///
/// # Safety
///
/// As for fcntl(): `arg` must be what `cmd` expects (a valid pointer for
/// the commands that take one).
pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller upholds fcntl()'s contract.
    unsafe { fcntl_via(&FCNTL, b"fcntl\0", fd, cmd, arg) }
}

/// The C library's fcntl64() (the same as fcntl() on 64-bit systems).
///
/// # Safety
///
/// As for [`fcntl`].
pub unsafe fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller upholds fcntl()'s contract.
    unsafe { fcntl_via(&FCNTL64, b"fcntl64\0", fd, cmd, arg) }
}
