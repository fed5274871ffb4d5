#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Forged MRC packets, as an attacker who knows a session id would send them.

Ordinary UDP sockets only: nothing here needs a privilege, so the tests can
run it as an unprivileged user. Each subcommand prints one result line.
"""
import argparse
import errno
import ipaddress
import os
import random
import select
import selectors
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mrc_util import (HDR, MAGIC, PASSIVE, VERSION, covered, crc32c,  # noqa: E402
                      mrc_accept, mrc_bind, mrc_connect, mrc_socket)

TYPES = {"syn": 1, "syn_ack": 2, "ack": 3, "data": 4, "fin": 5, "rst": 6,
         "probe": 7, "probe_ack": 8}
FIRST_LAST = 0x300
ACK_BODY = struct.Struct("!QQIIH")
PROBE_BODY = struct.Struct("!QQ")
HS_FIXED = struct.Struct("!QIHHB")
ENDPOINT = struct.Struct("!BBH16s")


def rand64(limit=1 << 62):
    return int.from_bytes(os.urandom(8), "big") % limit


def seal(flags, sid, path, seq, ack, body, crc=crc32c):
    hdr = HDR.pack(MAGIC, VERSION, flags, sid, path, seq, ack, len(body), 0)
    return HDR.pack(MAGIC, VERSION, flags, sid, path, seq, ack, len(body),
                    crc(covered(hdr, body))) + body


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c_fast(data):
    """crc32c() a byte at a time: fast enough to build thousands of packets
    in the emulated VM."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def forged(kind, sid, passive, path):
    """One packet of KIND for session SID with random numbers where the
    attacker has to guess."""
    flags = TYPES[kind] | (PASSIVE if passive else 0)
    seq, ack = rand64(), rand64()
    if kind == "data":
        flags |= FIRST_LAST
        body = b"forged" * 10
    elif kind == "ack":
        # A cumulative ack of 0 once in a while: below anything sent.
        if rand64(4) == 0:
            ack = 0
        body = ACK_BODY.pack(0, ack, rand64(1 << 32), 0, 0)
    elif kind == "probe_ack":
        body = PROBE_BODY.pack(rand64(1 << 64), time.monotonic_ns() - 1000)
    else:
        body = b""
    return seal(flags, sid, path, seq, ack, body)


def family_of(ip):
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def cmd_forge(args):
    """Sends COUNT forged packets of each KIND from SRC to DST:PORT."""
    sid = int(args.sid, 16)
    s = socket.socket(family_of(args.dst), socket.SOCK_DGRAM)
    if args.src:
        s.bind((args.src, args.sport))
    kinds = args.kinds.split(",")
    for kind in kinds:
        for i in range(args.count):
            path = args.path if args.path >= 0 else i % 8
            s.sendto(forged(kind, sid, args.passive, path), (args.dst, args.port))
    print(f"forged {len(kinds) * args.count}")


def cmd_unknown_flood(args):
    """Sends COUNT well-formed DATA packets for sessions nobody has, as fast
    as it can; prints how many and how long it took in microseconds."""
    s = socket.socket(family_of(args.dst), socket.SOCK_DGRAM)
    pkts = [seal(TYPES["data"] | FIRST_LAST, rand64(1 << 64), 1, rand64(), rand64(), b"x" * 16)
            for _ in range(args.count)]
    start = time.monotonic_ns()
    for p in pkts:
        s.sendto(p, (args.dst, args.port))
    took = (time.monotonic_ns() - start) // 1000
    print(f"sent {args.count} {took}")


def syn_packet(args, sid, token=0, crc=crc32c):
    """A SYN for session SID to MRC port ARGS.dport_mrc, announcing
    ARGS.endpoints (ADDR:PORT each), with retry token TOKEN (0: none)."""
    eps = b""
    for e in args.endpoints:
        ip, port = e.rsplit(":", 1)
        ip = ip.strip("[]")
        fam = family_of(ip)
        raw = socket.inet_pton(fam, ip).ljust(16, b"\0")
        eps += ENDPOINT.pack(6 if fam == socket.AF_INET6 else 4, 0, int(port), raw)
    body = HS_FIXED.pack(rand64(), 1 << 20, args.sport_mrc, args.dport_mrc, len(args.endpoints)) + eps
    return seal(TYPES["syn"], sid, 0, 0, token, body, crc)


def cmd_syn(args):
    """Sends one SYN for session SID (a new random one by default) to
    DST:PORT's MRC listener on MRC port DPORT, announcing the given endpoints
    (ADDR:PORT each)."""
    sid = int(args.sid, 16) if args.sid else rand64(1 << 64)
    s = socket.socket(family_of(args.dst), socket.SOCK_DGRAM)
    s.sendto(syn_packet(args, sid), (args.dst, args.port))
    print(f"syn {sid:016x}")


def inet_sum(data):
    """The one's complement sum of DATA as 16-bit words (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def cmd_spoof_syn(args):
    """Sends COUNT SYNs, each for a new session, to DST:PORT's MRC listener on
    MRC port DPORT with the forged IPv4 source SRC:SPORT (a raw socket: needs
    CAP_NET_RAW); prints how many, their bytes (UDP payload) and how long
    sending them took in microseconds.

    SRC may be a network (10.79.0.0/16): each SYN then comes from a random
    address in it and a random port. The SYNs are built first, then sent
    as fast as they go, or spread over SECONDS ("flooding" on stderr marks
    the start). With --token each carries a random retry token."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    net = ipaddress.ip_network(args.src, strict=False)
    dst = socket.inet_aton(args.dst)
    pkts = []
    for _ in range(args.count):
        if net.num_addresses > 1:
            src = socket.inet_aton(str(net[random.randrange(1, net.num_addresses - 1)]))
            sport = random.randrange(1024, 65536)
        else:
            src, sport = socket.inet_aton(args.src), args.sport
        token = (rand64(1 << 64) or 1) if args.token else 0
        payload = syn_packet(args, rand64(1 << 64), token, crc32c_fast)
        ulen = 8 + len(payload)
        udp = struct.pack("!HHHH", sport, args.port, ulen, 0) + payload
        pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_UDP, ulen)
        csum = (~inet_sum(pseudo + udp)) & 0xFFFF or 0xFFFF
        udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
        # The kernel fills in the IP checksum, the total length and the id.
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 0, 0, 0, 64, socket.IPPROTO_UDP, 0, src, dst)
        pkts.append((ip + udp, len(payload)))
    if args.seconds > 0:
        print("flooding", file=sys.stderr, flush=True)
    start = time.monotonic()
    sent = sent_bytes = 0
    for i, (p, n) in enumerate(pkts):
        if args.seconds > 0:
            wait = start + args.seconds * i / len(pkts) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        try:
            send_raw(s, p, args.dst)
        except OSError as e:
            print(f"sendto: {e}", file=sys.stderr, flush=True)
            break
        sent += 1
        sent_bytes += n
    took = int((time.monotonic() - start) * 1e6)
    print(f"sent {sent} {sent_bytes} {took}")


def send_raw(s, pkt, dst):
    """Sends PKT on the raw socket S, waiting out a full device queue."""
    for _ in range(1000):
        try:
            return s.sendto(pkt, (dst, 0))
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN):
                raise
            time.sleep(0.001)
    raise OSError(errno.ENOBUFS, "device queue full for a second")


def cmd_udp_count(args):
    """Counts the MRC datagrams (by their magic) arriving at ADDR:PORT, an
    ordinary UDP socket, from when it prints "listening" until SECONDS after
    the file GO exists; prints how many and their bytes (UDP payload)."""
    s = socket.socket(family_of(args.addr), socket.SOCK_DGRAM)
    s.bind((args.addr, args.port))
    print("listening", flush=True)
    n = total = 0
    end = None
    deadline = time.monotonic() + 600
    while True:
        now = time.monotonic()
        if end is None and os.path.exists(args.go):
            end = now + args.seconds
        stop = end if end is not None else deadline
        if now >= stop:
            break
        if select.select([s], [], [], min(0.1, stop - now))[0]:
            d = s.recv(65536)
            if len(d) >= 4 and struct.unpack("!I", d[:4])[0] == MAGIC:
                n += 1
                total += len(d)
    print(f"received {n} {total}")


def cmd_tiny_sink(args):
    """Accepts one connection on a socket with SO_RCVBUF RCVBUF and reads
    nothing until the file GO exists; then reads COUNT one-byte messages and
    checks each (message i holds i mod 256)."""
    s = mrc_socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    mrc_bind(s, args.addr, args.port)
    s.listen(1)
    print("listening", flush=True)
    if not select.select([s], [], [], 120)[0]:
        print("nobody connected")
        return
    c = mrc_accept(s)
    print(f"rcvbuf {c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}", flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(args.go):
        if time.monotonic() > deadline:
            print("never told to read")
            return
        time.sleep(0.1)
    c.settimeout(120)
    start = time.monotonic()
    for i in range(args.count):
        try:
            m = c.recv(16)
        except OSError as e:
            print(f"received {i} then {errno.errorcode.get(e.errno, str(e))} after "
                  f"{int((time.monotonic() - start) * 1000)} ms")
            return
        if m != bytes([i & 255]):
            print(f"received {i} bad: {m!r}")
            return
    print(f"received {args.count} ok")


def cmd_tiny_flood(args):
    """Sends COUNT one-byte messages as fast as the connection takes them;
    prints how many were taken before the sender had to wait STALL seconds,
    then sends the rest."""
    s = mrc_socket()
    mrc_connect(s, args.addr, args.port)
    stalled = None
    i = 0
    while i < args.count:
        try:
            s.send(bytes([i & 255]), socket.MSG_DONTWAIT)
            i += 1
            continue
        except BlockingIOError:
            pass
        except OSError as e:
            print(f"sending {i}: {errno.errorcode.get(e.errno, str(e))}")
            return
        ready = select.select([], [s], [], args.stall)[1]
        if not ready and stalled is None:
            stalled = i
            print(f"stalled {i}", flush=True)
        elif not ready:
            ready = select.select([], [s], [], 120)[1]
            if not ready:
                print(f"stuck at {i}")
                return
    print(f"sent {i} stalled {stalled if stalled is not None else 'never'}", flush=True)
    start = time.monotonic()
    try:
        s.shutdown(socket.SHUT_WR)
        s.settimeout(120)
        s.recv(16)
    except OSError as e:
        print(f"closing: {errno.errorcode.get(e.errno, str(e))} after "
              f"{int((time.monotonic() - start) * 1000)} ms")


def cmd_raw_flood(args):
    """A peer that ignores the window: connects to DST:PORT's listener on MRC
    port DPORT from SRC with a handshake of its own over a plain UDP socket
    (answering a RETRY if it gets one), then sends COUNT one-byte messages
    at once, without waiting for any acknowledgement or resending any;
    prints how many it sent, how many ACKs came back within 2 s and how
    many milliseconds the sending took."""
    s = socket.socket(family_of(args.dst), socket.SOCK_DGRAM)
    s.bind((args.src, 0))
    dst = (args.dst, args.port)
    sid = rand64(1 << 64)
    isn = rand64(1 << 61)
    token = 0
    peer_isn = None
    got = []
    ip, port = s.getsockname()[:2]
    fam = family_of(ip)
    ep = ENDPOINT.pack(6 if fam == socket.AF_INET6 else 4, 0, port,
                       socket.inet_pton(fam, ip).ljust(16, b"\0"))
    for _ in range(10):
        body = HS_FIXED.pack(isn, 1 << 20, args.sport_mrc, args.dport_mrc, 1) + ep
        # The initial sequence number is in the header too, where a RETRY echoes it.
        s.sendto(seal(TYPES["syn"], sid, 0, isn, token, body, crc32c_fast), dst)
        if not select.select([s], [], [], 2)[0]:
            got.append("nothing")
            continue
        data = s.recv(2048)
        _, _, flags, rsid, _, rseq, rack, _, _ = HDR.unpack(data[:HDR.size])
        got.append(f"type {flags & 0xFF} ack {rack:x}")
        if rsid != sid or rack != isn:
            continue
        if flags & 0xFF == 9:
            token = rseq
        elif flags & 0xFF == TYPES["syn_ack"]:
            peer_isn = HS_FIXED.unpack(data[HDR.size:HDR.size + HS_FIXED.size])[0]
            peer_isn &= (1 << 61) - 1
            break
    if peer_isn is None:
        print(f"no SYN_ACK (isn {isn:x}; got {', '.join(got)})")
        return
    start = time.monotonic()
    for i in range(args.count):
        pkt = seal(TYPES["data"] | FIRST_LAST, sid, 0, isn + i, peer_isn, bytes([i & 255]),
                   crc32c_fast)
        s.sendto(pkt, dst)
    took = time.monotonic() - start
    acks = 0
    end = time.monotonic() + 2
    while (left := end - time.monotonic()) > 0 and select.select([s], [], [], left)[0]:
        data = s.recv(2048)
        if len(data) >= HDR.size and HDR.unpack(data[:HDR.size])[2] & 0xFF == TYPES["ack"]:
            acks += 1
    print(f"sent {args.count} acks {acks} ms {int(took * 1000)}")


def cmd_never_close(args):
    """A peer that never finishes a close: accepts COUNT connections, then
    prints for each how it ended ("eof" at the client's FIN, "reset" at its
    RST), as it happens, but never closes one; waits for a signal."""
    lst = mrc_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(args.count)
    print("listening", flush=True)
    conns = []
    while len(conns) < args.count:
        if not select.select([lst], [], [], 120)[0]:
            print(f"accepted only {len(conns)}")
            return
        conns.append(mrc_accept(lst))
    print(f"accepted {len(conns)}", flush=True)
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c, selectors.EVENT_READ)
    while sel.get_map():
        for key, _ in sel.select():
            try:
                m = key.fileobj.recv(16)
            except ConnectionResetError:
                m = None
            if m:
                continue
            print("eof" if m == b"" else "reset", flush=True)
            sel.unregister(key.fileobj)
    # Holds the connections open until killed (bounded, should the test die).
    time.sleep(600)


def bind_result(ip, port):
    s = mrc_socket()
    try:
        mrc_bind(s, ip, port)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


def cmd_bind_rules(args):
    """What bind() answers for an address that is not the host's, for a
    privileged MRC port and for LOCAL:PORT; one line."""
    print(f"nonlocal={bind_result(args.nonlocal_ip, args.port)} "
          f"privileged={bind_result(args.local, 80)} "
          f"local={bind_result(args.local, args.port)}")


def cmd_listen(args):
    """Listens on ADDR:PORT with a backlog of BACKLOG, prints "listening",
    accepts nothing; exits after SECONDS."""
    s = mrc_socket()
    mrc_bind(s, args.addr, args.port)
    s.listen(args.backlog)
    print("listening", flush=True)
    time.sleep(args.seconds)


def cmd_connect(args):
    """Connects to ADDR:PORT; prints "connected" or the errno's name. With
    SECONDS, gives up after that long ("timeout") and prints how long the
    connect took in milliseconds after the result."""
    s = mrc_socket()
    start = time.monotonic()
    took = ""
    try:
        if args.seconds > 0:
            s.setblocking(False)
            try:
                mrc_connect(s, args.addr, args.port)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno != errno.EINPROGRESS:
                    raise
            if not select.select([], [s], [], args.seconds)[1]:
                raise TimeoutError
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, os.strerror(err))
        else:
            mrc_connect(s, args.addr, args.port)
        if args.seconds > 0:
            took = f" {int((time.monotonic() - start) * 1000)}"
        print(f"connected{took}")
    except TimeoutError:
        print(f"timeout {int((time.monotonic() - start) * 1000)}")
    except OSError as e:
        if args.seconds > 0:
            took = f" {int((time.monotonic() - start) * 1000)}"
        print(f"{errno.errorcode.get(e.errno, str(e.errno))}{took}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("forge")
    c.add_argument("dst")
    c.add_argument("port", type=int)
    c.add_argument("sid", help="session id, hex")
    c.add_argument("--kinds", default="rst,fin,data,ack,probe_ack")
    c.add_argument("--count", type=int, default=20)
    c.add_argument("--src", default="")
    c.add_argument("--sport", type=int, default=0)
    c.add_argument("--passive", action="store_true",
                   help="as if from the accepting end (to the connecting end)")
    c.add_argument("--path", type=int, default=-1, help="path id (default: 0..7 in turn)")
    c.set_defaults(fn=cmd_forge)
    c = sub.add_parser("unknown-flood")
    c.add_argument("dst")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.set_defaults(fn=cmd_unknown_flood)
    c = sub.add_parser("syn")
    c.add_argument("dst")
    c.add_argument("port", type=int)
    c.add_argument("dport_mrc", type=int)
    c.add_argument("endpoints", nargs="*")
    c.add_argument("--sport-mrc", type=int, default=40000)
    c.add_argument("--sid", default="", help="session id, hex (default: random)")
    c.set_defaults(fn=cmd_syn)
    c = sub.add_parser("spoof-syn")
    c.add_argument("dst")
    c.add_argument("port", type=int)
    c.add_argument("dport_mrc", type=int)
    c.add_argument("endpoints", nargs="*")
    c.add_argument("--src", required=True, help="address, or network for random ones")
    c.add_argument("--sport", type=int, default=0)
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--seconds", type=float, default=0)
    c.add_argument("--token", action="store_true")
    c.add_argument("--sport-mrc", type=int, default=40000)
    c.set_defaults(fn=cmd_spoof_syn)
    c = sub.add_parser("udp-count")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--seconds", type=float, default=8)
    c.add_argument("--go", required=True)
    c.set_defaults(fn=cmd_udp_count)
    c = sub.add_parser("tiny-sink")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--rcvbuf", type=int, default=65536)
    c.add_argument("--go", required=True)
    c.set_defaults(fn=cmd_tiny_sink)
    c = sub.add_parser("tiny-flood")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--stall", type=float, default=3)
    c.set_defaults(fn=cmd_tiny_flood)
    c = sub.add_parser("raw-flood")
    c.add_argument("dst")
    c.add_argument("port", type=int)
    c.add_argument("dport_mrc", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--src", default="")
    c.add_argument("--sport-mrc", type=int, default=40001)
    c.set_defaults(fn=cmd_raw_flood)
    c = sub.add_parser("never-close")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.set_defaults(fn=cmd_never_close)
    c = sub.add_parser("bind-rules")
    c.add_argument("nonlocal_ip")
    c.add_argument("local")
    c.add_argument("port", type=int)
    c.set_defaults(fn=cmd_bind_rules)
    c = sub.add_parser("listen")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--seconds", type=float, default=60)
    c.add_argument("--backlog", type=int, default=8)
    c.set_defaults(fn=cmd_listen)
    c = sub.add_parser("connect")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--seconds", type=float, default=0)
    c.set_defaults(fn=cmd_connect)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
