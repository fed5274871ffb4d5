// SPDX-License-Identifier: GPL-2.0
//! Endpoint configuration files (`endpoint load`) and the changes that
//! bring a namespace's endpoint table to one.
//!
//! One endpoint a line; `#` starts a comment, blank lines are ignored:
//!
//! ```text
//! ADDR [dev IFNAME | ifindex N] [backup]
//! dev IFNAME [ipv4 | ipv6] [backup]
//! ```
//!
//! The first form is one address, pinned to an interface if one is named
//! (an IPv6 link-local address needs one). The second stands for every
//! global unicast address of the interface (see
//! [`crate::ifaddr::IfAddr::is_global_unicast`]), each pinned to it, or
//! only those of one family. An address may appear twice only with the
//! same settings.

use crate::model::Endpoint;
use crate::spec::endpoint_flags;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// The number of endpoints a namespace's table holds (`MAX_ENDPOINTS` of
/// the module).
pub const TABLE_SIZE: usize = 16;

/// Longest interface name (`IFNAMSIZ` less the NUL).
const IFNAME_MAX: usize = 15;

/// An interface, by name or index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Iface {
    Name(String),
    Index(u32),
}

impl fmt::Display for Iface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Iface::Name(n) => write!(f, "dev {n}"),
            Iface::Index(i) => write!(f, "ifindex {i}"),
        }
    }
}

/// An address family, to take only some of an interface's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

/// What one line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// One address, pinned to `dev` if given.
    Addr {
        addr: IpAddr,
        dev: Option<Iface>,
        backup: bool,
    },
    /// The global unicast addresses of an interface (of one family, if
    /// given), each pinned to it.
    Iface {
        dev: Iface,
        family: Option<Family>,
        backup: bool,
    },
}

/// An entry and the line it is on (1-based; 0 for one given on the
/// command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub line: usize,
    pub entry: Entry,
}

/// A mistake in a file: its line (0: none in particular) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub msg: String,
}

impl LineError {
    fn new(line: usize, msg: impl Into<String>) -> Self {
        LineError {
            line,
            msg: msg.into(),
        }
    }

    /// The error as `SOURCE:LINE: message` (`SOURCE: message` without a
    /// line, the message alone without a source).
    pub fn display(&self, source: Option<&str>) -> String {
        match (source, self.line) {
            (Some(s), 0) => format!("{s}: {}", self.msg),
            (Some(s), n) => format!("{s}:{n}: {}", self.msg),
            (None, _) => self.msg.clone(),
        }
    }
}

fn parse_ifname(line: usize, name: Option<&str>) -> Result<Iface, LineError> {
    let Some(name) = name else {
        return Err(LineError::new(line, "'dev' needs an interface name"));
    };
    if name.len() > IFNAME_MAX || name.contains(['/', '\0']) {
        return Err(LineError::new(
            line,
            format!("'{name}' is not an interface name"),
        ));
    }
    Ok(Iface::Name(name.to_string()))
}

fn parse_ifindex(line: usize, n: Option<&str>) -> Result<Iface, LineError> {
    match n.map(str::parse::<u32>) {
        Some(Ok(i)) if i > 0 => Ok(Iface::Index(i)),
        _ => Err(LineError::new(
            line,
            format!(
                "'ifindex' needs an interface index (a positive number), not '{}'",
                n.unwrap_or("")
            ),
        )),
    }
}

fn is_ipv6_link_local(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80)
}

/// Parses one line (without its comment); `None` for a blank one.
fn parse_line(n: usize, text: &str) -> Result<Option<Entry>, LineError> {
    let mut words = text.split_whitespace();
    let Some(first) = words.next() else {
        return Ok(None);
    };
    let (mut addr, mut dev) = (None, None);
    match first {
        "dev" => dev = Some(parse_ifname(n, words.next())?),
        "ifindex" => dev = Some(parse_ifindex(n, words.next())?),
        w => match w.parse::<IpAddr>() {
            Ok(a) => addr = Some(a),
            Err(_) => {
                return Err(LineError::new(
                    n,
                    format!("'{w}' is not an IP address, nor 'dev IFNAME'"),
                ))
            }
        },
    }
    let (mut backup, mut family) = (false, None);
    while let Some(w) = words.next() {
        match w {
            "backup" => backup = true,
            "dev" | "ifindex" if dev.is_some() => {
                return Err(LineError::new(n, "more than one interface on the line"))
            }
            "dev" => dev = Some(parse_ifname(n, words.next())?),
            "ifindex" => dev = Some(parse_ifindex(n, words.next())?),
            "ipv4" | "ipv6" if addr.is_some() => {
                return Err(LineError::new(
                    n,
                    format!("'{w}' selects addresses of an interface: not after an address"),
                ))
            }
            "ipv4" | "ipv6" if family.is_some() => {
                return Err(LineError::new(n, "more than one of 'ipv4' and 'ipv6'"))
            }
            "ipv4" => family = Some(Family::V4),
            "ipv6" => family = Some(Family::V6),
            "port" => {
                return Err(LineError::new(
                    n,
                    "an endpoint has no port of its own: every endpoint uses the module's \
                     UDP port (insmod mrc port=P)",
                ))
            }
            w => {
                return Err(LineError::new(
                    n,
                    format!(
                        "unknown word '{w}' (expected dev IFNAME, ifindex N, backup, ipv4 or ipv6)"
                    ),
                ))
            }
        }
    }
    match (addr, dev) {
        (Some(addr), dev) => {
            let unicast = match addr {
                IpAddr::V4(a) => !(a.is_multicast() || a.is_broadcast() || a.is_unspecified()),
                IpAddr::V6(a) => !(a.is_multicast() || a.is_unspecified()),
            };
            if !unicast {
                return Err(LineError::new(
                    n,
                    format!("{addr} is not a unicast address"),
                ));
            }
            if dev.is_none() && is_ipv6_link_local(&addr) {
                return Err(LineError::new(
                    n,
                    format!("{addr} is link-local: name its interface (dev IFNAME)"),
                ));
            }
            Ok(Some(Entry::Addr { addr, dev, backup }))
        }
        (None, Some(dev)) => Ok(Some(Entry::Iface {
            dev,
            family,
            backup,
        })),
        (None, None) => Err(LineError::new(n, "empty entry")),
    }
}

/// Parses a configuration file. Returns every mistake, not just the first.
pub fn parse(text: &str) -> Result<Vec<Line>, Vec<LineError>> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let content = raw.split_once('#').map_or(raw, |(c, _)| c);
        match parse_line(i + 1, content) {
            Ok(Some(entry)) => lines.push(Line { line: i + 1, entry }),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        Err(errors)
    }
}

/// An endpoint as the file wants it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Want {
    pub addr: IpAddr,
    /// Interface it is pinned to; 0 for none.
    pub ifindex: u32,
    pub backup: bool,
    /// Line of the file that asks for it.
    pub line: usize,
}

impl Want {
    fn flags(&self) -> u32 {
        if self.backup {
            endpoint_flags::BACKUP
        } else {
            0
        }
    }

    /// Whether the table's endpoint `e` is this one.
    fn same_as(&self, e: &Endpoint) -> bool {
        e.addr == self.addr && e.ifindex.unwrap_or(0) == self.ifindex && e.flags == self.flags()
    }

    /// The endpoint as the table will show it.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.addr,
            ifindex: Some(self.ifindex),
            ifname: None,
            backup: self.backup,
            flags: self.flags(),
        }
    }
}

/// What the host is asked while entries are resolved.
pub trait Host {
    /// The index of the interface named `name`.
    fn ifindex(&mut self, name: &str) -> Result<u32, String>;
    /// The global unicast addresses of interface `ifindex`, in the
    /// kernel's order; an error if there is no such interface.
    fn addrs(&mut self, ifindex: u32) -> Result<Vec<IpAddr>, String>;
}

/// Turns entries into the endpoints they stand for, in order: interface
/// names become indexes, interfaces their addresses. An address listed
/// again with the same settings is taken once; with other settings it is
/// an error, as is a file of more endpoints than the table holds.
pub fn resolve(lines: &[Line], host: &mut impl Host) -> Result<Vec<Want>, Vec<LineError>> {
    let mut wants: Vec<Want> = Vec::new();
    let mut errors = Vec::new();
    let mut at: HashMap<IpAddr, usize> = HashMap::new();
    fn index(host: &mut impl Host, n: usize, dev: &Iface) -> Result<u32, LineError> {
        match dev {
            Iface::Name(name) => host.ifindex(name).map_err(|e| LineError::new(n, e)),
            Iface::Index(i) => Ok(*i),
        }
    }
    for l in lines {
        let n = l.line;
        let found = match &l.entry {
            Entry::Addr { addr, dev, backup } => {
                let ifindex = match dev {
                    Some(d) => index(host, n, d),
                    None => Ok(0),
                };
                ifindex.map(|ifindex| {
                    vec![Want {
                        addr: *addr,
                        ifindex,
                        backup: *backup,
                        line: n,
                    }]
                })
            }
            Entry::Iface {
                dev,
                family,
                backup,
            } => index(host, n, dev).and_then(|ifindex| {
                let addrs = host.addrs(ifindex).map_err(|e| LineError::new(n, e))?;
                let addrs: Vec<_> = addrs
                    .into_iter()
                    .filter(|a| family.is_none() || *family == Some(Family::of(a)))
                    .collect();
                if addrs.is_empty() {
                    let which = match family {
                        Some(Family::V4) => "IPv4 ",
                        Some(Family::V6) => "IPv6 ",
                        None => "",
                    };
                    return Err(LineError::new(
                        n,
                        format!("{dev} has no global unicast {which}address"),
                    ));
                }
                Ok(addrs
                    .into_iter()
                    .map(|addr| Want {
                        addr,
                        ifindex,
                        backup: *backup,
                        line: n,
                    })
                    .collect())
            }),
        };
        match found {
            Ok(found) => {
                for w in found {
                    match at.get(&w.addr) {
                        Some(&i)
                            if wants[i].ifindex == w.ifindex && wants[i].backup == w.backup => {}
                        Some(&i) => errors.push(LineError::new(
                            n,
                            format!(
                                "{} is also on line {} with other settings",
                                w.addr, wants[i].line
                            ),
                        )),
                        None => {
                            at.insert(w.addr, wants.len());
                            wants.push(w);
                        }
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() && wants.len() > TABLE_SIZE {
        errors.push(LineError::new(
            0,
            format!("{} endpoints: the table holds {TABLE_SIZE}", wants.len()),
        ));
    }
    if errors.is_empty() {
        Ok(wants)
    } else {
        Err(errors)
    }
}

/// An endpoint whose settings change: removed, then added again (the
/// kernel has no request that changes an endpoint in place).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub from: Endpoint,
    pub to: Endpoint,
    #[serde(skip)]
    pub want: Want,
}

/// The changes that bring the endpoint table to the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// In the table, not in the file (with `--replace` only).
    pub removed: Vec<Endpoint>,
    /// In the file, with other settings in the table.
    pub changed: Vec<Change>,
    /// In the file, not in the table.
    pub added: Vec<Endpoint>,
    /// In the table as the file wants them.
    pub unchanged: Vec<Endpoint>,
    /// In the table, not in the file, and left there (without `--replace`).
    pub kept: Vec<Endpoint>,
    #[serde(skip)]
    add_wants: Vec<Want>,
}

/// One request of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `endpoint-del` of this address on this interface (0: any).
    Del { addr: IpAddr, ifindex: u32 },
    /// `endpoint-add`.
    Add(Want),
}

impl Plan {
    /// Compares the table's endpoints `current` with those the file
    /// wants. With `replace`, endpoints not in the file are removed, else
    /// kept. An error if the table would overflow.
    pub fn new(wants: &[Want], current: &[Endpoint], replace: bool) -> Result<Plan, String> {
        let mut p = Plan::default();
        for w in wants {
            match current.iter().find(|e| e.addr == w.addr) {
                Some(e) if w.same_as(e) => p.unchanged.push(e.clone()),
                Some(e) => p.changed.push(Change {
                    from: e.clone(),
                    to: w.endpoint(),
                    want: w.clone(),
                }),
                None => {
                    p.added.push(w.endpoint());
                    p.add_wants.push(w.clone());
                }
            }
        }
        for e in current {
            if !wants.iter().any(|w| w.addr == e.addr) {
                if replace {
                    p.removed.push(e.clone());
                } else {
                    p.kept.push(e.clone());
                }
            }
        }
        let total = current.len() - p.removed.len() + p.added.len();
        if total > TABLE_SIZE {
            return Err(format!(
                "the table would hold {total} endpoints ({} now, {} to add), and it holds \
                 {TABLE_SIZE}; --replace removes those not in the file",
                current.len(),
                p.added.len()
            ));
        }
        Ok(p)
    }

    /// Fills in the interface names of the endpoints pinned to one.
    pub fn name_interfaces(&mut self, name: impl Fn(u32) -> Option<String>) {
        let all = self
            .removed
            .iter_mut()
            .chain(self.added.iter_mut())
            .chain(self.unchanged.iter_mut())
            .chain(self.kept.iter_mut())
            .chain(
                self.changed
                    .iter_mut()
                    .flat_map(|c| [&mut c.from, &mut c.to]),
            );
        for e in all {
            if e.ifname.is_none() {
                e.ifname = e.ifindex.filter(|i| *i != 0).and_then(&name);
            }
        }
    }

    /// Whether the table already is as the file wants it.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.changed.is_empty() && self.added.is_empty()
    }

    /// The requests, in order: removals first (making room), then changes
    /// and additions in the order of the file.
    pub fn ops(&self) -> Vec<Op> {
        let mut ops: Vec<Op> = self
            .removed
            .iter()
            .map(|e| Op::Del {
                addr: e.addr,
                ifindex: e.ifindex.unwrap_or(0),
            })
            .collect();
        let mut later: Vec<(usize, Vec<Op>)> = self
            .changed
            .iter()
            .map(|c| {
                (
                    c.want.line,
                    vec![
                        Op::Del {
                            addr: c.from.addr,
                            ifindex: c.from.ifindex.unwrap_or(0),
                        },
                        Op::Add(c.want.clone()),
                    ],
                )
            })
            .chain(
                self.add_wants
                    .iter()
                    .map(|w| (w.line, vec![Op::Add(w.clone())])),
            )
            .collect();
        // Stable: entries of one line keep the order of the interface's addresses.
        later.sort_by_key(|(line, _)| *line);
        ops.extend(later.into_iter().flat_map(|(_, o)| o));
        ops
    }

    /// The plan as text: one line per change, then a summary; `done` says
    /// whether the changes were made or would be (a dry run). `name` gives
    /// interface names.
    pub fn describe(&self, done: bool, name: impl Fn(u32) -> Option<String>) -> String {
        let verb = |past: &str, future: &str| {
            if done {
                past.to_string()
            } else {
                format!("would {future}")
            }
        };
        let mut out = String::new();
        for e in &self.removed {
            out += &format!("{} {}\n", verb("removed", "remove"), show(e, &name));
        }
        for c in &self.changed {
            out += &format!(
                "{} {} (was {})\n",
                verb("changed", "change"),
                show(&c.to, &name),
                show(&c.from, &name)
            );
        }
        for e in &self.added {
            out += &format!("{} {}\n", verb("added", "add"), show(e, &name));
        }
        if self.is_empty() {
            out += "endpoints: no change";
        } else {
            out += &format!(
                "endpoints: {} added, {} removed, {} changed",
                self.added.len(),
                self.removed.len(),
                self.changed.len()
            );
            if !done {
                out += " (dry run)";
            }
        }
        out += &format!(", {} unchanged", self.unchanged.len());
        if !self.kept.is_empty() {
            let n = self.kept.len();
            out += &format!(", {n} other{} kept", if n == 1 { "" } else { "s" });
        }
        out.push('\n');
        out
    }
}

/// An endpoint as a config line would give it.
pub fn show(e: &Endpoint, name: &impl Fn(u32) -> Option<String>) -> String {
    let mut s = e.addr.to_string();
    match e.ifindex {
        Some(0) | None => {}
        Some(i) => match e.ifname.clone().or_else(|| name(i)) {
            Some(n) => s += &format!(" dev {n}"),
            None => s += &format!(" ifindex {i}"),
        },
    }
    if e.backup {
        s += " backup";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn err(text: &str) -> Vec<(usize, String)> {
        parse(text)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.line, e.msg))
            .collect()
    }

    #[test]
    fn parses_both_forms_comments_and_blank_lines() {
        let text = "# rails of host a\n\
                    10.0.1.1 dev eth1\n\
                    \n\
                    10.0.2.1   backup   # the slow one\n\
                    fd00::1 ifindex 7 backup\n\
                    dev eth3\n\
                    dev eth4 ipv6 backup\n\
                    ifindex 9 ipv4\n\
                    fe80::1 dev eth1\n";
        let lines = parse(text).unwrap();
        let want = vec![
            (
                2,
                Entry::Addr {
                    addr: ip("10.0.1.1"),
                    dev: Some(Iface::Name("eth1".into())),
                    backup: false,
                },
            ),
            (
                4,
                Entry::Addr {
                    addr: ip("10.0.2.1"),
                    dev: None,
                    backup: true,
                },
            ),
            (
                5,
                Entry::Addr {
                    addr: ip("fd00::1"),
                    dev: Some(Iface::Index(7)),
                    backup: true,
                },
            ),
            (
                6,
                Entry::Iface {
                    dev: Iface::Name("eth3".into()),
                    family: None,
                    backup: false,
                },
            ),
            (
                7,
                Entry::Iface {
                    dev: Iface::Name("eth4".into()),
                    family: Some(Family::V6),
                    backup: true,
                },
            ),
            (
                8,
                Entry::Iface {
                    dev: Iface::Index(9),
                    family: Some(Family::V4),
                    backup: false,
                },
            ),
            (
                9,
                Entry::Addr {
                    addr: ip("fe80::1"),
                    dev: Some(Iface::Name("eth1".into())),
                    backup: false,
                },
            ),
        ];
        let got: Vec<_> = lines.into_iter().map(|l| (l.line, l.entry)).collect();
        assert_eq!(got, want);
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("  # only a comment\n\n").unwrap(), vec![]);
        // Windows line ends and a comment glued to a word.
        assert_eq!(parse("10.0.0.1 backup#x\r\n").unwrap().len(), 1);
    }

    #[test]
    fn names_the_line_of_every_mistake() {
        assert_eq!(
            err("10.0.0.1\n10.0.0.300\nfoo\n"),
            vec![
                (
                    2,
                    "'10.0.0.300' is not an IP address, nor 'dev IFNAME'".into()
                ),
                (3, "'foo' is not an IP address, nor 'dev IFNAME'".into()),
            ]
        );
        let one = |t: &str| {
            let e = err(t);
            assert_eq!(e.len(), 1, "{e:?}");
            assert_eq!(e[0].0, 1);
            e[0].1.clone()
        };
        assert!(one("10.0.0.1 port 5000").contains("no port"));
        assert!(one("10.0.0.1 dev").contains("needs an interface name"));
        assert!(one("10.0.0.1 dev eth1 dev eth2").contains("more than one interface"));
        assert!(one("10.0.0.1 dev eth1 ifindex 2").contains("more than one interface"));
        assert!(one("dev eth1 dev eth2").contains("more than one interface"));
        assert!(one("10.0.0.1 ifindex x").contains("interface index"));
        assert!(one("10.0.0.1 ifindex 0").contains("interface index"));
        assert!(one("10.0.0.1 ipv4").contains("not after an address"));
        assert!(one("dev eth1 ipv4 ipv6").contains("more than one of"));
        assert!(one("10.0.0.1 fast").contains("unknown word 'fast'"));
        assert!(one("dev a-very-long-interface").contains("not an interface name"));
        assert!(one("dev a/b").contains("not an interface name"));
        assert!(one("224.0.0.1").contains("not a unicast address"));
        assert!(one("0.0.0.0").contains("not a unicast address"));
        assert!(one("255.255.255.255").contains("not a unicast address"));
        assert!(one("ff02::1 dev eth1").contains("not a unicast address"));
        assert!(one("fe80::1").contains("link-local"));
        assert!(one("backup").contains("not an IP address"));
        let e = LineError::new(3, "bad");
        assert_eq!(e.display(Some("hosts.conf")), "hosts.conf:3: bad");
        assert_eq!(LineError::new(0, "bad").display(Some("f")), "f: bad");
        assert_eq!(e.display(None), "bad");
    }

    /// A host with eth1 (index 3) and eth2 (index 4).
    struct FakeHost;

    impl Host for FakeHost {
        fn ifindex(&mut self, name: &str) -> Result<u32, String> {
            match name {
                "eth1" => Ok(3),
                "eth2" => Ok(4),
                "eth9" => Ok(9),
                _ => Err(format!("no interface named '{name}'")),
            }
        }

        fn addrs(&mut self, ifindex: u32) -> Result<Vec<IpAddr>, String> {
            match ifindex {
                3 => Ok(vec![ip("10.0.1.1"), ip("10.0.1.5"), ip("fd00:1::1")]),
                4 => Ok(vec![ip("10.0.2.1")]),
                9 => Ok(vec![]),
                i => Err(format!("no interface with index {i}")),
            }
        }
    }

    fn resolved(text: &str) -> Result<Vec<Want>, Vec<(usize, String)>> {
        resolve(&parse(text).unwrap(), &mut FakeHost)
            .map_err(|v| v.into_iter().map(|e| (e.line, e.msg)).collect())
    }

    fn want(addr: &str, ifindex: u32, backup: bool, line: usize) -> Want {
        Want {
            addr: ip(addr),
            ifindex,
            backup,
            line,
        }
    }

    #[test]
    fn resolves_interfaces_to_their_addresses() {
        assert_eq!(
            resolved("dev eth1\n10.0.2.1 dev eth2 backup\n10.0.3.1\n").unwrap(),
            vec![
                want("10.0.1.1", 3, false, 1),
                want("10.0.1.5", 3, false, 1),
                want("fd00:1::1", 3, false, 1),
                want("10.0.2.1", 4, true, 2),
                want("10.0.3.1", 0, false, 3),
            ]
        );
        assert_eq!(
            resolved("dev eth1 ipv6 backup\nifindex 4 ipv4\n").unwrap(),
            vec![want("fd00:1::1", 3, true, 1), want("10.0.2.1", 4, false, 2)]
        );
        // The same address again with the same settings is taken once.
        assert_eq!(
            resolved("dev eth1 ipv4\n10.0.1.5 dev eth1\n").unwrap(),
            vec![want("10.0.1.1", 3, false, 1), want("10.0.1.5", 3, false, 1)]
        );
    }

    #[test]
    fn resolution_errors_name_the_line() {
        assert_eq!(
            resolved("10.0.1.1 dev eth7\ndev eth8\n").unwrap_err(),
            vec![
                (1, "no interface named 'eth7'".into()),
                (2, "no interface named 'eth8'".into()),
            ]
        );
        assert_eq!(
            resolved("dev eth9\ndev eth2 ipv6\nifindex 12\n").unwrap_err(),
            vec![
                (1, "dev eth9 has no global unicast address".into()),
                (2, "dev eth2 has no global unicast IPv6 address".into()),
                (3, "no interface with index 12".into()),
            ]
        );
        assert_eq!(
            resolved("dev eth1\n10.0.1.5 backup\n").unwrap_err(),
            vec![(2, "10.0.1.5 is also on line 1 with other settings".into())]
        );
        let many: String = (1..=17).map(|i| format!("10.9.0.{i}\n")).collect();
        assert_eq!(
            resolved(&many).unwrap_err(),
            vec![(0, "17 endpoints: the table holds 16".into())]
        );
        let sixteen: String = (1..=16).map(|i| format!("10.9.0.{i}\n")).collect();
        assert_eq!(resolved(&sixteen).unwrap().len(), 16);
    }

    fn ep(addr: &str, ifindex: u32, backup: bool) -> Endpoint {
        Endpoint {
            addr: ip(addr),
            ifindex: Some(ifindex),
            ifname: None,
            backup,
            flags: if backup { endpoint_flags::BACKUP } else { 0 },
        }
    }

    #[test]
    fn plan_of_an_empty_table_adds_everything_in_order() {
        let wants = [want("10.0.1.1", 3, false, 1), want("fd00::1", 0, true, 2)];
        let p = Plan::new(&wants, &[], false).unwrap();
        assert_eq!(
            p.added,
            vec![ep("10.0.1.1", 3, false), ep("fd00::1", 0, true)]
        );
        assert!(p.removed.is_empty() && p.changed.is_empty() && p.unchanged.is_empty());
        assert_eq!(
            p.ops(),
            vec![Op::Add(wants[0].clone()), Op::Add(wants[1].clone())]
        );
        assert!(!p.is_empty());
    }

    #[test]
    fn plan_of_the_same_table_is_empty() {
        let wants = [want("10.0.1.1", 3, false, 1), want("fd00::1", 0, true, 2)];
        // The kernel lists them in its own order.
        let current = [ep("fd00::1", 0, true), ep("10.0.1.1", 3, false)];
        for replace in [false, true] {
            let p = Plan::new(&wants, &current, replace).unwrap();
            assert!(p.is_empty(), "{p:?}");
            assert_eq!(p.unchanged.len(), 2);
            assert!(p.ops().is_empty());
            assert_eq!(
                p.describe(true, |_| None),
                "endpoints: no change, 2 unchanged\n"
            );
        }
    }

    #[test]
    fn plan_changes_settings_and_replaces_only_when_asked() {
        let wants = [
            want("10.0.1.1", 3, true, 1),  // now backup
            want("10.0.2.1", 4, false, 2), // now pinned to 4
            want("10.0.3.1", 0, false, 3), // new
            want("10.0.4.1", 0, false, 4), // as it is
        ];
        let current = [
            ep("10.0.9.9", 0, false), // not in the file
            ep("10.0.1.1", 3, false),
            ep("10.0.2.1", 0, false),
            ep("10.0.4.1", 0, false),
        ];
        let p = Plan::new(&wants, &current, false).unwrap();
        assert_eq!(p.kept, vec![ep("10.0.9.9", 0, false)]);
        assert!(p.removed.is_empty());
        assert_eq!(p.unchanged, vec![ep("10.0.4.1", 0, false)]);
        assert_eq!(p.added, vec![ep("10.0.3.1", 0, false)]);
        assert_eq!(
            p.changed
                .iter()
                .map(|c| (c.from.clone(), c.to.clone()))
                .collect::<Vec<_>>(),
            vec![
                (ep("10.0.1.1", 3, false), ep("10.0.1.1", 3, true)),
                (ep("10.0.2.1", 0, false), ep("10.0.2.1", 4, false)),
            ]
        );
        let del = |a: &str, i| Op::Del {
            addr: ip(a),
            ifindex: i,
        };
        assert_eq!(
            p.ops(),
            vec![
                del("10.0.1.1", 3),
                Op::Add(wants[0].clone()),
                del("10.0.2.1", 0),
                Op::Add(wants[1].clone()),
                Op::Add(wants[2].clone()),
            ]
        );
        let name = |i: u32| (i == 3).then(|| "eth1".to_string());
        assert_eq!(
            p.describe(false, name),
            "would change 10.0.1.1 dev eth1 backup (was 10.0.1.1 dev eth1)\n\
             would change 10.0.2.1 ifindex 4 (was 10.0.2.1)\n\
             would add 10.0.3.1\n\
             endpoints: 1 added, 0 removed, 2 changed (dry run), 1 unchanged, \
             1 other kept\n"
        );

        let p = Plan::new(&wants, &current, true).unwrap();
        assert!(p.kept.is_empty());
        assert_eq!(p.removed, vec![ep("10.0.9.9", 0, false)]);
        assert_eq!(p.ops()[0], del("10.0.9.9", 0));
        assert_eq!(p.ops().len(), 6);
        assert!(p
            .describe(true, name)
            .starts_with("removed 10.0.9.9\nchanged 10.0.1.1 dev eth1 backup"));

        // An empty file with --replace empties the table.
        let p = Plan::new(&[], &current, true).unwrap();
        assert_eq!(p.removed.len(), 4);
        assert_eq!(p.ops().len(), 4);
    }

    #[test]
    fn plan_keeps_the_interface_order_of_one_line() {
        let wants = [
            want("10.0.2.1", 0, false, 1),
            want("10.0.1.1", 3, false, 2),
            want("10.0.1.5", 3, false, 2),
        ];
        // 10.0.1.1 changes, 10.0.1.5 is new: both stay on line 2's place.
        let current = [ep("10.0.1.1", 0, false)];
        let ops = Plan::new(&wants, &current, false).unwrap().ops();
        let adds: Vec<_> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Add(w) => Some(w.addr.to_string()),
                Op::Del { .. } => None,
            })
            .collect();
        assert_eq!(adds, ["10.0.2.1", "10.0.1.1", "10.0.1.5"]);
    }

    #[test]
    fn plan_refuses_to_overflow_the_table() {
        let current: Vec<_> = (1..=15)
            .map(|i| ep(&format!("10.8.0.{i}"), 0, false))
            .collect();
        let wants = [want("10.0.1.1", 0, false, 1), want("10.0.1.2", 0, false, 2)];
        let e = Plan::new(&wants, &current, false).unwrap_err();
        assert!(e.contains("17 endpoints (15 now, 2 to add)"), "{e}");
        assert!(e.contains("--replace"), "{e}");
        let p = Plan::new(&wants, &current, true).unwrap();
        assert_eq!((p.removed.len(), p.added.len()), (15, 2));
        // A change does not count twice.
        let current: Vec<_> = (1..=16)
            .map(|i| ep(&format!("10.8.0.{i}"), 0, false))
            .collect();
        let p = Plan::new(&[want("10.8.0.1", 0, true, 1)], &current, false).unwrap();
        assert_eq!(p.changed.len(), 1);
    }

    #[test]
    fn unknown_flags_are_a_change() {
        let mut e = ep("10.0.1.1", 0, false);
        e.flags = 0x80;
        let p = Plan::new(&[want("10.0.1.1", 0, false, 1)], &[e], false).unwrap();
        assert_eq!(p.changed.len(), 1);
    }

    #[test]
    fn plan_as_json() {
        let p = Plan::new(
            &[want("10.0.1.1", 3, false, 1)],
            &[ep("10.0.9.9", 0, false)],
            true,
        )
        .unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "removed": [{"addr": "10.0.9.9", "ifindex": 0, "ifname": null, "backup": false, "flags": 0}],
                "changed": [],
                "added": [{"addr": "10.0.1.1", "ifindex": 3, "ifname": null, "backup": false, "flags": 0}],
                "unchanged": [],
                "kept": [],
            })
        );
    }
}
