// SPDX-License-Identifier: GPL-2.0
//! MRC wire format: the fixed header, packet types, extension blocks, encoding and decoding.
//!
//! This file is the only place that knows byte offsets. It is sans-IO and depends on `core`
//! only: no allocation, no locking, no clock reads, no floating point. Every function is total:
//! it returns an error for bad input and never panics, whatever the bytes.
//!
//! # Fixed header
//!
//! Every packet starts with a [`HEADER_LEN`] (44) byte header, all fields in network byte
//! order:
//!
//! | offset | size | field         | meaning                                                  |
//! |-------:|-----:|---------------|----------------------------------------------------------|
//! |      0 |    4 | `magic`       | [`MAGIC`], `0x4D524320` ("MRC ")                         |
//! |      4 |    2 | `version`     | [`VERSION`], `2`                                         |
//! |      6 |    2 | `flags`       | packet type, modifiers and direction, see [`Flags`]      |
//! |      8 |    8 | `session_id`  | random per connection, the same in both directions       |
//! |     16 |    4 | `path_id`     | path the packet was sent on (echoed in ACKs)             |
//! |     20 |    8 | `seq_num`     | connection-level packet sequence number                  |
//! |     28 |    8 | `ack_num`     | cumulative ack: every seq below it has arrived           |
//! |     36 |    4 | `payload_len` | bytes after the header, extension block included         |
//! |     40 |    4 | `checksum`    | CRC32C of header (this field zero) and body, see below   |
//!
//! The checksum is CRC32C (Castagnoli, reflected, initial value and final xor `!0`), the same
//! as iSCSI and the kernel's `crc32c()` wrapped in inversions; see [`crc32c`].
//!
//! # Checksums
//!
//! The checksum covers the fixed header, with the checksum field read as zero, and the body of
//! every packet but DATA. A DATA packet's payload, the message bytes, is covered by the UDP
//! checksum alone, as TCP's and SCTP-over-UDP's payloads are: every end sends DATA with a UDP
//! checksum, and a receiver drops a DATA datagram that arrives without one (a zero UDP
//! checksum, which IPv4 allows). A network adapter computes and verifies the UDP checksum, so
//! the bytes of a message are touched only where they are copied, once at each end; a CRC32C
//! over every payload byte, computed by the CPU at both ends, was the one pass over the data
//! that TCP does not make. Whether the payload is covered depends on the packet type field,
//! which the checksum covers: a flipped type bit is still caught.
//!
//! Neither checksum is authentication: anyone can compute both. They detect corruption. The
//! UDP checksum, a 16-bit ones' complement sum, misses some errors that CRC32C catches (two
//! swapped 16-bit words, for one); that is the protection TCP's payload has.
//!
//! # Flags
//!
//! | bits  | meaning                                                                 |
//! |-------|-------------------------------------------------------------------------|
//! | 0-3   | packet type, see [`PacketType`] (0 and 10-15 are unknown types)         |
//! | 4-7   | reserved for a wider type field, must be zero                           |
//! | 8     | [`Flags::FIRST`]: first packet of a message (DATA only)                 |
//! | 9     | [`Flags::LAST`]: last packet of a message (DATA only)                   |
//! | 10    | [`Flags::ECE`]: congestion experienced echo (any type)                  |
//! | 11    | [`Flags::NACK`]: the SACK reports losses (ACK only; reserved)           |
//! | 12    | [`Flags::PASSIVE`]: sent by the passive (accepting) end (any type)      |
//! | 13-15 | reserved, must be zero                                                  |
//!
//! [`Flags::PASSIVE`] is a direction bit, not a modifier of the packet type: the end that
//! accepted the connection sets it on every packet it sends, the end that connected never
//! does. Both directions share one `session_id`, so when both ends of a connection live on the
//! same host (a connection to a local address) the session id and this bit together tell which
//! end a packet is for. An RST answering a packet of an unknown session carries the opposite
//! direction of the packet it answers.
//!
//! # Bodies
//!
//! The bytes after the header (exactly `payload_len` of them) depend on the packet type:
//!
//! - SYN, SYN_ACK ([`Handshake`]): `initial_seq` u64, `rwnd` u32, `src_port` u16, `dst_port`
//!   u16, endpoint count u8 (at most [`MAX_ENDPOINTS`]), then per endpoint [`ENDPOINT_LEN`]
//!   bytes: family u8 (4 or 6), flags u8 (bit 0: backup, the others zero), port u16, address 16
//!   bytes (IPv4 in the first 4 bytes, the other 12 zero). `src_port` and `dst_port` are the
//!   MRC ports of the sender and of the receiver: a socket address is an IP address and a
//!   16-bit MRC port, and a listener picks the socket for a SYN by its `dst_port`.
//! - ACK ([`Sack`]): `dsack` u64, `base` u64, `rwnd` u32, `delay` u32, bitmap length u16
//!   (bytes, at most [`MAX_SACK_BYTES`]), then the bitmap. Bit `i` of the bitmap (byte
//!   `i / 8`, bit `i % 8` counted from the least significant bit) set means packet `base + i`
//!   has arrived. `base`
//!   must not be below the header's `ack_num`. `dsack` is one more than the sequence number of
//!   a duplicate DATA or FIN that arrived since the previous ACK (a D-SACK, RFC 2883), or 0: it
//!   tells the sender which of its retransmissions were needless. `rwnd` is the right edge of
//!   the receive window: the receiver takes new payload bytes as long as their running total
//!   since the handshake stays within it, modulo 2^32 (the handshake's `rwnd` is the window
//!   size, which is the first edge). An absolute edge cannot be shrunk by an older ACK
//!   overtaking a newer one on a faster path. `delay` is how long, in nanoseconds (saturating),
//!   the receiver held the ACK after the latest packet it acknowledges arrived (a delayed ACK
//!   waiting for a second packet or its timer): the sender takes it off the RTT samples the ACK
//!   gives, as QUIC's ACK Delay, but not below the path's minimum RTT once it has one.
//! - DATA ([`Payload`]): message bytes; [`Flags::FIRST`] and [`Flags::LAST`] mark message
//!   boundaries.
//! - PROBE, PROBE_ACK ([`Probe`]): `nonce` u64, `ts` u64.
//! - FIN, RST, RETRY: empty.
//!
//! # Retry
//!
//! A listener under pressure answers a SYN without keeping any state for it, as QUIC's Retry
//! (RFC 9000, 8.1.2) and TCP's SYN cookies do: a RETRY carries the SYN's session id, the SYN's
//! `path_id`, a token in `seq_num` and the SYN's `seq_num` (the connecting end's initial
//! sequence number) in `ack_num`, with [`Flags::PASSIVE`]. It is 44 bytes, smaller than any
//! SYN, so it amplifies nothing. The connecting end sends its SYN again at once with the token
//! in the SYN's `ack_num` (0 in a SYN without one): the token is a MAC, under a key only the
//! listener knows, of the SYN's addresses, UDP and MRC ports, session id, initial sequence
//! number and a coarse time slot ([`retry_token`]), so a SYN that carries a valid one comes from
//! a sender that receives at its source address. A token is never 0.
//!
//! Body lengths must match exactly; trailing bytes are an error.
//!
//! # Validation order
//!
//! [`decode`] checks, in order: length of the fixed header ([`DecodeError::Short`]), magic,
//! version, `payload_len` against the datagram length and, for a packet other than DATA,
//! against the longest that is valid ([`MAX_CONTROL_PACKET_LEN`], so that the bytes of a longer
//! one are neither gathered nor checksummed), checksum, packet type, flags, body. A
//! single flipped bit in a valid packet is therefore always reported, at the latest, as
//! [`DecodeError::BadChecksum`], unless it is in a DATA packet's payload, which the UDP
//! checksum covers (see "Checksums").
//!
//! [`decode_data`] makes the same checks, in the same order, for a DATA packet whose payload
//! the caller keeps elsewhere (such as in the page fragments of a socket buffer): it needs only
//! the fixed header's bytes, and the payload's bytes are never read.

use core::fmt;

/// Value of the `magic` field: "MRC " in ASCII.
pub const MAGIC: u32 = 0x4D52_4320;

/// Value of the `version` field for the format described here.
pub const VERSION: u16 = 2;

/// Length in bytes of the fixed header.
pub const HEADER_LEN: usize = 44;

/// Maximum length in bytes of a SACK bitmap.
pub const MAX_SACK_BYTES: usize = 128;

/// Maximum number of packets a SACK bitmap can describe.
pub const MAX_SACK_BITS: usize = MAX_SACK_BYTES * 8;

/// Maximum number of endpoints in a SYN or SYN_ACK.
pub const MAX_ENDPOINTS: usize = 16;

/// Length in bytes of one endpoint in a handshake body.
pub const ENDPOINT_LEN: usize = 20;

/// Length in bytes of the fixed part of a handshake body (before the endpoints): `initial_seq`,
/// `rwnd`, `src_port`, `dst_port` and the endpoint count.
pub const HANDSHAKE_FIXED_LEN: usize = 17;

/// Length in bytes of the fixed part of an ACK body (before the bitmap).
pub const SACK_FIXED_LEN: usize = 26;

/// Length in bytes of a PROBE or PROBE_ACK body.
pub const PROBE_LEN: usize = 16;

/// Largest encoded size of any packet other than DATA, for sizing control packet buffers: a
/// handshake with [`MAX_ENDPOINTS`] endpoints, 381 bytes.
pub const MAX_CONTROL_PACKET_LEN: usize =
    HEADER_LEN + HANDSHAKE_FIXED_LEN + MAX_ENDPOINTS * ENDPOINT_LEN;

/// Endpoint address family value for IPv4.
pub const FAMILY_V4: u8 = 4;

/// Endpoint address family value for IPv6.
pub const FAMILY_V6: u8 = 6;

/// Offset of the checksum field in the header.
const CHECKSUM_OFFSET: usize = 40;

/// Endpoint flag bit: the endpoint is a backup.
const ENDPOINT_FLAG_BACKUP: u8 = 0x01;

// ---------------------------------------------------------------------------------------------
// Packet types and flags
// ---------------------------------------------------------------------------------------------

/// Packet type, carried in the low four bits of the flags field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketType {
    /// Connection request, carries a [`Handshake`].
    Syn,
    /// Connection accept, carries a [`Handshake`].
    SynAck,
    /// Acknowledgement, carries a [`Sack`].
    Ack,
    /// Message data.
    Data,
    /// Orderly close of one direction.
    Fin,
    /// Abort.
    Rst,
    /// Path liveness probe, carries a [`Probe`].
    Probe,
    /// Answer to a probe, echoes its [`Probe`].
    ProbeAck,
    /// Stateless answer to a SYN: send it again with the token (see "Retry" above).
    Retry,
}

impl PacketType {
    /// Number of packet types.
    pub const COUNT: usize = 9;

    /// Every packet type, in wire value order; `ALL[t.index()] == t`.
    pub const ALL: [PacketType; PacketType::COUNT] = [
        PacketType::Syn,
        PacketType::SynAck,
        PacketType::Ack,
        PacketType::Data,
        PacketType::Fin,
        PacketType::Rst,
        PacketType::Probe,
        PacketType::ProbeAck,
        PacketType::Retry,
    ];

    /// Returns the value of the type field for this type (1 to 9).
    pub const fn to_wire(self) -> u16 {
        match self {
            PacketType::Syn => 1,
            PacketType::SynAck => 2,
            PacketType::Ack => 3,
            PacketType::Data => 4,
            PacketType::Fin => 5,
            PacketType::Rst => 6,
            PacketType::Probe => 7,
            PacketType::ProbeAck => 8,
            PacketType::Retry => 9,
        }
    }

    /// Returns the type for a type field value, or `None` for an unknown value.
    pub const fn from_wire(value: u16) -> Option<PacketType> {
        match value {
            1 => Some(PacketType::Syn),
            2 => Some(PacketType::SynAck),
            3 => Some(PacketType::Ack),
            4 => Some(PacketType::Data),
            5 => Some(PacketType::Fin),
            6 => Some(PacketType::Rst),
            7 => Some(PacketType::Probe),
            8 => Some(PacketType::ProbeAck),
            9 => Some(PacketType::Retry),
            _ => None,
        }
    }

    /// Returns a dense index in `0..COUNT`, for per-type counters.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Returns a stable lower-case name, such as `"syn_ack"`.
    pub const fn name(self) -> &'static str {
        match self {
            PacketType::Syn => "syn",
            PacketType::SynAck => "syn_ack",
            PacketType::Ack => "ack",
            PacketType::Data => "data",
            PacketType::Fin => "fin",
            PacketType::Rst => "rst",
            PacketType::Probe => "probe",
            PacketType::ProbeAck => "probe_ack",
            PacketType::Retry => "retry",
        }
    }

    /// Returns the modifier bits (within [`Flags::MODIFIER_MASK`]) that packets of this type
    /// may carry.
    ///
    /// The direction bit [`Flags::PASSIVE`] is not a modifier: packets of every type may carry
    /// it, so it is not included here.
    pub const fn allowed_modifiers(self) -> u16 {
        match self {
            PacketType::Data => Flags::FIRST.0 | Flags::LAST.0 | Flags::ECE.0,
            PacketType::Ack => Flags::ECE.0 | Flags::NACK.0,
            _ => Flags::ECE.0,
        }
    }
}

impl fmt::Display for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The 16-bit flags field: packet type in bits 0-3, modifiers in bits 8-11, direction in bit
/// 12.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// Mask of the packet type field.
    pub const TYPE_MASK: u16 = 0x000F;
    /// Mask of every modifier bit defined by this version.
    pub const MODIFIER_MASK: u16 = 0x0F00;
    /// Mask of the direction bit, [`Flags::PASSIVE`], which packets of every type may carry.
    pub const DIRECTION_MASK: u16 = Flags::PASSIVE.0;
    /// Mask of the reserved bits, which must be zero.
    pub const RESERVED_MASK: u16 =
        !(Flags::TYPE_MASK | Flags::MODIFIER_MASK | Flags::DIRECTION_MASK);

    /// First packet of a message (DATA only).
    pub const FIRST: Flags = Flags(1 << 8);
    /// Last packet of a message (DATA only).
    pub const LAST: Flags = Flags(1 << 9);
    /// Congestion experienced echo.
    pub const ECE: Flags = Flags(1 << 10);
    /// The SACK reports losses (ACK only; reserved for future use).
    pub const NACK: Flags = Flags(1 << 11);
    /// Sent by the passive (accepting) end of the connection (any type).
    ///
    /// A direction bit rather than a modifier: the end that accepted the connection sets it on
    /// every packet it sends and the end that connected never does, so that two ends of one
    /// connection on the same host (sharing its session id) can be told apart.
    pub const PASSIVE: Flags = Flags(1 << 12);

    /// Returns flags with the given type and no modifiers.
    pub const fn new(packet_type: PacketType) -> Flags {
        Flags(packet_type.to_wire())
    }

    /// Returns these flags with the type field replaced.
    pub const fn with_type(self, packet_type: PacketType) -> Flags {
        Flags((self.0 & !Flags::TYPE_MASK) | packet_type.to_wire())
    }

    /// Returns these flags with the bits of `other` added.
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Returns these flags with the bits of `other` cleared.
    pub const fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }

    /// Returns whether every bit of `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Returns the packet type, or `None` if the type field holds an unknown value.
    pub const fn packet_type(self) -> Option<PacketType> {
        PacketType::from_wire(self.0 & Flags::TYPE_MASK)
    }

    /// Returns whether [`Flags::FIRST`] is set.
    pub const fn first(self) -> bool {
        self.contains(Flags::FIRST)
    }

    /// Returns whether [`Flags::LAST`] is set.
    pub const fn last(self) -> bool {
        self.contains(Flags::LAST)
    }

    /// Returns whether [`Flags::ECE`] is set.
    pub const fn ece(self) -> bool {
        self.contains(Flags::ECE)
    }

    /// Returns whether [`Flags::NACK`] is set.
    pub const fn nack(self) -> bool {
        self.contains(Flags::NACK)
    }

    /// Returns whether [`Flags::PASSIVE`] is set: the packet was sent by the passive
    /// (accepting) end of its connection.
    pub const fn passive(self) -> bool {
        self.contains(Flags::PASSIVE)
    }

    /// Whether a packet with these flags has its body covered by the header's checksum: every
    /// type field but DATA's, unknown ones included (see "Checksums").
    pub const fn checksum_covers_body(self) -> bool {
        self.0 & Flags::TYPE_MASK != PacketType::Data.to_wire()
    }

    /// Returns whether the flags are acceptable on the wire for a packet of type `packet_type`.
    ///
    /// The type field must equal `packet_type`, reserved bits must be zero and only modifiers
    /// allowed for the type may be set. The direction bit [`Flags::PASSIVE`] is valid for every
    /// type.
    pub const fn is_valid_for(self, packet_type: PacketType) -> bool {
        self.0 & Flags::TYPE_MASK == packet_type.to_wire()
            && self.0 & Flags::RESERVED_MASK == 0
            && self.0 & Flags::MODIFIER_MASK & !packet_type.allowed_modifiers() == 0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;

    fn bitor(self, rhs: Flags) -> Flags {
        self.with(rhs)
    }
}

impl core::ops::BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        *self = self.with(rhs);
    }
}

// ---------------------------------------------------------------------------------------------
// Header and bodies
// ---------------------------------------------------------------------------------------------

/// The fixed header, without magic, version and checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Header {
    /// Packet type, modifiers and direction.
    pub flags: Flags,
    /// Connection identifier chosen at handshake.
    pub session_id: u64,
    /// Path the packet was sent on; in an ACK, the path of the packet being acknowledged.
    pub path_id: u32,
    /// Connection-level packet sequence number.
    pub seq: u64,
    /// Cumulative acknowledgement: every sequence number below it has arrived.
    pub ack: u64,
    /// Bytes after the header; filled in by [`decode`], derived from the body by [`encode`].
    pub payload_len: u32,
}

impl Header {
    /// Returns the packet type, or `None` if the type field holds an unknown value.
    pub const fn packet_type(&self) -> Option<PacketType> {
        self.flags.packet_type()
    }

    /// Returns whether a datagram of `len` bytes with this header is longer than any valid
    /// one: only DATA may be longer than [`MAX_CONTROL_PACKET_LEN`]. [`decode`] rejects it
    /// with [`DecodeError::LengthMismatch`]; a receiver may do so from the header alone,
    /// before it gathers the rest.
    pub const fn too_long(&self, len: usize) -> bool {
        self.flags.checksum_covers_body() && len > MAX_CONTROL_PACKET_LEN
    }

    /// Returns the datagram length this header announces (`HEADER_LEN + payload_len`).
    pub fn wire_len(&self) -> Option<usize> {
        usize::try_from(self.payload_len)
            .ok()?
            .checked_add(HEADER_LEN)
    }
}

/// One local address a peer offers for paths, as carried in SYN and SYN_ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Address family: [`FAMILY_V4`] or [`FAMILY_V6`].
    pub family: u8,
    /// Whether the endpoint is to be used only when no other path is usable.
    pub backup: bool,
    /// UDP port.
    pub port: u16,
    /// Address; an IPv4 address is in the first 4 bytes and the other 12 are zero.
    pub addr: [u8; 16],
}

impl Endpoint {
    /// Returns an IPv4 endpoint.
    pub const fn v4(addr: [u8; 4], port: u16, backup: bool) -> Endpoint {
        let mut full = [0u8; 16];
        full[0] = addr[0];
        full[1] = addr[1];
        full[2] = addr[2];
        full[3] = addr[3];
        Endpoint {
            family: FAMILY_V4,
            backup,
            port,
            addr: full,
        }
    }

    /// Returns an IPv6 endpoint.
    pub const fn v6(addr: [u8; 16], port: u16, backup: bool) -> Endpoint {
        Endpoint {
            family: FAMILY_V6,
            backup,
            port,
            addr,
        }
    }

    /// Returns whether the endpoint can be encoded: a known family and, for IPv4, zero padding.
    pub fn is_valid(&self) -> bool {
        match self.family {
            FAMILY_V6 => true,
            FAMILY_V4 => self
                .addr
                .get(4..)
                .is_some_and(|pad| pad.iter().all(|&b| b == 0)),
            _ => false,
        }
    }

    /// Returns whether the address is a loopback address: 127.0.0.0/8 or ::1.
    pub fn is_loopback(&self) -> bool {
        match self.family {
            FAMILY_V4 => self.addr[0] == 127,
            FAMILY_V6 => self.addr == V6_LOOPBACK,
            _ => false,
        }
    }

    /// Returns whether the address is link-local: 169.254.0.0/16 or fe80::/10.
    pub fn is_link_local(&self) -> bool {
        match self.family {
            FAMILY_V4 => self.addr[0] == 169 && self.addr[1] == 254,
            FAMILY_V6 => self.addr[0] == 0xfe && self.addr[1] & 0xc0 == 0x80,
            _ => false,
        }
    }

    /// Returns whether a packet could be sent to the endpoint at all: a valid endpoint with a
    /// non-zero port whose address is unicast and specified.
    ///
    /// Refused: port 0; for IPv4 0.0.0.0/8 ("this network"), 224.0.0.0/4 (multicast) and
    /// 240.0.0.0/4 (reserved, with the broadcast address 255.255.255.255); for IPv6 the
    /// unspecified address `::`, IPv4-mapped addresses `::ffff:0:0/96` (an IPv4 peer announces
    /// an IPv4 endpoint) and ff00::/8 (multicast). Loopback and link-local addresses pass; whether
    /// they may be used depends on the address the handshake came from (see
    /// [`screen_peer_endpoint`]).
    pub fn is_routable_unicast(&self) -> bool {
        if !self.is_valid() || self.port == 0 {
            return false;
        }
        let a = &self.addr;
        match self.family {
            FAMILY_V4 => a[0] != 0 && a[0] < 224,
            FAMILY_V6 => {
                let unspecified = a.iter().all(|&b| b == 0);
                let mapped = a.iter().take(10).all(|&b| b == 0) && a[10] == 0xff && a[11] == 0xff;
                !unspecified && !mapped && a[0] != 0xff
            }
            _ => false,
        }
    }

    /// Returns the IPv4 address if this is an IPv4 endpoint.
    pub fn ipv4(&self) -> Option<[u8; 4]> {
        if self.family != FAMILY_V4 {
            return None;
        }
        self.addr.get(..4)?.try_into().ok()
    }

    fn to_wire(self) -> [u8; ENDPOINT_LEN] {
        let mut out = [0u8; ENDPOINT_LEN];
        let [family, flags, port_hi, port_lo, addr @ ..] = &mut out;
        let [hi, lo] = self.port.to_be_bytes();
        *family = self.family;
        *flags = if self.backup { ENDPOINT_FLAG_BACKUP } else { 0 };
        *port_hi = hi;
        *port_lo = lo;
        *addr = self.addr;
        out
    }

    fn from_wire(bytes: &[u8]) -> Option<Endpoint> {
        let mut r = Reader::new(bytes);
        let family = r.u8()?;
        let flags = r.u8()?;
        let port = r.u16()?;
        let addr = r.array::<16>()?;
        if !r.is_empty() || flags & !ENDPOINT_FLAG_BACKUP != 0 {
            return None;
        }
        let ep = Endpoint {
            family,
            backup: flags & ENDPOINT_FLAG_BACKUP != 0,
            port,
            addr,
        };
        if ep.is_valid() {
            Some(ep)
        } else {
            None
        }
    }
}

/// The IPv6 loopback address `::1`.
const V6_LOOPBACK: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// Returns whether an endpoint the peer announced in its SYN or SYN_ACK may be used for a path.
///
/// `handshake_from` is the address the handshake came from (its port is ignored): the source
/// of the SYN on the accepting end, the address connected to on the connecting end; `None` if
/// it is not known. The endpoint must be routable unicast ([`Endpoint::is_routable_unicast`]);
/// a loopback endpoint is taken only from a peer whose handshake address is loopback too, a
/// link-local one only from a peer whose handshake address is link-local: otherwise a remote
/// peer could make this host send to its own services or to its link's neighbours.
pub fn screen_peer_endpoint(ep: &Endpoint, handshake_from: Option<&Endpoint>) -> bool {
    if !ep.is_routable_unicast() {
        return false;
    }
    if ep.is_loopback() {
        return handshake_from.is_some_and(Endpoint::is_loopback);
    }
    if ep.is_link_local() {
        return handshake_from.is_some_and(Endpoint::is_link_local);
    }
    true
}

/// Storage of a handshake's endpoint list: wire bytes (decoded) or a slice (to encode).
#[derive(Clone, Copy, Debug)]
enum EndpointList<'a> {
    /// Validated wire bytes, a multiple of `ENDPOINT_LEN` long.
    Wire(&'a [u8]),
    /// Endpoints given by the caller.
    Slice(&'a [Endpoint]),
}

/// Body of SYN and SYN_ACK: initial sequence number, receive window, MRC ports and endpoint
/// list.
#[derive(Clone, Copy, Debug)]
pub struct Handshake<'a> {
    /// Sequence number of the sender's first packet.
    pub initial_seq: u64,
    /// Sender's receive window in bytes.
    pub rwnd: u32,
    /// MRC port of the sender's socket.
    pub src_port: u16,
    /// MRC port of the receiver's socket; a listener demultiplexes SYNs by it.
    pub dst_port: u16,
    list: EndpointList<'a>,
}

impl<'a> Handshake<'a> {
    /// Returns a handshake body for encoding with the given ports and endpoints.
    pub const fn new(
        initial_seq: u64,
        rwnd: u32,
        src_port: u16,
        dst_port: u16,
        endpoints: &'a [Endpoint],
    ) -> Handshake<'a> {
        Handshake {
            initial_seq,
            rwnd,
            src_port,
            dst_port,
            list: EndpointList::Slice(endpoints),
        }
    }

    /// Returns an iterator over the endpoints, without allocating.
    pub fn endpoints(&self) -> EndpointIter<'a> {
        match self.list {
            EndpointList::Wire(bytes) => EndpointIter {
                inner: EndpointIterInner::Wire(bytes),
            },
            EndpointList::Slice(list) => EndpointIter {
                inner: EndpointIterInner::Slice(list.iter()),
            },
        }
    }

    /// Returns the number of endpoints.
    pub fn endpoint_count(&self) -> usize {
        match self.list {
            EndpointList::Wire(bytes) => bytes.len() / ENDPOINT_LEN,
            EndpointList::Slice(list) => list.len(),
        }
    }

    fn is_valid(&self) -> bool {
        match self.list {
            EndpointList::Wire(_) => true,
            EndpointList::Slice(list) => {
                list.len() <= MAX_ENDPOINTS && list.iter().all(Endpoint::is_valid)
            }
        }
    }

    fn wire_len(&self) -> Option<usize> {
        self.endpoint_count()
            .checked_mul(ENDPOINT_LEN)?
            .checked_add(HANDSHAKE_FIXED_LEN)
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let count = u8::try_from(self.endpoint_count()).map_err(|_| EncodeError::BadHandshake)?;
        w.put(&self.initial_seq.to_be_bytes())?;
        w.put(&self.rwnd.to_be_bytes())?;
        w.put(&self.src_port.to_be_bytes())?;
        w.put(&self.dst_port.to_be_bytes())?;
        w.put(&[count])?;
        match self.list {
            EndpointList::Wire(bytes) => w.put(bytes)?,
            EndpointList::Slice(list) => {
                for ep in list {
                    w.put(&ep.to_wire())?;
                }
            }
        }
        Ok(())
    }

    fn parse(payload: &'a [u8]) -> Result<Handshake<'a>, DecodeError> {
        let mut r = Reader::new(payload);
        let initial_seq = r.u64().ok_or(DecodeError::BadHandshake)?;
        let rwnd = r.u32().ok_or(DecodeError::BadHandshake)?;
        let src_port = r.u16().ok_or(DecodeError::BadHandshake)?;
        let dst_port = r.u16().ok_or(DecodeError::BadHandshake)?;
        let count = usize::from(r.u8().ok_or(DecodeError::BadHandshake)?);
        let rest = r.rest();
        if count > MAX_ENDPOINTS || count.checked_mul(ENDPOINT_LEN) != Some(rest.len()) {
            return Err(DecodeError::BadHandshake);
        }
        if !rest
            .chunks_exact(ENDPOINT_LEN)
            .all(|chunk| Endpoint::from_wire(chunk).is_some())
        {
            return Err(DecodeError::BadHandshake);
        }
        Ok(Handshake {
            initial_seq,
            rwnd,
            src_port,
            dst_port,
            list: EndpointList::Wire(rest),
        })
    }
}

impl PartialEq for Handshake<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.initial_seq == other.initial_seq
            && self.rwnd == other.rwnd
            && self.src_port == other.src_port
            && self.dst_port == other.dst_port
            && self.endpoint_count() == other.endpoint_count()
            && self.endpoints().eq(other.endpoints())
    }
}

impl Eq for Handshake<'_> {}

#[derive(Clone, Debug)]
enum EndpointIterInner<'a> {
    /// Remaining wire bytes.
    Wire(&'a [u8]),
    Slice(core::slice::Iter<'a, Endpoint>),
}

/// Iterator over the endpoints of a [`Handshake`].
#[derive(Clone, Debug)]
pub struct EndpointIter<'a> {
    inner: EndpointIterInner<'a>,
}

impl Iterator for EndpointIter<'_> {
    type Item = Endpoint;

    fn next(&mut self) -> Option<Endpoint> {
        match &mut self.inner {
            // Wire bytes were validated by decode, so no entry is skipped.
            EndpointIterInner::Wire(bytes) => loop {
                let entry = bytes.get(..ENDPOINT_LEN)?;
                *bytes = bytes.get(ENDPOINT_LEN..)?;
                if let Some(ep) = Endpoint::from_wire(entry) {
                    return Some(ep);
                }
            },
            EndpointIterInner::Slice(iter) => iter.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            EndpointIterInner::Wire(bytes) => (0, Some(bytes.len() / ENDPOINT_LEN)),
            EndpointIterInner::Slice(iter) => iter.size_hint(),
        }
    }
}

/// Body of ACK: duplicate report, receive window and selective acknowledgement bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sack<'a> {
    /// D-SACK: one more than the sequence number of a duplicate DATA or FIN received since the
    /// previous ACK; 0 if none.
    pub dsack: u64,
    /// Right edge of the receiver's window, mod 2^32: the window new packets may take since the
    /// handshake, each its payload's length and at least `mrc_conn::MIN_WINDOW_COST`.
    pub rwnd: u32,
    /// Nanoseconds (saturating) between the arrival of the latest packet acknowledged and
    /// the ACK's departure.
    pub delay_ns: u32,
    /// Sequence number described by bit 0 of the bitmap; not below the header's `ack`.
    pub base: u64,
    /// Bitmap: bit `i` (byte `i / 8`, LSB first) set means `base + i` has arrived.
    pub bitmap: &'a [u8],
}

impl<'a> Sack<'a> {
    /// Returns a SACK body with no delay.
    pub const fn new(dsack: u64, rwnd: u32, base: u64, bitmap: &'a [u8]) -> Sack<'a> {
        Sack {
            dsack,
            rwnd,
            delay_ns: 0,
            base,
            bitmap,
        }
    }

    /// Returns the body with its delay set to `delay_ns`, saturated to what the field holds.
    pub fn with_delay(self, delay_ns: u64) -> Sack<'a> {
        Sack {
            delay_ns: u32::try_from(delay_ns).unwrap_or(u32::MAX),
            ..self
        }
    }

    /// Returns whether the bitmap reports `seq` as received.
    pub fn is_set(&self, seq: u64) -> bool {
        let Some(off) = seq.checked_sub(self.base) else {
            return false;
        };
        let Ok(byte) = usize::try_from(off / 8) else {
            return false;
        };
        let bit = off % 8;
        self.bitmap.get(byte).is_some_and(|&b| (b >> bit) & 1 != 0)
    }

    /// Returns one past the last sequence number the bitmap can describe (saturating).
    pub fn end(&self) -> u64 {
        let bits = u64::try_from(self.bitmap.len())
            .unwrap_or(u64::MAX)
            .saturating_mul(8);
        self.base.saturating_add(bits)
    }

    /// Returns an iterator over the sequence numbers the bitmap reports, in increasing order.
    pub fn sacked(&self) -> SackIter<'a> {
        SackIter {
            bytes: self.bitmap.iter(),
            base: self.base,
            cur: 0,
            cur_off: 0,
            next_off: 0,
        }
    }

    fn is_valid(&self, ack: u64) -> bool {
        self.bitmap.len() <= MAX_SACK_BYTES
            && self.base >= ack
            && u64::try_from(self.bitmap.len())
                .ok()
                .and_then(|n| n.checked_mul(8))
                .and_then(|bits| self.base.checked_add(bits))
                .is_some()
    }

    fn wire_len(&self) -> Option<usize> {
        SACK_FIXED_LEN.checked_add(self.bitmap.len())
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        let len = u16::try_from(self.bitmap.len()).map_err(|_| EncodeError::BadSack)?;
        w.put(&self.dsack.to_be_bytes())?;
        w.put(&self.base.to_be_bytes())?;
        w.put(&self.rwnd.to_be_bytes())?;
        w.put(&self.delay_ns.to_be_bytes())?;
        w.put(&len.to_be_bytes())?;
        w.put(self.bitmap)
    }

    fn parse(payload: &'a [u8], ack: u64) -> Result<Sack<'a>, DecodeError> {
        let mut r = Reader::new(payload);
        let dsack = r.u64().ok_or(DecodeError::BadSack)?;
        let base = r.u64().ok_or(DecodeError::BadSack)?;
        let rwnd = r.u32().ok_or(DecodeError::BadSack)?;
        let delay_ns = r.u32().ok_or(DecodeError::BadSack)?;
        let len = usize::from(r.u16().ok_or(DecodeError::BadSack)?);
        let bitmap = r.rest();
        if len != bitmap.len() {
            return Err(DecodeError::BadSack);
        }
        let sack = Sack {
            dsack,
            rwnd,
            delay_ns,
            base,
            bitmap,
        };
        if sack.is_valid(ack) {
            Ok(sack)
        } else {
            Err(DecodeError::BadSack)
        }
    }
}

/// Iterator over the sequence numbers a [`Sack`] reports as received.
#[derive(Clone, Debug)]
pub struct SackIter<'a> {
    bytes: core::slice::Iter<'a, u8>,
    base: u64,
    /// Bits of the current byte not yet returned.
    cur: u8,
    /// Bit offset of the current byte from `base`.
    cur_off: u64,
    /// Bit offset of the next byte from `base`.
    next_off: u64,
}

impl Iterator for SackIter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        while self.cur == 0 {
            self.cur = *self.bytes.next()?;
            self.cur_off = self.next_off;
            self.next_off = self.next_off.saturating_add(8);
        }
        let bit = self.cur.trailing_zeros();
        self.cur &= self.cur.wrapping_sub(1);
        self.base
            .checked_add(self.cur_off)?
            .checked_add(u64::from(bit))
    }
}

/// Body of PROBE and PROBE_ACK: a nonce and a send timestamp, echoed by the PROBE_ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Probe {
    /// Value chosen by the prober to match the answer.
    pub nonce: u64,
    /// Prober's send timestamp in ns.
    pub ts: u64,
}

/// Body of DATA: the payload's length and, where the decoder had them, its bytes.
///
/// [`decode`] and encoding callers give the bytes ([`Payload::new`]). [`decode_data`] leaves
/// them wherever its caller keeps them and records only their length, which is all a
/// connection needs of a received payload; such a payload cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Payload<'a> {
    /// Length in bytes: `bytes.len()` when `bytes` is known.
    len: usize,
    /// The bytes, if known.
    bytes: Option<&'a [u8]>,
}

impl<'a> Payload<'a> {
    /// Returns the payload made of `bytes`.
    pub const fn new(bytes: &'a [u8]) -> Payload<'a> {
        Payload {
            len: bytes.len(),
            bytes: Some(bytes),
        }
    }

    /// Returns a payload of `len` bytes that are not at hand.
    const fn elsewhere(len: usize) -> Payload<'static> {
        Payload { len, bytes: None }
    }

    /// Returns the length in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the payload is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns the bytes, or `None` for a payload [`decode_data`] left with its caller.
    pub const fn bytes(&self) -> Option<&'a [u8]> {
        self.bytes
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(bytes: &'a [u8]) -> Payload<'a> {
        Payload::new(bytes)
    }
}

/// Type-specific part of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// SYN.
    Syn(Handshake<'a>),
    /// SYN_ACK.
    SynAck(Handshake<'a>),
    /// ACK.
    Ack(Sack<'a>),
    /// DATA: message bytes, see [`Payload`].
    Data(Payload<'a>),
    /// FIN.
    Fin,
    /// RST.
    Rst,
    /// PROBE.
    Probe(Probe),
    /// PROBE_ACK.
    ProbeAck(Probe),
    /// RETRY: the token is the header's `seq`, the echoed initial sequence number its `ack`.
    Retry,
}

impl<'a> Body<'a> {
    /// Returns a DATA body carrying `bytes`.
    pub const fn data(bytes: &'a [u8]) -> Body<'a> {
        Body::Data(Payload::new(bytes))
    }

    /// Returns the packet type this body belongs to.
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Body::Syn(_) => PacketType::Syn,
            Body::SynAck(_) => PacketType::SynAck,
            Body::Ack(_) => PacketType::Ack,
            Body::Data(_) => PacketType::Data,
            Body::Fin => PacketType::Fin,
            Body::Rst => PacketType::Rst,
            Body::Probe(_) => PacketType::Probe,
            Body::ProbeAck(_) => PacketType::ProbeAck,
            Body::Retry => PacketType::Retry,
        }
    }

    /// Returns the encoded length of the body (the header's `payload_len`).
    pub fn wire_len(&self) -> Option<usize> {
        match self {
            Body::Syn(h) | Body::SynAck(h) => h.wire_len(),
            Body::Ack(s) => s.wire_len(),
            Body::Data(d) => Some(d.len()),
            Body::Fin | Body::Rst | Body::Retry => Some(0),
            Body::Probe(_) | Body::ProbeAck(_) => Some(PROBE_LEN),
        }
    }
}

/// A decoded packet, borrowing variable-length parts from the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Fixed header.
    pub header: Header,
    /// Type-specific body.
    pub body: Body<'a>,
}

impl Packet<'_> {
    /// Encodes the packet into `out`, see [`encode`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        encode(&self.header, &self.body, out)
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Reason a datagram was rejected by [`decode`] or [`peek_header`].
///
/// Variants are listed, and ordered, in the order [`decode`] checks for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DecodeError {
    /// Shorter than the fixed header.
    Short,
    /// Wrong magic.
    BadMagic,
    /// Unsupported version.
    BadVersion,
    /// `payload_len` does not match the datagram length, or a packet other than DATA is longer
    /// than [`MAX_CONTROL_PACKET_LEN`].
    LengthMismatch,
    /// Checksum mismatch.
    BadChecksum,
    /// Unknown value in the packet type field.
    UnknownType,
    /// Reserved flag bits set, or a modifier not allowed for the packet type.
    BadFlags,
    /// Malformed ACK body: truncated, bitmap too long or not matching, base below `ack`.
    BadSack,
    /// Malformed SYN or SYN_ACK body: truncated, too many or invalid endpoints, trailing bytes.
    BadHandshake,
    /// Wrong body length for PROBE, PROBE_ACK, FIN, RST or RETRY; for [`decode_data`], a packet
    /// other than DATA.
    BadBody,
}

impl DecodeError {
    /// Number of error kinds.
    pub const COUNT: usize = 10;

    /// Every error kind; `ALL[e.index()] == e`.
    pub const ALL: [DecodeError; DecodeError::COUNT] = [
        DecodeError::Short,
        DecodeError::BadMagic,
        DecodeError::BadVersion,
        DecodeError::LengthMismatch,
        DecodeError::BadChecksum,
        DecodeError::UnknownType,
        DecodeError::BadFlags,
        DecodeError::BadSack,
        DecodeError::BadHandshake,
        DecodeError::BadBody,
    ];

    /// Returns a dense index in `0..COUNT`, for per-error counters.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Returns a stable lower-case name, such as `"bad_checksum"`, for counters and netlink.
    pub const fn name(self) -> &'static str {
        match self {
            DecodeError::Short => "short",
            DecodeError::BadMagic => "bad_magic",
            DecodeError::BadVersion => "bad_version",
            DecodeError::LengthMismatch => "length_mismatch",
            DecodeError::BadChecksum => "bad_checksum",
            DecodeError::UnknownType => "unknown_type",
            DecodeError::BadFlags => "bad_flags",
            DecodeError::BadSack => "bad_sack",
            DecodeError::BadHandshake => "bad_handshake",
            DecodeError::BadBody => "bad_body",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reason [`encode`], [`encode_header`] or [`seal`] refused to write a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodeError {
    /// The output buffer is too small.
    BufferTooSmall,
    /// Reserved flag bits set, or a modifier not allowed for the packet type.
    BadFlags,
    /// The body does not fit in the 32-bit `payload_len`.
    TooLong,
    /// Bitmap longer than [`MAX_SACK_BYTES`], base below the header's `ack`, or past `u64`.
    BadSack,
    /// More than [`MAX_ENDPOINTS`] endpoints, or an endpoint that is not valid.
    BadHandshake,
    /// The buffer given to [`seal`] does not hold a header and exactly its `payload_len`.
    LengthMismatch,
    /// A DATA body whose bytes are not at hand, as [`decode_data`] returns it.
    NoPayload,
}

impl EncodeError {
    /// Returns a stable lower-case name, such as `"buffer_too_small"`.
    pub const fn name(self) -> &'static str {
        match self {
            EncodeError::BufferTooSmall => "buffer_too_small",
            EncodeError::BadFlags => "bad_flags",
            EncodeError::TooLong => "too_long",
            EncodeError::BadSack => "bad_sack",
            EncodeError::BadHandshake => "bad_handshake",
            EncodeError::LengthMismatch => "length_mismatch",
            EncodeError::NoPayload => "no_payload",
        }
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------------------------
// Byte cursors
// ---------------------------------------------------------------------------------------------

/// Bounds-checked big-endian reader over a byte slice.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { rest: buf }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let head = self.rest.get(..n)?;
        self.rest = self.rest.get(n..)?;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(u8::from_be_bytes)
    }

    fn u16(&mut self) -> Option<u16> {
        self.array::<2>().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array::<4>().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array::<8>().map(u64::from_be_bytes)
    }

    fn rest(&self) -> &'a [u8] {
        self.rest
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// Bounds-checked writer over a mutable byte slice.
struct Writer<'a> {
    rest: &'a mut [u8],
}

impl<'a> Writer<'a> {
    fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer { rest: buf }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let rest = core::mem::take(&mut self.rest);
        if bytes.len() > rest.len() {
            self.rest = rest;
            return Err(EncodeError::BufferTooSmall);
        }
        let (head, tail) = rest.split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = tail;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Parses the fixed header, checking length, magic and version; returns it and the checksum.
fn parse_fixed(buf: &[u8]) -> Result<(Header, u32), DecodeError> {
    let mut r = Reader::new(buf);
    let short = DecodeError::Short;
    // Check the length first so that a short datagram is never reported as anything else.
    if buf.len() < HEADER_LEN {
        return Err(short);
    }
    if r.u32().ok_or(short)? != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if r.u16().ok_or(short)? != VERSION {
        return Err(DecodeError::BadVersion);
    }
    let flags = Flags(r.u16().ok_or(short)?);
    let session_id = r.u64().ok_or(short)?;
    let path_id = r.u32().ok_or(short)?;
    let seq = r.u64().ok_or(short)?;
    let ack = r.u64().ok_or(short)?;
    let payload_len = r.u32().ok_or(short)?;
    let checksum = r.u32().ok_or(short)?;
    let header = Header {
        flags,
        session_id,
        path_id,
        seq,
        ack,
        payload_len,
    };
    Ok((header, checksum))
}

/// Cheap check of the fixed header only, for early drop: no checksum, no body.
///
/// Checks that `buf` holds at least [`HEADER_LEN`] bytes and the magic and version are right,
/// and returns the header fields unverified. It does not compare `payload_len` with
/// `buf.len()`, so `buf` may be just the first [`HEADER_LEN`] bytes of a datagram; compare
/// [`Header::wire_len`] with the datagram length if needed. A packet accepted here may still
/// be rejected by [`decode`].
pub fn peek_header(buf: &[u8]) -> Result<Header, DecodeError> {
    parse_fixed(buf).map(|(header, _)| header)
}

/// The checks [`decode`] makes before the body, in its order, of a datagram of `len` bytes
/// that starts with `head` (at least the fixed header). `body` is the `len - HEADER_LEN` bytes
/// after the header, which only a packet other than DATA needs (see "Checksums"); `None` if
/// the caller does not have them, for which any packet other than DATA is
/// [`DecodeError::BadBody`], after the length checks. Returns the header and the packet type.
fn check_header(
    head: &[u8],
    len: usize,
    body: Option<&[u8]>,
) -> Result<(Header, PacketType), DecodeError> {
    // A datagram shorter than the header is reported as such, whatever its bytes.
    let body_len = len.checked_sub(HEADER_LEN).ok_or(DecodeError::Short)?;
    let (header, stored) = parse_fixed(head)?;
    if usize::try_from(header.payload_len).ok() != Some(body_len) {
        return Err(DecodeError::LengthMismatch);
    }
    if header.too_long(len) {
        return Err(DecodeError::LengthMismatch);
    }
    let mut crc = header_checksum(head).ok_or(DecodeError::Short)?;
    if header.flags.checksum_covers_body() {
        let body = body
            .filter(|b| b.len() == body_len)
            .ok_or(DecodeError::BadBody)?;
        crc = crc32c(crc, body);
    }
    if crc != stored {
        return Err(DecodeError::BadChecksum);
    }
    let ty = header.flags.packet_type().ok_or(DecodeError::UnknownType)?;
    if !header.flags.is_valid_for(ty) {
        return Err(DecodeError::BadFlags);
    }
    Ok((header, ty))
}

/// Parse and fully validate (checksum included) one datagram; never panics on any input.
///
/// `buf` must be exactly one datagram (the UDP payload). The returned packet borrows variable
/// length parts (DATA bytes, SACK bitmap, endpoint list) from `buf`.
pub fn decode(buf: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let (header, ty) = check_header(buf, buf.len(), buf.get(HEADER_LEN..))?;
    let payload = buf.get(HEADER_LEN..).ok_or(DecodeError::Short)?;
    let body = match ty {
        PacketType::Syn => Body::Syn(Handshake::parse(payload)?),
        PacketType::SynAck => Body::SynAck(Handshake::parse(payload)?),
        PacketType::Ack => Body::Ack(Sack::parse(payload, header.ack)?),
        PacketType::Data => Body::data(payload),
        PacketType::Fin | PacketType::Rst | PacketType::Retry => {
            if !payload.is_empty() {
                return Err(DecodeError::BadBody);
            }
            match ty {
                PacketType::Fin => Body::Fin,
                PacketType::Rst => Body::Rst,
                _ => Body::Retry,
            }
        }
        PacketType::Probe | PacketType::ProbeAck => {
            let mut r = Reader::new(payload);
            let nonce = r.u64().ok_or(DecodeError::BadBody)?;
            let ts = r.u64().ok_or(DecodeError::BadBody)?;
            if !r.is_empty() {
                return Err(DecodeError::BadBody);
            }
            let probe = Probe { nonce, ts };
            if ty == PacketType::Probe {
                Body::Probe(probe)
            } else {
                Body::ProbeAck(probe)
            }
        }
    };
    Ok(Packet { header, body })
}

/// Parses and fully validates a DATA datagram whose payload the caller keeps; never panics on
/// any input.
///
/// The datagram is `len` bytes long. `head` holds its first bytes, at least the fixed header;
/// only those [`HEADER_LEN`] bytes are read. The payload, the `len - HEADER_LEN` bytes after the
/// header, stays wherever the caller keeps it (such as in the page fragments of a socket
/// buffer): the checksum does not cover it (see "Checksums").
///
/// For a DATA datagram the result is the one [`decode`] gives for the same bytes, packet or
/// error, except that the body's [`Payload`] has no bytes, only its length. Any other
/// datagram is rejected: with the error [`decode`] gives where that is about the length,
/// magic, version or `payload_len`, else with [`DecodeError::BadBody`] if its type field is
/// not DATA, else with the error [`decode`] gives.
pub fn decode_data(head: &[u8], len: usize) -> Result<Packet<'static>, DecodeError> {
    let (header, ty) = check_header(head, len, None)?;
    if ty != PacketType::Data {
        return Err(DecodeError::BadBody);
    }
    Ok(data_packet(header, len))
}

/// Decodes again a DATA datagram that [`decode_data`] accepted: `head` and `len` as they were
/// given to it. Of the checks, only those [`peek_header`] makes are made again, and the
/// checksum is not computed: for a receiver that checks a packet where it arrives and acts on
/// it later. For any other datagram, the result is a packet or error that means nothing.
pub fn redecode_data(head: &[u8], len: usize) -> Result<Packet<'static>, DecodeError> {
    peek_header(head).map(|header| data_packet(header, len))
}

/// The DATA packet of `header`, of a datagram of `len` bytes whose payload is elsewhere.
fn data_packet(header: Header, len: usize) -> Packet<'static> {
    // A checked header's `payload_len` is equal to this.
    let payload_len = len.saturating_sub(HEADER_LEN);
    Packet {
        header,
        body: Body::Data(Payload::elsewhere(payload_len)),
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

fn write_header(
    w: &mut Writer<'_>,
    header: &Header,
    flags: Flags,
    payload_len: u32,
) -> Result<(), EncodeError> {
    w.put(&MAGIC.to_be_bytes())?;
    w.put(&VERSION.to_be_bytes())?;
    w.put(&flags.0.to_be_bytes())?;
    w.put(&header.session_id.to_be_bytes())?;
    w.put(&header.path_id.to_be_bytes())?;
    w.put(&header.seq.to_be_bytes())?;
    w.put(&header.ack.to_be_bytes())?;
    w.put(&payload_len.to_be_bytes())?;
    w.put(&0u32.to_be_bytes())
}

/// Serialise into `out`; returns bytes written, computing payload_len and checksum.
///
/// The type field of `header.flags` is set from `body`; the modifiers and the direction bit are
/// kept, and the modifiers must be allowed for the type (see [`Flags::is_valid_for`]).
/// `header.payload_len` is ignored. Every packet this function writes is accepted by
/// [`decode`], which returns the same header (with the type and `payload_len` filled in) and an
/// equal body. A DATA body must carry its bytes ([`EncodeError::NoPayload`]).
pub fn encode(header: &Header, body: &Body<'_>, out: &mut [u8]) -> Result<usize, EncodeError> {
    let ty = body.packet_type();
    let flags = header.flags.with_type(ty);
    if !flags.is_valid_for(ty) {
        return Err(EncodeError::BadFlags);
    }
    match body {
        Body::Syn(h) | Body::SynAck(h) if !h.is_valid() => return Err(EncodeError::BadHandshake),
        Body::Ack(s) if !s.is_valid(header.ack) => return Err(EncodeError::BadSack),
        Body::Data(d) if d.bytes().is_none() => return Err(EncodeError::NoPayload),
        _ => {}
    }
    let body_len = body.wire_len().ok_or(EncodeError::TooLong)?;
    let payload_len = u32::try_from(body_len).map_err(|_| EncodeError::TooLong)?;
    let total = HEADER_LEN
        .checked_add(body_len)
        .ok_or(EncodeError::TooLong)?;
    let out = out.get_mut(..total).ok_or(EncodeError::BufferTooSmall)?;
    let mut w = Writer::new(out);
    write_header(&mut w, header, flags, payload_len)?;
    match body {
        Body::Syn(h) | Body::SynAck(h) => h.write(&mut w)?,
        Body::Ack(s) => s.write(&mut w)?,
        Body::Data(d) => w.put(d.bytes().ok_or(EncodeError::NoPayload)?)?,
        Body::Fin | Body::Rst | Body::Retry => {}
        Body::Probe(p) | Body::ProbeAck(p) => {
            w.put(&p.nonce.to_be_bytes())?;
            w.put(&p.ts.to_be_bytes())?;
        }
    }
    seal(out)?;
    Ok(total)
}

/// Writes the fixed header alone into `out`, with `header.payload_len` as given and a zero
/// checksum; returns [`HEADER_LEN`].
///
/// For building a packet in place: write the header, put `payload_len` bytes of body after it,
/// then call [`seal`]. The flags must be valid for their packet type.
pub fn encode_header(header: &Header, out: &mut [u8]) -> Result<usize, EncodeError> {
    let ty = header.flags.packet_type().ok_or(EncodeError::BadFlags)?;
    if !header.flags.is_valid_for(ty) {
        return Err(EncodeError::BadFlags);
    }
    let out = out
        .get_mut(..HEADER_LEN)
        .ok_or(EncodeError::BufferTooSmall)?;
    let mut w = Writer::new(out);
    write_header(&mut w, header, header.flags, header.payload_len)?;
    Ok(HEADER_LEN)
}

/// Computes the checksum of a complete packet and stores it in the header.
///
/// `packet` must be exactly a header and the `payload_len` bytes it announces. The body is not
/// validated.
pub fn seal(packet: &mut [u8]) -> Result<(), EncodeError> {
    let header = peek_header(packet).map_err(|_| EncodeError::LengthMismatch)?;
    if header.wire_len() != Some(packet.len()) {
        return Err(EncodeError::LengthMismatch);
    }
    let crc = packet_checksum(packet).ok_or(EncodeError::LengthMismatch)?;
    let field = packet
        .get_mut(CHECKSUM_OFFSET..HEADER_LEN)
        .ok_or(EncodeError::LengthMismatch)?;
    field.copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Returns the checksum of a datagram as the header's checksum field should hold it: the
/// header's, the checksum field read as zero, then the body's unless the type field says DATA
/// (see "Checksums").
///
/// Returns `None` if `buf` is shorter than the header.
pub fn packet_checksum(buf: &[u8]) -> Option<u32> {
    let crc = header_checksum(buf)?;
    let flags = Flags(u16::from_be_bytes([*buf.get(6)?, *buf.get(7)?]));
    if flags.checksum_covers_body() {
        Some(crc32c(crc, buf.get(HEADER_LEN..)?))
    } else {
        Some(crc)
    }
}

/// Returns the [`crc32c`] of a datagram's fixed header, the checksum field read as zero: all
/// that [`packet_checksum`] covers of a DATA packet. `None` if `head` is shorter than the
/// header.
pub fn header_checksum(head: &[u8]) -> Option<u32> {
    let before = head.get(..CHECKSUM_OFFSET)?;
    head.get(..HEADER_LEN)?;
    Some(crc32c(
        crc32c(0, before),
        &[0u8; HEADER_LEN - CHECKSUM_OFFSET],
    ))
}

/// Seals a DATA datagram whose payload is not behind its header in memory: `head` is the fixed
/// header ([`HEADER_LEN`] bytes), whose checksum covers it alone (see "Checksums"). The
/// checksum is the one [`seal`] writes for the same bytes in one buffer. A header of another
/// type is [`EncodeError::BadFlags`]: its checksum covers its body.
pub fn seal_head(head: &mut [u8]) -> Result<(), EncodeError> {
    let header = peek_header(head).map_err(|_| EncodeError::LengthMismatch)?;
    if header.flags.checksum_covers_body() {
        return Err(EncodeError::BadFlags);
    }
    let crc = header_checksum(head).ok_or(EncodeError::LengthMismatch)?;
    head.get_mut(CHECKSUM_OFFSET..HEADER_LEN)
        .ok_or(EncodeError::LengthMismatch)?
        .copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CRC32C
// ---------------------------------------------------------------------------------------------

/// Reflected CRC32C (Castagnoli) polynomial.
const CRC32C_POLY: u32 = 0x82F6_3B78;

/// Tables for slicing-by-8: `TABLES[0]` is the byte-wise table, `TABLES[k]` advances `k` more
/// zero bytes.
static CRC32C_TABLES: [[u32; 256]; 8] = crc32c_tables();

const fn crc32c_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC32C_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            s += 1;
        }
        i += 1;
    }
    t
}

#[inline(always)]
fn crc_tab(slice: usize, byte: u8) -> u32 {
    // A u8 index is always in bounds of a 256-entry table; `get` keeps that visible.
    CRC32C_TABLES
        .get(slice)
        .and_then(|t| t.get(usize::from(byte)))
        .copied()
        .unwrap_or(0)
}

/// Updates a raw CRC32C register with `data`, without the initial and final inversions
/// (slicing by 8).
///
/// This is the convention of the kernel's `crc32c(crc, p, len)`: the iSCSI checksum of `data`
/// is `!crc32c_raw(!0, data)`. The checksum covers headers and the bodies of control packets,
/// at most [`MAX_CONTROL_PACKET_LEN`] bytes in all, never a DATA payload, so this portable code,
/// the same in the module and on the host, is all it needs.
pub fn crc32c_raw(mut crc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            continue;
        };
        let v = u64::from_le_bytes(word) ^ u64::from(crc);
        let b = v.to_le_bytes();
        crc = crc_tab(7, b[0])
            ^ crc_tab(6, b[1])
            ^ crc_tab(5, b[2])
            ^ crc_tab(4, b[3])
            ^ crc_tab(3, b[4])
            ^ crc_tab(2, b[5])
            ^ crc_tab(1, b[6])
            ^ crc_tab(0, b[7]);
    }
    for &byte in chunks.remainder() {
        crc = crc_tab(0, (crc as u8) ^ byte) ^ (crc >> 8);
    }
    crc
}

// ---------------------------------------------------------------------------------------------
// SipHash
// ---------------------------------------------------------------------------------------------

/// One SipRound over the state `v`.
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// Absorbs one little-endian message word into the state `v` (two SipRounds).
fn sip_absorb(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    sip_round(v);
    sip_round(v);
    v[0] ^= m;
}

/// Returns SipHash-2-4 of `msg` under the 128-bit key `key` (`key[0]` is the first 8 key bytes
/// read little-endian, `key[1]` the next 8), as the reference implementation of Aumasson and
/// Bernstein computes it: a keyed pseudorandom function whose output an observer who does not
/// know the key cannot predict from other outputs.
pub fn siphash24(key: [u64; 2], msg: &[u8]) -> u64 {
    let [k0, k1] = key;
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = msg.chunks_exact(8);
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            continue;
        };
        sip_absorb(&mut v, u64::from_le_bytes(word));
    }
    // The last word holds the remaining bytes and the length modulo 256 in its top byte.
    let mut last = [0u8; 8];
    for (d, s) in last.iter_mut().zip(chunks.remainder()) {
        *d = *s;
    }
    last[7] = msg.len() as u8;
    sip_absorb(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Returns SipHash-2-4 under `key` of `session_id` and `counter` (16 bytes, each
/// little-endian): the `counter`-th value of a sequence of the session that looks random to
/// anyone without the key, such as the nonces of a connection's PROBEs. Sessions that share a
/// key still get unrelated sequences.
pub fn keyed_nonce(key: [u64; 2], session_id: u64, counter: u64) -> u64 {
    let mut msg = [0u8; 16];
    for (d, s) in msg.iter_mut().zip(
        session_id
            .to_le_bytes()
            .iter()
            .chain(counter.to_le_bytes().iter()),
    ) {
        *d = *s;
    }
    siphash24(key, &msg)
}

/// Returns the CRC32C of `data` continued from `init`, the CRC32C of the preceding bytes.
///
/// Start with `init = 0`: `crc32c(0, b"123456789") == 0xE3069283`, and
/// `crc32c(crc32c(0, a), b)` equals the CRC32C of `a` followed by `b`. Equivalent to
/// `!crc32c_raw(!init, data)`.
pub fn crc32c(init: u32, data: &[u8]) -> u32 {
    !crc32c_raw(!init, data)
}

// ---------------------------------------------------------------------------------------------
// Retry tokens
// ---------------------------------------------------------------------------------------------

/// Length of the time slots of [`retry_token`] in nanoseconds, 2^35 (about 34 s): a token is
/// accepted in its slot and the next one, between 34 and 69 s after it was made, which covers
/// the SYN retransmissions of one `connect()` (51 s).
pub const RETRY_SLOT_NS: u64 = 1 << 35;

/// What a retry token is bound to: everything in a SYN that names the connection it asks for
/// and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynId {
    /// Source address and UDP port of the SYN.
    pub src: Endpoint,
    /// Destination address and UDP port of the SYN.
    pub dst: Endpoint,
    /// Session id of the SYN.
    pub session_id: u64,
    /// Initial sequence number of the connecting end (the SYN's `seq_num`).
    pub initial_seq: u64,
    /// MRC port of the connecting socket (the handshake's `src_port`).
    pub src_port: u16,
    /// MRC port of the listener (the handshake's `dst_port`).
    pub dst_port: u16,
}

/// Returns the retry token of the SYN `syn` in time slot `slot` ([`RETRY_SLOT_NS`] long) under
/// the listener's secret `key`: SipHash-2-4 of the slot and every field of [`SynId`], never 0.
///
/// Without the key nobody can compute it, and it is bound to the SYN's source address: a SYN
/// that carries the token of its own fields comes from a sender that received the RETRY sent
/// to that address.
pub fn retry_token(key: [u64; 2], slot: u64, syn: &SynId) -> u64 {
    // 74 bytes: three u64, two addresses with family and port, two MRC ports.
    let mut msg = [0u8; 80];
    let parts: [&[u8]; 11] = [
        &slot.to_le_bytes(),
        &syn.session_id.to_le_bytes(),
        &syn.initial_seq.to_le_bytes(),
        &[syn.src.family],
        &syn.src.addr,
        &syn.src.port.to_le_bytes(),
        &[syn.dst.family],
        &syn.dst.addr,
        &syn.dst.port.to_le_bytes(),
        &syn.src_port.to_le_bytes(),
        &syn.dst_port.to_le_bytes(),
    ];
    let mut len = 0usize;
    for part in parts {
        for (d, s) in msg.iter_mut().skip(len).zip(part) {
            *d = *s;
        }
        len = len.saturating_add(part.len());
    }
    siphash24(key, msg.get(..len).unwrap_or(&msg)).max(1)
}

/// Returns whether `token` is the retry token of `syn` in the time slot `now_slot` or the one
/// before it.
pub fn retry_token_valid(key: [u64; 2], now_slot: u64, syn: &SynId, token: u64) -> bool {
    token != 0
        && (retry_token(key, now_slot, syn) == token
            || now_slot
                .checked_sub(1)
                .is_some_and(|prev| retry_token(key, prev, syn) == token))
}
