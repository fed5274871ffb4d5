#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Counts what a conn-get request of the generic netlink family "mrc"
brings back, reading the messages the way mrc-status does (each datagram
peeked for its size, then received whole), without decoding paths:

  nl_count.py dump             every connection of the namespace
  nl_count.py get SESSION_HEX  one connection (conn-get do)

Prints one JSON object: seconds, datagrams, messages, bytes, connections
(messages with a state attribute, the first of each connection), paths
(path nests), and for a refused request its errno and extack message.
"""
import json
import socket
import struct
import sys
import time

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_ACK_TLVS, NLM_F_CAPPED = 0x200, 0x100
NLMSGERR_ATTR_MSG = 1
SOL_NETLINK, NETLINK_EXT_ACK, NETLINK_CAP_ACK = 270, 11, 10
MRC_CMD_CONN_GET = 2
MRC_A_CONN_SESSION_ID, MRC_A_CONN_STATE, MRC_A_CONN_PATH = 2, 4, 14


def attr(kind, value):
    a = struct.pack("=HH", 4 + len(value), kind) + value
    return a + b"\0" * (-len(a) % 4)


def attrs(buf):
    off = 0
    while off + 4 <= len(buf):
        ln, kind = struct.unpack_from("=HH", buf, off)
        if ln < 4:
            break
        yield kind & 0x3FFF, buf[off + 4:off + ln]
        off += (ln + 3) & ~3


def request(typ, flags, cmd, payload=b"", seq=1):
    body = struct.pack("=BBH", cmd, 1, 0) + payload
    return struct.pack("=IHHII", 16 + len(body), typ, flags, seq, 0) + body


def recv_full(s):
    """Peeks at the next datagram for its size, then receives it whole."""
    n = s.recv_into(bytearray(1), 1, socket.MSG_PEEK | socket.MSG_TRUNC)
    return s.recv(n)


def messages(data):
    off = 0
    while off + 16 <= len(data):
        ln, typ, flags, seq, _ = struct.unpack_from("=IHHII", data, off)
        if ln < 16:
            break
        yield typ, flags, data[off + 16:off + ln]
        off += (ln + 3) & ~3


def family(s):
    s.send(request(GENL_ID_CTRL, NLM_F_REQUEST, CTRL_CMD_GETFAMILY,
                   attr(CTRL_ATTR_FAMILY_NAME, b"mrc\0")))
    for typ, _, body in messages(recv_full(s)):
        if typ == GENL_ID_CTRL:
            for kind, v in attrs(body[4:]):
                if kind == CTRL_ATTR_FAMILY_ID:
                    return struct.unpack("=H", v[:2])[0]
    sys.exit("mrc family not found")


def error(flags, body):
    errno = -struct.unpack_from("=i", body)[0]
    msg = None
    if flags & NLM_F_ACK_TLVS:
        echo = body[4:]
        skip = 16 if flags & NLM_F_CAPPED else (struct.unpack_from("=I", echo)[0] + 3) & ~3
        for kind, v in attrs(echo[skip:]):
            if kind == NLMSGERR_ATTR_MSG:
                msg = v.rstrip(b"\0").decode()
    return errno, msg


def main():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    s.bind((0, 0))
    s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
    s.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
    fam = family(s)
    if sys.argv[1] == "dump":
        req = request(fam, NLM_F_REQUEST | NLM_F_DUMP, MRC_CMD_CONN_GET, seq=2)
    else:
        sid = int(sys.argv[2], 16)
        req = request(fam, NLM_F_REQUEST | NLM_F_ACK, MRC_CMD_CONN_GET,
                      attr(MRC_A_CONN_SESSION_ID, struct.pack("=Q", sid)), seq=2)
    out = {"datagrams": 0, "messages": 0, "bytes": 0, "connections": 0, "paths": 0}
    t0 = time.monotonic()
    s.send(req)
    done = False
    while not done:
        data = recv_full(s)
        out["datagrams"] += 1
        out["bytes"] += len(data)
        for typ, flags, body in messages(data):
            if typ == NLMSG_DONE:
                done = True
            elif typ == NLMSG_ERROR:
                errno, msg = error(flags, body)
                if errno:
                    out["errno"], out["extack"] = errno, msg
                done = True
            elif typ == fam:
                out["messages"] += 1
                for kind, _ in attrs(body[4:]):
                    if kind == MRC_A_CONN_STATE:
                        out["connections"] += 1
                    elif kind == MRC_A_CONN_PATH:
                        out["paths"] += 1
    out["seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
