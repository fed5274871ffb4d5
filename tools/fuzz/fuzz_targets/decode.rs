// SPDX-License-Identifier: GPL-2.0
//! Fuzz target: `decode` must never panic, and whatever it accepts must re-encode to the same
//! bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_core::mrc_proto::{decode, encode, peek_header, seal, HEADER_LEN};

fn check(data: &[u8]) {
    let peeked = peek_header(data);
    let Ok(pkt) = decode(data) else {
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
