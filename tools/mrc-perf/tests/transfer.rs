// SPDX-License-Identifier: GPL-2.0
//! End-to-end runs of `mrc-perf server` and `mrc-perf client` over loopback
//! with the stream protocols the host has (MRC needs the kernel module and
//! is covered by the kernel selftests).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

const BIN: &str = env!("CARGO_BIN_EXE_mrc-perf");

struct Server {
    child: Child,
    port: u16,
    stderr: JoinHandle<String>,
}

/// Starts a server on a free port (`--port 0`) and waits until it listens.
fn start_server(args: &[&str]) -> Server {
    let mut child = Command::new(BIN)
        .arg("server")
        .args(args)
        .args(["--port", "0", "--json", "--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut err = BufReader::new(child.stderr.take().expect("server stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("read server stderr");
    let port = line
        .split_once(" port ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            let _ = child.kill();
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            panic!("server did not start: {line}{rest}");
        });
    let stderr = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        line + &rest
    });
    Server {
        child,
        port,
        stderr,
    }
}

/// Waits for the server; returns its status, JSON lines and stderr.
fn finish_server(s: Server) -> (ExitStatus, Vec<Value>, String) {
    let out = s.child.wait_with_output().expect("wait for server");
    let err = s.stderr.join().expect("server stderr thread");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON `{l}`: {e}")))
        .collect();
    (out.status, lines, err)
}

/// Runs a client to completion; returns its status, JSON object and stderr.
fn run_client(args: &[&str]) -> (ExitStatus, Value, String) {
    let out = Command::new(BIN)
        .arg("client")
        .args(args)
        .args(["--json", "--timeout", "120"])
        .output()
        .expect("run client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("bad client JSON `{stdout}` ({e}); stderr: {stderr}"));
    (out.status, v, stderr)
}

fn server_for(lines: &[Value], conn: u64) -> &Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|l| l["conn"].as_u64() == Some(conn))
        .collect();
    assert_eq!(found.len(), 1, "server lines for conn {conn}: {lines:?}");
    found[0]
}

/// Client and server agree on every connection: both OK, same message and
/// byte counts, same digest.
fn check_pair(client: &Value, server: &[Value], parallel: u64, proto: &str) {
    assert_eq!(client["ok"], true, "client: {client}");
    assert_eq!(client["role"], "client");
    assert_eq!(client["proto"], proto);
    assert_eq!(client["parallel"].as_u64(), Some(parallel));
    let conns = client["conns"].as_array().expect("conns array");
    assert_eq!(conns.len() as u64, parallel);
    assert_eq!(server.len() as u64, parallel, "server lines: {server:?}");
    let mut total = 0;
    for c in conns {
        let i = c["conn"].as_u64().expect("conn index");
        let s = server_for(server, i);
        assert_eq!(s["role"], "server");
        assert_eq!(s["proto"], proto);
        assert_eq!(s["ok"], true, "server conn {i}: {s}");
        assert_eq!(c["ok"], true, "client conn {i}: {c}");
        assert_eq!(s["error"], Value::Null);
        assert_eq!(s["bad_msgs"].as_u64(), Some(0));
        // The client's hello went out after the start; the server sends none.
        assert!(c["hello_us"].as_u64().is_some(), "client conn {i}: {c}");
        assert_eq!(s["hello_us"], Value::Null);
        let digest = c["digest"].as_str().expect("client digest");
        assert_eq!(digest.len(), 32);
        assert_eq!(s["digest"].as_str(), Some(digest), "conn {i} digest");
        assert_eq!(s["msgs"], c["msgs"], "conn {i} msgs");
        assert_eq!(s["bytes"], c["bytes"], "conn {i} bytes");
        assert_eq!(s["seed"], c["seed"], "conn {i} seed");
        let samples: u64 = s["samples"]
            .as_array()
            .expect("samples")
            .iter()
            .map(|v| v.as_u64().expect("sample"))
            .sum();
        assert_eq!(samples, s["bytes"].as_u64().expect("bytes"));
        assert!(s["max_gap_us"].is_u64());
        assert!(s["elapsed_s"].is_f64());
        assert!(s["goodput_mbps"].is_f64());
        total += c["bytes"].as_u64().expect("bytes");
    }
    assert_eq!(client["bytes"].as_u64(), Some(total));
    if parallel == 1 {
        assert_eq!(client["digest"], conns[0]["digest"]);
        assert_eq!(client["conn"].as_u64(), Some(0));
    }
}

/// A throughput run of `parallel` connections with seed 7; `extra` are
/// client options (the server takes the message sizes from the client).
fn throughput(proto: &str, addr: &str, parallel: u32, extra: &[&str]) -> (Value, Vec<Value>) {
    let par = parallel.to_string();
    let srv = start_server(&[
        "--proto", proto, "--addr", addr, "--conns", &par, "--seed", "7",
    ]);
    let port = srv.port.to_string();
    let mut cargs = vec![
        "--proto",
        proto,
        "--addr",
        addr,
        "--port",
        &port,
        "--parallel",
        &par,
        "--seed",
        "7",
    ];
    cargs.extend_from_slice(extra);
    let (cst, client, cerr) = run_client(&cargs);
    let (sst, server, serr) = finish_server(srv);
    assert!(cst.success(), "client failed: {cerr}\n{client}");
    assert!(sst.success(), "server failed: {serr}\n{server:?}");
    check_pair(&client, &server, u64::from(parallel), proto);
    (client, server)
}

fn ipv6_loopback() -> bool {
    TcpListener::bind("[::1]:0").is_ok()
}

/// Whether this host can create a socket of `protocol` (SOCK_STREAM).
fn have_proto(protocol: i32) -> bool {
    // SAFETY: plain system call; the descriptor is closed right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, protocol) };
    if fd < 0 {
        return false;
    }
    // SAFETY: fd was just created.
    unsafe { libc::close(fd) };
    true
}

#[test]
fn tcp_ipv4_parallel_mix() {
    let (client, _) = throughput("tcp", "127.0.0.1", 4, &["--bytes", "20000000"]);
    for c in client["conns"].as_array().expect("conns") {
        assert!(c["bytes"].as_u64().expect("bytes") >= 20_000_000);
        assert_eq!(c["msg_size"], "mix");
    }
    assert_eq!(client["mode"], "throughput");
    assert!(client.get("rtt_us").is_none());
}

#[test]
fn tcp_ipv6_parallel_mix() {
    if !ipv6_loopback() {
        eprintln!("skipped: no IPv6 loopback (::1) on this host");
        return;
    }
    throughput("tcp", "::1", 4, &["--bytes", "20000000"]);
}

#[test]
fn tcp_fixed_size_duration() {
    let (client, _) = throughput(
        "tcp",
        "127.0.0.1",
        2,
        &["--msg-size", "65536", "--duration", "0.3"],
    );
    for c in client["conns"].as_array().expect("conns") {
        let bytes = c["bytes"].as_u64().expect("bytes");
        assert!(bytes > 0);
        assert_eq!(bytes, c["msgs"].as_u64().expect("msgs") * 65536);
    }
}

#[test]
fn tcp_single_small_message() {
    // The mix sequence starts with 1 byte, so one message covers 1 byte.
    let (client, server) = throughput("tcp", "127.0.0.1", 1, &["--bytes", "1"]);
    assert_eq!(client["msgs"].as_u64(), Some(1));
    assert_eq!(client["bytes"].as_u64(), Some(1));
    assert_eq!(server[0]["bytes"].as_u64(), Some(1));
}

#[test]
fn tcp_hold_keeps_the_connection_open_after_the_data() {
    let (client, server) = throughput(
        "tcp",
        "127.0.0.1",
        1,
        &["--bytes", "1", "--hold-ms", "1500"],
    );
    // The server sees the end of the stream only after the hold; the
    // client's own elapsed time leaves the hold out. The server's clock
    // starts when the client's hello arrives, which on a loaded host can
    // be after the hold began, hence the margin of 0.5 s either way.
    let srv_s = server[0]["elapsed_s"].as_f64().expect("server elapsed_s");
    let cli_s = client["conns"][0]["elapsed_s"]
        .as_f64()
        .expect("client elapsed_s");
    assert!(srv_s >= 1.0, "server saw the end after {srv_s} s");
    assert!(cli_s < 1.0, "client elapsed {cli_s} s includes the hold");
}

#[test]
fn tcp_stop_file_ends_the_sending() {
    let dir = std::env::temp_dir().join(format!("mrc-perf-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let stop = dir.join("stop");
    let _ = std::fs::remove_file(&stop);
    let maker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            std::fs::write(&stop, b"").expect("create the stop file");
        })
    };
    let path = stop.to_str().expect("UTF-8 path").to_owned();
    // A 60 s run that the stop file ends after about 1.5 s, intact.
    let (client, server) = throughput(
        "tcp",
        "127.0.0.1",
        1,
        &["--duration", "60", "--stop-file", &path],
    );
    maker.join().expect("stop file thread");
    let _ = std::fs::remove_dir_all(&dir);
    let cli_s = client["conns"][0]["elapsed_s"]
        .as_f64()
        .expect("client elapsed_s");
    assert!(
        (1.0..30.0).contains(&cli_s),
        "client sent for {cli_s} s, not until the stop file"
    );
    assert_eq!(client["bytes"], server[0]["bytes"]);
}

#[test]
fn tcp_first_messages_include_extremes() {
    // 2 bytes need two messages: 1 byte, then 1 MiB.
    let (client, _) = throughput("tcp", "127.0.0.1", 1, &["--bytes", "2"]);
    assert_eq!(client["msgs"].as_u64(), Some(2));
    assert_eq!(client["bytes"].as_u64(), Some(1 + 1_048_576));
}

#[test]
fn tcp_latency() {
    let srv = start_server(&["--proto", "tcp", "--addr", "127.0.0.1", "--mode", "latency"]);
    let port = srv.port.to_string();
    let (cst, client, cerr) = run_client(&[
        "--proto",
        "tcp",
        "--addr",
        "127.0.0.1",
        "--port",
        &port,
        "--mode",
        "latency",
        "--msg-size",
        "1000",
        "--bytes",
        "1000000",
    ]);
    let (sst, server, serr) = finish_server(srv);
    assert!(cst.success(), "client failed: {cerr}\n{client}");
    assert!(sst.success(), "server failed: {serr}\n{server:?}");
    check_pair(&client, &server, 1, "tcp");
    assert_eq!(client["mode"], "latency");
    assert_eq!(client["count"].as_u64(), Some(1000));
    assert_eq!(client["msgs"].as_u64(), Some(1000));
    let rtt = &client["rtt_us"];
    let p50 = rtt["p50"].as_f64().expect("p50");
    let p99 = rtt["p99"].as_f64().expect("p99");
    let p999 = rtt["p999"].as_f64().expect("p999");
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{rtt}");
    let c0 = &client["conns"][0];
    assert_eq!(c0["count"].as_u64(), Some(1000));
    assert!(c0["rtt_us"]["p50"].is_f64());
    assert_eq!(server[0]["mode"], "latency");
    assert_eq!(server[0]["count"].as_u64(), Some(1000));
    assert_eq!(server[0]["rtt_us"], Value::Null);
}

#[test]
fn sctp_if_available() {
    if !have_proto(libc::IPPROTO_SCTP) {
        eprintln!("skipped: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails here");
        return;
    }
    throughput("sctp", "127.0.0.1", 2, &["--bytes", "5000000"]);
}

#[test]
fn mptcp_if_available() {
    if !have_proto(libc::IPPROTO_MPTCP) {
        eprintln!("skipped: socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP) fails here");
        return;
    }
    throughput("mptcp", "127.0.0.1", 2, &["--bytes", "5000000"]);
}

/// A TCP port on 127.0.0.1 that is bound and never listened on, so that a
/// connection to it is refused, for as long as the value lives: no other
/// test running meanwhile can take the port and listen on it.
struct RefusingPort {
    fd: i32,
    port: u16,
}

impl RefusingPort {
    fn new() -> Self {
        // SAFETY: plain system calls on a descriptor this function owns;
        // `addr` and `len` are valid for the sizes given.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket");
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let sa = (&mut addr as *mut libc::sockaddr_in).cast::<libc::sockaddr>();
            assert_eq!(libc::bind(fd, sa, len), 0, "bind");
            assert_eq!(libc::getsockname(fd, sa, &mut len), 0, "getsockname");
            RefusingPort {
                fd,
                port: u16::from_be(addr.sin_port),
            }
        }
    }
}

impl Drop for RefusingPort {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}

#[test]
fn connection_refused_reports_errno() {
    let refusing = RefusingPort::new();
    let port = refusing.port.to_string();
    let (st, v, err) = run_client(&[
        "--proto",
        "tcp",
        "--addr",
        "127.0.0.1",
        "--port",
        &port,
        "--bytes",
        "1000",
    ]);
    assert_eq!(st.code(), Some(1));
    assert!(
        err.starts_with("mrc-perf: connect to 127.0.0.1 port ")
            && err.contains("Connection refused (errno 111)"),
        "stderr: {err}"
    );
    assert_eq!(v["ok"], false);
    assert_eq!(v["errno"].as_i64(), Some(111));
    assert!(v["error"]
        .as_str()
        .expect("error")
        .contains("Connection refused"));
}

#[test]
fn parameter_mismatch_fails_on_the_server() {
    let srv = start_server(&["--proto", "tcp", "--addr", "127.0.0.1", "--msg-size", "100"]);
    let port = srv.port.to_string();
    let (_, _, _) = run_client(&[
        "--proto",
        "tcp",
        "--addr",
        "127.0.0.1",
        "--port",
        &port,
        "--msg-size",
        "200",
        "--bytes",
        "1000",
    ]);
    let (sst, server, serr) = finish_server(srv);
    assert_eq!(sst.code(), Some(1));
    assert_eq!(server.len(), 1);
    assert_eq!(server[0]["ok"], false);
    let e = server[0]["error"].as_str().expect("error");
    assert!(e.contains("msg-size 200 (server: 100)"), "{e}");
    assert!(
        serr.contains("mrc-perf: conn 0: client parameters differ"),
        "{serr}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let st = Command::new(BIN)
        .args([
            "client",
            "--addr",
            "127.0.0.1",
            "--port",
            "1",
            "--msg-size",
            "0",
        ])
        .output()
        .expect("run");
    assert_eq!(st.status.code(), Some(2));
    let st = Command::new(BIN)
        .args(["client", "--addr", "nowhere", "--port", "1"])
        .output()
        .expect("run");
    assert_eq!(st.status.code(), Some(2));
}
