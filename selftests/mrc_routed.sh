#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two interfaces towards one address behind a router, the topology of the
# kernel's MPTCP selftest simult_flows.sh: the client (B) has 10.0.1.1 on
# c1 and 10.0.2.1 on c2, each a link to the router (R); the server (A) has
# the one address 10.0.3.3 behind it. The client's routes both lead to the
# server, c1's with the lower metric, so routing alone would send
# everything through c1. Both client addresses are endpoints pinned to
# their interfaces (mrc-status endpoint add ADDR --dev DEV); the server
# has none. A connection must open a plane per client interface, send each
# plane's packets out of its own interface, and spread a verified transfer
# over both links.

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
mrc_netns_add R

for p in 1 2; do
	ip link add "c$p" netns "$B" type veth peer name "r$p" netns "$R"
	ip -n "$B" addr add "10.0.$p.1/24" dev "c$p"
	ip -n "$R" addr add "10.0.$p.2/24" dev "r$p"
	ip -n "$B" link set "c$p" up
	ip -n "$R" link set "r$p" up
	# 20 Mbit/s each way, so that one link cannot carry the transfer's rate.
	tc -n "$B" qdisc add dev "c$p" root netem rate 20mbit limit 100
	tc -n "$R" qdisc add dev "r$p" root netem rate 20mbit limit 100
done
ip -n "$B" route add default via 10.0.1.2
ip -n "$B" route add default via 10.0.2.2 metric 101
ip link add r3 netns "$R" type veth peer name s1 netns "$A"
ip -n "$R" addr add 10.0.3.2/24 dev r3
ip -n "$A" addr add 10.0.3.3/24 dev s1
ip -n "$R" link set r3 up
ip -n "$A" link set s1 up
ip -n "$A" route add default via 10.0.3.2
ip netns exec "$R" sysctl -q net.ipv4.ip_forward=1
ip netns exec "$B" "$MRC_STATUS" endpoint add 10.0.1.1 --dev c1
ip netns exec "$B" "$MRC_STATUS" endpoint add 10.0.2.1 --dev c2

# tx_bytes of the client's two links.
link_bytes() {
	ip netns exec "$B" cat /sys/class/net/c1/statistics/tx_bytes /sys/class/net/c2/statistics/tx_bytes |
		tr '\n' ' '
}

total=$((16 << 20))
ip netns exec "$A" "$PERF" server --proto mrc --addr 10.0.3.3 --port 9000 --timeout 120 \
	--json >"$tmp/srv.json" 2>"$tmp/srv.err" &
spid=$!
before=$(link_bytes)
ip netns exec "$B" "$PERF" client --proto mrc --addr 10.0.3.3 --port 9000 \
	--bytes "$total" --msg-size 16384 --retry-ms 20000 --timeout 120 --json \
	>"$tmp/cli.json" 2>"$tmp/cli.err" &
cpid=$!
mrc_wait_for 30 mrc_stat_cmp "$B" conns -eq 1
ip netns exec "$B" "$MRC_STATUS" --json conns >"$tmp/conns.json"
wait $cpid
crc=$?
wait $spid
src=$?
after=$(link_bytes)
mrc_check "transfer: client and server exit 0" "0 0" "$crc $src"
[ "$crc" = 0 ] && [ "$src" = 0 ] || tail -c 400 "$tmp/cli.err" "$tmp/srv.err"

out=$($MRC_PY - "$tmp/srv.json" "$tmp/cli.json" "$tmp/conns.json" "$before" "$after" "$total" <<'PY'
import json, sys
try:
    srv = json.loads(open(sys.argv[1]).readline())
    cli = json.load(open(sys.argv[2]))
    intact = (srv["digest"] == cli["digest"] and srv["bytes"] == int(sys.argv[6])
              and cli["bytes"] == int(sys.argv[6]) and srv["ok"])
except Exception:
    intact = False
conns = json.load(open(sys.argv[3]))["connections"]
local = sorted({p["local_addr"] for p in conns[0]["paths"]}) if conns else []
b = [int(x) for x in sys.argv[4].split()]
a = [int(x) for x in sys.argv[5].split()]
d = [y - x for x, y in zip(b, a)]
share = [round(100 * x / max(1, sum(d))) for x in d]
print(f"intact={intact} locals={','.join(local)} shares={'/'.join(map(str, share))}")
PY
)
echo "# $out"
mrc_check "16 MiB arrive intact (digest, byte count)" "intact=True" "${out%% *}"
mrc_check "paths leave from both client addresses" "locals=10.0.1.1,10.0.2.1" \
	"$(echo "$out" | cut -d' ' -f2)"
shares=$(echo "$out" | sed 's/.*shares=//')
low=$(echo "$shares" | tr '/' '\n' | sort -n | head -1)
mrc_check "each client link carries at least 25% of the bytes ($shares %)" 1 $((low >= 25))

mrc_exit
