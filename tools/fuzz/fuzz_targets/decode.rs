// SPDX-License-Identifier: GPL-2.0
//! Fuzz target: `decode` must never panic, and whatever it accepts must re-encode to the same
//! bytes; `decode_data`, given only the header, must agree with it.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_core::mrc_proto::{
    decode, decode_data, encode, peek_header, seal, Body, DecodeError, Flags, Header, Packet,
    PacketType, HEADER_LEN,
};

/// What `decode_data` must return given what `decode` returns: the same DATA packet without
/// the payload's bytes, the same error where it is about the length, magic, version or
/// `payload_len`, `BadBody` if the type field is not DATA, else the same error.
fn data_view(
    data: &[u8],
    decoded: Result<Packet<'_>, DecodeError>,
) -> Result<(Header, usize), DecodeError> {
    let is_data = data.get(6..8).is_some_and(|f| {
        Flags(u16::from_be_bytes([f[0], f[1]])).packet_type() == Some(PacketType::Data)
    });
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
        _ if !is_data => Err(DecodeError::BadBody),
        Ok(_) => Err(DecodeError::BadBody),
        Err(e) => Err(e),
    }
}

fn check(data: &[u8]) {
    let peeked = peek_header(data);
    let decoded = decode(data);
    let split = decode_data(data.get(..HEADER_LEN).unwrap_or(data), data.len());
    let split = split.map(|p| match p.body {
        Body::Data(d) if d.bytes().is_none() => (p.header, d.len()),
        other => panic!("decode_data returned {other:?}"),
    });
    assert_eq!(split, data_view(data, decoded));
    let Ok(pkt) = decoded else {
        return;
    };
    assert_eq!(peeked, Ok(pkt.header));
    let mut out = vec![0u8; data.len()];
    let n = encode(&pkt.header, &pkt.body, &mut out).expect("accepted packet re-encodes");
    assert_eq!(&out[..n], data);
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // Also try the input with a correct checksum, so the body parsers see mutated bodies
    // instead of stopping at the checksum.
    if data.len() >= HEADER_LEN {
        let mut sealed = data.to_vec();
        if seal(&mut sealed).is_ok() {
            check(&sealed);
        }
    }
});
