#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Socket-level helpers for the MRC selftests.

Each subcommand prints one result line that the shell tests compare
exactly, and exits non-zero when a system call does not behave as asserted.
"""
import argparse
import ctypes
import hashlib
import errno
import faulthandler
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

SOCK_SEQPACKET = socket.SOCK_SEQPACKET


def family():
    try:
        with open("/sys/module/mrc/parameters/family") as f:
            return int(f.read())
    except FileNotFoundError:
        return 23


def cmd_create_loop(args):
    """Creates and closes an MRC socket N times."""
    fam = family()
    for _ in range(args.count):
        s = socket.socket(fam, SOCK_SEQPACKET, 0)
        s.close()
    print(f"created {args.count}")


def cmd_hold(args):
    """Opens N sockets, prints the module refcount, closes them, prints it again."""
    fam = family()
    socks = [socket.socket(fam, SOCK_SEQPACKET, 0) for _ in range(args.count)]
    with open("/sys/module/mrc/refcnt") as f:
        held = int(f.read())
    if args.try_rmmod:
        rc = os.system("rmmod mrc 2>/dev/null")
        print(f"rmmod_while_open {'refused' if rc != 0 else 'succeeded'}")
    for s in socks:
        s.close()
    with open("/sys/module/mrc/refcnt") as f:
        after = int(f.read())
    print(f"held {held} after {after}")


def expect_errno(what, fn, want):
    try:
        s = fn()
        s.close()
        print(f"{what} succeeded")
        return False
    except OSError as e:
        print(f"{what} {errno.errorcode.get(e.errno, e.errno)}")
        return e.errno == want


def cmd_errors(_args):
    """Checks the errors of socket() for what MRC does not provide."""
    fam = family()
    ok = expect_errno("dgram", lambda: socket.socket(fam, socket.SOCK_DGRAM, 0),
                      errno.ESOCKTNOSUPPORT)
    ok &= expect_errno("raw", lambda: socket.socket(fam, socket.SOCK_RAW, 0),
                       errno.ESOCKTNOSUPPORT)
    ok &= expect_errno("protocol", lambda: socket.socket(fam, SOCK_SEQPACKET, 99),
                       errno.EPROTONOSUPPORT)
    ok &= expect_errno("stream protocol", lambda: socket.socket(fam, socket.SOCK_STREAM, 6),
                       errno.EPROTONOSUPPORT)
    sys.exit(0 if ok else 1)


def cmd_create(_args):
    """Creates one socket (module autoload path)."""
    s = socket.socket(family(), SOCK_SEQPACKET, 0)
    s.close()
    print("created 1")


# --- garbage datagrams ----------------------------------------------------

MAGIC = 0x4D524320
VERSION = 2
HDR = struct.Struct("!IHHQIQQII")  # 44 bytes
TYPE_DATA = 4
TYPE_FIN = 5
FIRST_LAST = 0x300
PASSIVE = 0x1000


def crc32c(data, crc=0xFFFFFFFF):
    """Bitwise CRC32C, independent of the module's table-driven one."""
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def covered(hdr, body):
    """The bytes the checksum covers: the header (checksum field zero) and the
    body, but for DATA, whose payload the UDP checksum covers."""
    flags = struct.unpack_from("!H", hdr, 6)[0]
    return hdr if flags & 0xF == TYPE_DATA else hdr + body


def packet(magic=MAGIC, version=VERSION, flags=TYPE_DATA | FIRST_LAST, payload=b"x" * 16,
           bad_crc=False, len_delta=0):
    plen = len(payload) + len_delta
    hdr = HDR.pack(magic, version, flags, 0x1122334455667788, 0, 1, 0, plen, 0)
    crc = crc32c(covered(hdr, payload))
    if bad_crc:
        crc ^= 1
    return HDR.pack(magic, version, flags, 0x1122334455667788, 0, 1, 0, plen,
                    crc) + payload


CLASSES = {
    "short": lambda i: os.urandom(i % 43 + 1),
    "bad_magic": lambda i: packet(magic=MAGIC ^ (i + 1)),
    # 1 is the version whose checksum covered a DATA payload.
    "bad_version": lambda i: packet(version=(1, 3 + i % 100)[i % 2]),
    # payload_len wrong, or a control packet longer than any valid one (381
    # bytes, a SYN with 16 endpoints).
    "length_mismatch": lambda i: (packet(len_delta=1 + i % 8) if i % 2 else
                                  packet(flags=TYPE_FIN, payload=b"x" * (338 + i))),
    "bad_checksum": lambda i: packet(bad_crc=True),
    # Types 1 to 9 are known (9 is RETRY); the type field is 4 bits.
    "unknown_type": lambda i: packet(flags=10 + i % 6),
    "bad_flags": lambda i: packet(flags=TYPE_DATA | 0x2000),
    "bad_body": lambda i: packet(flags=TYPE_FIN),
    "no_session": lambda i: packet(payload=os.urandom(1 + i % 1000)),
}


SO_NO_CHECK = 11


def cmd_garbage(args):
    """Sends COUNT datagrams of each class to ADDR:PORT; prints what was sent.
    With --no-udp-checksum (IPv4), the datagrams carry a zero UDP checksum."""
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if args.no_udp_checksum:
        s.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    sent_bytes = 0
    for name in args.classes.split(","):
        for i in range(args.count):
            d = CLASSES[name](i)
            s.sendto(d, (args.addr, args.port))
            sent_bytes += len(d)
    print(f"sent {args.count * len(args.classes.split(','))} {sent_bytes}")


TYPE_RST = 6


def cmd_rst(args):
    """Sends one well-formed DATA packet for a session nobody has and checks
    the RST that must come back: checksum, type, echoed session and path,
    seq/ack swapped."""
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(5)
    session, path, seq, ack = 0x0123456789ABCDEF, 7, 1000, 42
    payload = b"hello"
    hdr = HDR.pack(MAGIC, VERSION, TYPE_DATA | FIRST_LAST, session, path, seq, ack,
                   len(payload), 0)
    crc = crc32c(covered(hdr, payload))
    s.sendto(HDR.pack(MAGIC, VERSION, TYPE_DATA | FIRST_LAST, session, path, seq, ack,
                      len(payload), crc) + payload, (args.addr, args.port))
    data, peer = s.recvfrom(2048)
    m, v, flags, sid, pid, rseq, rack, plen, rcrc = HDR.unpack(data[:HDR.size])
    zeroed = data[:40] + b"\0\0\0\0" + data[44:]
    checks = {
        "length": len(data) == HDR.size and plen == 0,
        "magic": m == MAGIC and v == VERSION,
        "checksum": rcrc == crc32c(zeroed),
        # The DATA came from a connecting end (no PASSIVE bit): the answer
        # goes to it, from the accepting side.
        "type": flags == TYPE_RST | PASSIVE,
        "session": sid == session and pid == path,
        "seq_ack": rseq == ack and rack == seq,
        "from_port": peer[1] == args.port,
    }
    bad = [k for k, ok in checks.items() if not ok]
    print("rst ok" if not bad else "rst bad: " + ",".join(bad))


# --- socket API over a connection ----------------------------------------------

LIBC = ctypes.CDLL(None, use_errno=True)
MRC_MAX_MSG = 1 << 20


def sockaddr(ip, port, fam=None, addr_family=None, reserved=0):
    """A struct sockaddr_mrc (28 bytes)."""
    fam = family() if fam is None else fam
    if ":" in ip:
        af, raw = socket.AF_INET6, socket.inet_pton(socket.AF_INET6, ip)
    else:
        af, raw = socket.AF_INET, socket.inet_aton(ip) + bytes(12)
    af = af if addr_family is None else addr_family
    return (struct.pack("=H", fam) + struct.pack("!H", port) +
            struct.pack("=HHI", af, reserved, 0) + raw)


def parse_sockaddr(raw):
    fam, = struct.unpack_from("=H", raw, 0)
    port, = struct.unpack_from("!H", raw, 2)
    af, = struct.unpack_from("=H", raw, 4)
    if af == socket.AF_INET6:
        ip = socket.inet_ntop(socket.AF_INET6, raw[12:28])
    else:
        ip = socket.inet_ntoa(raw[12:16])
    return fam, ip, port


def libc_call(fn, *args):
    r = fn(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def mrc_socket():
    return socket.socket(family(), SOCK_SEQPACKET, 0)


def mrc_bind(s, ip, port):
    a = sockaddr(ip, port)
    libc_call(LIBC.bind, s.fileno(), a, len(a))


def mrc_connect(s, ip, port, raw=None):
    a = sockaddr(ip, port) if raw is None else raw
    libc_call(LIBC.connect, s.fileno(), a, len(a))


def mrc_accept(s):
    """accept(); Python's own cannot size an AF_MRC address."""
    fd = libc_call(LIBC.accept, s.fileno(), None, None)
    return socket.socket(family(), SOCK_SEQPACKET, 0, fileno=fd)


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint),
                ("iov", ctypes.POINTER(IoVec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


def mrc_recvmsg(s, size, flags=0):
    """recvmsg() returning (data, msg_flags, source address); Python's own
    cannot size an AF_MRC address."""
    buf = ctypes.create_string_buffer(size)
    name = ctypes.create_string_buffer(128)
    iov = IoVec(ctypes.cast(buf, ctypes.c_void_p), size)
    m = MsgHdr(ctypes.cast(name, ctypes.c_void_p), 128, ctypes.pointer(iov), 1, None, 0, 0)
    n = libc_call(LIBC.recvmsg, s.fileno(), ctypes.byref(m), flags)
    return buf.raw[:min(n, size)], m.flags, parse_sockaddr(name.raw[:m.namelen])


def getname(s, peer):
    buf = ctypes.create_string_buffer(128)
    ln = ctypes.c_uint(128)
    fn = LIBC.getpeername if peer else LIBC.getsockname
    libc_call(fn, s.fileno(), buf, ctypes.byref(ln))
    return parse_sockaddr(buf.raw[:ln.value])


class Checker:
    def __init__(self):
        self.failed = 0

    def check(self, what, got, want):
        if got == want:
            print(f"ok {what}: {got}")
        else:
            print(f"FAIL {what}: got {got}, want {want}")
            self.failed += 1

    def errno_of(self, what, fn, want):
        try:
            fn()
            got = "success"
        except OSError as e:
            got = errno.errorcode.get(e.errno, e.errno)
        self.check(what, got, errno.errorcode[want])


def cmd_api_server(args):
    """Serves the scripted connections of api-client, one at a time."""
    lst = mrc_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(8)
    print("listening", flush=True)
    while True:
        c = mrc_accept(lst)
        cmd = c.recv(64)
        if cmd == b"echo":
            while True:
                m = c.recv(MRC_MAX_MSG)
                if not m:
                    break
                c.send(m)
        elif cmd == b"halfclose":
            c.shutdown(socket.SHUT_WR)
            got = c.recv(64)
            print(f"halfclose got {got!r}", flush=True)
        elif cmd == b"reset":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif cmd == b"idle":
            c.recv(64)
        elif cmd == b"close":
            pass  # closed below with nothing unread
        elif cmd == b"quit":
            c.close()
            break
        c.close()
    lst.close()


def cmd_api_client(args):
    """Checks the socket calls against a peer running api-server."""
    ck = Checker()
    srv, port = args.addr, args.port
    fam = family()

    s = mrc_socket()
    ck.errno_of("connect short sockaddr", lambda: mrc_connect(s, srv, port, raw=sockaddr(srv, port)[:8]), errno.EINVAL)
    ck.errno_of("connect wrong family", lambda: mrc_connect(s, srv, port, raw=sockaddr(srv, port, fam=2)), errno.EAFNOSUPPORT)
    ck.errno_of("connect wrong address family", lambda: mrc_connect(s, srv, port, raw=sockaddr(srv, port, addr_family=99)), errno.EAFNOSUPPORT)
    ck.errno_of("connect reserved set", lambda: mrc_connect(s, srv, port, raw=sockaddr(srv, port, reserved=1)), errno.EINVAL)
    ck.errno_of("send unconnected", lambda: s.send(b"x"), errno.ENOTCONN)
    ck.errno_of("recv unconnected", lambda: s.recv(10), errno.ENOTCONN)
    ck.errno_of("getpeername unconnected", lambda: getname(s, True), errno.ENOTCONN)
    ck.errno_of("listen unbound", lambda: s.listen(1), errno.EDESTADDRREQ)
    ck.errno_of("connect refused", lambda: mrc_connect(s, srv, port + 1), errno.ECONNREFUSED)
    s.close()

    # Non-blocking connect, refused: EINPROGRESS, then POLLERR and SO_ERROR.
    s = mrc_socket()
    s.setblocking(False)
    ck.errno_of("nonblocking connect (refused)", lambda: mrc_connect(s, srv, port + 1), errno.EINPROGRESS)
    p = select.poll()
    p.register(s, select.POLLOUT)
    ev = p.poll(5000)
    ck.check("refused poll POLLERR", bool(ev and ev[0][1] & select.POLLERR), True)
    ck.check("refused SO_ERROR", errno.errorcode.get(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)), "ECONNREFUSED")
    s.close()

    # Ports: EADDRINUSE, accept without connections.
    a, b = mrc_socket(), mrc_socket()
    mrc_bind(a, args.local, 7000)
    ck.errno_of("bind taken port", lambda: mrc_bind(b, args.local, 7000), errno.EADDRINUSE)
    ck.check("getsockname bound", getname(a, False), (fam, args.local, 7000))
    a.listen(4)
    a.setblocking(False)
    ck.errno_of("accept nonblocking empty", lambda: mrc_accept(a), errno.EAGAIN)
    ck.errno_of("connect on listener", lambda: mrc_connect(a, srv, port), errno.EINVAL)
    a.close()
    b.close()

    # Non-blocking connect that succeeds.
    s = mrc_socket()
    s.setblocking(False)
    ck.errno_of("nonblocking connect", lambda: mrc_connect(s, srv, port), errno.EINPROGRESS)
    p = select.poll()
    p.register(s, select.POLLOUT)
    ev = p.poll(5000)
    ck.check("connect poll POLLOUT", bool(ev and ev[0][1] & select.POLLOUT), True)
    ck.check("connect SO_ERROR", s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), 0)
    ck.errno_of("connect again", lambda: mrc_connect(s, srv, port), errno.EISCONN)
    ck.check("getpeername", getname(s, True), (fam, srv, port))
    _, lip, lport = getname(s, False)
    ck.check("getsockname local address", lip, args.local)
    ck.check("getsockname ephemeral port", 32768 <= lport <= 60999, True)
    s.setblocking(True)
    s.send(b"echo")
    ck.errno_of("send above MRC_MAX_MSG", lambda: s.send(bytes(MRC_MAX_MSG + 1)), errno.EMSGSIZE)
    ck.errno_of("recv MSG_DONTWAIT empty", lambda: s.recv(10, socket.MSG_DONTWAIT), errno.EAGAIN)
    for m in (b"a" * 10, b"b" * 2000, b"c" * 5000, bytes(range(256)) * 4096):
        s.send(m)
    p = select.poll()
    p.register(s, select.POLLIN)
    ev = p.poll(5000)
    ck.check("poll POLLIN", bool(ev and ev[0][1] & select.POLLIN), True)
    ck.check("recv MSG_PEEK", s.recv(100, socket.MSG_PEEK), b"a" * 10)
    ck.check("recv after peek", s.recv(100), b"a" * 10)
    data, flags, src = mrc_recvmsg(s, 100)
    ck.check("recvmsg truncated length", len(data), 100)
    ck.check("recvmsg MSG_TRUNC flag", bool(flags & socket.MSG_TRUNC), True)
    ck.check("recvmsg source address", src, (fam, srv, port))
    buf = bytearray(10)
    n = s.recv_into(buf, 10, socket.MSG_TRUNC)
    ck.check("recv(MSG_TRUNC) returns the real length", (n, bytes(buf)), (5000, b"c" * 10))
    big = s.recv(MRC_MAX_MSG + 1)
    ck.check("1 MiB message intact (length, SHA-256)", (len(big), hashlib.sha256(big).hexdigest()),
             (1 << 20, hashlib.sha256(bytes(range(256)) * 4096).hexdigest()))
    # SEQPACKET: MSG_WAITALL still returns one message, never joins two.
    s.send(b"first")
    s.send(b"second")
    ck.check("recv MSG_WAITALL returns one message", s.recv(100, socket.MSG_WAITALL), b"first")
    ck.check("next message after MSG_WAITALL", s.recv(100, socket.MSG_WAITALL), b"second")
    s.shutdown(socket.SHUT_WR)
    ck.errno_of("send after SHUT_WR", lambda: s.send(b"x", socket.MSG_NOSIGNAL), errno.EPIPE)
    ck.check("recv EOF after echo", s.recv(10), b"")
    s.close()

    # Half close by the peer: EOF and POLLRDHUP while this end still sends.
    s = mrc_socket()
    mrc_connect(s, srv, port)
    s.send(b"halfclose")
    ck.check("recv EOF after peer SHUT_WR", s.recv(10), b"")
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLRDHUP)
    ev = p.poll(1000)
    ck.check("poll POLLRDHUP", bool(ev and ev[0][1] & select.POLLRDHUP), True)
    ck.check("send after peer SHUT_WR", s.send(b"still"), 5)
    s.close()

    # Abortive close by the peer (SO_LINGER 0): ECONNRESET.
    s = mrc_socket()
    mrc_connect(s, srv, port)
    s.send(b"reset")
    ck.errno_of("recv after peer reset", lambda: s.recv(10), errno.ECONNRESET)
    s.close()

    # Data sent to a peer that has closed (with nothing unread) is answered
    # with RST, as TCP does: the sender learns that nobody reads it.
    s = mrc_socket()
    mrc_connect(s, srv, port)
    s.send(b"close")
    ck.check("recv EOF after peer close", s.recv(10), b"")
    s.send(b"late")
    p = select.poll()
    p.register(s, 0)  # POLLERR and POLLHUP are reported whatever is asked
    ev = p.poll(10000)
    ck.check("POLLERR after data to a closed peer", bool(ev and ev[0][1] & select.POLLERR), True)
    ck.check("SO_ERROR after data to a closed peer",
             errno.errorcode.get(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)), "ECONNRESET")
    s.close()

    # Timeouts and signals on a blocking recv.
    s = mrc_socket()
    mrc_connect(s, srv, port)
    s.send(b"idle")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
    ck.errno_of("recv SO_RCVTIMEO", lambda: s.recv(10), errno.EAGAIN)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    signal.signal(signal.SIGALRM, lambda *_: None)
    signal.siginterrupt(signal.SIGALRM, True)
    buf = ctypes.create_string_buffer(16)
    # The clock starts before the timer: on a slow VM the lines between
    # them have taken longer than the check's margin.
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    r = LIBC.recv(s.fileno(), buf, 16, 0)
    e = ctypes.get_errno()
    ck.check("blocking recv interrupted by a signal", (r, errno.errorcode.get(e)), (-1, "EINTR"))
    ck.check("interrupted after the signal", time.monotonic() - t0 >= 0.25, True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    ck.check("SO_SNDBUF", s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), 131072)
    s.send(b"done")
    s.close()

    s = mrc_socket()
    mrc_connect(s, srv, port)
    s.send(b"quit")
    s.close()
    print(f"api checks failed: {ck.failed}")
    sys.exit(1 if ck.failed else 0)


def cmd_linger_server(args):
    """Accepts one connection and reads it to EOF; prints count and SHA-256."""
    lst = mrc_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(1)
    print("listening", flush=True)
    c = mrc_accept(lst)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 20, 0))
    h, n, msgs, end = hashlib.sha256(), 0, 0, "eof"
    try:
        while True:
            m = c.recv(MRC_MAX_MSG)
            if not m:
                break
            h.update(m)
            n += len(m)
            msgs += 1
    except OSError as e:
        end = errno.errorcode.get(e.errno, str(e.errno))
    print(f"linger got {msgs} msgs {n} bytes sha256 {h.hexdigest()} {end}", flush=True)


def cmd_linger_client(args):
    """Sends 4 MiB, then closes with SO_LINGER on: close() must return only
    once the peer has acknowledged every message and the FIN."""
    s = mrc_socket()
    mrc_connect(s, args.addr, args.port)
    h, n = hashlib.sha256(), 0
    for i in range(64):
        m = bytes([i]) * 65536
        s.sendall(m)
        h.update(m)
        n += len(m)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 30))
    t0 = time.monotonic()
    s.close()
    print(f"linger sent 64 msgs {n} bytes sha256 {h.hexdigest()}; "
          f"close took {time.monotonic() - t0:.3f} s", flush=True)


# --- SOL_MRC socket options -------------------------------------------------

SOL_MRC = 299
MRC_HEARTBEAT_MS = 1
MRC_CC = 2
MRC_PATH_ADD = 3
MRC_PATH_DEL = 4
MRC_PATH_F_BACKUP = 1
PATH_REQ = struct.Struct("=IHHHHI16s16s")  # struct mrc_path_req, 48 bytes


def ip_raw(ip):
    if ":" in ip:
        return socket.AF_INET6, socket.inet_pton(socket.AF_INET6, ip)
    return socket.AF_INET, socket.inet_aton(ip) + bytes(12)


def path_req(local, remote, sport=0, dport=0, flags=0, af=None, path_id=0, reserved=0):
    fam, lraw = ip_raw(local)
    _, rraw = ip_raw(remote)
    return PATH_REQ.pack(path_id, fam if af is None else af, flags, sport, dport, reserved,
                         lraw, rraw)


def path_add(s, req):
    """getsockopt(MRC_PATH_ADD): adds a path and returns its id."""
    buf = ctypes.create_string_buffer(req, len(req))
    ln = ctypes.c_int(len(req))
    libc_call(LIBC.getsockopt, s.fileno(), SOL_MRC, MRC_PATH_ADD, buf, ctypes.byref(ln))
    if ln.value != PATH_REQ.size:
        raise OSError(errno.EPROTO, f"optlen {ln.value}")
    return struct.unpack_from("=I", buf.raw)[0]


def path_del(s, path_id):
    s.setsockopt(SOL_MRC, MRC_PATH_DEL, struct.pack("=I", path_id))


def get_hb(s):
    return struct.unpack("=I", s.getsockopt(SOL_MRC, MRC_HEARTBEAT_MS, 4))[0]


def set_hb(s, ms):
    s.setsockopt(SOL_MRC, MRC_HEARTBEAT_MS, struct.pack("=I", ms))


def get_cc(s):
    return s.getsockopt(SOL_MRC, MRC_CC, 16).rstrip(b"\0").decode()


def proc_stat(name):
    """Counter NAME of /proc/net/mrc in this namespace."""
    with open("/proc/net/mrc") as f:
        return int(dict(line.split() for line in f)[name])


def cmd_sockopt_server(args):
    """A listener with MRC_HEARTBEAT_MS 7 and MRC_CC reno. Commands per
    connection: "opts" answers the accepted socket's options, "echo" echoes
    messages to EOF, "quit" ends."""
    lst = mrc_socket()
    set_hb(lst, 7)
    lst.setsockopt(SOL_MRC, MRC_CC, b"reno")
    mrc_bind(lst, args.addr, args.port)
    lst.listen(8)
    print("listening", flush=True)
    while True:
        c = mrc_accept(lst)
        cmd = c.recv(64)
        if cmd == b"opts":
            c.send(f"{get_hb(c)} {get_cc(c)}".encode())
            c.recv(64)
        elif cmd == b"echo":
            while True:
                m = c.recv(MRC_MAX_MSG)
                if not m:
                    break
                c.send(m)
        elif cmd == b"quit":
            c.close()
            break
        c.close()
    lst.close()


def link_of(local_ip):
    """The interface that holds `local_ip`."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    return next(line.split()[1] for line in out.splitlines() if f" {local_ip}/" in line)


def link_drop_sport(local_ip, sport):
    """Drops the UDP datagrams with source port `sport` that leave by the
    interface of `local_ip` (a u32 filter on an htb root)."""
    dev = link_of(local_ip)
    # An htb root without classes sends what no filter drops unshaped.
    subprocess.run(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb"], check=True)
    proto, key = ("ipv6", "ip6") if ":" in local_ip else ("ip", "ip")
    subprocess.run(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", proto, "u32",
                    "match", key, "protocol", "17", "0xff", "match", key, "sport", str(sport), "0xffff",
                    "action", "drop"], check=True)


def link_clear(local_ip):
    """Removes what link_drop_sport set up."""
    subprocess.run(["tc", "qdisc", "del", "dev", link_of(local_ip), "root"], check=True)


def cmd_sockopt_client(args):
    """Checks every SOL_MRC option and error against sockopt-server, then
    replaces a connection's paths by an added one and transfers over it."""
    ck = Checker()
    srv, port, cli = args.addr, args.port, args.local
    unspec = "::" if ":" in srv else "0.0.0.0"
    req = path_req(cli, srv, sport=50000)

    s = mrc_socket()
    ck.check("heartbeat default", get_hb(s), 1)
    ck.check("cc default", get_cc(s), "delay")
    ck.errno_of("heartbeat 0", lambda: set_hb(s, 0), errno.EINVAL)
    ck.errno_of("heartbeat 60001", lambda: set_hb(s, 60001), errno.EINVAL)
    ck.errno_of("heartbeat short optlen", lambda: s.setsockopt(SOL_MRC, MRC_HEARTBEAT_MS, b"\x05\x00"), errno.EINVAL)
    ck.errno_of("get heartbeat short optlen", lambda: s.getsockopt(SOL_MRC, MRC_HEARTBEAT_MS, 2), errno.EINVAL)
    set_hb(s, 60000)
    ck.check("heartbeat 60000", get_hb(s), 60000)
    set_hb(s, 250)
    ck.check("heartbeat 250", get_hb(s), 250)
    ck.errno_of("cc unknown", lambda: s.setsockopt(SOL_MRC, MRC_CC, b"cubic"), errno.EINVAL)
    ck.errno_of("cc empty", lambda: s.setsockopt(SOL_MRC, MRC_CC, b""), errno.EINVAL)
    s.setsockopt(SOL_MRC, MRC_CC, b"reno\0")
    ck.check("cc reno", get_cc(s), "reno")
    ck.check("cc short buffer", s.getsockopt(SOL_MRC, MRC_CC, 2), b"re")
    ck.errno_of("set wrong level", lambda: s.setsockopt(SOL_MRC - 1, MRC_HEARTBEAT_MS, struct.pack("=I", 5)), errno.ENOPROTOOPT)
    ck.errno_of("get wrong level", lambda: s.getsockopt(SOL_MRC - 1, MRC_HEARTBEAT_MS, 4), errno.ENOPROTOOPT)
    ck.errno_of("set unknown option", lambda: s.setsockopt(SOL_MRC, 99, struct.pack("=I", 5)), errno.ENOPROTOOPT)
    ck.errno_of("get unknown option", lambda: s.getsockopt(SOL_MRC, 99, 4), errno.ENOPROTOOPT)
    ck.errno_of("get path-del", lambda: s.getsockopt(SOL_MRC, MRC_PATH_DEL, 4), errno.ENOPROTOOPT)
    ck.errno_of("path-add unconnected", lambda: s.setsockopt(SOL_MRC, MRC_PATH_ADD, req), errno.ENOTCONN)
    ck.errno_of("get path-add unconnected", lambda: path_add(s, req), errno.ENOTCONN)
    ck.errno_of("path-del unconnected", lambda: path_del(s, 0), errno.ENOTCONN)
    ck.errno_of("path-add short optlen", lambda: s.setsockopt(SOL_MRC, MRC_PATH_ADD, req[:40]), errno.EINVAL)
    ck.errno_of("get path-add short optlen", lambda: path_add(s, req[:40]), errno.EINVAL)
    ck.errno_of("path-del short optlen", lambda: s.setsockopt(SOL_MRC, MRC_PATH_DEL, b"\0\0"), errno.EINVAL)

    # Accepted sockets inherit the listener's options.
    c = mrc_socket()
    mrc_connect(c, srv, port)
    c.send(b"opts")
    ck.check("accepted socket inherits the listener's options", c.recv(64), b"7 reno")
    ck.check("client keeps the namespace defaults", (get_hb(c), get_cc(c)), (1, "delay"))
    c.close()

    # The options set before connect are the connection's.
    mrc_connect(s, srv, port)
    s.send(b"echo")
    ck.check("heartbeat after connect", get_hb(s), 250)
    ck.check("cc after connect", get_cc(s), "reno")
    ck.errno_of("cc after connect", lambda: s.setsockopt(SOL_MRC, MRC_CC, b"delay"), errno.EISCONN)
    set_hb(s, 40)
    ck.check("heartbeat changed on the running connection", get_hb(s), 40)

    # Paths.
    ck.errno_of("path-add bad family", lambda: path_add(s, path_req(cli, srv, af=99)), errno.EINVAL)
    ck.errno_of("path-add bad flags", lambda: path_add(s, path_req(cli, srv, flags=2)), errno.EINVAL)
    ck.errno_of("path-add reserved", lambda: path_add(s, path_req(cli, srv, reserved=1)), errno.EINVAL)
    ck.errno_of("path-add path id set", lambda: path_add(s, path_req(cli, srv, path_id=5)), errno.EINVAL)
    ck.errno_of("path-add unspecified remote", lambda: path_add(s, path_req(cli, unspec)), errno.EINVAL)
    new = path_add(s, req)
    ck.check("path-add returns a fresh id", new >= 1 << 24, True)
    ck.errno_of("path-add duplicate", lambda: path_add(s, req), errno.EEXIST)
    s.setsockopt(SOL_MRC, MRC_PATH_ADD, path_req(unspec, srv, sport=50001, flags=MRC_PATH_F_BACKUP))
    ck.errno_of("path-del unknown id", lambda: path_del(s, 12345), errno.ENOENT)
    gone = []
    for pid in range(64):
        try:
            path_del(s, pid)
            gone.append(pid)
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise
    print(f"# deleted the original paths {gone}")
    ck.check("original path 0 deleted", 0 in gone, True)
    path_del(s, new + 1)
    ck.errno_of("path-del last path", lambda: path_del(s, new), errno.EBUSY)

    # Only the added path is left: messages still arrive, byte for byte.
    for size in (1, 5000, 300000):
        m = os.urandom(size)
        s.send(m)
        ck.check(f"echo of {size} bytes over the added path", s.recv(MRC_MAX_MSG) == m, True)

    # The path table holds 256 paths.
    ids, err = [], None
    for i in range(300):
        try:
            ids.append(path_add(s, path_req(cli, srv, sport=51000 + i)))
        except OSError as e:
            err = errno.errorcode.get(e.errno, e.errno)
            break
    ck.check("path-add on a full table", (len(ids), err), (255, "ENOSPC"))
    for pid in ids:
        path_del(s, pid)
    m = os.urandom(100000)
    s.send(m)
    ck.check("echo after removing 255 paths", s.recv(MRC_MAX_MSG) == m, True)

    # The path that carries the traffic removed while a 1 MiB message is in
    # flight on it: its packets are resent on the path left, and the message
    # arrives whole. The message goes out while that path is the only one,
    # and a tc filter drops that path's packets (UDP source port 50000), so
    # none of them can arrive before the path is gone.
    link_drop_sport(cli, 50000)
    retx = proc_stat("tx_retransmits")
    m = os.urandom(MRC_MAX_MSG)
    s.send(m)
    spare = path_add(s, path_req(cli, srv, sport=52000))
    path_del(s, new)
    ck.check("1 MiB echoed whole after its path was removed in flight", s.recv(MRC_MAX_MSG) == m, True)
    link_clear(cli)
    ck.check("the removed path's packets were resent", proc_stat("tx_retransmits") > retx, True)
    ck.errno_of("path-del of the removed path", lambda: path_del(s, new), errno.ENOENT)
    ck.errno_of("path-del of the last path", lambda: path_del(s, spare), errno.EBUSY)
    s.close()

    q = mrc_socket()
    mrc_connect(q, srv, port)
    q.send(b"quit")
    q.close()
    print(f"sockopt checks failed: {ck.failed}")
    sys.exit(1 if ck.failed else 0)


# --- many connections held open -------------------------------------------


SO_COOKIE = 57


def raise_nofile(n):
    """Raises the open files limit to at least N (root may)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(n, soft), max(n, hard)))


def stop_flag():
    """Returns a list that SIGTERM and SIGINT make non-empty (true) from
    now on: the loops of the commands below run while it is empty."""
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    return stop


def wait_for_stop():
    """Returns when SIGTERM or SIGINT arrives."""
    stop = stop_flag()
    while not stop:
        time.sleep(0.2)


def cmd_hold_server(args):
    """Accepts COUNT connections, prints "accepted COUNT", then reads and
    discards what they send until every one has ended (EOF or error) or
    the wait for the next message exceeds --timeout. Connections accepted
    after the first COUNT are read until they end too, but are not waited
    for; their number is printed at the end."""
    raise_nofile(args.count + 64)
    lst = mrc_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(min(args.count, 4096))
    print("listening", flush=True)
    t0 = time.monotonic()
    conns = [mrc_accept(lst) for _ in range(args.count)]
    print(f"accepted {len(conns)} in {time.monotonic() - t0:.1f} s", flush=True)
    got = extra = 0
    sel = selectors.DefaultSelector()
    sel.register(lst, selectors.EVENT_READ)
    for c in conns:
        sel.register(c, selectors.EVENT_READ, data=True)
    left = len(conns)
    while left:
        ready = sel.select(args.timeout)
        if not ready:
            break
        for key, _ in ready:
            if key.fileobj is lst:
                sel.register(mrc_accept(lst), selectors.EVENT_READ, data=False)
                extra += 1
                continue
            try:
                m = key.fileobj.recv(MRC_MAX_MSG)
            except OSError:
                m = b""
            got += len(m)
            if not m:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                left -= key.data
    print(f"received {got} bytes; {left} connections left; {extra} more accepted", flush=True)


def cgroup_memory(group):
    """Bytes charged to the memory cgroup whose directory is GROUP."""
    with open(f"{group}/memory.current") as f:
        return int(f.read())


def cmd_memcg(args):
    """Run inside the memory cgroup whose directory is GROUP: opens COUNT
    connections to ADDR:PORT and prints what they added to the cgroup's
    memory.current; then sends one message of SIZE bytes to a reader at
    ADDR:SINK_PORT that reads nothing and prints what the part not yet
    acknowledged added."""
    raise_nofile(args.count + 64)
    payload = bytes(args.size)
    base = cgroup_memory(args.group)
    conns = []
    for _ in range(args.count):
        c = mrc_socket()
        mrc_connect(c, args.addr, args.port)
        conns.append(c)
    print(f"conns {args.count} added {cgroup_memory(args.group) - base}", flush=True)
    sink = mrc_socket()
    mrc_connect(sink, args.addr, args.sink_port)
    sink.settimeout(30)
    time.sleep(0.5)
    base = cgroup_memory(args.group)
    sink.send(payload)
    time.sleep(1)
    print(f"message {args.size} added {cgroup_memory(args.group) - base}", flush=True)
    for c in conns + [sink]:
        c.close()


def cmd_churn(args):
    """Until SIGTERM or SIGINT: opens a connection, sends one message,
    closes it, again and again; prints how many it opened. Exits 1 if any
    connect or send failed."""
    stop = stop_flag()
    # SIGUSR1 prints where the client is, should it ever stop making progress.
    faulthandler.register(signal.SIGUSR1, file=sys.stdout, all_threads=True)
    n = failed = 0
    sigs = {signal.SIGTERM, signal.SIGINT}
    while not stop:
        # The signal waits until this connection is counted: an interrupted
        # connect() fails with EINTR but the handshake goes on in the
        # kernel, and both ends would count a connection this loop did not.
        # With the signal held off, a connect() or send() that never
        # returned would hang the test, so each waits at most 20 s (the
        # handshake gives up within about 10 s).
        signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        s = mrc_socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 20, 0))
        t0 = time.monotonic()
        try:
            mrc_connect(s, args.addr, args.port)
            s.send(b"churn")
            n += 1
        except OSError as e:
            failed += 1
            try:
                peer = "connected to " + str(s.getpeername())
            except OSError:
                peer = "not connected"
            print(f"churn connection {n + 1}: {e} after {time.monotonic() - t0:.1f} s, "
                  f"{peer}", flush=True)
        s.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        if n == 1:
            print("churning", flush=True)
    print(f"churned {n} connections, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


def cmd_hold_client(args):
    """Opens COUNT connections one after the other, up to the first that
    fails, and prints "up N of COUNT" (and with --cookies, their SO_COOKIE
    values); with --send, sends messages of that size to each in turn (a
    round every --every seconds, else as fast as it can), else stays idle;
    closes them all on SIGTERM or SIGINT. Exits 1 if not all
    COUNT connections opened."""
    raise_nofile(args.count + 64)
    t0 = time.monotonic()
    socks = []
    for i in range(args.count):
        s = mrc_socket()
        try:
            mrc_connect(s, args.addr, args.port)
        except OSError as e:
            print(f"connection {i + 1} failed after {time.monotonic() - t0:.1f} s: {e}",
                  flush=True)
            s.close()
            break
        socks.append(s)
        if args.progress and (i + 1) % args.progress == 0:
            print(f"connected {i + 1} in {time.monotonic() - t0:.1f} s", flush=True)
    print(f"up {len(socks)} of {args.count} in {time.monotonic() - t0:.1f} s", flush=True)
    if args.cookies:
        cookies = (struct.unpack("=Q", s.getsockopt(socket.SOL_SOCKET, SO_COOKIE, 8))[0]
                   for s in socks)
        print("cookies " + " ".join(str(c) for c in sorted(cookies)), flush=True)
    if args.send:
        stop = stop_flag()
        msg = b"m" * args.send
        while not stop:
            for s in socks:
                try:
                    s.send(msg)
                except InterruptedError:
                    pass
                if stop:
                    break
            if args.every and not stop:
                time.sleep(args.every)
    else:
        wait_for_stop()
    for s in socks:
        s.close()
    print("closed", flush=True)
    sys.exit(0 if len(socks) == args.count else 1)


# --- allocation failures ------------------------------------------------


def checked_message(i, size):
    """Message I of SIZE bytes (at least 8): its index and size, then a
    pattern that depends on the index."""
    pat = hashlib.sha256(str(i).encode()).digest()
    body = (pat * (size // len(pat) + 1))[:size - 8]
    return struct.pack("!II", i, size) + body


def message_ok(m):
    """Whether M is a message that checked_message() made."""
    if len(m) < 8:
        return False
    i, size = struct.unpack_from("!II", m)
    return size == len(m) and m == checked_message(i, size)


def one_connection(addr, port, i, timeout):
    """A connection that carries message I: connect, send, shut down the
    sending side, wait for the server to close after reading it. Returns
    "ok" or the name of the errno that a call failed with."""
    size = 8 + (i * 7919) % 20000
    try:
        s = mrc_socket()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    try:
        tv = struct.pack("ll", timeout, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        mrc_connect(s, addr, port)
        s.send(checked_message(i, size))
        s.shutdown(socket.SHUT_WR)
        if s.recv(16) != b"":
            return "data"
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


def fail_nth(n=None):
    """Sets (N) or reads this thread's /proc fail-nth: the Nth allocation
    that passes the fault injection filters fails."""
    path = "/proc/thread-self/fail-nth"
    if n is None:
        with open(path) as f:
            return int(f.read())
    with open(path, "w") as f:
        f.write(str(n))
    return n


def outcomes_line(what, outcomes):
    counts = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    rest = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "ok")
    return f"{what} {len(outcomes)}: ok {counts.get('ok', 0)}" + (f", {rest}" if rest else "")


def cmd_connect_loop(args):
    """Opens COUNT connections one after the other, each carrying one
    message (one_connection()). Prints how many went through and how many
    failed with each errno, then "sent N" (the messages the server must
    have read); exits 1 if a call failed with an errno not in --allow."""
    allowed = {"ok"} | set(filter(None, args.allow.split(",")))
    out = [one_connection(args.addr, args.port, args.first + i, args.timeout)
           for i in range(args.count)]
    print(outcomes_line("connections", out), flush=True)
    print(f"sent {out.count('ok')}", flush=True)
    sys.exit(0 if set(out) <= allowed else 1)


def cmd_fail_sweep(args):
    """Fails the 1st, then the 2nd, ... allocation that passes the fault
    injection filters (the kernel's in MRC's call chains, as configured)
    made by this thread while it opens a connection that carries one
    message (one_connection()), until a connection goes through without
    reaching its Nth allocation. Prints how many allocations failed and
    what each connection did, then "sent N"; exits 1 if a call failed with
    an errno not in --allow, or the last connection did not go through."""
    allowed = {"ok"} | set(filter(None, args.allow.split(",")))
    out = []
    clean = None
    for n in range(1, args.max + 1):
        fail_nth(n)
        r = one_connection(args.addr, args.port, args.first + n, args.timeout)
        left = fail_nth()
        fail_nth(0)
        if left:
            clean = r
            break
        out.append(r)
    print(outcomes_line("allocations failed", out) +
          f"; then without a failure: {clean}", flush=True)
    print("in turn: " + " ".join(out), flush=True)
    print(f"sent {out.count('ok') + (clean == 'ok')}", flush=True)
    sys.exit(0 if set(out) <= allowed and clean == "ok" else 1)


def cmd_check_server(args):
    """Until SIGTERM or SIGINT: accepts connections one at a time and reads
    each to its end, then closes it; every message must be one that
    checked_message() made. Waits with select() on one socket at a time,
    which allocates nothing (an epoll registration may fail with ENOMEM).
    Prints "listening", and at the end the connections, the messages
    verified and those that were not, and the calls that failed, by errno;
    exits 1 if a message was bad."""
    stop = stop_flag()
    lst = mrc_socket()
    mrc_bind(lst, args.addr, args.port)
    lst.listen(64)
    print("listening", flush=True)
    conns = good = bad = 0
    errors = {}

    def error(what, e):
        name = f"{what} {errno.errorcode.get(e.errno, str(e.errno))}"
        errors[name] = errors.get(name, 0) + 1

    while not stop:
        try:
            if not select.select([lst], [], [], 0.2)[0]:
                continue
            c = mrc_accept(lst)
        except OSError as e:
            error("accept", e)
            continue
        conns += 1
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 30, 0))
        while True:
            try:
                m = c.recv(MRC_MAX_MSG)
            except OSError as e:
                error("recv", e)
                break
            if not m:
                break
            if message_ok(m):
                good += 1
            else:
                bad += 1
        c.close()
    errs = "".join(f", {k} {v}" for k, v in sorted(errors.items()))
    print(f"connections {conns}, verified {good}, bad {bad}{errs}", flush=True)
    sys.exit(1 if bad else 0)


# --- host stalls --------------------------------------------------------


def cmd_stall_watch(args):
    """Until SIGTERM or SIGINT: one process per online CPU, pinned to it at
    SCHED_FIFO, sleeps --tick ms at a time and prints "CPU START_NS END_NS"
    (CLOCK_MONOTONIC, as the events of mrc-status monitor) for every sleep
    that ended more than --min ms late. Nothing else gets ahead of such a
    sleeper, so a late wake-up measures a CPU that ran no task: the
    emulated CPU was not scheduled on the host, or softirq work held it."""
    cpus = sorted(os.sched_getaffinity(0))
    tick = args.tick / 1000
    late_ns = int(args.min * 1e6)
    # Before the fork: the children inherit the handlers.
    stop = stop_flag()
    kids = []
    for cpu in cpus:
        pid = os.fork()
        if pid:
            kids.append(pid)
            continue
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        while not stop:
            t0 = time.monotonic_ns()
            time.sleep(tick)
            t1 = time.monotonic_ns()
            if t1 - t0 - int(tick * 1e9) > late_ns:
                print(cpu, t0, t1, flush=True)
        os._exit(0)
    while not stop:
        time.sleep(0.2)
    for pid in kids:
        os.kill(pid, signal.SIGTERM)
    for pid in kids:
        os.waitpid(pid, 0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create-loop")
    c.add_argument("count", type=int)
    c.set_defaults(fn=cmd_create_loop)
    c = sub.add_parser("hold")
    c.add_argument("count", type=int)
    c.add_argument("--try-rmmod", action="store_true")
    c.set_defaults(fn=cmd_hold)
    c = sub.add_parser("errors")
    c.set_defaults(fn=cmd_errors)
    c = sub.add_parser("create")
    c.set_defaults(fn=cmd_create)
    c = sub.add_parser("rst")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.set_defaults(fn=cmd_rst)
    c = sub.add_parser("garbage")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--classes", default=",".join(CLASSES))
    c.add_argument("--no-udp-checksum", action="store_true")
    c.set_defaults(fn=cmd_garbage)
    for name, fn in (("api-server", cmd_api_server), ("api-client", cmd_api_client)):
        c = sub.add_parser(name)
        c.add_argument("addr")
        c.add_argument("port", type=int)
        c.add_argument("--local", default="")
        c.set_defaults(fn=fn)
    for name, fn in (("sockopt-server", cmd_sockopt_server), ("sockopt-client", cmd_sockopt_client)):
        c = sub.add_parser(name)
        c.add_argument("addr")
        c.add_argument("port", type=int)
        c.add_argument("--local", default="")
        c.set_defaults(fn=fn)
    for name, fn in (("linger-server", cmd_linger_server), ("linger-client", cmd_linger_client)):
        c = sub.add_parser(name)
        c.add_argument("addr")
        c.add_argument("port", type=int)
        c.set_defaults(fn=fn)
    c = sub.add_parser("hold-server")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--timeout", type=float, default=600)
    c.set_defaults(fn=cmd_hold_server)
    c = sub.add_parser("memcg")
    c.add_argument("group")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("sink_port", type=int)
    c.add_argument("size", type=int)
    c.set_defaults(fn=cmd_memcg)
    c = sub.add_parser("churn")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.set_defaults(fn=cmd_churn)
    c = sub.add_parser("hold-client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--send", type=int, default=0, metavar="BYTES")
    c.add_argument("--every", type=float, default=0, metavar="SECONDS")
    c.add_argument("--progress", type=int, default=0, metavar="EVERY")
    c.add_argument("--cookies", action="store_true")
    c.set_defaults(fn=cmd_hold_client)
    c = sub.add_parser("connect-loop")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--first", type=int, default=0, metavar="I")
    c.add_argument("--timeout", type=int, default=30, metavar="SECONDS")
    c.add_argument("--allow", default="", metavar="ERRNO,...")
    c.set_defaults(fn=cmd_connect_loop)
    c = sub.add_parser("fail-sweep")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--max", type=int, default=500)
    c.add_argument("--first", type=int, default=0, metavar="I")
    c.add_argument("--timeout", type=int, default=30, metavar="SECONDS")
    c.add_argument("--allow", default="", metavar="ERRNO,...")
    c.set_defaults(fn=cmd_fail_sweep)
    c = sub.add_parser("check-server")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.set_defaults(fn=cmd_check_server)
    c = sub.add_parser("stall-watch")
    c.add_argument("--tick", type=float, default=5, metavar="MS")
    c.add_argument("--min", type=float, default=20, metavar="MS")
    c.set_defaults(fn=cmd_stall_watch)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
