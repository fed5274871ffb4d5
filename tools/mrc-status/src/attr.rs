// SPDX-License-Identifier: GPL-2.0
//! Typed reading and writing of netlink attributes.
//!
//! The wire format is handled by `netlink-packet-core` (`NlasIterator`,
//! `DefaultNla`, the `parse_*` helpers); this module adds the spec's types
//! (notably `uint`, which is 4 or 8 bytes) and error messages that name the
//! attribute by its spec name.

use netlink_packet_core::{
    parse_ip, parse_string, parse_u16, parse_u32, parse_u64, parse_u8, DecodeError, DefaultNla,
    Emitable, NlasIterator, NLA_HEADER_SIZE,
};
use std::net::IpAddr;

/// Attribute table of one set, as in [`crate::spec`]: spec name, value, type.
pub type AttrTable = &'static [(&'static str, u16, &'static str)];

/// The attributes of one message or nest, in wire order.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    set: AttrTable,
    list: Vec<(u16, &'a [u8])>,
}

impl<'a> Attrs<'a> {
    /// Splits `buf` into attributes of the set described by `set`.
    pub fn parse(buf: &'a [u8], set: AttrTable) -> Result<Self, DecodeError> {
        let mut list = Vec::new();
        for nla in NlasIterator::new(buf) {
            let nla = nla?;
            let kind = nla.kind();
            let end = NLA_HEADER_SIZE + nla.value_length();
            let raw: &'a [u8] = nla.into_inner();
            let value = raw
                .get(NLA_HEADER_SIZE..end)
                .ok_or_else(|| DecodeError::from("truncated attribute"))?;
            list.push((kind, value));
        }
        Ok(Attrs { set, list })
    }

    fn name(&self, kind: u16) -> String {
        match self.set.iter().find(|(_, v, _)| *v == kind) {
            Some((name, _, _)) => format!("'{name}'"),
            None => format!("{kind}"),
        }
    }

    fn wrap<T>(&self, kind: u16, r: Result<T, DecodeError>) -> Result<T, DecodeError> {
        r.map_err(|e| DecodeError::from(format!("attribute {}: {e}", self.name(kind))))
    }

    /// Returns the payload of the first attribute of type `kind`.
    pub fn raw(&self, kind: u16) -> Option<&'a [u8]> {
        self.list.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v)
    }

    /// Returns every `(type, payload)` pair, for sets read as a whole.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &'a [u8])> + '_ {
        self.list.iter().copied()
    }

    fn typed<T>(
        &self,
        kind: u16,
        f: impl FnOnce(&'a [u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        self.raw(kind).map(|v| self.wrap(kind, f(v))).transpose()
    }

    /// Reads a `u8` attribute.
    pub fn u8(&self, kind: u16) -> Result<Option<u8>, DecodeError> {
        self.typed(kind, parse_u8)
    }

    /// Reads a `u16` attribute (host order).
    pub fn u16(&self, kind: u16) -> Result<Option<u16>, DecodeError> {
        self.typed(kind, parse_u16)
    }

    /// Reads a `u32` attribute.
    pub fn u32(&self, kind: u16) -> Result<Option<u32>, DecodeError> {
        self.typed(kind, parse_u32)
    }

    /// Reads a `uint` attribute: 4 bytes while the value fits, else 8.
    pub fn uint(&self, kind: u16) -> Result<Option<u64>, DecodeError> {
        self.typed(kind, parse_uint)
    }

    /// Returns whether a `flag` attribute is present.
    pub fn flag(&self, kind: u16) -> bool {
        self.raw(kind).is_some()
    }

    /// Reads a `string` attribute (NUL-terminated on the wire).
    pub fn string(&self, kind: u16) -> Result<Option<String>, DecodeError> {
        self.typed(kind, parse_string)
    }

    /// Reads a `binary` IP address attribute: 4 or 16 bytes.
    pub fn addr(&self, kind: u16) -> Result<Option<IpAddr>, DecodeError> {
        self.typed(kind, parse_ip)
    }

    /// Reads a `nest` attribute with the attributes of `set`.
    pub fn nest(&self, kind: u16, set: AttrTable) -> Result<Option<Attrs<'a>>, DecodeError> {
        self.typed(kind, |v| Attrs::parse(v, set))
    }

    /// Reads every instance of a `multi-attr` nest.
    pub fn nests(&self, kind: u16, set: AttrTable) -> Result<Vec<Attrs<'a>>, DecodeError> {
        self.list
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, v)| self.wrap(kind, Attrs::parse(v, set)))
            .collect()
    }

    /// Returns an error naming `kind` if the attribute is absent.
    pub fn required<T>(&self, kind: u16, v: Option<T>) -> Result<T, DecodeError> {
        v.ok_or_else(|| DecodeError::from(format!("attribute {} missing", self.name(kind))))
    }
}

/// Parses a `uint` payload.
pub fn parse_uint(v: &[u8]) -> Result<u64, DecodeError> {
    match v.len() {
        4 => parse_u32(v).map(u64::from),
        _ => parse_u64(v),
    }
}

/// Builds the attributes of a request (and, in tests, of a reply).
#[derive(Debug, Default, Clone)]
pub struct AttrWriter {
    nlas: Vec<DefaultNla>,
}

impl AttrWriter {
    /// Returns an empty attribute list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an attribute with a raw payload.
    pub fn bytes(mut self, kind: u16, v: &[u8]) -> Self {
        self.nlas.push(DefaultNla::new(kind, v.to_vec()));
        self
    }

    #[cfg(test)]
    /// Appends a `u8` attribute.
    pub fn u8(self, kind: u16, v: u8) -> Self {
        self.bytes(kind, &[v])
    }

    #[cfg(test)]
    /// Appends a `u16` attribute (host order).
    pub fn u16(self, kind: u16, v: u16) -> Self {
        self.bytes(kind, &v.to_ne_bytes())
    }

    /// Appends a `u32` attribute.
    pub fn u32(self, kind: u16, v: u32) -> Self {
        self.bytes(kind, &v.to_ne_bytes())
    }

    /// Appends a `uint` attribute in its 8-byte form.
    pub fn uint(self, kind: u16, v: u64) -> Self {
        self.bytes(kind, &v.to_ne_bytes())
    }

    #[cfg(test)]
    /// Appends a `flag` attribute.
    pub fn flag(self, kind: u16) -> Self {
        self.bytes(kind, &[])
    }

    /// Appends a `string` attribute, NUL-terminated.
    pub fn string(self, kind: u16, v: &str) -> Self {
        let mut b = v.as_bytes().to_vec();
        b.push(0);
        self.bytes(kind, &b)
    }

    /// Appends an IP address as a 4- or 16-byte `binary` attribute.
    pub fn addr(self, kind: u16, v: IpAddr) -> Self {
        match v {
            IpAddr::V4(a) => self.bytes(kind, &a.octets()),
            IpAddr::V6(a) => self.bytes(kind, &a.octets()),
        }
    }

    #[cfg(test)]
    /// Appends a nest holding the attributes of `inner`.
    pub fn nest(self, kind: u16, inner: AttrWriter) -> Self {
        let payload = inner.finish();
        self.bytes(kind | netlink_packet_core::NLA_F_NESTED, &payload)
    }

    /// Returns the attributes in wire format.
    pub fn finish(self) -> Vec<u8> {
        let mut buf = vec![0; self.nlas.as_slice().buffer_len()];
        self.nlas.as_slice().emit(&mut buf);
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{conn, path};

    #[test]
    fn round_trip_and_uint_widths() {
        let buf = AttrWriter::new()
            .uint(conn::SESSION_ID, 0x0123_4567_89ab_cdef)
            .bytes(conn::TX_BYTES, &7u32.to_ne_bytes())
            .string(conn::CC, "delay")
            .addr(conn::REMOTE_ADDR, "fe80::1".parse().unwrap())
            .nest(
                conn::PATH,
                AttrWriter::new().u32(path::ID, 3).flag(path::BACKUP),
            )
            .nest(conn::PATH, AttrWriter::new().u32(path::ID, 4))
            .finish();
        let a = Attrs::parse(&buf, conn::ATTRS).unwrap();
        assert_eq!(
            a.uint(conn::SESSION_ID).unwrap(),
            Some(0x0123_4567_89ab_cdef)
        );
        assert_eq!(a.uint(conn::TX_BYTES).unwrap(), Some(7));
        assert_eq!(a.string(conn::CC).unwrap().as_deref(), Some("delay"));
        assert_eq!(
            a.addr(conn::REMOTE_ADDR).unwrap(),
            Some("fe80::1".parse().unwrap())
        );
        let paths = a.nests(conn::PATH, path::ATTRS).unwrap();
        assert_eq!(paths.len(), 2);
        assert!(paths[0].flag(path::BACKUP));
        assert!(!paths[1].flag(path::BACKUP));
        assert_eq!(paths[1].u32(path::ID).unwrap(), Some(4));
        assert_eq!(a.u32(conn::ERROR).unwrap(), None);
    }

    #[test]
    fn wrong_width_names_the_attribute() {
        let buf = AttrWriter::new().u16(conn::STATE, 1).finish();
        let a = Attrs::parse(&buf, conn::ATTRS).unwrap();
        let e = a.u32(conn::STATE).unwrap_err().to_string();
        assert!(e.contains("'state'"), "{e}");
        let buf = AttrWriter::new()
            .bytes(conn::REMOTE_ADDR, &[1, 2, 3])
            .finish();
        let a = Attrs::parse(&buf, conn::ATTRS).unwrap();
        assert!(a.addr(conn::REMOTE_ADDR).is_err());
    }

    #[test]
    fn truncated_buffer_is_an_error() {
        let mut buf = AttrWriter::new().u32(conn::STATE, 1).finish();
        buf.truncate(6);
        assert!(Attrs::parse(&buf, conn::ATTRS).is_err());
    }
}
