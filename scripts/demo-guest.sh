#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Guest half of the demo (runs inside the VM, see demo.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

run uname -r
run insmod "$top/mrc.ko"
run grep -E '^(protocol|MRC )' /proc/net/protocols
say 'dmesg | grep -E "^mrc:|PF_IRDA"'
dmesg --notime | grep -E '^mrc:|PF_IRDA' || true
run cat /sys/module/mrc/parameters/family /sys/module/mrc/parameters/port

# Two namespaces joined by two veth planes.
ip netns add a
ip netns add b
for i in 1 2; do
	ip link add "a$i" netns a type veth peer name "b$i" netns b
	ip -n a addr add "10.$i.0.1/24" dev "a$i"
	ip -n b addr add "10.$i.0.2/24" dev "b$i"
	ip -n a link set "a$i" up
	ip -n b link set "b$i" up
done
run ip netns exec b ss -Hlun 'sport = :4796'
say "python3 mrc_util.py create-loop 1000   # socket(AF_MRC, SOCK_SEQPACKET, 0) + close"
python3 "$top/selftests/mrc_util.py" create-loop 1000
say "send 10 malformed datagrams of each kind from a to b over both planes"
for i in 1 2; do ip netns exec a python3 "$top/selftests/mrc_util.py" garbage "10.$i.0.2" 4796 10; done
run ip netns exec b cat /proc/net/mrc
run ip netns exec b "$top/tools/target/release/mrc-status" stats

# A verified transfer over both planes: each side offers its two addresses.
status="$top/tools/target/release/mrc-status"
perf="$top/tools/target/release/mrc-perf"
for i in 1 2; do
	ip netns exec a "$status" endpoint add "10.$i.0.1"
	ip netns exec b "$status" endpoint add "10.$i.0.2"
done
run ip netns exec b "$status" endpoint show
ip netns exec b "$status" monitor >/tmp/mrc-demo-events 2>&1 &
mon=$!
ip netns exec a "$perf" server --addr 10.1.0.1 --port 5000 >/tmp/mrc-demo-server 2>&1 &
srv=$!
say "mrc-perf client --addr 10.1.0.1 --port 5000 --bytes 64M   # in namespace b"
ip netns exec b "$perf" client --addr 10.1.0.1 --port 5000 --bytes $((64 << 20)) --retry-ms 10000 &
cli=$!
sleep 6
run ip netns exec b "$status"
say "ip -n b link set b2 down   # plane 2 dies mid-transfer"
ip -n b link set b2 down
sleep 3
run ip netns exec b "$status" paths
wait $cli
wait $srv
run cat /tmp/mrc-demo-server
kill $mon
say "mrc-status monitor   # events seen in namespace b"
cat /tmp/mrc-demo-events
ip netns del a
ip netns del b
run rmmod mrc
echo
echo "MRC moved verified data over two planes, lost one mid-transfer without losing a byte, and unloaded cleanly."
