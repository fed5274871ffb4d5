#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Socket-level helpers for the MRC selftests.

Each subcommand prints one result line that the shell tests compare
exactly, and exits non-zero when a system call does not behave as asserted.
"""
import argparse
import errno
import os
import socket
import struct
import sys

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
    ok = expect_errno("stream", lambda: socket.socket(fam, socket.SOCK_STREAM, 0),
                      errno.ESOCKTNOSUPPORT)
    ok &= expect_errno("dgram", lambda: socket.socket(fam, socket.SOCK_DGRAM, 0),
                       errno.ESOCKTNOSUPPORT)
    ok &= expect_errno("protocol", lambda: socket.socket(fam, SOCK_SEQPACKET, 99),
                       errno.EPROTONOSUPPORT)
    sys.exit(0 if ok else 1)


def cmd_create(_args):
    """Creates one socket (module autoload path)."""
    s = socket.socket(family(), SOCK_SEQPACKET, 0)
    s.close()
    print("created 1")


# --- garbage datagrams ----------------------------------------------------

MAGIC = 0x4D524320
HDR = struct.Struct("!IHHQIQQII")  # 44 bytes
TYPE_DATA = 4
TYPE_FIN = 5
FIRST_LAST = 0x300


def crc32c(data, crc=0xFFFFFFFF):
    """Bitwise CRC32C, independent of the module's table-driven one."""
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def packet(magic=MAGIC, version=1, flags=TYPE_DATA | FIRST_LAST, payload=b"x" * 16,
           bad_crc=False, len_delta=0):
    plen = len(payload) + len_delta
    hdr = HDR.pack(magic, version, flags, 0x1122334455667788, 0, 1, 0, plen, 0)
    crc = crc32c(hdr + payload)
    if bad_crc:
        crc ^= 1
    return HDR.pack(magic, version, flags, 0x1122334455667788, 0, 1, 0, plen,
                    crc) + payload


CLASSES = {
    "short": lambda i: os.urandom(i % 43 + 1),
    "bad_magic": lambda i: packet(magic=MAGIC ^ (i + 1)),
    "bad_version": lambda i: packet(version=2 + i % 100),
    "length_mismatch": lambda i: packet(len_delta=1 + i % 8),
    "bad_checksum": lambda i: packet(bad_crc=True),
    "unknown_type": lambda i: packet(flags=9 + i % 7),
    "bad_flags": lambda i: packet(flags=TYPE_DATA | 0x1000),
    "bad_body": lambda i: packet(flags=TYPE_FIN),
    "no_session": lambda i: packet(payload=os.urandom(1 + i % 1000)),
}


def cmd_garbage(args):
    """Sends COUNT datagrams of each class to ADDR:PORT; prints what was sent."""
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
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
    hdr = HDR.pack(MAGIC, 1, TYPE_DATA | FIRST_LAST, session, path, seq, ack,
                   len(payload), 0)
    crc = crc32c(hdr + payload)
    s.sendto(HDR.pack(MAGIC, 1, TYPE_DATA | FIRST_LAST, session, path, seq, ack,
                      len(payload), crc) + payload, (args.addr, args.port))
    data, peer = s.recvfrom(2048)
    m, v, flags, sid, pid, rseq, rack, plen, rcrc = HDR.unpack(data[:HDR.size])
    zeroed = data[:40] + b"\0\0\0\0" + data[44:]
    checks = {
        "length": len(data) == HDR.size and plen == 0,
        "magic": m == MAGIC and v == 1,
        "checksum": rcrc == crc32c(zeroed),
        "type": flags == TYPE_RST,
        "session": sid == session and pid == path,
        "seq_ack": rseq == ack and rack == seq,
        "from_port": peer[1] == args.port,
    }
    bad = [k for k, ok in checks.items() if not ok]
    print("rst ok" if not bad else "rst bad: " + ",".join(bad))


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
    c.set_defaults(fn=cmd_garbage)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
