// SPDX-License-Identifier: GPL-2.0
//! Deterministic message sizes and contents.
//!
//! Both ends derive everything from the connection seed, so the receiver can
//! check each message's length (message boundaries) and bytes without any
//! side channel. Only integer arithmetic is used, so every build and machine
//! produces the same sequence.

use std::fmt;
use std::str::FromStr;

/// Largest message: MRC_MAX_MSG of the MRC user API (1 MiB).
pub const MAX_MSG: usize = 1 << 20;

/// splitmix64: a small, fast PRNG with a 64-bit state.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
}

/// The splitmix64 output function: a bijective 64-bit mixer.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Domain separation constants, so sizes and contents use unrelated streams.
const SIZE_DOMAIN: u64 = 0x5349_5a45_5f53_4551; // "SIZE_SEQ"
const DATA_DOMAIN: u64 = 0x4441_5441_5f42_5954; // "DATA_BYT"

/// How message sizes are chosen (`--msg-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSpec {
    /// Every message has this many bytes (1..=MAX_MSG).
    Fixed(u32),
    /// Log-uniform sizes from 1 B to 1 MiB; message 0 has 1 byte and
    /// message 1 has exactly 1 MiB.
    Mix,
}

impl SizeSpec {
    /// Wire encoding in the hello message: 0 means `Mix`.
    pub fn to_wire(self) -> u32 {
        match self {
            SizeSpec::Fixed(n) => n,
            SizeSpec::Mix => 0,
        }
    }

    pub fn from_wire(v: u32) -> Option<SizeSpec> {
        match v {
            0 => Some(SizeSpec::Mix),
            n if n as usize <= MAX_MSG => Some(SizeSpec::Fixed(n)),
            _ => None,
        }
    }
}

impl FromStr for SizeSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("mix") {
            return Ok(SizeSpec::Mix);
        }
        let n: u64 = s
            .parse()
            .map_err(|_| format!("`{s}` is neither `mix` nor a byte count"))?;
        if n == 0 || n > MAX_MSG as u64 {
            return Err(format!("message size must be 1..={MAX_MSG}, not {n}"));
        }
        Ok(SizeSpec::Fixed(n as u32))
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Fixed(n) => write!(f, "{n}"),
            SizeSpec::Mix => f.write_str("mix"),
        }
    }
}

/// The sequence of message sizes of one connection.
#[derive(Debug, Clone)]
pub struct SizeSeq {
    spec: SizeSpec,
    rng: SplitMix64,
    index: u64,
}

impl SizeSeq {
    pub fn new(spec: SizeSpec, seed: u64) -> Self {
        SizeSeq {
            spec,
            rng: SplitMix64::new(mix64(seed ^ SIZE_DOMAIN)),
            index: 0,
        }
    }

    /// Size of the next message.
    pub fn next_size(&mut self) -> usize {
        let i = self.index;
        self.index += 1;
        match self.spec {
            SizeSpec::Fixed(n) => n as usize,
            SizeSpec::Mix => match i {
                0 => 1,
                1 => MAX_MSG,
                _ => self.log_uniform(),
            },
        }
    }

    /// A size with log-uniform distribution over 1..=MAX_MSG: an octave
    /// [2^k, 2^(k+1)) chosen uniformly among the 20 octaves, then a uniform
    /// size inside it (the last octave includes MAX_MSG itself).
    fn log_uniform(&mut self) -> usize {
        const OCTAVES: u64 = 20; // MAX_MSG == 1 << 20
        let k = ((self.rng.next_u64() >> 32) * OCTAVES) >> 32;
        let low = 1u64 << k;
        let high = if k == OCTAVES - 1 {
            MAX_MSG as u64
        } else {
            (low << 1) - 1
        };
        let span = high - low + 1;
        (low + self.rng.next_u64() % span) as usize
    }
}

impl Iterator for SizeSeq {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        Some(self.next_size())
    }
}

fn content_rng(seed: u64, index: u64) -> SplitMix64 {
    SplitMix64::new(mix64(
        seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ mix64(index ^ DATA_DOMAIN),
    ))
}

/// Fills `buf` with the contents of message `index` of the connection with
/// seed `seed` (the message length is `buf.len()`).
pub fn fill(seed: u64, index: u64, buf: &mut [u8]) {
    let mut rng = content_rng(seed, index);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let w = rng.next_u64().to_le_bytes();
        rest.copy_from_slice(&w[..rest.len()]);
    }
}

/// Checks that `data` is message `index` of the connection with seed `seed`.
/// Returns the offset of the first wrong byte, or `None` if all match.
pub fn verify(seed: u64, index: u64, data: &[u8]) -> Option<usize> {
    let mut rng = content_rng(seed, index);
    let mut chunks = data.chunks_exact(8);
    for (n, c) in (&mut chunks).enumerate() {
        let want = rng.next_u64().to_le_bytes();
        if c != want {
            let pos = c.iter().zip(want.iter()).position(|(a, b)| a != b);
            return Some(n * 8 + pos.unwrap_or(0));
        }
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let want = rng.next_u64().to_le_bytes();
        if let Some(pos) = rest.iter().zip(want.iter()).position(|(a, b)| a != b) {
            return Some(data.len() - rest.len() + pos);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_deterministic() {
        let a: Vec<usize> = SizeSeq::new(SizeSpec::Mix, 42).take(1000).collect();
        let b: Vec<usize> = SizeSeq::new(SizeSpec::Mix, 42).take(1000).collect();
        assert_eq!(a, b);
        let c: Vec<usize> = SizeSeq::new(SizeSpec::Mix, 43).take(1000).collect();
        assert_ne!(a, c);
    }

    #[test]
    fn mix_starts_with_extremes_and_stays_in_range() {
        for seed in [0, 1, 7, u64::MAX] {
            let v: Vec<usize> = SizeSeq::new(SizeSpec::Mix, seed).take(10_000).collect();
            assert_eq!(v[0], 1);
            assert_eq!(v[1], MAX_MSG);
            assert_eq!(v[1], 1_048_576);
            assert!(v.iter().all(|&n| (1..=MAX_MSG).contains(&n)));
        }
    }

    #[test]
    fn mix_is_log_uniform() {
        // Every octave gets roughly 1/20 of the sizes.
        let n = 200_000;
        let mut octave = [0u32; 21];
        for s in SizeSeq::new(SizeSpec::Mix, 9).skip(2).take(n) {
            octave[(usize::BITS - 1 - s.leading_zeros()) as usize] += 1;
        }
        let expect = n as f64 / 20.0;
        for (k, &c) in octave.iter().enumerate().take(20) {
            let r = c as f64 / expect;
            assert!((0.9..1.1).contains(&r), "octave {k}: {c} sizes");
        }
        // Sizes of 1 MiB are possible but rare outside message 1.
        assert!(octave[20] < 10);
    }

    #[test]
    fn fixed_sizes() {
        let v: Vec<usize> = SizeSeq::new(SizeSpec::Fixed(65536), 3).take(5).collect();
        assert_eq!(v, vec![65536; 5]);
    }

    #[test]
    fn parse_spec() {
        assert_eq!("mix".parse::<SizeSpec>(), Ok(SizeSpec::Mix));
        assert_eq!("65536".parse::<SizeSpec>(), Ok(SizeSpec::Fixed(65536)));
        assert_eq!("1048576".parse::<SizeSpec>(), Ok(SizeSpec::Fixed(1 << 20)));
        assert!("0".parse::<SizeSpec>().is_err());
        assert!("1048577".parse::<SizeSpec>().is_err());
        assert!("big".parse::<SizeSpec>().is_err());
        for s in [SizeSpec::Mix, SizeSpec::Fixed(1), SizeSpec::Fixed(1 << 20)] {
            assert_eq!(SizeSpec::from_wire(s.to_wire()), Some(s));
        }
    }

    #[test]
    fn content_is_deterministic_and_distinct() {
        let mut a = vec![0u8; 1000];
        let mut b = vec![0u8; 1000];
        fill(5, 3, &mut a);
        fill(5, 3, &mut b);
        assert_eq!(a, b);
        fill(5, 4, &mut b);
        assert_ne!(a, b);
        fill(6, 3, &mut b);
        assert_ne!(a, b);
        // Not constant: roughly uniform bytes.
        let distinct = a.iter().collect::<std::collections::HashSet<_>>().len();
        assert!(distinct > 200);
    }

    #[test]
    fn content_prefix_is_stable() {
        // A message's first bytes do not depend on its length.
        let mut a = vec![0u8; 13];
        let mut b = vec![0u8; 100];
        fill(11, 2, &mut a);
        fill(11, 2, &mut b);
        assert_eq!(a[..], b[..13]);
    }

    #[test]
    fn verify_finds_first_wrong_byte() {
        for len in [1usize, 7, 8, 9, 64, 1000, 4099] {
            let mut m = vec![0u8; len];
            fill(1, 9, &mut m);
            assert_eq!(verify(1, 9, &m), None);
            if len >= 8 {
                assert!(verify(1, 10, &m).is_some());
            }
            for pos in [0, len / 2, len - 1] {
                let mut bad = m.clone();
                bad[pos] ^= 0x40;
                assert_eq!(verify(1, 9, &bad), Some(pos), "len {len} pos {pos}");
            }
        }
    }
}
