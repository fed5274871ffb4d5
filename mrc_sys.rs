// SPDX-License-Identifier: GPL-2.0

//! The module's only door to C.
//!
//! This file holds the bindings that Kbuild generates from
//! `include/mrc_bindings.h` and small safe wrappers around them, in the style
//! of `rust/kernel/net/phy.rs`. The rest of the module calls these wrappers
//! and never names `bindings::` itself.

use crate::mrc_conn::{ConnError, OpenError, RemovePathError, SendError, SendRoom};
use core::{
    cell::UnsafeCell,
    ffi::c_void,
    marker::PhantomData,
    mem::{size_of, MaybeUninit},
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    error::{from_err_ptr, from_result, to_result, Error},
    ffi::{c_char, c_int, c_uint, c_ulong},
    prelude::*,
    str::CStr,
    types::Opaque,
    ThisModule,
};

#[allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    dead_code,
    improper_ctypes,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unknown_lints,
    unnecessary_transmutes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn
)]
mod bindings {
    pub type __kernel_size_t = usize;
    pub type __kernel_ssize_t = isize;
    pub type __kernel_ptrdiff_t = isize;
    include!("mrc_bindings_generated.rs");
}

/// Returns `-errno` of a C constant as a kernel [`Error`].
fn errno(e: u32) -> Error {
    // `e` is one of the small positive errno constants; the cast cannot wrap.
    Error::from_errno(-(e as c_int))
}

// The core names its errors; the socket layer reports them as the kernel's
// errno values.

impl From<ConnError> for Error {
    fn from(e: ConnError) -> Error {
        match e {
            ConnError::TimedOut => errno(bindings::ETIMEDOUT),
            ConnError::Reset => errno(bindings::ECONNRESET),
            ConnError::Refused => errno(bindings::ECONNREFUSED),
            ConnError::Protocol => errno(bindings::EPROTO),
        }
    }
}

impl From<SendError> for Error {
    fn from(e: SendError) -> Error {
        match e {
            SendError::NotConnected => errno(bindings::ENOTCONN),
            SendError::Shutdown => EPIPE,
            SendError::MsgSize => errno(bindings::EMSGSIZE),
            SendError::WouldBlock => EAGAIN,
            SendError::Failed(e) => e.into(),
        }
    }
}

impl From<RemovePathError> for Error {
    fn from(e: RemovePathError) -> Error {
        match e {
            RemovePathError::NotFound => ENOENT,
            RemovePathError::LastPath => EBUSY,
        }
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Error {
        match e {
            OpenError::AlreadyStarted => errno(bindings::EISCONN),
            OpenError::NoPath | OpenError::Invalid => EINVAL,
        }
    }
}

/// The positive errno value of `e`, as `SO_ERROR` and netlink report it.
pub(crate) fn errno_of(e: impl Into<Error>) -> u32 {
    e.into().to_errno().unsigned_abs()
}

/// Errors the module returns that `kernel::error::code` does not name.
pub(crate) mod err {
    use super::{bindings, errno, Error};

    /// The socket type is not supported by this family.
    pub(crate) fn socket_type_not_supported() -> Error {
        errno(bindings::ESOCKTNOSUPPORT)
    }
    /// The protocol is not supported by this family.
    pub(crate) fn protocol_not_supported() -> Error {
        errno(bindings::EPROTONOSUPPORT)
    }
    /// The operation is not supported.
    pub(crate) fn not_supported() -> Error {
        errno(bindings::EOPNOTSUPP)
    }
    /// The message does not fit in one datagram.
    pub(crate) fn message_too_long() -> Error {
        errno(bindings::EMSGSIZE)
    }
    /// The address family is not available (e.g. IPv6 disabled).
    pub(crate) fn address_family_not_supported() -> Error {
        errno(bindings::EAFNOSUPPORT)
    }
    /// The port is taken.
    pub(crate) fn address_in_use() -> Error {
        errno(bindings::EADDRINUSE)
    }
    /// The address cannot be used (no route, unspecified, port 0).
    pub(crate) fn address_not_available() -> Error {
        errno(bindings::EADDRNOTAVAIL)
    }
    /// The socket needs a local address first.
    pub(crate) fn destination_address_required() -> Error {
        errno(bindings::EDESTADDRREQ)
    }
    /// A connection attempt is already in progress.
    pub(crate) fn already() -> Error {
        errno(bindings::EALREADY)
    }
    /// The socket is already connected.
    pub(crate) fn is_connected() -> Error {
        errno(bindings::EISCONN)
    }
    /// The socket is not connected.
    pub(crate) fn not_connected() -> Error {
        errno(bindings::ENOTCONN)
    }
    /// A non-blocking connect has started.
    pub(crate) fn in_progress() -> Error {
        errno(bindings::EINPROGRESS)
    }
    /// The peer reset the connection.
    pub(crate) fn connection_reset() -> Error {
        errno(bindings::ECONNRESET)
    }
    /// Unknown socket option or option level.
    pub(crate) fn no_protocol_option() -> Error {
        errno(bindings::ENOPROTOOPT)
    }
}

/// Largest message (`MRC_MAX_MSG` of the uapi header).
pub(crate) const MRC_MAX_MSG: u32 = bindings::MRC_MAX_MSG;

/// `SO_RCVBUF` and `SO_SNDBUF` of a new MRC socket, as TCP's take
/// `tcp_rmem[1]` and `tcp_wmem[1]`: a connection uses half of each as its
/// window and send buffer (the rest is the packets' overhead), and 3 MiB
/// holds two whole messages with room to stream. The user may set less
/// (or, up to `rmem_max`/`wmem_max`, more).
pub(crate) const SOCK_BUF_DEFAULT: u32 = 2 * (2 * MRC_MAX_MSG + (1 << 20));

const IPPROTO_UDP: u8 = bindings::IPPROTO_UDP as u8;

/// `SOCK_SEQPACKET`: a connection of whole messages.
pub(crate) const SOCK_SEQPACKET: i32 = bindings::sock_type_SOCK_SEQPACKET as i32;

/// `SOCK_STREAM`: a connection of one byte stream.
pub(crate) const SOCK_STREAM: i32 = bindings::sock_type_SOCK_STREAM as i32;

/// `ioctl` commands of MRC sockets.
pub(crate) mod ioctl_cmd {
    /// `SIOCINQ` (`FIONREAD`): bytes readable.
    pub(crate) const INQ: u32 = 0x541b;
    /// `SIOCOUTQ` (`TIOCOUTQ`): bytes sent and not yet acknowledged.
    pub(crate) const OUTQ: u32 = 0x5411;
}

/// Address family of the per-namespace UDP tunnel socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6 (bound with `IPV6_V6ONLY`, so it does not shadow the IPv4 socket).
    V6,
}

/// One past the largest address family number the kernel accepts.
pub(crate) const AF_MAX: i32 = bindings::AF_MAX as i32;

/// The value of the module parameter `family`: the number of `AF_MRC`.
pub(crate) fn param_family() -> i32 {
    // SAFETY: reads an `int` module parameter; no preconditions.
    unsafe { bindings::mrc_param_family() }
}

/// The value of the module parameter `port`: the UDP port of the tunnel.
pub(crate) fn param_port() -> u16 {
    // SAFETY: reads a `ushort` module parameter; no preconditions.
    unsafe { bindings::mrc_param_port() }
}

/// Bytes of received packets all MRC sockets hold together.
pub(crate) fn rmem_total() -> u64 {
    // SAFETY: an atomic read; no preconditions.
    unsafe { bindings::mrc_rmem_total_read() }.max(0) as u64
}

/// Limit of [`rmem_total`]: the `rmem_max` module parameter, or an eighth of
/// the memory that was free when the module loaded.
pub(crate) fn rmem_limit() -> u64 {
    // SAFETY: reads a module parameter with `READ_ONCE`; no preconditions.
    unsafe { bindings::mrc_rmem_limit() as u64 }
}

/// The value of the module parameter `gso`, which can change at any time.
pub(crate) fn param_gso() -> bool {
    // SAFETY: reads a `bool` module parameter with `READ_ONCE`; no preconditions.
    unsafe { bindings::mrc_param_gso() }
}

/// The module parameters `rst_rate` and `rst_burst`, which can change at
/// any time: the token bucket of RSTs answering unknown sessions.
pub(crate) fn param_rst_limit() -> (u32, u32) {
    // SAFETY: reads two `uint` module parameters with `READ_ONCE`; no
    // preconditions.
    unsafe {
        (
            bindings::mrc_param_rst_rate(),
            bindings::mrc_param_rst_burst(),
        )
    }
}

/// The module parameter `fin_timeout_ms`, which can change at any time.
pub(crate) fn param_fin_timeout_ms() -> u32 {
    // SAFETY: reads a `uint` module parameter with `READ_ONCE`; no preconditions.
    unsafe { bindings::mrc_param_fin_timeout_ms() }
}

/// The module parameter `max_orphans`, which can change at any time.
pub(crate) fn param_max_orphans() -> u32 {
    // SAFETY: reads a `uint` module parameter with `READ_ONCE`; no preconditions.
    unsafe { bindings::mrc_param_max_orphans() }
}

/// The value of the module parameter `pacing`, which can change at any time.
pub(crate) fn param_pacing() -> bool {
    // SAFETY: reads a `bool` module parameter with `READ_ONCE`; no preconditions.
    unsafe { bindings::mrc_param_pacing() }
}

/// A C object at a fixed address that C uses after registration.
///
/// # Invariants
///
/// Rust writes the contents only in module init, before it registers the
/// object with C. From then on C owns them: the registration may fill in
/// fields (an id, a slab cache), which C then accesses with its own
/// synchronisation; Rust only hands out the pointer, and reads a field that
/// registration sets before it calls back into Rust and never changes
/// afterwards (`NET_ID`).
struct StaticCell<T>(UnsafeCell<MaybeUninit<T>>);

// SAFETY: a shared `StaticCell` only gives out a raw pointer. Per the type
// invariant, Rust's writes happen in module init before any other thread or
// C can see the object, C synchronises its own accesses, and Rust's reads
// after registration are of fields no one writes any more.
unsafe impl<T> Sync for StaticCell<T> {}

impl<T> StaticCell<T> {
    const fn zeroed() -> Self {
        Self(UnsafeCell::new(MaybeUninit::zeroed()))
    }

    fn as_ptr(&self) -> *mut T {
        self.0.get().cast()
    }
}

/// A network namespace.
///
/// # Invariants
///
/// The wrapped `struct net` is alive for as long as a reference to it exists.
#[repr(transparent)]
pub(crate) struct Net(Opaque<bindings::net>);

impl Net {
    /// Wraps a raw `struct net`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `struct net` that stays alive for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // CAST: `Self` is `repr(transparent)` over `bindings::net`.
        // SAFETY: the caller guarantees `ptr` is valid for `'a`.
        unsafe { &*ptr.cast() }
    }

    fn as_ptr(&self) -> *mut bindings::net {
        self.0.get()
    }
}

// --- Per-namespace state ----------------------------------------------------

/// State that exists once per network namespace, stored by the pernet core.
pub(crate) trait PernetState: Sized + Sync {
    /// Initialiser of the state, run in place in the namespace's area.
    fn new() -> impl PinInit<Self, Error>;
    /// Brings the state up once it sits at its final address.
    fn start(&self, net: &Net) -> Result;
    /// Tears down what `start` set up; called before the state is dropped.
    fn stop(&self, net: &Net);
}

static NET_ID: StaticCell<c_uint> = StaticCell::zeroed();
static PERNET_OPS: StaticCell<bindings::pernet_operations> = StaticCell::zeroed();

/// Returns the state of type `T` registered for `net`.
///
/// # Safety
///
/// A [`PernetRegistration<T>`] must be registered and `net` must be alive.
unsafe fn pernet_state<'a, T: PernetState>(net: *const bindings::net) -> &'a T {
    // SAFETY: the registration made the pernet core allocate `size_of::<T>()`
    // bytes for id `NET_ID` in every namespace and `pernet_init` wrote a `T`.
    unsafe { &*bindings::mrc_net_generic(net, *NET_ID.as_ptr()).cast::<T>() }
}

/// `pernet_operations::init`: builds and starts the namespace's `T`.
///
/// # Safety
///
/// Called only by the pernet core, with a live namespace and its zeroed
/// area for our id.
unsafe extern "C" fn pernet_init<T: PernetState>(net: *mut bindings::net) -> c_int {
    // SAFETY: the pernet core calls us with a live namespace that outlives
    // the state, and with our id's zeroed area of `size_of::<T>()` bytes.
    let (net, slot) = unsafe {
        (
            Net::from_raw(net),
            bindings::mrc_net_generic(net, *NET_ID.as_ptr()).cast::<T>(),
        )
    };
    // SAFETY: `slot` is valid, aligned (`net_generic` areas are kmalloc'ed),
    // not yet initialised, and never moves while the namespace lives.
    if let Err(e) = unsafe { T::new().__pinned_init(slot) } {
        return e.to_errno();
    }
    // SAFETY: just initialised above; nothing else refers to it yet.
    let state = unsafe { &*slot };
    match state.start(net) {
        Ok(()) => 0,
        Err(e) => {
            state.stop(net);
            // SAFETY: `slot` holds a `T` that nothing uses any more.
            unsafe { ptr::drop_in_place(slot) };
            e.to_errno()
        }
    }
}

/// `pernet_operations::exit`: stops and drops the namespace's `T`.
///
/// # Safety
///
/// Called only by the pernet core, once, after a successful `pernet_init`.
unsafe extern "C" fn pernet_exit<T: PernetState>(net: *mut bindings::net) {
    // SAFETY: called once per namespace after a successful `pernet_init`.
    let slot = unsafe { bindings::mrc_net_generic(net, *NET_ID.as_ptr()).cast::<T>() };
    // SAFETY: the namespace is alive during its exit callback.
    let netr = unsafe { Net::from_raw(net) };
    // SAFETY: `slot` holds the `T` written by `pernet_init`.
    unsafe { (*slot).stop(netr) };
    // SAFETY: `stop` has released every user of the state (sockets, proc
    // entries) and waited for their RCU readers; nothing refers to it now.
    unsafe { ptr::drop_in_place(slot) };
}

/// Registration of the pernet subsystem holding a `T` per namespace.
pub(crate) struct PernetRegistration<T: PernetState>(PhantomData<T>);

impl<T: PernetState> PernetRegistration<T> {
    /// Registers the subsystem: `T` is created in every existing namespace now
    /// and in every new one later.
    pub(crate) fn register() -> Result<Self> {
        // SAFETY: module init runs once and `PERNET_OPS` is not registered yet,
        // so nothing else reads it (type invariant of `StaticCell`).
        unsafe {
            let ops = &mut *PERNET_OPS.as_ptr();
            ops.init = Some(pernet_init::<T>);
            ops.exit = Some(pernet_exit::<T>);
            ops.id = NET_ID.as_ptr();
            ops.size = size_of::<T>();
        }
        // SAFETY: `PERNET_OPS` is fully set up and lives forever.
        to_result(unsafe { bindings::register_pernet_subsys(PERNET_OPS.as_ptr()) })?;
        Ok(Self(PhantomData))
    }
}

impl<T: PernetState> Drop for PernetRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; runs `pernet_exit` in every
        // namespace before it returns.
        unsafe { bindings::unregister_pernet_subsys(PERNET_OPS.as_ptr()) };
    }
}

// --- Socket buffers -------------------------------------------------------------

/// An IPv4 or IPv6 address, in network byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

/// Addresses and ports of a received UDP datagram.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdpAddrs {
    /// Sender's address.
    pub(crate) src: IpAddr,
    /// Sender's UDP port.
    pub(crate) sport: u16,
    /// Our address the datagram was sent to.
    pub(crate) dst: IpAddr,
    /// Our UDP port.
    pub(crate) dport: u16,
}

/// An owned `sk_buff`. Dropping it frees the packet as a drop (`kfree_skb`,
/// which drop monitors and tracing see), for packets lost, refused or
/// unread; a packet that served its purpose (read, or processed) is freed
/// with [`SkBuff::consume`] instead.
///
/// # Invariants
///
/// `0` is a valid `sk_buff` owned by this object.
pub(crate) struct SkBuff(NonNull<bindings::sk_buff>);

impl SkBuff {
    /// How many packets this one goes out as: its UDP GSO segments, or 1.
    pub(crate) fn segs(&self) -> u16 {
        // SAFETY: `self.0` is a valid skb (type invariant).
        unsafe { bindings::mrc_skb_gso_segs(self.0.as_ptr()) }
    }

    /// Number of bytes in the packet from `data` on.
    pub(crate) fn len(&self) -> u32 {
        // SAFETY: valid per the type invariant.
        unsafe { (*self.0.as_ptr()).len }
    }

    /// Makes the first `len` bytes linear; `false` if the packet is shorter or
    /// memory is short.
    pub(crate) fn pull(&mut self, len: u32) -> bool {
        // SAFETY: valid per the type invariant; may reallocate the head, which
        // is why `linear()` borrows `self`.
        unsafe { bindings::mrc_pskb_may_pull(self.0.as_ptr(), len) }
    }

    /// Addresses and ports of a received datagram whose `data` is at the UDP
    /// header; `None` if the headers are not where they must be.
    pub(crate) fn udp_addrs(&self) -> Option<UdpAddrs> {
        let udp = self.linear().get(..4)?;
        let ip = self.ip_header()?;
        let (src, dst) = match ip.first()? >> 4 {
            4 => (
                IpAddr::V4(ip.get(12..16)?.try_into().ok()?),
                IpAddr::V4(ip.get(16..20)?.try_into().ok()?),
            ),
            6 => (
                IpAddr::V6(ip.get(8..24)?.try_into().ok()?),
                IpAddr::V6(ip.get(24..40)?.try_into().ok()?),
            ),
            _ => return None,
        };
        Some(UdpAddrs {
            src,
            sport: u16::from_be_bytes([*udp.first()?, *udp.get(1)?]),
            dst,
            dport: u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]),
        })
    }

    /// The IP header of a received datagram whose `data` is at the UDP
    /// header (IP options and IPv6 extension headers included).
    fn ip_header(&self) -> Option<&[u8]> {
        let skb = self.0.as_ptr();
        // SAFETY: valid per the type invariant. The network header of a
        // received datagram lies in the linear area before `data`, so the
        // bytes between the two are the IP header.
        let (nh, ip_len) = unsafe {
            let nh = bindings::mrc_skb_network_header(skb);
            let ip_len = ((*skb).data as usize).checked_sub(nh as usize)?;
            (nh, ip_len)
        };
        // SAFETY: `ip_len` bytes from `nh` are the IP header (see above), and
        // they stay put while `self` is borrowed.
        Some(unsafe { core::slice::from_raw_parts(nh, ip_len) })
    }

    /// Whether the IP header of a received datagram (`data` at the UDP
    /// header) carries the ECN mark "congestion experienced" (RFC 3168).
    pub(crate) fn ecn_ce(&self) -> bool {
        const INET_ECN_CE: u8 = 3;
        let Some(ip) = self.ip_header() else {
            return false;
        };
        // IPv4: the low two bits of the TOS byte; IPv6: the low two bits of
        // the traffic class, which straddles the first two bytes.
        let ecn = match ip.first().map(|b| b >> 4) {
            Some(4) => ip.get(1).map(|b| b & 3),
            Some(6) => ip.get(1).map(|b| (b >> 4) & 3),
            _ => None,
        };
        ecn == Some(INET_ECN_CE)
    }

    /// Drops the first `len` bytes; `false` if the linear part is shorter.
    pub(crate) fn pull_front(&mut self, len: u32) -> bool {
        if !self.pull(len) {
            return false;
        }
        // SAFETY: valid per the type invariant; `len` bytes are linear.
        !unsafe { bindings::mrc_skb_pull(self.0.as_ptr(), len) }.is_null() || len == 0
    }

    /// Memory the packet takes (`truesize`), what it is charged as.
    pub(crate) fn truesize(&self) -> u32 {
        // SAFETY: valid per the type invariant.
        unsafe { bindings::mrc_skb_truesize(self.0.as_ptr()) }
    }

    /// Detaches the packet from the socket, route and connection tracking it
    /// came with, as is due before it is kept for long, and charges it to
    /// `sk`'s receive memory and to that of all MRC sockets until it is freed;
    /// `false`, with nothing charged, if the total of all sockets would go
    /// over [`rmem_limit`].
    ///
    /// Only the packet's metadata changes, never its data, so views of the
    /// data ([`SkBuff::linear`]) stay valid: hence `&self`.
    ///
    /// # Safety
    ///
    /// The packet must be freed before `sk` is: its destructor uncharges
    /// `sk`. The packets a socket keeps (its connection's buffers, its
    /// receive queue) are freed before the socket is.
    pub(crate) unsafe fn charge_rx(&self, sk: &Sock) -> bool {
        // SAFETY: valid per the type invariant; the packet is ours, and the
        // fields written (owner, destructor, route, conntrack) are not
        // borrowed by any Rust view of it. The caller frees the packet
        // before `sk`, which the destructor set here refers to.
        unsafe { bindings::mrc_skb_charge_rx(self.0.as_ptr(), sk.as_ptr()) }
    }

    /// The control buffer (`skb->cb`), ours once the packet is received.
    pub(crate) fn cb(&self) -> &[u8] {
        // SAFETY: valid per the type invariant; `cb` is plain bytes.
        unsafe {
            let cb = &(*self.0.as_ptr()).cb;
            core::slice::from_raw_parts(cb.as_ptr().cast::<u8>(), cb.len())
        }
    }

    /// The control buffer, writable.
    pub(crate) fn cb_mut(&mut self) -> &mut [u8] {
        // SAFETY: valid per the type invariant; we own the packet.
        unsafe {
            let cb = &mut (*self.0.as_ptr()).cb;
            core::slice::from_raw_parts_mut(cb.as_mut_ptr().cast::<u8>(), cb.len())
        }
    }

    /// Frees a packet that served its purpose: `consume_skb`, not counted as
    /// a drop.
    pub(crate) fn consume(self) {
        // SAFETY: we own the packet (type invariant) and give it up.
        unsafe { bindings::mrc_consume_skb(self.into_raw()) };
    }

    /// Gives up ownership.
    fn into_raw(self) -> *mut bindings::sk_buff {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }

    /// The linear part of the packet, starting at `data`.
    pub(crate) fn linear(&self) -> &[u8] {
        let skb = self.0.as_ptr();
        // SAFETY: valid per the type invariant; `len - data_len` bytes from
        // `data` are the linear area, which does not change while `self` is
        // borrowed (only `pull` may move it).
        unsafe {
            let headlen = (*skb).len.saturating_sub((*skb).data_len) as usize;
            core::slice::from_raw_parts((*skb).data, headlen)
        }
    }

    /// When the packet entered this host's receive stack, in wall-clock
    /// nanoseconds ([`now_real_ns`]), if it was stamped there: the tunnel
    /// socket asks for the stamps (`mrc_udp_sock_setup`).
    pub(crate) fn rx_stamp(&self) -> Option<u64> {
        // SAFETY: valid per the type invariant; the helper only reads
        // `tstamp` and `tstamp_type`. Any context.
        let t = unsafe { bindings::mrc_skb_rx_stamp(self.0.as_ptr()) };
        (t != 0).then_some(t)
    }

    /// Whether the packet, its data at the UDP header, came without a UDP
    /// checksum: a zero checksum field (RFC 768; IPv4 allows it), unless
    /// this host sent it with the checksum left to offload
    /// (`CHECKSUM_PARTIAL`), whose field holds the pseudo-header's sum,
    /// which may be zero. False if the UDP header is not in the linear part.
    pub(crate) fn udp_checksum_absent(&self) -> bool {
        let zero = self.linear().get(6..8) == Some(&[0u8, 0][..]);
        // SAFETY: valid per the type invariant; the helper only reads
        // `ip_summed`. Any context.
        zero && !unsafe { bindings::mrc_skb_csum_partial(self.0.as_ptr()) }
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the packet (type invariant).
        unsafe { bindings::mrc_kfree_skb(self.0.as_ptr()) };
    }
}

/// Where a queued packet goes, and a tag the queue's owner gave it.
#[derive(Clone, Copy)]
pub(crate) struct TxDest {
    /// Source address; unspecified lets routing choose.
    pub(crate) src: IpAddr,
    /// Destination address.
    pub(crate) dst: IpAddr,
    /// UDP source port.
    pub(crate) sport: u16,
    /// UDP destination port.
    pub(crate) dport: u16,
    /// Output interface the path is pinned to; 0 lets routing choose.
    pub(crate) oif: u32,
    /// Free for the owner (the packet type, for counters).
    pub(crate) tag: u8,
}

// `skb->cb` is 48 bytes, aligned to 8; a queued packet keeps its
// destination there.
const _: () = assert!(core::mem::size_of::<TxDest>() <= 48 && core::mem::align_of::<TxDest>() <= 8);

/// Owned packets linked through `skb->next`, in order: the datagrams a
/// [`UdpTunnel`] takes from its socket at once, a run of them for one
/// connection, or the packets of a [`TxChain`]. Linking allocates nothing;
/// packets still on the list when it is dropped are freed.
///
/// # Invariants
///
/// `head` is null or the first of a list of owned skbs linked by `next`
/// and ending with a null `next`; `tail` is its last (null when `head` is).
pub(crate) struct SkbList {
    head: *mut bindings::sk_buff,
    tail: *mut bindings::sk_buff,
}

// SAFETY: the list owns its packets, which may be freed from any context.
unsafe impl Send for SkbList {}

impl Default for SkbList {
    fn default() -> Self {
        Self::new()
    }
}

impl SkbList {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self {
            head: ptr::null_mut(),
            tail: ptr::null_mut(),
        }
    }

    /// Takes ownership of `list`, skbs linked by `next` (null: none).
    ///
    /// # Safety
    ///
    /// `list` is null or the head of a list of skbs the caller owns and
    /// gives up, ending with a null `next`.
    unsafe fn from_raw(list: *mut bindings::sk_buff) -> Self {
        let mut tail = list;
        while !tail.is_null() {
            // SAFETY: `tail` is a packet of the list (caller's guarantee).
            let next = unsafe { bindings::mrc_skb_next(tail) };
            if next.is_null() {
                break;
            }
            tail = next;
        }
        Self { head: list, tail }
    }

    /// Appends `skb`.
    pub(crate) fn push(&mut self, skb: SkBuff) {
        let p = skb.into_raw();
        // SAFETY: we own `p`, which is on no list, so its `next` is ours to
        // set.
        unsafe { bindings::mrc_skb_set_next(p, ptr::null_mut()) };
        if self.tail.is_null() {
            self.head = p;
        } else {
            // SAFETY: `tail` is the last packet of the list (type invariant).
            unsafe { bindings::mrc_skb_set_next(self.tail, p) };
        }
        self.tail = p;
    }

    /// Takes the first packet.
    pub(crate) fn pop(&mut self) -> Option<SkBuff> {
        let p = NonNull::new(self.head)?;
        // SAFETY: `head` is an owned packet of the list (type invariant); it
        // leaves the list with `next` cleared.
        unsafe {
            self.head = bindings::mrc_skb_next(p.as_ptr());
            bindings::mrc_skb_set_next(p.as_ptr(), ptr::null_mut());
        }
        if self.head.is_null() {
            self.tail = ptr::null_mut();
        }
        Some(SkBuff(p))
    }

    /// Appends the packets of `other`, in order.
    pub(crate) fn append(&mut self, mut other: SkbList) {
        if other.head.is_null() {
            return;
        }
        if self.tail.is_null() {
            self.head = other.head;
        } else {
            // SAFETY: `tail` is the last packet of the list (type
            // invariant); `other.head` starts a list this one takes over.
            unsafe { bindings::mrc_skb_set_next(self.tail, other.head) };
        }
        self.tail = other.tail;
        // `other` gives up its packets: its drop frees none.
        other.head = ptr::null_mut();
        other.tail = ptr::null_mut();
    }

    /// The last packet, still on the list.
    fn last(&self) -> Option<NonNull<bindings::sk_buff>> {
        NonNull::new(self.tail)
    }

    /// Whether the list holds no packet.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }
}

impl Drop for SkbList {
    fn drop(&mut self) {
        // SAFETY: we own the list (type invariant); `kfree_skb_list` frees
        // each packet through `next`, and null is an empty list.
        unsafe { bindings::mrc_kfree_skb_list(self.head) };
    }
}

/// Packets built while a connection's lock is held, to be sent in order
/// once it is released, so that the lock is never held across the IP output
/// path. The chain runs through `skb->next` and each packet's destination is
/// in its control buffer, so queueing allocates nothing; packets still
/// queued when the chain is dropped are freed.
///
/// # Invariants
///
/// Each packet of `list` holds a [`TxDest`] in its control buffer. Each
/// packet of `open` is one of them.
#[derive(Default)]
pub(crate) struct TxChain {
    list: SkbList,
    /// Packets of the chain that more packets to their destination may be
    /// appended to (see [`TxChain::append`]).
    open: [Option<OpenBatch>; TX_OPEN_BATCHES],
}

/// Bytes a packet is built from that are written for it (its MRC header):
/// `len` bytes from the per-CPU page fragment cache, written in place, then
/// given to the packet as a page fragment ([`attach`]), so they are never
/// copied again and the packet is charged what it holds.
///
/// # Invariants
///
/// `ptr` points to `len` bytes from `mrc_frag_alloc` that nothing else uses.
pub(crate) struct Frag {
    ptr: NonNull<u8>,
    len: u32,
}

// SAFETY: the fragment is plain memory owned by `self`; it may be freed from
// any context but hardirq.
unsafe impl Send for Frag {}

impl Frag {
    /// Takes `len` bytes (at least 1) for a packet; `ENOMEM` if memory is
    /// short. Callable in atomic context.
    pub(crate) fn new(len: usize) -> Result<Frag> {
        let len = u32::try_from(len)
            .ok()
            .filter(|l| (1..=u32::from(u16::MAX)).contains(l))
            .ok_or(EINVAL)?;
        // SAFETY: `mrc_frag_alloc` may be called in any context but hardirq,
        // which never builds packets.
        let ptr = unsafe { bindings::mrc_frag_alloc(len) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        Ok(Frag { ptr, len })
    }

    /// The fragment's bytes, to write the packet into.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` bytes that only `self` uses (type
        // invariant); they are borrowed mutably with `self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize) }
    }
}

impl Drop for Frag {
    fn drop(&mut self) {
        // SAFETY: the memory came from `mrc_frag_alloc` and is still ours
        // (type invariant): handing it to a packet forgets `self`.
        unsafe { bindings::mrc_frag_free(self.ptr.as_ptr().cast()) };
    }
}

/// `len` bytes of a message in `page` (possibly compound) from `off`; the
/// piece's bytes are the message's from `at` on.
#[derive(Clone, Copy)]
struct Piece {
    page: NonNull<bindings::page>,
    off: u32,
    len: u32,
    at: u32,
}

/// A message's bytes, copied once from the user into the page fragments
/// the socket writes through (`sk_page_frag()`, as TCP keeps a stream's
/// bytes). Packets take page references to the pieces they carry rather
/// than copies ([`TxChain::append`], [`UdpTunnel::packet_of`]), so the
/// bytes are not copied again on the way out, retransmissions included,
/// and a message costs no allocation of its size.
///
/// # Invariants
///
/// Each piece holds a reference to its page, and names bytes of it that
/// nothing writes once copied; the pieces follow each other (`at` of each
/// is the sum of the lengths before it), their lengths summing to `len`.
pub(crate) struct MsgBuf {
    pieces: KVVec<Piece>,
    len: u32,
}

// SAFETY: the pages are reference counted and their bytes never written
// again; the references may be dropped from any context.
unsafe impl Send for MsgBuf {}

impl MsgBuf {
    /// The pieces holding bytes `off..off + len`, each cut to that range;
    /// nothing if the range is not in the message.
    fn range(&self, off: u32, len: u32) -> impl Iterator<Item = Piece> + '_ {
        let end = off.checked_add(len).filter(|e| *e <= self.len && len > 0);
        let first = self
            .pieces
            .partition_point(|p| p.at.saturating_add(p.len) <= off);
        self.pieces
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .take_while(move |p| end.is_some_and(|e| p.at < e))
            .map(move |p| {
                let from = off.max(p.at);
                let to = end.unwrap_or(0).min(p.at + p.len);
                Piece {
                    page: p.page,
                    off: p.off + (from - p.at),
                    len: to - from,
                    at: from,
                }
            })
    }

    /// Whether bytes `off..off + len` are in the message.
    pub(crate) fn holds(&self, off: u32, len: u32) -> bool {
        off.checked_add(len).is_some_and(|e| e <= self.len)
    }
}

impl Drop for MsgBuf {
    fn drop(&mut self) {
        for p in self.pieces.iter() {
            // SAFETY: each piece holds a page reference (type invariant),
            // given back once here.
            unsafe { bindings::mrc_put_page(p.page.as_ptr()) };
        }
    }
}

/// Appends to `skb` the packet whose header is `head` and whose payload is
/// bytes `off..off + len` of `msg`, as page fragments; gives `head` back,
/// and leaves `skb` as it was, if `skb` has too few free fragment slots.
///
/// # Safety
///
/// `skb` must be a valid packet that the caller owns and that nothing else
/// uses.
unsafe fn attach(
    skb: *mut bindings::sk_buff,
    head: Frag,
    msg: &MsgBuf,
    off: u32,
    len: u32,
) -> Result<(), Frag> {
    if !msg.holds(off, len) {
        return Err(head);
    }
    let pieces = msg.range(off, len).count();
    // SAFETY: `skb` is valid (caller).
    if (unsafe { bindings::mrc_skb_free_frags(skb) } as usize) < pieces + 1 {
        return Err(head);
    }
    // SAFETY: `skb` is ours (caller) and has a free slot; `head` is memory
    // from `mrc_frag_alloc`, which the packet takes over.
    if !unsafe { bindings::mrc_skb_add_frag(skb, head.ptr.as_ptr().cast(), head.len) } {
        return Err(head);
    }
    core::mem::forget(head);
    for p in msg.range(off, len) {
        // SAFETY: `skb` is ours with a slot for each piece (checked above);
        // the piece's page is referenced by `msg`, and the packet takes a
        // reference of its own. Its bytes are never written again.
        unsafe { bindings::mrc_skb_add_page(skb, p.page.as_ptr(), p.off, p.len) };
    }
    Ok(())
}

/// Destinations a [`TxChain`] keeps a batch open for at once: a connection
/// sprays its data over its paths in turn.
const TX_OPEN_BATCHES: usize = 8;

/// Most payloads in one UDP GSO packet. With payloads for an MTU of 1500
/// that is 11 KiB, about 1 ms at 100 Mbit/s: no more than a path's pacing
/// lets go at once there.
pub(crate) const TX_BATCH_SEGS: u16 = 8;

/// Most payload bytes in one UDP GSO packet (three payloads for an MTU of
/// 9000), well within the 64 KiB that the UDP and IPv4 length fields hold.
pub(crate) const TX_BATCH_BYTES: u32 = 32 << 10;

/// A packet of a [`TxChain`] that same-sized payloads to the same
/// destination are appended to, to go out as one UDP GSO packet.
#[derive(Clone, Copy)]
struct OpenBatch {
    /// The packet, in the chain.
    skb: NonNull<bindings::sk_buff>,
    /// Its destination.
    dest: TxDest,
    /// The size of each payload in it.
    seg: u16,
    /// How many payloads it holds.
    segs: u16,
    /// Their bytes in all.
    bytes: u32,
}

impl TxDest {
    /// Whether packets to `self` and to `other` take the same path.
    pub(crate) fn same_path(&self, other: &TxDest) -> bool {
        self.src == other.src
            && self.dst == other.dst
            && self.sport == other.sport
            && self.dport == other.dport
            && self.oif == other.oif
    }
}

// SAFETY: the chain owns its packets; skbs may be sent and freed from any
// context.
unsafe impl Send for TxChain {}

impl TxChain {
    /// Queues `skb` for `dest`. Nothing more is appended to a packet queued
    /// for the same path before it, so that the path's packets leave in
    /// order.
    pub(crate) fn push(&mut self, skb: SkBuff, dest: TxDest) {
        self.close(&dest);
        // SAFETY: we own the packet; its control buffer is ours until it is
        // sent and large and aligned enough for a `TxDest` (checked above).
        unsafe {
            ptr::write(
                ptr::addr_of_mut!((*skb.0.as_ptr()).cb).cast::<TxDest>(),
                dest,
            )
        };
        self.list.push(skb);
    }

    /// Queues `skb`, which holds one payload of `seg` bytes for `dest` and
    /// has room for more, and keeps it open for [`Self::append`].
    pub(crate) fn push_open(&mut self, skb: SkBuff, dest: TxDest, seg: u16) {
        self.push(skb, dest);
        let Some(tail) = self.list.last() else {
            return;
        };
        let batch = OpenBatch {
            skb: tail,
            dest,
            seg,
            segs: 1,
            bytes: u32::from(seg),
        };
        // A free slot, or else the one opened first.
        if let Some(free) = self.open.iter_mut().find(|o| o.is_none()) {
            *free = Some(batch);
        } else {
            self.open.rotate_left(1);
            if let Some(last) = self.open.last_mut() {
                *last = Some(batch);
            }
        }
    }

    /// Appends the packet of header `head` and payload `off..off + len` of
    /// `msg` to the open packet for `dest`'s path, if there is one whose
    /// packets have the same size (or are larger, for a last short one) and
    /// that has room for it. The packet then goes out as one UDP GSO packet
    /// of its packets. Gives `head` back if the packet was not taken.
    pub(crate) fn append(
        &mut self,
        dest: &TxDest,
        head: Frag,
        msg: &MsgBuf,
        off: u32,
        len: u32,
    ) -> Result<(), Frag> {
        let Some(slot) = self
            .open
            .iter_mut()
            .find(|o| o.as_ref().is_some_and(|b| b.dest.same_path(dest)))
        else {
            return Err(head);
        };
        let Some(b) = slot.as_mut() else {
            return Err(head);
        };
        let size = head.len.saturating_add(len);
        if size > u32::from(b.seg)
            || b.segs >= TX_BATCH_SEGS
            || b.bytes.saturating_add(size) > TX_BATCH_BYTES
        {
            *slot = None;
            return Err(head);
        }
        let skb = b.skb.as_ptr();
        // SAFETY: an open batch is a packet of the chain, which we own (type
        // invariant).
        if let Err(head) = unsafe { attach(skb, head, msg, off, len) } {
            *slot = None;
            return Err(head);
        }
        b.segs += 1;
        b.bytes += size;
        // SAFETY: the packet is ours; its payloads are `seg` bytes each but
        // for this last one, which may be shorter.
        unsafe { bindings::mrc_skb_set_udp_gso(skb, b.seg, b.segs) };
        if size < u32::from(b.seg) {
            *slot = None;
        }
        Ok(())
    }

    /// Closes the open batch for `dest`'s path, if any.
    fn close(&mut self, dest: &TxDest) {
        for o in self.open.iter_mut() {
            if o.as_ref().is_some_and(|b| b.dest.same_path(dest)) {
                *o = None;
            }
        }
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Takes the first packet of the chain and its destination.
    pub(crate) fn pop(&mut self) -> Option<(SkBuff, TxDest)> {
        let skb = self.list.pop()?;
        for o in self.open.iter_mut() {
            if o.as_ref().is_some_and(|b| b.skb == skb.0) {
                *o = None;
            }
        }
        // SAFETY: every packet of the chain holds a `TxDest` in its control
        // buffer (type invariant).
        let dest = unsafe { ptr::read(ptr::addr_of!((*skb.0.as_ptr()).cb).cast::<TxDest>()) };
        Some((skb, dest))
    }
}

/// Marks a function that may sleep, so must be called in process context
/// with no spinlock held and bottom halves enabled: a debug kernel
/// (`CONFIG_DEBUG_ATOMIC_SLEEP`) reports a call from anywhere else, with a
/// backtrace, as `might_sleep()` does. The safe wrappers that may sleep
/// call it first; it checks their callers' context, which the type system
/// cannot.
fn might_sleep() {
    // SAFETY: any context: it only checks it.
    unsafe { bindings::mrc_might_sleep() };
}

/// Runs `f` with bottom halves disabled, so that the packets it sends are
/// received, on a local link, in one softirq pass after it returns rather
/// than one by one in between.
///
/// Callers run in process or softirq context, never in hardirq context or
/// with interrupts disabled, where `local_bh_enable` must not be called.
pub(crate) fn with_bh_disabled<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: callers are in process or softirq context (see above), where
    // disabling bottom halves nests; the enable below pairs with it, and `f`
    // cannot unwind in the kernel, so it always runs.
    unsafe { bindings::mrc_local_bh_disable() };
    let r = f();
    // SAFETY: pairs with the disable above, in the same context; interrupts
    // are enabled there, as `local_bh_enable` requires.
    unsafe { bindings::mrc_local_bh_enable() };
    r
}

// --- UDP tunnel socket ------------------------------------------------------------

/// Receiver of the datagrams of a [`UdpTunnel`], called in softirq context.
pub(crate) trait EncapHandler: Sync {
    /// Takes the datagrams that arrived together (one datagram, or the
    /// datagrams of one GSO packet or GRO train), each with `data` at its
    /// UDP header and its UDP checksum verified; `bad_csum` more of them
    /// failed that check, and `unsplit` could not be split from their GSO
    /// packet or GRO train (for want of memory).
    fn receive(&self, batch: SkbList, bad_csum: u32, unsplit: u32);
}

/// `sk_data_ready` of the tunnel socket: hands everything queued on it to
/// the handler, a batch at a time.
///
/// # Safety
///
/// Called only by UDP receive for our tunnel socket, in softirq under the
/// RCU read lock, after it queued a packet on the socket.
unsafe extern "C" fn data_ready<H: EncapHandler>(sk: *mut bindings::sock) {
    // SAFETY: `sk` is our tunnel socket and we run under the RCU read lock
    // that UDP receive holds.
    let handler = unsafe { bindings::mrc_sk_user_data(sk) }.cast::<H>();
    if handler.is_null() {
        // The tunnel is being released; what is queued is freed with it.
        return;
    }
    loop {
        let (mut bad_csum, mut unsplit) = (0u32, 0u32);
        // SAFETY: `sk` is a live UDP socket (above); the call takes the
        // queue's locks itself.
        let list = unsafe { bindings::mrc_udp_dequeue(sk, &mut bad_csum, &mut unsplit) };
        if list.is_null() && bad_csum == 0 && unsplit == 0 {
            return;
        }
        // SAFETY: `mrc_udp_dequeue` hands us ownership of the list.
        let batch = unsafe { SkbList::from_raw(list) };
        // SAFETY: user data is cleared and an RCU grace period waited for
        // before the handler goes away (`UdpTunnel::drop`), so it is alive.
        unsafe { (*handler).receive(batch, bad_csum, unsplit) };
    }
}

/// TOS (IPv4) and traffic class (IPv6) of every packet sent: ECN-capable
/// transport, ECT(0) (RFC 3168). A router that would drop such a packet from
/// a full queue may mark it "congestion experienced" instead; the receiving
/// connection echoes the mark (see `Conn::handle_packet_ecn`).
const INET_ECN_ECT_0: u8 = 2;

/// A kernel UDP socket that takes MRC's datagrams a batch at a time (see
/// [`EncapHandler`]) and sends them with `udp_tunnel*_xmit_skb`.
///
/// # Invariants
///
/// `0` is a socket created by `udp_sock_create*` and owned by this object.
pub(crate) struct UdpTunnel(NonNull<bindings::socket>);

// SAFETY: the socket is only released in `drop`; the kernel synchronises the
// rest of its use.
unsafe impl Send for UdpTunnel {}
// SAFETY: the `&self` methods (`send`, `xmit`, `source_for`, `detach`) only
// call kernel functions that may run concurrently on one socket from any
// context: route lookups and `udp_tunnel*_xmit_skb` take no socket lock,
// and the user data is an RCU pointer updated with
// `rcu_assign_sk_user_data`.
unsafe impl Sync for UdpTunnel {}

impl UdpTunnel {
    /// Opens the tunnel socket of `net` on `port` for `family`.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid until the returned tunnel is dropped.
    pub(crate) unsafe fn new<H: EncapHandler>(
        net: &Net,
        family: IpFamily,
        port: u16,
        handler: *const H,
    ) -> Result<Self> {
        // SAFETY: all-zero is a valid `udp_port_cfg` (addresses "any").
        let mut cfg: bindings::udp_port_cfg = unsafe { MaybeUninit::zeroed().assume_init() };
        cfg.local_udp_port = port.to_be();
        let mut sock: *mut bindings::socket = ptr::null_mut();
        let ret = match family {
            IpFamily::V4 => {
                cfg.family = bindings::AF_INET as u8;
                // SAFETY: `net` is alive; `cfg` and `sock` are valid for writes.
                unsafe { bindings::udp_sock_create4(net.as_ptr(), &mut cfg, &mut sock) }
            }
            IpFamily::V6 => {
                cfg.family = bindings::AF_INET6 as u8;
                cfg.set_ipv6_v6only(1);
                cfg.set_use_udp6_rx_checksums(1);
                cfg.set_use_udp6_tx_checksums(1);
                // SAFETY: as above.
                unsafe { bindings::udp_sock_create6(net.as_ptr(), &mut cfg, &mut sock) }
            }
        };
        to_result(ret)?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // SAFETY: `sock` is a fresh UDP socket; the caller keeps `handler`
        // alive for the life of the tunnel, and `data_ready::<H>` expects
        // exactly that user data.
        unsafe {
            bindings::mrc_udp_sock_setup(
                (*sock.as_ptr()).sk,
                handler.cast_mut().cast::<c_void>(),
                Some(data_ready::<H>),
            )
        };
        Ok(Self(sock))
    }
}

impl UdpTunnel {
    /// Sends `payload` as one UDP datagram from `src:sport` to `dst:dport`;
    /// `src` may be unspecified (all zero) to let routing choose. Callable
    /// from any context, softirq included.
    pub(crate) fn send(
        &self,
        src: IpAddr,
        sport: u16,
        dst: IpAddr,
        dport: u16,
        payload: &[u8],
    ) -> Result {
        self.xmit(Self::packet(payload)?, src, sport, dst, dport, 0)
    }

    /// Builds the datagram that carries `payload`, with room in front for
    /// the UDP, IP and link headers. Callable in atomic context.
    pub(crate) fn packet(payload: &[u8]) -> Result<SkBuff> {
        let len = u32::try_from(payload.len()).map_err(|_| err::message_too_long())?;
        let headroom: u32 = bindings::MRC_TX_HEADROOM;
        // SAFETY: `__alloc_skb` may be called in atomic context with GFP_ATOMIC.
        let skb = unsafe {
            bindings::__alloc_skb(
                headroom.saturating_add(len),
                kernel::bindings::GFP_ATOMIC,
                0,
                bindings::NUMA_NO_NODE,
            )
        };
        let skb = SkBuff(NonNull::new(skb).ok_or(ENOMEM)?);
        // SAFETY: the new skb has `headroom + len` bytes of tailroom.
        unsafe {
            bindings::mrc_skb_reserve(skb.0.as_ptr(), headroom as c_int);
            bindings::mrc_skb_put_data(skb.0.as_ptr(), payload.as_ptr().cast(), len);
        }
        Ok(skb)
    }

    /// Builds the datagram of header `head` and payload `off..off + len` of
    /// `msg`, both as page fragments, with room in front for the UDP, IP and
    /// link headers. Callable in atomic context.
    pub(crate) fn packet_of(head: Frag, msg: &MsgBuf, off: u32, len: u32) -> Result<SkBuff> {
        let skb = Self::packet(&[])?;
        // SAFETY: the new skb is ours alone.
        unsafe { attach(skb.0.as_ptr(), head, msg, off, len) }.map_err(|_| ENOMEM)?;
        Ok(skb)
    }

    /// Sends `skb`, built by [`Self::packet`], from `src:sport` to
    /// `dst:dport` out of interface `oif`; `src` may be unspecified and
    /// `oif` 0 to let routing choose.
    pub(crate) fn xmit(
        &self,
        skb: SkBuff,
        src: IpAddr,
        sport: u16,
        dst: IpAddr,
        dport: u16,
        oif: u32,
    ) -> Result {
        let mut skb = skb;
        // The IP layer expects a clear control buffer (`IPCB`, `IP6CB`).
        skb.cb_mut().fill(0);
        // SAFETY: we own the skb; its UDP header is pushed right in front of
        // its data below.
        unsafe { bindings::mrc_skb_prepare_udp_gso(skb.0.as_ptr()) };
        // SAFETY: `self.0` is a live socket (type invariant).
        let sk = unsafe { (*self.0.as_ptr()).sk };
        // SAFETY: a socket's namespace outlives it.
        let net = unsafe { bindings::mrc_sock_net(sk) };
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                // SAFETY: all-zero is a valid flow key (no mark, any interface).
                let mut fl: bindings::flowi4 = unsafe { MaybeUninit::zeroed().assume_init() };
                fl.saddr = u32::from_ne_bytes(s);
                fl.daddr = u32::from_ne_bytes(d);
                fl.__fl_common.flowic_proto = IPPROTO_UDP;
                fl.__fl_common.flowic_oif = oif as c_int;
                fl.uli.ports.sport = sport.to_be();
                fl.uli.ports.dport = dport.to_be();
                // SAFETY: `net`, `fl` and `sk` are valid for the call.
                let rt = unsafe { bindings::ip_route_output_flow(net, &mut fl, sk) };
                from_err_ptr(rt)?;
                let skb_ptr = skb.0.as_ptr();
                core::mem::forget(skb);
                // SAFETY: `rt` is a held route; `udp_tunnel_xmit_skb` takes
                // over it and the skb, whatever happens to the packet.
                unsafe {
                    let ttl = bindings::mrc_ip4_dst_hoplimit(ptr::addr_of!((*rt).dst));
                    bindings::udp_tunnel_xmit_skb(
                        rt,
                        sk,
                        skb_ptr,
                        fl.saddr,
                        fl.daddr,
                        INET_ECN_ECT_0,
                        ttl as u8,
                        0,
                        sport.to_be(),
                        dport.to_be(),
                        false,
                        false,
                    );
                }
                Ok(())
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                // SAFETY: all-zero is a valid flow key.
                let mut fl: bindings::flowi6 = unsafe { MaybeUninit::zeroed().assume_init() };
                fl.saddr.in6_u.u6_addr8 = s;
                fl.daddr.in6_u.u6_addr8 = d;
                fl.__fl_common.flowic_proto = IPPROTO_UDP;
                fl.__fl_common.flowic_oif = oif as c_int;
                fl.uli.ports.sport = sport.to_be();
                fl.uli.ports.dport = dport.to_be();
                // SAFETY: `ipv6_stub` is set once IPv6 is up, which it is since
                // this tunnel socket is an IPv6 socket.
                let lookup = unsafe { (*bindings::ipv6_stub).ipv6_dst_lookup_flow }
                    .ok_or_else(err::address_family_not_supported)?;
                // SAFETY: `net`, `sk` and `fl` are valid for the call.
                let dst = unsafe { lookup(net, sk, &mut fl, ptr::null()) };
                from_err_ptr(dst)?;
                let skb_ptr = skb.0.as_ptr();
                core::mem::forget(skb);
                // SAFETY: `dst` is a held route; `udp_tunnel6_xmit_skb` takes
                // over it and the skb.
                unsafe {
                    let ttl = bindings::ip6_dst_hoplimit(dst);
                    bindings::udp_tunnel6_xmit_skb(
                        dst,
                        sk,
                        skb_ptr,
                        ptr::null_mut(),
                        &fl.saddr,
                        &fl.daddr,
                        INET_ECN_ECT_0,
                        ttl as u8,
                        0,
                        sport.to_be(),
                        dport.to_be(),
                        false,
                    );
                }
                Ok(())
            }
            _ => Err(err::address_family_not_supported()),
        }
    }

    /// Whether an error of [`Self::xmit`] means that the host cannot send
    /// to that destination from that source at all: no route, an interface
    /// down, a local address gone. Not a lack of memory, which passes.
    pub(crate) fn is_local_down(e: Error) -> bool {
        e != ENOMEM && e != errno(bindings::ENOBUFS)
    }

    /// Returns the local address routing would send from to reach `dst`,
    /// and the MTU of the route.
    pub(crate) fn source_for(&self, dst: IpAddr) -> Result<(IpAddr, u32)> {
        // SAFETY: `self.0` is a live socket (type invariant).
        let sk = unsafe { (*self.0.as_ptr()).sk };
        // SAFETY: a socket's namespace outlives it.
        let net = unsafe { bindings::mrc_sock_net(sk) };
        match dst {
            IpAddr::V4(d) => {
                // SAFETY: all-zero is a valid flow key.
                let mut fl: bindings::flowi4 = unsafe { MaybeUninit::zeroed().assume_init() };
                fl.daddr = u32::from_ne_bytes(d);
                fl.__fl_common.flowic_proto = IPPROTO_UDP;
                // SAFETY: `net`, `fl` and `sk` are valid for the call.
                let rt = unsafe { bindings::ip_route_output_flow(net, &mut fl, sk) };
                from_err_ptr(rt).map_err(|_| err::address_not_available())?;
                // SAFETY: `rt` is a held route we no longer need.
                let mtu = unsafe {
                    let d = ptr::addr_of_mut!((*rt).dst);
                    let mtu = bindings::mrc_dst_mtu(d);
                    bindings::dst_release(d);
                    mtu
                };
                Ok((IpAddr::V4(fl.saddr.to_ne_bytes()), mtu))
            }
            IpAddr::V6(d) => {
                // SAFETY: all-zero is a valid flow key.
                let mut fl: bindings::flowi6 = unsafe { MaybeUninit::zeroed().assume_init() };
                fl.daddr.in6_u.u6_addr8 = d;
                fl.__fl_common.flowic_proto = IPPROTO_UDP;
                // SAFETY: this is an IPv6 socket, so `ipv6_stub` is set.
                let lookup = unsafe { (*bindings::ipv6_stub).ipv6_dst_lookup_flow }
                    .ok_or_else(err::address_family_not_supported)?;
                // SAFETY: `net`, `sk` and `fl` are valid for the call.
                let dst = unsafe { lookup(net, sk, &mut fl, ptr::null()) };
                from_err_ptr(dst).map_err(|_| err::address_not_available())?;
                // SAFETY: `dst` is a held route we no longer need; the lookup
                // chose the source address.
                unsafe {
                    let mtu = bindings::mrc_dst_mtu(dst);
                    bindings::dst_release(dst);
                    Ok((IpAddr::V6(fl.saddr.in6_u.u6_addr8), mtu))
                }
            }
        }
    }

    /// Stops handing datagrams to the handler; once [`synchronize_net`] has
    /// returned, no receive callback uses it any more.
    pub(crate) fn detach(&self) {
        // SAFETY: `self.0` is live; clearing the user data makes `data_ready`
        // leave what arrives from now on queued, to be freed with the socket.
        unsafe { bindings::mrc_sk_clear_user_data((*self.0.as_ptr()).sk) };
    }
}

/// Waits until every receive callback that started before has finished.
/// Process context: sleeps.
pub(crate) fn synchronize_net() {
    might_sleep();
    // SAFETY: no precondition but a context that may sleep, which
    // `might_sleep` above checks on debug kernels.
    unsafe { bindings::synchronize_net() };
}

impl Drop for UdpTunnel {
    fn drop(&mut self) {
        // SAFETY: we own the socket. `udp_tunnel_sock_release` clears the user
        // data and waits for an RCU grace period before it releases the
        // socket, so no `data_ready` can use the handler afterwards.
        unsafe { bindings::udp_tunnel_sock_release(self.0.as_ptr()) };
    }
}

// --- /proc/net files ------------------------------------------------------------

/// Writer for a `seq_file`, used by [`ProcShow::show`].
pub(crate) struct SeqFile(NonNull<bindings::seq_file>);

impl core::fmt::Write for SeqFile {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: `self.0` is the seq_file of a running `show` callback.
        unsafe { bindings::seq_write(self.0.as_ptr(), s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// Contents of a per-namespace `/proc/net` file.
pub(crate) trait ProcShow: PernetState {
    /// Writes the file's text for this namespace's state.
    fn show(&self, out: &mut SeqFile) -> core::fmt::Result;
}

/// `show` of a `/proc/net` file created by [`ProcEntry::new`].
///
/// # Safety
///
/// Called only by the seq_file core for such a file, with its `seq_file`.
unsafe extern "C" fn proc_show<T: ProcShow>(
    seq: *mut bindings::seq_file,
    _v: *mut c_void,
) -> c_int {
    // SAFETY: `seq` belongs to a file created by `ProcEntry::new` in a
    // namespace whose pernet state is alive while the file exists.
    let state: &T = unsafe { pernet_state(bindings::mrc_seq_file_single_net(seq)) };
    // SAFETY: `seq` is valid for the duration of this callback.
    let mut out = SeqFile(unsafe { NonNull::new_unchecked(seq) });
    match state.show(&mut out) {
        Ok(()) => 0,
        Err(_) => EINVAL.to_errno(),
    }
}

/// A file under `/proc/net/` of one namespace.
///
/// # Invariants
///
/// The entry named `name` exists under `net->proc_net` while this object lives.
pub(crate) struct ProcEntry {
    name: &'static CStr,
    net: NonNull<bindings::net>,
}

// SAFETY: the entry is removed by name from any context that may sleep.
unsafe impl Send for ProcEntry {}
// SAFETY: no `&self` method exists.
unsafe impl Sync for ProcEntry {}

impl ProcEntry {
    /// Creates `/proc/net/<name>` in `net`, showing `T`'s text.
    ///
    /// # Safety
    ///
    /// `net`'s state of type `T`, of a registered [`PernetRegistration<T>`],
    /// must outlive the entry: it is dropped in `T::stop` at the latest.
    pub(crate) unsafe fn new<T: ProcShow>(net: &Net, name: &'static CStr) -> Result<Self> {
        // SAFETY: `net` is alive; the name is a static C string; the show
        // callback only reads the pernet state, which outlives the entry
        // (the caller's contract).
        let pde = unsafe {
            bindings::proc_create_net_single(
                name.as_char_ptr().cast(),
                0o444,
                (*net.as_ptr()).proc_net,
                Some(proc_show::<T>),
                ptr::null_mut(),
            )
        };
        if pde.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self {
            name,
            net: NonNull::new(net.as_ptr()).ok_or(EINVAL)?,
        })
    }
}

impl Drop for ProcEntry {
    fn drop(&mut self) {
        // SAFETY: the entry exists (type invariant); `remove_proc_entry` waits
        // for running readers before it returns.
        unsafe {
            bindings::remove_proc_entry(
                self.name.as_char_ptr().cast(),
                (*self.net.as_ptr()).proc_net,
            )
        };
    }
}

// --- Locks ------------------------------------------------------------------------

/// Lock backend of [`SpinLockBh`]: `spin_lock_bh`, for data that softirq
/// receive and timers share with process context.
pub(crate) struct SpinBhBackend;

// SAFETY: `spinlock_t` ensures mutual exclusion; disabling bottom halves while
// it is held keeps a softirq on the same CPU from spinning on it. `relock` is
// the default, which calls `lock` again.
unsafe impl kernel::sync::lock::Backend for SpinBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller passes a writable lock and static name and key.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller passes an initialised lock.
        unsafe { bindings::mrc_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock.
        unsafe { bindings::mrc_spin_unlock_bh(ptr.cast()) }
    }
}

/// A spinlock taken with bottom halves disabled.
pub(crate) type SpinLockBh<T> = kernel::sync::lock::Lock<T, SpinBhBackend>;

/// Returns an initialiser of a [`SpinLockBh`] with its own lockdep class.
macro_rules! new_spinlock_bh {
    ($value:expr, $name:literal) => {
        $crate::mrc_sys::SpinLockBh::new(
            $value,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

// --- Per-CPU counters -------------------------------------------------------------

/// `N` counters of which each CPU keeps its own copy (`alloc_percpu`), so
/// that counting from several CPUs at once shares no cache line; a read
/// sums the copies. Adding is interrupt-safe (`this_cpu_add`), so any
/// context may count.
///
/// # Invariants
///
/// `0` is a per-CPU allocation of `N` `u64`s, owned by this object.
pub(crate) struct PerCpuCounters<const N: usize>(NonNull<u64>);

// SAFETY: each CPU writes only its own copy, with `this_cpu_add`; reads sum
// the copies. Nothing else touches the allocation.
unsafe impl<const N: usize> Sync for PerCpuCounters<N> {}
// SAFETY: the allocation may be freed from any context that may sleep, as
// drops here are.
unsafe impl<const N: usize> Send for PerCpuCounters<N> {}

impl<const N: usize> PerCpuCounters<N> {
    /// `N` counters at zero. May sleep.
    pub(crate) fn new() -> Result<Self> {
        let n = u32::try_from(N).map_err(|_| EINVAL)?;
        // SAFETY: process context, as the callers' (namespace set-up) is;
        // the memory comes zeroed.
        let p = unsafe { bindings::mrc_percpu_alloc(n) };
        Ok(Self(NonNull::new(p).ok_or(ENOMEM)?))
    }

    /// Adds `n` to counter `i` (none for `i >= N`).
    pub(crate) fn add(&self, i: usize, n: u64) {
        if i < N {
            // SAFETY: `i` is within the allocation (type invariant).
            unsafe { bindings::mrc_percpu_add(self.0.as_ptr(), i as u32, n) };
        }
    }

    /// The sum of counter `i` over the CPUs (0 for `i >= N`).
    pub(crate) fn sum(&self, i: usize) -> u64 {
        if i >= N {
            return 0;
        }
        // SAFETY: `i` is within the allocation (type invariant).
        unsafe { bindings::mrc_percpu_sum(self.0.as_ptr(), i as u32) }
    }
}

impl<const N: usize> Drop for PerCpuCounters<N> {
    fn drop(&mut self) {
        // SAFETY: owned (type invariant), and no longer used.
        unsafe { bindings::mrc_percpu_free(self.0.as_ptr()) };
    }
}

/// One per-CPU counter.
pub(crate) type Counter = PerCpuCounters<1>;

impl Counter {
    /// Adds `n`.
    pub(crate) fn count(&self, n: u64) {
        self.add(0, n);
    }

    /// The sum over the CPUs.
    pub(crate) fn total(&self) -> u64 {
        self.sum(0)
    }
}

// --- Time and randomness ----------------------------------------------------------

/// Monotonic time in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: callable from any context.
    unsafe { bindings::mrc_ktime_get_ns() }
}

/// Wall-clock (`CLOCK_REALTIME`) time in nanoseconds, the clock of
/// [`SkBuff::rx_stamp`]. It may step: only for a difference with such a
/// stamp, taken a moment apart.
pub(crate) fn now_real_ns() -> u64 {
    // SAFETY: callable from any context.
    unsafe { bindings::mrc_ktime_get_real_ns() }
}

/// A random `u64` from the kernel's CRNG.
pub(crate) fn random_u64() -> u64 {
    // SAFETY: callable from any context.
    unsafe { bindings::get_random_u64() }
}

// --- Socket addresses -------------------------------------------------------------

/// An MRC socket address: IP address, MRC port and IPv6 scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MrcAddr {
    /// IP address.
    pub(crate) ip: IpAddr,
    /// MRC port (host byte order).
    pub(crate) port: u16,
    /// IPv6 scope id (interface index), 0 for none.
    pub(crate) scope_id: u32,
}

/// Length of `struct sockaddr_mrc`.
pub(crate) const SOCKADDR_MRC_LEN: usize = size_of::<bindings::sockaddr_mrc>();

/// Length of `struct sockaddr_storage`, the room the socket layer gives for
/// an address it gets back (`getsockname`, `recvmsg`).
const SOCKADDR_STORAGE_LEN: usize = size_of::<kernel::bindings::__kernel_sockaddr_storage>();

impl MrcAddr {
    /// Parses a `struct sockaddr_mrc` given by user space: `EINVAL` if it is
    /// short or its reserved field is set, `EAFNOSUPPORT` for another family.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self> {
        let raw = bytes.get(..SOCKADDR_MRC_LEN).ok_or(EINVAL)?;
        // SAFETY: `raw` has the size of the plain-data struct, every bit
        // pattern of which is valid; the read is unaligned.
        let sa: bindings::sockaddr_mrc = unsafe { ptr::read_unaligned(raw.as_ptr().cast()) };
        if i32::from(sa.smrc_family) != param_family() {
            return Err(err::address_family_not_supported());
        }
        if sa.smrc_reserved != 0 {
            return Err(EINVAL);
        }
        let ip = match u32::from(sa.smrc_addr_family) {
            // SAFETY: reading either member of the plain-data union is valid.
            bindings::AF_INET => IpAddr::V4(unsafe { sa.smrc_addr.v4 }.to_ne_bytes()),
            // SAFETY: as above.
            bindings::AF_INET6 => IpAddr::V6(unsafe { sa.smrc_addr.v6 }),
            _ => return Err(err::address_family_not_supported()),
        };
        Ok(Self {
            ip,
            port: u16::from_be(sa.smrc_port),
            scope_id: sa.smrc_scope_id,
        })
    }

    /// Returns the `struct sockaddr_mrc` of this address.
    pub(crate) fn to_bytes(self) -> [u8; SOCKADDR_MRC_LEN] {
        // SAFETY: all-zero is a valid `sockaddr_mrc`.
        let mut sa: bindings::sockaddr_mrc = unsafe { MaybeUninit::zeroed().assume_init() };
        sa.smrc_family = param_family() as _;
        sa.smrc_port = self.port.to_be();
        sa.smrc_scope_id = self.scope_id;
        match self.ip {
            IpAddr::V4(a) => {
                sa.smrc_addr_family = bindings::AF_INET as u16;
                sa.smrc_addr.v4 = u32::from_ne_bytes(a);
            }
            IpAddr::V6(a) => {
                sa.smrc_addr_family = bindings::AF_INET6 as u16;
                sa.smrc_addr.v6 = a;
            }
        }
        let mut out = [0u8; SOCKADDR_MRC_LEN];
        // SAFETY: `out` has the size of `sa`; the write is unaligned.
        unsafe { ptr::write_unaligned(out.as_mut_ptr().cast(), sa) };
        out
    }
}

impl IpAddr {
    /// Returns whether this is the unspecified address (all zero).
    pub(crate) fn is_unspecified(&self) -> bool {
        match self {
            IpAddr::V4(a) => *a == [0; 4],
            IpAddr::V6(a) => *a == [0; 16],
        }
    }
}

// --- Assertions -------------------------------------------------------------------

/// `WARN_ON_ONCE(cond)`: the first time `cond` holds at this place, a warning
/// with `msg` and a backtrace (no panic, unless `panic_on_warn` asks for
/// one); returns `cond`. Any context.
macro_rules! warn_on_once {
    ($cond:expr, $msg:literal) => {{
        static WARNED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
        let cond: bool = $cond;
        if cond && !WARNED.swap(true, core::sync::atomic::Ordering::Relaxed) {
            $crate::mrc_sys::warn(kernel::c_str!($msg));
        }
        cond
    }};
}
pub(crate) use warn_on_once;

/// `WARN(1, msg)`: a warning with `msg` and a backtrace; see [`warn_on_once`].
pub(crate) fn warn(msg: &CStr) {
    // SAFETY: `msg` is a NUL-terminated string that outlives the call, and
    // `mrc_warn` prints it as the argument of a "%s" format, so its bytes
    // are never read as a format; `WARN` may be used in any context.
    unsafe { bindings::mrc_warn(msg.as_char_ptr()) };
}

// --- Sockets ----------------------------------------------------------------------

/// The protocol state every MRC socket carries.
type State = crate::mrc_sock::MrcSock;

/// `struct sock` followed by the socket's timer, work item, the work
/// softirq left for its owner and protocol state.
#[repr(C)]
struct SockWith {
    sk: Opaque<bindings::sock>,
    timer: Opaque<bindings::hrtimer>,
    work: Opaque<bindings::work_struct>,
    /// Guarded by the socket's spinlock (`sk_lock.slock`); see
    /// [`Sock::backlog_unless_free`].
    deferred: UnsafeCell<Deferred>,
    /// Whether `deferred` holds anything: written under `slock`, read
    /// without it as a hint ([`Sock::has_deferred`]).
    pending: AtomicBool,
    /// How many [`Run`]s of the connection are under way. Guarded by
    /// `slock`.
    runs: UnsafeCell<u32>,
    /// Messages the writer handed to a run under way, and the room it
    /// hands them within ([`Sock::hand_off`]). Guarded by `slock`.
    handoff: UnsafeCell<Handoff>,
    /// Whether `handoff` holds messages: written under `slock`, read
    /// without it as a hint ([`Sock::take_handed`]).
    handed: AtomicBool,
    state: State,
}

/// Most messages a writer hands to the runs under way before it waits for
/// one ([`Sock::hand_off`]).
const HANDOFF_MSGS: usize = 8;

/// Messages a writer handed to a run under way, with their lengths, in the
/// order written, for the run to queue to the connection.
#[derive(Default)]
pub(crate) struct Handed {
    msgs: [Option<(MsgBuf, u32)>; HANDOFF_MSGS],
    len: usize,
    /// What the reader read meanwhile ([`Sock::hand_off_read`]).
    pub(crate) read: Read,
}

/// Bytes a reader read, and the window cost of the packets they took
/// (`mrc_conn::window_cost`), which leave the connection's window.
#[derive(Clone, Copy, Default)]
pub(crate) struct Read {
    pub(crate) bytes: u64,
    pub(crate) cost: u64,
}

impl Handed {
    fn is_empty(&self) -> bool {
        self.len == 0 && self.read.bytes == 0 && self.read.cost == 0
    }

    fn push(&mut self, msg: MsgBuf, len: u32) -> Result<(), MsgBuf> {
        match self.msgs.get_mut(self.len) {
            Some(slot) => {
                *slot = Some((msg, len));
                self.len += 1;
                Ok(())
            }
            None => Err(msg),
        }
    }

    /// The lengths of the messages.
    fn lens(&self) -> impl Iterator<Item = u32> + '_ {
        self.msgs.iter().flatten().map(|(_, len)| *len)
    }

    /// The messages and their lengths, in the order handed.
    pub(crate) fn into_msgs(
        self,
    ) -> core::iter::Flatten<core::array::IntoIter<Option<(MsgBuf, u32)>, HANDOFF_MSGS>> {
        self.msgs.into_iter().flatten()
    }
}

/// What a writer hands to the runs of its connection under way instead of
/// waiting for the connection's lock, which they hold ([`Sock::hand_off`]).
#[derive(Default)]
struct Handoff {
    msgs: Handed,
    /// What the connection takes beyond `msgs`, as the last run to end
    /// left it ([`Sock::continue_run`]): the room it published, less the
    /// messages handed since.
    room: SendRoom,
}

impl Handoff {
    /// Sets the room to `room`, the connection's as a run that holds its
    /// lock sees it, less the messages handed that it has not queued.
    fn publish(&mut self, mut room: SendRoom, taken: &Handed) {
        for len in Iterator::chain(self.msgs.lens(), taken.lens()) {
            if !room.take(len) {
                room = SendRoom::default();
                break;
            }
        }
        self.room = room;
    }
}

/// What softirq left for the owner of a socket (the task that holds it
/// with `lock_sock`) to do when it releases it, as TCP's socket backlog
/// and its deferred timers, or for a [`Run`] under way to do before it
/// ends.
#[derive(Default)]
pub(crate) struct Deferred {
    /// Received packets, in arrival order.
    pub(crate) packets: SkbList,
    /// Sum of the packets' `truesize`.
    bytes: u32,
    /// The socket's timer fired.
    pub(crate) timer: bool,
}

impl Deferred {
    fn is_empty(&self) -> bool {
        self.packets.is_empty() && !self.timer
    }
}

/// A run of a connection under way: from the time its caller is given it
/// until it ends ([`Sock::continue_run`], [`Sock::end_run`], or dropped),
/// after the caller took the connection's lock and drove the connection.
/// Meanwhile softirq does not wait for the lock, which the run holds for
/// long: it leaves its packets, and the timer its work, in the socket's
/// backlog ([`Deferred`]), and the run takes them before it ends.
#[must_use]
pub(crate) struct Run<'a>(&'a Sock);

impl<'a> Run<'a> {
    /// Starts a run of `sk`, counting it in `runs`, its count of runs under
    /// way, which `slock` guards.
    fn begin(sk: &'a Sock, runs: &mut u32) -> Self {
        *runs = runs.saturating_add(1);
        Run(sk)
    }

    /// Counts a run's end in `runs`, as [`Run::begin`] counted its start.
    fn count_end(runs: &mut u32) {
        *runs = runs.saturating_sub(1);
    }

    /// Ends the run under `slock`, the socket's, held.
    fn end_locked(self, slock: &mut Slock<'_>) {
        Self::count_end(slock.runs());
        // Ended: its drop would end it again.
        core::mem::forget(self);
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        Self::count_end(Slock::new(self.0).runs());
    }
}

/// Where softirq's packets for a socket went ([`Sock::backlog_unless_free`]).
pub(crate) enum Backlog<'a> {
    /// No task owns the socket and no run is under way: the caller starts
    /// one and processes them now, after what the backlog held.
    Free(Run<'a>, Deferred),
    /// The owner processes them when it releases the socket, or the run
    /// under way before it ends; `dropped` of them did not fit in the
    /// backlog and were freed.
    Queued { queued: u32, dropped: u32 },
}

/// The socket's spinlock (`sk_lock.slock`), held.
struct Slock<'a>(&'a Sock);

impl<'a> Slock<'a> {
    fn new(sk: &'a Sock) -> Self {
        // SAFETY: the socket is alive; released by `drop`. Taken with bottom
        // halves disabled, so it nests under no lock and in any context.
        unsafe { bindings::mrc_sock_slock(sk.as_ptr()) };
        Self(sk)
    }

    /// Whether a task owns the socket (`lock_sock`).
    fn owned(&self) -> bool {
        // SAFETY: `slock` is held, under which ownership changes.
        unsafe { bindings::mrc_sock_owned(self.0.as_ptr()) }
    }

    /// How many runs of the connection are under way.
    fn runs(&mut self) -> &mut u32 {
        // SAFETY: `self` holds `slock`, and `&mut self` makes this the only
        // access through the guard.
        unsafe { self.0.runs_locked() }
    }

    fn handoff(&mut self) -> &mut Handoff {
        // SAFETY: `self` holds `slock`, and `&mut self` makes this the only
        // access through the guard.
        unsafe { self.0.handoff_locked() }
    }

    /// Takes the messages handed off, and clears the hint.
    fn take_handed(&mut self) -> Handed {
        self.0.handed_hint().store(false, Ordering::Relaxed);
        core::mem::take(&mut self.handoff().msgs)
    }

    /// Starts a run, which takes what the backlog holds.
    fn start_run(&mut self) -> (Run<'a>, Deferred) {
        let run = Run::begin(self.0, self.runs());
        (run, self.take())
    }

    fn deferred(&mut self) -> &mut Deferred {
        // SAFETY: `self` holds `slock`, and `&mut self` makes this the only
        // access through the guard.
        unsafe { self.0.deferred_locked() }
    }

    /// Takes what `deferred` holds.
    fn take(&mut self) -> Deferred {
        // SAFETY: as in `deferred`.
        unsafe { self.0.take_deferred_locked() }
    }
}

impl Drop for Slock<'_> {
    fn drop(&mut self) {
        // SAFETY: taken in `new`.
        unsafe { bindings::mrc_sock_sunlock(self.0.as_ptr()) };
    }
}

static PROTO: StaticCell<bindings::proto> = StaticCell::zeroed();
static PROTO_OPS: StaticCell<bindings::proto_ops> = StaticCell::zeroed();
static FAMILY_OPS: StaticCell<bindings::net_proto_family> = StaticCell::zeroed();
/// The module's workqueue; set while [`ProtoRegistration`] lives.
static WORKQUEUE: core::sync::atomic::AtomicPtr<bindings::workqueue_struct> =
    core::sync::atomic::AtomicPtr::new(ptr::null_mut());

/// An MRC socket (`struct sock` of the MRC protocol).
///
/// # Invariants
///
/// `0` is the `sk` of a live [`SockWith`] whose `timer`, `work` and `state`
/// are initialised.
#[repr(transparent)]
pub(crate) struct Sock(Opaque<bindings::sock>);

// SAFETY: `struct sock` is shared between contexts by design. The `&self`
// methods take the socket's own locks (`slock`, which also guards
// `deferred`; the receive queue's lock; `lock_sock`, held by a
// `SockGuard`), use atomic operations, read with `READ_ONCE` the fields the
// socket layer writes with `WRITE_ONCE` (buffer sizes, `sk_err`, timeouts),
// or read fields fixed before the socket is reachable (`sk_type`); the
// protocol state is `Sync` (its data is behind `MrcSock::inner`).
unsafe impl Sync for Sock {}
// SAFETY: a socket is reference counted and may be used and released from
// any context, which all reach it only through `&Sock`.
unsafe impl Send for Sock {}

impl Sock {
    /// # Safety
    ///
    /// `sk` must be an MRC socket (see the type invariant) alive for `'a`.
    unsafe fn from_raw<'a>(sk: *mut bindings::sock) -> &'a Sock {
        // SAFETY: `Sock` is a transparent wrapper; the caller guarantees the rest.
        unsafe { &*sk.cast::<Sock>() }
    }

    fn as_ptr(&self) -> *mut bindings::sock {
        self.0.get()
    }

    fn with(&self) -> *mut SockWith {
        // CAST: `sk` is the first field of the `repr(C)` `SockWith`.
        self.as_ptr().cast()
    }

    /// The protocol state.
    pub(crate) fn state(&self) -> &State {
        // SAFETY: initialised per the type invariant; shared access only.
        unsafe { &(*self.with()).state }
    }

    /// MRC's state in the socket's namespace.
    pub(crate) fn mrc_net(&self) -> &crate::mrc_net::MrcNet {
        // SAFETY: a socket holds its namespace, whose pernet state lives
        // until the namespace exits, which is after the socket is gone.
        unsafe { pernet_state(bindings::mrc_sock_net(self.as_ptr())) }
    }

    /// Takes a reference.
    pub(crate) fn hold(&self) -> SockRef {
        // SAFETY: the socket is alive (`&self`).
        unsafe { bindings::mrc_sock_hold(self.as_ptr()) };
        SockRef(NonNull::from(self))
    }

    /// Softirq: unless a task owns the socket (holds it with `lock_sock`)
    /// or a [`Run`] of its connection is under way, starts one, to process
    /// `batch` now, after what the backlog held. Otherwise queues `batch`
    /// for the owner, who processes it as it releases the socket
    /// (`release_cb`), or for the run, which takes it before it ends, so
    /// that softirq never waits for a task, nor for the other CPU's
    /// softirq: as `tcp_add_backlog`, up to `limit` bytes of `truesize`
    /// in all, beyond which packets are freed.
    pub(crate) fn backlog_unless_free(&self, mut batch: SkbList, limit: u32) -> Backlog<'_> {
        let mut slock = Slock::new(self);
        if !slock.owned() && *slock.runs() == 0 {
            let (run, mut d) = slock.start_run();
            d.packets.append(batch);
            return Backlog::Free(run, d);
        }
        let d = slock.deferred();
        let (mut queued, mut dropped) = (0, 0);
        let mut freed = SkbList::new();
        while let Some(skb) = batch.pop() {
            let size = skb.truesize();
            match d.bytes.checked_add(size).filter(|b| *b <= limit) {
                Some(b) => {
                    d.bytes = b;
                    d.packets.push(skb);
                    queued += 1;
                }
                None => {
                    freed.push(skb);
                    dropped += 1;
                }
            }
        }
        if queued > 0 {
            self.pending().store(true, Ordering::Relaxed);
        }
        drop(slock);
        // `freed` goes here, with the lock dropped.
        Backlog::Queued { queued, dropped }
    }

    /// Softirq: the socket's timer fired. If a task owns the socket, it
    /// runs the timer's work as it releases it, and if a [`Run`] is under
    /// way, the run does before it ends: returns `None`. Otherwise starts
    /// a run, to do the timer's work now, with what the backlog held.
    pub(crate) fn timer_fired(&self) -> Option<(Run<'_>, Deferred)> {
        let mut slock = Slock::new(self);
        if slock.owned() || *slock.runs() > 0 {
            slock.deferred().timer = true;
            self.pending().store(true, Ordering::Relaxed);
            return None;
        }
        let (run, mut d) = slock.start_run();
        d.timer = true;
        Some((run, d))
    }

    /// Starts a [`Run`] of the connection, which takes what softirq left
    /// in the backlog, for the caller to do first (an owner need not wait
    /// for its release to act on packets before it sends more).
    pub(crate) fn start_run(&self) -> (Run<'_>, Deferred) {
        Slock::new(self).start_run()
    }

    /// As [`Sock::start_run`], unless a run is under way, which takes what
    /// softirq left before it ends.
    pub(crate) fn start_run_unless_running(&self) -> Option<(Run<'_>, Deferred)> {
        let mut slock = Slock::new(self);
        if *slock.runs() > 0 {
            return None;
        }
        Some(slock.start_run())
    }

    /// Called by `run` with the connection's lock held, after it drove
    /// the connection: if softirq or the timer left anything meanwhile,
    /// returns it, for `run` to do, still holding the lock, and call again.
    /// Otherwise ends `run` and returns `None`: from here softirq runs the
    /// connection itself (and waits only for the lock's release).
    ///
    /// `room` is what the connection takes from its writer now
    /// (`Conn::send_room`), which the writer hands messages off within
    /// ([`Sock::hand_off`]); the messages handed off are returned with what
    /// softirq left, for the run to queue first.
    pub(crate) fn continue_run<'a>(
        &'a self,
        run: Run<'a>,
        room: SendRoom,
    ) -> Option<(Run<'a>, Deferred, Handed)> {
        let mut slock = Slock::new(self);
        let d = slock.take();
        let handed = slock.take_handed();
        slock.handoff().publish(room, &handed);
        if !d.is_empty() || !handed.is_empty() {
            drop(slock);
            return Some((run, d, handed));
        }
        run.end_locked(&mut slock);
        None
    }

    /// Ends `run`, leaving in the backlog whatever softirq, the timer or
    /// the writer left there meanwhile, for a run that starts later, or the
    /// owner as it releases the socket: for a run that has done enough in
    /// one go. `room` is as for [`Sock::continue_run`]. Returns whether
    /// anything was left.
    pub(crate) fn end_run(&self, run: Run<'_>, room: SendRoom) -> bool {
        let mut slock = Slock::new(self);
        run.end_locked(&mut slock);
        slock.handoff().publish(room, &Handed::default());
        !slock.deferred().is_empty() || !slock.handoff().msgs.is_empty()
    }

    /// The writer, which owns the socket, hands `msg` of `len` bytes to a
    /// [`Run`] of the connection under way, instead of waiting for the
    /// connection's lock that the run holds (softirq's, mostly, sending
    /// what acknowledgements let go): the run queues it before it ends.
    /// Only within the room the last run left ([`Sock::continue_run`]), so
    /// that the connection takes it as it would have now, unless it closes
    /// meanwhile; the run queues the messages in the order handed, before
    /// anything else the connection is asked to send. Gives `msg` back if
    /// no run is under way, if it does not fit, or if too many are handed
    /// already: the writer then runs the connection itself.
    pub(crate) fn hand_off(&self, msg: MsgBuf, len: u32) -> Result<(), MsgBuf> {
        let mut slock = Slock::new(self);
        if *slock.runs() == 0 {
            return Err(msg);
        }
        let h = slock.handoff();
        let mut room = h.room;
        if !room.take(len) {
            return Err(msg);
        }
        h.msgs.push(msg, len)?;
        h.room = room;
        self.handed_hint().store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The reader, which owns the socket, hands what it read to a [`Run`]
    /// of the connection under way, as [`Sock::hand_off`] does messages,
    /// instead of waiting for the connection's lock to take it out of the
    /// window: the run does that before it ends. Returns whether a run was
    /// under way to take it.
    pub(crate) fn hand_off_read(&self, read: Read) -> bool {
        let mut slock = Slock::new(self);
        if *slock.runs() == 0 {
            return false;
        }
        let r = &mut slock.handoff().msgs.read;
        r.bytes = r.bytes.saturating_add(read.bytes);
        r.cost = r.cost.saturating_add(read.cost);
        self.handed_hint().store(true, Ordering::Relaxed);
        true
    }

    /// Whether the last run left room for the writer: the connection is
    /// open for sending, as a writer checks before it copies a message.
    pub(crate) fn has_send_room(&self) -> bool {
        Slock::new(self).handoff().room.msgs > 0
    }

    /// Takes the messages the writer handed off, for a run that holds the
    /// connection's lock to queue before it queues anything else. Without
    /// `slock` if the hint says there are none: the writer that handed
    /// them, and a task that owns the socket after it, see its own or its
    /// predecessor's store; a run that misses them takes them before it
    /// ends ([`Sock::continue_run`]).
    pub(crate) fn take_handed(&self) -> Handed {
        if !self.handed_hint().load(Ordering::Relaxed) {
            return Handed::default();
        }
        Slock::new(self).take_handed()
    }

    /// Whether softirq left anything for the owner ([`Sock::start_run`]):
    /// a hint, read without the lock, for an owner busy for a while (copying
    /// a long message) that acts on its packets meanwhile.
    pub(crate) fn has_deferred(&self) -> bool {
        self.pending().load(Ordering::Relaxed)
    }

    /// What softirq left for the owner.
    ///
    /// # Safety
    ///
    /// The caller holds `slock`, under which alone `deferred` is accessed,
    /// and holds no other reference to it.
    #[allow(clippy::mut_from_ref)]
    unsafe fn deferred_locked(&self) -> &mut Deferred {
        // SAFETY: `deferred` is initialised by `init_sock` (type invariant);
        // the caller's `slock` excludes every other access to it.
        unsafe { &mut *(*self.with()).deferred.get() }
    }

    /// Takes what softirq left for the owner, and clears the hint.
    ///
    /// # Safety
    ///
    /// As for [`Sock::deferred_locked`].
    unsafe fn take_deferred_locked(&self) -> Deferred {
        self.pending().store(false, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        core::mem::take(unsafe { self.deferred_locked() })
    }

    /// How many runs of the connection are under way.
    ///
    /// # Safety
    ///
    /// As for [`Sock::deferred_locked`], for `runs`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn runs_locked(&self) -> &mut u32 {
        // SAFETY: `runs` is initialised by `init_sock` (type invariant);
        // the caller's `slock` excludes every other access to it.
        unsafe { &mut *(*self.with()).runs.get() }
    }

    /// The writer's messages handed to runs under way.
    ///
    /// # Safety
    ///
    /// As for [`Sock::deferred_locked`], for `handoff`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn handoff_locked(&self) -> &mut Handoff {
        // SAFETY: `handoff` is initialised by `init_sock` (type invariant);
        // the caller's `slock` excludes every other access to it.
        unsafe { &mut *(*self.with()).handoff.get() }
    }

    fn handed_hint(&self) -> &AtomicBool {
        // SAFETY: initialised by `init_sock` (type invariant); an atomic.
        unsafe { &(*self.with()).handed }
    }

    fn pending(&self) -> &AtomicBool {
        // SAFETY: initialised by `init_sock` (type invariant); an atomic.
        unsafe { &(*self.with()).pending }
    }

    /// Takes the socket lock of process context (`lock_sock`). Process
    /// context: may sleep.
    pub(crate) fn lock(&self) -> SockGuard<'_> {
        might_sleep();
        // SAFETY: the socket is valid (type invariant); released by the
        // guard. A caller in atomic context, where `lock_sock` must not
        // sleep, is reported by `might_sleep` above.
        unsafe { bindings::mrc_lock_sock(self.as_ptr()) };
        SockGuard(self)
    }

    /// `SO_RCVBUF` in bytes.
    pub(crate) fn rcvbuf(&self) -> u32 {
        // SAFETY: reads a field of a valid socket with `READ_ONCE`, as the
        // socket layer writes it with `WRITE_ONCE` (`SO_RCVBUF`).
        unsafe { bindings::mrc_sock_rcvbuf(self.as_ptr()) }.max(0) as u32
    }

    /// Whether `ip` is an address of this host in the socket's namespace.
    /// Process context.
    pub(crate) fn is_local_addr(&self, ip: &IpAddr) -> bool {
        let (bytes, v6): (&[u8], bool) = match ip {
            IpAddr::V4(a) => (a, false),
            IpAddr::V6(a) => (a, true),
        };
        // SAFETY: the socket is valid and `bytes` holds the 4 or 16 bytes
        // the helper reads for `v6`.
        unsafe { bindings::mrc_sock_addr_is_local(self.as_ptr(), bytes.as_ptr(), v6) }
    }

    /// Whether the calling task may not bind MRC port `port` in the
    /// socket's namespace (a privileged port without
    /// `CAP_NET_BIND_SERVICE`). Process context.
    pub(crate) fn port_denied(&self, port: u16) -> bool {
        // SAFETY: the socket is valid; process context, as `ns_capable` needs.
        unsafe { bindings::mrc_sock_port_denied(self.as_ptr(), port) }
    }

    /// Bytes of received packets charged to the socket (`sk_rmem_alloc`).
    pub(crate) fn rmem_alloc(&self) -> u32 {
        // SAFETY: an atomic read of a field of a valid socket.
        unsafe { bindings::mrc_sk_rmem_alloc(self.as_ptr()) }.max(0) as u32
    }

    /// Whether [`Msg::copy_in`] may copy into this socket's page fragments
    /// without the socket's lock: it writes through the sending task's own
    /// (`sk_use_task_frag`, every socket a user opens), not one of the
    /// socket's, which the lock guards.
    pub(crate) fn copies_unlocked(&self) -> bool {
        // SAFETY: reads a field of a valid socket with `READ_ONCE`; its
        // owner sets it before the socket is used, and MRC never does.
        unsafe { bindings::mrc_sock_task_frag(self.as_ptr()) }
    }

    /// `SO_SNDBUF` in bytes.
    pub(crate) fn sndbuf(&self) -> u32 {
        // SAFETY: reads a field of a valid socket with `READ_ONCE`, as the
        // socket layer writes it with `WRITE_ONCE` (`SO_SNDBUF`).
        unsafe { bindings::mrc_sock_sndbuf(self.as_ptr()) }.max(0) as u32
    }

    /// Receive timeout in jiffies (0 when `nonblock`).
    pub(crate) fn rcvtimeo(&self, nonblock: bool) -> isize {
        // SAFETY: reads socket fields.
        unsafe { bindings::mrc_sock_rcvtimeo(self.as_ptr(), nonblock) }
    }

    /// Send timeout in jiffies (0 when `nonblock`).
    pub(crate) fn sndtimeo(&self, nonblock: bool) -> isize {
        // SAFETY: reads socket fields.
        unsafe { bindings::mrc_sock_sndtimeo(self.as_ptr(), nonblock) }
    }

    /// Records a pending error (`SO_ERROR`) and reports it to waiters.
    pub(crate) fn set_error(&self, e: Error) {
        // SAFETY: any context; `sk_err` takes a positive errno value.
        unsafe { bindings::mrc_sk_set_err(self.as_ptr(), -e.to_errno()) };
    }

    /// Takes the pending error, if any.
    pub(crate) fn take_error(&self) -> Option<Error> {
        // SAFETY: any context; atomically exchanges the field.
        let e = unsafe { bindings::mrc_sock_error(self.as_ptr()) };
        (e < 0).then(|| Error::from_errno(e))
    }

    /// Whether an error is pending (`SO_ERROR`), without taking it.
    pub(crate) fn has_error(&self) -> bool {
        // SAFETY: a volatile read of a field of a valid socket, as
        // `READ_ONCE`: `sk_err` is written with `WRITE_ONCE`.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_err)) != 0 }
    }

    /// Whether the socket is a byte stream (`SOCK_STREAM`); fixed at creation.
    pub(crate) fn is_stream(&self) -> bool {
        // SAFETY: set before the socket is reachable, never changed.
        i32::from(unsafe { (*self.as_ptr()).sk_type }) == SOCK_STREAM
    }

    /// Bytes a stream read waits for (`SO_RCVLOWAT`, all of `len` with
    /// `MSG_WAITALL`), at least 1.
    pub(crate) fn rcvlowat(&self, waitall: bool, len: usize) -> usize {
        let len = c_int::try_from(len).unwrap_or(c_int::MAX);
        // SAFETY: reads a socket field with `READ_ONCE`.
        let n = unsafe { bindings::mrc_sock_rcvlowat(self.as_ptr(), waitall, len) };
        usize::try_from(n).unwrap_or(1).max(1)
    }

    /// The socket cookie (`SO_COOKIE`), assigned on first use. Any context.
    pub(crate) fn cookie(&self) -> u64 {
        // SAFETY: the socket is valid; assigning the cookie is an atomic
        // compare-and-exchange of one of its fields.
        unsafe { bindings::mrc_sock_cookie(self.as_ptr()) }
    }

    /// Sends an event with command `cmd` to the `events` group of the
    /// socket's namespace, if anyone listens. Any context.
    pub(crate) fn notify(&self, cmd: u32, fill: impl FnOnce(&mut GenlMsg) -> Result) {
        // SAFETY: a socket's namespace outlives it.
        unsafe { notify(bindings::mrc_sock_net(self.as_ptr()), cmd, fill) };
    }

    /// Wakes readers (`sk_data_ready`).
    pub(crate) fn data_ready(&self) {
        // SAFETY: any context.
        unsafe { bindings::mrc_sk_data_ready(self.as_ptr()) };
    }

    /// Wakes writers (`sk_write_space`) if one found no room
    /// ([`Sock::set_nospace`]), as `sk_stream_write_space` does.
    pub(crate) fn write_space(&self) {
        // SAFETY: any context.
        unsafe { bindings::mrc_sk_write_space(self.as_ptr()) };
    }

    /// A writer, or a poll for writing, found no room: the next
    /// [`Sock::write_space`] wakes it (`SOCK_NOSPACE`). Set before the last
    /// check for room, which takes the connection's lock after it, so that
    /// room made after that check finds it set.
    pub(crate) fn set_nospace(&self) {
        // SAFETY: the socket is alive (`&self`); the helper reads
        // `sk_socket` once and leaves an orphan (null) alone, and `set_bit`
        // is atomic, so it may race with the socket layer's own flag updates.
        unsafe { bindings::mrc_sk_set_nospace(self.as_ptr()) };
    }

    /// Wakes every waiter (`sk_state_change`).
    pub(crate) fn state_change(&self) {
        // SAFETY: any context.
        unsafe { bindings::mrc_sk_state_change(self.as_ptr()) };
    }

    /// `SO_LINGER`: `Some(jiffies)` when set.
    pub(crate) fn linger(&self) -> Option<isize> {
        let mut time: usize = 0;
        // SAFETY: reads socket fields.
        let on = unsafe { bindings::mrc_sock_linger(self.as_ptr(), &mut time) };
        on.then(|| isize::try_from(time).unwrap_or(isize::MAX))
    }

    fn receive_queue(&self) -> *mut bindings::sk_buff_head {
        // SAFETY: the field is valid for the life of the socket.
        unsafe { ptr::addr_of_mut!((*self.as_ptr()).sk_receive_queue) }
    }

    /// Appends the packets `fill` hands over to the receive queue at once,
    /// so that a reader, which takes the queue's lock only, never sees part
    /// of them.
    pub(crate) fn queue_all(&self, fill: impl FnOnce(&mut dyn FnMut(SkBuff))) {
        let mut list = MaybeUninit::<bindings::sk_buff_head>::uninit();
        let lp = list.as_mut_ptr();
        // SAFETY: initialises the private list head in place; it stays in
        // this frame and is never moved.
        unsafe { bindings::mrc_skb_list_init(lp) };
        fill(&mut |skb| {
            // SAFETY: the list is initialised and private to this call; it
            // takes ownership of the packet.
            unsafe { bindings::mrc_skb_list_tail(lp, skb.into_raw()) }
        });
        // SAFETY: the queue is valid; the list is left empty and owns nothing.
        unsafe { bindings::mrc_skb_queue_splice_tail(lp, self.receive_queue()) };
    }

    /// Number of packets in the receive queue.
    pub(crate) fn queue_len(&self) -> u32 {
        // SAFETY: a lockless read of the queue length.
        unsafe { bindings::mrc_skb_queue_len(self.receive_queue()) }
    }

    /// Arms the socket's timer for monotonic time `at_ns`, or moves it there.
    /// Any context.
    ///
    /// The timer holds no reference to the socket: its callback borrows the
    /// socket from the one that the caller's contract keeps.
    ///
    /// # Safety
    ///
    /// The timer must be cancelled with [`Sock::cancel_timer`] before the
    /// last reference to the socket is dropped. (`sk_destruct` checks that,
    /// with a warning, and cancels a timer still armed then.)
    pub(crate) unsafe fn arm_timer(&self, at_ns: u64) {
        // ktime_t is signed: a later time would wrap into the past.
        let at_ns = at_ns.min(i64::MAX as u64);
        // SAFETY: the timer was initialised with the socket (type
        // invariant); the caller has it cancelled before the socket goes.
        unsafe {
            bindings::mrc_hrtimer_start(
                Opaque::raw_get(ptr::addr_of!((*self.with()).timer)),
                at_ns,
                TIMER_SLACK_NS,
            )
        };
    }

    /// Cancels the timer and waits for a running callback to finish.
    /// Process context, without the locks the callback takes (the
    /// connection's): may wait, which a debug kernel checks.
    pub(crate) fn cancel_timer(&self) {
        might_sleep();
        // SAFETY: the timer was initialised with the socket (type
        // invariant). A caller that would wait for itself (the callback, or
        // the holder of a lock the callback takes) is in atomic context,
        // which `might_sleep` above reports.
        unsafe { bindings::hrtimer_cancel(Opaque::raw_get(ptr::addr_of!((*self.with()).timer))) };
    }

    /// Queues the socket's work item on the module's workqueue; the work
    /// holds a reference until it has run.
    pub(crate) fn queue_work(&self) {
        let wq = WORKQUEUE.load(core::sync::atomic::Ordering::Acquire);
        if wq.is_null() {
            return;
        }
        // SAFETY: a reference is taken for the queued work and dropped by
        // `work_run` (or here if it was already queued).
        unsafe {
            bindings::mrc_sock_hold(self.as_ptr());
            let work = Opaque::raw_get(ptr::addr_of!((*self.with()).work));
            if !bindings::mrc_queue_work(wq, work) {
                bindings::mrc_sock_put(self.as_ptr());
            }
        }
    }

    /// Creates a socket in namespace `net` that no `struct socket` owns yet
    /// (a connection waiting to be accepted).
    pub(crate) fn new_child(parent: &Sock) -> Result<SockRef> {
        // SAFETY: the parent's namespace is alive; `PROTO` is registered.
        let sk = unsafe {
            bindings::sk_alloc(
                bindings::mrc_sock_net(parent.as_ptr()),
                param_family() as _,
                kernel::bindings::GFP_KERNEL,
                PROTO.as_ptr(),
                0,
            )
        };
        if sk.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `sk` is new and ours; with no socket `sock_init_data` sets
        // up the defaults only. `parent` is a live socket (a reference to
        // it is held), whose buffer fields are read with `READ_ONCE`.
        unsafe {
            bindings::sock_init_data(ptr::null_mut(), sk);
            init_sock(sk);
            // A connection is of its listener's type and takes the buffer
            // sizes set on it.
            bindings::mrc_sock_inherit(sk, parent.as_ptr());
        }
        Ok(SockRef(NonNull::new(sk.cast::<Sock>()).ok_or(ENOMEM)?))
    }
}

/// Slack granted to the socket timer.
const TIMER_SLACK_NS: u64 = 20_000;

/// Initialises the MRC part of a freshly allocated socket.
///
/// # Safety
///
/// `sk` must be a new socket of `PROTO`, not yet visible to anyone else.
unsafe fn init_sock(sk: *mut bindings::sock) {
    let this = sk.cast::<SockWith>();
    // SAFETY: per the function's contract; `State::new` cannot fail.
    unsafe {
        bindings::mrc_hrtimer_init(Opaque::raw_get(ptr::addr_of!((*this).timer)));
        (*Opaque::raw_get(ptr::addr_of!((*this).timer))).function = Some(timer_run);
        bindings::mrc_init_work(Opaque::raw_get(ptr::addr_of!((*this).work)), Some(work_run));
        (*sk).sk_rcvbuf = SOCK_BUF_DEFAULT as c_int;
        (*sk).sk_sndbuf = SOCK_BUF_DEFAULT as c_int;
        ptr::addr_of_mut!((*this).deferred).write(UnsafeCell::new(Deferred::default()));
        ptr::addr_of_mut!((*this).pending).write(AtomicBool::new(false));
        ptr::addr_of_mut!((*this).runs).write(UnsafeCell::new(0));
        ptr::addr_of_mut!((*this).handoff).write(UnsafeCell::new(Handoff::default()));
        ptr::addr_of_mut!((*this).handed).write(AtomicBool::new(false));
        let init = State::new();
        let _ = init.__pinned_init(ptr::addr_of_mut!((*this).state));
        (*sk).sk_destruct = Some(sk_destruct);
    }
}

/// An owned reference to an MRC socket.
///
/// # Invariants
///
/// `0` is a live MRC socket on which this object holds a reference.
pub(crate) struct SockRef(NonNull<Sock>);

// SAFETY: references may be dropped from any context (`sock_put`).
unsafe impl Send for SockRef {}
// SAFETY: only `&Sock` is handed out, which is `Sync`.
unsafe impl Sync for SockRef {}

impl core::ops::Deref for SockRef {
    type Target = Sock;
    fn deref(&self) -> &Sock {
        // SAFETY: alive per the type invariant.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for SockRef {
    fn clone(&self) -> Self {
        self.hold()
    }
}

impl Drop for SockRef {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { bindings::mrc_sock_put(self.as_ptr()) };
    }
}

impl SockRef {
    /// Returns whether both refer to the same socket.
    pub(crate) fn is(&self, other: &Sock) -> bool {
        ptr::eq(self.0.as_ptr(), other)
    }
}

/// The socket lock of process context, held (`lock_sock`).
pub(crate) struct SockGuard<'a>(&'a Sock);

impl Drop for SockGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: we took the lock in `Sock::lock`.
        unsafe { bindings::release_sock(self.0.as_ptr()) };
    }
}

impl SockGuard<'_> {
    /// Removes the first packet of the receive queue.
    pub(crate) fn queue_dequeue(&self) -> Option<SkBuff> {
        // SAFETY: the queue is valid; `skb_dequeue` takes its lock, and a
        // dequeued packet is ours.
        NonNull::new(unsafe { bindings::skb_dequeue(self.0.receive_queue()) }).map(SkBuff)
    }

    /// Frees every packet of the receive queue.
    pub(crate) fn queue_purge(&self) {
        // SAFETY: the queue is valid; the purge takes its lock.
        unsafe { bindings::mrc_skb_queue_purge(self.0.receive_queue()) };
    }

    /// Calls `f` on the packets of the receive queue from the first on, until
    /// it returns `false` or the queue ends.
    ///
    /// Only the holder of the socket lock removes packets from the receive
    /// queue (only [`SockGuard`] has methods that do, and `sk_destruct` runs
    /// when no one refers to the socket any more), and `&mut self` keeps the
    /// guard from dequeuing, purging or dropping the lock in [`Self::wait`]
    /// while `f` runs: so the packets visited stay queued and unchanged.
    /// Others only append, under the queue's lock ([`Sock::queue_all`]),
    /// which links the new packets after the last one. The walk therefore
    /// reads the last packet (and the link after it) under that lock, and
    /// the links before it, which no one writes any more, without it.
    pub(crate) fn queue_walk(&mut self, mut f: impl FnMut(&SkBuff) -> bool) {
        let head = self.0.receive_queue();
        let mut last = ptr::null_mut();
        // SAFETY: the queue is valid; the helper reads it under its lock.
        let mut skb = unsafe { bindings::mrc_skb_queue_next(head, ptr::null_mut(), &mut last) };
        while let Some(p) = NonNull::new(skb) {
            // The packet stays queued, and so owned by the queue, while `f`
            // looks at it (see above): the view must not free it.
            let view = core::mem::ManuallyDrop::new(SkBuff(p));
            if !f(&view) {
                return;
            }
            skb = if p.as_ptr() == last {
                // SAFETY: `p` is still queued (see above); the helper reads
                // the link after it, which an append may write, under the
                // queue's lock.
                unsafe { bindings::mrc_skb_queue_next(head, p.as_ptr(), &mut last) }
            } else {
                // SAFETY: `p` is still queued and comes before `last`, which
                // was queued when the queue's lock was last taken: its link
                // to the next packet was written before that and is written
                // no more.
                unsafe { bindings::mrc_skb_next(p.as_ptr()) }
            };
        }
    }

    /// Sleeps until `ready` returns `true`, with the socket lock dropped while
    /// asleep. `timeo` is the remaining time in jiffies and is updated;
    /// returns `EAGAIN` once it has run out, or the signal error when a signal
    /// interrupts the wait.
    ///
    /// `ready` runs with the socket lock held, as the task's state is
    /// `TASK_RUNNING`, so it may act (send a message, say): it runs once per
    /// turn and not again once it returned `true`. As `sk_wait_event`, the
    /// wait takes no wakeup for granted: the task is on the socket's wait
    /// queue from before the first `ready`, and a wakeup that comes between
    /// a `ready` and the sleep ends the sleep at once (`wait_woken`).
    pub(crate) fn wait(&self, timeo: &mut isize, mut ready: impl FnMut() -> bool) -> Result {
        might_sleep();
        let sk = self.0.as_ptr();
        let mut entry = MaybeUninit::<bindings::wait_queue_entry>::uninit();
        // SAFETY: the socket's wait queue outlives the wait, since the caller
        // holds the socket; `entry` is initialised for the current task and
        // stays in this frame, unmoved, until it is removed below.
        let wq = unsafe {
            let wq = bindings::mrc_sk_sleep(sk);
            bindings::mrc_init_wait_woken(entry.as_mut_ptr());
            bindings::add_wait_queue(wq, entry.as_mut_ptr());
            wq
        };
        let result = loop {
            if ready() {
                break Ok(());
            }
            if *timeo <= 0 {
                break Err(EAGAIN);
            }
            // SAFETY: process context.
            if unsafe { bindings::mrc_signal_pending() } {
                // SAFETY: pure function of `timeo`.
                break Err(Error::from_errno(unsafe {
                    bindings::mrc_sock_intr_errno(*timeo)
                }));
            }
            // SAFETY: the guard holds the socket lock, dropped for the sleep
            // and taken again before the guard is used; `entry` is on the
            // wait queue (above).
            unsafe {
                bindings::release_sock(sk);
                *timeo =
                    bindings::wait_woken(entry.as_mut_ptr(), bindings::TASK_INTERRUPTIBLE, *timeo);
                bindings::mrc_lock_sock(sk);
            }
        };
        // SAFETY: added to `wq` above, and still there.
        unsafe { bindings::remove_wait_queue(wq, entry.as_mut_ptr()) };
        result
    }
}

/// `sk_destruct` of MRC sockets: drops the protocol state.
///
/// The socket's connection was torn down before its last reference went,
/// and with it its timer cancelled (`mrc_sock::destroy`, the contract of
/// [`Sock::arm_timer`]): warns if not. A timer still armed is cancelled
/// then, and one whose callback runs elsewhere waited for, so that the
/// callback never sees the socket freed; a callback never drops the last
/// reference to its own socket, since it holds none.
///
/// # Safety
///
/// Called only by `__sk_destruct`, once, when the last reference is gone.
unsafe extern "C" fn sk_destruct(sk: *mut bindings::sock) {
    let this = sk.cast::<SockWith>();
    // SAFETY: `init_sock` initialised the timer; the socket's memory stays
    // until this returns.
    let timer = unsafe { Opaque::raw_get(ptr::addr_of!((*this).timer)) };
    // SAFETY: as above.
    let armed = unsafe { bindings::hrtimer_active(timer) };
    if warn_on_once!(armed, "timer of a socket being freed is armed") {
        // SAFETY: as above; see the function's description for the context.
        unsafe { bindings::hrtimer_cancel(timer) };
    }
    // SAFETY: `init_sock` initialised `state`; nothing else refers to the
    // socket any more.
    let torn_down = unsafe { (*this).state.torn_down() };
    warn_on_once!(!torn_down, "socket being freed still has a connection");
    // SAFETY: the last reference is gone; `init_sock` initialised `state`.
    unsafe {
        bindings::mrc_skb_queue_purge(ptr::addr_of_mut!((*sk).sk_receive_queue));
        ptr::drop_in_place(ptr::addr_of_mut!((*this).deferred));
        ptr::drop_in_place(ptr::addr_of_mut!((*this).handoff));
        ptr::drop_in_place(ptr::addr_of_mut!((*this).state));
    }
}

/// `proto::release_cb`: the socket's owner releases it (`release_sock`),
/// with `slock` held and bottom halves disabled, still owning it. What
/// softirq deferred meanwhile is done here, with `slock` dropped (as
/// MPTCP's `release_cb` does), and again until nothing is left: softirq
/// checks ownership under `slock`, which is held from the last check until
/// ownership ends, so nothing is left behind. Unless a [`Run`] is under
/// way, which takes it before it ends (`Sock::continue_run`), while the
/// owner would only wait for the lock that the run holds.
///
/// # Safety
///
/// Called only by `release_sock` for an MRC socket, with `slock` held.
unsafe extern "C" fn release_cb(sk: *mut bindings::sock) {
    // SAFETY: the caller owns the live socket.
    let sock = unsafe { Sock::from_raw(sk) };
    loop {
        // SAFETY: `slock` is held (the function's contract; and again after
        // each turn below), and nothing else here refers to `runs`.
        if *unsafe { sock.runs_locked() } > 0 {
            return;
        }
        // SAFETY: `slock` is held (the function's contract; and again after
        // each turn below), and nothing else here refers to `deferred`.
        let d = unsafe { sock.take_deferred_locked() };
        if d.is_empty() {
            return;
        }
        // SAFETY: as above.
        let run = Run::begin(sock, unsafe { sock.runs_locked() });
        // SAFETY: held on entry; taken again below, as the caller expects.
        unsafe { bindings::mrc_sock_sunlock(sk) };
        crate::mrc_sock::owner_backlog(sock, run, d);
        // SAFETY: dropped above.
        unsafe { bindings::mrc_sock_slock(sk) };
    }
}

/// Timer callback of MRC sockets, in softirq context.
///
/// # Safety
///
/// Called by the hrtimer core for a timer set up by `init_sock`, armed only
/// under the contract of [`Sock::arm_timer`].
unsafe extern "C" fn timer_run(t: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
    // SAFETY: `t` is the `timer` field of a `SockWith` (`init_sock`). Its
    // socket is alive while this runs: the timer is cancelled before the
    // socket's last reference goes (`Sock::arm_timer`), and `hrtimer_cancel`
    // waits for a running callback; `sk_destruct` cancels it too.
    let sock = unsafe {
        let this = kernel::container_of!(t.cast::<Opaque<bindings::hrtimer>>(), SockWith, timer);
        Sock::from_raw(this.cast_mut().cast())
    };
    crate::mrc_sock::timer(sock);
    bindings::hrtimer_restart_HRTIMER_NORESTART
}

/// Work function of MRC sockets, in process context.
///
/// # Safety
///
/// Called by the workqueue for a work item queued by `Sock::queue_work`,
/// which took a reference for it.
unsafe extern "C" fn work_run(w: *mut bindings::work_struct) {
    // SAFETY: `w` is the `work` field of a `SockWith` kept alive by the
    // reference taken when the work was queued.
    let sock = unsafe {
        let this = kernel::container_of!(w.cast::<Opaque<bindings::work_struct>>(), SockWith, work);
        Sock::from_raw(this.cast_mut().cast())
    };
    crate::mrc_sock::work(sock);
    // SAFETY: drops the reference of the queued work.
    unsafe { bindings::mrc_sock_put(sock.as_ptr()) };
}

/// `net_proto_family::create`: `socket(AF_MRC, …)`.
///
/// Kernel sockets (`kern`, `sock_create_kern`) are refused with
/// `EAFNOSUPPORT`. They hold no reference to their namespace, so the
/// namespace's MRC state, tunnel sockets included, could go away under
/// them: an MRC socket relies on its namespace outliving it (`Sock::mrc_net`,
/// `MrcNet`'s teardown), as a user's socket does.
///
/// # Safety
///
/// Called only by `__sock_create`, with a live namespace and a new socket.
unsafe extern "C" fn family_create(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    protocol: c_int,
    kern: c_int,
) -> c_int {
    from_result(|| {
        if kern != 0 {
            return Err(err::address_family_not_supported());
        }
        // SAFETY: `__sock_create` passes a fresh, valid `socket`.
        let sock_type = i32::from(unsafe { (*sock).type_ });
        State::check(sock_type, protocol)?;
        // SAFETY: `net` is the caller's live namespace; `PROTO` is registered.
        let sk = unsafe {
            bindings::sk_alloc(
                net,
                param_family() as _,
                kernel::bindings::GFP_KERNEL,
                PROTO.as_ptr(),
                0,
            )
        };
        if sk.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `sock` and the new `sk` are valid; `PROTO_OPS` is set up.
        unsafe {
            (*sock).state = bindings::socket_state_SS_UNCONNECTED;
            (*sock).ops = PROTO_OPS.as_ptr();
            bindings::sock_init_data(sock, sk);
            init_sock(sk);
        }
        Ok(0)
    })
}

/// Returns the MRC socket of a `struct socket`, if it still has one.
///
/// # Safety
///
/// `sock` must be a valid socket of our family, alive for `'a`.
unsafe fn sock_of<'a>(sock: *mut bindings::socket) -> Option<&'a Sock> {
    // SAFETY: per the contract; an MRC socket's `sk` is an MRC sock.
    unsafe {
        let sk = (*sock).sk;
        (!sk.is_null()).then(|| Sock::from_raw(sk))
    }
}

/// Runs a socket operation and converts its result for C.
///
/// # Safety
///
/// As [`sock_of`].
unsafe fn sock_op(sock: *mut bindings::socket, f: impl FnOnce(&Sock) -> Result<i32>) -> c_int {
    // SAFETY: per the contract.
    match unsafe { sock_of(sock) } {
        Some(sk) => from_result(|| f(sk)),
        None => EINVAL.to_errno(),
    }
}

/// Returns the bytes of a socket address passed by the socket layer.
///
/// # Safety
///
/// `addr` must be valid for `len` bytes (the socket layer copied it in).
unsafe fn addr_bytes<'a>(addr: *const bindings::sockaddr, len: c_int) -> Result<&'a [u8]> {
    let len = usize::try_from(len).map_err(|_| EINVAL)?;
    if addr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: per the contract.
    Ok(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) })
}

/// `proto_ops::release`: the last close of an MRC socket.
///
/// # Safety
///
/// Called only by the socket layer, once per socket.
unsafe extern "C" fn op_release(sock: *mut bindings::socket) -> c_int {
    // SAFETY: the socket layer calls release once, on a valid socket.
    unsafe {
        let Some(sk) = sock_of(sock) else {
            return 0;
        };
        crate::mrc_sock::release(sk);
        bindings::mrc_sock_orphan(sk.as_ptr());
        (*sock).sk = ptr::null_mut();
        bindings::mrc_sock_put(sk.as_ptr());
    }
    0
}

/// `proto_ops::bind`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and address.
unsafe extern "C" fn op_bind(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            crate::mrc_sock::bind(sk, &MrcAddr::parse(addr_bytes(addr, len)?)?).map(|()| 0)
        })
    }
}

/// `proto_ops::connect`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and address.
unsafe extern "C" fn op_connect(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
    flags: c_int,
) -> c_int {
    let nonblock = flags & bindings::O_NONBLOCK as c_int != 0;
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            let addr = MrcAddr::parse(addr_bytes(addr, len)?)?;
            crate::mrc_sock::connect(sk, &addr, nonblock)?;
            (*sock).state = bindings::socket_state_SS_CONNECTED;
            Ok(0)
        })
    }
}

/// `proto_ops::listen`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket.
unsafe extern "C" fn op_listen(sock: *mut bindings::socket, backlog: c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe { sock_op(sock, |sk| crate::mrc_sock::listen(sk, backlog).map(|()| 0)) }
}

/// `proto_ops::accept`.
///
/// # Safety
///
/// Called by the socket layer with a valid listening socket and a new one.
unsafe extern "C" fn op_accept(
    sock: *mut bindings::socket,
    newsock: *mut bindings::socket,
    arg: *mut bindings::proto_accept_arg,
) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        let nonblock = (*arg).flags & bindings::O_NONBLOCK as c_int != 0;
        sock_op(sock, |sk| {
            let child = crate::mrc_sock::accept(sk, nonblock)?;
            let csk = child.as_ptr();
            // The new socket takes over the queue's reference.
            core::mem::forget(child);
            bindings::mrc_sock_graft(csk, newsock);
            (*newsock).state = bindings::socket_state_SS_CONNECTED;
            Ok(0)
        })
    }
}

/// `proto_ops::getname`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and a `sockaddr_storage`.
unsafe extern "C" fn op_getname(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    peer: c_int,
) -> c_int {
    // An MRC address fits in the `sockaddr_storage` that `addr` points to.
    const _: () = assert!(SOCKADDR_MRC_LEN <= SOCKADDR_STORAGE_LEN);
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            let a = crate::mrc_sock::getname(sk, peer != 0)?.to_bytes();
            // `addr` has room for a `sockaddr_storage`, which `a` fits in
            // (checked above at compile time).
            ptr::copy_nonoverlapping(a.as_ptr(), addr.cast::<u8>(), a.len());
            Ok(a.len() as i32)
        })
    }
}

/// `proto_ops::poll`.
///
/// # Safety
///
/// Called by the socket layer with a valid file, socket and poll table.
unsafe extern "C" fn op_poll(
    file: *mut bindings::file,
    sock: *mut bindings::socket,
    wait: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: per the contract.
    unsafe {
        bindings::mrc_sock_poll_wait(file, sock, wait);
        match sock_of(sock) {
            Some(sk) => crate::mrc_sock::poll(sk),
            None => bindings::MRC_EPOLLERR,
        }
    }
}

/// `proto_ops::shutdown`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket.
unsafe extern "C" fn op_shutdown(sock: *mut bindings::socket, how: c_int) -> c_int {
    // SAFETY: per the contract.
    unsafe { sock_op(sock, |sk| crate::mrc_sock::shutdown(sk, how).map(|()| 0)) }
}

/// `proto_ops::sendmsg`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and message.
unsafe extern "C" fn op_sendmsg(
    sock: *mut bindings::socket,
    msg: *mut bindings::msghdr,
    len: usize,
) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            let mut msg = Msg(NonNull::new(msg).ok_or(EINVAL)?);
            crate::mrc_io::sendmsg(sk, &mut msg, len)
        })
    }
}

/// `proto_ops::recvmsg`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and message.
unsafe extern "C" fn op_recvmsg(
    sock: *mut bindings::socket,
    msg: *mut bindings::msghdr,
    len: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            let mut msg = Msg(NonNull::new(msg).ok_or(EINVAL)?);
            crate::mrc_io::recvmsg(sk, &mut msg, len, flags)
        })
    }
}

/// `proto_ops::ioctl`: `SIOCINQ` and `SIOCOUTQ`; anything else goes on to
/// the socket layer's device ioctls (`-ENOIOCTLCMD`).
///
/// # Safety
///
/// Called by the socket layer with a valid socket; `arg` is the caller's
/// user pointer.
unsafe extern "C" fn op_ioctl(sock: *mut bindings::socket, cmd: c_uint, arg: c_ulong) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            let val = crate::mrc_io::ioctl(sk, cmd)?;
            // SAFETY: `arg` is the caller's user pointer; `put_user` checks it.
            to_result(bindings::mrc_put_user_int(arg as *mut c_int, val))?;
            Ok(0)
        })
    }
}

/// `proto_ops::setsockopt`; `SOL_SOCKET` never comes here (the socket layer
/// handles it).
///
/// # Safety
///
/// Called by the socket layer with a valid socket and the caller's option
/// value of `optlen` bytes.
unsafe extern "C" fn op_setsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    optval: bindings::sockptr_t,
    optlen: c_uint,
) -> c_int {
    let val = OptIn {
        val: optval,
        len: optlen as usize,
    };
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            crate::mrc_sock::setsockopt(sk, level, optname, &val).map(|()| 0)
        })
    }
}

/// `proto_ops::getsockopt` for levels other than `SOL_SOCKET`.
///
/// # Safety
///
/// Called by the socket layer with a valid socket and the caller's user
/// space pointers to the option value and its length.
unsafe extern "C" fn op_getsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    optval: *mut c_char,
    optlen: *mut c_int,
) -> c_int {
    let out = OptOut {
        val: optval.cast(),
        len: optlen,
    };
    // SAFETY: per the contract.
    unsafe {
        sock_op(sock, |sk| {
            crate::mrc_sock::getsockopt(sk, level, optname, &out).map(|()| 0)
        })
    }
}

/// The value of a `setsockopt()` call.
///
/// # Invariants
///
/// `val` is the socket layer's pointer (user or kernel) to `len` bytes.
pub(crate) struct OptIn {
    val: bindings::sockptr_t,
    len: usize,
}

impl OptIn {
    /// The length the caller passed (`optlen`).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies the first `buf.len()` bytes of the value; `EINVAL` if the
    /// value is shorter.
    pub(crate) fn read(&self, buf: &mut [u8]) -> Result {
        if buf.len() > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `buf` is writable for `buf.len()` bytes, which the value
        // has (type invariant); `copy_from_sockptr` checks user addresses.
        to_result(unsafe {
            bindings::mrc_copy_from_sockptr(buf.as_mut_ptr().cast(), self.val, buf.len())
        })
    }

    /// Reads a `u32` value (`EINVAL` if `optlen` is shorter).
    pub(crate) fn read_u32(&self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(&mut b)?;
        Ok(u32::from_ne_bytes(b))
    }
}

/// The user space buffer and length of a `getsockopt()` call.
///
/// # Invariants
///
/// `val` and `len` are the user space pointers the socket layer passed.
pub(crate) struct OptOut {
    val: *mut u8,
    len: *mut c_int,
}

impl OptOut {
    /// The room the caller offers (`*optlen`); `EINVAL` if negative.
    pub(crate) fn len(&self) -> Result<usize> {
        let mut n: c_int = 0;
        // SAFETY: `len` is a user pointer (type invariant); `get_user`
        // checks it.
        to_result(unsafe { bindings::mrc_get_user_int(&mut n, self.len) })?;
        usize::try_from(n).map_err(|_| EINVAL)
    }

    /// Reads the first `buf.len()` bytes the caller put in the buffer (for
    /// options that take a request and return an answer in the same place).
    /// The caller checks [`OptOut::len`] first.
    pub(crate) fn read(&self, buf: &mut [u8]) -> Result {
        // SAFETY: `buf` is writable for its length; `val` is a user pointer
        // (type invariant) that `copy_from_user` checks.
        to_result(unsafe {
            bindings::mrc_copy_from_user(buf.as_mut_ptr().cast(), self.val.cast(), buf.len())
        })
    }

    /// Writes `data` to the buffer and its length to `*optlen`. The caller
    /// checks that `data` fits in [`OptOut::len`].
    pub(crate) fn write(&self, data: &[u8]) -> Result {
        let n = c_int::try_from(data.len()).map_err(|_| EINVAL)?;
        // SAFETY: `data` is readable for its length; `val` and `len` are
        // user pointers (type invariant) that `copy_to_user` and `put_user`
        // check.
        unsafe {
            to_result(bindings::mrc_copy_to_user(
                self.val.cast(),
                data.as_ptr().cast(),
                data.len(),
            ))?;
            to_result(bindings::mrc_put_user_int(self.len, n))
        }
    }
}

/// Socket option names and limits at level `SOL_MRC` (uapi header).
pub(crate) mod sockopt {
    use super::bindings;
    /// The option level of MRC.
    pub(crate) const SOL_MRC: i32 = bindings::SOL_MRC as i32;
    /// Busy heartbeat in milliseconds (`u32`).
    pub(crate) const HEARTBEAT_MS: i32 = bindings::MRC_HEARTBEAT_MS as i32;
    /// Congestion controller name.
    pub(crate) const CC: i32 = bindings::MRC_CC as i32;
    /// Add a path (`struct mrc_path_req`).
    pub(crate) const PATH_ADD: i32 = bindings::MRC_PATH_ADD as i32;
    /// Remove a path (`u32` path id).
    pub(crate) const PATH_DEL: i32 = bindings::MRC_PATH_DEL as i32;
    /// Largest `MRC_HEARTBEAT_MS`.
    pub(crate) const HEARTBEAT_MS_MAX: u32 = bindings::MRC_HEARTBEAT_MS_MAX;
    /// Room for a congestion controller name, NUL included.
    pub(crate) const CC_NAME_MAX: usize = bindings::MRC_CC_NAME_MAX as usize;
}

/// A parsed `struct mrc_path_req`.
pub(crate) struct PathReq {
    /// Local address; unspecified means the route's source.
    pub(crate) local: IpAddr,
    /// The peer's address.
    pub(crate) remote: IpAddr,
    /// UDP source port; 0 means pick one.
    pub(crate) sport: u16,
    /// The peer's UDP port; 0 means the MRC UDP port.
    pub(crate) dport: u16,
    /// `MRC_PATH_F_BACKUP`.
    pub(crate) backup: bool,
}

impl PathReq {
    /// Size of `struct mrc_path_req`.
    pub(crate) const SIZE: usize = size_of::<bindings::mrc_path_req>();

    /// Parses the request; `EINVAL` for an unknown family or flag, a
    /// non-zero path id or reserved field, or an unspecified remote address.
    pub(crate) fn parse(b: &[u8; Self::SIZE]) -> Result<Self> {
        // SAFETY: `mrc_path_req` is plain integers and byte arrays, valid
        // for any bytes, and `b` has its size; the read is unaligned.
        let r = unsafe { ptr::read_unaligned(b.as_ptr().cast::<bindings::mrc_path_req>()) };
        let flags = u32::from(r.mpr_flags);
        if r.mpr_path_id != 0 || r.mpr_reserved != 0 || flags & !bindings::MRC_PATH_F_BACKUP != 0 {
            return Err(EINVAL);
        }
        let ip = |a: [u8; 16]| match u32::from(r.mpr_family) {
            bindings::AF_INET => {
                let mut v4 = [0u8; 4];
                v4.copy_from_slice(a.get(..4).unwrap_or(&[0; 4]));
                Ok(IpAddr::V4(v4))
            }
            bindings::AF_INET6 => Ok(IpAddr::V6(a)),
            _ => Err(EINVAL),
        };
        let req = PathReq {
            local: ip(r.mpr_local)?,
            remote: ip(r.mpr_remote)?,
            sport: r.mpr_sport,
            dport: r.mpr_dport,
            backup: flags & bindings::MRC_PATH_F_BACKUP != 0,
        };
        if req.remote.is_unspecified() {
            return Err(EINVAL);
        }
        Ok(req)
    }

    /// Puts `path_id` into the request bytes `b` (the answer of a
    /// `getsockopt(MRC_PATH_ADD)`).
    pub(crate) fn set_path_id(b: &mut [u8; Self::SIZE], path_id: u32) {
        if let Some(d) = b.get_mut(..4) {
            d.copy_from_slice(&path_id.to_ne_bytes());
        }
    }
}

// `mpr_path_id` is the first field.
const _: () = assert!(core::mem::offset_of!(bindings::mrc_path_req, mpr_path_id) == 0);

/// `MSG_*` flags of `sendmsg`/`recvmsg`.
pub(crate) mod msg_flags {
    use super::bindings;
    /// Do not block.
    pub(crate) const DONTWAIT: i32 = bindings::MSG_DONTWAIT as i32;
    /// Look at the next message without consuming it.
    pub(crate) const PEEK: i32 = bindings::MSG_PEEK as i32;
    /// The message was longer than the buffer; return its real length.
    pub(crate) const TRUNC: i32 = bindings::MSG_TRUNC as i32;
    /// End of record: a whole message was returned.
    pub(crate) const EOR: i32 = bindings::MSG_EOR as i32;
    /// Do not raise `SIGPIPE`.
    pub(crate) const NOSIGNAL: i32 = bindings::MSG_NOSIGNAL as i32;
    /// Out-of-band data, which MRC does not have.
    pub(crate) const OOB: i32 = bindings::MSG_OOB as i32;
    /// Wait for the whole request (streams).
    pub(crate) const WAITALL: i32 = bindings::MSG_WAITALL as i32;
}

/// `poll` event bits.
pub(crate) mod poll_bits {
    use super::bindings;
    /// Readable.
    pub(crate) const IN: u32 = bindings::MRC_EPOLLIN | bindings::MRC_EPOLLRDNORM;
    /// Writable.
    pub(crate) const OUT: u32 = bindings::MRC_EPOLLOUT | bindings::MRC_EPOLLWRNORM;
    /// Error pending.
    pub(crate) const ERR: u32 = bindings::MRC_EPOLLERR;
    /// Both directions closed.
    pub(crate) const HUP: u32 = bindings::MRC_EPOLLHUP;
    /// The peer closed its direction.
    pub(crate) const RDHUP: u32 = bindings::MRC_EPOLLRDHUP;
}

/// Raises `SIGPIPE` on the current task (a write after shutdown).
pub(crate) fn send_sigpipe() {
    // SAFETY: process context.
    unsafe { bindings::mrc_send_sigpipe() };
}

/// A message being sent or received (`struct msghdr`).
pub(crate) struct Msg(NonNull<bindings::msghdr>);

impl Msg {
    /// `msg_flags` as given to `sendmsg`.
    pub(crate) fn flags(&self) -> i32 {
        // SAFETY: valid for the call.
        unsafe { (*self.0.as_ptr()).msg_flags as i32 }
    }

    /// Adds to `msg_flags` (returned by `recvmsg`).
    pub(crate) fn add_flags(&mut self, flags: i32) {
        // SAFETY: valid for the call.
        unsafe { (*self.0.as_ptr()).msg_flags |= flags as c_uint };
    }

    /// Copies the next `len` bytes of the message into the page fragments
    /// `sk` writes through: the bytes of one MRC message. May sleep.
    ///
    /// The pages and the list of pieces are charged to the sending task's
    /// memory cgroup (`__GFP_ACCOUNT`), as a TCP socket's send queue is.
    pub(crate) fn copy_in(&mut self, sk: &Sock, len: usize) -> Result<MsgBuf> {
        let len = u32::try_from(len).map_err(|_| EINVAL)?;
        let pieces = len as usize / kernel::page::PAGE_SIZE + 2;
        let mut buf = MsgBuf {
            // A failure is `send`'s ENOMEM, not a reason for the vmalloc
            // fallback of a large message's list to dump the stack.
            pieces: KVVec::with_capacity(pieces, GFP_KERNEL_ACCOUNT | __GFP_NOWARN)?,
            len: 0,
        };
        while buf.len < len {
            let mut page = ptr::null_mut();
            let mut off = 0;
            // SAFETY: `sk` and the message are valid for the call, made in
            // process context; the out-pointers are valid for writes.
            let n = unsafe {
                bindings::mrc_msg_copy_piece(
                    sk.as_ptr(),
                    self.0.as_ptr(),
                    len - buf.len,
                    &mut page,
                    &mut off,
                )
            };
            let n = u32::try_from(n).map_err(|_| Error::from_errno(n))?;
            let Some(page) = NonNull::new(page).filter(|_| n > 0) else {
                return Err(EFAULT);
            };
            let piece = Piece {
                page,
                off,
                len: n,
                at: buf.len,
            };
            if buf.pieces.push(piece, GFP_KERNEL_ACCOUNT).is_err() {
                // SAFETY: the copy took a reference for the piece, which
                // `buf` could not keep.
                unsafe { bindings::mrc_put_page(page.as_ptr()) };
                return Err(ENOMEM);
            }
            buf.len += n;
        }
        Ok(buf)
    }

    /// Copies `len` bytes of `skb` from `offset` to the user; `EFAULT` if
    /// the packet holds fewer.
    pub(crate) fn copy_skb(&mut self, skb: &SkBuff, offset: u32, len: u32) -> Result {
        // The helper takes `int`s, and reads before or beyond the packet's
        // data for a negative offset or length.
        let end = offset.checked_add(len).ok_or(EFAULT)?;
        if end > skb.len() || c_int::try_from(end).is_err() {
            return Err(EFAULT);
        }
        // SAFETY: `skb` is valid and holds `offset + len` bytes (checked
        // above), both of which fit in `c_int`; the message is valid for the
        // call and the copy checks the user's buffers.
        to_result(unsafe {
            bindings::mrc_skb_copy_datagram_msg(
                skb.0.as_ptr(),
                offset as c_int,
                self.0.as_ptr(),
                len as c_int,
            )
        })
    }

    /// Whether the caller asked for the source of a received message.
    pub(crate) fn wants_name(&self) -> bool {
        // SAFETY: `self` wraps the `msghdr` of the `recvmsg` call under way,
        // which the socket layer keeps valid until it returns; only the
        // pointer is read, never followed.
        unsafe { !(*self.0.as_ptr()).msg_name.is_null() }
    }

    /// Reports `addr` as the source of a received message, if asked for.
    pub(crate) fn set_name(&mut self, addr: &MrcAddr) {
        // An MRC address fits in the `sockaddr_storage` `msg_name` points to.
        const _: () = assert!(SOCKADDR_MRC_LEN <= SOCKADDR_STORAGE_LEN);
        let m = self.0.as_ptr();
        // SAFETY: for `recvmsg` the socket layer points `msg_name` at a
        // `sockaddr_storage`, or leaves it null; the address fits in it
        // (checked above at compile time).
        unsafe {
            if (*m).msg_name.is_null() {
                return;
            }
            let a = addr.to_bytes();
            ptr::copy_nonoverlapping(a.as_ptr(), (*m).msg_name.cast::<u8>(), a.len());
            (*m).msg_namelen = a.len() as c_int;
        }
    }
}

/// Registration of the protocol (`struct proto`, its slab of sockets) and of
/// the module's workqueue.
pub(crate) struct ProtoRegistration;

impl ProtoRegistration {
    /// Registers the protocol named `name`.
    pub(crate) fn register(module: &'static ThisModule, name: &CStr) -> Result<Self> {
        // SAFETY: module init, before any socket exists.
        unsafe { bindings::mrc_rmem_init() };
        // SAFETY: may sleep; module init.
        let wq = unsafe { bindings::mrc_alloc_workqueue() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        WORKQUEUE.store(wq, core::sync::atomic::Ordering::Release);
        // SAFETY: module init runs once and `PROTO` is not registered yet.
        let proto = unsafe { &mut *PROTO.as_ptr() };
        for (dst, src) in proto.name.iter_mut().zip(name.as_bytes()) {
            *dst = *src as _;
        }
        proto.owner = module.as_ptr().cast();
        proto.obj_size = size_of::<SockWith>() as c_uint;
        proto.release_cb = Some(release_cb);
        // SAFETY: `PROTO` is set up and lives forever.
        if let Err(e) = to_result(unsafe { bindings::proto_register(PROTO.as_ptr(), 1) }) {
            WORKQUEUE.store(ptr::null_mut(), core::sync::atomic::Ordering::Release);
            // SAFETY: nothing was queued yet.
            unsafe { bindings::destroy_workqueue(wq) };
            return Err(e);
        }
        Ok(Self)
    }
}

impl Drop for ProtoRegistration {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; no socket is left (the module
        // cannot unload while one holds its reference).
        unsafe { bindings::proto_unregister(PROTO.as_ptr()) };
        let wq = WORKQUEUE.swap(ptr::null_mut(), core::sync::atomic::Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: drains work still running its last `sock_put`.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// Registration of the socket family: from here on `socket()` can create
/// sockets of the protocol.
pub(crate) struct FamilyRegistration;

impl FamilyRegistration {
    /// Registers `family`; [`ProtoRegistration`] must be registered.
    pub(crate) fn register(module: &'static ThisModule, family: i32) -> Result<Self> {
        let owner = module.as_ptr().cast();
        // SAFETY: module init runs once; neither table is registered yet.
        unsafe {
            let ops = &mut *PROTO_OPS.as_ptr();
            ops.family = family;
            ops.owner = owner;
            ops.release = Some(op_release);
            ops.bind = Some(op_bind);
            ops.connect = Some(op_connect);
            ops.socketpair = Some(bindings::sock_no_socketpair);
            ops.accept = Some(op_accept);
            ops.getname = Some(op_getname);
            ops.poll = Some(op_poll);
            ops.ioctl = Some(op_ioctl);
            ops.listen = Some(op_listen);
            ops.shutdown = Some(op_shutdown);
            ops.sendmsg = Some(op_sendmsg);
            ops.recvmsg = Some(op_recvmsg);
            ops.setsockopt = Some(op_setsockopt);
            ops.getsockopt = Some(op_getsockopt);
            ops.mmap = Some(bindings::sock_no_mmap);

            let fam = &mut *FAMILY_OPS.as_ptr();
            fam.family = family;
            fam.create = Some(family_create);
            fam.owner = owner;
        }
        // SAFETY: `FAMILY_OPS` is set up and lives forever.
        to_result(unsafe { bindings::sock_register(FAMILY_OPS.as_ptr()) })?;
        Ok(Self)
    }
}

impl Drop for FamilyRegistration {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; `sock_unregister` waits for
        // concurrent `create` calls to finish.
        unsafe { bindings::sock_unregister((*FAMILY_OPS.as_ptr()).family) };
    }
}

// --- Generic netlink --------------------------------------------------------------

/// Numbers of the generic netlink family, generated from `netlink/mrc.yaml`.
pub(crate) mod nl {
    pub(crate) use super::bindings::{
        MRC_A_CONN_CC, MRC_A_CONN_COOKIE, MRC_A_CONN_COUNTERS, MRC_A_CONN_COUNTERS_ACKS_LIMITED,
        MRC_A_CONN_COUNTERS_ACKS_RECEIVED, MRC_A_CONN_COUNTERS_ACKS_SENT,
        MRC_A_CONN_COUNTERS_AMP_LIMITED, MRC_A_CONN_COUNTERS_CHALLENGE_ACKS,
        MRC_A_CONN_COUNTERS_DATA_RECEIVED, MRC_A_CONN_COUNTERS_DATA_SENT,
        MRC_A_CONN_COUNTERS_DUPLICATES, MRC_A_CONN_COUNTERS_ENDPOINTS_REFUSED,
        MRC_A_CONN_COUNTERS_HEDGES, MRC_A_CONN_COUNTERS_PATH_LOSSES,
        MRC_A_CONN_COUNTERS_RACK_LOSSES, MRC_A_CONN_COUNTERS_RCV_DROPPED,
        MRC_A_CONN_COUNTERS_RETRANSMITS, MRC_A_CONN_COUNTERS_RTOS, MRC_A_CONN_COUNTERS_RTO_LOSSES,
        MRC_A_CONN_COUNTERS_SPURIOUS_HEDGES, MRC_A_CONN_COUNTERS_SPURIOUS_LOSSES,
        MRC_A_CONN_COUNTERS_WINDOW_PROBES, MRC_A_CONN_ERROR, MRC_A_CONN_GENERATION,
        MRC_A_CONN_LOCAL_ADDR, MRC_A_CONN_LOCAL_PORT, MRC_A_CONN_PATH, MRC_A_CONN_REMOTE_ADDR,
        MRC_A_CONN_REMOTE_PORT, MRC_A_CONN_RX_BYTES, MRC_A_CONN_SEND_TIME, MRC_A_CONN_SESSION_ID,
        MRC_A_CONN_STATE, MRC_A_CONN_TIME_IN_STATE_NS, MRC_A_CONN_TX_BYTES, MRC_A_DROPS_BAD_BODY,
        MRC_A_DROPS_BAD_CHECKSUM, MRC_A_DROPS_BAD_FLAGS, MRC_A_DROPS_BAD_HANDSHAKE,
        MRC_A_DROPS_BAD_MAGIC, MRC_A_DROPS_BAD_SACK, MRC_A_DROPS_BAD_TOKEN,
        MRC_A_DROPS_BAD_VERSION, MRC_A_DROPS_LENGTH_MISMATCH, MRC_A_DROPS_NO_MEMORY,
        MRC_A_DROPS_NO_SESSION, MRC_A_DROPS_RCVBUF, MRC_A_DROPS_RMEM_MAX, MRC_A_DROPS_SHORT,
        MRC_A_DROPS_SOCK_BACKLOG, MRC_A_DROPS_UDP_CHECKSUM, MRC_A_DROPS_UNKNOWN_TYPE,
        MRC_A_DROPS_WRONG_SOURCE, MRC_A_ENDPOINT_ADDR, MRC_A_ENDPOINT_FLAGS,
        MRC_A_ENDPOINT_GENERATION, MRC_A_ENDPOINT_IFINDEX, MRC_A_EVENT_COOKIE, MRC_A_EVENT_ERROR,
        MRC_A_EVENT_IFINDEX, MRC_A_EVENT_LOCAL_ADDR, MRC_A_EVENT_LOCAL_PORT, MRC_A_EVENT_NEW_STATE,
        MRC_A_EVENT_OLD_STATE, MRC_A_EVENT_PATH_ID, MRC_A_EVENT_PATH_REMOTE_ADDR,
        MRC_A_EVENT_PATH_SPORT, MRC_A_EVENT_PLANE, MRC_A_EVENT_REASON, MRC_A_EVENT_REMOTE_ADDR,
        MRC_A_EVENT_REMOTE_PORT, MRC_A_EVENT_SESSION_ID, MRC_A_EVENT_TIMESTAMP_NS, MRC_A_PARAMS_CC,
        MRC_A_PARAMS_DATA_PER_IDLE_PROBE, MRC_A_PARAMS_EV_PER_PLANE, MRC_A_PARAMS_HEARTBEAT_MS,
        MRC_A_PARAMS_MISS_THRESHOLD, MRC_A_PARAMS_SYN_RETRY_PCT, MRC_A_PARAMS_USER_TIMEOUT_MS,
        MRC_A_PATH_BACKUP, MRC_A_PATH_BYTES_ACKED, MRC_A_PATH_BYTES_LOST, MRC_A_PATH_BYTES_RETRANS,
        MRC_A_PATH_BYTES_SENT, MRC_A_PATH_CWND, MRC_A_PATH_EV, MRC_A_PATH_ID, MRC_A_PATH_IN_FLIGHT,
        MRC_A_PATH_LOCAL_ADDR, MRC_A_PATH_LOCAL_PORT, MRC_A_PATH_MIN_RTT_NS,
        MRC_A_PATH_PACKETS_ACKED, MRC_A_PATH_PACKETS_LOST, MRC_A_PATH_PACKETS_RETRANS,
        MRC_A_PATH_PACKETS_SENT, MRC_A_PATH_PLANE, MRC_A_PATH_PROBES_MISSED,
        MRC_A_PATH_PROBES_SENT, MRC_A_PATH_REMOTE_ADDR, MRC_A_PATH_REMOTE_PORT,
        MRC_A_PATH_RTTVAR_NS, MRC_A_PATH_SRTT_NS, MRC_A_PATH_STATE, MRC_A_PATH_TIME_IN_STATE_NS,
        MRC_A_SEND_TIME_APP, MRC_A_SEND_TIME_CWND, MRC_A_SEND_TIME_NO_PATH, MRC_A_SEND_TIME_PACING,
        MRC_A_SEND_TIME_RING, MRC_A_SEND_TIME_RWND, MRC_A_SEND_TIME_SCHED, MRC_A_SEND_TIME_SENDING,
        MRC_A_STATS_CONNS, MRC_A_STATS_CONNS_FAILED, MRC_A_STATS_CONNS_OPENED, MRC_A_STATS_DROPS,
        MRC_A_STATS_ECN_CE_PACKETS, MRC_A_STATS_ECN_ECHOES, MRC_A_STATS_RETRANS_PACKETS,
        MRC_A_STATS_RX_BYTES, MRC_A_STATS_RX_PACKETS, MRC_A_STATS_TX_AMP_LIMITED,
        MRC_A_STATS_TX_BYTES, MRC_A_STATS_TX_PACKETS, MRC_A_STATS_TX_RETRY, MRC_A_STATS_TX_RST,
        MRC_A_STATS_TX_RST_LIMITED, MRC_CMD_CONN_CLOSED, MRC_CMD_CONN_ESTABLISHED,
        MRC_CMD_CONN_GET, MRC_CMD_ENDPOINT_ADDED, MRC_CMD_ENDPOINT_GET, MRC_CMD_ENDPOINT_REMOVED,
        MRC_CMD_PARAM_GET, MRC_CMD_PATH_ADDED, MRC_CMD_PATH_REMOVED, MRC_CMD_PATH_STATE_CHANGE,
        MRC_CMD_STATS_GET,
    };

    /// Path states.
    pub(crate) const MRC_PATH_STATE_ACTIVE: u32 =
        super::bindings::mrc_path_state_MRC_PATH_STATE_ACTIVE;
    pub(crate) const MRC_PATH_STATE_SUSPECT: u32 =
        super::bindings::mrc_path_state_MRC_PATH_STATE_SUSPECT;
    pub(crate) const MRC_PATH_STATE_FAILED: u32 =
        super::bindings::mrc_path_state_MRC_PATH_STATE_FAILED;
    /// Reasons of path state changes.
    pub(crate) const MRC_PATH_STATE_REASON_UNSPEC: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_UNSPEC;
    pub(crate) const MRC_PATH_STATE_REASON_PROBE_ANSWERED: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_PROBE_ANSWERED;
    pub(crate) const MRC_PATH_STATE_REASON_LOSS_BURST: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_LOSS_BURST;
    pub(crate) const MRC_PATH_STATE_REASON_PROBE_TIMEOUT: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_PROBE_TIMEOUT;
    pub(crate) const MRC_PATH_STATE_REASON_LOCAL_DOWN: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_LOCAL_DOWN;
    pub(crate) const MRC_PATH_STATE_REASON_UNVALIDATED: u32 =
        super::bindings::mrc_path_state_reason_MRC_PATH_STATE_REASON_UNVALIDATED;
    /// Connection states.
    pub(crate) const MRC_CONN_STATE_IDLE: u32 = super::bindings::mrc_conn_state_MRC_CONN_STATE_IDLE;
    pub(crate) const MRC_CONN_STATE_SYN_SENT: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_SYN_SENT;
    pub(crate) const MRC_CONN_STATE_SYN_RECEIVED: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_SYN_RECEIVED;
    pub(crate) const MRC_CONN_STATE_ESTABLISHED: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_ESTABLISHED;
    pub(crate) const MRC_CONN_STATE_FIN_WAIT: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_FIN_WAIT;
    pub(crate) const MRC_CONN_STATE_CLOSE_WAIT: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_CLOSE_WAIT;
    pub(crate) const MRC_CONN_STATE_CLOSING: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_CLOSING;
    pub(crate) const MRC_CONN_STATE_TIME_WAIT: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_TIME_WAIT;
    pub(crate) const MRC_CONN_STATE_CLOSED: u32 =
        super::bindings::mrc_conn_state_MRC_CONN_STATE_CLOSED;

    /// Endpoint flag: paths over it carry data only when no other path can.
    pub(crate) const MRC_ENDPOINT_FLAGS_BACKUP: u32 =
        super::bindings::mrc_endpoint_flags_MRC_ENDPOINT_FLAGS_BACKUP;
}

/// Length of a netlink attribute header.
const NLA_HDRLEN: usize = bindings::MRC_NLA_HDRLEN as usize;

static GENL_FAMILY: StaticCell<bindings::genl_family> = StaticCell::zeroed();
static GENL_MCGRPS: StaticCell<[bindings::genl_multicast_group; 1]> = StaticCell::zeroed();

/// A generic netlink request being handled (`struct genl_info`).
///
/// # Invariants
///
/// `info` is the `genl_info` of a request whose `doit` handler is running;
/// its `attrs` is null or holds `maxattr + 1` entries, each null or an
/// attribute validated by the command's policy. `net_admin` says whether
/// the sender had `CAP_NET_ADMIN` in the namespace's user namespace.
pub(crate) struct GenlInfo {
    info: NonNull<bindings::genl_info>,
    net_admin: bool,
    maxattr: u32,
}

/// The largest attribute id of the policy that the `doit` of command `cmd`
/// parses requests with: the generic netlink core hands that `doit` an
/// attribute table (`genl_info::attrs`) of this many entries plus one, or
/// none when it is 0 (no policy).
fn doit_maxattr(cmd: u8) -> u32 {
    // SAFETY: `mrc_nl_ops` is the generated ops table, constant and never
    // written.
    let ops = unsafe { &*ptr::addr_of!(bindings::mrc_nl_ops) };
    ops.iter()
        .find(|op| op.cmd == cmd && u32::from(op.flags) & bindings::MRC_GENL_CMD_CAP_DO != 0)
        .map_or(0, |op| op.maxattr)
}

impl GenlInfo {
    /// Wraps the `genl_info` of a running `doit`.
    ///
    /// # Safety
    ///
    /// `skb` and `info` must be the message and the `genl_info` of a request
    /// whose `doit` handler of our family is running, and outlive the
    /// returned object.
    unsafe fn from_raw(skb: *mut bindings::sk_buff, info: *mut bindings::genl_info) -> Self {
        // SAFETY: the caller passes a valid `info` of a running request, whose
        // `genlhdr` is the header the core dispatched on, and its message.
        let (cmd, net_admin) =
            unsafe { ((*(*info).genlhdr).cmd, bindings::mrc_netlink_net_admin(skb)) };
        Self {
            // SAFETY: the caller passes a valid, hence non-null, `info`.
            info: unsafe { NonNull::new_unchecked(info) },
            net_admin,
            // The core parsed the request with the policy of the `doit` of
            // `cmd` in our ops table (`genl_get_cmd_split`), into a table of
            // that op's `maxattr + 1` entries (type invariant).
            maxattr: doit_maxattr(cmd),
        }
    }

    /// Whether the requester may see what identifies a connection on the
    /// wire (`CAP_NET_ADMIN` over the namespace, as `GENL_UNS_ADMIN_PERM`).
    pub(crate) fn net_admin(&self) -> bool {
        self.net_admin
    }

    /// The MRC state of the requester's network namespace.
    pub(crate) fn mrc_net(&self) -> &crate::mrc_net::MrcNet {
        // SAFETY: the family is registered only while the pernet subsystem
        // is, and the requester's namespace is alive during the request.
        unsafe { pernet_state(bindings::mrc_genl_info_net(self.info.as_ptr())) }
    }

    /// Raw attribute `id` of the request, if present: `None` too for an id
    /// beyond the command's policy, which the request cannot carry.
    fn raw_attr(&self, id: u32) -> Option<NonNull<bindings::nlattr>> {
        if id > self.maxattr {
            return None;
        }
        // SAFETY: `attrs` is null or has `maxattr + 1` entries, each null or
        // a validated attribute (type invariant), and `id <= maxattr`.
        unsafe {
            let attrs = (*self.info.as_ptr()).attrs;
            if attrs.is_null() {
                return None;
            }
            NonNull::new(*attrs.add(id as usize))
        }
    }

    /// Payload of attribute `id` of the request, if present. The policy has
    /// checked its type and length.
    pub(crate) fn attr(&self, id: u32) -> Option<&[u8]> {
        let nla = self.raw_attr(id)?.as_ptr();
        // SAFETY: a validated attribute holds `nla_len` bytes, header
        // included, inside the request, which outlives `self`.
        unsafe {
            let len = usize::from((*nla).nla_len).checked_sub(NLA_HDRLEN)?;
            Some(core::slice::from_raw_parts(
                nla.cast::<u8>().add(NLA_HDRLEN),
                len,
            ))
        }
    }

    /// `u32` attribute `id` of the request, if present.
    pub(crate) fn attr_u32(&self, id: u32) -> Option<u32> {
        Some(u32::from_ne_bytes(
            self.attr(id)?.get(..4)?.try_into().ok()?,
        ))
    }

    /// Returns the value of `uint` attribute `id` (4 or 8 bytes).
    pub(crate) fn attr_uint(&self, id: u32) -> Option<u64> {
        let a = self.attr(id)?;
        match a.len() {
            4 => Some(u64::from(u32::from_ne_bytes(a.try_into().ok()?))),
            8 => Some(u64::from_ne_bytes(a.try_into().ok()?)),
            _ => None,
        }
    }

    /// Reports attribute `id` as the cause of an error, with `msg`.
    pub(crate) fn set_bad_attr(&self, id: u32, msg: &'static CStr) {
        self.set_err_msg(msg);
        let Some(nla) = self.raw_attr(id) else {
            return;
        };
        // SAFETY: `extack` of a running request is valid or null.
        unsafe {
            let extack = (*self.info.as_ptr()).extack;
            if !extack.is_null() {
                (*extack).bad_attr = nla.as_ptr();
            }
        }
    }

    /// Sends an event to the `events` group of the requester's namespace.
    pub(crate) fn notify(&self, cmd: u32, fill: impl FnOnce(&mut GenlMsg) -> Result) {
        // SAFETY: `info` is valid (type invariant), and the requester's
        // namespace is alive during the request.
        unsafe { notify(bindings::mrc_genl_info_net(self.info.as_ptr()), cmd, fill) };
    }

    /// Sets the extended-ack message returned with an error.
    pub(crate) fn set_err_msg(&self, msg: &'static CStr) {
        // SAFETY: `extack` of a running request is valid or null.
        unsafe {
            let extack = (*self.info.as_ptr()).extack;
            if !extack.is_null() {
                (*extack)._msg = msg.as_char_ptr().cast();
            }
        }
    }

    /// Sends a reply with command `cmd` whose attributes `fill` writes.
    pub(crate) fn reply(&self, cmd: u32, fill: impl FnOnce(&mut GenlMsg) -> Result) -> Result {
        // SAFETY: allocating in a process-context handler.
        let skb = NonNull::new(unsafe { bindings::mrc_genlmsg_new() }).ok_or(ENOMEM)?;
        let mut msg = GenlMsg(skb);
        let info = self.info.as_ptr();
        // SAFETY: `skb` is a fresh message; `info` and the family are valid.
        let hdr = unsafe {
            bindings::genlmsg_put(
                skb.as_ptr(),
                (*info).snd_portid,
                (*info).snd_seq,
                GENL_FAMILY.as_ptr(),
                0,
                cmd as u8,
            )
        };
        let filled = if hdr.is_null() {
            Err(err::message_too_long())
        } else {
            fill(&mut msg)
        };
        if let Err(e) = filled {
            // SAFETY: the message was never handed out.
            unsafe { bindings::mrc_nlmsg_free(skb.as_ptr()) };
            return Err(e);
        }
        // SAFETY: `hdr` opened the message; `genlmsg_reply` consumes it.
        to_result(unsafe {
            bindings::mrc_genlmsg_end(skb.as_ptr(), hdr);
            bindings::mrc_genlmsg_reply(skb.as_ptr(), info)
        })
    }
}

/// A generic netlink message being filled; see [`GenlInfo::reply`].
///
/// # Invariants
///
/// `0` is a message skb owned by the running reply.
pub(crate) struct GenlMsg(NonNull<bindings::sk_buff>);

impl GenlMsg {
    /// Adds a `uint` attribute (4 or 8 bytes, as the value needs).
    pub(crate) fn put_uint(&mut self, attr: u32, value: u64) -> Result {
        // SAFETY: the message is valid (type invariant).
        to_result(unsafe { bindings::mrc_nla_put_uint(self.0.as_ptr(), attr as c_int, value) })
    }

    /// Adds an attribute of `data` as it is.
    fn put(&mut self, attr: u32, data: &[u8]) -> Result {
        let len = c_int::try_from(data.len()).map_err(|_| err::message_too_long())?;
        // SAFETY: the message is valid (type invariant); `data` is readable.
        to_result(unsafe {
            bindings::nla_put(self.0.as_ptr(), attr as c_int, len, data.as_ptr().cast())
        })
    }

    /// Adds a binary attribute.
    pub(crate) fn put_bytes(&mut self, attr: u32, data: &[u8]) -> Result {
        self.put(attr, data)
    }

    /// Adds a `u32` attribute.
    pub(crate) fn put_u32(&mut self, attr: u32, value: u32) -> Result {
        self.put(attr, &value.to_ne_bytes())
    }

    /// Adds a NUL-terminated string attribute from a short `str` (at most
    /// 31 bytes are kept).
    pub(crate) fn put_string(&mut self, attr: u32, value: &str) -> Result {
        let mut buf = [0u8; 32];
        let n = value.len().min(buf.len() - 1);
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), value.as_bytes().get(..n)) {
            dst.copy_from_slice(src);
        }
        self.put(attr, buf.get(..=n).unwrap_or(&[0]))
    }

    /// Adds a `u16` attribute.
    pub(crate) fn put_u16(&mut self, attr: u32, value: u16) -> Result {
        self.put(attr, &value.to_ne_bytes())
    }

    /// Adds a flag attribute (no payload).
    pub(crate) fn put_flag(&mut self, attr: u32) -> Result {
        self.put(attr, &[])
    }

    /// Adds an IP address as 4 or 16 bytes.
    pub(crate) fn put_ip(&mut self, attr: u32, ip: &IpAddr) -> Result {
        match ip {
            IpAddr::V4(a) => self.put(attr, a),
            IpAddr::V6(a) => self.put(attr, a),
        }
    }

    /// Adds a NUL-terminated string attribute.
    pub(crate) fn put_str(&mut self, attr: u32, value: &CStr) -> Result {
        self.put(attr, value.as_bytes_with_nul())
    }

    /// Adds a nested attribute whose members `fill` writes.
    pub(crate) fn nest(&mut self, attr: u32, fill: impl FnOnce(&mut GenlMsg) -> Result) -> Result {
        // SAFETY: the message is valid (type invariant).
        let start = unsafe { bindings::mrc_nla_nest_start(self.0.as_ptr(), attr as c_int) };
        if start.is_null() {
            return Err(err::message_too_long());
        }
        if let Err(e) = fill(self) {
            // SAFETY: `start` was opened on this message above; cancelling
            // trims what the nest added.
            unsafe { bindings::mrc_nla_nest_cancel(self.0.as_ptr(), start) };
            return Err(e);
        }
        // SAFETY: `start` was opened on this message above.
        unsafe { bindings::mrc_nla_nest_end(self.0.as_ptr(), start) };
        Ok(())
    }
}

/// Multicasts an event to the `events` group of `net` if it has listeners.
/// An event that cannot be built (memory is short, or it does not fit) is
/// reported to them as lost, `ENOBUFS` on their sockets, as a receive
/// buffer overrun is.
///
/// # Safety
///
/// `net` must be a live namespace.
unsafe fn notify(net: *mut bindings::net, cmd: u32, fill: impl FnOnce(&mut GenlMsg) -> Result) {
    // SAFETY: `net` is alive (the function's contract); the family is
    // registered while any socket or netlink request exists.
    unsafe {
        if !bindings::mrc_genl_has_listeners(GENL_FAMILY.as_ptr(), net) {
            return;
        }
        let skb = bindings::mrc_genlmsg_new_atomic();
        let Some(nn) = NonNull::new(skb) else {
            bindings::mrc_genl_events_lost(GENL_FAMILY.as_ptr(), net);
            return;
        };
        let hdr = bindings::genlmsg_put(skb, 0, 0, GENL_FAMILY.as_ptr(), 0, cmd as u8);
        if hdr.is_null() {
            bindings::mrc_nlmsg_free(skb);
            bindings::mrc_genl_events_lost(GENL_FAMILY.as_ptr(), net);
            return;
        }
        let mut msg = GenlMsg(nn);
        if fill(&mut msg).is_err() {
            bindings::mrc_nlmsg_free(skb);
            bindings::mrc_genl_events_lost(GENL_FAMILY.as_ptr(), net);
            return;
        }
        bindings::mrc_genlmsg_end(skb, hdr);
        // Consumes `skb`; no listener left is not an error.
        let _ = bindings::mrc_genlmsg_multicast_netns(GENL_FAMILY.as_ptr(), net, skb);
    }
}

/// A generic netlink dump in progress (`struct netlink_callback`).
///
/// # Invariants
///
/// `cb` and `skb` are the callback and the message of a running `dumpit`.
pub(crate) struct GenlDump {
    cb: NonNull<bindings::netlink_callback>,
    skb: NonNull<bindings::sk_buff>,
}

impl GenlDump {
    /// Whether the dumping socket may see what identifies a connection on
    /// the wire; see [`GenlInfo::net_admin`].
    pub(crate) fn net_admin(&self) -> bool {
        // SAFETY: valid per the type invariant; `cb->skb` is the request.
        unsafe { bindings::mrc_genl_dump_net_admin(self.cb.as_ptr()) }
    }

    /// Word `slot` (0..6) of the state a dump keeps between its calls;
    /// every word starts at 0. A slot out of range reads as 0.
    pub(crate) fn cursor(&self, slot: usize) -> u64 {
        // SAFETY: valid per the type invariant.
        let args = unsafe { &(*self.cb.as_ptr()).__bindgen_anon_1.args };
        args.get(slot).map_or(0, |&v| v as u64)
    }

    /// Saves word `slot` (0..6) for the next call; out of range is ignored.
    pub(crate) fn set_cursor(&mut self, slot: usize, value: u64) {
        // SAFETY: valid per the type invariant; `args` is ours to use.
        let args = unsafe { &mut (*self.cb.as_ptr()).__bindgen_anon_1.args };
        if let Some(a) = args.get_mut(slot) {
            *a = value as _;
        }
    }

    /// Declares the generation of the dumped data; a change between calls
    /// marks the dump interrupted (`NLM_F_DUMP_INTR`) for userspace.
    pub(crate) fn set_generation(&mut self, generation: u32) {
        // SAFETY: valid per the type invariant.
        unsafe { (*self.cb.as_ptr()).seq = generation };
    }

    /// Adds one message with command `cmd`; `Ok(false)` if it does not fit
    /// in this part of the dump (the caller stops and resumes next call).
    /// Any other error from `fill` removes the message and is returned.
    pub(crate) fn entry(
        &mut self,
        cmd: u32,
        fill: impl FnOnce(&mut GenlMsg) -> Result,
    ) -> Result<bool> {
        let (cb, skb) = (self.cb.as_ptr(), self.skb.as_ptr());
        // SAFETY: valid per the type invariant.
        let hdr = unsafe {
            bindings::genlmsg_put(
                skb,
                bindings::mrc_genl_dump_portid(cb),
                (*(*cb).nlh).nlmsg_seq,
                GENL_FAMILY.as_ptr(),
                bindings::NLM_F_MULTI as c_int,
                cmd as u8,
            )
        };
        if hdr.is_null() {
            return Ok(false);
        }
        let mut msg = GenlMsg(self.skb);
        if let Err(e) = fill(&mut msg) {
            // SAFETY: `hdr` starts the message just added; removing it
            // leaves the earlier ones intact.
            unsafe { bindings::mrc_genlmsg_cancel(skb, hdr) };
            return if e == err::message_too_long() {
                Ok(false)
            } else {
                Err(e)
            };
        }
        // SAFETY: `hdr` was opened above on `skb`.
        unsafe {
            bindings::mrc_genl_dump_check_consistent(cb, hdr);
            bindings::mrc_genlmsg_end(skb, hdr);
        }
        Ok(true)
    }

    /// Whether this part of the dump holds no message yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> c_int {
        // SAFETY: valid per the type invariant.
        unsafe { (*self.skb.as_ptr()).len as c_int }
    }
}

/// Runs a `doit` handler, converting its result for C.
///
/// # Safety
///
/// `skb` and `info` must be the message and the `genl_info` of the running
/// request.
unsafe fn genl_do(
    skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
    handler: fn(&GenlInfo) -> Result,
) -> c_int {
    // SAFETY: the caller passes the message and `info` of the running
    // request of one of our `doit`s, which outlive this call.
    let info = unsafe { GenlInfo::from_raw(skb, info) };
    match handler(&info) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

macro_rules! genl_doit {
    ($name:ident, $handler:path) => {
        /// `doit` of the generated ops table (`netlink/mrc_nl_gen.c`).
        ///
        /// # Safety
        ///
        /// Called only by the generic netlink core for our family.
        #[no_mangle]
        unsafe extern "C" fn $name(
            skb: *mut bindings::sk_buff,
            info: *mut bindings::genl_info,
        ) -> c_int {
            // SAFETY: the genetlink core passes the request and its `info`.
            unsafe { genl_do(skb, info, $handler) }
        }
    };
}

use crate::mrc_net::netlink as handlers;

genl_doit!(mrc_nl_stats_get_doit, handlers::genl_stats_get);
genl_doit!(mrc_nl_conn_get_doit, handlers::genl_conn_get);
genl_doit!(mrc_nl_endpoint_add_doit, handlers::genl_endpoint_add);
genl_doit!(mrc_nl_endpoint_del_doit, handlers::genl_endpoint_del);
genl_doit!(mrc_nl_param_get_doit, handlers::genl_param_get);
genl_doit!(mrc_nl_param_set_doit, handlers::genl_param_set);

/// Runs a `dumpit` handler over the dumping socket's namespace, converting
/// its result for C.
///
/// # Safety
///
/// `skb` and `cb` must be the message and callback of a running dump.
unsafe fn genl_dump(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
    handler: fn(&crate::mrc_net::MrcNet, &mut GenlDump) -> Result,
) -> c_int {
    // SAFETY: the caller passes a running dump's message and callback.
    let mut dump = unsafe {
        GenlDump {
            cb: NonNull::new_unchecked(cb),
            skb: NonNull::new_unchecked(skb),
        }
    };
    // SAFETY: as in `GenlInfo::mrc_net`; the dumping socket's namespace is
    // alive during the call.
    let net = unsafe { pernet_state(bindings::mrc_genl_dump_net(cb)) };
    match handler(net, &mut dump) {
        // Returning the length asks for another call; 0 ends the dump.
        Ok(()) => dump.len(),
        Err(e) => e.to_errno(),
    }
}

macro_rules! genl_dumpit {
    ($name:ident, $handler:path) => {
        /// `dumpit` of the generated ops table (`netlink/mrc_nl_gen.c`).
        ///
        /// # Safety
        ///
        /// Called only by the generic netlink core for our family.
        #[no_mangle]
        unsafe extern "C" fn $name(
            skb: *mut bindings::sk_buff,
            cb: *mut bindings::netlink_callback,
        ) -> c_int {
            // SAFETY: the genetlink core passes a running dump's message and callback.
            unsafe { genl_dump(skb, cb, $handler) }
        }
    };
}

genl_dumpit!(mrc_nl_conn_get_dumpit, handlers::genl_conn_dump);
genl_dumpit!(mrc_nl_endpoint_get_dumpit, handlers::genl_endpoint_dump);

/// Registration of the generic netlink family `mrc`.
pub(crate) struct GenlRegistration;

impl GenlRegistration {
    /// Registers the family; its handlers read pernet state, so the pernet
    /// subsystem must be registered first and unregistered after.
    pub(crate) fn register(module: &'static ThisModule) -> Result<Self> {
        // SAFETY: module init runs once; neither static is registered yet.
        unsafe {
            let grps = &mut *GENL_MCGRPS.as_ptr();
            for (dst, src) in grps[0].name.iter_mut().zip(b"events") {
                *dst = *src as _;
            }
            // Events name session ids, which only the namespace's
            // administrator may read.
            grps[0].flags = bindings::MRC_GENL_MCAST_CAP_NET_ADMIN as u8;
            let fam = &mut *GENL_FAMILY.as_ptr();
            for (dst, src) in fam.name.iter_mut().zip(bindings::MRC_FAMILY_NAME.iter()) {
                *dst = *src as _;
            }
            fam.version = bindings::MRC_FAMILY_VERSION;
            fam.set_netnsok(1);
            fam.set_parallel_ops(1);
            fam.module = module.as_ptr().cast();
            fam.split_ops = bindings::mrc_nl_ops.as_ptr();
            fam.n_split_ops = bindings::mrc_nl_ops.len() as u8;
            fam.resv_start_op = (bindings::MRC_CMD_MAX + 1) as u8;
            fam.mcgrps = GENL_MCGRPS.as_ptr().cast();
            fam.n_mcgrps = 1;
        }
        // SAFETY: the family is set up and lives forever.
        to_result(unsafe { bindings::genl_register_family(GENL_FAMILY.as_ptr()) })?;
        Ok(Self)
    }
}

impl Drop for GenlRegistration {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; waits for running handlers.
        unsafe { bindings::genl_unregister_family(GENL_FAMILY.as_ptr()) };
    }
}
