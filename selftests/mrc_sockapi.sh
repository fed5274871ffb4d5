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
# MRC_PATH_DEL) and their errors, and the path_added/path_removed events
# mrc-status monitor shows for them. A lingering close (SO_LINGER on,
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
	# mrc-status monitor in B records the path events meanwhile; an
	# endpoint added and removed shows when it is subscribed.
	out=$(mktemp)
	ev=$(mktemp)
	ip netns exec "$B" "$MRC_STATUS" --json monitor >"$ev" 2>&1 &
	mpid=$!
	ip netns exec "$B" "$MRC_STATUS" endpoint add "$cli"
	mrc_wait_for 30 grep -q endpoint_added "$ev"
	ip netns exec "$B" "$MRC_STATUS" endpoint del "$cli"
	ip netns exec "$A" $MRC_UTIL sockopt-server "$srv" 5002 >"$out" 2>&1 &
	pid=$!
	mrc_wait_for 30 grep -q listening "$out"
	ip netns exec "$B" $MRC_UTIL sockopt-client "$srv" 5002 --local "$cli" >"$out.cli"
	mrc_check "SOL_MRC socket options over IPv$fam" 0 $?
	sed 's/^/  /' "$out.cli"
	wait $pid
	mrc_check "IPv$fam sockopt server done" 0 $?
	# The client added 258 paths (ids from 2^24 on) and removed all but
	# one of them, and removed its original paths (printed by the client).
	sleep 1
	kill $mpid
	orig=$(sed -n 's/.*deleted the original paths \[\(.*\)\]/\1/p' "$out.cli" | tr -d ' ')
	got=$($MRC_PY - "$ev" <<'PY'
import json, sys
added, removed, lost = [], [], 0
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        lost += "events were lost" in line
        continue
    if e.get("event") == "path_added":
        added.append(e["path_id"])
    elif e.get("event") == "path_removed":
        removed.append(e["path_id"])
user = 1 << 24
print(f"added={sum(i >= user for i in added)} removed={sum(i >= user for i in removed)} "
      f"orig={','.join(str(i) for i in sorted(set(i for i in removed if i < user) & set(added)))} lost={lost}")
PY
)
	echo "# IPv$fam path events: $got"
	mrc_check "IPv$fam monitor: path_added and path_removed of every path added and removed" \
		"added=258 removed=257 orig=$orig lost=0" "$got"
	rm -f "$out" "$out.cli" "$ev"
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

# Every connection is gone once closed (TIME_WAIT is 1 s; the server's
# FIN above may wait for a retransmission after the link came back).
mrc_wait_for 30 mrc_stat_cmp "$A" conns -eq 0
mrc_check "server connections gone" 0 $?
mrc_wait_for 30 mrc_stat_cmp "$B" conns -eq 0
mrc_check "client connections gone" 0 $?
mrc_cleanup
mrc_wait_for 20 rmmod mrc
mrc_check "rmmod after all sockets closed" 0 $?
mrc_exit
