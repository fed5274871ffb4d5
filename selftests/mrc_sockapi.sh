#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The socket calls of AF_MRC between two namespaces: address checks and
# their errors, ECONNREFUSED (blocking and non-blocking with SO_ERROR),
# EADDRINUSE, EINPROGRESS/EISCONN, getsockname/getpeername, EMSGSIZE,
# MSG_DONTWAIT, MSG_PEEK, MSG_TRUNC (flag and return value), 1 MiB messages,
# shutdown in both directions (EOF, POLLRDHUP, EPIPE), ECONNRESET from a
# SO_LINGER 0 close, SO_RCVTIMEO, EINTR, SO_SNDBUF, MSG_WAITALL. IPv4 and
# IPv6. The SOL_MRC options (MRC_HEARTBEAT_MS, MRC_CC, MRC_PATH_ADD,
# MRC_PATH_DEL) and their errors. A lingering close (SO_LINGER on,
# non-zero timeout) waits for the peer's acknowledgement of every message
# and the FIN.

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_load || exit $KSFT_FAIL

mrc_netns_add A
mrc_netns_add B
mrc_veth_pair "$A" "$B"

for fam in 4 6; do
	if [ $fam = 4 ]; then srv=10.77.0.1 cli=10.77.0.2; else srv=fd77::1 cli=fd77::2; fi
	out=$(mktemp)
	ip netns exec "$A" $MRC_UTIL api-server "$srv" 5000 >"$out" 2>&1 &
	pid=$!
	mrc_wait_for 30 grep -q listening "$out"
	ip netns exec "$B" $MRC_UTIL api-client "$srv" 5000 --local "$cli" | sed 's/^/  /'
	mrc_check "socket API over IPv$fam" 0 "${PIPESTATUS[0]}"
	wait $pid
	mrc_check "IPv$fam server done" 0 $?
	mrc_check "IPv$fam server received the half-close message" 1 "$(grep -c "halfclose got b'still'" "$out")"
	rm -f "$out"

	# SOL_MRC options: round trips, errors, inheritance by accepted
	# sockets, and a connection whose original paths are all replaced by
	# an added one.
	out=$(mktemp)
	ip netns exec "$A" $MRC_UTIL sockopt-server "$srv" 5002 >"$out" 2>&1 &
	pid=$!
	mrc_wait_for 30 grep -q listening "$out"
	ip netns exec "$B" $MRC_UTIL sockopt-client "$srv" 5002 --local "$cli" | sed 's/^/  /'
	mrc_check "SOL_MRC socket options over IPv$fam" 0 "${PIPESTATUS[0]}"
	wait $pid
	mrc_check "IPv$fam sockopt server done" 0 $?
	rm -f "$out"
done

# SO_LINGER: close() returns once the peer has acknowledged every message
# and the FIN. The link goes down as soon as close() returns, so the server
# reads all the data and then EOF only if close() really waited.
out=$(mktemp)
ip netns exec "$A" $MRC_UTIL linger-server 10.77.0.1 5001 >"$out" 2>&1 &
pid=$!
mrc_wait_for 30 grep -q listening "$out"
sent=$(ip netns exec "$B" $MRC_UTIL linger-client 10.77.0.1 5001)
rc=$?
ip -n "$B" link set veth-b down
mrc_check "lingering close" 0 $rc
wait $pid
got=$(grep "linger got" "$out")
ip -n "$B" link set veth-b up
echo "# $sent"
echo "# $got"
sha=$(echo "$sent" | sed -n 's/.*sha256 \([0-9a-f]*\);.*/\1/p')
mrc_check "server read every message then EOF after the lingering close" \
	"linger got 64 msgs 4194304 bytes sha256 $sha eof" "$got"
rm -f "$out"

# Every connection is gone once closed (TIME_WAIT is 100 ms; the server's
# FIN above may wait for a retransmission after the link came back).
mrc_wait_for 30 mrc_stat_cmp "$A" conns -eq 0
mrc_check "server connections gone" 0 $?
mrc_wait_for 30 mrc_stat_cmp "$B" conns -eq 0
mrc_check "client connections gone" 0 $?
mrc_cleanup
mrc_wait_for 20 rmmod mrc
mrc_check "rmmod after all sockets closed" 0 $?
mrc_exit
