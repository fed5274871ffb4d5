// SPDX-License-Identifier: GPL-2.0
//! Fuzz target: `decode` must never panic, and whatever it accepts must re-encode to the same
//! bytes; `decode_data`, given only the header and the payload's checksum, must agree with it.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_core::mrc_proto::{
    crc32c_raw, decode, decode_data, encode, peek_header, seal, Body, DecodeError, Header,
    Packet, HEADER_LEN,
};

/// What `decode_data` must return given what `decode` returns: the same DATA packet without
/// the payload's bytes, the same error where it is about the header, else `BadBody`.
fn data_view(decoded: Result<Packet<'_>, DecodeError>) -> Result<(Header, usize), DecodeError> {
    match decoded {
        Ok(Packet {
            header,
            body: Body::Data(d),
        }) => Ok((header, d.len())),
        Ok(_) | Err(DecodeError::BadSack | DecodeError::BadHandshake | DecodeError::BadBody) => {
            Err(DecodeError::BadBody)
        }
        Err(e) => Err(e),
    }
}

fn check(data: &[u8]) {
    let peeked = peek_header(data);
    let decoded = decode(data);
    // The payload checksummed in pieces, as from the fragments of a socket buffer.
    let piece = usize::from(data.last().copied().unwrap_or(0)).max(1);
    let split = decode_data(data.get(..HEADER_LEN).unwrap_or(data), data.len(), |mut crc, n| {
        for p in data.get(HEADER_LEN..)?.get(..n)?.chunks(piece) {
            crc = crc32c_raw(crc, p);
        }
        Some(crc)
    });
    let split = split.map(|p| match p.body {
        Body::Data(d) if d.bytes().is_none() => (p.header, d.len()),
        other => panic!("decode_data returned {other:?}"),
    });
    assert_eq!(split, data_view(decoded));
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
