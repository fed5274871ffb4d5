// SPDX-License-Identifier: GPL-2.0
//! Property tests of the wire format: round trips, robustness on arbitrary bytes, bit flips.

use mrc_core::mrc_proto::*;
use proptest::prelude::*;

/// Owned form of a body, so strategies can generate the borrowed parts.
#[derive(Clone, Debug)]
enum OwnedBody {
    /// initial_seq, rwnd, src_port, dst_port, endpoints.
    Syn(u64, u32, u16, u16, Vec<Endpoint>),
    /// initial_seq, rwnd, src_port, dst_port, endpoints.
    SynAck(u64, u32, u16, u16, Vec<Endpoint>),
    /// dsack, rwnd, offset of base above ack, bitmap.
    Ack(u64, u32, u32, u64, Vec<u8>),
    Data(Vec<u8>),
    Fin,
    Rst,
    Probe(u64, u64),
    ProbeAck(u64, u64),
    Retry,
}

impl OwnedBody {
    fn as_body(&self, ack: u64) -> Body<'_> {
        match self {
            OwnedBody::Syn(seq, rwnd, src, dst, eps) => {
                Body::Syn(Handshake::new(*seq, *rwnd, *src, *dst, eps))
            }
            OwnedBody::SynAck(seq, rwnd, src, dst, eps) => {
                Body::SynAck(Handshake::new(*seq, *rwnd, *src, *dst, eps))
            }
            OwnedBody::Ack(ts, rwnd, delay, off, bitmap) => Body::Ack(
                Sack::new(*ts, *rwnd, ack.saturating_add(*off), bitmap)
                    .with_delay(u64::from(*delay)),
            ),
            OwnedBody::Data(d) => Body::data(d),
            OwnedBody::Fin => Body::Fin,
            OwnedBody::Rst => Body::Rst,
            OwnedBody::Probe(nonce, ts) => Body::Probe(Probe {
                nonce: *nonce,
                ts: *ts,
            }),
            OwnedBody::ProbeAck(nonce, ts) => Body::ProbeAck(Probe {
                nonce: *nonce,
                ts: *ts,
            }),
            OwnedBody::Retry => Body::Retry,
        }
    }
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>(), any::<bool>()).prop_map(|(a, p, b)| Endpoint::v4(a, p, b)),
        (any::<[u8; 16]>(), any::<u16>(), any::<bool>())
            .prop_map(|(a, p, b)| Endpoint::v6(a, p, b)),
    ]
}

fn body() -> impl Strategy<Value = OwnedBody> {
    let eps = || prop::collection::vec(endpoint(), 0..=MAX_ENDPOINTS);
    prop_oneof![
        (
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            eps()
        )
            .prop_map(|(s, r, sp, dp, e)| OwnedBody::Syn(s, r, sp, dp, e)),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            eps()
        )
            .prop_map(|(s, r, sp, dp, e)| OwnedBody::SynAck(s, r, sp, dp, e)),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            0u64..100_000,
            prop::collection::vec(any::<u8>(), 0..=MAX_SACK_BYTES)
        )
            .prop_map(|(t, r, d, o, b)| OwnedBody::Ack(t, r, d, o, b)),
        prop::collection::vec(any::<u8>(), 0..600).prop_map(OwnedBody::Data),
        Just(OwnedBody::Fin),
        Just(OwnedBody::Rst),
        (any::<u64>(), any::<u64>()).prop_map(|(n, t)| OwnedBody::Probe(n, t)),
        (any::<u64>(), any::<u64>()).prop_map(|(n, t)| OwnedBody::ProbeAck(n, t)),
        Just(OwnedBody::Retry),
    ]
}

/// A header and body that encode; modifiers are chosen among those allowed for the type, the
/// direction bit is arbitrary, the type bits of the header are arbitrary (encode replaces them)
/// and `ack` leaves room for a full SACK bitmap above it.
fn packet() -> impl Strategy<Value = (Header, OwnedBody)> {
    (
        body(),
        any::<u16>(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        0..u64::MAX - 200_000,
        any::<u32>(),
    )
        .prop_map(|(b, fl, session_id, path_id, seq, ack, payload_len)| {
            let ty = b.as_body(ack).packet_type();
            let flags = Flags(
                (fl & Flags::TYPE_MASK)
                    | (fl & ty.allowed_modifiers())
                    | (fl & Flags::DIRECTION_MASK),
            );
            let h = Header {
                flags,
                session_id,
                path_id,
                seq,
                ack,
                payload_len,
            };
            (h, b)
        })
}

fn encode_vec(h: &Header, b: &Body<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_CONTROL_PACKET_LEN + 1024];
    let n = encode(h, b, &mut buf).expect("valid packet encodes");
    buf.truncate(n);
    buf
}

/// Arbitrary bytes behind a correct fixed header: reaches the type, flag and body checks.
fn sealed_garbage() -> impl Strategy<Value = Vec<u8>> {
    (
        1u16..=9,
        any::<u16>(),
        prop::collection::vec(any::<u8>(), HEADER_LEN - 8..HEADER_LEN + 400),
    )
        .prop_map(|(ty, fl, mut bytes)| {
            bytes[0..4].copy_from_slice(&MAGIC.to_be_bytes());
            bytes[4..6].copy_from_slice(&VERSION.to_be_bytes());
            // Mostly valid flag bits, so bodies are parsed.
            let flags = ty | (fl & (Flags::MODIFIER_MASK | Flags::DIRECTION_MASK));
            bytes[6..8].copy_from_slice(&flags.to_be_bytes());
            bytes.resize(bytes.len().max(HEADER_LEN), 0);
            let len = (bytes.len() - HEADER_LEN) as u32;
            bytes[36..40].copy_from_slice(&len.to_be_bytes());
            seal(&mut bytes).expect("seal");
            bytes
        })
}

/// Whether the type field of a datagram at least as long as the header says DATA.
fn type_is_data(bytes: &[u8]) -> bool {
    bytes.get(6..8).is_some_and(|f| {
        Flags(u16::from_be_bytes([f[0], f[1]])).packet_type() == Some(PacketType::Data)
    })
}

/// What [`decode_data`] must return for a datagram, given what [`decode`] returns: the same
/// DATA packet without the payload's bytes, the same error where it is about the length,
/// magic, version or `payload_len`, `BadBody` for a datagram whose type field is not DATA,
/// else the same error.
fn data_view(
    bytes: &[u8],
    decoded: Result<Packet<'_>, DecodeError>,
) -> Result<(Header, usize), DecodeError> {
    match decoded {
        Ok(Packet {
            header,
            body: Body::Data(d),
        }) => Ok((header, d.len())),
        Err(
            e @ (DecodeError::Short
            | DecodeError::BadMagic
            | DecodeError::BadVersion
            | DecodeError::LengthMismatch),
        ) => Err(e),
        _ if !type_is_data(bytes) => Err(DecodeError::BadBody),
        Ok(_) => Err(DecodeError::BadBody),
        Err(e) => Err(e),
    }
}

/// [`decode_data`] on `bytes` as a socket buffer would give them: `head_len` bytes at hand
/// (those of the header at least, when there are that many). Returns the header and payload
/// length, checking that the payload's bytes were left out and that [`redecode_data`] gives
/// the same packet.
fn decode_split(bytes: &[u8], head_len: usize) -> Result<(Header, usize), DecodeError> {
    let head = &bytes[..bytes.len().min(head_len.max(HEADER_LEN))];
    let pkt = decode_data(head, bytes.len())?;
    // What it accepted decodes the same again, without the checks.
    assert_eq!(redecode_data(head, bytes.len()), Ok(pkt));
    match pkt.body {
        Body::Data(d) if d.bytes().is_none() => Ok((pkt.header, d.len())),
        other => panic!("decode_data returned {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_data_agrees_with_decode((h, b) in packet(), head_len in 0usize..100) {
        let bytes = encode_vec(&h, &b.as_body(h.ack));
        prop_assert_eq!(decode_split(&bytes, head_len), data_view(&bytes, decode(&bytes)));
        if let Body::Data(_) = b.as_body(h.ack) {
            prop_assert!(decode_split(&bytes, head_len).is_ok());
        }
    }

    #[test]
    fn decode_data_agrees_on_flips_and_lengths((h, b) in packet()) {
        let bytes = encode_vec(&h, &b.as_body(h.ack));
        let data = type_is_data(&bytes);
        let mut flipped = bytes.clone();
        for bit in 0..bytes.len() * 8 {
            let (i, m) = (bit / 8, 1u8 << (bit % 8));
            flipped[i] ^= m;
            let got = decode_split(&flipped, HEADER_LEN);
            // A DATA payload is the UDP checksum's to cover; anything else flipped is caught.
            if data && i >= HEADER_LEN {
                prop_assert_eq!(got, decode_split(&bytes, HEADER_LEN), "bit {}", bit);
                prop_assert!(got.is_ok(), "bit {}", bit);
            } else {
                prop_assert!(got.is_err(), "bit {}", bit);
                prop_assert!(decode(&flipped).is_err(), "bit {}", bit);
            }
            prop_assert_eq!(got, data_view(&flipped, decode(&flipped)), "bit {}", bit);
            flipped[i] ^= m;
        }
        for n in 0..bytes.len() {
            prop_assert_eq!(
                decode_split(&bytes[..n], HEADER_LEN),
                data_view(&bytes[..n], decode(&bytes[..n]))
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert_eq!(decode_split(&longer, HEADER_LEN), Err(DecodeError::LengthMismatch));
    }

    #[test]
    fn decode_data_agrees_on_flag_bits((h, b) in packet(), fl in any::<u16>()) {
        let body = b.as_body(h.ack);
        let mut bytes = encode_vec(&h, &body);
        bytes[6..8].copy_from_slice(&fl.to_be_bytes());
        seal(&mut bytes).expect("seal");
        prop_assert_eq!(decode_split(&bytes, HEADER_LEN), data_view(&bytes, decode(&bytes)));
    }

    #[test]
    fn decode_data_agrees_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        garbage in sealed_garbage(),
    ) {
        prop_assert_eq!(decode_split(&bytes, HEADER_LEN), data_view(&bytes, decode(&bytes)));
        prop_assert_eq!(
            decode_split(&garbage, HEADER_LEN),
            data_view(&garbage, decode(&garbage))
        );
    }

    #[test]
    fn round_trip((h, b) in packet()) {
        let body = b.as_body(h.ack);
        let bytes = encode_vec(&h, &body);
        prop_assert_eq!(bytes.len(), HEADER_LEN + body.wire_len().unwrap());
        let pkt = decode(&bytes).expect("encoded packet decodes");
        let mut want = h;
        want.flags = h.flags.with_type(body.packet_type());
        want.payload_len = (bytes.len() - HEADER_LEN) as u32;
        prop_assert_eq!(pkt.header, want);
        prop_assert_eq!(pkt.body, body);
        prop_assert_eq!(peek_header(&bytes), Ok(want));
        // Re-encoding what was decoded gives the same bytes.
        prop_assert_eq!(&encode_vec(&pkt.header, &pkt.body), &bytes);
    }

    #[test]
    fn flag_bits_are_accepted_iff_allowed((h, b) in packet(), fl in any::<u16>()) {
        // Any flags value on an otherwise valid packet: decode accepts it exactly when the
        // reserved bits are zero and the modifiers are allowed for the type; the direction
        // bit is allowed on every type and round-trips.
        let body = b.as_body(h.ack);
        let ty = body.packet_type();
        let mut bytes = encode_vec(&h, &body);
        let flags = Flags((fl & !Flags::TYPE_MASK) | ty.to_wire());
        bytes[6..8].copy_from_slice(&flags.0.to_be_bytes());
        seal(&mut bytes).expect("seal");
        let allowed = fl & Flags::RESERVED_MASK == 0
            && fl & Flags::MODIFIER_MASK & !ty.allowed_modifiers() == 0;
        prop_assert_eq!(flags.is_valid_for(ty), allowed);
        match decode(&bytes) {
            Ok(pkt) => {
                prop_assert!(allowed);
                prop_assert_eq!(pkt.header.flags, flags);
                prop_assert_eq!(pkt.header.flags.passive(), fl & Flags::PASSIVE.0 != 0);
                prop_assert_eq!(&encode_vec(&pkt.header, &pkt.body), &bytes);
            }
            Err(e) => {
                prop_assert!(!allowed);
                prop_assert_eq!(e, DecodeError::BadFlags);
            }
        }
    }

    #[test]
    fn handshake_ports_round_trip(
        syn in any::<bool>(),
        src_port in any::<u16>(),
        dst_port in any::<u16>(),
        initial_seq in any::<u64>(),
        rwnd in any::<u32>(),
        eps in prop::collection::vec(endpoint(), 0..=MAX_ENDPOINTS),
    ) {
        let hs = Handshake::new(initial_seq, rwnd, src_port, dst_port, &eps);
        let body = if syn { Body::Syn(hs) } else { Body::SynAck(hs) };
        let h = Header { session_id: 1, ..Header::default() };
        let bytes = encode_vec(&h, &body);
        let pkt = decode(&bytes).expect("encoded handshake decodes");
        let (Body::Syn(got) | Body::SynAck(got)) = pkt.body else {
            panic!("not a handshake: {:?}", pkt.body);
        };
        prop_assert_eq!(got.src_port, src_port);
        prop_assert_eq!(got.dst_port, dst_port);
        prop_assert_eq!(got.initial_seq, initial_seq);
        prop_assert_eq!(got.rwnd, rwnd);
        prop_assert_eq!(got.endpoints().collect::<Vec<_>>(), eps);
        // Network byte order, right after `rwnd`.
        let off = HEADER_LEN + 12;
        prop_assert_eq!(&bytes[off..off + 2], &src_port.to_be_bytes());
        prop_assert_eq!(&bytes[off + 2..off + 4], &dst_port.to_be_bytes());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = peek_header(&bytes);
        if let Ok(pkt) = decode(&bytes) {
            prop_assert_eq!(&encode_vec(&pkt.header, &pkt.body), &bytes);
        }
    }

    #[test]
    fn sealed_garbage_never_panics(bytes in sealed_garbage()) {
        match decode(&bytes) {
            Ok(pkt) => {
                // Whatever is accepted re-encodes to the same bytes.
                prop_assert_eq!(&encode_vec(&pkt.header, &pkt.body), &bytes);
                if let Body::Ack(s) = pkt.body {
                    for seq in s.sacked() {
                        prop_assert!(s.is_set(seq));
                    }
                }
                if let Body::Syn(hs) | Body::SynAck(hs) = pkt.body {
                    prop_assert_eq!(hs.endpoints().count(), hs.endpoint_count());
                }
            }
            Err(e) => {
                // The header is right, so only checks after the checksum can fail, but for a
                // packet longer than any valid control packet.
                let too_long = !type_is_data(&bytes) && bytes.len() > MAX_CONTROL_PACKET_LEN;
                prop_assert_eq!(e == DecodeError::LengthMismatch, too_long, "{:?}", e);
                prop_assert!(too_long || e >= DecodeError::UnknownType, "{:?}", e);
            }
        }
    }

    #[test]
    fn any_single_bit_flip_is_rejected_but_in_a_data_payload((h, b) in packet()) {
        let bytes = encode_vec(&h, &b.as_body(h.ack));
        let data = type_is_data(&bytes);
        let mut flipped = bytes.clone();
        for bit in 0..bytes.len() * 8 {
            let (i, m) = (bit / 8, 1u8 << (bit % 8));
            flipped[i] ^= m;
            if data && i >= HEADER_LEN {
                // The UDP checksum's to catch: the packet is the same but for that byte.
                let pkt = decode(&flipped).expect("a DATA payload is not covered");
                prop_assert_eq!(Ok(pkt.header), peek_header(&bytes));
                prop_assert_eq!(pkt.body.packet_type(), PacketType::Data);
                flipped[i] ^= m;
                continue;
            }
            let err = decode(&flipped).expect_err("flipped packet rejected");
            prop_assert!(
                matches!(
                    err,
                    DecodeError::BadMagic
                        | DecodeError::BadVersion
                        | DecodeError::LengthMismatch
                        | DecodeError::BadChecksum
                ),
                "bit {}: {:?}",
                bit,
                err
            );
            flipped[i] ^= m;
        }
    }

    #[test]
    fn truncation_and_extension_are_rejected((h, b) in packet(), extra in 1usize..8) {
        let bytes = encode_vec(&h, &b.as_body(h.ack));
        for n in 0..bytes.len() {
            prop_assert!(decode(&bytes[..n]).is_err());
        }
        let mut longer = bytes.clone();
        longer.resize(bytes.len() + extra, 0);
        prop_assert_eq!(decode(&longer), Err(DecodeError::LengthMismatch));
    }

    #[test]
    fn sack_iter_matches_is_set(
        base in any::<u64>(),
        bitmap in prop::collection::vec(any::<u8>(), 0..=MAX_SACK_BYTES),
    ) {
        let s = Sack::new(0, 0, base, &bitmap);
        let got: Vec<u64> = s.sacked().collect();
        let ones: u32 = bitmap.iter().map(|b| b.count_ones()).sum();
        let room = u64::MAX - base;
        let expect_all = (bitmap.len() as u64) * 8 <= room.saturating_add(1);
        if expect_all {
            prop_assert_eq!(got.len() as u32, ones);
        }
        prop_assert!(got.windows(2).all(|w| w[0] < w[1]));
        for &seq in &got {
            prop_assert!(s.is_set(seq));
        }
        for i in 0..(bitmap.len() as u64 * 8) {
            if let Some(seq) = base.checked_add(i) {
                prop_assert_eq!(s.is_set(seq), got.contains(&seq));
            }
        }
        prop_assert!(!s.is_set(base.wrapping_sub(1)) || base == 0);
    }

    #[test]
    fn crc32c_chains(a in prop::collection::vec(any::<u8>(), 0..200),
                     b in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut ab = a.clone();
        ab.extend_from_slice(&b);
        prop_assert_eq!(crc32c(crc32c(0, &a), &b), crc32c(0, &ab));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn retry_tokens_check_out_only_for_their_syn(
        key in any::<[u64; 2]>(),
        slot in 1u64..1 << 40,
        sid in any::<u64>(),
        isn in any::<u64>(),
        src in endpoint(),
        dst in endpoint(),
        ports in any::<(u16, u16)>(),
        flip in 0usize..4,
    ) {
        let id = SynId { src, dst, session_id: sid, initial_seq: isn, src_port: ports.0, dst_port: ports.1 };
        let t = retry_token(key, slot, &id);
        prop_assert_ne!(t, 0);
        prop_assert!(retry_token_valid(key, slot, &id, t));
        prop_assert!(retry_token_valid(key, slot + 1, &id, t));
        prop_assert!(!retry_token_valid(key, slot + 2, &id, t));
        let mut other = id;
        match flip {
            0 => other.session_id ^= 1,
            1 => other.initial_seq ^= 1,
            2 => other.src.port ^= 1,
            _ => other.src.addr[0] ^= 1,
        }
        prop_assert!(!retry_token_valid(key, slot, &other, t));
    }
}
