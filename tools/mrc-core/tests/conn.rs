// SPDX-License-Identifier: GPL-2.0
//! Unit tests of the connection state machine and reliability core in `mrc_conn.rs`.
//!
//! Each test wires two cores (or one core and hand-made packets) together by hand, so every
//! packet and every timer is explicit.

use std::mem::MaybeUninit;

use mrc_core::mrc_cc::CcKind;
use mrc_core::mrc_conn::{
    self, window_cost, Conn, ConnConfig, ConnError, DropReason, Event, Input, OpenError,
    RemovePathError, SendError, SendLimit, SendRoom, State, Transmit, MIN_TX_BUF, MIN_WINDOW_COST,
    MSG_QUEUE, STREAM_MSG, WINDOW,
};
use mrc_core::mrc_path::{PathConfig, PathIds, PathIdx, PathState, StateReason};
use mrc_core::mrc_proto::{
    self, decode, Body, Endpoint, Flags, Handshake, Header, PacketType, Sack, HEADER_LEN,
};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const PATH_ID: u32 = 7;
const SESSION: u64 = 0x1234_5678_9ABC_DEF0;
const CLIENT_ISN: u64 = 1000;
const SERVER_ISN: u64 = 5000;
const CLIENT_PORT: u16 = 4791;
const SERVER_PORT: u16 = 80;
/// DATA payload with the default 1400-byte MTU.
const MSS: usize = 1400 - HEADER_LEN;

fn new_conn(cfg: ConnConfig) -> Box<Conn> {
    with_path(Box::new(Conn::new(cfg)))
}

/// Returns a connection built by `Conn::init_in_place` in heap memory filled with 0xAA bytes.
///
/// The memory comes straight from the allocator, so nothing the size of a `Conn` is ever on the
/// stack.
fn in_place(cfg: ConnConfig) -> Box<Conn> {
    let layout = std::alloc::Layout::new::<Conn>();
    // SAFETY: `Conn` is not zero-sized.
    let raw = unsafe { std::alloc::alloc(layout) }.cast::<MaybeUninit<Conn>>();
    if raw.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `raw` is a fresh allocation with the layout of `Conn` (which `MaybeUninit<Conn>`
    // shares), and a `MaybeUninit` may hold any bytes.
    let slot = unsafe {
        std::ptr::write_bytes(raw, 0xAA, 1);
        &mut *raw
    };
    Conn::init_in_place(slot, cfg);
    // SAFETY: `init_in_place` initialised the `Conn`, which was allocated by the global
    // allocator with the layout of `Conn`, as `Box<Conn>` expects.
    unsafe { Box::from_raw(raw.cast::<Conn>()) }
}

/// Adds the test path to a connection.
fn with_path(mut c: Box<Conn>) -> Box<Conn> {
    c.paths_mut()
        .add(
            0,
            PathIds {
                path_id: PATH_ID,
                plane: 0,
                entropy: 1,
            },
            false,
        )
        .unwrap();
    c
}

fn payload_byte(msg_id: u64, offset: u64) -> u8 {
    (msg_id.wrapping_mul(31).wrapping_add(offset)) as u8
}

/// Sends everything the core wants to send now; DATA payloads are a pattern of (id, offset).
fn drain_tx(c: &mut Conn, now: u64) -> Vec<(Transmit, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 70_000];
    for _ in 0..10_000 {
        let Some(tx) = c.poll_transmit(now, &mut buf) else {
            return out;
        };
        let len = match tx.data {
            None => tx.len,
            Some(d) => {
                let payload: Vec<u8> = (0..u64::from(d.len))
                    .map(|i| payload_byte(d.msg_id, u64::from(d.offset) + i))
                    .collect();
                // The glue writes the header alone and leaves the payload where it is: the
                // same bytes, checksum included.
                let mut head = [0u8; HEADER_LEN];
                mrc_conn::emit_data_head(&mut head, &buf, &tx).unwrap();
                let len = mrc_conn::finish_data(&mut buf, &tx, &payload).unwrap();
                assert_eq!(
                    head,
                    buf[..HEADER_LEN],
                    "emit_data_head and finish_data differ"
                );
                len
            }
        };
        assert_eq!(len, tx.len);
        // Every packet carries the sender's direction: PASSIVE iff it accepted.
        assert_eq!(
            header(&buf[..len]).flags.passive(),
            c.is_passive(),
            "direction bit of {:?}",
            kind(&buf[..len])
        );
        out.push((tx, buf[..len].to_vec()));
    }
    panic!("poll_transmit never ran dry");
}

fn drain(c: &mut Conn, now: u64) -> Vec<Vec<u8>> {
    drain_tx(c, now).into_iter().map(|(_, b)| b).collect()
}

/// Queues `n` messages of 100 bytes on `c` and returns the `n` packets it sends at `now`.
fn send_small(c: &mut Conn, n: usize, now: u64) -> Vec<Vec<u8>> {
    for _ in 0..n {
        c.send_message(100).unwrap();
    }
    let data = drain(c, now);
    assert_eq!(data.len(), n, "one packet per message");
    data
}

fn kind(bytes: &[u8]) -> PacketType {
    decode(bytes).unwrap().header.packet_type().unwrap()
}

fn header(bytes: &[u8]) -> Header {
    decode(bytes).unwrap().header
}

fn feed(c: &mut Conn, now: u64, bytes: &[u8]) -> Input {
    let pkt = decode(bytes).expect("core sent an undecodable packet");
    c.handle_packet(now, &pkt)
}

fn feed_all(c: &mut Conn, now: u64, pkts: &[Vec<u8>]) {
    for p in pkts {
        feed(c, now, p);
    }
}

fn events(c: &mut Conn) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Runs the handshake with no loss at the given one-way delay; returns (client, server).
fn established_with(cfg: ConnConfig, server_cfg: ConnConfig) -> (Box<Conn>, Box<Conn>) {
    handshake(new_conn(cfg), new_conn(server_cfg))
}

/// Runs the handshake between two fresh cores with no loss; returns (client, server).
fn handshake(mut client: Box<Conn>, mut server: Box<Conn>) -> (Box<Conn>, Box<Conn>) {
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    assert_eq!(syn.len(), 1);
    let pkt = decode(&syn[0]).unwrap();
    server.accept(10 * US, &pkt, SERVER_ISN, &[]).unwrap();
    assert_eq!(server.local_port(), SERVER_PORT);
    assert_eq!(server.peer_port(), CLIENT_PORT);
    let synack = drain(&mut server, 10 * US);
    assert_eq!(synack.len(), 1);
    feed(&mut client, 20 * US, &synack[0]);
    let ack = drain(&mut client, 20 * US);
    assert_eq!(ack.len(), 1);
    feed(&mut server, 30 * US, &ack[0]);
    assert_eq!(events(&mut client), vec![Event::Connected]);
    assert_eq!(events(&mut server), vec![Event::Connected]);
    (client, server)
}

fn established() -> (Box<Conn>, Box<Conn>) {
    established_with(ConnConfig::default(), ConnConfig::default())
}

/// A client that sent its SYN and a server that accepted it (its SYN_ACK not yet polled).
fn syn_received() -> (Box<Conn>, Box<Conn>) {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    (client, server)
}

/// Drives both cores until neither has anything to send, delivering every packet at `now`.
/// Adds a second path (id `PATH_ID + 1`, on `plane`) to both ends at 1 ms; returns the
/// client's index of it.
fn add_second_path(client: &mut Conn, server: &mut Conn, plane: u8) -> PathIdx {
    let second = PathIds {
        path_id: PATH_ID + 1,
        plane,
        entropy: 2,
    };
    server.paths_mut().add(MS, second, false).unwrap();
    client.paths_mut().add(MS, second, false).unwrap()
}

/// An established pair with a second path on `plane`, timed like the first (its probe
/// answered in 20 us), and the client's packets of 16 messages sent at `t0`: more than
/// path 0's window holds, so the rest goes on path 1.
#[allow(clippy::type_complexity)]
fn sending_on_two_paths(
    plane: u8,
    t0: u64,
) -> (
    Box<Conn>,
    Box<Conn>,
    PathIdx,
    PathIdx,
    Vec<(Transmit, Vec<u8>)>,
) {
    let (mut client, mut server) = established();
    let p1 = add_second_path(&mut client, &mut server, plane);
    let p0 = client.paths().find(PATH_ID).unwrap();
    client.paths_mut().on_probe_ack(p1, MS, 20 * US);
    for _ in 0..16 {
        client.send_message(1300).unwrap();
    }
    let tx = drain_tx(&mut client, t0);
    (client, server, p0, p1, tx)
}

/// The packets of `tx` sent on path `p`, in order.
fn sent_on(tx: &[(Transmit, Vec<u8>)], p: PathIdx) -> Vec<&(Transmit, Vec<u8>)> {
    tx.iter().filter(|(t, _)| t.path == p).collect()
}

fn exchange(a: &mut Conn, b: &mut Conn, now: u64) {
    for _ in 0..1000 {
        let x = drain(a, now);
        let y = drain(b, now);
        if x.is_empty() && y.is_empty() {
            return;
        }
        feed_all(b, now, &x);
        feed_all(a, now, &y);
    }
    panic!("exchange did not settle");
}

fn messages(evs: &[Event]) -> Vec<(u64, u64, u32)> {
    evs.iter()
        .filter_map(|e| match *e {
            Event::Message {
                first_seq,
                last_seq,
                len,
                ..
            } => Some((first_seq, last_seq, len)),
            _ => None,
        })
        .collect()
}

/// The payload bytes and the receive window of the messages among `evs`, as the application
/// releases them once read.
fn read_size(evs: &[Event]) -> (u64, u64) {
    evs.iter().fold((0, 0), |(b, c), e| match *e {
        Event::Message { len, cost, .. } => (b + u64::from(len), c + cost),
        _ => (b, c),
    })
}

// ---------------------------------------------------------------------------------------------
// Handshake
// ---------------------------------------------------------------------------------------------

#[test]
fn handshake_packets_carry_session_isn_and_window() {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    assert_eq!(client.state(), State::Idle);
    assert_eq!((client.local_port(), client.peer_port()), (0, 0));
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    assert_eq!(client.local_port(), CLIENT_PORT);
    assert_eq!(client.peer_port(), SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    assert_eq!(client.state(), State::SynSent);
    assert_eq!(
        client.connect(0, SESSION, CLIENT_ISN, &[]),
        Err(OpenError::AlreadyStarted)
    );
    let syn = drain(&mut client, 0);
    let pkt = decode(&syn[0]).unwrap();
    assert_eq!(pkt.header.session_id, SESSION);
    assert_eq!(pkt.header.path_id, PATH_ID);
    let Body::Syn(hs) = pkt.body else {
        panic!("not a SYN: {pkt:?}")
    };
    assert_eq!(hs.initial_seq, CLIENT_ISN);
    assert_eq!(hs.rwnd, ConnConfig::default().rcvbuf);
    assert_eq!((hs.src_port, hs.dst_port), (CLIENT_PORT, SERVER_PORT));

    server.accept(0, &pkt, SERVER_ISN, &[]).unwrap();
    assert_eq!(server.state(), State::SynReceived);
    assert_eq!(server.session_id(), SESSION);
    let synack = drain(&mut server, 0);
    let p = decode(&synack[0]).unwrap();
    let Body::SynAck(h) = p.body else {
        panic!("not a SYN_ACK: {p:?}")
    };
    assert_eq!(h.initial_seq, SERVER_ISN);
    assert_eq!((h.src_port, h.dst_port), (SERVER_PORT, CLIENT_PORT));
    assert_eq!(p.header.ack, CLIENT_ISN);

    assert_eq!(feed(&mut client, 100 * US, &synack[0]), Input::Consumed);
    assert_eq!(client.state(), State::Established);
    let ack = drain(&mut client, 100 * US);
    assert_eq!(ack.len(), 1);
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    assert_eq!(header(&ack[0]).ack, SERVER_ISN);
    // The handshake gave the client an RTT sample.
    let srtt = client.paths().get(0).unwrap().srtt_ns().unwrap();
    assert_eq!(srtt, 100 * US);

    feed(&mut server, 150 * US, &ack[0]);
    assert_eq!(server.state(), State::Established);
    assert_eq!(client.snd_nxt(), CLIENT_ISN);
    assert_eq!(server.rcv_nxt(), CLIENT_ISN);
    assert_eq!(client.rcv_nxt(), SERVER_ISN);
}

#[test]
fn handshake_needs_a_path_and_a_syn() {
    let mut c = Box::new(Conn::new(ConnConfig::default()));
    assert_eq!(c.connect(0, 1, 2, &[]), Err(OpenError::NoPath));
    let mut s = new_conn(ConnConfig::default());
    let mut buf = [0u8; 64];
    let h = Header {
        session_id: 9,
        ..Header::default()
    };
    let n = mrc_proto::encode(&h, &Body::Fin, &mut buf).unwrap();
    let fin = decode(&buf[..n]).unwrap();
    assert_eq!(s.accept(0, &fin, 1, &[]), Err(OpenError::Invalid));
    // A SYN carrying the direction bit comes from a passive end: not a connection request.
    let mut buf = [0u8; 128];
    let h = Header {
        flags: Flags::PASSIVE,
        ..h
    };
    let hs = Handshake::new(1, 2, 3, 4, &[]);
    let n = mrc_proto::encode(&h, &Body::Syn(hs), &mut buf).unwrap();
    let syn = decode(&buf[..n]).unwrap();
    assert!(syn.header.flags.passive());
    assert_eq!(s.accept(0, &syn, 1, &[]), Err(OpenError::Invalid));
    assert_eq!(s.state(), State::Idle);
    assert!(!s.is_passive());
}

#[test]
fn isn_is_masked_below_seq_limit() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, u64::MAX, &[]).unwrap();
    assert!(c.snd_nxt() < mrc_conn::SEQ_LIMIT);
}

#[test]
fn syn_backoff_then_timeout() {
    let cfg = ConnConfig::default();
    let mut c = new_conn(cfg);
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let mut sent_at = vec![];
    let mut now = 0;
    loop {
        for p in drain(&mut c, now) {
            assert_eq!(kind(&p), PacketType::Syn);
            sent_at.push(now);
        }
        let Some(t) = c.next_timeout(now) else { break };
        assert!(t >= now);
        now = t;
        c.on_timeout(now);
    }
    assert_eq!(sent_at.len(), 1 + usize::from(cfg.syn_retries));
    for (i, w) in sent_at.windows(2).enumerate() {
        assert_eq!(w[1] - w[0], cfg.syn_rto_ns << i, "interval {i}");
    }
    assert_eq!(c.state(), State::Closed(Some(ConnError::TimedOut)));
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(Some(ConnError::TimedOut))]
    );
}

#[test]
fn rst_answer_to_syn_is_refused() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut c, 0);
    let mut buf = [0u8; MIN_TX_BUF];
    let n = mrc_conn::reply_rst(&header(&syn[0]), &mut buf).unwrap();
    assert_eq!(kind(&buf[..n]), PacketType::Rst);
    // The SYN came from an active end, so the answer is marked as from a passive one.
    assert!(!header(&syn[0]).flags.passive());
    assert!(header(&buf[..n]).flags.passive());
    // Never answer an RST with an RST.
    assert_eq!(
        mrc_conn::reply_rst(&header(&buf[..n]), &mut [0u8; 64]),
        None
    );
    feed(&mut c, 10 * US, &buf[..n]);
    assert_eq!(c.state(), State::Closed(Some(ConnError::Refused)));
    assert_eq!(
        c.send_message(1),
        Err(SendError::Failed(ConnError::Refused))
    );
}

/// The RETRY a listener under pressure answers `syn` with.
fn retry_for(syn: &[u8], token: u64) -> Vec<u8> {
    let mut buf = [0u8; MIN_TX_BUF];
    let n = mrc_conn::reply_retry(&header(syn), token, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// A RETRY with the given header fields, as a forger could make it.
fn forged_retry(session_id: u64, token: u64, echo: u64) -> Vec<u8> {
    let h = Header {
        flags: Flags::new(PacketType::Retry).with(Flags::PASSIVE),
        session_id,
        path_id: PATH_ID,
        seq: token,
        ack: echo,
        payload_len: 0,
    };
    let mut buf = vec![0u8; HEADER_LEN];
    let n = mrc_proto::encode(&h, &Body::Retry, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn retry_is_smaller_than_any_syn_and_echoes_it() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut c, 0);
    let retry = retry_for(&syn[0], 0xfeed);
    assert_eq!(retry.len(), HEADER_LEN);
    assert!(retry.len() < syn[0].len());
    let h = header(&retry);
    assert_eq!(h.packet_type(), Some(PacketType::Retry));
    assert!(h.flags.passive());
    assert_eq!(h.session_id, SESSION);
    assert_eq!(h.path_id, header(&syn[0]).path_id);
    assert_eq!((h.seq, h.ack), (0xfeed, CLIENT_ISN));
    // Only a SYN from a connecting end gets one, with a token; nothing answers a RETRY.
    let mut buf = [0u8; MIN_TX_BUF];
    assert_eq!(mrc_conn::reply_retry(&header(&syn[0]), 0, &mut buf), None);
    assert_eq!(mrc_conn::reply_retry(&h, 1, &mut buf), None);
    assert_eq!(mrc_conn::reply_rst(&h, &mut buf), None);
}

#[test]
fn retry_makes_the_syn_come_again_at_once_with_the_token() {
    let eps = endpoints(2);
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &eps).unwrap();
    let syn = drain(&mut client, 0);
    assert_eq!(header(&syn[0]).ack, 0, "no token yet");
    let timer = client.next_timeout(0);
    assert_eq!(
        feed(&mut client, 10 * US, &retry_for(&syn[0], 0xfeed)),
        Input::Consumed
    );
    assert_eq!(client.stats().retries, 1);
    // At once, without waiting for the SYN's timer, which runs on as it was.
    let syn2 = drain(&mut client, 10 * US);
    assert_eq!(syn2.len(), 1);
    assert_eq!(client.next_timeout(10 * US), timer);
    let (first, again) = (decode(&syn[0]).unwrap(), decode(&syn2[0]).unwrap());
    assert_eq!(again.header.ack, 0xfeed);
    assert_eq!(
        (
            again.header.session_id,
            again.header.seq,
            again.header.path_id
        ),
        (
            first.header.session_id,
            first.header.seq,
            first.header.path_id
        )
    );
    assert_eq!(
        again.body, first.body,
        "same ISN, window, ports and endpoints"
    );
    // A lost SYN is retransmitted with the token too.
    let t = client.next_timeout(10 * US).unwrap();
    client.on_timeout(t);
    let syn3 = drain(&mut client, t);
    assert_eq!(header(&syn3[0]).ack, 0xfeed);
    // The listener accepts it as it would any SYN, and the handshake completes.
    server
        .accept(t, &decode(&syn3[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    exchange(&mut client, &mut server, t);
    assert_eq!(client.state(), State::Established);
    assert_eq!(server.state(), State::Established);
}

#[test]
fn retry_that_does_not_answer_this_syn_is_dropped() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut c, 0);
    // Another initial sequence number, no token, the wrong direction or session.
    for bad in [
        forged_retry(SESSION, 7, CLIENT_ISN + 1),
        forged_retry(SESSION, 7, 0),
        forged_retry(SESSION, 0, CLIENT_ISN),
    ] {
        assert_eq!(feed(&mut c, US, &bad), Input::Dropped(DropReason::BadRetry));
    }
    let mut own = forged_retry(SESSION, 7, CLIENT_ISN);
    own[6..8].copy_from_slice(&PacketType::Retry.to_wire().to_be_bytes());
    mrc_proto::seal(&mut own).unwrap();
    assert_eq!(feed(&mut c, US, &own), Input::Dropped(DropReason::Invalid));
    assert_eq!(
        feed(&mut c, US, &forged_retry(SESSION ^ 1, 7, CLIENT_ISN)),
        Input::Dropped(DropReason::WrongSession)
    );
    assert!(drain(&mut c, US).is_empty(), "no SYN for a forged RETRY");
    assert_eq!(c.stats().retries, 0);
    assert_eq!(c.state(), State::SynSent);
    // The genuine one still works.
    assert_eq!(feed(&mut c, US, &retry_for(&syn[0], 9)), Input::Consumed);
    assert_eq!(header(&drain(&mut c, US)[0]).ack, 9);
}

#[test]
fn at_most_max_retries_are_taken_per_connect() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut c, 0);
    for i in 0..u64::from(mrc_conn::MAX_RETRIES) {
        assert_eq!(
            feed(&mut c, US, &retry_for(&syn[0], 100 + i)),
            Input::Consumed
        );
        assert_eq!(header(&drain(&mut c, US)[0]).ack, 100 + i);
    }
    assert_eq!(
        feed(&mut c, US, &retry_for(&syn[0], 999)),
        Input::Dropped(DropReason::BadRetry)
    );
    assert!(drain(&mut c, US).is_empty());
    assert_eq!(c.stats().retries, u64::from(mrc_conn::MAX_RETRIES));
    // The handshake's deadline is the one of a SYN nobody answered.
    let mut now = US;
    while let Some(t) = c.next_timeout(now) {
        now = t;
        c.on_timeout(now);
        for p in drain(&mut c, now) {
            assert_eq!(header(&p).ack, 100 + u64::from(mrc_conn::MAX_RETRIES) - 1);
        }
    }
    assert_eq!(c.state(), State::Closed(Some(ConnError::TimedOut)));
    // A new connect starts without a token and with the RETRYs it may take.
    let mut c = new_conn(ConnConfig::default());
    c.connect(now, SESSION, CLIENT_ISN, &[]).unwrap();
    assert_eq!(header(&drain(&mut c, now)[0]).ack, 0);
}

#[test]
fn retry_after_the_handshake_is_dropped() {
    let (mut client, mut server) = established();
    assert_eq!(
        feed(&mut client, MS, &forged_retry(SESSION, 7, CLIENT_ISN)),
        Input::Dropped(DropReason::BadRetry)
    );
    assert_eq!(client.state(), State::Established);
    // The accepting end never takes one: it is its own direction.
    assert_eq!(
        feed(&mut server, MS, &forged_retry(SESSION, 7, CLIENT_ISN)),
        Input::Dropped(DropReason::Invalid)
    );
}

#[test]
fn lost_synack_is_resent_on_duplicate_syn() {
    let (mut client, mut server) = syn_received();
    let _lost = drain(&mut server, 0);
    // The client's SYN timer fires and the SYN comes again.
    let t = client.next_timeout(0).unwrap();
    client.on_timeout(t);
    let syn2 = drain(&mut client, t);
    assert_eq!(kind(&syn2[0]), PacketType::Syn);
    feed(&mut server, t, &syn2[0]);
    let synack = drain(&mut server, t);
    assert_eq!(kind(&synack[0]), PacketType::SynAck);
    feed(&mut client, t, &synack[0]);
    assert_eq!(client.state(), State::Established);
}

#[test]
fn lost_handshake_ack_is_replaced_by_data() {
    let (mut client, mut server) = syn_received();
    let synack = drain(&mut server, 0);
    feed(&mut client, 0, &synack[0]);
    let _lost_ack = drain(&mut client, 0);
    client.send_message(10).unwrap();
    let data = drain(&mut client, 0);
    assert_eq!(kind(&data[0]), PacketType::Data);
    assert_eq!(
        feed(&mut server, 0, &data[0]),
        Input::Store { seq: CLIENT_ISN }
    );
    assert_eq!(server.state(), State::Established);
    let evs = events(&mut server);
    assert_eq!(evs[0], Event::Connected);
    assert_eq!(messages(&evs), vec![(CLIENT_ISN, CLIENT_ISN, 10)]);
}

#[test]
fn lost_handshake_ack_is_resent_on_duplicate_synack() {
    let mut server = new_conn(ConnConfig::default());
    let mut client2 = new_conn(ConnConfig::default());
    client2.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client2, 0);
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    let synack = drain(&mut server, 0);
    feed(&mut client2, 0, &synack[0]);
    let _lost = drain(&mut client2, 0);
    let t = server.next_timeout(0).unwrap();
    server.on_timeout(t);
    let synack2 = drain(&mut server, t);
    assert_eq!(kind(&synack2[0]), PacketType::SynAck);
    feed(&mut client2, t, &synack2[0]);
    let ack = drain(&mut client2, t);
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    feed(&mut server, t, &ack[0]);
    assert_eq!(server.state(), State::Established);
}

// ---------------------------------------------------------------------------------------------
// Anti-amplification of the accepting end
// ---------------------------------------------------------------------------------------------

/// `n` distinct routable IPv4 endpoints.
fn endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| Endpoint::v4([10, 9, i as u8, 1], 6000, false))
        .collect()
}

/// The kernel's handshake settings: nine SYN_ACKs before the handshake gives up.
fn kernel_handshake() -> ConnConfig {
    ConnConfig {
        syn_retries: 8,
        ..ConnConfig::default()
    }
}

/// A SYN announcing `syn_eps` endpoints that nobody repeats or answers, accepted by a server
/// announcing `server_eps`: runs the server until its handshake fails; returns the bytes of the
/// SYN, the bytes of each packet the server sent, and the server.
fn unanswered_syn(syn_eps: usize, server_eps: usize) -> (usize, Vec<usize>, Box<Conn>) {
    let mut client = new_conn(kernel_handshake());
    let mut server = new_conn(kernel_handshake());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client
        .connect(0, SESSION, CLIENT_ISN, &endpoints(syn_eps))
        .unwrap();
    let syn = drain(&mut client, 0).remove(0);
    server
        .accept(
            0,
            &decode(&syn).unwrap(),
            SERVER_ISN,
            &endpoints(server_eps),
        )
        .unwrap();
    let mut sent = vec![];
    let mut now = 0;
    loop {
        for p in drain(&mut server, now) {
            assert_eq!(kind(&p), PacketType::SynAck);
            sent.push(p.len());
        }
        let Some(t) = server.next_timeout(now) else {
            break;
        };
        now = t;
        server.on_timeout(now);
    }
    (syn.len(), sent, server)
}

#[test]
fn unanswered_syn_gets_at_most_three_times_its_bytes() {
    // (endpoints in the SYN, endpoints in the SYN_ACK, SYN_ACKs expected)
    for (syn_eps, server_eps, synacks) in [
        // As large as the SYN: three of the nine.
        (0, 0, 3),
        // Larger: as many as fit.
        (0, 2, 1),
        (1, 4, 1),
        // More than three times larger: none.
        (1, 16, 0),
        // Much smaller: all nine fit.
        (16, 1, 9),
    ] {
        let (syn, sent, server) = unanswered_syn(syn_eps, server_eps);
        let out: usize = sent.iter().sum();
        assert!(
            out <= 3 * syn,
            "{syn_eps}/{server_eps} endpoints: {out} bytes sent for a {syn}-byte SYN"
        );
        assert_eq!(sent.len(), synacks, "{syn_eps}/{server_eps} endpoints");
        // The others were withheld and counted, and the handshake failed as an unanswered
        // one does.
        assert_eq!(server.stats().amp_limited, 9 - synacks as u64);
        assert_eq!(server.state(), State::Closed(Some(ConnError::TimedOut)));
    }
}

/// Runs a handshake in which the server's first `lost` SYN_ACKs are lost, and the client's
/// SYNs whose indices (0 the first) `lost_syns` names, every other packet arriving after `owd`
/// ns; checks after every step that the server has sent at most three times the bytes of the
/// SYNs it received. Returns the time both ends were established.
fn lossy_handshake(server_eps: usize, lost: usize, lost_syns: &[usize], owd: u64) -> u64 {
    let mut client = new_conn(kernel_handshake());
    let mut server = new_conn(kernel_handshake());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    // In flight: (arrival, to the server, bytes).
    let mut net: Vec<(u64, bool, Vec<u8>)> = vec![];
    let (mut syn_in, mut out, mut dropped, mut syns) = (0, 0, 0, 0);
    let mut now = 0;
    for _ in 0..10_000 {
        for p in drain(&mut client, now) {
            if kind(&p) == PacketType::Syn {
                syns += 1;
                if lost_syns.contains(&(syns - 1)) {
                    continue;
                }
            }
            net.push((now + owd, true, p));
        }
        for p in drain(&mut server, now) {
            if server.state() == State::SynReceived || server.state() == State::Idle {
                out += p.len();
            }
            if kind(&p) == PacketType::SynAck && dropped < lost {
                dropped += 1;
                continue;
            }
            net.push((now + owd, false, p));
        }
        assert!(
            out <= 3 * syn_in,
            "server sent {out} bytes for {syn_in} bytes of SYNs at {now}"
        );
        if client.state() == State::Established && server.state() == State::Established {
            assert_eq!(dropped, lost);
            return now;
        }
        let next_pkt = net.iter().map(|(t, _, _)| *t).min();
        let timers = [client.next_timeout(now), server.next_timeout(now)];
        now = timers.into_iter().flatten().chain(next_pkt).min().unwrap();
        net.sort_by_key(|(t, _, _)| *t);
        while net.first().is_some_and(|(t, _, _)| *t <= now) {
            let (_, to_server, p) = net.remove(0);
            if !to_server {
                feed(&mut client, now, &p);
            } else if server.state() == State::Idle {
                server
                    .accept(
                        now,
                        &decode(&p).unwrap(),
                        SERVER_ISN,
                        &endpoints(server_eps),
                    )
                    .unwrap();
                syn_in += p.len();
            } else {
                if kind(&p) == PacketType::Syn && server.state() == State::SynReceived {
                    syn_in += p.len();
                }
                feed(&mut server, now, &p);
            }
        }
        client.on_timeout(now);
        server.on_timeout(now);
    }
    panic!("the handshake did not complete");
}

#[test]
fn lost_synacks_are_sent_again_as_repeated_syns_pay_for_them() {
    // SYN_ACKs larger than the SYN (two endpoints): the first SYN pays for one. The first
    // three are lost, and so are the client's second and third SYNs: the server's own
    // retransmissions are held back until the fourth SYN (at 700 ms) pays for more, and the
    // one that gets through answers the sixth (at 3.1 s).
    let t = lossy_handshake(2, 3, &[1, 2], 10 * US);
    assert_eq!(t, 3_100 * MS + 30 * US);
    // Only SYN_ACKs lost: each repeated SYN brings one at once.
    assert_eq!(lossy_handshake(2, 2, &[], 10 * US), 300 * MS + 30 * US);
    // No loss: nothing is held back.
    assert_eq!(lossy_handshake(2, 0, &[], 10 * US), 30 * US);
}

#[test]
fn a_synack_much_larger_than_the_syn_waits_for_repeated_syns() {
    // 381 bytes for 61: the SYN_ACK leaves once three SYNs (the first at 0, the second at
    // 100 ms, the third at 300 ms) have paid for it.
    let t = lossy_handshake(16, 0, &[], 10 * US);
    assert_eq!(t, 300 * MS + 30 * US);
}

#[test]
fn challenges_in_syn_received_stay_within_the_limit() {
    // Forged RSTs within the window ask for the SYN_ACK again as a challenge, four per 100 ms:
    // from a forged SYN, no more than three SYN_ACKs in all.
    let (client, mut server) = syn_received();
    drop(client);
    let mut synacks = drain(&mut server, 0).len();
    for i in 1..=50 {
        let now = i * 30 * MS;
        let rst = forge(false, PATH_ID, CLIENT_ISN + 1, 0, &Body::Rst);
        feed(&mut server, now, &rst);
        synacks += drain(&mut server, now).len();
    }
    assert_eq!(server.state(), State::SynReceived);
    assert_eq!(synacks, 3);
    assert!(server.stats().challenge_acks > 3);
    assert!(server.stats().amp_limited > 0);
}

#[test]
fn wrong_session_is_dropped() {
    let (mut client, _server) = established();
    let mut other = new_conn(ConnConfig::default());
    other.connect(0, SESSION + 1, 1, &[]).unwrap();
    let syn = drain(&mut other, 0);
    assert_eq!(
        feed(&mut client, 0, &syn[0]),
        Input::Dropped(DropReason::WrongSession)
    );
}

/// Re-encodes a SYN or SYN_ACK with other ports, everything else unchanged.
fn with_ports(bytes: &[u8], src_port: u16, dst_port: u16) -> Vec<u8> {
    let pkt = decode(bytes).unwrap();
    let hs = match pkt.body {
        Body::Syn(hs) | Body::SynAck(hs) => hs,
        _ => panic!("not a handshake: {pkt:?}"),
    };
    let eps: Vec<Endpoint> = hs.endpoints().collect();
    let hs = Handshake::new(hs.initial_seq, hs.rwnd, src_port, dst_port, &eps);
    let body = match pkt.body {
        Body::Syn(_) => Body::Syn(hs),
        _ => Body::SynAck(hs),
    };
    let mut buf = vec![0u8; MIN_TX_BUF];
    let n = mrc_proto::encode(&pkt.header, &body, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn accept_adopts_ports_from_syn() {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    // Whatever the glue set before, the SYN decides.
    server.set_ports(1, 2);
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    assert_eq!(server.local_port(), SERVER_PORT);
    assert_eq!(server.peer_port(), CLIENT_PORT);
    let synack = drain(&mut server, 0);
    let Body::SynAck(hs) = decode(&synack[0]).unwrap().body else {
        panic!("not a SYN_ACK")
    };
    assert_eq!((hs.src_port, hs.dst_port), (SERVER_PORT, CLIENT_PORT));
    assert_eq!(feed(&mut client, 0, &synack[0]), Input::Consumed);
    assert_eq!(client.state(), State::Established);
    // The client's ports are unchanged by the handshake.
    assert_eq!(client.local_port(), CLIENT_PORT);
    assert_eq!(client.peer_port(), SERVER_PORT);
}

#[test]
fn synack_with_wrong_ports_is_dropped() {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    let synack = drain(&mut server, 0);
    let wrong = [
        (SERVER_PORT + 1, CLIENT_PORT),
        (SERVER_PORT, CLIENT_PORT + 1),
        (CLIENT_PORT, SERVER_PORT),
        (0, 0),
    ];
    for (src, dst) in wrong {
        let bad = with_ports(&synack[0], src, dst);
        assert_eq!(
            feed(&mut client, 10 * US, &bad),
            Input::Dropped(DropReason::Invalid),
            "ports {src} -> {dst}"
        );
        assert_eq!(client.state(), State::SynSent);
        assert!(client.peer_endpoints().next().is_none());
    }
    assert!(drain(&mut client, 10 * US).is_empty());
    assert!(events(&mut client).is_empty());
    // The right SYN_ACK still completes the handshake.
    assert_eq!(feed(&mut client, 20 * US, &synack[0]), Input::Consumed);
    assert_eq!(client.state(), State::Established);
    let ack = drain(&mut client, 20 * US);
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    // A repeated SYN_ACK with the wrong ports does not draw an ACK; with the right ones it does.
    let bad = with_ports(&synack[0], SERVER_PORT, CLIENT_PORT + 1);
    assert_eq!(
        feed(&mut client, 30 * US, &bad),
        Input::Dropped(DropReason::Invalid)
    );
    assert!(drain(&mut client, 30 * US).is_empty());
    assert_eq!(feed(&mut client, 40 * US, &synack[0]), Input::Consumed);
    let re = drain(&mut client, 40 * US);
    assert_eq!(re.len(), 1);
    assert_eq!(kind(&re[0]), PacketType::Ack);
}

#[test]
fn repeated_syn_with_wrong_ports_is_dropped() {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    let _lost = drain(&mut server, 0);
    let other = with_ports(&syn[0], CLIENT_PORT + 1, SERVER_PORT);
    assert_eq!(
        feed(&mut server, 10 * US, &other),
        Input::Dropped(DropReason::Invalid)
    );
    assert!(drain(&mut server, 10 * US).is_empty());
    assert_eq!(feed(&mut server, 20 * US, &syn[0]), Input::Consumed);
    let synack = drain(&mut server, 20 * US);
    assert_eq!(kind(&synack[0]), PacketType::SynAck);
}

// ---------------------------------------------------------------------------------------------
// Data, acknowledgements, delayed ACKs
// ---------------------------------------------------------------------------------------------

#[test]
fn message_is_segmented_and_reassembled() {
    let (mut client, mut server) = established();
    let id = client.send_message(3000).unwrap();
    assert_eq!(id, 0);
    let tx = drain_tx(&mut client, MS);
    assert_eq!(tx.len(), 3);
    let lens: Vec<u32> = tx.iter().map(|(t, _)| t.data.unwrap().len).collect();
    assert_eq!(lens, vec![MSS as u32, MSS as u32, (3000 - 2 * MSS) as u32]);
    let offsets: Vec<u32> = tx.iter().map(|(t, _)| t.data.unwrap().offset).collect();
    assert_eq!(offsets, vec![0, MSS as u32, 2 * MSS as u32]);
    let flags: Vec<Flags> = tx.iter().map(|(_, b)| header(b).flags).collect();
    assert!(flags[0].first() && !flags[0].last());
    assert!(!flags[1].first() && !flags[1].last());
    assert!(!flags[2].first() && flags[2].last());
    for (i, (_, b)) in tx.iter().enumerate() {
        assert_eq!(header(b).seq, CLIENT_ISN + i as u64);
        assert_eq!(header(b).path_id, PATH_ID);
        assert_eq!(
            feed(&mut server, MS, b),
            Input::Store {
                seq: CLIENT_ISN + i as u64
            }
        );
    }
    assert_eq!(
        messages(&events(&mut server)),
        vec![(CLIENT_ISN, CLIENT_ISN + 2, 3000)]
    );
    // The second packet made an ACK due; it covers all three.
    let acks = drain(&mut server, MS);
    assert_eq!(acks.len(), 1);
    assert_eq!(header(&acks[0]).ack, CLIENT_ISN + 3);
    feed(&mut client, MS, &acks[0]);
    assert_eq!(client.acked_msgs(), 1);
    assert!(client.all_acked());
    assert_eq!(client.bytes_unacked(), 0);
    assert_eq!(server.stats().msgs_delivered, 1);
}

/// Released with part of a message received, the connection resets, as TCP does when
/// closed with data unread; with nothing held it closes with a FIN.
#[test]
fn release_with_part_of_a_message_resets() {
    let (mut client, mut server) = established();
    client.send_message(3000).unwrap();
    let tx = drain(&mut client, MS);
    assert_eq!(tx.len(), 3);
    feed(&mut server, MS, &tx[0]);
    feed(&mut server, MS, &tx[1]);
    assert!(messages(&events(&mut server)).is_empty());
    server.release(2 * MS, false);
    assert_eq!(server.state(), State::Closed(None));
    let out = drain(&mut server, 2 * MS);
    assert!(out.iter().any(|p| kind(p) == PacketType::Rst), "RST sent");
    feed_all(&mut client, 2 * MS, &out);
    assert_eq!(client.state(), State::Closed(Some(ConnError::Reset)));

    // The whole message arrived and was read: FIN.
    let (mut client, mut server) = established();
    client.send_message(3000).unwrap();
    let tx = drain(&mut client, MS);
    feed_all(&mut server, MS, &tx);
    let evs = events(&mut server);
    assert_eq!(messages(&evs).len(), 1);
    let (bytes, cost) = read_size(&evs);
    server.release_recv(bytes, cost);
    server.release(2 * MS, false);
    assert_eq!(server.state(), State::FinWait);
    let out = drain(&mut server, 2 * MS);
    assert!(out.iter().any(|p| kind(p) == PacketType::Fin));
    assert!(out.iter().all(|p| kind(p) != PacketType::Rst));
    // Delivered but unread (the socket's queue): RST.
    let (mut client, mut server) = established();
    client.send_message(3000).unwrap();
    feed_all(&mut server, MS, &drain(&mut client, MS));
    server.release(2 * MS, true);
    assert!(drain(&mut server, 2 * MS)
        .iter()
        .any(|p| kind(p) == PacketType::Rst));
}

#[test]
fn delayed_ack_every_second_packet() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 4, MS);
    feed(&mut server, MS, &data[0]);
    assert!(
        drain(&mut server, MS).is_empty(),
        "first packet: ACK delayed"
    );
    feed(&mut server, MS, &data[1]);
    assert_eq!(drain(&mut server, MS).len(), 1, "second packet: ACK now");
    feed(&mut server, MS, &data[2]);
    assert!(drain(&mut server, MS).is_empty());
    // The delay bounds the wait.
    let t = server.next_timeout(MS).unwrap();
    assert_eq!(t, MS + ConnConfig::default().delack_ns);
    server.on_timeout(t - 1);
    assert!(drain(&mut server, t - 1).is_empty());
    server.on_timeout(t);
    let ack = drain(&mut server, t);
    assert_eq!(ack.len(), 1);
    assert_eq!(header(&ack[0]).ack, CLIENT_ISN + 3);
}

/// The ACK of a lone packet waits for the delayed-ACK timer and says so: the sender takes
/// that wait off its RTT sample, but a claimed delay never takes a sample below the path's
/// minimum RTT.
#[test]
fn ack_delay_is_reported_and_taken_off_rtt_samples() {
    let delack = ConnConfig::default().delack_ns;
    let sack_delay = |ack: &[u8]| match decode(ack).unwrap().body {
        Body::Ack(s) => s.delay_ns,
        _ => panic!("not an ACK"),
    };
    // with_delay(ack, d): the ACK with its delay field set to d.
    let with_delay = |ack: &[u8], d: u64| {
        let pkt = decode(ack).unwrap();
        let Body::Ack(s) = pkt.body else {
            panic!("not an ACK")
        };
        let mut buf = [0u8; 512];
        let n = mrc_proto::encode(&pkt.header, &Body::Ack(s.with_delay(d)), &mut buf).unwrap();
        buf[..n].to_vec()
    };
    // One round: a message sent at `now` arrives 100 us later; its ACK leaves at the
    // delayed-ACK timer and arrives 100 us after that, 1.2 ms in all, 0.2 ms of it on
    // the wire. `lie` replaces the delay the ACK carries.
    let round = |client: &mut Conn, server: &mut Conn, now: u64, lie: Option<u64>| {
        client.send_message(100).unwrap();
        let data = drain(client, now);
        assert_eq!(data.len(), 1);
        feed(server, now + 100 * US, &data[0]);
        assert!(drain(server, now + 100 * US).is_empty(), "ACK delayed");
        let t = server.next_timeout(now + 100 * US).unwrap();
        server.on_timeout(t);
        let acks = drain(server, t);
        assert_eq!(acks.len(), 1);
        assert_eq!(u64::from(sack_delay(&acks[0])), delack);
        let ack = lie.map_or(acks[0].clone(), |d| with_delay(&acks[0], d));
        assert_eq!(feed(client, t + 100 * US, &ack), Input::Consumed);
    };
    let srtt = |c: &Conn| c.paths().get(0).unwrap().srtt_ns().unwrap();
    let (mut client, mut server) = established();
    let min = client.paths().get(0).unwrap().min_rtt_ns().unwrap();
    assert!(min < 200 * US, "the handshake's RTT is the minimum");
    let mut now = MS;
    for _ in 0..40 {
        round(&mut client, &mut server, now, None);
        now += 5 * MS;
    }
    // 200 us of wire and no wait, rather than 1.2 ms.
    assert!(
        srtt(&client).abs_diff(200 * US) < 10 * US,
        "srtt {}",
        srtt(&client)
    );
    // A peer that claims to have held its ACKs for a second times them as if it had not
    // held them at all.
    for _ in 0..40 {
        round(&mut client, &mut server, now, Some(1_000_000_000));
        now += 5 * MS;
    }
    assert!(
        srtt(&client).abs_diff(delack + 200 * US) < 10 * US,
        "srtt {}",
        srtt(&client)
    );
    assert_eq!(client.paths().get(0).unwrap().min_rtt_ns(), Some(min));
}

/// A packet handled later than it arrived (it waited behind others, or in the backlog of a
/// socket a task held) is timed from its arrival: the wait is in this host, not on the path,
/// and would otherwise read as a queue there. At the receiver the wait counts in the delay
/// its ACK reports; at the sender it counts in no RTT sample.
#[test]
fn packets_are_timed_from_their_arrival_not_from_when_they_are_handled() {
    let delack = ConnConfig::default().delack_ns;
    let feed_at = |c: &mut Conn, now: u64, at: u64, bytes: &[u8]| {
        let pkt = decode(bytes).unwrap();
        c.handle_packet_at(now, at, &pkt, false)
    };
    // `data`, arrived at `at` and handled at `now`, is stored, and its ACK goes out when the
    // delayed-ACK timer fires: returns then, the ACK, and the delay the ACK reports.
    let stored_then_acked = |server: &mut Conn, now: u64, at: u64, data: &[u8]| {
        assert_eq!(
            feed_at(server, now, at, data),
            Input::Store {
                seq: header(data).seq
            }
        );
        let t = server.next_timeout(now).unwrap();
        server.on_timeout(t);
        let mut acks = drain(server, t);
        assert_eq!(acks.len(), 1);
        let ack = acks.remove(0);
        let Body::Ack(sack) = decode(&ack).unwrap().body else {
            panic!("not an ACK")
        };
        let delay = u64::from(sack.delay_ns);
        (t, ack, delay)
    };
    let srtt = |c: &Conn| c.paths().get(0).unwrap().srtt_ns().unwrap();
    let (mut client, mut server) = established();
    let mut now = MS;
    for _ in 0..40 {
        // A message sent at `now` arrives 100 us later and is handled 300 us after that.
        client.send_message(100).unwrap();
        let data = drain(&mut client, now);
        assert_eq!(data.len(), 1);
        let arrived = now + 100 * US;
        let (t, ack, delay) = stored_then_acked(&mut server, arrived + 300 * US, arrived, &data[0]);
        // Held from the data's arrival.
        assert_eq!(delay, t - arrived);
        assert!(t - arrived >= delack);
        // The ACK arrives 100 us after it left and is handled 500 us after that.
        let back = t + 100 * US;
        assert_eq!(
            feed_at(&mut client, back + 500 * US, back, &ack),
            Input::Consumed
        );
        now += 5 * MS;
    }
    // 200 us of wire; neither host's wait.
    assert!(
        srtt(&client).abs_diff(200 * US) < 10 * US,
        "srtt {}",
        srtt(&client)
    );
    // An arrival after `now` is taken for `now`: the ACK's delay runs from when the data
    // was handled, not from 50 ms on (which would report none).
    client.send_message(100).unwrap();
    let data = drain(&mut client, now);
    let handled = now + 100 * US;
    let (t, _, delay) = stored_then_acked(&mut server, handled, now + 50 * MS, &data[0]);
    assert_eq!(delay, t - handled);
}

/// A reply sent before the delayed ACK is due carries the acknowledgement of the request,
/// and no ACK packet goes out on its own.
#[test]
fn reply_carries_the_delayed_ack() {
    let (mut client, mut server) = established();
    // The handshake's third packet is an ACK.
    let handshake_acks = client.stats().acks_sent;
    let mut now = MS;
    for round in 1..=3u64 {
        let req = send_small(&mut client, 1, now);
        assert_eq!(kind(&req[0]), PacketType::Data);
        feed(&mut server, now, &req[0]);
        assert!(
            drain(&mut server, now).is_empty(),
            "round {round}: ACK delayed"
        );
        let reply = send_small(&mut server, 1, now);
        assert_eq!(kind(&reply[0]), PacketType::Data);
        assert_eq!(header(&reply[0]).ack, CLIENT_ISN + round);
        feed(&mut client, now, &reply[0]);
        assert_eq!(
            client.bytes_unacked(),
            0,
            "round {round}: the reply acknowledged the request"
        );
        now += 50 * US;
    }
    assert_eq!(server.stats().acks_sent, 0);
    assert_eq!(server.stats().acks_carried, 3);
    // The client's requests carried the acknowledgements of replies 1 and 2; nothing carries
    // that of reply 3, so the delayed ACK goes out when it is due.
    assert_eq!(client.stats().acks_carried, 2);
    let t = client.next_timeout(now).unwrap();
    client.on_timeout(t);
    let ack = drain(&mut client, t);
    assert_eq!(ack.len(), 1);
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    assert_eq!(header(&ack[0]).ack, SERVER_ISN + 3);
    assert_eq!(client.stats().acks_sent, handshake_acks + 1);
}

/// A reply that the application sends 500 us after the request, as a small request/response
/// exchange does on a loaded host, still carries the acknowledgement: the ACK is delayed by
/// up to 1 ms, so no ACK packet goes out on its own.
#[test]
fn reply_after_half_a_millisecond_carries_the_ack() {
    let (mut client, mut server) = established();
    let now = MS;
    let req = send_small(&mut client, 1, now);
    feed(&mut server, now, &req[0]);
    let later = now + 500 * US;
    if let Some(t) = server.next_timeout(now) {
        assert!(
            t > later,
            "the server's timer is due at {t}, before {later}"
        );
    }
    server.on_timeout(later);
    assert!(drain(&mut server, later).is_empty(), "ACK delayed");
    let reply = send_small(&mut server, 1, later);
    assert_eq!(kind(&reply[0]), PacketType::Data);
    assert_eq!(header(&reply[0]).ack, CLIENT_ISN + 1);
    assert_eq!(server.stats().acks_sent, 0);
}

/// Replies carry no window edge, so once the edge the requester knows leaves it less than
/// half a buffer of room, ACKs go out again and move it.
#[test]
fn replies_do_not_withhold_the_window_edge() {
    let small = ConnConfig {
        rcvbuf: 10_240,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(ConnConfig::default(), small);
    let mut now = MS;
    let mut ack_rounds = Vec::new();
    let mut least_room = u32::MAX;
    for round in 1..=12 {
        client.send_message(1024).unwrap();
        let req = drain(&mut client, now);
        assert_eq!(
            req.len(),
            1,
            "round {round}: one request packet, room {}",
            client.peer_rwnd()
        );
        feed(&mut server, now, &req[0]);
        let evs = events(&mut server);
        assert_eq!(messages(&evs).len(), 1);
        let (bytes, cost) = read_size(&evs);
        server.release_recv(bytes, cost);
        server.send_message(100).unwrap();
        let out = drain(&mut server, now);
        if out.iter().any(|p| kind(p) == PacketType::Ack) {
            ack_rounds.push(round);
        }
        assert_eq!(
            out.iter().filter(|p| kind(p) == PacketType::Data).count(),
            1
        );
        feed_all(&mut client, now, &out);
        least_room = least_room.min(client.peer_rwnd());
        now += 50 * US;
    }
    // After 6144 bytes the known edge leaves 4096 (< 5120): the ACK of round 6 is kept
    // and goes out with the next request's (every second packet), edge and all.
    assert_eq!(ack_rounds, vec![7]);
    assert_eq!(least_room, 4096);
    assert_eq!(server.stats().acks_sent, 1);
}

#[test]
fn ce_mark_is_echoed_at_once_on_its_path() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 3, MS);
    // An unmarked first packet waits for the delayed ACK; a marked one is acknowledged at
    // once, with ECE, on the path it came by.
    feed(&mut server, MS, &data[0]);
    assert!(drain(&mut server, MS).is_empty());
    let pkt = decode(&data[1]).unwrap();
    assert!(matches!(
        server.handle_packet_ecn(MS, &pkt, true),
        Input::Store { .. }
    ));
    let ack = drain(&mut server, MS);
    assert_eq!(ack.len(), 1);
    let h = header(&ack[0]);
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    assert!(h.flags.ece(), "ACK of a CE packet carries ECE");
    assert_eq!(h.path_id, PATH_ID);
    assert_eq!(h.ack, CLIENT_ISN + 2);
    assert_eq!(server.stats().ce_received, 1);
    // The echo is not sticky: the next ACK is clean.
    feed(&mut server, 2 * MS, &data[2]);
    let t = server.next_timeout(2 * MS).unwrap();
    server.on_timeout(t);
    let ack2 = drain(&mut server, t);
    assert_eq!(ack2.len(), 1);
    assert!(!header(&ack2[0]).flags.ece());
    // A CE mark on a packet that is not new data (a duplicate) is not echoed.
    let dup = decode(&data[0]).unwrap();
    server.handle_packet_ecn(3 * MS, &dup, true);
    let ack3 = drain(&mut server, 3 * MS);
    assert!(ack3.iter().all(|a| !header(a).flags.ece()));
    assert_eq!(server.stats().ce_received, 1);
    feed_all(&mut client, 3 * MS, &ack);
    assert_eq!(client.stats().ece_received, 1);
}

#[test]
fn ece_cuts_only_the_marked_path() {
    // NewReno, whose window grows on these short round trips whatever their RTT; how the
    // delay controller answers ECE is tested in `cc.rs`. What is tested here is which path
    // the echo is charged to.
    let mut cfg = ConnConfig::default();
    cfg.path.cc = CcKind::Reno;
    let (mut client, mut server) = established_with(cfg, cfg);
    let marked = add_second_path(&mut client, &mut server, 1);
    let clean = client.paths().find(PATH_ID).unwrap();
    // Grow both windows past the floor on clean round trips first.
    let mut now = 2 * MS;
    for _ in 0..6 {
        for _ in 0..8 {
            client.send_message(1000).unwrap();
        }
        for _ in 0..10 {
            let data = drain(&mut client, now);
            feed_all(&mut server, now + 100 * US, &data);
            server.on_timeout(now + 100 * US + ConnConfig::default().delack_ns);
            let acks = drain(
                &mut server,
                now + 100 * US + ConnConfig::default().delack_ns,
            );
            now += 2 * MS;
            feed_all(&mut client, now, &acks);
        }
    }
    let cwnd = |c: &Conn, i| c.paths().get(i).unwrap().cwnd();
    let (before_clean, before_marked) = (cwnd(&client, clean), cwnd(&client, marked));
    for _ in 0..16 {
        client.send_message(1000).unwrap();
    }
    let tx = drain_tx(&mut client, now);
    assert!(tx.iter().any(|(t, _)| t.path == marked));
    assert!(tx.iter().any(|(t, _)| t.path == clean));
    now += MS;
    // One ACK covers the whole round, clean and marked packets alike: only the packets of
    // the path the ACK names take the mark. The clean path's packets come last, and the
    // echo still names the marked path.
    let mut order: Vec<_> = tx.iter().collect();
    order.sort_by_key(|(t, _)| t.path != marked);
    for (t, b) in order {
        let pkt = decode(b).unwrap();
        server.handle_packet_ecn(now, &pkt, t.path == marked);
    }
    let acks = drain(&mut server, now);
    assert_eq!(acks.len(), 1);
    assert!(header(&acks[0]).flags.ece());
    assert_eq!(header(&acks[0]).path_id, PATH_ID + 1);
    feed_all(&mut client, now, &acks);
    let t = now + ConnConfig::default().delack_ns;
    server.on_timeout(t);
    let acks = drain(&mut server, t);
    feed_all(&mut client, t, &acks);
    let marks = tx.iter().filter(|(t, _)| t.path == marked).count() as u64;
    assert_eq!(server.stats().ce_received, marks);
    assert_eq!(client.stats().ece_received, 1);
    assert!(
        cwnd(&client, marked) < before_marked,
        "marked path: {before_marked} -> {}",
        cwnd(&client, marked)
    );
    assert!(
        cwnd(&client, clean) >= before_clean,
        "clean path: {before_clean} -> {}",
        cwnd(&client, clean)
    );
}

#[test]
fn opened_hole_and_duplicate_are_acked_at_once_with_sack() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 5, MS);
    // Packets 0, 2 and 4 arrive; 1 and 3 are lost.
    feed(&mut server, MS, &data[0]);
    assert!(drain(&mut server, MS).is_empty());
    feed(&mut server, MS, &data[2]);
    let ack = drain(&mut server, MS);
    assert_eq!(ack.len(), 1, "a hole opens: immediate ACK");
    // Packet 4 only adds to the hole: its ACK waits a moment for company.
    feed(&mut server, MS, &data[4]);
    assert!(drain(&mut server, MS).is_empty());
    let t = server.next_timeout(MS).unwrap();
    assert!(t > MS && t <= MS + 10 * US, "due at {t}");
    server.on_timeout(t);
    let ack = drain(&mut server, t);
    assert_eq!(ack.len(), 1);
    let pkt = decode(&ack[0]).unwrap();
    assert_eq!(pkt.header.ack, CLIENT_ISN + 1);
    let Body::Ack(sack) = pkt.body else { panic!() };
    let sacked: Vec<u64> = sack.sacked().collect();
    assert_eq!(sacked, vec![CLIENT_ISN + 2, CLIENT_ISN + 4]);
    assert_eq!(messages(&events(&mut server)).len(), 1);

    // The sender learns that 0, 2, 4 arrived: only 1 and 3 are still unknown.
    feed(&mut client, t + 100 * US, &ack[0]);
    assert_eq!(client.bytes_unacked(), 200);
    assert_eq!(client.snd_una(), CLIENT_ISN + 1);

    // A duplicate is dropped and acknowledged at once.
    assert_eq!(
        feed(&mut server, 2 * MS, &data[2]),
        Input::Dropped(DropReason::Duplicate)
    );
    assert_eq!(drain(&mut server, 2 * MS).len(), 1);
    assert_eq!(
        feed(&mut server, 2 * MS, &data[0]),
        Input::Dropped(DropReason::Duplicate)
    );
    assert_eq!(drain(&mut server, 2 * MS).len(), 1);
    assert_eq!(server.stats().duplicates, 2);
}

/// Sequence numbers of the ACKs in `pkts`: (cumulative ack, selectively acknowledged).
fn acks_of(pkts: &[Vec<u8>]) -> Vec<(u64, Vec<u64>)> {
    pkts.iter()
        .map(|p| {
            let pkt = decode(p).unwrap();
            let Body::Ack(sack) = pkt.body else {
                panic!("not an ACK: {:?}", pkt.header.packet_type())
            };
            (pkt.header.ack, sack.sacked().collect())
        })
        .collect()
}

/// Feeds `data[i]` for each `i` of `order` to `server` at `now`, draining after each;
/// returns the ACKs sent after each packet.
fn feed_each(
    server: &mut Conn,
    now: u64,
    data: &[Vec<u8>],
    order: &[usize],
) -> Vec<Vec<(u64, Vec<u64>)>> {
    order
        .iter()
        .map(|&i| {
            assert!(matches!(feed(server, now, &data[i]), Input::Store { .. }));
            acks_of(&drain(server, now))
        })
        .collect()
}

/// While a hole persists, the packets beyond it are acknowledged every `ack_every` (2)
/// packets, not each at once; the packet that fills the hole at the cumulative ack is
/// acknowledged at once.
#[test]
fn packets_beyond_a_hole_are_acked_every_second_one() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 8, MS);
    let isn = CLIENT_ISN;
    // Packet 1 is late; 0 arrives in order, 2 opens the hole, 3 to 7 arrive behind it.
    let acks = feed_each(&mut server, MS, &data, &[0, 2, 3, 4, 5, 6, 7]);
    assert_eq!(acks[0], vec![], "in order: delayed");
    assert_eq!(acks[1], vec![(isn + 1, vec![isn + 2])], "the hole opens");
    assert_eq!(acks[2], vec![]);
    assert_eq!(acks[3], vec![(isn + 1, (2..=4).map(|i| isn + i).collect())]);
    assert_eq!(acks[4], vec![]);
    assert_eq!(acks[5], vec![(isn + 1, (2..=6).map(|i| isn + i).collect())]);
    assert_eq!(acks[6], vec![]);
    // The late packet fills the hole: acknowledged at once, cumulatively.
    let acks = feed_each(&mut server, MS, &data, &[1]);
    assert_eq!(acks[0], vec![(isn + 8, vec![])], "the hole closes");
    assert_eq!(server.stats().acks_sent, 4);
    assert_eq!(messages(&events(&mut server)).len(), 8);
}

/// A packet that fills a hole above the cumulative ack, and one that fills the hole at the
/// cumulative ack but leaves another behind it, are told apart: only the second moves the
/// cumulative ack, and only it is acknowledged at once.
#[test]
fn only_the_hole_at_the_cumulative_ack_is_acked_at_once() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 6, MS);
    let isn = CLIENT_ISN;
    // 0 and 3 arrive: the hole at 1 opens, and 2 is missing too.
    let acks = feed_each(&mut server, MS, &data, &[0, 3]);
    assert_eq!(acks[1], vec![(isn + 1, vec![isn + 3])]);
    // 2 fills a hole above the cumulative ack; 5 adds one; their ACK comes with the second.
    let acks = feed_each(&mut server, MS, &data, &[2, 5]);
    assert_eq!(acks[0], vec![]);
    assert_eq!(acks[1], vec![(isn + 1, vec![isn + 2, isn + 3, isn + 5])]);
    // 1 fills the hole at the cumulative ack, which moves to 4, short of 5: at once.
    let acks = feed_each(&mut server, MS, &data, &[1]);
    assert_eq!(acks[0], vec![(isn + 4, vec![isn + 5])]);
    // 4 fills the last hole: at once.
    let acks = feed_each(&mut server, MS, &data, &[4]);
    assert_eq!(acks[0], vec![(isn + 6, vec![])]);
}

/// `ack_every` holds behind a hole as it does in order.
#[test]
fn ack_every_holds_while_a_hole_persists() {
    let cfg = ConnConfig {
        ack_every: 4,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(ConnConfig::default(), cfg);
    let data = send_small(&mut client, 12, MS);
    // Packet 0 is late: 1 opens the hole, 2 to 11 arrive behind it.
    let order: Vec<usize> = (1..12).collect();
    let acks = feed_each(&mut server, MS, &data, &order);
    let acked_after: Vec<usize> = order
        .iter()
        .zip(&acks)
        .filter(|(_, a)| !a.is_empty())
        .map(|(&i, _)| i)
        .collect();
    // After the ACK of the opened hole, every fourth packet.
    assert_eq!(acked_after, vec![1, 5, 9]);
}

/// A lone packet behind a hole (the last of a burst, or of a window) is acknowledged within
/// a 64th of the path's RTT, not after the delayed-ACK time a packet in order may wait: the
/// sender's loss detection and its window wait for that ACK.
#[test]
fn the_last_packet_behind_a_hole_is_acked_soon() {
    let (mut client, mut server) = established();
    let rtt = server.paths().get(0).unwrap().min_rtt_ns().unwrap();
    let data = send_small(&mut client, 4, MS);
    let acks = feed_each(&mut server, MS, &data, &[1, 2]);
    assert_eq!(acks[0].len(), 1, "the hole opens");
    assert!(acks[1].is_empty());
    let t = server.next_timeout(MS).unwrap();
    assert_eq!(t, MS + rtt / 64);
    server.on_timeout(t);
    let acks = acks_of(&drain(&mut server, t));
    assert_eq!(
        acks,
        vec![(CLIENT_ISN, vec![CLIENT_ISN + 1, CLIENT_ISN + 2])]
    );
    // In order and nothing missing, a lone packet waits the delayed-ACK time, for a reply
    // to carry the acknowledgement.
    let t2 = 2 * MS;
    let acks = feed_each(&mut server, t2, &data, &[0]);
    assert_eq!(acks[0].len(), 1, "the hole closes");
    let acks = feed_each(&mut server, t2, &data, &[3]);
    assert!(acks[0].is_empty());
    assert_eq!(
        server.next_timeout(t2),
        Some(t2 + ConnConfig::default().delack_ns)
    );
}

/// Packets the glue hands over before it polls give one ACK, however many of them call for
/// one at once.
#[test]
fn one_batch_gives_one_ack() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 6, MS);
    // 2 opens a hole, 0 fills it up to 1, 5 opens another, 1 fills it up to 3, 3 opens
    // another: five packets that each call for an ACK at once.
    for i in [2, 0, 5, 1, 3] {
        assert!(matches!(
            feed(&mut server, MS, &data[i]),
            Input::Store { .. }
        ));
    }
    let acks = acks_of(&drain(&mut server, MS));
    assert_eq!(
        acks,
        vec![(CLIENT_ISN + 4, vec![CLIENT_ISN + 5])],
        "one ACK for the batch"
    );
}

#[test]
fn sack_of_unsent_data_is_ignored_and_ack_beyond_snd_nxt_invalid() {
    let (mut client, _server) = established();
    client.send_message(100).unwrap();
    let _ = drain(&mut client, MS);
    let bitmap = [0xFFu8; 4];
    let h = Header {
        flags: Flags::PASSIVE,
        session_id: SESSION,
        path_id: PATH_ID,
        ack: CLIENT_ISN,
        ..Header::default()
    };
    let mut buf = [0u8; 256];
    let n = mrc_proto::encode(
        &h,
        &Body::Ack(Sack::new(0, 1 << 20, CLIENT_ISN, &bitmap)),
        &mut buf,
    )
    .unwrap();
    assert_eq!(feed(&mut client, MS, &buf[..n]), Input::Consumed);
    // Only the one packet sent is acknowledged by the bitmap.
    assert_eq!(client.bytes_unacked(), 0);
    let h2 = Header {
        ack: CLIENT_ISN + 50,
        ..h
    };
    let n = mrc_proto::encode(
        &h2,
        &Body::Ack(Sack::new(0, 1 << 20, CLIENT_ISN + 50, &[])),
        &mut buf,
    )
    .unwrap();
    assert_eq!(
        feed(&mut client, MS, &buf[..n]),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(client.snd_una(), CLIENT_ISN);
}

/// An established pair whose client started at sequence number `isn`; returns (client, server).
fn established_at(isn: u64) -> (Box<Conn>, Box<Conn>) {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, isn, &[]).unwrap();
    let syn = drain(&mut client, 0);
    server
        .accept(10 * US, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    exchange(&mut client, &mut server, 20 * US);
    assert_eq!(client.state(), State::Established);
    assert_eq!(server.state(), State::Established);
    (client, server)
}

#[test]
fn ack_far_below_snd_una_is_invalid() {
    let isn = 1 << 40;
    let (mut client, _server) = established_at(isn);
    client.send_message(100).unwrap();
    let _ = drain(&mut client, MS);
    let (una, unacked, rwnd) = (client.snd_una(), client.bytes_unacked(), client.peer_rwnd());
    assert_eq!(una, isn);
    // A cumulative ack more than a window below snd_una, with a SACK of the packet in flight
    // and a far larger window: nothing of it is taken.
    for cum in [0, una - WINDOW as u64 - 1] {
        let ack = forge(
            true,
            PATH_ID,
            SERVER_ISN,
            cum,
            &Body::Ack(Sack::new(0, u32::MAX / 2, cum, &[])),
        );
        assert_eq!(
            feed(&mut client, MS, &ack),
            Input::Dropped(DropReason::Invalid),
            "cum {cum}"
        );
    }
    let bitmap = [1u8];
    let ack = forge(
        true,
        PATH_ID,
        SERVER_ISN,
        una - WINDOW as u64 - 1,
        &Body::Ack(Sack::new(0, u32::MAX / 2, una, &bitmap)),
    );
    assert_eq!(
        feed(&mut client, MS, &ack),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(client.bytes_unacked(), unacked);
    assert_eq!(client.peer_rwnd(), rwnd);
    // A window below snd_una is still an ack (an old one, overtaken).
    let ack = forge(
        true,
        PATH_ID,
        SERVER_ISN,
        una - WINDOW as u64,
        &Body::Ack(Sack::new(0, 0, una - WINDOW as u64, &[])),
    );
    assert_eq!(feed(&mut client, MS, &ack), Input::Consumed);
}

#[test]
fn blind_data_or_fin_does_not_acknowledge() {
    let (mut client, _server) = established();
    client.send_message(100).unwrap();
    let _lost = drain(&mut client, MS);
    let snd_nxt = client.snd_nxt();
    let rcv_nxt = client.rcv_nxt();
    assert_eq!(client.snd_una(), CLIENT_ISN);
    // Far outside the receive window, above and below: the ack is not taken, the packet is
    // answered with an ACK as before.
    let payload = [0u8; 10];
    for seq in [rcv_nxt + 5000, 0] {
        for body in [Body::data(&payload), Body::Fin] {
            let pkt = forge(true, PATH_ID, seq, snd_nxt, &body);
            assert!(
                matches!(feed(&mut client, MS, &pkt), Input::Dropped(_)),
                "seq {seq}"
            );
            assert_eq!(client.snd_una(), CLIENT_ISN, "seq {seq}");
            assert_eq!(client.bytes_unacked(), 100, "seq {seq}");
            let answer = drain(&mut client, MS);
            assert_eq!(answer.len(), 1);
            assert_eq!(kind(&answer[0]), PacketType::Ack);
        }
    }
    assert_eq!(client.rcv_nxt(), rcv_nxt);
    // Within the window, the ack counts.
    let pkt = forge(true, PATH_ID, rcv_nxt, snd_nxt, &Body::data(&payload));
    assert_eq!(feed(&mut client, MS, &pkt), Input::Store { seq: rcv_nxt });
    assert_eq!(client.snd_una(), snd_nxt);
}

#[test]
fn data_with_an_invalid_ack_is_not_stored() {
    let (mut client, _server) = established();
    let rcv_nxt = client.rcv_nxt();
    let payload = [0u8; 10];
    for ack in [client.snd_nxt() + 1, u64::MAX >> 3] {
        let pkt = forge(true, PATH_ID, rcv_nxt, ack, &Body::data(&payload));
        assert_eq!(
            feed(&mut client, MS, &pkt),
            Input::Dropped(DropReason::Invalid)
        );
        assert_eq!(client.rcv_nxt(), rcv_nxt);
        assert_eq!(client.stats().data_received, 0);
        let answer = drain(&mut client, MS);
        assert_eq!(answer.len(), 1);
        assert_eq!(kind(&answer[0]), PacketType::Ack);
    }
    let fin = forge(true, PATH_ID, rcv_nxt, client.snd_nxt() + 1, &Body::Fin);
    assert_eq!(
        feed(&mut client, MS, &fin),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(client.state(), State::Established);
    assert!(events(&mut client).is_empty());
    assert_eq!(client.stats().challenge_acks, 3);
}

// ---------------------------------------------------------------------------------------------
// Loss detection and retransmission
// ---------------------------------------------------------------------------------------------

#[test]
fn rack_declares_loss_after_reorder_window_and_retransmits() {
    let (mut client, mut server) = established();
    let t0 = MS;
    let data = send_small(&mut client, 4, t0);
    // Packet 0 is delayed; 1..3 arrive and are acknowledged 30 us later (the handshake
    // measured a 20 us RTT; the reorder window is 50 us).
    let t1 = t0 + 30 * US;
    for d in &data[1..] {
        feed(&mut server, t1, d);
    }
    let acks = drain(&mut server, t1);
    for a in &acks {
        feed(&mut client, t1, a);
    }
    assert_eq!(
        client.stats().rack_losses,
        0,
        "still within the reorder window"
    );
    let deadline = client.next_timeout(t1).unwrap();
    assert!(deadline > t1, "RACK timer armed");
    assert!(drain(&mut client, t1).is_empty());
    // The timer fires: packet 0 is lost and resent.
    client.on_timeout(deadline);
    assert_eq!(client.stats().rack_losses, 1);
    let retx = drain_tx(&mut client, deadline);
    assert_eq!(retx.len(), 1);
    let d = retx[0].0.data.unwrap();
    assert!(d.retransmit);
    assert_eq!(d.seq, CLIENT_ISN);
    assert_eq!(client.stats().retransmits, 1);
    feed(&mut server, deadline + 50 * US, &retx[0].1);
    let acks = drain(&mut server, deadline + 50 * US);
    feed_all(&mut client, deadline + 100 * US, &acks);
    assert!(client.all_acked());
    assert_eq!(messages(&events(&mut server)).len(), 4);
}

/// The acknowledgement of a packet resent on another path may be the original's: unless it
/// came back by the resend's path it says nothing about that path, so the packets sent there
/// before the resend are not declared lost for it.
#[test]
fn ack_of_a_resend_by_another_path_does_not_advance_rack_there() {
    let t0 = 2 * MS;
    let (mut client, mut server, p0, p1, tx) = sending_on_two_paths(0, t0);
    let (on0, on1) = (sent_on(&tx, p0), sent_on(&tx, p1));
    assert!(
        on0.len() >= 2 && !on1.is_empty(),
        "{} {}",
        on0.len(),
        on1.len()
    );
    // The first packet on path 0 is held back and the rest of path 0 arrives; path 1's
    // packets are still on their way.
    let t1 = t0 + 30 * US;
    for (_, d) in &on0[1..] {
        feed(&mut server, t1, d);
    }
    feed_all(&mut client, t1 + 30 * US, &drain(&mut server, t1));
    // Path 0 turns backup, so that the resend goes on path 1.
    client.paths_mut().set_backup(p0, true);
    let mut t = t1 + 30 * US;
    while client.stats().rack_losses == 0 {
        t = client.next_timeout(t).unwrap();
        assert!(t < t0 + 100 * US, "nothing declared lost");
        client.on_timeout(t);
    }
    // Path 1's packets may get copies too; the resend of the lost one goes on path 1.
    let lost = header(&on0[0].1).seq;
    let retx: Vec<_> = drain_tx(&mut client, t)
        .into_iter()
        .filter(|(t, _)| t.data.is_some_and(|d| d.retransmit && d.seq == lost))
        .collect();
    assert_eq!(retx.len(), 1);
    assert_eq!(retx[0].0.path, p1, "resent on path 1");
    // The original arrives after all, and the peer answers by its path.
    let late = t0 + 150 * US;
    feed(&mut server, late, &on0[0].1);
    let acks = drain(&mut server, late);
    assert!(!acks.is_empty());
    assert!(acks.iter().all(|a| header(a).path_id == PATH_ID));
    feed_all(&mut client, late + 30 * US, &acks);
    // Path 1's packets, sent before the resend, are overdue by its RTT: had the answer
    // counted for path 1, those not yet acknowledged would be declared lost now.
    let end = t0 + 400 * US;
    let mut t = late + 30 * US;
    while let Some(next) = client.next_timeout(t).filter(|&n| n < end) {
        t = next.max(t + 1);
        client.on_timeout(t);
    }
    client.on_timeout(end);
    assert_eq!(client.stats().rack_losses, 1, "{:?}", client.stats());
}

#[test]
fn late_original_cancels_retransmission() {
    let (mut client, mut server) = established();
    let data = send_small(&mut client, 3, MS);
    feed(&mut server, MS, &data[1]);
    feed(&mut server, MS, &data[2]);
    let acks = drain(&mut server, MS);
    let late = 20 * MS;
    feed_all(&mut client, late, &acks);
    assert_eq!(client.stats().rack_losses, 1);
    // Before the retransmission leaves, the original shows up after all.
    feed(&mut server, late, &data[0]);
    let acks = drain(&mut server, late);
    feed_all(&mut client, late, &acks);
    assert!(drain(&mut client, late)
        .iter()
        .all(|p| kind(p) != PacketType::Data));
    assert!(client.all_acked());
    assert_eq!(client.stats().spurious_losses, 1, "the loss was needless");
}

/// Exchanges `n` pairs of 100-byte messages with round trip `rtt`, from `t`; returns the time
/// after the last one.
fn round_trips(client: &mut Conn, server: &mut Conn, mut t: u64, rtt: u64, n: usize) -> u64 {
    for _ in 0..n {
        let data = send_small(client, 2, t);
        feed_all(server, t + rtt / 2, &data);
        let acks = drain(server, t + rtt / 2);
        feed_all(client, t + rtt, &acks);
        assert!(client.all_acked());
        events(server);
        t += 2 * rtt;
    }
    t
}

/// Sends four messages at `t`; the last three arrive and are acknowledged with round trip
/// `rtt`, the first is held back. Returns the four packets.
fn first_held_back(client: &mut Conn, server: &mut Conn, t: u64, rtt: u64) -> Vec<Vec<u8>> {
    let data = send_small(client, 4, t);
    feed_all(server, t + rtt / 2, &data[1..]);
    feed_all(client, t + rtt, &drain(server, t + rtt / 2));
    data
}

/// Runs timers of `c` up to `until`; returns the DATA packets it sent meanwhile (probes are
/// dropped).
fn run_timers(c: &mut Conn, now: u64, until: u64) -> Vec<Vec<u8>> {
    let mut now = now;
    let mut data = drain(c, now);
    while let Some(t) = c.next_timeout(now).filter(|&t| t <= until) {
        now = t.max(now);
        c.on_timeout(now);
        data.extend(drain(c, now));
    }
    data.retain(|p| kind(p) == PacketType::Data);
    data
}

#[test]
fn needless_rack_retransmissions_widen_the_reorder_window() {
    // Reno, whose window the longer RTT below does not shrink as the delay controller's.
    let mut cfg = ConnConfig::default();
    cfg.path.cc = CcKind::Reno;
    let (mut client, mut server) = established_with(cfg, ConnConfig::default());
    let rtt = 400 * US;
    // The handshake measured 20 us, so the reorder window is its 50 us floor; the smoothed RTT
    // becomes 400 us.
    let t = round_trips(&mut client, &mut server, MS, rtt, 60);
    let srtt = client.paths().get(0).unwrap().srtt_ns().unwrap();
    assert!(srtt.abs_diff(rtt) < 2 * US, "srtt {srtt}");

    let cwnd = client.paths().get(0).unwrap().cwnd();

    // Packet 0 comes 60 us after its RTT, later than the window: it is declared lost and
    // resent, then arrives, and the resent copy arrives as a duplicate.
    let data = first_held_back(&mut client, &mut server, t, rtt);
    let retx = run_timers(&mut client, t + rtt, t + srtt + 60 * US);
    assert_eq!(client.stats().rack_losses, 1);
    assert_eq!(retx.len(), 1);
    let t1 = t + srtt + 60 * US;
    feed(&mut server, t1, &data[0]);
    feed_all(&mut client, t1, &drain(&mut server, t1));
    assert!(client.all_acked());
    assert_eq!(client.stats().spurious_losses, 0);
    for p in &retx {
        feed(&mut server, t1 + 10 * US, p);
    }
    assert_eq!(server.stats().duplicates, 1);
    let acks = drain(&mut server, t1 + 10 * US);
    assert!(!acks.is_empty(), "a duplicate is acknowledged at once");
    feed_all(&mut client, t1 + 20 * US, &acks);
    assert_eq!(client.stats().spurious_losses, 1, "the D-SACK names it");
    assert!(
        client.paths().get(0).unwrap().cwnd() >= cwnd,
        "the congestion window cut for the loss is undone"
    );

    // The same lateness again: the window has doubled to 100 us, so nothing is resent.
    let t2 = t1 + MS;
    let data = first_held_back(&mut client, &mut server, t2, rtt);
    let t3 = t2 + srtt + 60 * US;
    assert!(run_timers(&mut client, t2 + rtt, t3).is_empty());
    assert_eq!(client.stats().rack_losses, 1, "no second loss declared");
    feed(&mut server, t3, &data[0]);
    feed_all(&mut client, t3, &drain(&mut server, t3));
    assert!(client.all_acked());
    assert_eq!(client.stats().retransmits, 1);

    // Eight seconds later the window has decayed to its floor again.
    let t4 = t3 + 8_100 * MS;
    let t4 = round_trips(&mut client, &mut server, t4, rtt, 1);
    first_held_back(&mut client, &mut server, t4, rtt);
    assert_eq!(
        run_timers(&mut client, t4 + rtt, t4 + srtt + 60 * US).len(),
        1
    );
    assert_eq!(
        client.stats().rack_losses,
        2,
        "declared lost with the base window"
    );
}

/// Every needless retransmission of a long burst is recognised by its D-SACK, not only the
/// latest 32: a copy sent on another path (a hedge) is remembered the same way, and a path
/// whose packets all got copies is timed by those D-SACKs alone.
#[test]
fn needless_retransmissions_of_a_long_burst_are_all_recognised() {
    let (mut client, mut server) = established();
    let n = 48;
    let data = send_small(&mut client, n, MS);
    // Only the last packet arrives in time: RACK declares the others lost and resends them.
    let t1 = MS + 30 * US;
    feed(&mut server, t1, &data[n - 1]);
    feed_all(&mut client, t1 + 30 * US, &drain(&mut server, t1));
    let mut t = t1 + 30 * US;
    while client.stats().rack_losses < n as u64 - 1 {
        t = client.next_timeout(t).unwrap();
        assert!(t < 2 * MS, "not declared lost: {:?}", client.stats());
        client.on_timeout(t);
    }
    let retx = drain(&mut client, t);
    assert_eq!(retx.len(), n - 1);
    // The originals arrive after all, then the resends, each answered with a D-SACK.
    let t2 = t + 100 * US;
    feed_all(&mut server, t2, &data[..n - 1]);
    let mut acks = drain(&mut server, t2);
    for p in &retx {
        assert_eq!(
            feed(&mut server, t2, p),
            Input::Dropped(DropReason::Duplicate)
        );
        acks.extend(drain(&mut server, t2));
    }
    feed_all(&mut client, t2 + 30 * US, &acks);
    assert!(client.all_acked());
    assert_eq!(client.stats().spurious_losses, n as u64 - 1);
}

#[test]
fn rto_backs_off_and_gives_up() {
    let cfg = ConnConfig::default();
    let (mut client, _server) = established();
    client.send_message(100).unwrap();
    let mut now = MS;
    let mut data_at = vec![];
    for _ in 0..100_000 {
        for p in drain(&mut client, now) {
            if kind(&p) == PacketType::Data {
                data_at.push(now);
            }
        }
        let Some(t) = client.next_timeout(now) else {
            break;
        };
        now = t.max(now);
        client.on_timeout(now);
    }
    assert_eq!(client.state(), State::Closed(Some(ConnError::TimedOut)));
    // Fails one user timeout after the last progress (the handshake at 0).
    assert!(
        now >= cfg.user_timeout_ns && now <= cfg.user_timeout_ns + cfg.path.rto_max_ns,
        "gave up at {now} ns"
    );
    assert!(client.stats().rtos >= 10, "{:?}", client.stats());
    assert!(
        data_at.len() >= 2,
        "retransmitted at least once: {data_at:?}"
    );
    // Gaps between transmissions never shrink (exponential backoff, capped).
    for w in data_at.windows(3) {
        assert!(w[2] - w[1] >= w[1] - w[0], "{data_at:?}");
    }
    assert!(events(&mut client).contains(&Event::Closed(Some(ConnError::TimedOut))));
}

#[test]
fn rto_rearms_on_progress() {
    let (mut client, mut server) = established();
    client.send_message(100).unwrap();
    let data = drain(&mut client, MS);
    // Lose it once; the RTO resends it.
    let t = client.next_timeout(MS).unwrap();
    let rto_deadline = MS + client.rto_ns();
    assert!(t <= rto_deadline);
    let mut now = t;
    client.on_timeout(now);
    let mut retx = drain(&mut client, now);
    while retx.iter().all(|p| kind(p) != PacketType::Data) {
        now = client.next_timeout(now).unwrap();
        client.on_timeout(now);
        retx = drain(&mut client, now);
    }
    assert_eq!(client.stats().rtos, 1);
    let _ = data;
    let d = retx
        .into_iter()
        .find(|p| kind(p) == PacketType::Data)
        .unwrap();
    feed(&mut server, now, &d);
    server.on_timeout(now + MS);
    let acks = drain(&mut server, now + MS);
    feed_all(&mut client, now + MS, &acks);
    assert!(client.all_acked());
    // Progress resets the backoff.
    assert!(client.rto_ns() <= client.config().path.rto_max_ns);
    assert_eq!(client.state(), State::Established);
}

#[test]
fn retransmission_moves_to_another_path() {
    let (mut client, mut server) = established();
    let idx = add_second_path(&mut client, &mut server, 1);
    for _ in 0..20 {
        client.send_message(1000).unwrap();
    }
    let tx = drain_tx(&mut client, 2 * MS);
    // Lose the first packet; deliver the rest.
    let first = &tx[0];
    for (_, b) in &tx[1..] {
        feed(&mut server, 2 * MS + 100 * US, b);
    }
    let acks = drain(&mut server, 2 * MS + 100 * US);
    feed_all(&mut client, 10 * MS, &acks);
    let retx = drain_tx(&mut client, 10 * MS);
    let r = retx
        .iter()
        .find(|(t, _)| t.data.is_some_and(|d| d.retransmit))
        .expect("a retransmission");
    assert_ne!(r.0.path, first.0.path, "resent on a different path");
    assert!(r.0.path == idx || first.0.path == idx);
}

// ---------------------------------------------------------------------------------------------
// Flow control
// ---------------------------------------------------------------------------------------------

#[test]
fn receive_window_limits_the_sender_and_reopens() {
    let small = ConnConfig {
        rcvbuf: 10_000,
        max_msg: 4000,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(ConnConfig::default(), small);
    assert_eq!(client.peer_rwnd(), 10_000);
    for _ in 0..10 {
        client.send_message(4000).unwrap();
    }
    // The application on the server does not read: the window closes.
    let (now, _) = unread_rounds(&mut client, &mut server, |c| {
        // Never more than the window, plus one window probe.
        assert!(c.bytes_unacked() <= 10_000 + MSS as u64);
    });
    let evs = events(&mut server);
    let delivered = messages(&evs);
    assert_eq!(
        delivered.len(),
        2,
        "two 4000-byte messages fit in 10000 bytes"
    );
    assert!(server.rwnd() < 4000);
    assert!(client.peer_rwnd() < 4000);
    // Reading reopens the window and the server says so at once.
    let (bytes, cost) = read_size(&evs);
    assert_eq!(bytes, 8000);
    server.release_recv(bytes, cost);
    let update = drain(&mut server, now);
    assert_eq!(update.len(), 1);
    assert_eq!(kind(&update[0]), PacketType::Ack);
    feed(&mut client, now, &update[0]);
    assert!(client.peer_rwnd() >= 8000);
    let more = drain(&mut client, now);
    assert!(more.iter().any(|p| kind(p) == PacketType::Data));
}

/// Both ends' timers at `now`, then what the client sends and the server's answers; returns
/// the DATA packets the client sent.
fn timer_turn(client: &mut Conn, server: &mut Conn, now: u64) -> usize {
    client.on_timeout(now);
    server.on_timeout(now);
    let d = drain(client, now);
    feed_all(server, now, &d);
    let a = drain(server, now);
    feed_all(client, now, &a);
    d.iter().filter(|p| kind(p) == PacketType::Data).count()
}

/// Twenty rounds of the client sending what it may and the server, whose application reads
/// nothing, acknowledging; `each` looks at the client after each of its turns. Returns the
/// time after the last round and the DATA packets the client sent.
fn unread_rounds(
    client: &mut Conn,
    server: &mut Conn,
    mut each: impl FnMut(&Conn),
) -> (u64, usize) {
    let mut now = MS;
    let mut sent = 0;
    for _ in 0..20 {
        let data = drain(client, now);
        each(client);
        sent += data.iter().filter(|p| kind(p) == PacketType::Data).count();
        feed_all(server, now, &data);
        server.on_timeout(now + MS);
        let acks = drain(server, now + MS);
        feed_all(client, now + MS, &acks);
        now += 2 * MS;
    }
    (now, sent)
}

/// Empty and one-byte messages take the least window a packet takes, at both ends: a sender
/// of small messages to a reader that reads nothing stops at the window, as a sender of large
/// ones does, instead of sending hundreds of packets the receiver has no memory for.
#[test]
fn small_messages_take_the_least_window_a_packet_takes() {
    for len in [0, 1, 100] {
        let small = ConnConfig {
            rcvbuf: 10 * MIN_WINDOW_COST,
            ..ConnConfig::default()
        };
        let (mut client, mut server) = established_with(ConnConfig::default(), small);
        for _ in 0..200 {
            client.send_message(len).unwrap();
        }
        let (now, sent) = unread_rounds(&mut client, &mut server, |_| ());
        let evs = events(&mut server);
        assert_eq!(messages(&evs).len(), 10, "{len}-byte messages: ten fit");
        assert_eq!(server.rwnd(), 0, "{len}-byte messages: the window is full");
        // The sender stopped at the window, but for a window probe or two.
        assert!(sent <= 12, "{len}-byte messages: {sent} DATA packets sent");
        // Reading them gives the window back, and the rest follow.
        let (bytes, cost) = read_size(&evs);
        assert_eq!((bytes, cost), (10 * u64::from(len), 10 * window_cost(len)));
        server.release_recv(bytes, cost);
        assert_eq!(server.rwnd(), 10 * MIN_WINDOW_COST);
        let update = drain(&mut server, now);
        feed_all(&mut client, now, &update);
        let more = drain(&mut client, now);
        assert_eq!(
            more.iter().filter(|p| kind(p) == PacketType::Data).count(),
            10
        );
    }
}

/// A peer that ignores the window and floods one-byte messages at a reader that reads nothing
/// gets a few ACKs, not one for each packet dropped (as TCP limits its answers to segments
/// outside its window); the first packet it has no room for is answered.
#[test]
fn a_flood_beyond_the_window_gets_a_few_acks() {
    let small = ConnConfig {
        rcvbuf: 10 * MIN_WINDOW_COST,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(ConnConfig::default(), small);
    client.send_message(1).unwrap();
    let first = drain(&mut client, MS);
    let pkt = decode(&first[0]).unwrap();
    assert_eq!(pkt.header.packet_type(), Some(PacketType::Data));
    let (mut acks, mut taken, mut first_answered) = (0, 0, None);
    // 1,000 packets over 10 ms, as fast as a host sends them.
    for i in 0..1000u64 {
        let now = MS + i * 10 * US;
        let mut forged = pkt.clone();
        forged.header.seq = pkt.header.seq + i;
        let input = server.handle_packet(now, &forged);
        let answered = drain(&mut server, now)
            .iter()
            .filter(|p| kind(p) == PacketType::Ack)
            .count();
        acks += answered;
        if matches!(input, Input::Store { .. }) {
            taken += 1;
        } else if first_answered.is_none() {
            first_answered = Some(answered);
        }
    }
    assert_eq!(taken, 10, "ten fit the window");
    assert_eq!(
        first_answered,
        Some(1),
        "the first refused packet is answered"
    );
    // The burst, and the rate over the 10 ms: 8 + 1, plus the ACKs of what was taken.
    assert!(acks <= 20, "{acks} ACKs for 1,000 packets");
    assert!(server.stats().acks_limited >= 970, "{:?}", server.stats());
}

/// A reader that stops reading for longer than the user timeout does not make the sender give
/// up while it answers the window probes (RFC 1122, 4.2.2.17): a closed window is not a dead
/// peer, even while a probe the receiver had no room for is outstanding.
#[test]
fn closed_window_answered_outlives_the_user_timeout() {
    let small = ConnConfig {
        rcvbuf: 4 * MSS as u32,
        ..ConnConfig::default()
    };
    let cfg = ConnConfig::default();
    let (mut client, mut server) = established_with(cfg, small);
    for _ in 0..8 {
        client.send_message(MSS as u32).unwrap();
    }
    let mut now = MS;
    let until = now + 3 * cfg.user_timeout_ns;
    let mut probes = 0;
    while now < until {
        probes += timer_turn(&mut client, &mut server, now);
        let next = [client.next_timeout(now), server.next_timeout(now)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + MS);
        now = next.max(now + 1);
    }
    assert_eq!(
        client.state(),
        State::Established,
        "after {probes} DATA packets"
    );
    // The probes back off (to the longest RTO), though every one is answered: before, each
    // answer reset the backoff and the probe went out at the shortest RTO, 15,000 times here.
    let wait_s = (until - MS) / 1_000_000_000;
    assert!(
        probes <= 4 + 2 * wait_s as usize,
        "{probes} DATA packets in {wait_s} s"
    );
    // The reader reads: the rest arrives.
    let evs = events(&mut server);
    assert_eq!(messages(&evs).len(), 4);
    let (bytes, cost) = read_size(&evs);
    server.release_recv(bytes, cost);
    for _ in 0..50 {
        exchange(&mut client, &mut server, now);
        server.on_timeout(now);
        client.on_timeout(now);
        now += MS;
    }
    assert_eq!(messages(&events(&mut server)).len(), 4);
    assert!(client.all_acked());
}

#[test]
fn closed_window_is_probed_after_lost_update() {
    // A window of exactly one 3000-byte message: two full packets and a short one, which
    // takes the least window a packet takes.
    let one_msg = 2 * MSS as u64 + window_cost((3000 - 2 * MSS) as u32);
    let small = ConnConfig {
        rcvbuf: one_msg as u32,
        max_msg: 3000,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(ConnConfig::default(), small);
    for _ in 0..3 {
        client.send_message(3000).unwrap();
    }
    let mut now = MS;
    exchange(&mut client, &mut server, now);
    server.on_timeout(now + MS);
    exchange(&mut client, &mut server, now + MS);
    let evs = events(&mut server);
    assert_eq!(messages(&evs).len(), 1);
    assert_eq!(client.peer_rwnd(), 0);
    assert!(client.all_acked() || client.bytes_unacked() == 0);
    // The window update is lost.
    let (bytes, cost) = read_size(&evs);
    server.release_recv(bytes, cost);
    let _lost = drain(&mut server, now + MS);
    // The sender probes the window after an RTO, without giving up.
    let mut probes = 0;
    for _ in 0..50 {
        let t = client.next_timeout(now).unwrap();
        now = t.max(now);
        probes += timer_turn(&mut client, &mut server, now);
        if probes > 0 && client.peer_rwnd() > 0 {
            break;
        }
    }
    assert!(probes > 0);
    assert!(client.stats().window_probes > 0);
    assert!(client.peer_rwnd() > 0);
    assert!(client.state().is_synchronized());
}

#[test]
fn send_errors() {
    let cfg = ConnConfig {
        sndbuf: 10_000,
        max_msg: 8000,
        ..ConnConfig::default()
    };
    let mut c = new_conn(cfg);
    assert_eq!(c.send_message(1), Err(SendError::NotConnected));
    let (mut client, _server) = established_with(cfg, cfg);
    assert_eq!(client.send_message(8001), Err(SendError::MsgSize));
    client.send_message(8000).unwrap();
    assert_eq!(client.send_space(), 2000);
    assert_eq!(client.send_message(3000), Err(SendError::WouldBlock));
    client.send_message(2000).unwrap();
    client.close(MS);
    assert_eq!(client.send_message(1), Err(SendError::Shutdown));
}

#[test]
fn send_room_is_what_send_message_takes() {
    let cfg = ConnConfig {
        sndbuf: 10_000,
        max_msg: 8000,
        ..ConnConfig::default()
    };
    assert_eq!(new_conn(cfg).send_room(), SendRoom::default());
    let (mut client, _server) = established_with(cfg, cfg);
    let mut room = client.send_room();
    assert_eq!(
        room,
        SendRoom {
            msgs: MSG_QUEUE as u32,
            bytes: 10_000,
            max_msg: 8000,
        }
    );
    assert!(!room.take(8001));
    assert!(room.take(8000));
    client.send_message(8000).unwrap();
    assert_eq!(client.send_room(), room);
    assert!(!room.take(3000));
    assert_eq!(client.send_message(3000), Err(SendError::WouldBlock));
    assert!(room.take(2000));
    client.send_message(2000).unwrap();
    assert_eq!(client.send_room().bytes, 0);
    client.close(MS);
    assert_eq!(client.send_room(), SendRoom::default());
}

#[test]
fn send_room_counts_the_ring_of_message_ids() {
    let (mut client, _server) = established_with(ConnConfig::default(), ConnConfig::default());
    let mut room = client.send_room();
    for _ in 0..MSG_QUEUE {
        assert!(room.take(1));
        client.send_message(1).unwrap();
    }
    assert_eq!(room.msgs, 0);
    assert_eq!(client.send_room().msgs, 0);
    assert_eq!(client.send_message(1), Err(SendError::WouldBlock));
}

/// A writer that read the room once and counts what it queued since may queue within the
/// rest however the connection moved meanwhile: acknowledgements only grow the room.
#[test]
fn send_room_read_earlier_still_holds_after_acknowledgements() {
    let cfg = ConnConfig {
        sndbuf: 16 * 1024,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(cfg, cfg);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut room = client.send_room();
    let (mut queued, mut refused) = (0, 0);
    for step in 0..3000u64 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let len = 1 + (seed >> 33) as u32 % 9000;
        let now = step * 10 * US;
        match seed % 8 {
            // The run under way: packets both ways, then the room as it left it.
            0 => {
                exchange(&mut client, &mut server, now);
                for ev in events(&mut server) {
                    if let Event::Message { len, cost, .. } = ev {
                        server.release_recv(u64::from(len), cost);
                    }
                }
                let fresh = client.send_room();
                assert!(fresh.bytes >= room.bytes && fresh.msgs >= room.msgs);
                room = fresh;
            }
            // The writer hands a message over within the room it counted.
            _ => {
                if room.take(len) {
                    assert_eq!(client.send_message(len).map(|_| ()), Ok(()), "step {step}");
                    queued += 1;
                } else {
                    refused += 1;
                }
            }
        }
    }
    assert!(
        queued > 100 && refused > 100,
        "queued {queued}, refused {refused}"
    );
}

#[test]
fn stream_chunks_fill_the_send_buffer_without_slivers() {
    let cfg = ConnConfig {
        sndbuf: 200_000,
        ..ConnConfig::default()
    };
    let (mut client, _server) = established_with(cfg, cfg);
    // Empty buffer: a whole chunk, never more than STREAM_MSG.
    assert_eq!(client.stream_chunk(0), 0);
    assert_eq!(client.stream_chunk(10), 10);
    assert_eq!(client.stream_chunk(1 << 30), STREAM_MSG);
    client.send_message(120_000).unwrap();
    // 80,000 free: a whole chunk still fits.
    assert_eq!(client.stream_chunk(1 << 20), STREAM_MSG);
    client.send_message(STREAM_MSG).unwrap();
    // 14,464 free, below a quarter of the buffer: wait, unless the rest fits.
    let free = 200_000 - 120_000 - u64::from(STREAM_MSG);
    assert_eq!(client.send_space(), free);
    assert_eq!(client.stream_chunk(1 << 20), 0);
    assert_eq!(client.stream_chunk(1000), 1000);
    assert_eq!(client.send_buffered(), 120_000 + u64::from(STREAM_MSG));
}

#[test]
fn stream_chunk_takes_a_partial_fill_above_a_quarter() {
    let cfg = ConnConfig {
        sndbuf: 100_000,
        ..ConnConfig::default()
    };
    let (mut client, _server) = established_with(cfg, cfg);
    client.send_message(60_000).unwrap();
    // 40,000 free: more than a quarter, less than a chunk.
    assert_eq!(client.stream_chunk(1 << 20), 40_000);
}

#[test]
fn stream_chunk_respects_a_small_max_message() {
    let cfg = ConnConfig {
        max_msg: 5000,
        ..ConnConfig::default()
    };
    let (client, _server) = established_with(cfg, cfg);
    assert_eq!(client.stream_chunk(1 << 20), 5000);
}

#[test]
fn stream_chunk_is_zero_when_the_message_ring_is_full() {
    let (mut client, _server) = established_with(ConnConfig::default(), ConnConfig::default());
    for _ in 0..MSG_QUEUE {
        client.send_message(1).unwrap();
    }
    assert_eq!(client.stream_chunk(1), 0);
}

#[test]
fn message_above_limit_from_peer_is_a_protocol_error() {
    let big = ConnConfig {
        max_msg: 100_000,
        ..ConnConfig::default()
    };
    let small = ConnConfig {
        max_msg: 10_000,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(big, small);
    client.send_message(50_000).unwrap();
    let data = drain(&mut client, MS);
    feed_all(&mut server, MS, &data);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Protocol)));
    let rst = drain(&mut server, MS);
    assert_eq!(kind(&rst[0]), PacketType::Rst);
    feed(&mut client, MS, &rst[0]);
    assert_eq!(client.state(), State::Closed(Some(ConnError::Reset)));
}

// ---------------------------------------------------------------------------------------------
// Close
// ---------------------------------------------------------------------------------------------

#[test]
fn orderly_close_client_first() {
    let (mut client, mut server) = established();
    client.send_message(5000).unwrap();
    client.close(MS);
    assert_eq!(client.state(), State::FinWait);
    let pkts = drain(&mut client, MS);
    assert_eq!(
        kind(pkts.last().unwrap()),
        PacketType::Fin,
        "FIN after the data"
    );
    feed_all(&mut server, MS, &pkts);
    let evs = events(&mut server);
    assert_eq!(messages(&evs).len(), 1);
    assert_eq!(evs.last(), Some(&Event::PeerFin));
    assert_eq!(server.state(), State::CloseWait);
    // The server can still send.
    server.send_message(10).unwrap();
    exchange(&mut client, &mut server, MS);
    assert_eq!(messages(&events(&mut client)).len(), 1);
    server.close(2 * MS);
    assert_eq!(server.state(), State::Closing);
    exchange(&mut client, &mut server, 2 * MS);
    assert_eq!(server.state(), State::Closed(None));
    assert_eq!(client.state(), State::TimeWait);
    assert!(events(&mut client).contains(&Event::PeerFin));
    let t = client.next_timeout(2 * MS).unwrap();
    assert_eq!(t, 2 * MS + client.config().time_wait_ns);
    client.on_timeout(t);
    assert_eq!(client.state(), State::Closed(None));
    assert_eq!(events(&mut client), vec![Event::Closed(None)]);
}

#[test]
fn simultaneous_close() {
    let (mut client, mut server) = established();
    client.close(MS);
    server.close(MS);
    let a = drain(&mut client, MS);
    let b = drain(&mut server, MS);
    assert_eq!(kind(&a[0]), PacketType::Fin);
    assert_eq!(kind(&b[0]), PacketType::Fin);
    feed_all(&mut server, MS, &a);
    feed_all(&mut client, MS, &b);
    assert_eq!(client.state(), State::Closing);
    assert_eq!(server.state(), State::Closing);
    exchange(&mut client, &mut server, MS);
    assert_eq!(client.state(), State::TimeWait);
    assert_eq!(server.state(), State::TimeWait);
}

#[test]
fn all_acked_waits_for_the_fin() {
    // What a lingering close() waits for: the data and then the FIN acknowledged.
    let (mut client, mut server) = established();
    client.close(MS);
    assert!(!client.all_acked(), "FIN queued, not yet sent");
    let fin = drain(&mut client, MS);
    assert!(fin.iter().any(|p| kind(p) == PacketType::Fin));
    assert!(!client.all_acked(), "FIN sent, not yet acknowledged");
    for p in &fin {
        feed(&mut server, MS, p);
    }
    exchange(&mut client, &mut server, 2 * MS);
    assert!(client.all_acked());
}

#[test]
fn lost_fin_is_retransmitted_and_time_wait_reacks() {
    let (mut client, mut server) = established();
    client.close(MS);
    let _lost = drain(&mut client, MS);
    let mut now = MS;
    let mut fin = None;
    for _ in 0..10 {
        now = client.next_timeout(now).unwrap();
        client.on_timeout(now);
        if let Some(f) = drain(&mut client, now)
            .into_iter()
            .find(|p| kind(p) == PacketType::Fin)
        {
            fin = Some(f);
            break;
        }
    }
    let fin = fin.expect("FIN retransmitted");
    feed(&mut server, now, &fin);
    server.close(now);
    exchange(&mut client, &mut server, now);
    assert_eq!(client.state(), State::TimeWait);
    assert_eq!(server.state(), State::Closed(None));
    // A retransmitted FIN in TimeWait is acknowledged again.
    let dup = {
        let mut buf = [0u8; 128];
        let h = Header {
            flags: Flags::PASSIVE,
            session_id: SESSION,
            path_id: PATH_ID,
            seq: SERVER_ISN,
            ack: CLIENT_ISN + 1,
            ..Header::default()
        };
        let n = mrc_proto::encode(&h, &Body::Fin, &mut buf).unwrap();
        buf[..n].to_vec()
    };
    assert_eq!(
        feed(&mut client, now, &dup),
        Input::Dropped(DropReason::Duplicate)
    );
    let re = drain(&mut client, now);
    assert_eq!(re.len(), 1);
    assert_eq!(kind(&re[0]), PacketType::Ack);
}

/// Runs both ends' timers from `now` to `until`, delivering every packet at once; the server's
/// application reads every message it gets. Logs the time and type of each packet the
/// client sends. Returns `until`.
fn run_pair(
    client: &mut Conn,
    server: &mut Conn,
    mut now: u64,
    until: u64,
    log: &mut Vec<(u64, PacketType)>,
) -> u64 {
    for _ in 0..10_000_000 {
        for _ in 0..1000 {
            for e in events(server) {
                if let Event::Message { len, cost, .. } = e {
                    server.release_recv(u64::from(len), cost);
                }
            }
            let x = drain(client, now);
            let y = drain(server, now);
            if x.is_empty() && y.is_empty() {
                break;
            }
            log.extend(x.iter().map(|p| (now, kind(p))));
            feed_all(server, now, &x);
            feed_all(client, now, &y);
        }
        let t = [client.next_timeout(now), server.next_timeout(now)]
            .into_iter()
            .flatten()
            .min();
        match t {
            Some(t) if t <= until => {
                now = t.max(now);
                client.on_timeout(now);
                server.on_timeout(now);
            }
            _ => return until,
        }
    }
    panic!("run_pair did not reach {until}");
}

/// Times at which the client sent an RST.
fn rsts(log: &[(u64, PacketType)]) -> Vec<u64> {
    log.iter()
        .filter(|(_, k)| *k == PacketType::Rst)
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn orphan_waiting_for_the_peer_fin_times_out_with_rst() {
    let (mut client, mut server) = established();
    let fin_timeout = client.config().fin_timeout_ns;
    assert_eq!(fin_timeout, 60_000_000_000);
    assert!(!client.is_orphan());
    client.release(MS, false);
    assert!(client.is_orphan());
    assert_eq!(client.state(), State::FinWait);
    // The peer acknowledges the FIN at once and answers every probe, but never closes.
    let mut log = vec![];
    let t = run_pair(
        &mut client,
        &mut server,
        MS,
        MS + fin_timeout - MS,
        &mut log,
    );
    assert_eq!(client.state(), State::FinWait);
    assert!(client.all_acked());
    assert_eq!(server.state(), State::CloseWait);
    assert_eq!(client.paths().paths_in_state(PathState::Active), 1);
    assert!(client.stats().probes_sent >= 3, "{:?}", client.stats());
    assert!(rsts(&log).is_empty());
    // One FIN timeout after the FIN was acknowledged, the orphan resets the peer.
    assert_eq!(client.next_timeout(t), Some(MS + fin_timeout));
    run_pair(&mut client, &mut server, t, MS + fin_timeout + MS, &mut log);
    assert_eq!(client.state(), State::Closed(Some(ConnError::TimedOut)));
    assert_eq!(client.stats().orphan_timeouts, 1);
    assert!(events(&mut client).contains(&Event::Closed(Some(ConnError::TimedOut))));
    assert_eq!(rsts(&log), vec![MS + fin_timeout]);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
    assert_eq!(client.next_timeout(MS + fin_timeout), None);
}

#[test]
fn orphan_timeout_restarts_when_the_fin_is_acknowledged() {
    let cfg = ConnConfig {
        fin_timeout_ns: 1_000 * MS,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(cfg, ConnConfig::default());
    client.release(MS, false);
    // The FIN is lost until 800 ms.
    let fin = drain(&mut client, MS);
    assert_eq!(kind(&fin[0]), PacketType::Fin);
    let mut log = vec![];
    let mut now = MS;
    while now < 800 * MS {
        let t = client.next_timeout(now).unwrap();
        assert!(
            t <= MS + 1_000 * MS,
            "FIN timeout counts from the FIN's transmission"
        );
        now = t.max(now);
        client.on_timeout(now);
        drain(&mut client, now);
        server.on_timeout(now);
        drain(&mut server, now);
    }
    assert_eq!(client.state(), State::FinWait);
    // Acknowledged now: the orphan waits one whole FIN timeout more for the peer's FIN.
    feed(&mut server, now, &fin[0]);
    run_pair(&mut client, &mut server, now, now + 999 * MS, &mut log);
    assert!(client.all_acked());
    assert_eq!(client.state(), State::FinWait);
    run_pair(
        &mut client,
        &mut server,
        now + 999 * MS,
        now + 1_001 * MS,
        &mut log,
    );
    assert_eq!(client.state(), State::Closed(Some(ConnError::TimedOut)));
    assert_eq!(rsts(&log), vec![now + 1_000 * MS]);
}

#[test]
fn half_closed_connection_waits_for_the_peer_fin_until_released() {
    let (mut client, mut server) = established();
    let fin_timeout = client.config().fin_timeout_ns;
    // shutdown(SHUT_WR): the application still holds the socket and may wait for the
    // peer's data as long as it likes.
    client.close(MS);
    let mut log = vec![];
    let t = run_pair(&mut client, &mut server, MS, 10 * fin_timeout, &mut log);
    assert!(!client.is_orphan());
    assert_eq!(client.state(), State::FinWait);
    assert_eq!(server.state(), State::CloseWait);
    assert_eq!(client.stats().orphan_timeouts, 0);
    assert!(rsts(&log).is_empty());
    // The peer's data still arrives.
    server.send_message(100).unwrap();
    exchange(&mut client, &mut server, t);
    assert_eq!(messages(&events(&mut client)).len(), 1);
    // Released, it waits one FIN timeout from then, as TCP's close() in FIN_WAIT_2.
    client.release(t, false);
    let u = run_pair(&mut client, &mut server, t, t + fin_timeout - MS, &mut log);
    assert_eq!(client.state(), State::FinWait);
    run_pair(&mut client, &mut server, u, t + fin_timeout + MS, &mut log);
    assert_eq!(client.state(), State::Closed(Some(ConnError::TimedOut)));
    assert_eq!(rsts(&log), vec![t + fin_timeout]);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
}

/// A pair whose server takes the window probes one at a time but never opens its window: it
/// holds 3000 bytes, and the client sends two 1 MiB messages, one window probe a second.
fn window_kept_closed() -> (Box<Conn>, Box<Conn>) {
    let mut slow = ConnConfig::default();
    slow.path.rto_min_ns = slow.path.rto_max_ns;
    let small = ConnConfig {
        rcvbuf: 3000,
        ..ConnConfig::default()
    };
    let (mut client, server) = established_with(slow, small);
    client.send_message(1 << 20).unwrap();
    client.send_message(1 << 20).unwrap();
    (client, server)
}

#[test]
fn orphan_facing_a_closed_window_times_out() {
    let (mut client, mut server) = window_kept_closed();
    let fin_timeout = client.config().fin_timeout_ns;
    client.release(MS, false);
    let mut log = vec![];
    let t = run_pair(&mut client, &mut server, MS, fin_timeout / 2, &mut log);
    assert_eq!(client.state(), State::FinWait);
    assert_eq!(client.peer_rwnd(), 0);
    // Every probe is taken: the connection progresses, so the user timeout never fires.
    let taken = server.stats().data_received;
    assert!(taken > 10, "{:?}", server.stats());
    assert!(
        client.stats().window_probes >= taken - 3,
        "{:?}",
        client.stats()
    );
    assert_eq!(client.acked_msgs(), 0);
    assert!(!client.all_acked());
    run_pair(&mut client, &mut server, t, MS + fin_timeout + MS, &mut log);
    assert_eq!(client.state(), State::Closed(Some(ConnError::TimedOut)));
    assert_eq!(client.stats().orphan_timeouts, 1);
    assert_eq!(rsts(&log), vec![MS + fin_timeout]);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
}

#[test]
fn half_closed_connection_facing_a_closed_window_keeps_sending() {
    let (mut client, mut server) = window_kept_closed();
    let fin_timeout = client.config().fin_timeout_ns;
    client.close(MS);
    let mut log = vec![];
    run_pair(&mut client, &mut server, MS, 3 * fin_timeout, &mut log);
    assert_eq!(client.state(), State::FinWait);
    assert!(client.stats().window_probes > 100, "{:?}", client.stats());
    assert_eq!(client.stats().orphan_timeouts, 0);
    assert!(rsts(&log).is_empty());
}

#[test]
fn orphan_whose_peer_closes_in_time_goes_through_time_wait() {
    let (mut client, mut server) = established();
    let fin_timeout = client.config().fin_timeout_ns;
    client.send_message(5000).unwrap();
    client.release(MS, false);
    let mut log = vec![];
    // The peer closes just before the FIN timeout.
    let t = run_pair(&mut client, &mut server, MS, fin_timeout, &mut log);
    assert_eq!(client.state(), State::FinWait);
    assert_eq!(server.state(), State::CloseWait);
    server.close(t);
    let u = t + 10 * MS;
    run_pair(&mut client, &mut server, t, u, &mut log);
    assert_eq!(server.state(), State::Closed(None));
    assert_eq!(client.state(), State::TimeWait);
    assert!(events(&mut client).contains(&Event::PeerFin));
    let end = client.next_timeout(u).unwrap();
    assert!(end > MS + fin_timeout);
    run_pair(&mut client, &mut server, u, end, &mut log);
    assert_eq!(client.state(), State::Closed(None));
    assert_eq!(events(&mut client), vec![Event::Closed(None)]);
    assert_eq!(client.stats().orphan_timeouts, 0);
    assert!(rsts(&log).is_empty());
}

#[test]
fn abort_sends_rst_and_peer_resets() {
    let (mut client, mut server) = established();
    // Nothing in flight: the RST carries the sequence number the server expects next.
    client.abort(MS);
    assert_eq!(client.state(), State::Closed(None));
    let rst = drain(&mut client, MS);
    assert_eq!(rst.len(), 1);
    assert_eq!(kind(&rst[0]), PacketType::Rst);
    assert_eq!(header(&rst[0]).seq, server.rcv_nxt());
    assert!(drain(&mut client, MS).is_empty());
    assert_eq!(feed(&mut server, MS, &rst[0]), Input::Consumed);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
    assert_eq!(
        events(&mut server),
        vec![Event::Closed(Some(ConnError::Reset))]
    );
    assert_eq!(
        server.send_message(1),
        Err(SendError::Failed(ConnError::Reset))
    );
    assert_eq!(server.next_timeout(MS), None);
}

/// An abort with data in flight: the RST's sequence number (the aborting end's `snd_nxt`) is
/// beyond what the peer has received, so the peer answers with a challenge ACK; the aborted
/// end, which no longer has the session, answers that with `reply_rst`, whose sequence number
/// is the ACK's ack, exactly what the peer expects: that one resets it.
#[test]
fn abort_with_data_in_flight_resets_the_peer_after_a_challenge_ack() {
    let (mut client, mut server) = established();
    client.send_message(100).unwrap();
    let _lost = drain(&mut client, MS);
    client.abort(MS);
    let rst = drain(&mut client, MS);
    assert_eq!(rst.len(), 1);
    assert_eq!(header(&rst[0]).seq, CLIENT_ISN + 1);
    assert_eq!(server.rcv_nxt(), CLIENT_ISN);
    assert_eq!(
        feed(&mut server, MS, &rst[0]),
        Input::Dropped(DropReason::BadRst)
    );
    assert_eq!(server.state(), State::Established);
    assert_eq!(server.stats().challenge_acks, 1);
    let challenge = drain(&mut server, MS);
    assert_eq!(challenge.len(), 1);
    assert_eq!(kind(&challenge[0]), PacketType::Ack);
    assert_eq!(header(&challenge[0]).ack, CLIENT_ISN);
    // The glue of the aborted end finds no session for the ACK and answers it.
    let mut buf = [0u8; MIN_TX_BUF];
    let n = mrc_conn::reply_rst(&header(&challenge[0]), &mut buf).unwrap();
    assert_eq!(header(&buf[..n]).seq, server.rcv_nxt());
    assert_eq!(feed(&mut server, MS, &buf[..n]), Input::Consumed);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
    assert_eq!(
        events(&mut server),
        vec![Event::Closed(Some(ConnError::Reset))]
    );
}

/// Encodes a control packet of this test's session as the end whose direction bit is
/// `passive` would send it.
fn forge(passive: bool, path_id: u32, seq: u64, ack: u64, body: &Body<'_>) -> Vec<u8> {
    let h = Header {
        flags: if passive {
            Flags::PASSIVE
        } else {
            Flags::default()
        },
        session_id: SESSION,
        path_id,
        seq,
        ack,
        ..Header::default()
    };
    let mut buf = vec![0u8; 2048];
    let n = mrc_proto::encode(&h, body, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn blind_rst_is_dropped_or_challenged() {
    let (mut client, _server) = established();
    let rcv_nxt = client.rcv_nxt();
    let snd_nxt = client.snd_nxt();
    // Outside the window: dropped, no answer.
    for seq in [0, rcv_nxt - 1, rcv_nxt + WINDOW as u64, u64::MAX >> 2] {
        let rst = forge(true, PATH_ID, seq, snd_nxt, &Body::Rst);
        assert_eq!(
            feed(&mut client, MS, &rst),
            Input::Dropped(DropReason::BadRst),
            "seq {seq}"
        );
        assert!(drain(&mut client, MS).is_empty(), "seq {seq}");
    }
    assert_eq!(client.stats().challenge_acks, 0);
    // Within the window but not at its start: a challenge ACK, on the path it came by.
    let second = PathIds {
        path_id: PATH_ID + 1,
        plane: 1,
        entropy: 2,
    };
    let p1 = client.paths_mut().add(MS, second, false).unwrap();
    let rst = forge(true, PATH_ID + 1, rcv_nxt + 5, 0, &Body::Rst);
    assert_eq!(
        feed(&mut client, MS, &rst),
        Input::Dropped(DropReason::BadRst)
    );
    let ack = drain_tx(&mut client, MS);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].0.path, p1);
    assert_eq!(kind(&ack[0].1), PacketType::Ack);
    assert_eq!(header(&ack[0].1).ack, rcv_nxt);
    assert_eq!(client.state(), State::Established);
    // At most four challenge ACKs per 100 ms.
    for i in 0..10 {
        feed(&mut client, 2 * MS + i, &rst);
    }
    assert_eq!(client.stats().challenge_acks, 4);
    assert_eq!(drain(&mut client, 2 * MS + 10).len(), 1);
    feed(&mut client, 102 * MS, &rst);
    assert_eq!(client.stats().challenge_acks, 5);
    assert_eq!(client.state(), State::Established);
    // The exact sequence number resets.
    let rst = forge(true, PATH_ID, rcv_nxt, 0, &Body::Rst);
    assert_eq!(feed(&mut client, 103 * MS, &rst), Input::Consumed);
    assert_eq!(client.state(), State::Closed(Some(ConnError::Reset)));
}

#[test]
fn rst_in_syn_sent_must_answer_the_syn() {
    let mut client = new_conn(ConnConfig::default());
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let _syn = drain(&mut client, 0);
    for ack in [0, CLIENT_ISN - 1, CLIENT_ISN + 1] {
        let rst = forge(true, PATH_ID, 0, ack, &Body::Rst);
        assert_eq!(
            feed(&mut client, MS, &rst),
            Input::Dropped(DropReason::BadRst)
        );
        assert_eq!(client.state(), State::SynSent);
    }
    let rst = forge(true, PATH_ID, 12345, CLIENT_ISN, &Body::Rst);
    assert_eq!(feed(&mut client, MS, &rst), Input::Consumed);
    assert_eq!(client.state(), State::Closed(Some(ConnError::Refused)));
}

#[test]
fn rst_in_syn_received_needs_the_peer_isn() {
    let (_client, mut server) = syn_received();
    assert_eq!(kind(&drain(&mut server, 0)[0]), PacketType::SynAck);
    for seq in [0, CLIENT_ISN - 1, CLIENT_ISN + WINDOW as u64] {
        let rst = forge(false, PATH_ID, seq, SERVER_ISN, &Body::Rst);
        assert_eq!(
            feed(&mut server, MS, &rst),
            Input::Dropped(DropReason::BadRst)
        );
        assert!(drain(&mut server, MS).is_empty());
    }
    // Within the window: the SYN_ACK goes out again as the challenge.
    let rst = forge(false, PATH_ID, CLIENT_ISN + 1, 0, &Body::Rst);
    assert_eq!(
        feed(&mut server, MS, &rst),
        Input::Dropped(DropReason::BadRst)
    );
    let again = drain(&mut server, MS);
    assert_eq!(again.len(), 1);
    assert_eq!(kind(&again[0]), PacketType::SynAck);
    assert_eq!(header(&again[0]).ack, CLIENT_ISN);
    assert_eq!(server.state(), State::SynReceived);
    let rst = forge(false, PATH_ID, CLIENT_ISN, 0, &Body::Rst);
    assert_eq!(feed(&mut server, MS, &rst), Input::Consumed);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
}

#[test]
fn rst_in_time_wait_needs_the_exact_sequence_number() {
    let (mut client, mut server) = established();
    client.close(MS);
    exchange(&mut client, &mut server, MS);
    server.close(MS);
    exchange(&mut client, &mut server, MS);
    assert_eq!(client.state(), State::TimeWait);
    let rcv_nxt = client.rcv_nxt();
    let rst = forge(true, PATH_ID, rcv_nxt + 1, 0, &Body::Rst);
    assert_eq!(
        feed(&mut client, 2 * MS, &rst),
        Input::Dropped(DropReason::BadRst)
    );
    assert_eq!(client.state(), State::TimeWait);
    let ack = drain(&mut client, 2 * MS);
    assert_eq!(ack.len(), 1, "challenge ACK");
    assert_eq!(kind(&ack[0]), PacketType::Ack);
    let rst = forge(true, PATH_ID, rcv_nxt, 0, &Body::Rst);
    assert_eq!(feed(&mut client, 2 * MS, &rst), Input::Consumed);
    assert_eq!(client.state(), State::Closed(None));
}

#[test]
fn close_during_handshake_aborts() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let _ = drain(&mut c, 0);
    c.close(MS);
    assert_eq!(c.state(), State::Closed(None));
    let rst = drain(&mut c, MS);
    assert_eq!(kind(&rst[0]), PacketType::Rst);
    let mut idle = new_conn(ConnConfig::default());
    idle.close(0);
    assert_eq!(idle.state(), State::Closed(None));
}

#[test]
fn rst_in_synreceived_resets() {
    let (mut client, mut server) = syn_received();
    client.abort(0);
    let rst = drain(&mut client, 0);
    feed(&mut server, 0, &rst[0]);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
}

// ---------------------------------------------------------------------------------------------
// Direction
// ---------------------------------------------------------------------------------------------

/// Re-encodes a packet with its direction bit set or cleared, everything else unchanged.
fn with_passive(bytes: &[u8], passive: bool) -> Vec<u8> {
    let pkt = decode(bytes).unwrap();
    let mut h = pkt.header;
    h.flags = if passive {
        h.flags | Flags::PASSIVE
    } else {
        h.flags.without(Flags::PASSIVE)
    };
    let mut buf = vec![0u8; bytes.len()];
    let n = mrc_proto::encode(&h, &pkt.body, &mut buf).unwrap();
    assert_eq!(n, bytes.len());
    buf
}

/// Type and direction bit of every packet each end sent: `[client, server]`.
type Log = [Vec<(PacketType, bool)>; 2];

fn log_packets(log: &mut Log, from: usize, pkts: &[Vec<u8>]) {
    for p in pkts {
        log[from].push((kind(p), header(p).flags.passive()));
    }
}

/// Like `exchange`, recording every packet in `log`.
fn exchange_logged(client: &mut Conn, server: &mut Conn, now: u64, log: &mut Log) {
    for _ in 0..1000 {
        let x = drain(client, now);
        let y = drain(server, now);
        if x.is_empty() && y.is_empty() {
            return;
        }
        log_packets(log, 0, &x);
        log_packets(log, 1, &y);
        feed_all(server, now, &x);
        feed_all(client, now, &y);
    }
    panic!("exchange did not settle");
}

#[test]
fn direction_bit_marks_the_accepting_end() {
    let mut log: Log = [vec![], vec![]];
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    assert!(!client.is_passive() && !server.is_passive());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    assert!(!client.is_passive());
    let syn = drain(&mut client, 0);
    log_packets(&mut log, 0, &syn);
    server
        .accept(10 * US, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    assert!(server.is_passive());
    // The accepting end leaves idle paths to the connecting end's probes; here both ends
    // probe, so that each sends PROBE and PROBE_ACK.
    server.paths_mut().set_heartbeat_yield(false);
    // Handshake, messages both ways (DATA and ACK).
    exchange_logged(&mut client, &mut server, 20 * US, &mut log);
    assert_eq!(client.state(), State::Established);
    assert_eq!(server.state(), State::Established);
    client.send_message(3000).unwrap();
    server.send_message(3000).unwrap();
    let mut now = MS;
    exchange_logged(&mut client, &mut server, now, &mut log);
    // Idle heartbeats from both ends (PROBE and PROBE_ACK).
    let sent = |log: &Log, from: usize, ty: PacketType| log[from].iter().any(|&(t, _)| t == ty);
    for _ in 0..100 {
        let done =
            (0..2).all(|i| sent(&log, i, PacketType::Probe) && sent(&log, i, PacketType::ProbeAck));
        if done {
            break;
        }
        now = client
            .next_timeout(now)
            .into_iter()
            .chain(server.next_timeout(now))
            .min()
            .unwrap();
        client.on_timeout(now);
        server.on_timeout(now);
        exchange_logged(&mut client, &mut server, now, &mut log);
    }
    // Orderly close from both ends (FIN).
    client.close(now);
    exchange_logged(&mut client, &mut server, now, &mut log);
    server.close(now);
    exchange_logged(&mut client, &mut server, now, &mut log);
    assert_eq!(client.state(), State::TimeWait);
    assert_eq!(server.state(), State::Closed(None));
    assert!(!client.is_passive() && server.is_passive());
    // Aborts (RST).
    let (mut client, mut server) = established();
    client.abort(MS);
    server.abort(MS);
    log_packets(&mut log, 0, &drain(&mut client, MS));
    log_packets(&mut log, 1, &drain(&mut server, MS));

    for (from, passive) in [(0, false), (1, true)] {
        for &(ty, bit) in &log[from] {
            assert_eq!(bit, passive, "end {from} sent {ty} with PASSIVE {bit}");
        }
        for ty in PacketType::ALL {
            let expected = match ty {
                PacketType::Syn => from == 0,
                PacketType::SynAck => from == 1,
                // Sent by a listener's glue, never by a connection.
                PacketType::Retry => false,
                _ => true,
            };
            assert_eq!(sent(&log, from, ty), expected, "end {from}, {ty}");
        }
    }
}

#[test]
fn wrong_direction_is_dropped_as_invalid() {
    // Handshake: a SYN looped back to its sender, a SYN_ACK without the bit, a SYN_ACK looped
    // back to the accepting end.
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut client, 0);
    assert_eq!(
        feed(&mut client, 0, &syn[0]),
        Input::Dropped(DropReason::Invalid)
    );
    server
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    let synack = drain(&mut server, 0);
    assert_eq!(kind(&synack[0]), PacketType::SynAck);
    assert_eq!(
        feed(&mut server, 0, &synack[0]),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(
        feed(&mut server, 0, &with_passive(&syn[0], true)),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(
        feed(&mut client, 0, &with_passive(&synack[0], false)),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(client.state(), State::SynSent);
    assert_eq!(server.state(), State::SynReceived);
    assert_eq!(feed(&mut client, 0, &synack[0]), Input::Consumed);
    exchange(&mut client, &mut server, 0);
    assert_eq!(server.state(), State::Established);

    // DATA in both directions.
    client.send_message(100).unwrap();
    server.send_message(100).unwrap();
    let find_data = |pkts: Vec<Vec<u8>>| {
        pkts.into_iter()
            .find(|p| kind(p) == PacketType::Data)
            .unwrap()
    };
    let c_data = find_data(drain(&mut client, MS));
    let s_data = find_data(drain(&mut server, MS));
    for (c, d) in [(&mut client, &c_data), (&mut server, &s_data)] {
        // Its own packet looped back, and the peer's with the bit flipped.
        assert_eq!(feed(c, MS, d), Input::Dropped(DropReason::Invalid));
    }
    assert_eq!(
        feed(&mut server, MS, &with_passive(&c_data, true)),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(
        feed(&mut client, MS, &with_passive(&s_data, false)),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(server.rcv_nxt(), CLIENT_ISN);
    assert_eq!(client.rcv_nxt(), SERVER_ISN);
    assert_eq!(
        feed(&mut server, MS, &c_data),
        Input::Store { seq: CLIENT_ISN }
    );
    assert_eq!(
        feed(&mut client, MS, &s_data),
        Input::Store { seq: SERVER_ISN }
    );

    // An RST in the wrong direction resets nothing.
    client.abort(MS);
    let rst = drain(&mut client, MS);
    assert_eq!(kind(&rst[0]), PacketType::Rst);
    assert_eq!(
        feed(&mut server, MS, &with_passive(&rst[0], true)),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(server.state(), State::Established);
    assert_eq!(feed(&mut server, MS, &rst[0]), Input::Consumed);
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
}

#[test]
fn both_ends_on_one_host_are_told_apart() {
    // Both ends share the session id; the receiving host picks the connection by the session
    // id and the direction bit: a packet with PASSIVE is for the active end and vice versa.
    let mut ends = [
        new_conn(ConnConfig::default()),
        new_conn(ConnConfig::default()),
    ];
    ends[0].set_ports(CLIENT_PORT, SERVER_PORT);
    ends[0].connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let syn = drain(&mut ends[0], 0);
    ends[1]
        .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &[])
        .unwrap();
    let mut sent = [false; 2];
    let mut now = 0;
    for _ in 0..1000 {
        for (c, sent) in ends.iter_mut().zip(sent.iter_mut()) {
            if !*sent && c.state() == State::Established {
                c.send_message(5000).unwrap();
                *sent = true;
            }
        }
        let mut pkts = drain(&mut ends[0], now);
        pkts.extend(drain(&mut ends[1], now));
        if pkts.is_empty() {
            match ends.iter().filter_map(|c| c.next_timeout(now)).min() {
                Some(t) if t < 10 * MS => {
                    now = t;
                    for c in ends.iter_mut() {
                        c.on_timeout(now);
                    }
                    continue;
                }
                _ => break,
            }
        }
        for p in &pkts {
            let h = header(p);
            let to = ends
                .iter()
                .position(|c| c.session_id() == h.session_id && c.is_passive() != h.flags.passive())
                .expect("exactly one end takes the packet");
            assert_eq!(
                ends.iter()
                    .filter(
                        |c| c.session_id() == h.session_id && c.is_passive() != h.flags.passive()
                    )
                    .count(),
                1
            );
            let input = feed(&mut ends[to], now, p);
            assert!(
                !matches!(input, Input::Dropped(DropReason::Invalid)),
                "{:?} to end {to}",
                kind(p)
            );
        }
    }
    assert_eq!(sent, [true; 2]);
    for c in ends.iter_mut() {
        assert_eq!(c.state(), State::Established);
        let evs = events(c);
        assert!(messages(&evs).iter().any(|&(_, _, len)| len == 5000));
    }
}

#[test]
fn reply_rst_goes_to_the_opposite_role() {
    let (mut client, mut server) = established();
    client.send_message(10).unwrap();
    server.send_message(10).unwrap();
    let c_data = drain(&mut client, MS).remove(0);
    let s_data = drain(&mut server, MS).remove(0);
    assert!(!header(&c_data).flags.passive());
    assert!(header(&s_data).flags.passive());
    let mut buf = [0u8; MIN_TX_BUF];
    // Answering the active end's packet, the RST is from a passive end; and vice versa.
    let n = mrc_conn::reply_rst(&header(&c_data), &mut buf).unwrap();
    let to_client = buf[..n].to_vec();
    let n = mrc_conn::reply_rst(&header(&s_data), &mut buf).unwrap();
    let to_server = buf[..n].to_vec();
    assert_eq!(kind(&to_client), PacketType::Rst);
    assert_eq!(kind(&to_server), PacketType::Rst);
    assert!(header(&to_client).flags.passive());
    assert!(!header(&to_server).flags.passive());
    assert_eq!(header(&to_client).session_id, SESSION);
    // Each is taken only by the end whose packet it answers.
    assert_eq!(
        feed(&mut server, MS, &to_client),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(
        feed(&mut client, MS, &to_server),
        Input::Dropped(DropReason::Invalid)
    );
    assert_eq!(client.state(), State::Established);
    assert_eq!(server.state(), State::Established);
    assert_eq!(feed(&mut client, MS, &to_client), Input::Consumed);
    assert_eq!(feed(&mut server, MS, &to_server), Input::Consumed);
    assert_eq!(client.state(), State::Closed(Some(ConnError::Reset)));
    assert_eq!(server.state(), State::Closed(Some(ConnError::Reset)));
    // An RST is never answered, whatever its direction.
    assert_eq!(mrc_conn::reply_rst(&header(&to_client), &mut buf), None);
    assert_eq!(mrc_conn::reply_rst(&header(&to_server), &mut buf), None);
}

// ---------------------------------------------------------------------------------------------
// Probes, robustness, size
// ---------------------------------------------------------------------------------------------

#[test]
fn probe_is_answered_and_updates_path() {
    let (mut client, mut server) = established();
    let mut now = MS;
    // The idle heartbeat eventually probes the path.
    let mut probe = None;
    for _ in 0..10 {
        now = client.next_timeout(now).unwrap();
        client.on_timeout(now);
        if let Some(p) = drain(&mut client, now)
            .into_iter()
            .find(|p| kind(p) == PacketType::Probe)
        {
            probe = Some(p);
            break;
        }
    }
    let probe = probe.expect("a heartbeat probe");
    feed(&mut server, now, &probe);
    let ans = drain(&mut server, now);
    assert_eq!(kind(&ans[0]), PacketType::ProbeAck);
    feed(&mut client, now + 50 * US, &ans[0]);
    let p = client.paths().get(0).unwrap();
    assert_eq!(p.state(), PathState::Active);
    assert!(!p.probe_outstanding());
}

/// Runs `c`'s timers from `now` until it sends a PROBE on path `path`; returns the probe and
/// the time it left.
fn next_probe(c: &mut Conn, mut now: u64, path: PathIdx) -> (Vec<u8>, u64) {
    for _ in 0..100 {
        now = c.next_timeout(now).unwrap();
        c.on_timeout(now);
        if let Some((_, p)) = drain_tx(c, now)
            .into_iter()
            .find(|(t, p)| t.path == path && kind(p) == PacketType::Probe)
        {
            return (p, now);
        }
    }
    panic!("no probe on path {path}");
}

/// Re-encodes a PROBE_ACK with another path id, nonce or timestamp.
fn with_probe(bytes: &[u8], path_id: u32, nonce: u64, ts: u64) -> Vec<u8> {
    let pkt = decode(bytes).unwrap();
    let h = Header {
        path_id,
        ..pkt.header
    };
    let mut buf = [0u8; 256];
    let n = mrc_proto::encode(
        &h,
        &Body::ProbeAck(mrc_proto::Probe { nonce, ts }),
        &mut buf,
    )
    .unwrap();
    buf[..n].to_vec()
}

#[test]
fn probe_ack_counts_only_with_its_nonce_and_is_timed_locally() {
    let (mut client, mut server) = established();
    let (probe, t) = next_probe(&mut client, MS, 0);
    let Body::Probe(sent) = decode(&probe).unwrap().body else {
        panic!()
    };
    assert_eq!(sent.ts, t);
    // Nonces are keyed: neither a small counter nor the same for another key.
    assert!(sent.nonce > u64::from(u32::MAX));
    feed(&mut server, t, &probe);
    let ans = drain(&mut server, t);
    assert_eq!(kind(&ans[0]), PacketType::ProbeAck);
    let srtt = client.paths().get(0).unwrap().srtt_ns().unwrap();
    // A wrong nonce, or the right one on a path the probe did not go by, counts for nothing.
    let forged = [
        with_probe(&ans[0], PATH_ID, sent.nonce ^ 1, 0),
        with_probe(&ans[0], PATH_ID, 0, 0),
        with_probe(&ans[0], PATH_ID + 1, sent.nonce, 0),
    ];
    for f in &forged {
        assert_eq!(
            feed(&mut client, t + 10 * US, f),
            Input::Dropped(DropReason::BadProbe)
        );
    }
    let p = client.paths().get(0).unwrap();
    assert!(p.probe_outstanding());
    assert_eq!(p.srtt_ns(), Some(srtt));
    // The genuine answer, whatever time it claims, is timed from the probe's departure.
    let lying = with_probe(&ans[0], PATH_ID, sent.nonce, t - 500 * MS);
    assert_eq!(feed(&mut client, t + 50 * US, &lying), Input::Consumed);
    let p = client.paths().get(0).unwrap();
    assert!(!p.probe_outstanding());
    assert!(p.srtt_ns().unwrap() <= 50 * US, "srtt {:?}", p.srtt_ns());
    // An answer counts once.
    assert_eq!(
        feed(&mut client, t + 60 * US, &ans[0]),
        Input::Dropped(DropReason::BadProbe)
    );
    // Another key gives other nonces.
    let cfg = ConnConfig {
        nonce_key: [1, 2],
        ..ConnConfig::default()
    };
    let (mut other, _) = established_with(cfg, ConnConfig::default());
    let (probe2, _) = next_probe(&mut other, MS, 0);
    let Body::Probe(sent2) = decode(&probe2).unwrap().body else {
        panic!()
    };
    assert_ne!(sent2.nonce, sent.nonce);
}

#[test]
fn forged_probe_ack_does_not_revive_a_failed_path() {
    let (mut client, mut server) = established();
    let p1 = add_second_path(&mut client, &mut server, 1);
    client.on_send_error(2 * MS, p1);
    assert_eq!(client.paths().get(p1).unwrap().state(), PathState::Failed);
    // Whatever the nonce (the first ones a counter would have given, or none), with a
    // timestamp that would claim a 1 ns RTT.
    for nonce in 0..8 {
        let f = forge(
            true,
            PATH_ID + 1,
            SERVER_ISN,
            CLIENT_ISN,
            &Body::ProbeAck(mrc_proto::Probe {
                nonce,
                ts: 3 * MS - 1,
            }),
        );
        assert_eq!(
            feed(&mut client, 3 * MS, &f),
            Input::Dropped(DropReason::BadProbe)
        );
    }
    let p = client.paths().get(p1).unwrap();
    assert_eq!(p.state(), PathState::Failed);
    assert_eq!(p.srtt_ns(), None);
    // Its own probe's answer brings it back.
    let (probe, t) = next_probe(&mut client, 3 * MS, p1);
    feed(&mut server, t, &probe);
    let ans = drain(&mut server, t);
    assert_eq!(feed(&mut client, t + 30 * US, &ans[0]), Input::Consumed);
    let p = client.paths().get(p1).unwrap();
    assert_eq!(p.state(), PathState::Active);
    assert_eq!(p.srtt_ns(), Some(30 * US));
}

#[test]
fn poll_transmit_needs_a_large_enough_buffer() {
    let mut c = new_conn(ConnConfig::default());
    c.connect(0, SESSION, CLIENT_ISN, &[]).unwrap();
    let mut small = [0u8; 100];
    assert!(c.poll_transmit(0, &mut small).is_none());
    assert_eq!(drain(&mut c, 0).len(), 1);
}

#[test]
fn handshake_endpoints_are_exchanged() {
    let eps_c = [Endpoint::v4([10, 0, 0, 1], 6000, false)];
    let eps_s = [
        Endpoint::v4([10, 0, 1, 1], 6000, false),
        Endpoint::v4([10, 0, 2, 1], 6000, true),
    ];
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.connect(0, SESSION, CLIENT_ISN, &eps_c).unwrap();
    let syn = drain(&mut client, 0);
    let pkt = decode(&syn[0]).unwrap();
    let Body::Syn(hs) = pkt.body else { panic!() };
    assert_eq!(hs, Handshake::new(CLIENT_ISN, hs.rwnd, 0, 0, &eps_c));
    server.accept(0, &pkt, SERVER_ISN, &eps_s).unwrap();
    assert_eq!(server.peer_endpoints().collect::<Vec<_>>(), eps_c.to_vec());
    let synack = drain(&mut server, 0);
    feed(&mut client, 0, &synack[0]);
    assert_eq!(client.peer_endpoints().collect::<Vec<_>>(), eps_s.to_vec());
}

#[test]
fn handshake_endpoints_are_screened() {
    let v6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().octets();
    let good = Endpoint::v4([10, 0, 0, 2], 6000, false);
    let good6 = Endpoint::v6(v6("2001:db8::1"), 6000, false);
    let lo = Endpoint::v4([127, 0, 0, 1], 6000, false);
    let ll = Endpoint::v6(v6("fe80::1"), 6000, false);
    let offered = [
        Endpoint::v4([0, 0, 0, 0], 6000, false),
        Endpoint::v4([10, 0, 0, 1], 0, false),
        Endpoint::v4([224, 0, 0, 1], 6000, false),
        Endpoint::v4([255, 255, 255, 255], 6000, false),
        lo,
        good,
        Endpoint::v6(v6("ff02::1"), 6000, false),
        Endpoint::v6(v6("::ffff:10.0.0.3"), 6000, false),
        ll,
        good6,
    ];
    let run = |from: Option<Endpoint>| {
        let mut client = new_conn(ConnConfig::default());
        let mut server = new_conn(ConnConfig::default());
        if let Some(a) = from {
            server.set_handshake_peer(a);
            client.set_handshake_peer(a);
        }
        client.connect(0, SESSION, CLIENT_ISN, &offered).unwrap();
        let syn = drain(&mut client, 0);
        server
            .accept(0, &decode(&syn[0]).unwrap(), SERVER_ISN, &offered)
            .unwrap();
        let synack = drain(&mut server, 0);
        feed(&mut client, 0, &synack[0]);
        assert_eq!(client.state(), State::Established);
        let (c, s) = (
            client.peer_endpoints().collect::<Vec<_>>(),
            server.peer_endpoints().collect::<Vec<_>>(),
        );
        assert_eq!(c, s);
        assert_eq!(
            client.stats().endpoints_refused,
            server.stats().endpoints_refused
        );
        (s, server.stats().endpoints_refused)
    };
    assert_eq!(run(None), (vec![good, good6], 8));
    let public = Endpoint::v4([192, 0, 2, 1], 0, false);
    assert_eq!(run(Some(public)), (vec![good, good6], 8));
    let local = Endpoint::v4([127, 0, 0, 1], 0, false);
    assert_eq!(run(Some(local)), (vec![lo, good, good6], 7));
    let link = Endpoint::v6(v6("fe80::2"), 0, false);
    assert_eq!(run(Some(link)), (vec![good, ll, good6], 7));
}

#[test]
fn random_packets_never_panic() {
    // A hostile peer that knows the session id: arbitrary types, sequence numbers, acks,
    // bitmaps and windows, interleaved with timers.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..20 {
        let (mut client, mut server) = established();
        client.send_message(50_000).unwrap();
        let mut now = MS;
        let mut buf = vec![0u8; 4096];
        for _ in 0..2000 {
            now += rnd() % (200 * US);
            let near = |v: u64, r: u64| v.wrapping_add(r % 2100).wrapping_sub(1050);
            let h = Header {
                flags: Flags(0),
                session_id: SESSION,
                path_id: if rnd() % 4 == 0 {
                    rnd() as u32
                } else {
                    PATH_ID
                },
                seq: if rnd() % 8 == 0 {
                    rnd()
                } else {
                    near(SERVER_ISN, rnd())
                },
                ack: if rnd() % 8 == 0 {
                    rnd()
                } else {
                    near(CLIENT_ISN, rnd())
                },
                payload_len: 0,
            };
            // Mostly the right ports for one of the two ends, sometimes arbitrary ones.
            let (src_port, dst_port) = match rnd() % 4 {
                0 => (rnd() as u16, rnd() as u16),
                1 => (CLIENT_PORT, SERVER_PORT),
                _ => (SERVER_PORT, CLIENT_PORT),
            };
            let bitmap: Vec<u8> = (0..rnd() % 129).map(|_| rnd() as u8).collect();
            let payload: Vec<u8> = vec![0xAB; (rnd() % 1500) as usize];
            let body = match rnd() % 8 {
                0 => Body::Syn(Handshake::new(rnd(), rnd() as u32, src_port, dst_port, &[])),
                1 => Body::SynAck(Handshake::new(rnd(), rnd() as u32, src_port, dst_port, &[])),
                2 | 3 => Body::Ack(Sack::new(rnd(), rnd() as u32, h.ack, &bitmap)),
                4 => Body::data(&payload),
                5 => Body::Fin,
                6 => Body::Probe(mrc_proto::Probe {
                    nonce: rnd(),
                    ts: rnd() % (now + 1),
                }),
                _ => Body::ProbeAck(mrc_proto::Probe {
                    nonce: rnd(),
                    ts: rnd(),
                }),
            };
            // Mostly the direction the target accepts (PASSIVE towards the client), sometimes
            // the wrong one.
            let to_client = rnd() % 2 == 0;
            let mut flags = Flags(0);
            if to_client != (rnd() % 16 == 0) {
                flags |= Flags::PASSIVE;
            }
            if matches!(body, Body::Data(_)) {
                if rnd() % 2 == 0 {
                    flags |= Flags::FIRST;
                }
                if rnd() % 2 == 0 {
                    flags |= Flags::LAST;
                }
            }
            let h = Header { flags, ..h };
            let Ok(n) = mrc_proto::encode(&h, &body, &mut buf) else {
                continue;
            };
            let pkt = decode(&buf[..n]).unwrap();
            let target: &mut Conn = if to_client { &mut client } else { &mut server };
            target.handle_packet(now, &pkt);
            if rnd() % 3 == 0 {
                target.on_timeout(now);
            }
            if rnd() % 5 == 0 {
                let _ = target.send_message((rnd() % 5000) as u32);
            }
            if rnd() % 7 == 0 {
                target.release_recv(rnd() % 10_000, rnd() % 20_000);
            }
            let _ = drain(target, now);
            let _ = events(target);
            let _ = target.next_timeout(now);
        }
        let _ = round;
    }
}

#[test]
fn init_in_place_equals_new() {
    let odd = ConnConfig {
        mtu: 9000,
        rcvbuf: 12345,
        ack_every: 5,
        path: PathConfig {
            mss: 8000,
            miss_threshold: 7,
            ..PathConfig::default()
        },
        ..ConnConfig::default()
    };
    for cfg in [ConnConfig::default(), odd] {
        let fresh = Conn::new(cfg);
        let placed = in_place(cfg);
        assert_eq!(format!("{placed:?}"), format!("{fresh:?}"));
        assert_eq!(placed.config(), &cfg);
        assert_eq!(placed.paths().config(), &cfg.path);
        assert_eq!(placed.state(), State::Idle);
        assert!(placed.paths().is_empty());
        assert_eq!((placed.local_port(), placed.peer_port()), (0, 0));
    }
}

#[test]
fn init_in_place_fits_a_small_stack() {
    // A `Conn` is about 61 KiB, so building one by value on this 32 KiB stack would overflow.
    let t = std::thread::Builder::new()
        .stack_size(32 * 1024)
        .spawn(|| {
            let c = in_place(ConnConfig::default());
            c.state() == State::Idle && c.paths().is_empty()
        })
        .unwrap();
    assert!(t.join().unwrap());
    assert!(std::mem::size_of::<Conn>() > 32 * 1024);
}

#[test]
fn init_in_place_overwrites_a_used_connection() {
    // The same memory reinitialised after use (and dropped, which frees its path slots)
    // behaves as new.
    let (mut client, _server) = established();
    client.send_message(5000).unwrap();
    let _ = drain(&mut client, MS);
    let cfg = ConnConfig::default();
    let conn = Box::into_raw(client);
    // SAFETY: `conn` comes from a `Box<Conn>` and is dropped once, here; the memory stays
    // allocated, and is reused below as a `MaybeUninit<Conn>`.
    unsafe { std::ptr::drop_in_place(conn) };
    let raw = conn.cast::<MaybeUninit<Conn>>();
    // SAFETY: `raw` comes from a `Box<Conn>`, which has the layout of `MaybeUninit<Conn>`,
    // and what it holds need not be initialised.
    let mut slot = unsafe { Box::from_raw(raw) };
    let c = Conn::init_in_place(&mut slot, cfg);
    assert_eq!(format!("{c:?}"), format!("{:?}", Conn::new(cfg)));
}

#[test]
fn connections_built_in_place_behave_as_new() {
    // The same script on two pairs built either way ends in the same state.
    let run = |client: Box<Conn>, server: Box<Conn>| {
        let (mut client, mut server) = handshake(with_path(client), with_path(server));
        for len in [1, 3000, 70_000] {
            client.send_message(len).unwrap();
            server.send_message(len / 2 + 1).unwrap();
        }
        let mut now = MS;
        for _ in 0..200 {
            exchange(&mut client, &mut server, now);
            for c in [&mut client, &mut server] {
                for ev in events(c) {
                    if let Event::Message { len, cost, .. } = ev {
                        c.release_recv(u64::from(len), cost);
                    }
                }
                c.on_timeout(now);
            }
            now += 100 * US;
        }
        client.close(now);
        server.close(now);
        exchange(&mut client, &mut server, now);
        assert!(client.all_acked() && server.all_acked());
        (format!("{client:?}"), format!("{server:?}"))
    };
    let cfg = ConnConfig::default();
    let by_value = run(Box::new(Conn::new(cfg)), Box::new(Conn::new(cfg)));
    let placed = run(in_place(cfg), in_place(cfg));
    assert_eq!(placed, by_value);
    let mixed = run(in_place(cfg), Box::new(Conn::new(cfg)));
    assert_eq!(mixed, by_value);
}

#[test]
fn struct_size_is_documented() {
    // 162 208 B while every path slot was inline; now it holds the slots of its first
    // `PATH_CHUNK` paths and the others come in chunks (tests/alloc.rs), and what remains is
    // mostly the send ring (40 KiB).
    let size = std::mem::size_of::<Conn>();
    eprintln!("size_of::<Conn>() = {size}");
    assert!(size <= 68 * 1024, "Conn is {size} bytes");
    assert_eq!(WINDOW, 1024);
}

// ---------------------------------------------------------------------------------------------
// Paths added and removed while the connection runs
// ---------------------------------------------------------------------------------------------

#[test]
fn removed_path_resends_its_packets_on_the_others() {
    let (mut client, mut server) = established();
    let second = client
        .paths_mut()
        .add(
            40 * US,
            PathIds {
                path_id: 8,
                plane: 0,
                entropy: 2,
            },
            false,
        )
        .unwrap();
    assert_eq!(
        client.remove_path(40 * US, 99),
        Err(RemovePathError::NotFound)
    );
    let len = 3 * MSS as u32;
    client.send_message(len).unwrap();
    let first = drain_tx(&mut client, 50 * US);
    let on_first = first
        .iter()
        .filter(|(t, _)| t.path == 0 && t.data.is_some())
        .count();
    assert!(on_first > 0, "nothing in flight on the path to remove");
    let lost_before = client.stats().path_losses;
    assert_eq!(client.remove_path(60 * US, PATH_ID), Ok(0));
    assert!(client.paths().find(PATH_ID).is_none());
    assert_eq!(client.paths().len(), 1);
    // Everything in flight on the removed path counts as lost at once...
    assert_eq!(client.stats().path_losses - lost_before, on_first as u64);
    // ...and goes out again on the remaining path.
    let resent = drain_tx(&mut client, 60 * US);
    let data: Vec<_> = resent.iter().filter(|(t, _)| t.data.is_some()).collect();
    assert_eq!(data.len(), on_first);
    for (t, _) in &data {
        assert_eq!(t.path, second);
        assert!(t.data.is_some_and(|d| d.retransmit));
    }
    // The packets sent on the removed path never arrive: the server gets only those of the
    // remaining path and the retransmissions, and still has the whole message.
    for (_, b) in first.iter().filter(|(t, _)| t.path != 0) {
        feed(&mut server, 70 * US, b);
    }
    for (_, b) in &resent {
        feed(&mut server, 70 * US, b);
    }
    let got: Vec<u32> = messages(&events(&mut server)).iter().map(|m| m.2).collect();
    assert_eq!(got, vec![len]);
    exchange(&mut client, &mut server, 80 * US);
    assert!(client.all_acked());
    // The last path stays.
    assert_eq!(
        client.remove_path(90 * US, 8),
        Err(RemovePathError::LastPath)
    );
}

#[test]
fn heartbeat_changes_on_a_running_connection() {
    let (mut client, _server) = established();
    client.set_heartbeat_busy_ns(25 * MS);
    assert_eq!(client.config().path.heartbeat_busy_ns, 25 * MS);
    assert_eq!(client.paths().config().heartbeat_busy_ns, 25 * MS);
    client.set_heartbeat_busy_ns(0);
    assert_eq!(client.paths().config().heartbeat_busy_ns, 1);
}

/// The sender's time is split by what held it back: the application, the congestion window,
/// the peer's receive window; `send_times` counts the current limit up to the time asked.
#[test]
fn sender_time_is_accounted_per_limit() {
    let unpaced = ConnConfig {
        path: PathConfig {
            pacing: false,
            ..PathConfig::default()
        },
        ..ConnConfig::default()
    };
    let small = ConnConfig {
        rcvbuf: 20_000,
        max_msg: 4000,
        ..ConnConfig::default()
    };
    let (mut client, mut server) = established_with(unpaced, small);
    let at = |c: &Conn, now: u64, l: SendLimit| c.send_times(now)[l as usize];
    // The client first looked for data when it sent the handshake's last ACK at 20 us.
    assert_eq!(at(&client, MS, SendLimit::App), MS - 20 * US);
    assert_eq!(client.send_times(MS).iter().sum::<u64>(), MS - 20 * US);

    // Four messages fill the initial window of 10 packets: the window holds the rest back.
    for _ in 0..20 {
        client.send_message(4000).unwrap();
    }
    let data = drain(&mut client, MS);
    assert_eq!(data.len(), 10);
    assert_eq!(at(&client, 3 * MS, SendLimit::Cwnd), 2 * MS);
    assert_eq!(at(&client, 3 * MS, SendLimit::App), MS - 20 * US);

    // The server's application reads nothing: once its 20000 bytes are acknowledged the
    // peer's window, not the congestion window, holds the sender back.
    feed_all(&mut server, 3 * MS, &data);
    let acks = drain(&mut server, 3 * MS);
    feed_all(&mut client, 4 * MS, &acks);
    drain(&mut client, 4 * MS);
    feed_all(&mut server, 5 * MS, &drain(&mut client, 5 * MS));
    server.on_timeout(6 * MS);
    feed_all(&mut client, 6 * MS, &drain(&mut server, 6 * MS));
    drain(&mut client, 6 * MS);
    assert!(client.peer_rwnd() < 4000, "{}", client.peer_rwnd());
    let before = at(&client, 6 * MS, SendLimit::Rwnd);
    assert_eq!(at(&client, 9 * MS, SendLimit::Rwnd), before + 3 * MS);
    // Every nanosecond since the first look is in exactly one limit.
    assert_eq!(
        client.send_times(9 * MS).iter().sum::<u64>(),
        9 * MS - 20 * US
    );
}

#[test]
fn send_error_fails_the_path_at_once_and_resends_its_data_elsewhere() {
    let t0 = 2 * MS;
    let (mut client, mut server, p0, p1, tx) = sending_on_two_paths(1, t0);
    let seqs_on = |tx: &[(Transmit, Vec<u8>)], p: PathIdx| -> Vec<u64> {
        tx.iter()
            .filter(|(t, _)| t.path == p)
            .filter_map(|(t, _)| t.data.map(|d| d.seq))
            .collect()
    };
    let on1 = seqs_on(&tx, p1);
    assert!(!on1.is_empty() && !seqs_on(&tx, p0).is_empty());
    // The host cannot send on path 1 (its interface went down): it is Failed at once, and
    // what it had in flight is lost with it.
    let t1 = t0 + 10 * US;
    client.on_send_error(t1, p1);
    let p = client.paths().get(p1).unwrap();
    assert_eq!(p.state(), PathState::Failed);
    assert_eq!(p.state_reason(), StateReason::LocalDown);
    assert_eq!(client.stats().path_losses, on1.len() as u64);
    // A second report changes nothing.
    client.on_send_error(t1, p1);
    assert_eq!(client.stats().path_losses, on1.len() as u64);
    // Path 1's packets go again, on path 0 only, and with path 0's packets that arrived
    // every message is delivered.
    let mut delivered = Vec::new();
    for (_, d) in tx.iter().filter(|(t, _)| t.path == p0) {
        feed(&mut server, t1, d);
    }
    let mut t = t1;
    let mut resent = Vec::new();
    for _ in 0..200 {
        let out = drain_tx(&mut client, t);
        assert!(out.iter().all(|(x, _)| x.path != p1 || x.data.is_none()));
        resent.extend(seqs_on(&out, p0));
        for (_, d) in &out {
            feed(&mut server, t, d);
        }
        feed_all(&mut client, t + 20 * US, &drain(&mut server, t));
        delivered.extend(messages(&events(&mut server)));
        if delivered.len() == 16 {
            break;
        }
        t = client
            .next_timeout(t + 20 * US)
            .unwrap_or(t + 20 * US)
            .max(t + 20 * US);
        client.on_timeout(t);
    }
    assert_eq!(delivered.len(), 16, "{:?}", client.stats());
    assert!(on1.iter().all(|s| resent.contains(s)), "{on1:?} {resent:?}");
    assert_eq!(client.stats().rto_losses, 0);
}

#[test]
fn emit_data_head_seals_a_header_for_a_payload_elsewhere() {
    let (mut client, _server) = established();
    client.send_message(100).unwrap();
    let mut buf = vec![0u8; 2048];
    let tx = client.poll_transmit(0, &mut buf).unwrap();
    assert!(tx.data.is_some());
    let payload = [7u8; 100];
    for len in [HEADER_LEN - 1, HEADER_LEN + 1, 0] {
        let mut head = vec![0u8; len];
        assert!(
            mrc_conn::emit_data_head(&mut head, &buf, &tx).is_err(),
            "length {len}"
        );
    }
    let mut head = [0u8; HEADER_LEN];
    mrc_conn::emit_data_head(&mut head, &buf, &tx).unwrap();
    let mut pkt = head.to_vec();
    pkt.extend_from_slice(&payload);
    assert_eq!(
        mrc_proto::decode(&pkt).unwrap().body,
        mrc_proto::Body::data(&payload[..])
    );
    // A header whose fields differ from the plan's does not decode.
    head[20] ^= 1;
    pkt[..HEADER_LEN].copy_from_slice(&head);
    assert!(mrc_proto::decode(&pkt).is_err());
    // A control packet's plan is not a DATA packet's.
    let ack = mrc_conn::Transmit { data: None, ..tx };
    assert!(mrc_conn::emit_data_head(&mut head, &buf, &ack).is_err());
}

// ---------------------------------------------------------------------------------------------
// Validation of the paths to the endpoints the peer announces
// ---------------------------------------------------------------------------------------------

const C0: Endpoint = Endpoint::v4([10, 0, 0, 1], 6000, false);
const C1: Endpoint = Endpoint::v4([10, 0, 1, 1], 6000, false);
const S0: Endpoint = Endpoint::v4([10, 0, 0, 2], 6000, false);
const S1: Endpoint = Endpoint::v4([10, 0, 1, 2], 6000, false);

/// An established pair that announced two endpoints each, C0 and C1, S0 and S1; the handshake
/// went between C0 and S0 on the test path.
fn established_announcing() -> (Box<Conn>, Box<Conn>) {
    let mut client = new_conn(ConnConfig::default());
    let mut server = new_conn(ConnConfig::default());
    client.set_handshake_peer(S0);
    server.set_handshake_peer(C0);
    client.set_ports(CLIENT_PORT, SERVER_PORT);
    client.connect(0, SESSION, CLIENT_ISN, &[C0, C1]).unwrap();
    let syn = drain(&mut client, 0);
    server
        .accept(10 * US, &decode(&syn[0]).unwrap(), SERVER_ISN, &[S0, S1])
        .unwrap();
    let synack = drain(&mut server, 10 * US);
    feed(&mut client, 20 * US, &synack[0]);
    let ack = drain(&mut client, 20 * US);
    feed(&mut server, 30 * US, &ack[0]);
    assert_eq!(events(&mut client), vec![Event::Connected]);
    assert_eq!(events(&mut server), vec![Event::Connected]);
    (client, server)
}

/// Path ids of the paths `add_planes` adds: one more to the handshake's endpoints, two to
/// the second ones.
const SAME: u32 = PATH_ID + 1;
const OTHER: u32 = PATH_ID + 2;
const OTHER2: u32 = PATH_ID + 3;

/// Adds the paths of two planes at both ends, as the glue does from the endpoints: a second
/// path between C0 and S0, two between C1 and S1. Returns the client's indices of them.
fn add_planes(client: &mut Conn, server: &mut Conn, now: u64) -> [PathIdx; 3] {
    let ids = |path_id, plane| PathIds {
        path_id,
        plane,
        entropy: path_id as u16,
    };
    let mut out = [0; 3];
    for (k, (id, plane, c, s)) in [(SAME, 0, S0, C0), (OTHER, 1, S1, C1), (OTHER2, 1, S1, C1)]
        .into_iter()
        .enumerate()
    {
        out[k] = client
            .add_peer_path(now, ids(id, plane), false, &c)
            .unwrap();
        server
            .add_peer_path(now, ids(id, plane), false, &s)
            .unwrap();
    }
    out
}

/// Fires `c`'s timers due at `now` and returns what it sends.
fn step(c: &mut Conn, now: u64) -> Vec<(Transmit, Vec<u8>)> {
    c.on_timeout(now);
    drain_tx(c, now)
}

fn data_on(tx: &[(Transmit, Vec<u8>)], paths: &[PathIdx]) -> usize {
    tx.iter()
        .filter(|(t, _)| t.data.is_some() && paths.contains(&t.path))
        .count()
}

fn unvalidated(c: &Conn, idx: PathIdx) -> bool {
    let p = c.paths().get(idx).unwrap();
    !p.is_validated() && p.state() != PathState::Active
}

#[test]
fn an_announced_path_carries_no_data_until_its_probe_is_answered() {
    let (mut client, mut server) = established_announcing();
    let [same, p1, p1b] = add_planes(&mut client, &mut server, 40 * US);
    // The handshake proved S0: a second path there is validated at once.
    let p = client.paths().get(same).unwrap();
    assert!(p.is_validated());
    assert_eq!(p.state(), PathState::Active);
    for idx in [p1, p1b] {
        let p = client.paths().get(idx).unwrap();
        assert!(!p.is_validated());
        assert_eq!(p.state(), PathState::Suspect);
        assert_eq!(p.state_reason(), StateReason::Unvalidated);
    }
    // More than the validated paths' windows hold: none of it goes to S1, which is probed.
    for _ in 0..64 {
        client.send_message(1300).unwrap();
    }
    let tx = step(&mut client, 50 * US);
    assert!(data_on(&tx, &[0, same]) > 0);
    assert_eq!(data_on(&tx, &[p1, p1b]), 0, "data to an address not proven");
    let probe = tx
        .iter()
        .find(|(t, b)| t.path == p1 && kind(b) == PacketType::Probe)
        .map(|(_, b)| b.clone())
        .expect("a probe on the unvalidated path");
    assert!(tx
        .iter()
        .any(|(t, b)| t.path == p1b && kind(b) == PacketType::Probe));
    assert_eq!(header(&probe).path_id, OTHER);
    // Nothing more goes there while the probe is out, whatever the windows.
    let more = step(&mut client, 60 * US);
    assert_eq!(data_on(&more, &[p1, p1b]), 0);
    // The server answers on its path of that id, which it has not validated itself: a probe
    // answer may go there.
    feed(&mut server, 70 * US, &probe);
    let ans = drain_tx(&mut server, 70 * US);
    assert_eq!(ans.len(), 1);
    assert_eq!(kind(&ans[0].1), PacketType::ProbeAck);
    assert_eq!(header(&ans[0].1).path_id, OTHER);
    assert_eq!(feed(&mut client, 90 * US, &ans[0].1), Input::Consumed);
    // S1 is proven: both paths to it carry data from now on.
    for idx in [p1, p1b] {
        let p = client.paths().get(idx).unwrap();
        assert!(p.is_validated());
        assert_eq!(p.state(), PathState::Active);
        assert_eq!(p.state_reason(), StateReason::ProbeAnswered);
    }
    // They start as new paths do, without an RTT: while the fast paths to S0 have room,
    // the scheduler keeps to those. Without them, data goes to S1.
    client.on_send_error(95 * US, 0);
    client.on_send_error(95 * US, same);
    for _ in 0..32 {
        client.send_message(1300).unwrap();
    }
    let tx = step(&mut client, 100 * US);
    assert!(
        data_on(&tx, &[p1, p1b]) > 0,
        "no data on the validated paths"
    );
    // The server, which still has its own probe of OTHER out, takes the data that came by
    // it, and acknowledges it by that path, within its validation credit: the data paid for
    // far more.
    let sidx = server.paths().find(OTHER).unwrap();
    assert!(!server.paths().get(sidx).unwrap().is_validated());
    let mut n = 0;
    for (t, b) in &tx {
        if t.path == p1 && t.data.is_some() {
            assert!(matches!(
                feed(&mut server, 110 * US, b),
                Input::Store { .. }
            ));
            n += 1;
        }
    }
    assert!(n > 0);
    let credit = server.paths().validation_credit();
    let acks = drain_tx(&mut server, 110 * US);
    let on_other: Vec<_> = acks.iter().filter(|(t, _)| t.path == sidx).collect();
    assert!(!on_other.is_empty());
    let mut spent = 0;
    for (_, b) in &on_other {
        assert_eq!(kind(b), PacketType::Ack);
        spent += b.len() as u64;
    }
    assert_eq!(server.paths().validation_credit(), credit - spent);
}

#[test]
fn a_forged_probe_ack_does_not_validate_a_path() {
    let (mut client, mut server) = established_announcing();
    let [_, p1, _] = add_planes(&mut client, &mut server, 40 * US);
    let tx = step(&mut client, 50 * US);
    let probe0 = tx
        .iter()
        .find(|(t, b)| t.path == p1 && kind(b) == PacketType::Probe)
        .map(|(_, b)| b.clone())
        .unwrap();
    let Body::Probe(sent) = decode(&probe0).unwrap().body else {
        panic!()
    };
    feed(&mut server, 60 * US, &probe0);
    let ans = drain(&mut server, 60 * US);
    // Wrong nonces, and the right one by another path (an answer of a validated path's
    // probe, say, with the unvalidated path's id, or this one's by the validated path).
    let forged = [
        with_probe(&ans[0], OTHER, sent.nonce ^ 1, sent.ts),
        with_probe(&ans[0], OTHER, 0, sent.ts),
        with_probe(&ans[0], OTHER, sent.nonce.wrapping_add(1), sent.ts),
        with_probe(&ans[0], PATH_ID, sent.nonce, sent.ts),
        with_probe(&ans[0], SAME, sent.nonce, sent.ts),
    ];
    for f in &forged {
        assert_eq!(
            feed(&mut client, 70 * US, f),
            Input::Dropped(DropReason::BadProbe)
        );
    }
    assert!(unvalidated(&client, p1));
    for _ in 0..64 {
        client.send_message(1300).unwrap();
    }
    let tx = step(&mut client, 80 * US);
    assert_eq!(data_on(&tx, &[p1]), 0);
    // The genuine answer validates it, once.
    assert_eq!(feed(&mut client, 90 * US, &ans[0]), Input::Consumed);
    assert!(client.paths().get(p1).unwrap().is_validated());
    assert_eq!(
        feed(&mut client, 95 * US, &ans[0]),
        Input::Dropped(DropReason::BadProbe)
    );
}

#[test]
fn an_unanswered_validation_fails_and_its_probes_stay_within_the_credit() {
    let (mut client, mut server) = established_announcing();
    let [_, p1, p1b] = add_planes(&mut client, &mut server, 40 * US);
    // What the client received from the server so far: the SYN_ACK, with two endpoints.
    let mut received = (HEADER_LEN + 17 + 2 * 20) as u64;
    let mut to_s1 = 0u64;
    let mut probes_to_s1 = 0;
    let mut now = 50 * US;
    let mut next_ping = 500 * MS;
    let ping = forge(
        true,
        PATH_ID,
        SERVER_ISN,
        CLIENT_ISN,
        &Body::Probe(mrc_proto::Probe { nonce: 1, ts: 0 }),
    );
    // S1 never answers. For 500 ms the server sends nothing else either; then it probes the
    // handshake's path every 10 ms, which pays for probes to S1 too.
    while now < 2_500 * MS {
        if now >= next_ping {
            feed(&mut client, now, &ping);
            received += ping.len() as u64;
            next_ping += 10 * MS;
        }
        for (t, b) in step(&mut client, now) {
            if t.path == p1 || t.path == p1b {
                assert_eq!(kind(&b), PacketType::Probe);
                to_s1 += b.len() as u64;
                probes_to_s1 += 1;
            }
        }
        assert!(
            to_s1 <= 3 * received,
            "{to_s1} bytes to S1 for {received} received"
        );
        if now < 500 * MS {
            assert!(unvalidated(&client, p1) && unvalidated(&client, p1b));
        }
        let t = client.next_timeout(now).unwrap_or(u64::MAX).min(next_ping);
        now = t.max(now + 1);
    }
    // Probed at a bounded rate: three probes each until Failed, then one per failed-path
    // interval (at most 100 ms) at most.
    assert!(probes_to_s1 >= 6);
    assert!(probes_to_s1 <= 2 * (3 + 20 + 1), "{probes_to_s1} probes");
    for idx in [p1, p1b] {
        let p = client.paths().get(idx).unwrap();
        assert_eq!(p.state(), PathState::Failed);
        assert_eq!(p.state_reason(), StateReason::Unvalidated);
        assert!(!p.is_validated());
    }
    // An answer to a later probe validates the path after all.
    let (probe, at) = next_probe(&mut client, now, p1);
    feed(&mut server, at, &probe);
    let ans = drain(&mut server, at);
    assert_eq!(feed(&mut client, at + 50 * US, &ans[0]), Input::Consumed);
    for idx in [p1, p1b] {
        assert_eq!(client.paths().get(idx).unwrap().state(), PathState::Active);
    }
}

#[test]
fn failover_goes_only_to_validated_paths() {
    let (mut client, mut server) = established_announcing();
    let [same, p1, p1b] = add_planes(&mut client, &mut server, 40 * US);
    for _ in 0..8 {
        client.send_message(1300).unwrap();
    }
    let first = step(&mut client, 50 * US);
    assert!(data_on(&first, &[0]) > 0);
    // The handshake's path fails: its data moves to the other validated path at once.
    client.on_send_error(60 * US, 0);
    let resent = drain_tx(&mut client, 60 * US);
    assert!(resent
        .iter()
        .any(|(t, _)| t.path == same && t.data.is_some_and(|d| d.retransmit)));
    assert_eq!(data_on(&resent, &[p1, p1b]), 0);
    // That one fails too: the data waits rather than go to S1, which is not proven.
    client.on_send_error(70 * US, same);
    let mut now = 70 * US;
    for _ in 0..20 {
        let tx = step(&mut client, now);
        assert_eq!(data_on(&tx, &[p1, p1b]), 0);
        now += 100 * US;
    }
    assert_eq!(client.paths().paths_in_state(PathState::Active), 0);
}

#[test]
fn paths_to_the_handshake_address_need_no_validation() {
    // The accepting end: its handshake's address is the SYN's source.
    let (mut client, mut server) = established_announcing();
    let ids = PathIds {
        path_id: SAME,
        plane: 0,
        entropy: 9,
    };
    let s = server.add_peer_path(40 * US, ids, false, &C0).unwrap();
    assert!(server.paths().get(s).unwrap().is_validated());
    // Another port of the same host is another address.
    let ids = PathIds {
        path_id: OTHER,
        ..ids
    };
    let other_port = Endpoint::v4([10, 0, 0, 2], 6001, false);
    let c = client
        .add_peer_path(40 * US, ids, false, &other_port)
        .unwrap();
    assert!(unvalidated(&client, c));
}

/// A copy that proved needless widens the hedge wait of every path of its plane, which
/// share its queues, and leaves the paths of other planes as they were.
#[test]
fn a_needless_copy_widens_the_hedge_wait_of_its_plane() {
    let t0 = 2 * MS;
    let (mut client, mut server, p0, p1, tx) = sending_on_two_paths(0, t0);
    let other = PathIds {
        path_id: PATH_ID + 2,
        plane: 1,
        entropy: 3,
    };
    server.paths_mut().add(MS, other, false).unwrap();
    let p2 = client.paths_mut().add(MS, other, false).unwrap();
    let mult = |c: &Conn, p, now| c.paths().extra(p).unwrap().hedge_mult(now);
    let (on0, on1) = (sent_on(&tx, p0), sent_on(&tx, p1));
    assert!(
        !on0.is_empty() && !on1.is_empty(),
        "{} {}",
        on0.len(),
        on1.len()
    );
    // Path 0's packets are held up; path 1's, sent after them, arrive and are acknowledged.
    let t1 = t0 + 30 * US;
    for (_, d) in &on1 {
        feed(&mut server, t1, d);
    }
    feed_all(&mut client, t1 + 30 * US, &drain(&mut server, t1));
    // Path 0's packets become overdue and get copies on another path.
    let mut t = t1 + 30 * US;
    let mut copies = Vec::new();
    while copies.is_empty() {
        t = client.next_timeout(t).unwrap().max(t + 1);
        assert!(t < t0 + 10 * MS, "no copy: {:?}", client.stats());
        client.on_timeout(t);
        copies.extend(
            drain_tx(&mut client, t)
                .into_iter()
                .filter(|(t, _)| t.data.is_some_and(|d| d.retransmit))
                .map(|(_, d)| d),
        );
    }
    assert!(client.stats().hedges > 0, "{:?}", client.stats());
    assert_eq!(client.stats().rack_losses, 0, "copies, not losses");
    // The copies arrive, then the originals after all: the peer reports those as
    // duplicates, which shows the copies were needless.
    let t2 = t + 50 * US;
    feed_all(&mut server, t2, &copies);
    let mut acks = drain(&mut server, t2);
    for (_, d) in &on0 {
        feed(&mut server, t2, d);
        acks.extend(drain(&mut server, t2));
    }
    feed_all(&mut client, t2 + 30 * US, &acks);
    let now = t2 + 30 * US;
    assert!(client.stats().spurious_hedges > 0, "{:?}", client.stats());
    assert_eq!(mult(&client, p0, now), 2, "the copied path's wait doubles");
    assert_eq!(
        mult(&client, p1, now),
        2,
        "so does its plane's other path's"
    );
    assert_eq!(mult(&client, p2, now), 1, "another plane's is unchanged");
}
