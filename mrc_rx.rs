// SPDX-License-Identifier: GPL-2.0

//! Receive: datagrams from a namespace's tunnel sockets to the connections
//! and listeners they are for.
//!
//! The tunnel socket hands over a GSO packet or GRO train as the run of
//! datagrams it was (see "The batched datapath" in `mrc_net`). Each
//! datagram's UDP and MRC headers are made linear, the rest only for
//! packets other than DATA; a DATA packet's header is checked here, where
//! the packet arrived, whether it is then taken at once or waits for the
//! task that holds its socket, and one that came without a UDP checksum,
//! the only check of its payload, is dropped (`drop_udp_checksum`);
//! consecutive datagrams for one connection go to it together
//! ([`mrc_sock::input`]), after one session lookup. A SYN goes
//! to the listener of its port; a packet for no connection is answered
//! with a rate-limited RST.

use crate::mrc_net::{
    check_data, decode_datagram, take_datagram, MrcNet, RxClock, SessionKey, RX_HEADERS_LEN,
    UDP_HLEN,
};
use crate::mrc_proto::{self, Body, DecodeError, Header, PacketType, SynId};
use crate::mrc_sock::{self, SynAdmit};
use crate::mrc_sys::{self, EncapHandler, SkBuff, SkbList, Sock, SockRef};

impl EncapHandler for MrcNet {
    /// Datagrams from a tunnel socket (softirq). Runs of consecutive
    /// datagrams for one connection go to it together: one session lookup
    /// and one turn of its lock for a GSO packet or a GRO train, and one
    /// acknowledgement at most.
    fn receive(&self, mut batch: SkbList, bad_csum: u32, unsplit: u32) {
        self.count_udp_checksum(bad_csum);
        self.count_unsplit(unsplit);
        let mut datagrams = 0u32;
        let mut run: Option<(SessionKey, SockRef, SkbList)> = None;
        let clock = RxClock::now();
        while let Some(mut skb) = batch.pop() {
            datagrams += 1;
            self.count_stack_wait(take_datagram(&mut skb, &clock));
            let len = skb.len();
            self.count_rx_datagram(len);
            // Only the headers are made linear first. A DATA packet's
            // payload stays where it arrived, in page fragments, and is
            // copied once, to the reader; other packets are small and are
            // made linear whole (see `decode_datagram`). A datagram whose
            // fixed header is not valid needs no more than that header.
            if !skb.pull(len.min(RX_HEADERS_LEN)) {
                self.count_no_memory();
                continue;
            }
            let head = skb.linear().get(UDP_HLEN..).unwrap_or(&[]);
            let Ok(h) = mrc_proto::peek_header(head) else {
                self.receive_unregistered(skb);
                continue;
            };
            if h.packet_type() != Some(PacketType::Data) {
                // No longer one is valid: its bytes are not worth gathering.
                if h.too_long((len as usize).saturating_sub(UDP_HLEN)) {
                    self.count_decode_drop(DecodeError::LengthMismatch);
                    continue;
                }
                if !skb.pull(len) {
                    self.count_no_memory();
                    continue;
                }
            } else if skb.udp_checksum_absent() {
                // The UDP checksum is all that covers a DATA payload
                // (see "Checksums" in `mrc_proto`).
                self.count_udp_checksum(1);
                continue;
            } else if let Err(e) = check_data(&mut skb) {
                // Other datagrams are small and are checked when decoded.
                self.count_decode_drop(e);
                continue;
            }
            // A packet from the accepting end is for the connecting end.
            let key = (h.session_id, !h.flags.passive());
            if let Some((_, _, b)) = run.as_mut().filter(|(k, _, _)| *k == key) {
                b.push(skb);
                continue;
            }
            match self.lookup_session(key.0, key.1) {
                Some(sk) => {
                    if let Some((_, prev, b)) = run.take() {
                        mrc_sock::input(&prev, self, b);
                    }
                    let mut b = SkbList::new();
                    b.push(skb);
                    run = Some((key, sk, b));
                }
                None => self.receive_unregistered(skb),
            }
        }
        if let Some((_, sk, b)) = run {
            mrc_sock::input(&sk, self, b);
        }
        if datagrams > 1 {
            self.count_rx_train();
        }
    }
}

impl MrcNet {
    /// A datagram for no registered connection, as [`decode_datagram`]
    /// takes it: a SYN for a listener, or answered with an RST.
    fn receive_unregistered(&self, skb: SkBuff) {
        let header = match decode_datagram(&skb) {
            Err(e) => {
                self.count_decode_drop(e);
                return;
            }
            Ok(pkt) => match pkt.body {
                Body::Syn(hs) => {
                    let port = hs.dst_port;
                    // A listener bound to one address hears only SYNs sent
                    // to it.
                    let dst = skb.udp_addrs().map(|a| a.dst);
                    let listener = self
                        .lookup_port(port)
                        .filter(|l| dst.is_some_and(|d| mrc_sock::listens_on(l, &d)));
                    if let Some(l) = listener {
                        let (syn, hs) = (pkt.header, (hs.initial_seq, hs.src_port, hs.dst_port));
                        self.syn_to_listener(&l, skb, &syn, hs);
                        return;
                    }
                    pkt.header
                }
                _ => pkt.header,
            },
        };
        self.count_no_session();
        if let Some(a) = skb.udp_addrs() {
            self.reply_rst(&a, &header);
        }
        // Anything not handed on is freed as a drop.
    }

    /// A SYN for no existing session to the listener `l`; `hs` is its
    /// handshake's initial sequence number, source and destination MRC
    /// ports. A SYN whose `ack` holds a retry token must hold the one this
    /// namespace made for it, in this time slot or the one before, or it is
    /// dropped (`drop_bad_token`); with a valid one its source is proven.
    /// The listener queues it, or wants a RETRY sent back, or is full
    /// (`drop_backlog`).
    fn syn_to_listener(&self, l: &Sock, skb: SkBuff, syn: &Header, hs: (u64, u16, u16)) {
        let Some(addrs) = skb.udp_addrs() else {
            return;
        };
        let (initial_seq, src_port, dst_port) = hs;
        let id = SynId {
            src: mrc_sock::endpoint(addrs.src, addrs.sport, false),
            dst: mrc_sock::endpoint(addrs.dst, addrs.dport, false),
            session_id: syn.session_id,
            initial_seq,
            src_port,
            dst_port,
        };
        let slot = mrc_sys::now_ns() / mrc_proto::RETRY_SLOT_NS;
        let proven = syn.ack != 0;
        if proven && !mrc_proto::retry_token_valid(self.retry_key(), slot, &id, syn.ack) {
            self.count_bad_token();
            return;
        }
        match mrc_sock::syn_received(l, skb, proven, self.syn_retry_pct()) {
            SynAdmit::Queued => {}
            SynAdmit::Full => self.count_syn_refused(),
            SynAdmit::Retry => {
                let token = mrc_proto::retry_token(self.retry_key(), slot, &id);
                self.send_retry(&addrs, syn, token);
            }
        }
    }
}
