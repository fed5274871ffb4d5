#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Memory an application makes MRC allocate is charged to its memory cgroup,
# so the cgroup's limit bounds it as it bounds the application's own memory
# and its TCP sockets:
# - a connection's state, allocated at connect();
# - the copies of sent messages held until the peer acknowledges them.
# A process in a cgroup of its own opens connections and sends a message to
# a reader that reads nothing; the cgroup's memory.current must grow by what
# they hold.
#
#   ns A                          ns B
#   veth-a 10.77.0.1/24  <--->    veth-b 10.77.0.2/24

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
mrc_veth_pair "$A" "$B"
ATTACK="$MRC_PY $MRC_DIR/selftests/mrc_attack.py"

# Mounted outside /sys, which `ip netns exec` mounts anew for the namespace.
cg=$tmp/cgroup
mkdir -p $cg
mount -t cgroup2 none $cg
if ! grep -qw memory $cg/cgroup.controllers 2>/dev/null; then
	mrc_skip "no memory cgroup controller (CONFIG_MEMCG)"
	umount $cg
	mrc_exit
fi
echo +memory >$cg/cgroup.subtree_control
grp=$cg/mrc-memcg
mkdir -p $grp

n=20
size=$((1024 * 1024))
ip netns exec "$B" $MRC_UTIL hold-server 10.77.0.2 9300 $n --timeout 60 >"$tmp/hs" 2>&1 &
hs=$!
ip netns exec "$B" $ATTACK tiny-sink 10.77.0.2 9301 1 --rcvbuf 65536 --go "$tmp/never" \
	>"$tmp/sink" 2>&1 &
sink=$!
listening() { grep -q '^listening' "$tmp/hs" && grep -q '^listening' "$tmp/sink"; }
mrc_wait_for 60 listening || mrc_fail "the servers did not listen within 60 s"

# The client joins the cgroup before it starts: everything it makes MRC
# allocate from then on is charged there.
out=$(ip netns exec "$A" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' $grp \
	$MRC_UTIL memcg $grp 10.77.0.2 9300 $n 9301 $size 2>&1)
echo "$out" | sed 's/^/# /'
conns=$(echo "$out" | sed -n 's/^conns [0-9]* added \(-*[0-9]*\)$/\1/p')
msg=$(echo "$out" | sed -n 's/^message [0-9]* added \(-*[0-9]*\)$/\1/p')
echo "# $n connections: ${conns:-none} bytes; a $size-byte message not yet acknowledged: ${msg:-none} bytes"
# A connection's state is far larger than its socket (about 2 KiB, always
# charged): tens of KiB at least.
mrc_check "connections are charged to the cgroup of the task that connects" ok \
	"$([ "${conns:-0}" -ge $((n * 32 * 1024)) ] && echo ok || echo "${conns:-none} bytes for $n")"
# The reader takes at most 64 KiB of it; the sender holds the rest.
mrc_check "sent messages are charged to the cgroup of the task that sends" ok \
	"$([ "${msg:-0}" -ge $((size / 2)) ] && echo ok || echo "${msg:-none} bytes for $size")"

kill $hs $sink 2>/dev/null
wait $hs $sink 2>/dev/null
rmdir $grp 2>/dev/null
umount $cg
mrc_exit
