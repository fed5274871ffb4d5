// SPDX-License-Identifier: GPL-2.0

//! The module's only door to C.
//!
//! This file holds the bindings that Kbuild generates from
//! `include/mrc_bindings.h` and small safe wrappers around them, in the style
//! of `rust/kernel/net/phy.rs`. The rest of the module calls these wrappers
//! and never names `bindings::` itself.

use core::{
    cell::UnsafeCell,
    ffi::c_void,
    marker::PhantomData,
    mem::{size_of, MaybeUninit},
    ptr::{self, NonNull},
};
use kernel::{
    c_str,
    error::{from_err_ptr, from_result, to_result, Error},
    ffi::{c_int, c_uint},
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
}

const IPPROTO_UDP: u8 = bindings::IPPROTO_UDP as u8;

/// `SOCK_SEQPACKET`, the only socket type MRC provides.
pub(crate) const SOCK_SEQPACKET: i32 = bindings::sock_type_SOCK_SEQPACKET as i32;

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

/// A C object at a fixed address that C reads after registration.
///
/// # Invariants
///
/// The contents are written only by module init before the object is
/// registered with C, and only read (by C) from then until unregistration.
struct StaticCell<T>(UnsafeCell<MaybeUninit<T>>);

// SAFETY: per the type invariant, writes happen in module init only, before
// C or any other thread can see the object.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// An owned `sk_buff`; dropping it frees the packet as a drop.
///
/// # Invariants
///
/// `0` is a valid `sk_buff` owned by this object.
pub(crate) struct SkBuff(NonNull<bindings::sk_buff>);

impl SkBuff {
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
        let skb = self.0.as_ptr();
        let udp = self.linear().get(..4)?;
        // SAFETY: valid per the type invariant. The network header of a
        // received datagram lies in the linear area before `data`; the length
        // checks below keep every read between it and `data`.
        let (nh, ip_len) = unsafe {
            let nh = bindings::mrc_skb_network_header(skb);
            let ip_len = ((*skb).data as usize).checked_sub(nh as usize)?;
            (nh, ip_len)
        };
        // SAFETY: `ip_len` bytes from `nh` are the IP header (see above).
        let ip = unsafe { core::slice::from_raw_parts(nh, ip_len) };
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
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the packet (type invariant).
        unsafe { bindings::mrc_kfree_skb(self.0.as_ptr()) };
    }
}

// --- UDP tunnel socket ------------------------------------------------------------

/// Receiver of the datagrams of a [`UdpTunnel`], called in softirq context.
pub(crate) trait EncapHandler: Sync {
    /// Takes one datagram whose `data` points at the UDP header.
    fn receive(&self, skb: SkBuff);
}

/// `encap_rcv` of the tunnel socket: hands each datagram to the handler.
///
/// # Safety
///
/// Called only by UDP receive, in softirq under the RCU read lock, with our
/// tunnel socket and an skb whose ownership passes to us.
unsafe extern "C" fn encap_rcv<H: EncapHandler>(
    sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> c_int {
    // SAFETY: the UDP layer hands us ownership of a valid skb.
    let skb = SkBuff(unsafe { NonNull::new_unchecked(skb) });
    // SAFETY: `sk` is our tunnel socket and we run under the RCU read lock
    // that UDP receive holds.
    let handler = unsafe { bindings::mrc_sk_user_data(sk) }.cast::<H>();
    if handler.is_null() {
        // The tunnel is being released; `skb` is freed as a drop.
        return 0;
    }
    // SAFETY: user data is cleared and an RCU grace period waited for before
    // the handler goes away (`UdpTunnel::drop`), so it is alive here.
    unsafe { (*handler).receive(skb) };
    0
}

/// A kernel UDP socket in encapsulation mode (`udp_tunnel`).
///
/// # Invariants
///
/// `0` is a socket created by `udp_sock_create*` and owned by this object.
pub(crate) struct UdpTunnel(NonNull<bindings::socket>);

// SAFETY: the socket is only released in `drop`; the kernel synchronises the
// rest of its use.
unsafe impl Send for UdpTunnel {}
// SAFETY: the `&self` methods (`send`, `detach`) only call kernel functions
// that may run concurrently on one socket from any context: route lookup and
// `udp_tunnel*_xmit_skb` take no socket lock, and the user data is an RCU
// pointer updated with `rcu_assign_sk_user_data`.
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
        // SAFETY: all-zero is a valid `udp_tunnel_sock_cfg` (no callbacks).
        let mut tcfg: bindings::udp_tunnel_sock_cfg =
            unsafe { MaybeUninit::zeroed().assume_init() };
        tcfg.sk_user_data = handler.cast_mut().cast::<c_void>();
        tcfg.encap_type = 1;
        tcfg.encap_rcv = Some(encap_rcv::<H>);
        // SAFETY: `sock` is a fresh UDP socket of `net`; `tcfg` is valid and
        // the caller keeps `handler` alive for the life of the tunnel.
        unsafe { bindings::setup_udp_tunnel_sock(net.as_ptr(), sock.as_ptr(), &mut tcfg) };
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
                        0,
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
                        0,
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

    /// Stops handing datagrams to the handler; once [`synchronize_net`] has
    /// returned, no receive callback uses it any more.
    pub(crate) fn detach(&self) {
        // SAFETY: `self.0` is live; clearing the user data makes `encap_rcv`
        // drop what it receives from now on.
        unsafe { bindings::mrc_sk_clear_user_data((*self.0.as_ptr()).sk) };
    }
}

/// Waits until every receive callback that started before has finished.
pub(crate) fn synchronize_net() {
    // SAFETY: may sleep; callers are in process context (pernet exit).
    unsafe { bindings::synchronize_net() };
}

impl Drop for UdpTunnel {
    fn drop(&mut self) {
        // SAFETY: we own the socket. `udp_tunnel_sock_release` clears the user
        // data and waits for an RCU grace period before it releases the
        // socket, so no `encap_rcv` can use the handler afterwards.
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
    /// The entry must be dropped in `T::stop`, before `T` itself.
    pub(crate) fn new<T: ProcShow>(net: &Net, name: &'static CStr) -> Result<Self> {
        // SAFETY: `net` is alive; the name is a static C string; the show
        // callback only reads pernet state that outlives the entry.
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

// --- Socket family and protocol -----------------------------------------------

/// Per-socket state of a protocol, stored right after `struct sock`.
pub(crate) trait SockState: Sized + Send {
    /// Checks `socket(family, sock_type, protocol)` and builds the state.
    fn create(sock_type: i32, protocol: i32) -> Result<Self>;
}

/// `struct sock` followed by the protocol's own state.
#[repr(C)]
struct SockWith<T> {
    sk: Opaque<bindings::sock>,
    state: T,
}

static PROTO: StaticCell<bindings::proto> = StaticCell::zeroed();
static PROTO_OPS: StaticCell<bindings::proto_ops> = StaticCell::zeroed();
static FAMILY_OPS: StaticCell<bindings::net_proto_family> = StaticCell::zeroed();

/// `sk_destruct` of MRC socks: drops the protocol state.
///
/// # Safety
///
/// Called only by `__sk_destruct`, once, when the last reference is gone.
unsafe extern "C" fn sk_destruct<T: SockState>(sk: *mut bindings::sock) {
    // CAST: every sock of `PROTO` is a `SockWith<T>` (`obj_size`).
    let this = sk.cast::<SockWith<T>>();
    // SAFETY: the last reference is gone; `create` initialised `state`.
    unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).state)) };
}

/// `net_proto_family::create`: `socket(AF_MRC, …)`.
///
/// # Safety
///
/// Called only by `__sock_create`, with a live namespace and a new socket.
unsafe extern "C" fn family_create<T: SockState>(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    protocol: c_int,
    kern: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: `__sock_create` passes a fresh, valid `socket`.
        let sock_type = i32::from(unsafe { (*sock).type_ });
        let state = T::create(sock_type, protocol)?;
        // SAFETY: `net` is the caller's live namespace; `PROTO` is registered.
        let sk = unsafe {
            bindings::sk_alloc(
                net,
                param_family() as _,
                kernel::bindings::GFP_KERNEL,
                PROTO.as_ptr(),
                kern,
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
            let this = sk.cast::<SockWith<T>>();
            ptr::addr_of_mut!((*this).state).write(state);
            (*sk).sk_destruct = Some(sk_destruct::<T>);
        }
        Ok(0)
    })
}

/// `proto_ops::release`: the last close of an MRC socket.
///
/// # Safety
///
/// Called only by the socket layer, once per socket.
unsafe extern "C" fn sock_release(sock: *mut bindings::socket) -> c_int {
    // SAFETY: the socket layer calls release once, on a valid socket.
    unsafe {
        let sk = (*sock).sk;
        if sk.is_null() {
            return 0;
        }
        bindings::mrc_sock_orphan(sk);
        (*sock).sk = ptr::null_mut();
        bindings::mrc_sock_put(sk);
    }
    0
}

/// Registration of the protocol (`struct proto`, its slab of sockets).
pub(crate) struct ProtoRegistration;

impl ProtoRegistration {
    /// Registers the protocol named `name` whose sockets carry a `T`.
    pub(crate) fn register<T: SockState>(module: &'static ThisModule, name: &CStr) -> Result<Self> {
        // SAFETY: module init runs once and `PROTO` is not registered yet.
        let proto = unsafe { &mut *PROTO.as_ptr() };
        for (dst, src) in proto.name.iter_mut().zip(name.as_bytes()) {
            *dst = *src as _;
        }
        proto.owner = module.as_ptr().cast();
        proto.obj_size = size_of::<SockWith<T>>() as c_uint;
        // SAFETY: `PROTO` is set up and lives forever.
        to_result(unsafe { bindings::proto_register(PROTO.as_ptr(), 1) })?;
        Ok(Self)
    }
}

impl Drop for ProtoRegistration {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; no socket is left (the module
        // cannot unload while one holds its reference).
        unsafe { bindings::proto_unregister(PROTO.as_ptr()) };
    }
}

/// Registration of the socket family: from here on `socket()` can create
/// sockets of the protocol.
pub(crate) struct FamilyRegistration;

impl FamilyRegistration {
    /// Registers `family` with sockets carrying a `T`; `ProtoRegistration`
    /// must be registered for the same `T`.
    pub(crate) fn register<T: SockState>(module: &'static ThisModule, family: i32) -> Result<Self> {
        let owner = module.as_ptr().cast();
        // SAFETY: module init runs once; neither table is registered yet.
        unsafe {
            let ops = &mut *PROTO_OPS.as_ptr();
            ops.family = family;
            ops.owner = owner;
            ops.release = Some(sock_release);
            ops.bind = Some(bindings::sock_no_bind);
            ops.connect = Some(bindings::sock_no_connect);
            ops.socketpair = Some(bindings::sock_no_socketpair);
            ops.accept = Some(bindings::sock_no_accept);
            ops.getname = Some(bindings::sock_no_getname);
            ops.ioctl = Some(bindings::sock_no_ioctl);
            ops.listen = Some(bindings::sock_no_listen);
            ops.shutdown = Some(bindings::sock_no_shutdown);
            ops.sendmsg = Some(bindings::sock_no_sendmsg);
            ops.recvmsg = Some(bindings::sock_no_recvmsg);
            ops.mmap = Some(bindings::sock_no_mmap);

            let fam = &mut *FAMILY_OPS.as_ptr();
            fam.family = family;
            fam.create = Some(family_create::<T>);
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
        MRC_A_DROPS_BAD_BODY, MRC_A_DROPS_BAD_CHECKSUM, MRC_A_DROPS_BAD_FLAGS,
        MRC_A_DROPS_BAD_HANDSHAKE, MRC_A_DROPS_BAD_MAGIC, MRC_A_DROPS_BAD_SACK,
        MRC_A_DROPS_BAD_VERSION, MRC_A_DROPS_LENGTH_MISMATCH, MRC_A_DROPS_NO_MEMORY,
        MRC_A_DROPS_NO_SESSION, MRC_A_DROPS_SHORT, MRC_A_DROPS_UNKNOWN_TYPE, MRC_A_ENDPOINT_ADDR,
        MRC_A_ENDPOINT_FLAGS, MRC_A_ENDPOINT_GENERATION, MRC_A_ENDPOINT_IFINDEX,
        MRC_A_ENDPOINT_MAX, MRC_A_PARAMS_CC, MRC_A_PARAMS_EV_PER_PLANE, MRC_A_PARAMS_HEARTBEAT_MS,
        MRC_A_PARAMS_MAX, MRC_A_PARAMS_MISS_THRESHOLD, MRC_A_PARAMS_USER_TIMEOUT_MS,
        MRC_A_STATS_CONNS, MRC_A_STATS_DROPS, MRC_A_STATS_RX_BYTES, MRC_A_STATS_RX_PACKETS,
        MRC_A_STATS_TX_BYTES, MRC_A_STATS_TX_PACKETS, MRC_CMD_ENDPOINT_GET, MRC_CMD_PARAM_GET,
        MRC_CMD_STATS_GET,
    };

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
/// `0` is the `genl_info` of a request whose handler is running.
pub(crate) struct GenlInfo(NonNull<bindings::genl_info>);

impl GenlInfo {
    /// The MRC state of the requester's network namespace.
    pub(crate) fn mrc_net(&self) -> &crate::mrc_net::MrcNet {
        // SAFETY: the family is registered only while the pernet subsystem
        // is, and the requester's namespace is alive during the request.
        unsafe { pernet_state(bindings::mrc_genl_info_net(self.0.as_ptr())) }
    }

    /// Raw attribute `id` of the request, if present.
    ///
    /// `max` is the largest attribute of the command's policy (the generated
    /// `maxattr`), which sizes the parsed attribute table.
    fn raw_attr(&self, id: u32, max: u32) -> Option<NonNull<bindings::nlattr>> {
        if id > max {
            return None;
        }
        // SAFETY: `attrs` of a request parsed with a policy of `max` has
        // `max + 1` entries, each null or a validated attribute.
        unsafe {
            let attrs = (*self.0.as_ptr()).attrs;
            if attrs.is_null() {
                return None;
            }
            NonNull::new(*attrs.add(id as usize))
        }
    }

    /// Payload of attribute `id` of the request, if present; see
    /// [`Self::raw_attr`] for `max`. The policy has checked its type and length.
    pub(crate) fn attr(&self, id: u32, max: u32) -> Option<&[u8]> {
        let nla = self.raw_attr(id, max)?.as_ptr();
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
    pub(crate) fn attr_u32(&self, id: u32, max: u32) -> Option<u32> {
        Some(u32::from_ne_bytes(
            self.attr(id, max)?.get(..4)?.try_into().ok()?,
        ))
    }

    /// Reports attribute `id` as the cause of an error, with `msg`.
    pub(crate) fn set_bad_attr(&self, id: u32, max: u32, msg: &'static CStr) {
        self.set_err_msg(msg);
        let Some(nla) = self.raw_attr(id, max) else {
            return;
        };
        // SAFETY: `extack` of a running request is valid or null.
        unsafe {
            let extack = (*self.0.as_ptr()).extack;
            if !extack.is_null() {
                (*extack).bad_attr = nla.as_ptr();
            }
        }
    }

    /// Sets the extended-ack message returned with an error.
    pub(crate) fn set_err_msg(&self, msg: &'static CStr) {
        // SAFETY: `extack` of a running request is valid or null.
        unsafe {
            let extack = (*self.0.as_ptr()).extack;
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
        let info = self.0.as_ptr();
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
        fill(self)?;
        // SAFETY: `start` was opened on this message above.
        unsafe { bindings::mrc_nla_nest_end(self.0.as_ptr(), start) };
        Ok(())
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
    /// Position saved between the calls of one dump (starts at 0).
    pub(crate) fn cursor(&self) -> usize {
        // SAFETY: valid per the type invariant.
        unsafe { (*self.cb.as_ptr()).__bindgen_anon_1.args[0] as usize }
    }

    /// Saves the position for the next call.
    pub(crate) fn set_cursor(&mut self, pos: usize) {
        // SAFETY: valid per the type invariant; `args` is ours to use.
        unsafe { (*self.cb.as_ptr()).__bindgen_anon_1.args[0] = pos as _ };
    }

    /// Declares the generation of the dumped data; a change between calls
    /// marks the dump interrupted (`NLM_F_DUMP_INTR`) for userspace.
    pub(crate) fn set_generation(&mut self, generation: u32) {
        // SAFETY: valid per the type invariant.
        unsafe { (*self.cb.as_ptr()).seq = generation };
    }

    /// Adds one message with command `cmd`; `Ok(false)` if it does not fit
    /// in this part of the dump (the caller stops and resumes next call).
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
        if fill(&mut msg).is_err() {
            // SAFETY: `hdr` starts the message just added; removing it
            // leaves the earlier ones intact.
            unsafe { bindings::mrc_genlmsg_cancel(skb, hdr) };
            return Ok(false);
        }
        // SAFETY: `hdr` was opened above on `skb`.
        unsafe {
            bindings::mrc_genl_dump_check_consistent(cb, hdr);
            bindings::mrc_genlmsg_end(skb, hdr);
        }
        Ok(true)
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
/// `info` must be the `genl_info` of the running request.
unsafe fn genl_do(info: *mut bindings::genl_info, handler: fn(&GenlInfo) -> Result) -> c_int {
    // SAFETY: the caller passes the request's valid `info`.
    let info = GenlInfo(unsafe { NonNull::new_unchecked(info) });
    match handler(&info) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Handler of commands that this version does not provide yet.
fn genl_not_implemented(info: &GenlInfo) -> Result {
    info.set_err_msg(c_str!("command not implemented in this version of mrc"));
    Err(err::not_supported())
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
            _skb: *mut bindings::sk_buff,
            info: *mut bindings::genl_info,
        ) -> c_int {
            // SAFETY: the genetlink core passes the request's `info`.
            unsafe { genl_do(info, $handler) }
        }
    };
}

genl_doit!(mrc_nl_stats_get_doit, crate::mrc_net::genl_stats_get);
genl_doit!(mrc_nl_conn_get_doit, genl_not_implemented);
genl_doit!(mrc_nl_endpoint_add_doit, crate::mrc_net::genl_endpoint_add);
genl_doit!(mrc_nl_endpoint_del_doit, crate::mrc_net::genl_endpoint_del);
genl_doit!(mrc_nl_param_get_doit, crate::mrc_net::genl_param_get);
genl_doit!(mrc_nl_param_set_doit, crate::mrc_net::genl_param_set);
/// `dumpit` of `conn-get` in the generated ops table: no connection is
/// tracked by the kernel yet.
///
/// # Safety
///
/// Called only by the generic netlink core for our family.
#[no_mangle]
unsafe extern "C" fn mrc_nl_conn_get_dumpit(
    _skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: `cb` of a running dump is valid; its extack is valid or null
    // and the message is a static string.
    unsafe {
        let extack = (*cb).extack;
        if !extack.is_null() {
            (*extack)._msg = c_str!("dump not implemented in this version of mrc")
                .as_char_ptr()
                .cast();
        }
    }
    err::not_supported().to_errno()
}
/// `dumpit` of `endpoint-get` in the generated ops table.
///
/// # Safety
///
/// Called only by the generic netlink core for our family.
#[no_mangle]
unsafe extern "C" fn mrc_nl_endpoint_get_dumpit(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: the genetlink core passes a running dump's message and callback.
    let mut dump = unsafe {
        GenlDump {
            cb: NonNull::new_unchecked(cb),
            skb: NonNull::new_unchecked(skb),
        }
    };
    // SAFETY: as in `GenlInfo::mrc_net`; the dumping socket's namespace is
    // alive during the call.
    let net = unsafe { pernet_state(bindings::mrc_genl_dump_net(cb)) };
    match crate::mrc_net::genl_endpoint_dump(net, &mut dump) {
        // Returning the length asks for another call; 0 ends the dump.
        Ok(()) => dump.len(),
        Err(e) => e.to_errno(),
    }
}

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
