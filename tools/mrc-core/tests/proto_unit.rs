// SPDX-License-Identifier: GPL-2.0
//! Unit tests of the wire format: CRC32C vectors, per-type round trips, every decode error.

use mrc_core::mrc_proto::*;

/// Bit-at-a-time CRC32C, independent of the table-driven implementation.
fn crc32c_reference(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn header() -> Header {
    Header {
        flags: Flags::default(),
        session_id: 0x0102_0304_0506_0708,
        path_id: 0x1122_3344,
        seq: 0xA1A2_A3A4_A5A6_A7A8,
        ack: 1000,
        payload_len: 0,
    }
}

fn enc(header: &Header, body: &Body<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = encode(header, body, &mut buf).expect("encode");
    buf.truncate(n);
    buf
}

/// Encodes, decodes, checks equality and byte-exact re-encoding; returns the bytes.
fn round_trip(header: &Header, body: &Body<'_>) -> Vec<u8> {
    let bytes = enc(header, body);
    let pkt = decode(&bytes).expect("decode");
    let mut want = *header;
    want.flags = header.flags.with_type(body.packet_type());
    want.payload_len = u32::try_from(bytes.len() - HEADER_LEN).unwrap();
    assert_eq!(pkt.header, want);
    assert_eq!(pkt.body, *body);
    assert_eq!(peek_header(&bytes), Ok(want));
    assert_eq!(enc(&pkt.header, &pkt.body), bytes);
    bytes
}

/// Rewrites the checksum after a deliberate edit so that later checks are reached.
fn reseal(bytes: &mut [u8]) {
    let crc = packet_checksum(bytes).unwrap();
    bytes[40..44].copy_from_slice(&crc.to_be_bytes());
}

fn set_u16(bytes: &mut [u8], off: usize, v: u16) {
    bytes[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

fn set_u32(bytes: &mut [u8], off: usize, v: u32) {
    bytes[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

fn set_u64(bytes: &mut [u8], off: usize, v: u64) {
    bytes[off..off + 8].copy_from_slice(&v.to_be_bytes());
}

// --- CRC32C ---------------------------------------------------------------------------------

#[test]
fn crc32c_check_value() {
    assert_eq!(crc32c(0, b"123456789"), 0xE306_9283);
    assert_eq!(crc32c_reference(b"123456789"), 0xE306_9283);
}

#[test]
fn crc32c_rfc3720_vectors() {
    assert_eq!(crc32c(0, &[]), 0);
    assert_eq!(crc32c(0, &[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc32c(0, &[0xFFu8; 32]), 0x62A8_AB43);
    let inc: Vec<u8> = (0u8..32).collect();
    assert_eq!(crc32c(0, &inc), 0x46DD_794E);
    let dec: Vec<u8> = (0u8..32).rev().collect();
    assert_eq!(crc32c(0, &dec), 0x113F_DB5C);
}

#[test]
fn crc32c_matches_reference_all_lengths_and_alignments() {
    let data: Vec<u8> = (0..300u32)
        .map(|i| (i.wrapping_mul(97) ^ (i >> 3)) as u8)
        .collect();
    for start in 0..9 {
        for end in start..data.len() {
            let d = &data[start..end];
            assert_eq!(crc32c(0, d), crc32c_reference(d), "{start}..{end}");
        }
    }
}

#[test]
fn crc32c_chains_and_raw_convention() {
    let data = b"The quick brown fox jumps over the lazy dog, twice over.";
    let whole = crc32c(0, data);
    for split in 0..=data.len() {
        let (a, b) = data.split_at(split);
        assert_eq!(crc32c(crc32c(0, a), b), whole);
        assert_eq!(!crc32c_raw(crc32c_raw(!0, a), b), whole);
    }
}

// --- Round trips ----------------------------------------------------------------------------

/// The fixed header of `header()` with the given flags bytes and `payload_len`, the checksum
/// field zero, spelled out byte by byte.
fn golden_head(flags: [u8; 2], payload_len: u8) -> Vec<u8> {
    vec![
        0x4D,
        0x52,
        0x43,
        0x20, // magic
        0x00,
        0x02, // version
        flags[0],
        flags[1], // flags
        0x01,
        0x02,
        0x03,
        0x04,
        0x05,
        0x06,
        0x07,
        0x08, // session_id
        0x11,
        0x22,
        0x33,
        0x44, // path_id
        0xA1,
        0xA2,
        0xA3,
        0xA4,
        0xA5,
        0xA6,
        0xA7,
        0xA8, // seq
        0,
        0,
        0,
        0,
        0,
        0,
        0x03,
        0xE8, // ack
        0,
        0,
        0,
        payload_len, // payload_len
        0,
        0,
        0,
        0, // checksum
    ]
}

#[test]
fn golden_fin_layout() {
    let h = Header {
        flags: Flags::new(PacketType::Fin),
        ..header()
    };
    let bytes = round_trip(&h, &Body::Fin);
    // flags: FIN
    let mut want = golden_head([0x00, 0x05], 0);
    let crc = crc32c_reference(&want);
    want[40..44].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(bytes, want);
}

#[test]
fn golden_data_layout() {
    // A DATA packet's checksum covers its header alone (see "Checksums").
    let h = Header {
        flags: Flags::FIRST | Flags::LAST,
        ..header()
    };
    let bytes = round_trip(&h, &Body::data(b"hi!"));
    // flags: FIRST | LAST | DATA
    let mut want = golden_head([0x03, 0x04], 3);
    let crc = crc32c_reference(&want);
    want[40..44].copy_from_slice(&crc.to_be_bytes());
    want.extend_from_slice(b"hi!");
    assert_eq!(bytes, want);
}

#[test]
fn golden_passive_layout() {
    // The direction bit is bit 12: the high byte of the flags field gets 0x10.
    let h = Header {
        flags: Flags::PASSIVE | Flags::ECE,
        ..header()
    };
    let bytes = round_trip(&h, &Body::Rst);
    // flags: PASSIVE | ECE | RST
    let mut want = golden_head([0x14, 0x06], 0);
    let crc = crc32c_reference(&want);
    want[40..44].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(bytes, want);
    assert_eq!(Flags::PASSIVE.0, 0x1000);
    let pkt = decode(&bytes).unwrap();
    assert!(pkt.header.flags.passive() && pkt.header.flags.ece());
    // The same packet without the bit differs in that byte only (and the checksum).
    let plain = enc(
        &Header {
            flags: Flags::ECE,
            ..header()
        },
        &Body::Rst,
    );
    assert_eq!(&plain[6..8], &[0x04, 0x06]);
    assert_eq!(plain[..6], bytes[..6]);
    assert_eq!(plain[8..40], bytes[8..40]);
    assert!(!decode(&plain).unwrap().header.flags.passive());
}

#[test]
fn golden_probe_layout() {
    let probe = Probe {
        nonce: 0x0102_0304_0506_0708,
        ts: 0x1112_1314_1516_1718,
    };
    let bytes = round_trip(&header(), &Body::Probe(probe));
    assert_eq!(bytes.len(), HEADER_LEN + PROBE_LEN);
    assert_eq!(&bytes[6..8], &[0, 7]);
    assert_eq!(&bytes[36..40], &[0, 0, 0, 16]);
    assert_eq!(&bytes[44..52], &probe.nonce.to_be_bytes());
    assert_eq!(&bytes[52..60], &probe.ts.to_be_bytes());
}

#[test]
fn round_trip_every_type() {
    let eps = [
        Endpoint::v4([10, 0, 0, 1], 6000, false),
        Endpoint::v6(
            [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            6001,
            true,
        ),
    ];
    let bitmap = [0b0000_0101u8, 0, 0x80];
    let probe = Probe { nonce: 7, ts: 99 };
    let bodies = [
        Body::Syn(Handshake::new(5, 1 << 20, 4791, 80, &eps)),
        Body::SynAck(Handshake::new(u64::MAX, 0, u16::MAX, 0, &[])),
        Body::Ack(Sack::new(123_456_789, 65536, 1001, &bitmap)),
        Body::Ack(Sack::new(0, 0, 1000, &[])),
        Body::Ack(Sack::new(0, 0, 1000, &[]).with_delay(1_000_000)),
        Body::data(b"hello, world"),
        Body::data(&[]),
        Body::Fin,
        Body::Rst,
        Body::Probe(probe),
        Body::ProbeAck(probe),
    ];
    for body in &bodies {
        round_trip(&header(), body);
    }
}

#[test]
fn passive_round_trips_on_every_type() {
    let eps = [Endpoint::v4([10, 0, 0, 1], 6000, false)];
    let bitmap = [0b0000_0101u8];
    let probe = Probe { nonce: 7, ts: 99 };
    let bodies = [
        Body::Syn(Handshake::new(5, 1 << 20, 4791, 80, &eps)),
        Body::SynAck(Handshake::new(6, 0, 80, 4791, &eps)),
        Body::Ack(Sack::new(1, 65536, 1001, &bitmap)),
        Body::data(b"hello"),
        Body::Fin,
        Body::Rst,
        Body::Probe(probe),
        Body::ProbeAck(probe),
        Body::Retry,
    ];
    let mut seen = Vec::new();
    for body in &bodies {
        let ty = body.packet_type();
        seen.push(ty);
        for extra in [Flags::default(), Flags::ECE, Flags(ty.allowed_modifiers())] {
            for passive in [false, true] {
                let flags = if passive {
                    extra | Flags::PASSIVE
                } else {
                    extra
                };
                let h = Header { flags, ..header() };
                let bytes = round_trip(&h, body);
                assert_eq!(bytes[6] & 0x10 != 0, passive, "{ty}");
                let got = decode(&bytes).unwrap().header.flags;
                assert_eq!(got.passive(), passive, "{ty}");
                assert_eq!(got.without(Flags::PASSIVE), extra.with_type(ty));
                // encode_header accepts it too.
                let hh = Header {
                    flags: flags.with_type(ty),
                    ..header()
                };
                assert_eq!(encode_header(&hh, &mut [0u8; HEADER_LEN]), Ok(HEADER_LEN));
            }
        }
    }
    assert_eq!(seen, PacketType::ALL);
}

#[test]
fn encode_sets_type_from_body() {
    // A stale type in the header is replaced by the body's.
    let h = Header {
        flags: Flags::new(PacketType::Syn),
        ..header()
    };
    let bytes = enc(&h, &Body::Rst);
    assert_eq!(
        decode(&bytes).unwrap().header.packet_type(),
        Some(PacketType::Rst)
    );
}

#[test]
fn data_fragment_flags() {
    for flags in [
        Flags::FIRST,
        Flags::LAST,
        Flags::FIRST | Flags::LAST,
        Flags::default(),
        Flags::FIRST | Flags::ECE,
    ] {
        let h = Header { flags, ..header() };
        let bytes = round_trip(&h, &Body::data(b"x"));
        let pkt = decode(&bytes).unwrap();
        assert_eq!(pkt.header.flags.first(), flags.first());
        assert_eq!(pkt.header.flags.last(), flags.last());
        assert_eq!(pkt.header.flags.ece(), flags.ece());
    }
}

#[test]
fn handshake_endpoints_decode() {
    let eps: Vec<Endpoint> = (0..MAX_ENDPOINTS as u8)
        .map(|i| {
            if i % 2 == 0 {
                Endpoint::v4([192, 168, i, 1], 4000 + u16::from(i), i % 3 == 0)
            } else {
                let mut a = [0u8; 16];
                a[15] = i;
                Endpoint::v6(a, 5000, false)
            }
        })
        .collect();
    let bytes = round_trip(
        &header(),
        &Body::Syn(Handshake::new(42, 9999, 1000, 2000, &eps)),
    );
    assert_eq!(bytes.len(), MAX_CONTROL_PACKET_LEN);
    assert_eq!(MAX_CONTROL_PACKET_LEN, 381);
    let Body::Syn(hs) = decode(&bytes).unwrap().body else {
        panic!("not a SYN");
    };
    assert_eq!(hs.initial_seq, 42);
    assert_eq!(hs.rwnd, 9999);
    assert_eq!((hs.src_port, hs.dst_port), (1000, 2000));
    assert_eq!(hs.endpoint_count(), MAX_ENDPOINTS);
    assert_eq!(hs.endpoints().collect::<Vec<_>>(), eps);
    assert_eq!(eps[0].ipv4(), Some([192, 168, 0, 1]));
    assert_eq!(eps[1].ipv4(), None);
}

#[test]
fn only_data_may_be_longer_than_the_longest_control_packet() {
    let of = |ty| Header {
        flags: Flags::new(ty),
        ..header()
    };
    for ty in [
        PacketType::Syn,
        PacketType::Ack,
        PacketType::Fin,
        PacketType::Rst,
    ] {
        assert!(!of(ty).too_long(MAX_CONTROL_PACKET_LEN), "{ty:?}");
        assert!(of(ty).too_long(MAX_CONTROL_PACKET_LEN + 1), "{ty:?}");
    }
    let unknown = Header {
        flags: Flags(Flags::TYPE_MASK),
        ..header()
    };
    assert!(unknown.packet_type().is_none());
    assert!(unknown.too_long(MAX_CONTROL_PACKET_LEN + 1));
    assert!(!of(PacketType::Data).too_long(65_000));
}

#[test]
fn golden_handshake_layout_with_ports() {
    let eps = [Endpoint::v4([10, 1, 2, 3], 0x1770, true)];
    let h = Header {
        flags: Flags::new(PacketType::SynAck),
        ..header()
    };
    let hs = Handshake::new(0x0102_0304_0506_0708, 0x0A0B_0C0D, 0xBEEF, 0x0050, &eps);
    let bytes = round_trip(&h, &Body::SynAck(hs));
    assert_eq!(HANDSHAKE_FIXED_LEN, 17);
    assert_eq!(bytes.len(), HEADER_LEN + HANDSHAKE_FIXED_LEN + ENDPOINT_LEN);
    assert_eq!(&bytes[6..8], &[0, 2]);
    #[rustfmt::skip]
    let body = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // initial_seq
        0x0A, 0x0B, 0x0C, 0x0D, // rwnd
        0xBE, 0xEF, // src_port
        0x00, 0x50, // dst_port
        0x01, // endpoint count
        0x04, 0x01, 0x17, 0x70, // family, flags (backup), port
        10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // address
    ];
    assert_eq!(&bytes[HEADER_LEN..], &body);
}

#[test]
fn handshake_ports_round_trip() {
    for (src, dst) in [(0, 0), (1, u16::MAX), (u16::MAX, 1), (0x1234, 0x5678)] {
        for syn in [true, false] {
            let hs = Handshake::new(7, 8, src, dst, &[]);
            let body = if syn { Body::Syn(hs) } else { Body::SynAck(hs) };
            let bytes = round_trip(&header(), &body);
            let (Body::Syn(got) | Body::SynAck(got)) = decode(&bytes).unwrap().body else {
                panic!("not a handshake");
            };
            assert_eq!((got.src_port, got.dst_port), (src, dst));
        }
    }
    // Ports take part in equality.
    let a = Handshake::new(1, 2, 3, 4, &[]);
    assert_eq!(a, Handshake::new(1, 2, 3, 4, &[]));
    assert_ne!(a, Handshake::new(1, 2, 4, 4, &[]));
    assert_ne!(a, Handshake::new(1, 2, 3, 3, &[]));
}

#[test]
fn sack_helpers() {
    let bitmap = [0b1000_0001u8, 0, 0b0000_0010];
    let s = Sack::new(0, 0, 100, &bitmap);
    let got: Vec<u64> = s.sacked().collect();
    assert_eq!(got, vec![100, 107, 117]);
    for seq in 0..200 {
        assert_eq!(s.is_set(seq), got.contains(&seq), "seq {seq}");
    }
    assert!(!s.is_set(u64::MAX));
    assert_eq!(s.end(), 124);
    let empty = Sack::new(0, 0, 5, &[]);
    assert_eq!(empty.sacked().count(), 0);
    assert!(!empty.is_set(5));
    // Near the top of the sequence space the iterator stops instead of overflowing.
    let top = Sack::new(0, 0, u64::MAX - 3, &[0xFF]);
    assert_eq!(
        top.sacked().collect::<Vec<_>>(),
        vec![u64::MAX - 3, u64::MAX - 2, u64::MAX - 1, u64::MAX]
    );
    assert!(top.is_set(u64::MAX));
    assert_eq!(top.end(), u64::MAX);
}

#[test]
fn sack_full_bitmap_round_trip() {
    let bitmap = [0xA5u8; MAX_SACK_BYTES];
    let h = header();
    let bytes = round_trip(&h, &Body::Ack(Sack::new(1, 2, h.ack, &bitmap)));
    let Body::Ack(s) = decode(&bytes).unwrap().body else {
        panic!("not an ACK");
    };
    assert_eq!(s.sacked().count(), MAX_SACK_BITS / 2);
}

#[test]
fn sack_delay_is_carried_in_nanoseconds_and_saturates() {
    let h = header();
    let bytes = round_trip(
        &h,
        &Body::Ack(Sack::new(0, 7, h.ack, &[]).with_delay(1_234_567)),
    );
    // dsack u64, base u64, rwnd u32, then the delay.
    let off = HEADER_LEN + 20;
    assert_eq!(&bytes[off..off + 4], &1_234_567u32.to_be_bytes());
    assert_eq!(bytes.len(), HEADER_LEN + SACK_FIXED_LEN);
    let Body::Ack(s) = decode(&bytes).unwrap().body else {
        panic!("not an ACK");
    };
    assert_eq!((s.delay_ns, s.rwnd), (1_234_567, 7));
    let long = Sack::new(0, 0, 0, &[]).with_delay(u64::from(u32::MAX) + 1);
    assert_eq!(long.delay_ns, u32::MAX);
    assert_eq!(Sack::new(0, 0, 0, &[]).delay_ns, 0);
}

#[test]
fn peek_header_needs_only_the_header() {
    let bytes = enc(&header(), &Body::data(b"payload bytes"));
    let h = peek_header(&bytes[..HEADER_LEN]).unwrap();
    assert_eq!(h.payload_len, 13);
    assert_eq!(h.wire_len(), Some(bytes.len()));
    assert_eq!(
        peek_header(&bytes[..HEADER_LEN - 1]),
        Err(DecodeError::Short)
    );
}

#[test]
fn encode_header_then_seal() {
    let payload = b"in-place payload";
    let mut h = Header {
        flags: Flags::new(PacketType::Data) | Flags::FIRST | Flags::LAST,
        ..header()
    };
    h.payload_len = payload.len() as u32;
    let mut buf = vec![0u8; HEADER_LEN + payload.len()];
    assert_eq!(encode_header(&h, &mut buf), Ok(HEADER_LEN));
    buf[HEADER_LEN..].copy_from_slice(payload);
    assert_eq!(decode(&buf), Err(DecodeError::BadChecksum));
    seal(&mut buf).unwrap();
    assert_eq!(buf, enc(&h, &Body::data(payload)));
    // seal refuses a buffer that does not match payload_len.
    assert_eq!(
        seal(&mut buf[..HEADER_LEN + 1]),
        Err(EncodeError::LengthMismatch)
    );
    assert_eq!(seal(&mut buf[..10]), Err(EncodeError::LengthMismatch));
    // encode_header validates flags and the buffer.
    assert_eq!(
        encode_header(&h, &mut [0u8; HEADER_LEN - 1]),
        Err(EncodeError::BufferTooSmall)
    );
    let bad = Header {
        flags: Flags(0),
        ..h
    };
    assert_eq!(encode_header(&bad, &mut buf), Err(EncodeError::BadFlags));
}

#[test]
fn flags_rules() {
    for ty in PacketType::ALL {
        assert_eq!(PacketType::from_wire(ty.to_wire()), Some(ty));
        assert_eq!(PacketType::ALL[ty.index()], ty);
        let f = Flags::new(ty);
        assert_eq!(f.packet_type(), Some(ty));
        assert!(f.is_valid_for(ty));
        assert!(f.with(Flags::ECE).is_valid_for(ty));
        assert_eq!(
            f.with(Flags::FIRST).is_valid_for(ty),
            ty == PacketType::Data
        );
        assert_eq!(f.with(Flags::LAST).is_valid_for(ty), ty == PacketType::Data);
        assert_eq!(f.with(Flags::NACK).is_valid_for(ty), ty == PacketType::Ack);
        // The direction bit is valid on every type, alone or with the allowed modifiers.
        assert!(f.with(Flags::PASSIVE).is_valid_for(ty));
        assert!(Flags(f.0 | ty.allowed_modifiers())
            .with(Flags::PASSIVE)
            .is_valid_for(ty));
        assert_eq!(ty.allowed_modifiers() & Flags::PASSIVE.0, 0);
        // It does not make a disallowed modifier acceptable.
        assert_eq!(
            f.with(Flags::PASSIVE | Flags::NACK).is_valid_for(ty),
            ty == PacketType::Ack
        );
        for bit in 0..16 {
            if (1u16 << bit) & Flags::RESERVED_MASK != 0 {
                assert!(!Flags(f.0 | (1 << bit)).is_valid_for(ty));
                assert!(!Flags(f.0 | (1 << bit))
                    .with(Flags::PASSIVE)
                    .is_valid_for(ty));
            }
        }
    }
    assert_eq!(PacketType::from_wire(0), None);
    assert_eq!(PacketType::from_wire(9), Some(PacketType::Retry));
    assert_eq!(PacketType::from_wire(10), None);
    assert_eq!(
        Flags::TYPE_MASK | Flags::MODIFIER_MASK | Flags::DIRECTION_MASK | Flags::RESERVED_MASK,
        0xFFFF
    );
    let masks = [
        Flags::TYPE_MASK,
        Flags::MODIFIER_MASK,
        Flags::DIRECTION_MASK,
        Flags::RESERVED_MASK,
    ];
    for (i, a) in masks.iter().enumerate() {
        for b in &masks[i + 1..] {
            assert_eq!(a & b, 0);
        }
    }
    assert_eq!(Flags::DIRECTION_MASK, Flags::PASSIVE.0);
    assert_eq!(Flags::PASSIVE.0, 1 << 12);
    assert_eq!(Flags::RESERVED_MASK, 0xE0F0);
    let f = Flags::new(PacketType::Data) | Flags::FIRST;
    assert!(f.first() && !f.last());
    assert!(!f.without(Flags::FIRST).first());
    assert!(!f.passive());
    assert!(f.with(Flags::PASSIVE).passive());
    assert!(!f.with(Flags::PASSIVE).without(Flags::PASSIVE).passive());
}

#[test]
fn decode_error_table() {
    assert_eq!(DecodeError::ALL.len(), DecodeError::COUNT);
    let mut names = std::collections::HashSet::new();
    for (i, e) in DecodeError::ALL.iter().enumerate() {
        assert_eq!(e.index(), i);
        assert!(names.insert(e.name()), "duplicate name {}", e.name());
        assert!(e
            .name()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_'));
        assert_eq!(e.to_string(), e.name());
    }
    assert_eq!(DecodeError::BadChecksum.name(), "bad_checksum");
}

// --- Every decode error ---------------------------------------------------------------------

fn valid(body: &Body<'_>) -> Vec<u8> {
    enc(&header(), body)
}

#[test]
fn err_short() {
    let bytes = valid(&Body::Fin);
    for n in 0..HEADER_LEN {
        assert_eq!(decode(&bytes[..n]), Err(DecodeError::Short), "len {n}");
    }
}

#[test]
fn err_bad_magic() {
    let mut bytes = valid(&Body::Fin);
    bytes[0] ^= 0x01;
    assert_eq!(decode(&bytes), Err(DecodeError::BadMagic));
    assert_eq!(peek_header(&bytes), Err(DecodeError::BadMagic));
}

#[test]
fn err_bad_version() {
    // Version 1 covered every DATA payload with the checksum.
    for v in [0, 1, 3, u16::MAX] {
        let mut bytes = valid(&Body::Fin);
        set_u16(&mut bytes, 4, v);
        reseal(&mut bytes);
        assert_eq!(decode(&bytes), Err(DecodeError::BadVersion), "version {v}");
        assert_eq!(peek_header(&bytes), Err(DecodeError::BadVersion));
    }
}

#[test]
fn err_length_mismatch() {
    let mut bytes = valid(&Body::data(b"abcd"));
    // Truncated datagram.
    assert_eq!(
        decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::LengthMismatch)
    );
    // Extra trailing byte.
    bytes.push(0);
    assert_eq!(decode(&bytes), Err(DecodeError::LengthMismatch));
    bytes.pop();
    // Huge payload_len.
    set_u32(&mut bytes, 36, u32::MAX);
    assert_eq!(decode(&bytes), Err(DecodeError::LengthMismatch));
}

#[test]
fn err_bad_checksum() {
    // The header of every packet is covered...
    let mut bytes = valid(&Body::data(b"abcd"));
    bytes[20] ^= 0x80;
    assert_eq!(decode(&bytes), Err(DecodeError::BadChecksum));
    let mut bytes = valid(&Body::Fin);
    bytes[41] ^= 0x10;
    assert_eq!(decode(&bytes), Err(DecodeError::BadChecksum));
    // ...and the body of every packet but DATA.
    let mut bytes = valid(&Body::Probe(Probe { nonce: 7, ts: 9 }));
    *bytes.last_mut().unwrap() ^= 0x80;
    assert_eq!(decode(&bytes), Err(DecodeError::BadChecksum));
    let mut bytes = valid(&Body::Ack(Sack::new(0, 100, 1000, &[0x05])));
    *bytes.last_mut().unwrap() ^= 0x02;
    assert_eq!(decode(&bytes), Err(DecodeError::BadChecksum));
}

#[test]
fn a_data_payload_is_left_to_the_udp_checksum() {
    let bytes = valid(&Body::data(b"abcd"));
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 0x80;
    let pkt = decode(&flipped).expect("a DATA payload is not covered");
    assert_eq!(pkt.body, Body::data(b"abc\xe4"));
    // The checksum is the header's alone, whatever the payload.
    assert_eq!(packet_checksum(&bytes), packet_checksum(&flipped));
    assert_eq!(packet_checksum(&bytes), header_checksum(&bytes));
    // The type field is covered: a DATA packet cannot pass for another type, whose body the
    // checksum covers, or the other way round.
    let mut other = bytes.clone();
    set_u16(&mut other, 6, PacketType::Ack.to_wire());
    assert_eq!(decode(&other), Err(DecodeError::BadChecksum));
    let mut fin = valid(&Body::Fin);
    set_u16(&mut fin, 6, PacketType::Data.to_wire());
    assert_eq!(decode(&fin), Err(DecodeError::BadChecksum));
    // A header sealed for a payload elsewhere is what `seal` writes for the whole packet.
    let mut head = bytes[..HEADER_LEN].to_vec();
    head[40..44].fill(0);
    seal_head(&mut head).unwrap();
    assert_eq!(head, bytes[..HEADER_LEN]);
    // Only a DATA header: another's checksum covers its body.
    let mut ack = valid(&Body::Ack(Sack::new(0, 100, 1000, &[])));
    assert_eq!(
        seal_head(&mut ack[..HEADER_LEN]),
        Err(EncodeError::BadFlags)
    );
}

#[test]
fn err_unknown_type() {
    for t in [0u16, 10, 11, 15] {
        let mut bytes = valid(&Body::Fin);
        set_u16(&mut bytes, 6, t);
        reseal(&mut bytes);
        assert_eq!(decode(&bytes), Err(DecodeError::UnknownType), "type {t}");
        // peek does not look at the type.
        assert!(peek_header(&bytes).is_ok());
    }
}

#[test]
fn err_bad_flags() {
    let cases = [
        (Body::Fin, Flags::FIRST),
        (Body::Ack(Sack::new(0, 0, 1000, &[])), Flags::LAST),
        (Body::data(b"x"), Flags::NACK),
        (Body::data(b"x"), Flags(0x0010)),
        (Body::Probe(Probe::default()), Flags(0x8000)),
        // The direction bit does not make the other reserved bits or a disallowed modifier
        // acceptable.
        (Body::Rst, Flags::PASSIVE | Flags(0x2000)),
        (Body::Syn(Handshake::new(1, 2, 3, 4, &[])), Flags(0x4000)),
        (
            Body::ProbeAck(Probe::default()),
            Flags::PASSIVE | Flags(0x0080),
        ),
        (Body::Fin, Flags::PASSIVE | Flags::LAST),
    ];
    for (body, extra) in cases {
        let mut bytes = valid(&body);
        let flags = u16::from_be_bytes([bytes[6], bytes[7]]) | extra.0;
        set_u16(&mut bytes, 6, flags);
        reseal(&mut bytes);
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::BadFlags),
            "{body:?} {extra:?}"
        );
        let h = Header {
            flags: extra,
            ..header()
        };
        let mut out = [0u8; 512];
        assert_eq!(encode(&h, &body, &mut out), Err(EncodeError::BadFlags));
    }
}

#[test]
fn err_bad_sack() {
    let bitmap = [1u8, 2, 3];
    let ok = valid(&Body::Ack(Sack::new(1, 2, 1000, &bitmap)));
    // Offsets inside the ACK body.
    let base_off = HEADER_LEN + 8;
    let len_off = HEADER_LEN + 24;

    // Base below ack.
    let mut b = ok.clone();
    set_u64(&mut b, base_off, 999);
    reseal(&mut b);
    assert_eq!(decode(&b), Err(DecodeError::BadSack));

    // Bitmap length larger than the payload, and smaller.
    for len in [4u16, 2, 0, u16::MAX] {
        let mut b = ok.clone();
        set_u16(&mut b, len_off, len);
        reseal(&mut b);
        assert_eq!(decode(&b), Err(DecodeError::BadSack), "len {len}");
    }

    // Bitmap longer than MAX_SACK_BYTES, self-consistent otherwise.
    let big = vec![0u8; MAX_SACK_BYTES + 1];
    let mut b = valid(&Body::Ack(Sack::new(1, 2, 1000, &big[..MAX_SACK_BYTES])));
    b.push(0);
    let n = (b.len() - HEADER_LEN) as u32;
    set_u32(&mut b, 36, n);
    set_u16(&mut b, len_off, (MAX_SACK_BYTES + 1) as u16);
    reseal(&mut b);
    assert_eq!(decode(&b), Err(DecodeError::BadSack));

    // Body shorter than the fixed part.
    for keep in 0..SACK_FIXED_LEN {
        let mut b = ok[..HEADER_LEN + keep].to_vec();
        set_u32(&mut b, 36, keep as u32);
        reseal(&mut b);
        assert_eq!(decode(&b), Err(DecodeError::BadSack), "keep {keep}");
    }

    // Bitmap reaching past the end of the sequence space.
    let mut b = ok.clone();
    set_u64(&mut b, base_off, u64::MAX - 8);
    reseal(&mut b);
    assert_eq!(decode(&b), Err(DecodeError::BadSack));

    // The encoder refuses the same.
    let mut out = [0u8; 512];
    let h = header();
    assert_eq!(
        encode(&h, &Body::Ack(Sack::new(0, 0, 999, &[])), &mut out),
        Err(EncodeError::BadSack)
    );
    assert_eq!(
        encode(&h, &Body::Ack(Sack::new(0, 0, 1000, &big)), &mut out),
        Err(EncodeError::BadSack)
    );
    assert_eq!(
        encode(&h, &Body::Ack(Sack::new(0, 0, u64::MAX, &[1])), &mut out),
        Err(EncodeError::BadSack)
    );
}

type Mutation = Box<dyn Fn(&mut Vec<u8>)>;

#[test]
fn err_bad_handshake() {
    let eps = [
        Endpoint::v4([10, 0, 0, 1], 1, false),
        Endpoint::v4([10, 0, 0, 2], 2, true),
    ];
    let ok = valid(&Body::SynAck(Handshake::new(1, 2, 3, 4, &eps)));
    let count_off = HEADER_LEN + 16;
    let ep0 = HEADER_LEN + HANDSHAKE_FIXED_LEN;

    let mut mutations: Vec<Mutation> = vec![
        // Count larger and smaller than the list.
        Box::new(move |b| b[count_off] = 3),
        Box::new(move |b| b[count_off] = 1),
        // Unknown family.
        Box::new(move |b| b[ep0] = 5),
        Box::new(move |b| b[ep0] = 0),
        // Unknown endpoint flag bit.
        Box::new(move |b| b[ep0 + 1] = 0x02),
        // IPv4 address with non-zero padding.
        Box::new(move |b| b[ep0 + 4 + 4] = 1),
        // Trailing byte.
        Box::new(|b| b.push(0)),
        // Truncated endpoint.
        Box::new(|b| {
            b.pop();
        }),
        // Truncated fixed part: in the ports, before the count.
        Box::new(|b| b.truncate(HEADER_LEN + 16)),
        Box::new(|b| b.truncate(HEADER_LEN + 13)),
        Box::new(|b| b.truncate(HEADER_LEN + 12)),
        Box::new(|b| b.truncate(HEADER_LEN)),
    ];
    for (i, m) in mutations.iter_mut().enumerate() {
        let mut b = ok.clone();
        m(&mut b);
        let n = (b.len() - HEADER_LEN) as u32;
        set_u32(&mut b, 36, n);
        reseal(&mut b);
        assert_eq!(decode(&b), Err(DecodeError::BadHandshake), "mutation {i}");
    }

    // Too many endpoints, even if the bytes are all there.
    let many = vec![Endpoint::v4([1, 2, 3, 4], 5, false); MAX_ENDPOINTS + 1];
    let mut out = [0u8; 1024];
    let h = header();
    assert_eq!(
        encode(&h, &Body::Syn(Handshake::new(0, 0, 0, 0, &many)), &mut out),
        Err(EncodeError::BadHandshake)
    );
    let mut b = valid(&Body::Syn(Handshake::new(
        0,
        0,
        0,
        0,
        &many[..MAX_ENDPOINTS],
    )));
    // A count over the limit...
    b[count_off] = (MAX_ENDPOINTS + 1) as u8;
    reseal(&mut b);
    assert_eq!(decode(&b), Err(DecodeError::BadHandshake));
    // ...and the bytes of one more endpoint: longer than any valid control packet.
    b.extend_from_within(ep0..ep0 + ENDPOINT_LEN);
    let n = (b.len() - HEADER_LEN) as u32;
    set_u32(&mut b, 36, n);
    reseal(&mut b);
    assert_eq!(decode(&b), Err(DecodeError::LengthMismatch));

    // Invalid endpoints are refused by the encoder.
    let mut bad_v4 = Endpoint::v4([1, 2, 3, 4], 5, false);
    bad_v4.addr[10] = 1;
    let bad_family = Endpoint {
        family: 0,
        ..Endpoint::v6([0; 16], 1, false)
    };
    for ep in [bad_v4, bad_family] {
        assert!(!ep.is_valid());
        assert_eq!(
            encode(&h, &Body::Syn(Handshake::new(0, 0, 0, 0, &[ep])), &mut out),
            Err(EncodeError::BadHandshake)
        );
    }
}

#[test]
fn err_bad_body() {
    // FIN and RST with a body.
    for body in [Body::Fin, Body::Rst] {
        let mut b = valid(&body);
        b.push(0);
        set_u32(&mut b, 36, 1);
        reseal(&mut b);
        assert_eq!(decode(&b), Err(DecodeError::BadBody));
    }
    // PROBE and PROBE_ACK too short and too long.
    for body in [
        Body::Probe(Probe::default()),
        Body::ProbeAck(Probe::default()),
    ] {
        for len in [0usize, 8, 15, 17, 32] {
            let mut b = valid(&body);
            b.resize(HEADER_LEN + len, 0);
            set_u32(&mut b, 36, len as u32);
            reseal(&mut b);
            assert_eq!(decode(&b), Err(DecodeError::BadBody), "len {len}");
        }
    }
}

#[test]
fn every_decode_error_is_tested() {
    // Each variant has a crafted input above; this pins the list so a new variant is noticed.
    let names: Vec<&str> = DecodeError::ALL.iter().map(|e| e.name()).collect();
    assert_eq!(
        names,
        [
            "short",
            "bad_magic",
            "bad_version",
            "length_mismatch",
            "bad_checksum",
            "unknown_type",
            "bad_flags",
            "bad_sack",
            "bad_handshake",
            "bad_body"
        ]
    );
}

#[test]
fn encode_buffer_too_small() {
    let bodies = [
        Body::data(b"0123456789"),
        Body::Fin,
        Body::Probe(Probe::default()),
    ];
    for body in &bodies {
        let need = enc(&header(), body).len();
        for n in 0..need {
            let mut out = vec![0u8; n];
            assert_eq!(
                encode(&header(), body, &mut out),
                Err(EncodeError::BufferTooSmall)
            );
        }
        let mut out = vec![0u8; need];
        assert_eq!(encode(&header(), body, &mut out), Ok(need));
    }
}

// ---------------------------------------------------------------------------------------------
// SipHash
// ---------------------------------------------------------------------------------------------

/// The key of the SipHash test vectors: bytes 00 01 .. 0f.
const SIP_KEY: [u64; 2] = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];

#[test]
fn siphash24_matches_the_reference_vectors() {
    let msg: Vec<u8> = (0..64).collect();
    // Appendix A of the SipHash paper (Aumasson, Bernstein): message 00 .. 0e.
    assert_eq!(siphash24(SIP_KEY, &msg[..15]), 0xa129_ca61_49be_45e5);
    // vectors.h of the reference implementation: the empty message, and 00 .. 07.
    assert_eq!(siphash24(SIP_KEY, &[]), 0x726f_db47_dd0e_0e31);
    assert_eq!(siphash24(SIP_KEY, &msg[..8]), 0x93f5_f579_9a93_2462);
}

#[test]
#[allow(deprecated)]
fn siphash24_matches_std_for_every_length() {
    use std::hash::{Hasher, SipHasher};
    let msg: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
    for key in [SIP_KEY, [0, 0], [u64::MAX, 1 << 63]] {
        for len in 0..=msg.len() {
            let mut h = SipHasher::new_with_keys(key[0], key[1]);
            h.write(&msg[..len]);
            assert_eq!(siphash24(key, &msg[..len]), h.finish(), "len {len}");
        }
    }
}

#[test]
fn keyed_nonce_depends_on_key_session_and_counter() {
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&7u64.to_le_bytes());
    msg[8..].copy_from_slice(&1u64.to_le_bytes());
    assert_eq!(keyed_nonce(SIP_KEY, 7, 1), siphash24(SIP_KEY, &msg));
    let n = keyed_nonce(SIP_KEY, 7, 1);
    assert_ne!(n, keyed_nonce(SIP_KEY, 7, 2));
    assert_ne!(n, keyed_nonce(SIP_KEY, 8, 1));
    assert_ne!(n, keyed_nonce([SIP_KEY[0] ^ 1, SIP_KEY[1]], 7, 1));
}

// ---------------------------------------------------------------------------------------------
// Peer endpoint screening
// ---------------------------------------------------------------------------------------------

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

#[test]
fn peer_endpoints_must_be_routable_unicast() {
    let bad = [
        Endpoint::v4([10, 0, 0, 1], 0, false),
        Endpoint::v4([0, 0, 0, 0], 5000, false),
        Endpoint::v4([0, 1, 2, 3], 5000, false),
        Endpoint::v4([255, 255, 255, 255], 5000, false),
        Endpoint::v4([224, 0, 0, 1], 5000, false),
        Endpoint::v4([239, 255, 255, 250], 5000, false),
        Endpoint::v4([240, 0, 0, 1], 5000, false),
        Endpoint::v6(v6("::"), 5000, false),
        Endpoint::v6(v6("::ffff:10.0.0.1"), 5000, false),
        Endpoint::v6(v6("::ffff:127.0.0.1"), 5000, false),
        Endpoint::v6(v6("ff02::1"), 5000, false),
        Endpoint::v6(v6("ff0e::1"), 5000, false),
        Endpoint::v6(v6("2001:db8::1"), 0, false),
        Endpoint {
            family: 5,
            backup: false,
            port: 5000,
            addr: [1; 16],
        },
    ];
    let public = Endpoint::v4([192, 0, 2, 7], 5000, false);
    let lo = Endpoint::v4([127, 0, 0, 1], 5000, false);
    let ll = Endpoint::v6(v6("fe80::1"), 5000, false);
    for ep in &bad {
        assert!(!ep.is_routable_unicast(), "{ep:?}");
        for from in [None, Some(&public), Some(&lo), Some(&ll)] {
            assert!(!screen_peer_endpoint(ep, from), "{ep:?} from {from:?}");
        }
    }
    let good = [
        Endpoint::v4([10, 0, 0, 1], 1, false),
        Endpoint::v4([1, 0, 0, 0], 5000, true),
        Endpoint::v4([223, 255, 255, 255], 65535, false),
        Endpoint::v6(v6("2001:db8::1"), 5000, false),
        Endpoint::v6(v6("::1:0:0"), 5000, false),
        Endpoint::v6(v6("fc00::1"), 5000, false),
    ];
    for ep in &good {
        assert!(ep.is_routable_unicast(), "{ep:?}");
        for from in [None, Some(&public), Some(&lo), Some(&ll)] {
            assert!(screen_peer_endpoint(ep, from), "{ep:?} from {from:?}");
        }
    }
}

#[test]
fn loopback_and_link_local_endpoints_need_a_like_handshake_address() {
    let public = Endpoint::v4([192, 0, 2, 7], 5000, false);
    let lo4 = Endpoint::v4([127, 0, 0, 1], 5000, false);
    let lo4b = Endpoint::v4([127, 9, 9, 9], 6000, false);
    let lo6 = Endpoint::v6(v6("::1"), 5000, false);
    let ll4 = Endpoint::v4([169, 254, 1, 2], 5000, false);
    let ll6 = Endpoint::v6(v6("fe80::1"), 5000, false);
    let ll6b = Endpoint::v6(v6("febf::1"), 5000, false);
    assert!(!Endpoint::v6(v6("fec0::1"), 5000, false).is_link_local());
    for ep in [lo4, lo4b, lo6] {
        assert!(ep.is_loopback() && ep.is_routable_unicast());
        assert!(!screen_peer_endpoint(&ep, None));
        assert!(!screen_peer_endpoint(&ep, Some(&public)));
        assert!(!screen_peer_endpoint(&ep, Some(&ll6)));
        assert!(screen_peer_endpoint(&ep, Some(&lo4)));
        assert!(screen_peer_endpoint(&ep, Some(&lo6)));
    }
    for ep in [ll4, ll6, ll6b] {
        assert!(ep.is_link_local() && ep.is_routable_unicast());
        assert!(!screen_peer_endpoint(&ep, None));
        assert!(!screen_peer_endpoint(&ep, Some(&public)));
        assert!(!screen_peer_endpoint(&ep, Some(&lo4)));
        assert!(screen_peer_endpoint(&ep, Some(&ll4)));
        assert!(screen_peer_endpoint(&ep, Some(&ll6)));
    }
}

// --- DATA with the payload elsewhere --------------------------------------------------------

/// `decode_data` on `bytes` as a socket buffer would give them: the fixed header (or what
/// there is of it) at hand, the payload elsewhere.
fn decode_split(bytes: &[u8]) -> Result<Packet<'static>, DecodeError> {
    decode_data(&bytes[..bytes.len().min(HEADER_LEN)], bytes.len())
}

#[test]
fn decode_data_accepts_what_decode_accepts() {
    for payload in [&b""[..], b"x", b"0123456789", &[0xA5; 1500]] {
        for flags in [
            Flags::default(),
            Flags::FIRST | Flags::LAST,
            Flags::ECE | Flags::PASSIVE,
        ] {
            let h = Header { flags, ..header() };
            let bytes = enc(&h, &Body::data(payload));
            let full = decode(&bytes).expect("decode");
            let pkt = decode_split(&bytes).expect("decode_data");
            assert_eq!(pkt.header, full.header);
            let Body::Data(d) = pkt.body else {
                panic!("not DATA: {:?}", pkt.body);
            };
            assert_eq!(d.len(), payload.len());
            assert_eq!(d.is_empty(), payload.is_empty());
            assert_eq!(d.bytes(), None);
            assert_eq!(pkt.body.wire_len(), Some(payload.len()));
            // Bytes after the header in `head` are not read.
            let pkt = decode_data(&bytes, bytes.len());
            assert_eq!(pkt.map(|p| p.header), Ok(full.header));
        }
    }
}

#[test]
fn decode_data_rejects_a_bad_checksum() {
    let bytes = valid(&Body::data(b"abcdefgh"));
    for i in (0..HEADER_LEN).filter(|i| !(4..8).contains(i) && !(36..40).contains(i)) {
        let mut bad = bytes.clone();
        bad[i] ^= 0x04;
        let want = if i < 4 {
            DecodeError::BadMagic
        } else {
            DecodeError::BadChecksum
        };
        assert_eq!(decode_split(&bad), Err(want), "byte {i}");
        assert_eq!(decode(&bad), Err(want), "byte {i}");
    }
}

#[test]
fn decode_data_rejects_a_wrong_length() {
    let mut bytes = valid(&Body::data(b"abcd"));
    // The datagram is shorter or longer than the header says.
    assert_eq!(
        decode_split(&bytes[..bytes.len() - 1]),
        Err(DecodeError::LengthMismatch)
    );
    let head = bytes[..HEADER_LEN].to_vec();
    for len in [HEADER_LEN, HEADER_LEN + 3, HEADER_LEN + 5, usize::MAX] {
        assert_eq!(
            decode_data(&head, len),
            Err(DecodeError::LengthMismatch),
            "len {len}"
        );
    }
    assert!(decode_data(&head, bytes.len()).is_ok());
    // Shorter than a header, or no header at hand.
    for n in 0..HEADER_LEN {
        assert_eq!(decode_split(&bytes[..n]), Err(DecodeError::Short));
        assert_eq!(
            decode_data(&bytes[..n], bytes.len()),
            Err(DecodeError::Short)
        );
    }
    // Huge payload_len.
    set_u32(&mut bytes, 36, u32::MAX);
    assert_eq!(decode_split(&bytes), Err(DecodeError::LengthMismatch));
}

#[test]
fn decode_data_rejects_other_types() {
    let eps = [Endpoint::v4([192, 0, 2, 1], 4791, false)];
    let bitmap = [0x05u8];
    let probe = Probe { nonce: 7, ts: 9 };
    for body in [
        Body::Syn(Handshake::new(1, 2, 3, 4, &eps)),
        Body::SynAck(Handshake::new(1, 2, 3, 4, &eps)),
        Body::Ack(Sack::new(0, 100, 1000, &bitmap)),
        Body::Fin,
        Body::Rst,
        Body::Probe(probe),
        Body::ProbeAck(probe),
    ] {
        let bytes = valid(&body);
        assert!(decode(&bytes).is_ok());
        assert_eq!(
            decode_split(&bytes),
            Err(DecodeError::BadBody),
            "{:?}",
            body.packet_type()
        );
    }
    // A DATA header with another type value, unknown ones included: not DATA, whose checksum
    // would cover a body that is not at hand; `decode` sees the unknown type.
    for t in [0u16, 10, 15] {
        let mut bytes = valid(&Body::data(b"abcd"));
        set_u16(&mut bytes, 6, t);
        reseal(&mut bytes);
        assert_eq!(decode(&bytes), Err(DecodeError::UnknownType));
        assert_eq!(decode_split(&bytes), Err(DecodeError::BadBody));
    }
    let mut bytes = valid(&Body::data(b"abcd"));
    set_u16(&mut bytes, 6, PacketType::Data.to_wire() | Flags::NACK.0);
    reseal(&mut bytes);
    assert_eq!(decode_split(&bytes), Err(DecodeError::BadFlags));
    set_u16(&mut bytes, 6, PacketType::Fin.to_wire());
    reseal(&mut bytes);
    assert_eq!(decode(&bytes), Err(DecodeError::BadBody));
    assert_eq!(decode_split(&bytes), Err(DecodeError::BadBody));
}

#[test]
fn a_payload_without_bytes_does_not_encode() {
    let bytes = valid(&Body::data(b"abcd"));
    let pkt = decode_split(&bytes).expect("decode_data");
    let mut out = vec![0u8; 256];
    assert_eq!(
        encode(&pkt.header, &pkt.body, &mut out),
        Err(EncodeError::NoPayload)
    );
    assert_eq!(EncodeError::NoPayload.name(), "no_payload");
    // With its bytes it encodes to the datagram again.
    let with = Body::data(&bytes[HEADER_LEN..]);
    assert_eq!(enc(&pkt.header, &with), bytes);
    assert_eq!(
        Payload::from(&bytes[HEADER_LEN..]),
        Payload::new(&bytes[HEADER_LEN..])
    );
}

// ---------------------------------------------------------------------------------------------
// RETRY and retry tokens
// ---------------------------------------------------------------------------------------------

#[test]
fn retry_has_an_empty_body() {
    let bytes = valid(&Body::Retry);
    assert_eq!(bytes.len(), HEADER_LEN);
    assert_eq!(decode(&bytes).unwrap().body, Body::Retry);
    // A byte of body is refused.
    let mut longer = bytes.clone();
    longer.push(0);
    set_u32(&mut longer, 36, 1);
    reseal(&mut longer);
    assert_eq!(decode(&longer), Err(DecodeError::BadBody));
    assert_eq!(PacketType::Retry.name(), "retry");
}

fn syn_id() -> SynId {
    SynId {
        src: Endpoint::v4([10, 0, 0, 1], 40000, false),
        dst: Endpoint::v4([10, 0, 0, 2], 4796, false),
        session_id: 0x1234_5678_9abc_def0,
        initial_seq: 1000,
        src_port: 32768,
        dst_port: 5000,
    }
}

#[test]
fn retry_token_is_bound_to_every_field_of_the_syn_and_the_key() {
    let key = [1, 2];
    let id = syn_id();
    let t = retry_token(key, 7, &id);
    assert_ne!(t, 0);
    assert_eq!(t, retry_token(key, 7, &id), "deterministic");
    let mut others = vec![retry_token([1, 3], 7, &id), retry_token(key, 8, &id)];
    let variants: [fn(&mut SynId); 10] = [
        |i| i.src.addr[3] ^= 1,
        |i| i.src.port ^= 1,
        |i| i.src = Endpoint::v6(i.src.addr, i.src.port, false),
        |i| i.dst.addr[0] ^= 1,
        |i| i.dst.port ^= 1,
        |i| i.session_id ^= 1,
        |i| i.initial_seq ^= 1,
        |i| i.src_port ^= 1,
        |i| i.dst_port ^= 1,
        |i| std::mem::swap(&mut i.src, &mut i.dst),
    ];
    for f in variants {
        let mut v = id;
        f(&mut v);
        others.push(retry_token(key, 7, &v));
    }
    for (i, o) in others.iter().enumerate() {
        assert_ne!(*o, t, "variant {i}");
    }
}

#[test]
fn retry_token_is_valid_in_its_slot_and_the_next() {
    let key = [0xdead, 0xbeef];
    let id = syn_id();
    let t = retry_token(key, 100, &id);
    assert!(retry_token_valid(key, 100, &id, t));
    assert!(retry_token_valid(key, 101, &id, t));
    assert!(!retry_token_valid(key, 102, &id, t), "expired");
    assert!(!retry_token_valid(key, 99, &id, t), "from the future");
    assert!(!retry_token_valid(key, 100, &id, 0));
    assert!(!retry_token_valid(key, 100, &id, t ^ 1));
    // Slot 0 has no slot before it.
    let t0 = retry_token(key, 0, &id);
    assert!(retry_token_valid(key, 0, &id, t0));
    assert!(retry_token_valid(key, 1, &id, t0));
    // A token lives at least one slot, which covers the SYN retransmissions of one connect
    // (51 s) with the slot before it.
    let slot = RETRY_SLOT_NS;
    assert!((26_000_000_000..60_000_000_000).contains(&slot));
}
