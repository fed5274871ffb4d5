#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""SOCK_STREAM on AF_MRC: the semantics of a TCP socket, checked call by call.

`server ADDR PORT` serves the scripted connections of `client ADDR PORT`
(each starts with a 16-byte command); `sink ADDR PORT` and `source ADDR
PORT BYTES` move a verified byte stream for the transfer tests. Every check
prints "ok ..." or "FAIL ..."; the exit status is the number of failures.
"""
import argparse
import ctypes
import errno
import fcntl
import faulthandler
import hashlib
import os
import random
import select
import socket
import struct
import sys
import tempfile
import termios
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mrc_util import LIBC, Checker, family, libc_call, mrc_bind, mrc_connect  # noqa: E402

SIOCOUTQ = termios.TIOCOUTQ
CMD_LEN = 16


def stream_socket():
    return socket.socket(family(), socket.SOCK_STREAM, 0)


def accept(s):
    fd = libc_call(LIBC.accept, s.fileno(), None, None)
    return socket.socket(family(), socket.SOCK_STREAM, 0, fileno=fd)


def pattern(n, seed=0):
    """n pseudo-random bytes, the same for the same seed."""
    return random.Random(seed).randbytes(n)


def recv_exact(c, n, flags=0):
    out = bytearray()
    while len(out) < n:
        b = c.recv(min(n - len(out), 1 << 20), flags)
        if not b:
            break
        out += b
    return bytes(out)


def recv_all(c):
    out = bytearray()
    while True:
        b = c.recv(1 << 20)
        if not b:
            return bytes(out)
        out += b


def serve(c):
    """One scripted connection of cmd_client."""
    cmd = recv_exact(c, CMD_LEN).rstrip(b" ")
    if cmd == b"type":
        t = c.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
        c.sendall(struct.pack("<i", t))
    elif cmd == b"digest":
        # Reads in odd sizes, never aligned with the sender's writes.
        n, = struct.unpack("<Q", recv_exact(c, 8))
        h = hashlib.sha256()
        got = 0
        sizes = [1, 7, 4096, 65537, 1000, 300000, 13]
        i = 0
        while got < n:
            b = c.recv(min(sizes[i % len(sizes)], n - got))
            if not b:
                break
            h.update(b)
            got += len(b)
            i += 1
        c.sendall(struct.pack("<Q", got) + h.digest())
    elif cmd == b"drip":
        # 3 x 100,000 bytes, 500 ms apart.
        for i in range(3):
            c.sendall(pattern(100000, i))
            time.sleep(0.5)
        c.recv(1)
    elif cmd == b"lowat":
        c.sendall(b"a" * 500)
        time.sleep(1)
        c.sendall(b"b" * 600)
        c.recv(1)
    elif cmd == b"inq":
        c.sendall(b"q" * 1234)
        c.recv(1)
    elif cmd == b"halfclose":
        data = recv_all(c)
        c.sendall(b"got %d" % len(data))
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
    elif cmd == b"stall":
        # Reads nothing until the client says so, by creating the file it
        # names (at most a minute), then everything.
        go = stall_file(recv_exact(c, STALL_TOKEN_LEN))
        deadline = time.monotonic() + 60
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.05)
        recv_all(c)
    elif cmd == b"epoll":
        for i in range(3):
            c.recv(1)
            c.sendall(b"e" * 3000)
        c.recv(1)
    elif cmd == b"reset":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    return cmd


def cmd_server(args):
    """Serves cmd_client's connections, each in a thread of its own."""
    lst = stream_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(8)
    print("listening", flush=True)
    threads = []
    while True:
        c = accept(lst)
        peek = c.recv(CMD_LEN, socket.MSG_PEEK | socket.MSG_WAITALL)
        if peek.rstrip(b" ") == b"quit":
            c.close()
            break
        t = threading.Thread(target=serve, args=(c,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    lst.close()


STALL_TOKEN_LEN = 16


def stall_file(token):
    """The file whose creation ends the "stall" peer's wait."""
    return f"/tmp/mrc-stream-stall-{token.decode()}"


def connect(addr, port, cmd):
    s = stream_socket()
    mrc_connect(s, addr, port)
    s.sendall(cmd.ljust(CMD_LEN))
    return s


def cmd_client(args):
    ck = Checker()
    a, p = args.addr, args.port

    s = connect(a, p, b"type")
    ck.check("SO_TYPE", s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE), socket.SOCK_STREAM)
    ck.check("accepted socket's SO_TYPE", struct.unpack("<i", recv_exact(s, 4))[0],
             socket.SOCK_STREAM)
    s.close()

    # One 8 MiB write (8x the largest SEQPACKET message), read back in odd
    # sizes; then the same through writev and sendfile.
    data = pattern(8 << 20, 7)
    s = connect(a, p, b"digest")
    s.sendall(struct.pack("<Q", len(data)))
    n = s.send(data)
    ck.check("one 8 MiB write() is taken whole", n, len(data))
    got = recv_exact(s, 40)
    ck.check("8 MiB arrive intact, read in odd sizes",
             got == struct.pack("<Q", len(data)) + hashlib.sha256(data).digest(), True)
    s.close()

    parts = [pattern(100000, 1), pattern(1, 2), pattern(70000, 3)]
    total = sum(len(x) for x in parts)
    s = connect(a, p, b"digest")
    s.sendall(struct.pack("<Q", total))
    ck.check("writev() returns every byte", os.writev(s.fileno(), parts), total)
    ck.check("writev() data intact", recv_exact(s, 40)
             == struct.pack("<Q", total) + hashlib.sha256(b"".join(parts)).digest(), True)
    s.close()

    with tempfile.TemporaryFile() as f:
        f.write(data[:3 << 20])
        f.flush()
        s = connect(a, p, b"digest")
        s.sendall(struct.pack("<Q", 3 << 20))
        sent = 0
        while sent < 3 << 20:
            sent += os.sendfile(s.fileno(), f.fileno(), sent, (3 << 20) - sent)
        ck.check("sendfile() data intact", recv_exact(s, 40)
                 == struct.pack("<Q", 3 << 20) + hashlib.sha256(data[:3 << 20]).digest(), True)
        s.close()

    # MSG_WAITALL waits for the whole request across the sender's pauses;
    # without it a read returns what is there. MSG_PEEK leaves bytes queued.
    s = connect(a, p, b"drip")
    first = s.recv(300000)
    ck.check("read without MSG_WAITALL returns early", 0 < len(first) < 300000, True)
    rest = s.recv(300000 - len(first), socket.MSG_WAITALL)
    want = pattern(100000, 0) + pattern(100000, 1) + pattern(100000, 2)
    ck.check("MSG_WAITALL gets the rest in one read", (len(rest), first + rest == want),
             (300000 - len(first), True))
    s.sendall(b"x")
    s.close()

    s = connect(a, p, b"inq")
    time.sleep(0.5)
    inq = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]
    ck.check("FIONREAD (SIOCINQ)", inq, 1234)
    peek = s.recv(10, socket.MSG_PEEK)
    ck.check("MSG_PEEK", peek, b"q" * 10)
    s.recv(4)
    ck.check("partial read leaves the rest", s.recv(10, socket.MSG_PEEK), b"q" * 10)
    ck.check("MSG_TRUNC discards", len(s.recv(1000, socket.MSG_TRUNC)), 1000)
    inq = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]
    ck.check("FIONREAD after reads", inq, 230)
    ck.check("rest", s.recv(1000), b"q" * 230)
    try:
        s.recv(10, socket.MSG_DONTWAIT)
        ck.check("MSG_DONTWAIT on an empty queue", "data", "EAGAIN")
    except BlockingIOError:
        ck.check("MSG_DONTWAIT on an empty queue", "EAGAIN", "EAGAIN")
    s.sendall(b"x")
    s.close()

    # SO_RCVLOWAT: not readable (poll, read) until 1000 bytes are there.
    s = connect(a, p, b"lowat")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1000)
    po = select.poll()
    po.register(s.fileno(), select.POLLIN)
    time.sleep(0.2)
    ck.check("not readable below SO_RCVLOWAT", po.poll(100), [])
    t0 = time.monotonic()
    got = s.recv(4096)
    ck.check("read waits for SO_RCVLOWAT bytes", len(got), 1100)
    ck.check("that took the sender's pause", time.monotonic() - t0 > 0.1, True)
    s.sendall(b"x")
    s.close()

    # Half-close: the peer reads to EOF, answers, and closes its side.
    s = connect(a, p, b"halfclose")
    s.sendall(b"h" * 5000)
    s.shutdown(socket.SHUT_WR)
    ck.check("answer after our SHUT_WR", recv_all(s), b"got 5000")
    ck.errno_of("write after SHUT_WR", lambda: s.send(b"z", socket.MSG_NOSIGNAL), errno.EPIPE)
    s.close()

    # A reader that reads nothing: a non-blocking write returns what fit,
    # then EAGAIN; SIOCOUTQ counts the unacknowledged bytes; a blocking
    # write with SO_SNDTIMEO returns a partial count.
    s = connect(a, p, b"stall")
    token = os.urandom(STALL_TOKEN_LEN // 2).hex().encode()
    s.sendall(token)
    go = stall_file(token)
    s.setblocking(False)
    big = bytes(64 << 20)
    first = s.send(big)
    ck.check("non-blocking write is partial", 0 < first < len(big), True)
    total, eagain = first, False
    for _ in range(10000):
        try:
            total += s.send(big)
        except BlockingIOError:
            eagain = True
            break
    ck.check("then EAGAIN, before the peer read anything", (eagain, total < len(big)), (True, True))
    outq = struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQ, b"\0" * 4))[0]
    ck.check("SIOCOUTQ counts queued bytes", 0 < outq <= total, True)
    s.setblocking(True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 300000))
    t0 = time.monotonic()
    try:
        more = s.send(big)
        ck.check("blocking write with SO_SNDTIMEO is partial or EAGAIN",
                 0 <= more < len(big), True)
    except BlockingIOError:
        ck.check("blocking write with SO_SNDTIMEO is partial or EAGAIN", True, True)
    ck.check("it waited for the timeout", time.monotonic() - t0 > 0.25, True)
    # Room also comes while the peer's window takes what is in flight, which
    # on a slow machine lasts longer than the waits above. Wait until it is
    # full: a non-blocking write finds no room and SIOCOUTQ holds still for
    # a second. The peer reads nothing until told, however long that takes.
    s.setblocking(False)
    deadline, last, still = time.monotonic() + 30, -1, 0
    while still < 10 and time.monotonic() < deadline:
        try:
            s.send(big)
            still = 0
        except BlockingIOError:
            pass
        q = struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQ, b"\0" * 4))[0]
        still = still + 1 if q == last else 0
        last = q
        time.sleep(0.1)
    ck.check("the peer's window fills", still >= 10, True)
    # A writer that found no room is woken once the reader makes some, and
    # not before: edge-triggered EPOLLOUT.
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLET)
    ck.check("no EPOLLOUT while the peer reads nothing", ep.poll(0.2), [])
    with open(go, "w"):
        pass
    ev = ep.poll(15)
    os.unlink(go)
    ck.check("EPOLLOUT once the peer reads", len(ev) == 1 and bool(ev[0][1] & select.EPOLLOUT), True)
    ep.close()
    s.close()

    # epoll, edge triggered: one wakeup per arrival, none while idle.
    s = connect(a, p, b"epoll")
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)
    for i in range(3):
        s.send(b"g")
        ev = ep.poll(5)
        ck.check(f"epoll ET wakeup {i}", len(ev) == 1 and bool(ev[0][1] & select.EPOLLIN), True)
        ck.check(f"epoll ET data {i}", recv_exact(s, 3000) == b"e" * 3000, True)
        ck.check(f"epoll ET no wakeup when drained {i}", ep.poll(0.1), [])
    s.send(b"x")
    ep.close()
    s.close()

    # A reset connection: reads report ECONNRESET, then EOF.
    s = connect(a, p, b"reset")
    time.sleep(0.5)
    ck.errno_of("read from a reset connection", lambda: s.recv(10), errno.ECONNRESET)
    ck.errno_of("write to a reset connection", lambda: s.send(b"z", socket.MSG_NOSIGNAL),
                errno.EPIPE)
    s.close()

    s = connect(a, p, b"quit")
    s.close()
    sys.exit(ck.failed)


def cmd_sink(args):
    """Accepts one connection, reads to EOF, prints bytes and SHA-256."""
    lst = stream_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(1)
    print("listening", flush=True)
    c = accept(lst)
    h = hashlib.sha256()
    n = 0
    while True:
        b = c.recv(1 << 18)
        if not b:
            break
        h.update(b)
        n += len(b)
    print(f"received {n} {h.hexdigest()}", flush=True)


def cmd_source(args):
    """Writes BYTES of a pattern in 1 MiB writes; prints bytes and SHA-256."""
    s = stream_socket()
    mrc_connect(s, args.addr, args.port)
    h = hashlib.sha256()
    left = args.bytes
    i = 0
    while left:
        b = pattern(min(left, 1 << 20), i)
        s.sendall(b)
        h.update(b)
        left -= len(b)
        i += 1
        if args.progress and i % 4 == 0:
            print(f"progress {args.bytes - left}", flush=True)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    print(f"sent {args.bytes} {h.hexdigest()}", flush=True)


def main():
    sys.stdout.reconfigure(line_buffering=True)
    # A hang shows where it is.
    faulthandler.dump_traceback_later(120, repeat=True)
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn in (("server", cmd_server), ("client", cmd_client), ("sink", cmd_sink)):
        c = sub.add_parser(name)
        c.add_argument("addr")
        c.add_argument("port", type=int)
        c.set_defaults(fn=fn)
    c = sub.add_parser("source")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("bytes", type=int)
    c.add_argument("--progress", action="store_true")
    c.set_defaults(fn=cmd_source)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
