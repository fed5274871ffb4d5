#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# SOCK_STREAM on AF_MRC between two namespaces: the calls a TCP program
# relies on (see mrc_stream.py client: writes of any size taken whole,
# partial reads across message boundaries, writev and sendfile,
# MSG_WAITALL, MSG_PEEK, MSG_TRUNC, MSG_DONTWAIT, SO_RCVLOWAT in read and
# poll, FIONREAD/SIOCINQ and SIOCOUTQ, half-close, EPIPE, partial
# non-blocking and timed-out writes, edge-triggered epoll, ECONNRESET),
# over IPv4 and IPv6. Then a 24 MiB stream crosses two planes that
# reorder, duplicate and lose packets while plane 2 goes down mid-transfer;
# it arrives byte for byte.

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_load || exit $KSFT_FAIL
STREAM="$MRC_PY $MRC_DIR/selftests/mrc_stream.py"
tmp=$(mktemp -d)

mrc_netns_add A
mrc_netns_add B
mrc_veth_pair "$A" "$B"

for fam in 4 6; do
	if [ $fam = 4 ]; then srv=10.77.0.1; else srv=fd77::1; fi
	ip netns exec "$A" $STREAM server "$srv" 6000 >"$tmp/srv" 2>&1 &
	pid=$!
	mrc_wait_for 30 grep -q listening "$tmp/srv"
	ip netns exec "$B" $STREAM client "$srv" 6000 | sed 's/^/  /'
	mrc_check "stream socket calls over IPv$fam" 0 "${PIPESTATUS[0]}"
	wait $pid
	mrc_check "IPv$fam stream server done" 0 $?
	grep -v listening "$tmp/srv" | sed 's/^/  server: /'
done

# Two planes with netem faults; plane 2 goes down at about a third of the
# transfer and comes back.
mrc_planes 2 81
for p in 1 2; do
	for end in "$A va$p" "$B vb$p"; do
		set -- $end
		tc -n "$1" qdisc add dev "$2" root netem delay 2ms 1ms \
			loss 1% duplicate 1% reorder 10% rate 40mbit
	done
done
bytes=$((24 << 20))
ip netns exec "$A" $STREAM sink 10.81.1.1 6001 >"$tmp/sink" 2>&1 &
sink=$!
mrc_wait_for 30 grep -q listening "$tmp/sink"
ip netns exec "$B" $STREAM source 10.81.1.1 6001 $bytes --progress >"$tmp/source" 2>&1 &
source=$!
mrc_wait_for 300 grep -q "progress $((8 << 20))" "$tmp/source"
ip -n "$B" route del 10.81.2.0/24 dev vb2
ip -n "$B" link set vb2 down
mrc_wait_for 300 grep -q "progress $((16 << 20))" "$tmp/source"
ip -n "$B" link set vb2 up
ip -n "$B" addr add 10.81.2.2/24 dev vb2 2>/dev/null
wait $source
mrc_check "source done" 0 $?
wait $sink
mrc_check "sink done" 0 $?
sent=$(awk '/^sent/ {print $2, $3}' "$tmp/source")
got=$(awk '/^received/ {print $2, $3}' "$tmp/sink")
echo "# sent $sent"
echo "# received $got"
mrc_check "24 MiB stream through loss, duplicates, reordering and a plane failure" \
	"$bytes $(cut -d' ' -f2 <<<"$sent")" "$got"
mrc_check "the faults made the sender retransmit" 1 "$(($(mrc_stat "$B" tx_retransmits) > 0))"

rm -rf "$tmp"
mrc_exit
