// SPDX-License-Identifier: GPL-2.0
//! `mrc-status`: show MRC connections, paths, counters and events, and change
//! endpoints and tunables, over the generic netlink family `mrc`.
//!
//! Exit status: 0 on success, 1 when the kernel refuses a request or an
//! object does not exist, 2 for usage errors and when the module is not
//! loaded.

mod attr;
mod config;
mod format;
mod ifaddr;
mod model;
mod nl;
mod spec;

use attr::{AttrWriter, Attrs};
use clap::{Args, Parser, Subcommand, ValueEnum};
use model::{Conn, ConnDump, EndpointDump, Event, Params, SessionId, Snapshot, Stats};
use nl::{Client, Error};
use serde::Serialize;
use std::ffi::{CStr, CString};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "mrc-status",
    version,
    about = "Show MRC connections, paths and events",
    after_help = "Without a command, runs `show`. JSON field names are documented in README.md."
)]
struct Cli {
    /// Print JSON (one document per line) instead of tables.
    #[arg(short, long, global = true)]
    json: bool,
    /// Repeat a read command every SECONDS until interrupted.
    #[arg(short, long, global = true, value_name = "SECONDS", value_parser = parse_interval)]
    watch: Option<Duration>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug, PartialEq)]
enum Command {
    /// Summary, then every connection with its paths (the default).
    Show(Select),
    /// One line per connection.
    Conns,
    /// One line per path, of every connection or of one.
    Paths(Select),
    /// Namespace counters and drops per reason.
    Stats,
    /// Print path state changes and connection and endpoint events as they happen.
    Monitor,
    /// Local endpoints over which paths are built.
    #[command(subcommand)]
    Endpoint(EndpointCmd),
    /// Tunables of the network namespace.
    #[command(subcommand)]
    Param(ParamCmd),
    /// Set a tunable (same as `param set`).
    Set(ParamSet),
}

/// Selects one connection; without either, all of them.
#[derive(Args, Debug, PartialEq, Default)]
struct Select {
    /// Session id of the connection (hexadecimal, as shown).
    #[arg(value_name = "SESSION", conflicts_with = "cookie")]
    session: Option<SessionId>,
    /// Socket cookie of the connection.
    #[arg(long)]
    cookie: Option<u64>,
}

impl Select {
    /// Whether `c` is the selected connection. Without CAP_NET_ADMIN the
    /// kernel withholds session ids, so no connection matches a session id.
    fn matches(&self, c: &Conn) -> bool {
        match (self.session, self.cookie) {
            (Some(s), _) => c.session_id == Some(s),
            (None, k) => k.is_some() && c.cookie == k,
        }
    }
}

#[derive(Subcommand, Debug, PartialEq)]
enum EndpointCmd {
    /// Add a local endpoint, or every global unicast address of an interface.
    #[command(
        after_help = "Without ADDR, adds every global unicast address of the interface given \
                      by --dev or --ifindex, each pinned to it, and leaves those already there \
                      alone (as `endpoint load` of a line `dev IFNAME`)."
    )]
    Add {
        /// IPv4 or IPv6 address; without it, those of the interface.
        #[arg(required_unless_present_any = ["dev", "ifindex"])]
        addr: Option<IpAddr>,
        #[command(flatten)]
        dev: Dev,
        /// Use paths over this endpoint only when no other path is active.
        #[arg(long)]
        backup: bool,
    },
    /// Remove a local endpoint.
    Del {
        /// IPv4 or IPv6 address.
        addr: IpAddr,
        #[command(flatten)]
        dev: Dev,
    },
    /// List the local endpoints.
    Show,
    /// Make the endpoint table what a configuration file says.
    #[command(after_help = LOAD_HELP)]
    Load(Load),
}

const LOAD_HELP: &str = "\
FILE holds one endpoint a line; `#` starts a comment:

  ADDR [dev IFNAME | ifindex N] [backup]   one address, pinned to the interface if named
  dev IFNAME [ipv4 | ipv6] [backup]        every global unicast address of the interface
                                           (or of one family), each pinned to it: of global
                                           scope, not deprecated, not failed DAD, and no
                                           temporary IPv6 address
  ifindex N ...                            an interface by index, in either form

Endpoints have no port: all use the module's UDP port (insmod mrc port=P).

Endpoints in the file but not in the table are added, those whose settings
differ are removed and added again, and those already as the file says are
left alone: loading the same file again changes nothing. Endpoints not in
the file stay, unless --replace is given. Errors name the file and line; a
file with an error changes nothing (exit status 2 for a line that does not
parse, 1 for a missing interface or a refused request).";

/// `endpoint load`.
#[derive(Args, Debug, PartialEq)]
struct Load {
    /// Configuration file; `-` reads standard input.
    file: PathBuf,
    /// Also remove the endpoints that are not in the file.
    #[arg(long)]
    replace: bool,
    /// Show what would change, and change nothing.
    #[arg(short = 'n', long)]
    dry_run: bool,
}

/// The interface of an endpoint, by name or index.
#[derive(Args, Debug, PartialEq, Default)]
struct Dev {
    /// Interface name.
    #[arg(long, conflicts_with = "ifindex")]
    dev: Option<String>,
    /// Interface index.
    #[arg(long)]
    ifindex: Option<u32>,
}

#[derive(Subcommand, Debug, PartialEq)]
enum ParamCmd {
    /// Show the tunables.
    Show,
    /// Set a tunable.
    Set(ParamSet),
}

#[derive(Args, Debug, PartialEq)]
struct ParamSet {
    /// Tunable to change.
    name: ParamName,
    /// New value: milliseconds or a count, or "delay"/"reno" for cc.
    value: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum ParamName {
    #[value(alias = "heartbeat_ms")]
    HeartbeatMs,
    #[value(alias = "miss_threshold")]
    MissThreshold,
    #[value(alias = "ev_per_plane")]
    EvPerPlane,
    Cc,
    #[value(alias = "user_timeout_ms")]
    UserTimeoutMs,
    #[value(alias = "data_per_idle_probe")]
    DataPerIdleProbe,
    #[value(alias = "syn_retry_pct")]
    SynRetryPct,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("'{s}' is not a positive number of seconds")),
    }
}

/// A failure and the exit status it maps to.
#[derive(Debug)]
struct Failure {
    msg: String,
    status: u8,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let status = if matches!(e, Error::NotLoaded) { 2 } else { 1 };
        Failure {
            msg: e.to_string(),
            status,
        }
    }
}

fn usage(msg: String) -> Failure {
    Failure { msg, status: 2 }
}

/// Returns CLOCK_MONOTONIC in nanoseconds, the clock of the kernel's event
/// timestamps.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Returns the name of interface `ifindex` in this network namespace.
fn ifname(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` holds IF_NAMESIZE bytes, the size if_indextoname writes at most.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// Returns the index of the interface named `name`.
fn ifindex(name: &str) -> Result<u32, Failure> {
    let c = CString::new(name).map_err(|_| usage(format!("bad interface name '{name}'")))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Failure {
            msg: format!("no interface named '{name}'"),
            status: 1,
        });
    }
    Ok(i)
}

fn name_interfaces(dump: &mut ConnDump) {
    for p in dump.connections.iter_mut().flat_map(|c| c.paths.iter_mut()) {
        p.ifname = p.ifindex.and_then(ifname);
    }
}

fn print_json<T: Serialize>(v: &T) -> Result<(), Failure> {
    let s = serde_json::to_string(v).map_err(|e| Failure {
        msg: format!("JSON output: {e}"),
        status: 1,
    })?;
    println!("{s}");
    Ok(())
}

fn single<T>(
    msgs: Vec<nl::MrcMsg>,
    set: attr::AttrTable,
    parse: impl Fn(&Attrs<'_>) -> Result<T, netlink_packet_core::DecodeError>,
) -> Result<T, Failure> {
    let m = msgs.into_iter().next().ok_or_else(|| Failure {
        msg: "the kernel sent no reply".into(),
        status: 1,
    })?;
    let a = Attrs::parse(&m.attrs, set).map_err(Error::from)?;
    Ok(parse(&a).map_err(Error::from)?)
}

/// Says on stderr that a dump mixes moments of a changing table.
fn note_torn(t: &impl Snapshot, what: &str) {
    if !t.consistent() {
        eprintln!("mrc-status: {what} changed during every dump attempt; the list mixes moments");
    }
}

/// Dumps every connection of the namespace.
fn dump_all(c: &mut Client) -> Result<ConnDump, Error> {
    let d = c.dump(spec::cmd::CONN_GET, "conn-get", spec::conn::ATTRS, |msgs| {
        let attrs = msgs
            .iter()
            .map(|m| Attrs::parse(&m.attrs, spec::conn::ATTRS))
            .collect::<Result<Vec<_>, _>>()?;
        ConnDump::assemble(attrs)
    })?;
    note_torn(&d, "connections");
    Ok(d)
}

fn conn_dump(c: &mut Client, sel: &Select) -> Result<ConnDump, Failure> {
    let mut dump = if sel.session.is_none() && sel.cookie.is_none() {
        dump_all(c)?
    } else {
        let mut w = AttrWriter::new();
        if let Some(s) = sel.session {
            w = w.uint(spec::conn::SESSION_ID, s.0);
        }
        if let Some(k) = sel.cookie {
            w = w.uint(spec::conn::COOKIE, k);
        }
        let what = || match (sel.session, sel.cookie) {
            (Some(s), _) => format!("session id {s}"),
            (None, Some(k)) => format!("socket cookie {k}"),
            (None, None) => String::new(),
        };
        match c.request(
            spec::cmd::CONN_GET,
            "conn-get",
            w.finish(),
            spec::conn::ATTRS,
        ) {
            Err(e) if e.errno() == Some(libc::ENOENT) => {
                // Keep the kernel's errno and extack message after ours.
                return Err(Failure {
                    msg: format!("no connection with {} ({e})", what()),
                    status: 1,
                });
            }
            // More paths than one reply holds: a dump splits them over
            // several messages; keep the selected connection.
            Err(e) if e.errno() == Some(libc::EMSGSIZE) => {
                let mut all = dump_all(c)?;
                let ids_hidden = all.connections.iter().any(|x| x.session_id.is_none());
                all.connections.retain(|x| sel.matches(x));
                if all.connections.is_empty() && sel.session.is_some() && ids_hidden {
                    // The request found it, but the dump does not say which
                    // connection has that session id.
                    return Err(Failure {
                        msg: format!(
                            "the connection with {} has more paths than one reply holds, and \
                             the dump that splits them shows session ids only with \
                             CAP_NET_ADMIN; select it with --cookie",
                            what()
                        ),
                        status: 1,
                    });
                }
                if all.connections.is_empty() {
                    return Err(Failure {
                        msg: format!("no connection with {}", what()),
                        status: 1,
                    });
                }
                all.connections.truncate(1);
                all
            }
            r => {
                let msgs = r?;
                let attrs = msgs
                    .iter()
                    .map(|m| Attrs::parse(&m.attrs, spec::conn::ATTRS))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(Error::from)?;
                ConnDump::assemble(attrs).map_err(|e| Failure {
                    msg: format!("conn-get: {e:?}"),
                    status: 1,
                })?
            }
        }
    };
    name_interfaces(&mut dump);
    Ok(dump)
}

/// Runs one read command and returns its output (text or one JSON line).
fn read(c: &mut Client, cmd: &Command, json: bool) -> Result<String, Failure> {
    let text = |s: String| Ok(s);
    let js = |v: serde_json::Result<String>| {
        v.map(|s| s + "\n").map_err(|e| Failure {
            msg: format!("JSON output: {e}"),
            status: 1,
        })
    };
    match cmd {
        Command::Show(sel) | Command::Paths(sel) => {
            let dump = conn_dump(c, sel)?;
            if json {
                js(serde_json::to_string(&dump))
            } else if matches!(cmd, Command::Show(_)) {
                text(format::show(&dump))
            } else {
                text(format::paths(&dump))
            }
        }
        Command::Conns => {
            let dump = conn_dump(c, &Select::default())?;
            if json {
                js(serde_json::to_string(&dump))
            } else {
                text(format::conns(&dump))
            }
        }
        Command::Stats => {
            let msgs = c.request(
                spec::cmd::STATS_GET,
                "stats-get",
                Vec::new(),
                spec::stats::ATTRS,
            )?;
            let s = single(msgs, spec::stats::ATTRS, Stats::parse)?;
            if json {
                js(serde_json::to_string(&s))
            } else {
                text(format::stats(&s))
            }
        }
        Command::Endpoint(EndpointCmd::Show) => {
            let d = endpoint_dump(c)?;
            if json {
                js(serde_json::to_string(&d))
            } else {
                text(format::endpoints(&d))
            }
        }
        Command::Param(ParamCmd::Show) => {
            let msgs = c.request(
                spec::cmd::PARAM_GET,
                "param-get",
                Vec::new(),
                spec::params::ATTRS,
            )?;
            let p = single(msgs, spec::params::ATTRS, Params::parse)?;
            if json {
                js(serde_json::to_string(&p))
            } else {
                text(format::params(&p))
            }
        }
        _ => Err(usage("not a read command".into())),
    }
}

/// Dumps the endpoint table, with interface names.
fn endpoint_dump(c: &mut Client) -> Result<EndpointDump, Failure> {
    let mut d = c.dump(
        spec::cmd::ENDPOINT_GET,
        "endpoint-get",
        spec::endpoint::ATTRS,
        |msgs| {
            let attrs = msgs
                .iter()
                .map(|m| Attrs::parse(&m.attrs, spec::endpoint::ATTRS))
                .collect::<Result<Vec<_>, _>>()?;
            EndpointDump::assemble(attrs)
        },
    )?;
    note_torn(&d, "endpoints");
    for e in &mut d.endpoints {
        e.ifname = e.ifindex.and_then(ifname);
    }
    Ok(d)
}

/// The host as `endpoint load` sees it: interfaces by name, and their
/// addresses, dumped once.
#[derive(Default)]
struct LiveHost {
    addrs: Option<Vec<ifaddr::IfAddr>>,
}

impl config::Host for LiveHost {
    fn ifindex(&mut self, name: &str) -> Result<u32, String> {
        ifindex(name).map_err(|f| f.msg)
    }

    fn addrs(&mut self, index: u32) -> Result<Vec<IpAddr>, String> {
        if ifname(index).is_none() {
            return Err(format!("no interface with index {index}"));
        }
        let all = match &mut self.addrs {
            Some(a) => a,
            none => none.insert(
                ifaddr::dump().map_err(|e| format!("reading the interfaces' addresses: {e}"))?,
            ),
        };
        Ok(all
            .iter()
            .filter(|a| a.ifindex == index && a.is_global_unicast())
            .map(|a| a.addr)
            .collect())
    }
}

/// The JSON document of `endpoint load`.
#[derive(Serialize)]
struct LoadReport<'a> {
    dry_run: bool,
    #[serde(flatten)]
    plan: &'a config::Plan,
}

/// Brings the endpoint table to `lines`, read from `source` (a file name,
/// or none for the command line), and reports what changed.
fn apply_endpoints(
    lines: &[config::Line],
    source: Option<&str>,
    replace: bool,
    dry_run: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut client = Client::connect()?;
    let errors = |errs: Vec<config::LineError>| Failure {
        msg: errs
            .iter()
            .map(|e| e.display(source))
            .collect::<Vec<_>>()
            .join("\nmrc-status: "),
        status: 1,
    };
    let wants = config::resolve(lines, &mut LiveHost::default()).map_err(errors)?;
    let current = endpoint_dump(&mut client)?;
    let mut plan = config::Plan::new(&wants, &current.endpoints, replace)
        .map_err(|m| errors(vec![config::LineError { line: 0, msg: m }]))?;
    plan.name_interfaces(ifname);
    if !dry_run {
        let ops = plan.ops();
        for (done, op) in ops.iter().enumerate() {
            let (cmd, op_name, attrs, what) = match op {
                config::Op::Del { addr, ifindex } => {
                    let mut w = AttrWriter::new().addr(spec::endpoint::ADDR, *addr);
                    if *ifindex != 0 {
                        w = w.u32(spec::endpoint::IFINDEX, *ifindex);
                    }
                    (spec::cmd::ENDPOINT_DEL, "endpoint-del", w, *addr)
                }
                config::Op::Add(want) => {
                    let e = want.endpoint();
                    let mut w = AttrWriter::new().addr(spec::endpoint::ADDR, e.addr);
                    if want.ifindex != 0 {
                        w = w.u32(spec::endpoint::IFINDEX, want.ifindex);
                    }
                    w = w.u32(spec::endpoint::FLAGS, e.flags);
                    (spec::cmd::ENDPOINT_ADD, "endpoint-add", w, e.addr)
                }
            };
            client
                .request(cmd, op_name, attrs.finish(), spec::endpoint::ATTRS)
                .map_err(|e| Failure {
                    msg: format!(
                        "{what}: {e} (after {done} of {} requests; the table is partly changed)",
                        ops.len()
                    ),
                    status: 1,
                })?;
        }
    }
    if json {
        print_json(&LoadReport {
            dry_run,
            plan: &plan,
        })
    } else {
        print!("{}", plan.describe(!dry_run, ifname));
        Ok(())
    }
}

/// `endpoint load FILE`.
fn load(l: &Load, json: bool) -> Result<(), Failure> {
    let stdin = l.file.as_os_str() == "-";
    let source = if stdin {
        "<stdin>".to_string()
    } else {
        l.file.display().to_string()
    };
    let text = if stdin {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(&l.file)
    }
    .map_err(|e| Failure {
        msg: format!("{source}: {e}"),
        status: 1,
    })?;
    let lines = config::parse(&text).map_err(|errs| {
        usage(
            errs.iter()
                .map(|e| e.display(Some(&source)))
                .collect::<Vec<_>>()
                .join("\nmrc-status: "),
        )
    })?;
    apply_endpoints(&lines, Some(&source), l.replace, l.dry_run, json)
}

fn dev_index(dev: &Dev) -> Result<Option<u32>, Failure> {
    match (&dev.dev, dev.ifindex) {
        (Some(name), _) => ifindex(name).map(Some),
        (None, i) => Ok(i),
    }
}

fn endpoint_attrs(addr: IpAddr, dev: &Dev) -> Result<AttrWriter, Failure> {
    let mut w = AttrWriter::new().addr(spec::endpoint::ADDR, addr);
    if let Some(i) = dev_index(dev)? {
        w = w.u32(spec::endpoint::IFINDEX, i);
    }
    Ok(w)
}

fn param_attrs(p: &ParamSet) -> Result<Vec<u8>, Failure> {
    use spec::params as a;
    let num = |v: &str| {
        v.parse::<u32>()
            .map_err(|_| usage(format!("'{v}' is not a number between 0 and {}", u32::MAX)))
    };
    let w = AttrWriter::new();
    Ok(match p.name {
        ParamName::HeartbeatMs => w.u32(a::HEARTBEAT_MS, num(&p.value)?),
        ParamName::MissThreshold => w.u32(a::MISS_THRESHOLD, num(&p.value)?),
        ParamName::EvPerPlane => w.u32(a::EV_PER_PLANE, num(&p.value)?),
        ParamName::Cc => w.string(a::CC, &p.value),
        ParamName::UserTimeoutMs => w.u32(a::USER_TIMEOUT_MS, num(&p.value)?),
        ParamName::DataPerIdleProbe => w.u32(a::DATA_PER_IDLE_PROBE, num(&p.value)?),
        ParamName::SynRetryPct => w.u32(a::SYN_RETRY_PCT, num(&p.value)?),
    }
    .finish())
}

fn monitor(c: &Client, json: bool) -> Result<(), Failure> {
    let events = c.subscribe()?;
    loop {
        let batch = match events.next_batch() {
            Err(Error::Io(_, e)) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                eprintln!("mrc-status: events were lost (receive buffer overrun, or the kernel short of memory)");
                continue;
            }
            r => r?,
        };
        let now = monotonic_ns();
        for m in batch {
            let mut e = Event::parse(m.cmd, &m.attrs, now).map_err(Error::from)?;
            if let Some((index, name)) = e.interface_mut() {
                *name = index.and_then(ifname);
            }
            if json {
                print_json(&e)?;
            } else {
                println!("{}", format::event(&e));
            }
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let cmd = cli.command.unwrap_or(Command::Show(Select::default()));
    let is_read = matches!(
        cmd,
        Command::Show(_)
            | Command::Conns
            | Command::Paths(_)
            | Command::Stats
            | Command::Endpoint(EndpointCmd::Show)
            | Command::Param(ParamCmd::Show)
    );
    if cli.watch.is_some() && !is_read {
        return Err(usage(
            "--watch only applies to commands that show something".into(),
        ));
    }
    match &cmd {
        Command::Endpoint(EndpointCmd::Load(l)) => return load(l, cli.json),
        Command::Endpoint(EndpointCmd::Add {
            addr: None,
            dev,
            backup,
        }) => {
            let dev = match (&dev.dev, dev.ifindex) {
                (Some(name), _) => config::Iface::Name(name.clone()),
                (None, Some(i)) => config::Iface::Index(i),
                (None, None) => return Err(usage("give an address or an interface".into())),
            };
            let line = config::Line {
                line: 0,
                entry: config::Entry::Iface {
                    dev,
                    family: None,
                    backup: *backup,
                },
            };
            return apply_endpoints(&[line], None, false, false, cli.json);
        }
        _ => {}
    }
    // Validate arguments before talking to the kernel.
    let change = match &cmd {
        Command::Endpoint(EndpointCmd::Add {
            addr: Some(addr),
            dev,
            backup,
        }) => {
            let flags = if *backup {
                spec::endpoint_flags::BACKUP
            } else {
                0
            };
            let w = endpoint_attrs(*addr, dev)?.u32(spec::endpoint::FLAGS, flags);
            Some((
                spec::cmd::ENDPOINT_ADD,
                "endpoint-add",
                w.finish(),
                spec::endpoint::ATTRS,
            ))
        }
        Command::Endpoint(EndpointCmd::Del { addr, dev }) => Some((
            spec::cmd::ENDPOINT_DEL,
            "endpoint-del",
            endpoint_attrs(*addr, dev)?.finish(),
            spec::endpoint::ATTRS,
        )),
        Command::Param(ParamCmd::Set(p)) | Command::Set(p) => Some((
            spec::cmd::PARAM_SET,
            "param-set",
            param_attrs(p)?,
            spec::params::ATTRS,
        )),
        _ => None,
    };

    let mut client = Client::connect()?;
    if let Some((cmd, op, attrs, set)) = change {
        client.request(cmd, op, attrs, set)?;
        return Ok(());
    }
    if cmd == Command::Monitor {
        return monitor(&client, cli.json);
    }
    match cli.watch {
        None => {
            print!("{}", read(&mut client, &cmd, cli.json)?);
            Ok(())
        }
        Some(every) => loop {
            let out = read(&mut client, &cmd, cli.json)?;
            if cli.json {
                print!("{out}");
            } else {
                // Home the cursor and clear the screen, like watch(1).
                print!("\x1b[H\x1b[2J{out}");
            }
            std::thread::sleep(every);
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("mrc-status: {}", f.msg);
            ExitCode::from(f.status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("mrc-status").chain(args.iter().copied()))
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn default_and_global_flags() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.command, None);
        assert!(!c.json);
        let c = parse(&["conns", "--json", "--watch", "0.5"]).unwrap();
        assert_eq!(c.command, Some(Command::Conns));
        assert!(c.json);
        assert_eq!(c.watch, Some(Duration::from_millis(500)));
        assert!(parse(&["--watch", "0", "stats"]).is_err());
        assert!(parse(&["--watch", "x", "stats"]).is_err());
    }

    #[test]
    fn selecting_a_connection() {
        let c = parse(&["show", "0x00000000DEADBEEF"]).unwrap();
        assert_eq!(
            c.command,
            Some(Command::Show(Select {
                session: Some(SessionId(0xdead_beef)),
                cookie: None
            }))
        );
        let c = parse(&["paths", "--cookie", "42"]).unwrap();
        assert_eq!(
            c.command,
            Some(Command::Paths(Select {
                session: None,
                cookie: Some(42)
            }))
        );
        assert!(parse(&["paths", "ab", "--cookie", "42"]).is_err());
        assert!(parse(&["show", "xyz"]).is_err());
        assert!(parse(&["show", "11112222333344445"]).is_err());
    }

    #[test]
    fn selection_without_session_ids() {
        let by_sid = Select {
            session: Some(SessionId(7)),
            cookie: None,
        };
        let by_cookie = Select {
            session: None,
            cookie: Some(42),
        };
        // As an unprivileged reader sees it: no session id.
        let hidden = Conn {
            cookie: Some(42),
            ..Conn::default()
        };
        assert!(!by_sid.matches(&hidden));
        assert!(by_cookie.matches(&hidden));
        assert!(!Select::default().matches(&hidden));
        let shown = Conn {
            session_id: Some(SessionId(7)),
            cookie: Some(43),
            ..Conn::default()
        };
        assert!(by_sid.matches(&shown));
        assert!(!by_cookie.matches(&shown));
    }

    #[test]
    fn endpoint_commands() {
        let c = parse(&["endpoint", "add", "10.0.1.1", "--dev", "eth1", "--backup"]).unwrap();
        assert_eq!(
            c.command,
            Some(Command::Endpoint(EndpointCmd::Add {
                addr: Some("10.0.1.1".parse().unwrap()),
                dev: Dev {
                    dev: Some("eth1".into()),
                    ifindex: None
                },
                backup: true
            }))
        );
        let c = parse(&["endpoint", "del", "fe80::1", "--ifindex", "3"]).unwrap();
        assert!(matches!(
            c.command,
            Some(Command::Endpoint(EndpointCmd::Del {
                dev: Dev {
                    ifindex: Some(3),
                    ..
                },
                ..
            }))
        ));
        assert!(parse(&["endpoint", "add", "10.0.0.300"]).is_err());
        assert!(parse(&[
            "endpoint",
            "add",
            "10.0.0.1",
            "--dev",
            "a",
            "--ifindex",
            "1"
        ])
        .is_err());
        assert!(parse(&["endpoint", "show"]).is_ok());
    }

    #[test]
    fn endpoints_of_an_interface_and_from_a_file() {
        let c = parse(&["endpoint", "add", "--dev", "eth1", "--backup"]).unwrap();
        assert_eq!(
            c.command,
            Some(Command::Endpoint(EndpointCmd::Add {
                addr: None,
                dev: Dev {
                    dev: Some("eth1".into()),
                    ifindex: None
                },
                backup: true
            }))
        );
        assert!(parse(&["endpoint", "add", "--ifindex", "3"]).is_ok());
        assert!(parse(&["endpoint", "add"]).is_err());
        assert!(parse(&["endpoint", "add", "--backup"]).is_err());

        let c = parse(&["endpoint", "load", "hosts.conf", "--replace", "-n"]).unwrap();
        assert_eq!(
            c.command,
            Some(Command::Endpoint(EndpointCmd::Load(Load {
                file: "hosts.conf".into(),
                replace: true,
                dry_run: true
            })))
        );
        assert!(parse(&["endpoint", "load"]).is_err());
    }

    /// A file is read and checked before the kernel is asked anything, so
    /// these run without the module.
    #[test]
    fn load_reports_file_errors_first() {
        let dir = std::env::temp_dir().join(format!("mrc-status-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eps.conf");
        std::fs::write(&file, "10.0.0.1 dev eth1\n10.0.0.2 port 5\n# ok\nbogus\n").unwrap();
        let l = Load {
            file: file.clone(),
            replace: false,
            dry_run: true,
        };
        let f = load(&l, false).unwrap_err();
        assert_eq!(f.status, 2);
        let name = file.display().to_string();
        assert!(f.msg.starts_with(&format!("{name}:2: ")), "{}", f.msg);
        assert!(
            f.msg.contains(&format!("\nmrc-status: {name}:4: 'bogus'")),
            "{}",
            f.msg
        );
        let l = Load {
            file: dir.join("missing.conf"),
            ..l
        };
        let f = load(&l, false).unwrap_err();
        assert_eq!(f.status, 1);
        assert!(f.msg.contains("missing.conf: "), "{}", f.msg);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn param_commands() {
        let param_set = |args: &[&str]| {
            let c = parse(args).unwrap();
            let Some(Command::Param(ParamCmd::Set(p))) = c.command else {
                panic!("not param set");
            };
            p
        };
        let p = param_set(&["param", "set", "heartbeat_ms", "5"]);
        assert_eq!(p.name, ParamName::HeartbeatMs);
        assert_eq!(
            param_attrs(&p).unwrap(),
            AttrWriter::new().u32(1, 5).finish()
        );

        let c = parse(&["set", "cc", "reno"]).unwrap();
        let Some(Command::Set(p)) = c.command else {
            panic!("not set");
        };
        let a = param_attrs(&p).unwrap();
        let parsed = Attrs::parse(&a, spec::params::ATTRS).unwrap();
        assert_eq!(
            parsed.string(spec::params::CC).unwrap().as_deref(),
            Some("reno")
        );

        let p = param_set(&["param", "set", "data_per_idle_probe", "0"]);
        assert_eq!(p.name, ParamName::DataPerIdleProbe);
        assert_eq!(
            param_attrs(&p).unwrap(),
            AttrWriter::new()
                .u32(spec::params::DATA_PER_IDLE_PROBE, 0)
                .finish()
        );

        let c = parse(&["set", "miss-threshold", "many"]).unwrap();
        let Some(Command::Set(p)) = c.command else {
            panic!("not set");
        };
        assert_eq!(param_attrs(&p).err().map(|f| f.status), Some(2));
        assert!(parse(&["set", "bogus", "1"]).is_err());
        assert!(parse(&["param", "show"]).is_ok());
    }

    #[test]
    fn watch_needs_a_read_command() {
        let cli = parse(&["--watch", "1", "endpoint", "del", "10.0.0.1"]).unwrap();
        let f = run(cli).err().unwrap();
        assert_eq!(f.status, 2);
        let cli = parse(&["--watch", "1", "monitor"]).unwrap();
        assert_eq!(run(cli).err().unwrap().status, 2);
    }
}
