// SPDX-License-Identifier: GPL-2.0
//! Generic netlink plumbing: family lookup, requests, dumps, events, errors.
//!
//! Sockets come from `netlink-sys`, message framing from
//! `netlink-packet-core` and the generic netlink header and controller
//! messages from `netlink-packet-generic`. The `mrc` payload is kept as raw
//! attributes and decoded by `model.rs`.

use crate::attr::{AttrTable, Attrs};
use crate::model::{DumpError, Snapshot};
use crate::spec;
use netlink_packet_core::{
    DecodeError, Emitable, NetlinkHeader, NetlinkMessage, NetlinkPayload, ParseableParametrized,
    NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::{GenlCtrlAttrs, McastGrpAttrs};
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use std::fmt;
use std::io;

/// `NLMSGERR_ATTR_*` of the extended acknowledgement (`linux/netlink.h`).
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;
const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
const EXTACK_ATTRS: AttrTable = &[
    ("msg", NLMSGERR_ATTR_MSG, "string"),
    ("offs", NLMSGERR_ATTR_OFFS, "u32"),
    ("miss-type", NLMSGERR_ATTR_MISS_TYPE, "u32"),
];
/// Size of `struct nlmsghdr` and of the generic netlink header after it.
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;

/// An error of a netlink exchange.
#[derive(Debug)]
pub enum Error {
    /// The generic netlink family `mrc` is not registered.
    NotLoaded,
    /// The kernel refused a request.
    Kernel {
        /// Operation name from the spec.
        op: &'static str,
        /// Positive errno.
        errno: i32,
        /// Extended acknowledgement: message and the attribute it names.
        extack: Option<String>,
    },
    /// Joining the events group was refused (`EPERM`): it needs
    /// CAP_NET_ADMIN, as events carry session ids.
    EventsDenied,
    /// The socket failed.
    Io(&'static str, io::Error),
    /// A reply did not decode.
    Decode(String),
}

impl Error {
    /// Returns the errno of a kernel refusal.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotLoaded => write!(
                f,
                "mrc module not loaded (generic netlink family '{}' not found); run: modprobe mrc",
                spec::FAMILY_NAME
            ),
            Error::Kernel { op, errno, extack } => {
                if *errno == libc::EPERM || *errno == libc::EACCES {
                    write!(
                        f,
                        "{op}: permission denied: changes need CAP_NET_ADMIN in the network \
                         namespace (run as root)"
                    )?;
                } else {
                    write!(f, "{op}: {}", io::Error::from_raw_os_error(*errno))?;
                }
                match extack {
                    Some(m) => write!(f, ": {m}"),
                    None => Ok(()),
                }
            }
            Error::EventsDenied => write!(
                f,
                "monitor: permission denied joining the '{}' multicast group: events carry \
                 session ids, so monitoring needs CAP_NET_ADMIN in the network namespace \
                 (run as root)",
                spec::MCGRP_EVENTS
            ),
            Error::Io(what, e) => write!(f, "netlink {what}: {e}"),
            Error::Decode(e) => write!(f, "malformed reply: {e}"),
        }
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Decode(e.to_string())
    }
}

/// Payload of an `mrc` message: the command and its raw attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrcMsg {
    /// Command (`spec::cmd`).
    pub cmd: u8,
    /// Attributes in wire format.
    pub attrs: Vec<u8>,
}

impl GenlFamily for MrcMsg {
    fn family_name() -> &'static str {
        spec::FAMILY_NAME
    }

    fn command(&self) -> u8 {
        self.cmd
    }

    fn version(&self) -> u8 {
        spec::FAMILY_VERSION
    }
}

impl Emitable for MrcMsg {
    fn buffer_len(&self) -> usize {
        self.attrs.len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        buffer.copy_from_slice(&self.attrs);
    }
}

impl ParseableParametrized<[u8], GenlHeader> for MrcMsg {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(MrcMsg {
            cmd: header.cmd,
            attrs: buf.to_vec(),
        })
    }
}

/// Describes an extended acknowledgement: its message, and the request
/// attribute it points at (`offs`, relative to the request's netlink header)
/// or says is missing (`miss-type`).
pub fn describe_extack(tlvs: &[u8], request: &[u8], set: AttrTable) -> Option<String> {
    let a = Attrs::parse(tlvs, EXTACK_ATTRS).ok()?;
    let mut parts = Vec::new();
    if let Ok(Some(msg)) = a.string(NLMSGERR_ATTR_MSG) {
        parts.push(msg);
    }
    let name = |kind: u16| match set.iter().find(|(_, v, _)| *v == kind) {
        Some((n, _, _)) => format!("'{n}'"),
        None => format!("{kind}"),
    };
    if let Ok(Some(offs)) = a.u32(NLMSGERR_ATTR_OFFS) {
        let base = NLMSG_HDRLEN + GENL_HDRLEN;
        let mut at = base;
        let mut found = None;
        if let Ok(req) = Attrs::parse(request, set) {
            for (kind, value) in req.iter() {
                if at == offs as usize {
                    found = Some(kind);
                }
                at += (4 + value.len()).next_multiple_of(4);
            }
        }
        if let Some(kind) = found {
            parts.push(format!("bad attribute {}", name(kind)));
        }
    }
    if let Ok(Some(kind)) = a.u32(NLMSGERR_ATTR_MISS_TYPE) {
        parts.push(format!("missing attribute {}", name(kind as u16)));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Returns the extended acknowledgement TLVs of an `NLMSG_ERROR` payload
/// (`echo` is what follows the error code: the request, or its header if
/// capped).
pub fn error_tlvs(flags: u16, echo: &[u8]) -> &[u8] {
    if flags & NLM_F_ACK_TLVS == 0 {
        return &[];
    }
    let skip = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        echo.get(..4)
            .and_then(|b| b.try_into().ok())
            .map_or(echo.len(), |b: [u8; 4]| u32::from_ne_bytes(b) as usize)
            .next_multiple_of(4)
    };
    echo.get(skip..).unwrap_or(&[])
}

/// A generic netlink socket talking to the `mrc` family.
pub struct Client {
    sock: Socket,
    family: u16,
    events_group: Option<u32>,
    seq: u32,
}

/// How a request ends.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Replies (if any), then an acknowledgement.
    Do,
    /// Multipart replies until `NLMSG_DONE`.
    Dump,
}

impl Client {
    /// Opens a socket and resolves the family and its events group.
    pub fn connect() -> Result<Self, Error> {
        let mut c = Self::open()?;
        c.resolve()?;
        Ok(c)
    }

    fn open() -> Result<Self, Error> {
        let mut sock = Socket::new(NETLINK_GENERIC).map_err(|e| Error::Io("socket", e))?;
        sock.bind_auto().map_err(|e| Error::Io("bind", e))?;
        // Best effort: without them errors still arrive, just without detail.
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        Ok(Client {
            sock,
            family: 0,
            events_group: None,
            seq: 0,
        })
    }

    fn resolve(&mut self) -> Result<(), Error> {
        let msg = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(spec::FAMILY_NAME.into())],
        });
        let replies = match self.transact(msg, Kind::Do, "getfamily", &[], &[]) {
            Err(Error::Kernel { errno, .. }) if errno == libc::ENOENT => {
                return Err(Error::NotLoaded)
            }
            r => r?,
        };
        for ctrl in replies.msgs {
            for nla in ctrl.nlas {
                match nla {
                    GenlCtrlAttrs::FamilyId(id) => self.family = id,
                    GenlCtrlAttrs::McastGroups(groups) => {
                        for g in groups {
                            let name = g.iter().find_map(|a| match a {
                                McastGrpAttrs::Name(n) => Some(n.as_str()),
                                _ => None,
                            });
                            let id = g.iter().find_map(|a| match a {
                                McastGrpAttrs::Id(i) => Some(*i),
                                _ => None,
                            });
                            if name == Some(spec::MCGRP_EVENTS) {
                                self.events_group = id;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        if self.family == 0 {
            return Err(Error::NotLoaded);
        }
        Ok(())
    }

    /// Sends one request and collects the payloads of its replies.
    fn transact<P>(
        &mut self,
        payload: GenlMessage<P>,
        kind: Kind,
        op: &'static str,
        attrs: &[u8],
        set: AttrTable,
    ) -> Result<Replies<P>, Error>
    where
        P: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + fmt::Debug,
    {
        let mut payload = payload;
        payload.finalize();
        if payload.family_id() == 0 {
            payload.set_resolved_family_id(self.family);
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut msg = NetlinkMessage::from(payload);
        msg.header.flags = NLM_F_REQUEST
            | match kind {
                Kind::Do => NLM_F_ACK,
                Kind::Dump => NLM_F_DUMP,
            };
        msg.header.sequence_number = seq;
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.sock
            .send_to(&buf, &SocketAddr::new(0, 0), 0)
            .map_err(|e| Error::Io("send", e))?;

        let mut out = Vec::new();
        let mut interrupted = false;
        loop {
            let (data, _) = self
                .sock
                .recv_from_full()
                .map_err(|e| Error::Io("recv", e))?;
            let mut off = 0;
            while off < data.len() {
                let m = NetlinkMessage::<GenlMessage<P>>::deserialize(&data[off..])?;
                let len = m.header.length as usize;
                if len == 0 {
                    break;
                }
                off += len.next_multiple_of(4);
                if m.header.sequence_number != seq {
                    continue;
                }
                interrupted |= m.header.flags & NLM_F_DUMP_INTR != 0;
                match finish(m.header, m.payload, op, attrs, set)? {
                    Step::More(Some(p)) => out.push(p),
                    Step::More(None) => {}
                    Step::Done => {
                        return Ok(Replies {
                            msgs: out,
                            interrupted,
                        })
                    }
                }
            }
        }
    }

    /// Runs a `do` request of command `cmd` and returns its replies.
    pub fn request(
        &mut self,
        cmd: u8,
        op: &'static str,
        attrs: Vec<u8>,
        set: AttrTable,
    ) -> Result<Vec<MrcMsg>, Error> {
        let a = attrs.clone();
        self.transact(
            GenlMessage::from_payload(MrcMsg { cmd, attrs }),
            Kind::Do,
            op,
            &a,
            set,
        )
        .map(|r| r.msgs)
    }

    /// Runs a dump of command `cmd`. A dump during which the table changed
    /// is read again, up to a few times; if the table keeps changing the
    /// last one is returned, marked as not consistent.
    pub fn dump<T: Snapshot>(
        &mut self,
        cmd: u8,
        op: &'static str,
        set: AttrTable,
        assemble: impl Fn(&[MrcMsg]) -> Result<T, DumpError>,
    ) -> Result<T, Error> {
        const ATTEMPTS: usize = 5;
        let mut attempt = 1;
        loop {
            let r = self.transact(
                GenlMessage::from_payload(MrcMsg {
                    cmd,
                    attrs: Vec::new(),
                }),
                Kind::Dump,
                op,
                &[],
                set,
            )?;
            let mut t = assemble(&r.msgs).map_err(|DumpError::Decode(e)| Error::Decode(e))?;
            if r.interrupted {
                t.mark_torn();
            }
            if t.consistent() || attempt == ATTEMPTS {
                return Ok(t);
            }
            attempt += 1;
        }
    }

    /// Subscribes a new socket to the events group.
    pub fn subscribe(&self) -> Result<Events, Error> {
        let group = self.events_group.ok_or(Error::Decode(format!(
            "family '{}' has no '{}' multicast group",
            spec::FAMILY_NAME,
            spec::MCGRP_EVENTS
        )))?;
        let mut sock = Socket::new(NETLINK_GENERIC).map_err(|e| Error::Io("socket", e))?;
        sock.bind_auto().map_err(|e| Error::Io("bind", e))?;
        grow_rcvbuf(&sock);
        sock.add_membership(group).map_err(membership_error)?;
        Ok(Events {
            sock,
            family: self.family,
        })
    }
}

/// Maps a failure to join the events group to an error: the kernel refuses
/// a reader without CAP_NET_ADMIN with `EPERM`.
fn membership_error(e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => Error::EventsDenied,
        _ => Error::Io("subscribe", e),
    }
}

/// Receive buffer of the events socket: room for bursts of thousands of
/// notifications (a connection opening or removing hundreds of paths).
const EVENTS_RCVBUF: libc::c_int = 8 << 20;

/// Enlarges the events socket's receive buffer: beyond `rmem_max` where
/// allowed (`SO_RCVBUFFORCE`, CAP_NET_ADMIN), else up to it. Best effort:
/// an overrun is reported when it happens.
fn grow_rcvbuf(sock: &Socket) {
    use std::os::fd::AsRawFd;
    let size = EVENTS_RCVBUF;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: a valid socket descriptor and a c_int option value of the
        // length given.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// The replies to one request.
#[derive(Debug)]
struct Replies<P> {
    msgs: Vec<P>,
    /// A dump during which the table changed (`NLM_F_DUMP_INTR`).
    interrupted: bool,
}

/// What one received message means for a request.
enum Step<P> {
    More(Option<P>),
    Done,
}

fn finish<P>(
    header: NetlinkHeader,
    payload: NetlinkPayload<GenlMessage<P>>,
    op: &'static str,
    attrs: &[u8],
    set: AttrTable,
) -> Result<Step<P>, Error> {
    match payload {
        NetlinkPayload::InnerMessage(m) => Ok(Step::More(Some(m.payload))),
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(Step::Done),
            Some(code) => Err(Error::Kernel {
                op,
                errno: -code.get(),
                extack: describe_extack(error_tlvs(header.flags, &e.header), attrs, set),
            }),
        },
        NetlinkPayload::Done(d) if d.code < 0 => Err(Error::Kernel {
            op,
            errno: -d.code,
            extack: describe_extack(&d.extended_ack, attrs, set),
        }),
        NetlinkPayload::Done(_) => Ok(Step::Done),
        _ => Ok(Step::More(None)),
    }
}

/// A socket subscribed to the events group.
pub struct Events {
    sock: Socket,
    family: u16,
}

impl Events {
    /// Waits for the next datagram and returns its `mrc` notifications.
    ///
    /// A receive buffer overrun, or an event the kernel had no memory for,
    /// is an `Io` error with errno `ENOBUFS`: events were lost, and the
    /// socket keeps working.
    pub fn next_batch(&self) -> Result<Vec<MrcMsg>, Error> {
        let (data, _) = self
            .sock
            .recv_from_full()
            .map_err(|e| Error::Io("recv", e))?;
        let mut out = Vec::new();
        let mut off = 0;
        while off < data.len() {
            let m = NetlinkMessage::<GenlMessage<MrcMsg>>::deserialize(&data[off..])?;
            let len = m.header.length as usize;
            if len == 0 {
                break;
            }
            off += len.next_multiple_of(4);
            if m.header.message_type != self.family {
                continue;
            }
            if let NetlinkPayload::InnerMessage(g) = m.payload {
                out.push(g.payload);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrWriter;
    use crate::spec::endpoint;

    #[test]
    fn extack_names_the_bad_attribute() {
        let request = AttrWriter::new()
            .bytes(endpoint::ADDR, &[10, 0, 0, 1, 0])
            .u32(endpoint::FLAGS, 4)
            .finish();
        // The second attribute starts after 16 + 4 bytes of headers and the
        // first attribute (4 + 5 bytes, padded to 12).
        let tlvs = AttrWriter::new()
            .string(NLMSGERR_ATTR_MSG, "unknown flags")
            .u32(NLMSGERR_ATTR_OFFS, 32)
            .finish();
        let d = describe_extack(&tlvs, &request, endpoint::ATTRS).unwrap();
        assert_eq!(d, "unknown flags, bad attribute 'flags'");
        let tlvs = AttrWriter::new()
            .u32(NLMSGERR_ATTR_MISS_TYPE, u32::from(endpoint::ADDR))
            .finish();
        let d = describe_extack(&tlvs, &[], endpoint::ATTRS).unwrap();
        assert_eq!(d, "missing attribute 'addr'");
        assert_eq!(describe_extack(&[], &request, endpoint::ATTRS), None);
    }

    #[test]
    fn error_tlvs_skip_the_echoed_request() {
        let tlvs = AttrWriter::new().string(NLMSGERR_ATTR_MSG, "x").finish();
        // Capped: only the 16-byte header is echoed.
        let mut echo = vec![0u8; NLMSG_HDRLEN];
        echo[..4].copy_from_slice(&28u32.to_ne_bytes());
        echo.extend_from_slice(&tlvs);
        assert_eq!(error_tlvs(NLM_F_ACK_TLVS | NLM_F_CAPPED, &echo), &tlvs[..]);
        // Not capped: the whole 28-byte request precedes the TLVs.
        let mut echo = vec![0u8; 28];
        echo[..4].copy_from_slice(&28u32.to_ne_bytes());
        echo.extend_from_slice(&tlvs);
        assert_eq!(error_tlvs(NLM_F_ACK_TLVS, &echo), &tlvs[..]);
        assert!(error_tlvs(0, &echo).is_empty());
    }

    #[test]
    fn messages_round_trip_through_the_crates() {
        let attrs = AttrWriter::new().u32(endpoint::IFINDEX, 3).finish();
        let mut g = GenlMessage::from_payload(MrcMsg {
            cmd: spec::cmd::ENDPOINT_GET,
            attrs: attrs.clone(),
        });
        g.set_resolved_family_id(0x1234);
        let mut m = NetlinkMessage::from(g);
        m.finalize();
        let mut buf = vec![0; m.buffer_len()];
        m.serialize(&mut buf);
        assert_eq!(m.header.message_type, 0x1234);
        let back = NetlinkMessage::<GenlMessage<MrcMsg>>::deserialize(&buf).unwrap();
        match back.payload {
            NetlinkPayload::InnerMessage(g) => {
                assert_eq!(g.header.version, spec::FAMILY_VERSION);
                assert_eq!(g.payload.cmd, spec::cmd::ENDPOINT_GET);
                assert_eq!(g.payload.attrs, attrs);
            }
            p => panic!("unexpected {p:?}"),
        }
    }

    /// Exercises the request, dump and error paths against the generic
    /// netlink controller, which every Linux kernel has.
    #[test]
    fn exchanges_with_the_kernel_controller() {
        let Ok(mut c) = Client::open() else {
            eprintln!("no netlink socket here; skipped");
            return;
        };
        let dump = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![],
        });
        let families = c.transact(dump, Kind::Dump, "getfamily", &[], &[]).unwrap();
        assert!(!families.interrupted);
        let families = families.msgs;
        let nlctrl = GenlCtrlAttrs::FamilyName("nlctrl".into());
        assert!(families.iter().any(|f| f.nlas.contains(&nlctrl)));

        let get = |name: &str| {
            GenlMessage::from_payload(GenlCtrl {
                cmd: GenlCtrlCmd::GetFamily,
                nlas: vec![GenlCtrlAttrs::FamilyName(name.into())],
            })
        };
        let one = c.transact(get("nlctrl"), Kind::Do, "getfamily", &[], &[]);
        assert_eq!(one.unwrap().msgs.len(), 1);
        let missing = c.transact(get("no-such-family"), Kind::Do, "getfamily", &[], &[]);
        assert_eq!(missing.unwrap_err().errno(), Some(libc::ENOENT));
    }

    #[test]
    fn not_loaded_message() {
        assert_eq!(
            Error::NotLoaded.to_string(),
            "mrc module not loaded (generic netlink family 'mrc' not found); run: modprobe mrc"
        );
        let e = Error::Kernel {
            op: "endpoint-add",
            errno: libc::EPERM,
            extack: None,
        };
        assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
    }

    #[test]
    fn events_denied_message_names_the_capability() {
        let e = membership_error(io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(
            e.to_string(),
            "monitor: permission denied joining the 'events' multicast group: events carry \
             session ids, so monitoring needs CAP_NET_ADMIN in the network namespace \
             (run as root)"
        );
        // Other failures keep the socket's own text.
        let e = membership_error(io::Error::from_raw_os_error(libc::ENOMEM));
        assert!(matches!(e, Error::Io("subscribe", _)), "{e}");
    }
}
