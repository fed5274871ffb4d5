# SPDX-License-Identifier: GPL-2.0
"""A TCP program for tests/preload.rs: run under mrcize, it uses TCP the way
ordinary programs do (IPv6 wildcard listener taking an IPv4 client, options,
dup, fork, exec, UDP and Unix sockets beside) and prints OK at the end.
Any failure raises and exits non-zero."""
import os
import socket
import subprocess
import sys
import threading

CHILD = len(sys.argv) > 1 and sys.argv[1] == "child"


def echo_server(srv, count):
    for _ in range(count):
        c, peer = srv.accept()
        # An AF_INET6 program sees IPv4 peers as IPv4-mapped addresses.
        assert peer[0] == "::ffff:127.0.0.1", peer
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)


def round_trip(port, payload):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert c.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_INET
        assert c.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) == socket.IPPROTO_TCP
        assert c.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
        assert c.getpeername() == ("127.0.0.1", port)
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        assert info[0] == 1, info[0]  # TCP_ESTABLISHED
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            got += d
        assert got == payload, (len(got), len(payload))


if CHILD:
    round_trip(int(sys.argv[2]), b"from the exec'd child" * 100)
    sys.exit(0)

srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
srv.bind(("::", 0))
srv.listen(8)
port = srv.getsockname()[1]
assert srv.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_INET6

# Four connections: this process, a duplicate descriptor, a forked child
# and an exec'd child.
t = threading.Thread(target=echo_server, args=(srv, 4))
t.start()
round_trip(port, os.urandom(300000))

c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
d = socket.socket(fileno=os.dup(c.fileno()))
c.close()
d.settimeout(20)
d.connect(("127.0.0.1", port))
d.sendall(b"dup")
assert d.recv(3) == b"dup"
d.close()

pid = os.fork()
if pid == 0:
    try:
        round_trip(port, b"from the forked child" * 1000)
        os._exit(0)
    except BaseException as e:  # noqa: BLE001
        print("forked child:", repr(e), file=sys.stderr)
        os._exit(1)
_, status = os.waitpid(pid, 0)
assert status == 0, status

subprocess.run([sys.executable, __file__, "child", str(port)], check=True)
t.join(30)
assert not t.is_alive()

# Other sockets are left alone.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
u.sendto(b"udp", u.getsockname())
data, addr = u.recvfrom(10)
assert data == b"udp" and addr == u.getsockname(), (data, addr)
assert u.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) == socket.IPPROTO_UDP
a, b = socket.socketpair()
a.sendall(b"unix")
assert b.recv(4) == b"unix"
print("OK")
