// SPDX-License-Identifier: GPL-2.0
//! `mrc-perf`: verified message transfer and benchmark over MRC, TCP, MPTCP
//! and SCTP.
//!
//! The server accepts connections and checks every message (length and
//! content, both derived from a seed) and hashes what it received; the
//! client sends deterministic messages and hashes what it sent. In latency
//! mode the server echoes each message and the client measures round trips.
//!
//! Exit status: 0 when every connection succeeded and verified, 1 on any
//! socket or verification error, 2 on usage errors.

mod error;
mod hello;
mod pattern;
mod run;
mod sock;
mod stats;

use clap::{Args, Parser, Subcommand};
use error::Error;
use hello::Mode;
use pattern::SizeSpec;
use run::{ClientConn, Limit, ServerConn, StartGate};
use serde::Serialize;
use sock::{Endpoint, Proto, Socket};
use stats::{ClientReport, ConnInfo, ConnReport};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "mrc-perf",
    version,
    about = "Verified message transfer and benchmark: MRC, TCP, MPTCP, SCTP",
    after_help = "Exit status: 0 if every connection verified OK, 1 on errors, 2 on usage errors."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Accept connections; verify (throughput mode) or echo (latency mode)
    /// their messages until EOF; print one result per connection.
    Server(ServerArgs),
    /// Open connections and send messages; print the result.
    Client(ClientArgs),
}

#[derive(Args, Debug)]
struct CommonArgs {
    /// Transport protocol.
    #[arg(long, value_enum, default_value_t = Proto::Mrc)]
    proto: Proto,
    /// Print JSON: one line per connection (server) or one object (client).
    #[arg(long)]
    json: bool,
    /// Length of the intervals of the `samples` array, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
    /// Fail a connection that makes no progress for SECS seconds (and, on
    /// the server, when no connection arrives for SECS seconds).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
}

#[derive(Args, Debug)]
struct ServerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (IPv4 or IPv6, `fe80::1%eth0` for a scope).
    #[arg(long, default_value = "0.0.0.0")]
    addr: String,
    /// Port to listen on; 0 picks a free one (printed on stderr).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Number of connections to accept (handled concurrently).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    conns: u32,
    /// Base seed; must match the client's (default: the client's).
    #[arg(long)]
    seed: Option<u64>,
    /// Message sizes; must match the client's (default: the client's).
    #[arg(long, value_name = "SPEC")]
    msg_size: Option<SizeSpec>,
    /// Mode; must match the client's (default: the client's).
    #[arg(long, value_enum)]
    mode: Option<Mode>,
}

#[derive(Args, Debug)]
struct ClientArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Server address (IPv4 or IPv6, `fe80::1%eth0` for a scope).
    #[arg(long)]
    addr: String,
    /// Server port.
    #[arg(long)]
    port: u16,
    /// Number of concurrent connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    parallel: u32,
    /// Bytes to send per connection (whole messages: the last one may go
    /// beyond).
    #[arg(long, conflicts_with = "duration")]
    bytes: Option<u64>,
    /// Seconds to send for (default 10 when --bytes is not given).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<Duration>,
    /// Message size in bytes (1..=1048576), or `mix`: log-uniform sizes from
    /// 1 B to 1 MiB starting with 1 B and 1 MiB.
    #[arg(long, value_name = "SPEC", default_value = "mix")]
    msg_size: SizeSpec,
    /// Base seed S of sizes and contents; connection i uses S + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = Mode::Throughput)]
    mode: Mode,
    /// Retry refused connections for up to MS milliseconds (0: no retry).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    retry_ms: u64,
    /// Keep each connection open and idle for MS milliseconds after its
    /// last message, before shutting it down (so that its state can be
    /// looked at after the transfer).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    hold_ms: u64,
    /// Stop sending once PATH exists (looked for every 10 ms between
    /// messages), or at the --bytes or --duration limit if that comes first.
    #[arg(long, value_name = "PATH")]
    stop_file: Option<PathBuf>,
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}`: expected a positive number of seconds"));
    }
    Duration::try_from_secs_f64(v).map_err(|e| format!("`{s}`: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Server(a) => server(a),
        Command::Client(a) => client(a),
    }
}

fn print_json<T: Serialize>(v: &T) {
    match serde_json::to_string(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("mrc-perf: JSON encoding: {e}"),
    }
}

fn parse_endpoint(addr: &str, port: u16) -> Result<Endpoint, ExitCode> {
    Endpoint::parse(addr, port).map_err(|e| {
        eprintln!("mrc-perf: --addr: {e}");
        ExitCode::from(2)
    })
}

fn server(a: ServerArgs) -> ExitCode {
    let ep = match parse_endpoint(&a.addr, a.port) {
        Ok(ep) => ep,
        Err(code) => return code,
    };
    let c = &a.common;
    let conn = ServerConn {
        proto: c.proto,
        mode: a.mode,
        size: a.msg_size,
        seed: a.seed,
        interval: Duration::from_millis(c.interval_ms),
        timeout: c.timeout,
    };
    let fail = |e: &Error| {
        eprintln!("mrc-perf: {e}");
        if c.json {
            let info = ConnInfo {
                role: "server",
                proto: c.proto.name(),
                mode: a.mode.unwrap_or(Mode::Throughput).name(),
                conn: None,
                seed: a.seed.unwrap_or(0),
                msg_size: a.msg_size.map(|s| s.to_string()).unwrap_or_default(),
                interval_ms: c.interval_ms,
                latency: a.mode == Some(Mode::Latency),
            };
            print_json(&ConnReport::failed(&info, e));
        }
        ExitCode::FAILURE
    };
    let backlog = a.conns.clamp(16, 4096) as i32;
    let listener = match Socket::listen(c.proto, &ep, backlog) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let port = match listener.local_port() {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let shown = Endpoint { port, ..ep };
    eprintln!(
        "mrc-perf server: listening on {shown} ({}, {} conns)",
        c.proto.name(),
        a.conns
    );
    let _ = std::io::stderr().flush();

    let mut accept_err = None;
    let mut reports: Vec<(u32, ConnReport)> = thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..a.conns {
            match listener.accept(c.timeout) {
                Ok(sock) => {
                    let conn = &conn;
                    handles.push((i, s.spawn(move || conn.run(sock))));
                }
                Err(e) => {
                    accept_err = Some(e);
                    break;
                }
            }
        }
        // The listener stays open until every connection is done: MPTCP
        // joins its extra subflows through it.
        let joined: Vec<_> = handles
            .into_iter()
            .map(|(i, h)| {
                let r = h.join().unwrap_or_else(|_| {
                    ConnReport::failed(
                        &conn_info_unknown(c),
                        &Error::msg("connection thread panicked"),
                    )
                });
                (i, r)
            })
            .collect();
        drop(listener);
        joined
    });
    reports.sort_by_key(|(i, r)| (r.conn.is_none(), r.conn, *i));

    let mut ok = true;
    for (_, r) in &reports {
        if let Some(e) = &r.error {
            ok = false;
            match r.conn {
                Some(n) => eprintln!("mrc-perf: conn {n}: {e}"),
                None => eprintln!("mrc-perf: {e}"),
            }
        }
        if c.json {
            print_json(r);
        } else {
            println!("{}", r.line());
        }
    }
    if let Some(e) = accept_err {
        return fail(&e);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn conn_info_unknown(c: &CommonArgs) -> ConnInfo {
    ConnInfo {
        role: "server",
        proto: c.proto.name(),
        mode: Mode::Throughput.name(),
        conn: None,
        seed: 0,
        msg_size: String::new(),
        interval_ms: c.interval_ms,
        latency: false,
    }
}

/// Connects, retrying refused connections until `deadline`.
fn connect(proto: Proto, ep: &Endpoint, deadline: Instant) -> Result<Socket, Error> {
    loop {
        match Socket::connect(proto, ep) {
            Err(e) if e.errno == Some(libc::ECONNREFUSED) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

fn client(a: ClientArgs) -> ExitCode {
    let ep = match parse_endpoint(&a.addr, a.port) {
        Ok(ep) => ep,
        Err(code) => return code,
    };
    let c = &a.common;
    let info = ConnInfo {
        role: "client",
        proto: c.proto.name(),
        mode: a.mode.name(),
        conn: None,
        seed: a.seed,
        msg_size: a.msg_size.to_string(),
        interval_ms: c.interval_ms,
        latency: a.mode == Mode::Latency,
    };
    let finish = |report: ClientReport| {
        if let Some(e) = &report.error {
            eprintln!("mrc-perf: {e}");
        }
        if c.json {
            print_json(&report);
        } else {
            for l in report.lines() {
                println!("{l}");
            }
        }
        if report.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    };

    // Connect everything first, so a refused or failed connection stops
    // the run before any data moves.
    let retry_until = Instant::now() + Duration::from_millis(a.retry_ms);
    let mut socks = Vec::with_capacity(a.parallel as usize);
    for i in 0..a.parallel {
        match connect(c.proto, &ep, retry_until) {
            Ok(s) => socks.push(s),
            Err(e) => {
                let e = if a.parallel > 1 {
                    e.context(format_args!("conn {i}"))
                } else {
                    e
                };
                let mut r = ClientReport::new(&info, Vec::new(), Vec::new(), Some(e));
                r.parallel = a.parallel;
                return finish(r);
            }
        }
    }

    let limit = match (a.bytes, a.duration) {
        (Some(b), _) => Limit::Bytes(b),
        (None, d) => Limit::For(d.unwrap_or(Duration::from_secs(10))),
    };
    let conns: Vec<ClientConn> = (0..a.parallel)
        .map(|i| ClientConn {
            proto: c.proto,
            mode: a.mode,
            size: a.msg_size,
            seed: a.seed,
            conn: i,
            limit,
            interval: Duration::from_millis(c.interval_ms),
            timeout: c.timeout,
            hold: Duration::from_millis(a.hold_ms),
            stop_file: a.stop_file.clone(),
        })
        .collect();
    let gate = StartGate::new(conns.len());
    let results: Vec<(ConnReport, Vec<u64>)> = thread::scope(|s| {
        let gate = &gate;
        let handles: Vec<_> = conns
            .iter()
            .zip(socks)
            .map(|(cc, sock)| s.spawn(move || cc.run(sock, gate)))
            .collect();
        gate.open();
        handles
            .into_iter()
            .zip(&conns)
            .map(|(h, cc)| {
                h.join().unwrap_or_else(|_| {
                    let mut i = info.clone();
                    i.conn = Some(cc.conn);
                    i.seed = cc.seed.wrapping_add(u64::from(cc.conn));
                    (
                        ConnReport::failed(&i, &Error::msg("connection thread panicked")),
                        Vec::new(),
                    )
                })
            })
            .collect()
    });
    let mut rtts = Vec::new();
    let mut reports = Vec::with_capacity(results.len());
    for (r, mut t) in results {
        rtts.append(&mut t);
        reports.push(r);
    }
    finish(ClientReport::new(&info, reports, rtts, None))
}
