// SPDX-License-Identifier: GPL-2.0
//! The work of one connection, on the client and on the server.

use crate::error::{Error, Result};
use crate::hello::{Hello, Mode};
use crate::pattern::{fill, verify, SizeSeq, SizeSpec, MAX_MSG};
use crate::sock::{MsgReader, Proto, Socket};
use crate::stats::{ConnInfo, ConnReport, Progress};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// When a client connection stops sending.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// After at least this many bytes (whole messages: the last one may
    /// overshoot).
    Bytes(u64),
    /// For this long from the start (see [`StartGate`]).
    For(Duration),
}

/// Starts every connection of a client at once. Each connection's thread waits at the gate
/// until the thread that spawned them all opens it, so a connection whose thread was
/// spawned last (on a busy host, seconds later) does not start late, and the start is taken
/// when every connection can send.
///
/// Opening wakes each waiting thread directly (`unpark`). A `Barrier` wakes them all at once
/// and then hands its mutex from one to the next, each waiting for a CPU in turn: with many
/// connections and transports whose first sends never block (large send buffers), the last
/// threads got through it seconds after the first had started sending.
pub struct StartGate {
    conns: usize,
    /// The thread that creates the gate and opens it.
    opener: Thread,
    /// Threads waiting at the gate; a thread is listed before it counts in `arrived`.
    waiting: Mutex<Vec<Thread>>,
    arrived: AtomicUsize,
    /// The start, set when the gate opens.
    at: OnceLock<Instant>,
}

impl StartGate {
    /// A gate for `conns` connection threads, to be opened by the calling thread.
    pub fn new(conns: usize) -> Self {
        StartGate {
            conns,
            opener: thread::current(),
            waiting: Mutex::new(Vec::with_capacity(conns)),
            arrived: AtomicUsize::new(0),
            at: OnceLock::new(),
        }
    }

    /// Waits until every connection thread is at the gate, takes the start time and lets
    /// them all go; returns the start. Called by the thread that created the gate.
    pub fn open(&self) -> Instant {
        while self.arrived.load(Ordering::Acquire) < self.conns {
            // Unparked by the last thread to arrive; the timeout only guards against a
            // token consumed elsewhere.
            thread::park_timeout(Duration::from_millis(10));
        }
        let at = *self.at.get_or_init(Instant::now);
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        for t in waiting {
            t.unpark();
        }
        at
    }

    /// Waits until the gate opens; returns the start.
    pub fn wait(&self) -> Instant {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(thread::current());
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.conns {
            self.opener.unpark();
        }
        // An unpark that comes before park() makes it return at once.
        loop {
            if let Some(at) = self.at.get() {
                return *at;
            }
            thread::park();
        }
    }
}

/// Parameters of a client connection.
pub struct ClientConn {
    pub proto: Proto,
    pub mode: Mode,
    pub size: SizeSpec,
    /// Base seed S; this connection uses S + conn.
    pub seed: u64,
    pub conn: u32,
    pub limit: Limit,
    pub interval: Duration,
    pub timeout: Option<Duration>,
    /// Idle time between the last message and the shutdown.
    pub hold: Duration,
    /// Sending stops once this file exists, if the limit has not stopped it before.
    pub stop_file: Option<PathBuf>,
}

/// How often a client connection looks for its stop file.
const STOP_FILE_CHECK: Duration = Duration::from_millis(10);

impl ClientConn {
    fn info(&self) -> ConnInfo {
        ConnInfo {
            role: "client",
            proto: self.proto.name(),
            mode: self.mode.name(),
            conn: Some(self.conn),
            seed: self.hello().conn_seed(),
            msg_size: self.size.to_string(),
            interval_ms: self.interval.as_millis() as u64,
            latency: self.mode == Mode::Latency,
        }
    }

    fn hello(&self) -> Hello {
        Hello {
            conn: self.conn,
            mode: self.mode,
            seed: self.seed,
            size: self.size,
        }
    }

    /// Sends the messages on `sock`, holds the connection open for
    /// `hold`, then shuts down writing and waits for the server to close.
    /// Returns the report and the round trips (ns).
    pub fn run(&self, sock: Socket, gate: &StartGate) -> (ConnReport, Vec<u64>) {
        let start = gate.wait();
        let mut p = Progress::new(start, self.interval);
        // One reader for both steps: the check for a message after the last
        // one sees whatever the echoes left buffered. The hold is idle time,
        // not part of the transfer.
        let mut reader = MsgReader::new();
        let (r, held) = match self.send_all(&sock, &mut p, start, &mut reader) {
            Ok(()) => {
                thread::sleep(self.hold);
                (self.close(&sock, &mut reader), self.hold)
            }
            Err(e) => (Err(e), Duration::ZERO),
        };
        let end = Instant::now() - held;
        drop(sock);
        let report = ConnReport::new(&self.info(), &mut p, end, r);
        (report, p.rtts)
    }

    /// Sends the hello and the messages; in latency mode, checks each echo.
    fn send_all(
        &self,
        sock: &Socket,
        p: &mut Progress,
        start: Instant,
        reader: &mut MsgReader,
    ) -> Result<()> {
        if let Some(t) = self.timeout {
            sock.set_timeout(t)?;
        }
        let latency = self.mode == Mode::Latency;
        if latency {
            // Best effort: only a latency optimisation.
            let _ = sock.set_nodelay(self.proto);
        }
        let hello = self.hello();
        sock.send_msg(&hello.encode())
            .map_err(|e| e.context("hello"))?;
        p.hello_at = Some(Instant::now());
        let seed = hello.conn_seed();
        let mut sizes = SizeSeq::new(self.size, seed);
        let mut buf = vec![0u8; MAX_MSG];
        let mut stop_check = Instant::now();
        loop {
            let done = match self.limit {
                Limit::Bytes(b) => p.bytes >= b,
                Limit::For(d) => Instant::now() >= start + d,
            };
            if done {
                break;
            }
            if let Some(f) = &self.stop_file {
                let now = Instant::now();
                if now >= stop_check {
                    stop_check = now + STOP_FILE_CHECK;
                    if f.exists() {
                        break;
                    }
                }
            }
            let idx = p.msgs;
            let len = sizes.next_size();
            let msg = &mut buf[..len];
            fill(seed, idx, msg);
            let t0 = Instant::now();
            sock.send_msg(msg)
                .map_err(|e| e.context(format_args!("message {idx}")))?;
            if latency {
                let echo = reader
                    .recv(sock)
                    .map_err(|e| e.context(format_args!("echo of message {idx}")))?
                    .ok_or_else(|| {
                        Error::msg(format!(
                            "message {idx}: the server closed the connection instead of echoing it"
                        ))
                    })?;
                let t1 = Instant::now();
                if echo.len() != len {
                    return Err(Error::msg(format!(
                        "message {idx}: echo has {} bytes, sent {len}",
                        echo.len()
                    )));
                }
                if echo != &*msg {
                    return Err(Error::msg(format!(
                        "message {idx}: echo differs from the {len} bytes sent"
                    )));
                }
                p.rtts.push((t1 - t0).as_nanos() as u64);
                p.record(t1, msg);
            } else {
                p.record(Instant::now(), msg);
            }
        }
        Ok(())
    }

    /// Shuts down writing and waits for the server to close.
    fn close(&self, sock: &Socket, reader: &mut MsgReader) -> Result<()> {
        sock.shutdown_write()?;
        match reader.recv(sock) {
            // SCTP has no half-close: shutdown() starts the association's
            // graceful SHUTDOWN, which ends it once the server has received
            // everything, and receiving then fails with ENOTCONN. An abort
            // would give ECONNRESET instead.
            Err(e) if self.proto == Proto::Sctp && e.errno == Some(libc::ENOTCONN) => Ok(()),
            Err(e) => Err(e.context("waiting for the server to close")),
            Ok(None) => Ok(()),
            Ok(Some(m)) => Err(Error::msg(format!(
                "unexpected {}-byte message from the server",
                m.len()
            ))),
        }
    }
}

/// Parameters of the server; `None` values are taken from the client's
/// hello, given ones must match it.
pub struct ServerConn {
    pub proto: Proto,
    pub mode: Option<Mode>,
    pub size: Option<SizeSpec>,
    pub seed: Option<u64>,
    pub interval: Duration,
    pub timeout: Option<Duration>,
}

impl ServerConn {
    fn info(&self, hello: Option<&Hello>) -> ConnInfo {
        let mode = hello.map(|h| h.mode).or(self.mode);
        let size = hello.map(|h| h.size).or(self.size);
        ConnInfo {
            role: "server",
            proto: self.proto.name(),
            mode: mode.unwrap_or(Mode::Throughput).name(),
            conn: hello.map(|h| h.conn),
            seed: hello.map(Hello::conn_seed).or(self.seed).unwrap_or(0),
            msg_size: size.map(|s| s.to_string()).unwrap_or_default(),
            interval_ms: self.interval.as_millis() as u64,
            latency: mode == Some(Mode::Latency),
        }
    }

    /// Receives and verifies (and in latency mode echoes) messages until
    /// EOF, then closes.
    pub fn run(&self, sock: Socket) -> ConnReport {
        let mut p = Progress::new(Instant::now(), self.interval);
        let mut hello = None;
        let r = self.transfer(&sock, &mut p, &mut hello);
        let end = Instant::now();
        drop(sock);
        ConnReport::new(&self.info(hello.as_ref()), &mut p, end, r)
    }

    fn check_hello(&self, h: &Hello) -> Result<()> {
        let mut diffs = Vec::new();
        if let Some(m) = self.mode.filter(|&m| m != h.mode) {
            diffs.push(format!("mode {} (server: {})", h.mode.name(), m.name()));
        }
        if let Some(s) = self.seed.filter(|&s| s != h.seed) {
            diffs.push(format!("seed {} (server: {s})", h.seed));
        }
        if let Some(s) = self.size.filter(|&s| s != h.size) {
            diffs.push(format!("msg-size {} (server: {s})", h.size));
        }
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(Error::msg(format!(
                "client parameters differ: {}",
                diffs.join(", ")
            )))
        }
    }

    fn transfer(&self, sock: &Socket, p: &mut Progress, hello: &mut Option<Hello>) -> Result<()> {
        if let Some(t) = self.timeout {
            sock.set_timeout(t)?;
        }
        let mut reader = MsgReader::new();
        let first = reader
            .recv(sock)
            .map_err(|e| e.context("hello"))?
            .ok_or_else(|| Error::msg("the client closed the connection before its hello"))?;
        let h = Hello::decode(first).map_err(Error::msg)?;
        *hello = Some(h);
        self.check_hello(&h)?;
        p.timeline.restart(Instant::now());
        let latency = h.mode == Mode::Latency;
        if latency {
            // Best effort: only a latency optimisation.
            let _ = sock.set_nodelay(self.proto);
        }
        let seed = h.conn_seed();
        let mut sizes = SizeSeq::new(h.size, seed);
        loop {
            let idx = p.msgs;
            let Some(m) = reader
                .recv(sock)
                .map_err(|e| e.context(format_args!("message {idx}")))?
            else {
                return Ok(());
            };
            let now = Instant::now();
            let want = sizes.next_size();
            if m.len() != want {
                p.bad(format!(
                    "message {idx}: {} bytes, expected {want} (message boundary lost)",
                    m.len()
                ));
            } else if let Some(off) = verify(seed, idx, m) {
                p.bad(format!(
                    "message {idx} ({want} bytes): wrong content at offset {off}"
                ));
            }
            p.record(now, m);
            if latency {
                sock.send_msg(m)
                    .map_err(|e| e.context(format_args!("echo of message {idx}")))?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_lets_every_thread_go_at_one_start_after_the_last_arrived() {
        const N: u64 = 16;
        let gate = StartGate::new(N as usize);
        let last_arrival = Mutex::new(None::<Instant>);
        thread::scope(|s| {
            let handles: Vec<_> = (0..N)
                .map(|i| {
                    let (gate, last) = (&gate, &last_arrival);
                    s.spawn(move || {
                        thread::sleep(Duration::from_millis(3 * i));
                        let t = Instant::now();
                        let mut l = last.lock().unwrap();
                        *l = Some(l.map_or(t, |x| x.max(t)));
                        drop(l);
                        gate.wait()
                    })
                })
                .collect();
            let at = gate.open();
            let starts: Vec<Instant> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            assert_eq!(starts.len(), N as usize);
            assert!(starts.iter().all(|s| *s == at), "one start for all");
            let last = last_arrival.lock().unwrap().expect("threads arrived");
            assert!(at >= last, "opened before the last thread arrived");
        });
    }
}
