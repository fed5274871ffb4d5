// SPDX-License-Identifier: GPL-2.0
//! The hello message: the first message of every connection, sent by the
//! client before the data messages. It tells the server the connection index
//! (so it can derive the seed `S + index` whatever order connections were
//! accepted in) and the client's parameters (so mismatches are reported
//! clearly). It is not counted in msgs, bytes or the digest.
//!
//! Layout (32 bytes, integers big endian):
//! `magic "MRCPERF1" | conn u32 | mode u8 | 0 u8 x3 | seed u64 | msg_size u32
//! (0 = mix) | 0 u8 x4`.

use crate::pattern::SizeSpec;

pub const HELLO_LEN: usize = 32;
const MAGIC: &[u8; 8] = b"MRCPERF1";

/// What the connections measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// One-way transfer; the server verifies and records delivery.
    Throughput,
    /// Ping-pong: the server echoes every message; the client measures round
    /// trips.
    Latency,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Throughput => "throughput",
            Mode::Latency => "latency",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Connection index i of the client (0-based).
    pub conn: u32,
    pub mode: Mode,
    /// Base seed S; connection i uses S + i.
    pub seed: u64,
    pub size: SizeSpec,
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.conn.to_be_bytes());
        b[12] = match self.mode {
            Mode::Throughput => 0,
            Mode::Latency => 1,
        };
        b[16..24].copy_from_slice(&self.seed.to_be_bytes());
        b[24..28].copy_from_slice(&self.size.to_wire().to_be_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Hello, String> {
        if b.len() != HELLO_LEN || &b[..8] != MAGIC {
            return Err(format!(
                "first message ({} bytes) is not an mrc-perf hello: is the peer an mrc-perf client of the same version?",
                b.len()
            ));
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mode = match b[12] {
            0 => Mode::Throughput,
            1 => Mode::Latency,
            m => return Err(format!("hello: unknown mode {m}")),
        };
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&b[16..24]);
        let size = u32_at(24);
        Ok(Hello {
            conn: u32_at(8),
            mode,
            seed: u64::from_be_bytes(seed),
            size: SizeSpec::from_wire(size)
                .ok_or_else(|| format!("hello: bad message size {size}"))?,
        })
    }

    /// Connection seed: S + i.
    pub fn conn_seed(&self) -> u64 {
        self.seed.wrapping_add(u64::from(self.conn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for h in [
            Hello {
                conn: 3,
                mode: Mode::Latency,
                seed: u64::MAX,
                size: SizeSpec::Fixed(65536),
            },
            Hello {
                conn: 0,
                mode: Mode::Throughput,
                seed: 1,
                size: SizeSpec::Mix,
            },
        ] {
            assert_eq!(Hello::decode(&h.encode()), Ok(h));
        }
    }

    #[test]
    fn rejects_other_data() {
        assert!(Hello::decode(b"hello").is_err());
        assert!(Hello::decode(&[0u8; HELLO_LEN]).is_err());
        let mut b = Hello {
            conn: 0,
            mode: Mode::Throughput,
            seed: 1,
            size: SizeSpec::Mix,
        }
        .encode();
        b[12] = 9;
        assert!(Hello::decode(&b).is_err());
    }

    #[test]
    fn conn_seed_wraps() {
        let h = Hello {
            conn: 2,
            mode: Mode::Throughput,
            seed: u64::MAX,
            size: SizeSpec::Mix,
        };
        assert_eq!(h.conn_seed(), 1);
    }
}
