#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest half of `make bench` (see bench/bench.sh): runs as root inside the
# VM on the release test kernel and measures MRC, MPTCP, SCTP and TCP with
# mrc-perf on the same shaped paths. Every run gets fresh namespaces that
# hold only the links of its scenario, so each transport's path manager
# (MPTCP endpoints, SCTP multihoming, MRC endpoints) sees the same paths.
#
#   client namespace                           server namespace
#     c1 10.80.1.1/24 ------ plane 1 ------ s1 10.80.1.2/24
#     c2 10.80.2.1/24 ------ plane 2 ------ s2 10.80.2.2/24
#     c3 10.80.3.1/24 ------ plane 3 ------ s3 10.80.3.2/24
#     c4 10.80.4.1/24 ------ plane 4 ------ s4 10.80.4.2/24
#     u0 10.81.0.1/24 ------ unshaped ----- u0 10.81.0.2/24   (own scenarios)
#
# Every transfer records the CPU time of the whole VM (/proc/stat) from the
# client's launch to its exit: both namespaces are in the one VM, so that
# is both ends' cost, per megabyte delivered in the report. The
# path-scaling scenario runs MRC alone on the unshaped veth, once per path
# count (BENCH_SCALE_PATHS), for the cost per packet.
#
# A plane is shaped on the egress of both ends: netem (delay, loss) as the
# root qdisc with a tbf (rate) child, TSO/GSO off so that rate and loss
# apply to wire-sized packets. The simult_flows scenarios rebuild the
# topology of the kernel's MPTCP selftest of that name instead.
#
# The pytorch scenario trains a small model with PyTorch DDP between the
# two ends of 2 planes (demo/pytorch/train.py, both ranks under mrcize,
# mptcpize or neither) and takes plane 1 down mid-training.
#
# The *-gro scenarios repeat a plane or unshaped scenario with GRO on at
# the receiving (server) end of each veth, see gro_rx().
#
# The raw files of every run go under OUTDIR (layout in bench/collect.py);
# with --emit, each finished scenario is also printed on stdout as gzip +
# base64 lines prefixed with "@@mrc-bench ", so the host can rebuild
# results.json from the VM's output when OUTDIR is not shared with it.
#
# Usage: bench/run-guest.sh [--ko PATH] [--mptcp-connect PATH] [--emit] OUTDIR
# Settings: BENCH_* environment variables, listed in BENCHMARKS.md.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
ko=${MRC_KO:-$top/mrc.ko}
mptcp_connect=
emit=0
while [ $# -gt 1 ]; do
	case $1 in
	--ko) ko=$2; shift 2 ;;
	--mptcp-connect) mptcp_connect=$2; shift 2 ;;
	--emit) emit=1; shift ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--ko PATH] [--mptcp-connect PATH] [--emit] OUTDIR" >&2; exit 2; }
out=$1

PERF=${MRC_PERF:-$top/tools/target/release/mrc-perf}
STATUS=${MRC_STATUS:-$top/tools/target/release/mrc-status}
PY=${BENCH_GUEST_PYTHON:-/usr/bin/python3}
COLLECT="$top/bench/collect.py"

# Settings. Lists are comma-separated so that they pass through the VM
# command line unquoted.
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	REPS=${BENCH_REPS:-1}
	DURATION=${BENCH_DURATION:-2}
	FAIL_DURATION=${BENCH_FAIL_DURATION:-3}
	FAIL_AT=${BENCH_FAIL_AT:-1.5}
	SNAP_AT=${BENCH_SNAP_AT:-0.5}
	SIMULT_BYTES=${BENCH_SIMULT_BYTES:-$((4 << 20))}
else
	REPS=${BENCH_REPS:-3}
	DURATION=${BENCH_DURATION:-5}
	FAIL_DURATION=${BENCH_FAIL_DURATION:-6}
	FAIL_AT=${BENCH_FAIL_AT:-2}
	SNAP_AT=${BENCH_SNAP_AT:-1}
	# simult_flows.sh's transfer: 2 * 2048 * 4096 bytes.
	SIMULT_BYTES=${BENCH_SIMULT_BYTES:-$((2 * 2048 * 4096))}
fi
SIMULT_REPS=${BENCH_SIMULT_REPS:-1}
PROTOS=${BENCH_PROTOS:-mrc,mptcp,sctp,tcp}
BENCH_PERF=${BENCH_PERF:-0}
PERF_SECS=${BENCH_PERF_SECS:-$DURATION}
SCENARIOS=${BENCH_SCENARIOS:-planes-equal,planes-equal-gro,planes-unequal,planes-loss,failover,unshaped,unshaped-gro,unshaped-9000,unshaped-9000-gro,latency,fairness,simult,path-scaling,pytorch}
# Paths per MRC connection of the path-scaling scenario.
SCALE_PATHS=${BENCH_SCALE_PATHS:-1,8,64,256}
RATE=${BENCH_PLANE_RATE:-50}
UNEQUAL=${BENCH_UNEQUAL_RATES:-80,40,20,10}
DELAY_MS=${BENCH_DELAY_MS:-1}
LOSS_PCT=${BENCH_LOSS:-1}
TBF_BURST=${BENCH_TBF_BURST:-15140}
TBF_LATENCY=${BENCH_TBF_LATENCY:-20ms}
MSG_SIZE=${BENCH_MSG_SIZE:-16384}
LAT_SIZE=${BENCH_LAT_SIZE:-64}
FAIR_CONNS=${BENCH_FAIR_CONNS:-100}
STALL=${BENCH_STALL_TIMEOUT:-5}
# 100 connections and their 200 threads share 2 emulated CPUs: one of them
# can wait for the CPU longer than STALL without any transport at fault.
FAIR_STALL=${BENCH_FAIR_STALL_TIMEOUT:-30}
INTERVAL_MS=${BENCH_INTERVAL_MS:-100}
FAIL_INTERVAL_MS=${BENCH_FAIL_INTERVAL_MS:-10}
MPTCP_ENDPOINTS=${BENCH_MPTCP_ENDPOINTS:-both}
MRC_ENDPOINTS=${BENCH_MRC_ENDPOINTS:-1}
# Module parameters of mrc.ko, comma-separated (e.g. pacing=0).
MRC_PARAMS=${BENCH_MRC_PARAMS:-}
# Receive packet steering over every CPU on each link (see rps()).
RPS=${BENCH_RPS:-1}
RPS_MASK=$(printf '%x' $(((1 << $(nproc)) - 1)))
# Tunables of both namespaces, comma-separated NAME=VALUE for `mrc-status
# param set` (e.g. cc=reno), set before each MRC run.
MRC_NS_PARAMS=${BENCH_MRC_NS_PARAMS:-}
# Upper bound of one mrc-perf process, in case the stall timeout (--timeout)
# does not end a stuck transfer (e.g. a connect() that never returns).
HARD_TIMEOUT=${BENCH_HARD_TIMEOUT:-$((${DURATION%.*} + ${FAIL_DURATION%.*} + 3 * STALL + 20))}
PORT_BASE=20000
# The PyTorch scenario (pytorch): DDP training (demo/pytorch/train.py) over
# 2 planes, plane 1 taken down once rank 0 has done TRAIN_FAIL_STEP steps;
# a run still going TRAIN_WAIT s after that is killed. TRAIN_PROTOS: mrc
# runs both ranks under mrcize, mptcp under mptcpize, tcp as they are.
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	TRAIN_STEPS=${BENCH_TRAIN_STEPS:-60}
	TRAIN_FAIL_STEP=${BENCH_TRAIN_FAIL_STEP:-20}
else
	TRAIN_STEPS=${BENCH_TRAIN_STEPS:-300}
	TRAIN_FAIL_STEP=${BENCH_TRAIN_FAIL_STEP:-100}
fi
TRAIN_PROTOS=${BENCH_TRAIN_PROTOS:-mrc,mptcp,tcp}
TRAIN_REPS=${BENCH_TRAIN_REPS:-1}
TRAIN_WAIT=${BENCH_TRAIN_WAIT:-150}
# torch's own timeout of the rendezvous and of each collective.
TRAIN_TIMEOUT=${BENCH_TRAIN_TIMEOUT:-120}
TORCH_PY=${BENCH_TORCH_PY:-${MRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mrc}/venv-torch/bin/python}
MRCIZE=${BENCH_MRCIZE:-$top/tools/target/release/mrcize}
MPTCPIZE=${BENCH_MPTCPIZE:-$(command -v mptcpize || echo mptcpize)}
# Unit of the tick counts of /proc/stat.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
# 1 in the GRO variants of a scenario (gro_rx), set by the scenario.
SC_GRO=0

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*"; }
has() { case ",$1," in *",$2,"*) return 0 ;; esac; return 1; }
csv_json() { printf '[%s]' "$1"; }

# --- Namespaces and links ---------------------------------------------------

seq_no=0
CLI='' SRV='' RTR=''
SERVER_ADDR='' NPLANES=0
namespaces=()

teardown() {
	local ns
	for ns in "${namespaces[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	namespaces=()
}
trap teardown EXIT

# new_namespaces: picks fresh random names for the next run's namespaces
# (CLI, SRV and, for simult_flows, RTR); the topology functions create them.
new_namespaces() {
	local r
	r=$(mktemp -u XXXXXX)
	seq_no=$((seq_no + 1))
	CLI="mrcb-c-$r" SRV="mrcb-s-$r" RTR="mrcb-r-$r"
	namespaces=("$CLI" "$SRV" "$RTR")
}

ns_add() {
	ip netns add "$1"
	ip -n "$1" link set lo up
}

# offloads_off NS DEV: wire-sized packets through the qdiscs. The outcome
# is recorded with the topology (offloads_*.txt); a refusal is not fatal.
offloads_off() {
	ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null ||
		echo "warning: $2: could not turn TSO/GSO/GRO off" >&2
}

# gro_rx NS DEV [PEER_NS PEER_DEV]: GRO on at the receiving end DEV of a
# veth, for the GRO variants of the scenarios. veth runs GRO (in its NAPI
# poll) only on packets that come from a peer without TSO
# (veth_skb_is_eligible_for_gro() in drivers/net/veth.c): given the
# sending end, its TSO is turned off as well, GSO left as it is. Unlike
# offloads_off, a refusal fails the set-up, as the run would measure the
# base scenario under another name; the outcome is recorded with the
# topology (offloads_*.txt).
gro_rx() {
	local k
	if [ $# -ge 4 ]; then
		ip netns exec "$3" ethtool -K "$4" tso off >/dev/null
		k=$(ip netns exec "$3" ethtool -k "$4")
		grep -q '^tcp-segmentation-offload: off' <<<"$k" || { echo "$4: TSO did not turn off" >&2; return 1; }
	fi
	ip netns exec "$1" ethtool -K "$2" gro on >/dev/null
	k=$(ip netns exec "$1" ethtool -k "$2")
	grep -q '^generic-receive-offload: on' <<<"$k" || { echo "$2: GRO did not turn on" >&2; return 1; }
}

# rps NS DEV...: with BENCH_RPS=1 (the default), receive packet steering
# over every CPU on each device's receive queues. Both ends of a veth run
# on one VM: without it, a packet's receive processing runs on the CPU
# that sent it, so one CPU carries the sender and both ends' protocol
# work while the other idles, where two hosts would each have their own.
# TCP's 64 KiB GSO packets hide this; transports that process each
# datagram (MRC, SCTP) are bound by it. It applies to every transport.
rps() {
	[ "$RPS" = 1 ] || return 0
	local ns=$1 dev
	shift
	for dev in "$@"; do
		# shellcheck disable=SC2016 # expanded by the inner shell
		ip netns exec "$ns" sh -c 'for q in /sys/class/net/$1/queues/rx-*/rps_cpus; do
			echo "$2" >"$q" || exit 1; done' sh "$dev" "$RPS_MASK" ||
			echo "warning: $dev: could not set rps_cpus" >&2
	done
}

# shape NS DEV RATE_MBIT DELAY_MS LOSS_PCT
shape() {
	local netem=(delay "${4}ms")
	[ "$5" = 0 ] || netem+=(loss "${5}%")
	tc -n "$1" qdisc add dev "$2" root handle 1: netem "${netem[@]}" limit 1000
	tc -n "$1" qdisc add dev "$2" parent 1:1 handle 10: tbf rate "${3}mbit" \
		burst "$TBF_BURST" latency "$TBF_LATENCY"
}

# topo_planes LOSS_PCT RATES: one shaped plane per comma-separated rate.
topo_planes() {
	local loss=$1 p=0 rate
	local -a rates
	IFS=, read -ra rates <<<"$2"
	ns_add "$CLI"
	ns_add "$SRV"
	for rate in "${rates[@]}"; do
		p=$((p + 1))
		ip link add "c$p" netns "$CLI" type veth peer name "s$p" netns "$SRV"
		ip -n "$CLI" addr add "10.80.$p.1/24" dev "c$p"
		ip -n "$SRV" addr add "10.80.$p.2/24" dev "s$p"
		offloads_off "$CLI" "c$p"
		offloads_off "$SRV" "s$p"
		shape "$CLI" "c$p" "$rate" "$DELAY_MS" "$loss"
		shape "$SRV" "s$p" "$rate" "$DELAY_MS" "$loss"
		ip -n "$CLI" link set "c$p" up
		ip -n "$SRV" link set "s$p" up
		# The client ends' TSO is already off.
		[ "$SC_GRO" = 0 ] || gro_rx "$SRV" "s$p"
		rps "$CLI" "c$p"
		rps "$SRV" "s$p"
	done
}

# topo_unshaped [MTU]: one veth pair (MTU 1500 unless given), no qdisc
# beyond the default, offloads as veth has them (TSO and GSO on, GRO off);
# in the GRO variants, GRO on at the server's end and TSO off at the
# client's.
topo_unshaped() {
	ns_add "$CLI"
	ns_add "$SRV"
	ip link add u0 netns "$CLI" mtu "${1:-1500}" type veth peer name u0 netns "$SRV" mtu "${1:-1500}"
	ip -n "$CLI" addr add 10.81.0.1/24 dev u0
	ip -n "$SRV" addr add 10.81.0.2/24 dev u0
	ip -n "$CLI" link set u0 up
	ip -n "$SRV" link set u0 up
	[ "$SC_GRO" = 0 ] || gro_rx "$SRV" u0 "$CLI" u0
	rps "$CLI" u0
	rps "$SRV" u0
}

# topo_simult RATE1 RATE2 DELAY1 DELAY2: the topology of the kernel's
# tools/testing/selftests/net/mptcp/simult_flows.sh (IPv4 part): the client
# (ns1) reaches the server (ns3) through a router (ns2) over two links shaped
# with netem on both ends ("rate Rmbit [delay Dms] limit 50").
topo_simult() {
	local ns dev
	for ns in "$CLI" "$RTR" "$SRV"; do ns_add "$ns"; done
	ip link add ns1eth1 netns "$CLI" type veth peer name ns2eth1 netns "$RTR"
	ip link add ns1eth2 netns "$CLI" type veth peer name ns2eth2 netns "$RTR"
	ip link add ns2eth3 netns "$RTR" type veth peer name ns3eth1 netns "$SRV"
	ip -n "$CLI" addr add 10.0.1.1/24 dev ns1eth1
	ip -n "$CLI" link set ns1eth1 up mtu 1500
	ip -n "$CLI" route add default via 10.0.1.2
	ip -n "$CLI" addr add 10.0.2.1/24 dev ns1eth2
	ip -n "$CLI" link set ns1eth2 up mtu 1500
	ip -n "$CLI" route add default via 10.0.2.2 metric 101
	for dev in 1 2 3; do
		ip -n "$RTR" addr add "10.0.$dev.2/24" dev "ns2eth$dev"
		ip -n "$RTR" link set "ns2eth$dev" up mtu 1500
	done
	ip netns exec "$RTR" sysctl -q net.ipv4.ip_forward=1
	ip -n "$SRV" addr add 10.0.3.3/24 dev ns3eth1
	ip -n "$SRV" link set ns3eth1 up mtu 1500
	ip -n "$SRV" route add default via 10.0.3.2
	local d1=() d2=()
	[ "$3" -gt 0 ] && d1=(delay "${3}ms")
	[ "$4" -gt 0 ] && d2=(delay "${4}ms")
	tc -n "$CLI" qdisc add dev ns1eth1 root netem rate "${1}mbit" "${d1[@]}" limit 50
	tc -n "$CLI" qdisc add dev ns1eth2 root netem rate "${2}mbit" "${d2[@]}" limit 50
	tc -n "$RTR" qdisc add dev ns2eth1 root netem rate "${1}mbit" "${d1[@]}" limit 50
	tc -n "$RTR" qdisc add dev ns2eth2 root netem rate "${2}mbit" "${d2[@]}" limit 50
	rps "$CLI" ns1eth1 ns1eth2
	rps "$RTR" ns2eth1 ns2eth2 ns2eth3
	rps "$SRV" ns3eth1
}

# topo_info TOPO_FUNC TOPO_ARGS...: the server address and plane count of a
# topology, set in the calling shell (the topology itself is built in a
# subshell).
topo_info() {
	local -a rates
	case $1 in
	topo_planes)
		IFS=, read -ra rates <<<"$3"
		SERVER_ADDR=10.80.1.2 NPLANES=${#rates[@]}
		;;
	topo_unshaped) SERVER_ADDR=10.81.0.2 NPLANES=0 ;;
	topo_simult) SERVER_ADDR=10.0.3.3 NPLANES=0 ;;
	esac
}

# --- Transport set-up ---------------------------------------------------------

# mptcp_planes: the in-kernel path manager on the planes, as the kernel's
# selftests configure it: limits in both namespaces, a "subflow" endpoint
# per extra plane on the client and a "signal" endpoint per extra plane on
# the server (BENCH_MPTCP_ENDPOINTS=subflow|signal keeps only one kind).
mptcp_planes() {
	local ns p
	for ns in "$CLI" "$SRV"; do
		ip -n "$ns" mptcp limits set subflows 8 add_addr_accepted 8
	done
	for ((p = 2; p <= NPLANES; p++)); do
		[ "$MPTCP_ENDPOINTS" = signal ] ||
			ip -n "$CLI" mptcp endpoint add "10.80.$p.1" dev "c$p" subflow
		[ "$MPTCP_ENDPOINTS" = subflow ] ||
			ip -n "$SRV" mptcp endpoint add "10.80.$p.2" dev "s$p" signal
	done
}

# mptcp_simult: the path manager settings of simult_flows.sh.
mptcp_simult() {
	ip -n "$CLI" mptcp limits set add_addr_accepted 1 subflows 1
	ip -n "$CLI" mptcp endpoint add 10.0.2.1 dev ns1eth2 subflow
	ip -n "$SRV" mptcp limits set add_addr_accepted 1 subflows 1
}

# mrc_endpoints: one MRC endpoint per local plane address, so that
# MRC's path manager (once it uses more than one path) sees every plane.
# Best effort: the outcome is recorded, a refusal does not stop the run.
mrc_endpoints() {
	[ "$MRC_ENDPOINTS" = 1 ] || return 0
	local p
	for ((p = 1; p <= NPLANES; p++)); do
		ip netns exec "$CLI" "$STATUS" endpoint add "10.80.$p.1" --dev "c$p" 2>&1 || true
		ip netns exec "$SRV" "$STATUS" endpoint add "10.80.$p.2" --dev "s$p" 2>&1 || true
	done
}

# mrc_ev_per_plane: the BENCH_MRC_NS_PARAMS tunables, and RUN_EV paths per
# plane for new connections, in both
# namespaces (both ends derive the path ids of the planes from it). Unlike
# the endpoints, a refusal fails the set-up: the run would measure another
# path count than its point says.
mrc_ev_per_plane() {
	local kv
	for kv in ${MRC_NS_PARAMS//,/ }; do
		ip netns exec "$CLI" "$STATUS" param set "${kv%%=*}" "${kv#*=}"
		ip netns exec "$SRV" "$STATUS" param set "${kv%%=*}" "${kv#*=}"
	done
	[ -n "$RUN_EV" ] || return 0
	ip netns exec "$CLI" "$STATUS" param set ev_per_plane "$RUN_EV"
	ip netns exec "$SRV" "$STATUS" param set ev_per_plane "$RUN_EV"
}

mrc_endpoints_simult() {
	[ "$MRC_ENDPOINTS" = 1 ] || return 0
	ip netns exec "$CLI" "$STATUS" endpoint add 10.0.1.1 --dev ns1eth1 2>&1 || true
	ip netns exec "$CLI" "$STATUS" endpoint add 10.0.2.1 --dev ns1eth2 2>&1 || true
}

# --- What is recorded -----------------------------------------------------------

sysctls() { # NS REGEX
	ip netns exec "$1" sysctl -a 2>/dev/null | grep -E "$2" || true
}

# links NS: the network devices of a namespace but lo.
links() {
	ip -n "$1" -br link show | awk '$1 != "lo" { sub(/@.*/, "", $1); print $1 }'
}

# topo_params DIR: the shaping, addressing and offloads of this topology.
topo_params() {
	local d=$1/params pair role ns dev
	mkdir -p "$d"
	for pair in "client:$CLI" "server:$SRV" "router:$RTR"; do
		role=${pair%%:*} ns=${pair#*:}
		[ -e "/run/netns/$ns" ] || continue
		tc -n "$ns" qdisc show >"$d/tc_$role.txt" 2>&1 || true
		ip -n "$ns" -br addr show >"$d/addr_$role.txt" 2>&1 || true
		ip -n "$ns" route show >"$d/route_$role.txt" 2>&1 || true
		for dev in $(links "$ns"); do
			ip netns exec "$ns" ethtool -k "$dev" 2>/dev/null |
				grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' |
				sed "s/^/$dev /" >>"$d/offloads_$role.txt" || true
			ip netns exec "$ns" sh -c "cat /sys/class/net/$dev/queues/rx-*/rps_cpus" 2>/dev/null |
				sed "s/^/$dev rps_cpus: /" >>"$d/offloads_$role.txt" || true
		done
	done
}

# proto_params DIR PROTO: the settings of one transport in this topology.
proto_params() {
	local d=$1/params
	mkdir -p "$d"
	case $2 in
	tcp)
		sysctls "$CLI" '^net\.ipv4\.tcp_(congestion_control|rmem|wmem|ecn|sack|timestamps|window_scaling|slow_start_after_idle|autocorking|notsent_lowat) |^net\.core\.(rmem|wmem)_(max|default) |^net\.core\.default_qdisc ' >"$d/sysctl.txt"
		;;
	mptcp | mptcp_connect)
		sysctls "$CLI" '^net\.mptcp\.|^net\.ipv4\.tcp_(congestion_control|rmem|wmem) ' >"$d/sysctl.txt"
		{
			echo "client:"; ip -n "$CLI" mptcp limits show; ip -n "$CLI" mptcp endpoint show
			echo "server:"; ip -n "$SRV" mptcp limits show; ip -n "$SRV" mptcp endpoint show
		} >"$d/mptcp_pm.txt" 2>&1 || true
		;;
	sctp)
		sysctls "$CLI" '^net\.sctp\.' >"$d/sysctl.txt"
		printf '%s\n' \
			"server bound to the wildcard address: its INIT-ACK lists every address of its namespace" \
			"client connects to $SERVER_ADDR with one connect() (no sctp_bindx/sctp_connectx in mrc-perf)" \
			"data uses the primary path only (Linux SCTP has no concurrent multipath transfer);" \
			"the other addresses serve as alternate paths after the primary fails (pf_enable, pf_retrans, path_max_retrans)" \
			>"$d/multihoming.txt"
		;;
	mrc)
		ip netns exec "$CLI" "$STATUS" --json param show >"$d/mrc_param.json" 2>"$d/mrc_param.err" || true
		ip netns exec "$CLI" "$STATUS" --json endpoint show >"$d/mrc_endpoints_client.json" 2>&1 || true
		ip netns exec "$SRV" "$STATUS" --json endpoint show >"$d/mrc_endpoints_server.json" 2>&1 || true
		grep -H . /sys/module/mrc/parameters/* >"$d/module_params.txt" 2>&1 || true
		;;
	esac
}

# snapshot DIR PROTO: what the client's stack shows mid-transfer.
snapshot() {
	local d=$1/snapshot
	mkdir -p "$d"
	case $2 in
	tcp | mptcp)
		ip netns exec "$CLI" ss -tniH 2>&1 | head -n 120 >"$d/ss_tcp.txt" || true
		[ "$2" = tcp ] || ip netns exec "$CLI" ss -MniH 2>&1 | head -n 60 >"$d/ss_mptcp.txt" || true
		;;
	sctp)
		ip netns exec "$CLI" cat /proc/net/sctp/assocs >"$d/sctp_assocs.txt" 2>&1 || true
		ip netns exec "$CLI" cat /proc/net/sctp/remaddr >"$d/sctp_remaddr.txt" 2>&1 || true
		;;
	mrc)
		ip netns exec "$CLI" "$STATUS" --json show >"$d/mrc_show.json" 2>"$d/mrc_show.err" || true
		;;
	esac
}

# counters DIR PROTO: per-run protocol counters of both ends (the
# namespaces are fresh, so absolute values are this run's). In the GRO
# variants also veth's own (ethtool -S): rx_queue_N_xdp_packets counts the
# packets its NAPI poll, where GRO runs, received.
counters() {
	local d=$1/counters ns role dev
	mkdir -p "$d"
	for role in client server; do
		[ $role = client ] && ns=$CLI || ns=$SRV
		case $2 in
		tcp | mptcp | mptcp_connect)
			ip netns exec "$ns" nstat -a 2>/dev/null |
				grep -E '^(TcpRetransSegs|TcpExtTCPLostRetransmit|TcpExtTCPTimeouts|TcpExtTCPSackRecovery|MPTcp)' \
					>"$d/nstat_$role.txt" || true
			;;
		sctp)
			ip netns exec "$ns" cat /proc/net/sctp/snmp >"$d/sctp_snmp_$role.txt" 2>&1 || true
			;;
		mrc)
			ip netns exec "$ns" cat /proc/net/mrc >"$d/proc_net_mrc_$role.txt" 2>&1 || true
			;;
		esac
		tc -n "$ns" -s qdisc show >"$d/tc_$role.txt" 2>&1 || true
		if [ "$SC_GRO" = 1 ]; then
			for dev in $(links "$ns"); do
				ip netns exec "$ns" ethtool -S "$dev" 2>&1 | sed "s/^/$dev /" || true
			done >"$d/ethtool_$role.txt"
		fi
	done
}

# --- One run ------------------------------------------------------------------------

# cpu_ticks VAR: the counters of the "cpu" line of /proc/stat (all CPUs,
# in 1/CLK_TCK s: user nice system idle iowait irq softirq steal guest
# guest_nice) as a JSON array, read without starting a process.
cpu_ticks() {
	local -a f
	local IFS=' '
	read -ra f </proc/stat
	IFS=,
	printf -v "$1" '[%s]' "${f[*]:1}"
}

# wait_listen FILE PID: until the mrc-perf server says it listens.
wait_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q 'listening on' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# Per-run settings, set by the scenario before each call of run_perf.
RUN_CONNS=1
RUN_INTERVAL=100
RUN_ARGS=()
RUN_KILL_AT=''
RUN_KILL_DEV=''
RUN_HARD=$HARD_TIMEOUT
# A point of a scenario that varies a setting: its directory under the
# transport's (PROTO/POINT/repK), KEY=VALUE lines for meta.env, and the
# MRC ev_per_plane of both namespaces (empty: the default).
RUN_POINT=''
RUN_POINT_ENV=''
RUN_EV=''
# "training" for the runs of the pytorch scenario (run_training).
RUN_KIND=''

# profile_start DIR: perf samples every CPU for BENCH_PERF_SECS from now
# (BENCH_PERF=1, first repetitions only: the samples cost CPU time), into
# DIR/perf.data; sets ppid.
profile_start() {
	sysctl -qw kernel.kptr_restrict=0 kernel.perf_event_paranoid=-1
	# At real-time priority and with 8 MiB per CPU for its samples: a
	# softirq-bound run starves an ordinary perf, which then loses them.
	chrt -f 10 perf record -q -m 2048 -e cpu-clock -F 1000 -a -g -o "$1/perf.data" -- sleep "$PERF_SECS" 2>/dev/null &
	ppid=$!
	echo "profiled=1" >>"$1/meta.env"
}

# profile_end DIR PROTO PID: waits for perf and prints its report on
# stderr (bench/profile-report.sh), where the host keeps it in vm.err.
profile_end() {
	wait "$3" || true
	{
		echo "== profile of $1 ($2, $PERF_SECS s from the client's start)"
		"$top/bench/profile-report.sh" "$1/perf.data"
	} >&2
	rm -f "$1/perf.data"
}

# run_perf DIR PROTO: one mrc-perf transfer from the client to the server
# namespace in the current topology. Writes meta.env, client.json,
# server.json and their stderr into DIR. Never fails: the outcome is data.
run_perf() {
	local dir=$1 proto=$2 port=$((PORT_BASE + seq_no)) spid cpid kpid='' crc=0 src=0 t0 tc_exit
	local cpu0 cpu1 ppid=''
	mkdir -p "$dir"
	{
		printf 'transport=%s\nport=%s\nconns=%s\ninterval_ms=%s\nserver_addr=%s\n' \
			"$proto" "$port" "$RUN_CONNS" "$RUN_INTERVAL" "$SERVER_ADDR"
		printf 'client_args=%s\nhard_timeout_s=%s\nstall_timeout_s=%s\n' "${RUN_ARGS[*]}" "$RUN_HARD" \
			"${RUN_STALL:-$STALL}"
	} >>"$dir/meta.env"
	ip netns exec "$SRV" timeout -k 5 "$RUN_HARD" "$PERF" server --proto "$proto" --port "$port" \
		--conns "$RUN_CONNS" --timeout "${RUN_STALL:-$STALL}" --interval-ms "$RUN_INTERVAL" --json \
		>"$dir/server.json" 2>"$dir/server.err" &
	spid=$!
	if ! wait_listen "$dir/server.err" "$spid"; then
		echo "the mrc-perf server did not start listening: $(tail -n 2 "$dir/server.err" | tr '\n' ' ')" >"$dir/error"
		kill "$spid" 2>/dev/null || true
		wait "$spid" || src=$?
		printf 'server_rc=%s\n' "$src" >>"$dir/meta.env"
		return 0
	fi
	cpu_ticks cpu0
	t0=$EPOCHREALTIME
	ip netns exec "$CLI" timeout -k 5 "$RUN_HARD" "$PERF" client --proto "$proto" \
		--addr "$SERVER_ADDR" --port "$port" --parallel "$RUN_CONNS" --timeout "${RUN_STALL:-$STALL}" \
		--interval-ms "$RUN_INTERVAL" --retry-ms 2000 --json "${RUN_ARGS[@]}" \
		>"$dir/client.json" 2>"$dir/client.err" &
	cpid=$!
	if [ -n "$RUN_KILL_AT" ]; then
		(
			trap - ERR
			sleep "$RUN_KILL_AT"
			echo "t_kill=$EPOCHREALTIME" >>"$dir/meta.env"
			ip -n "$CLI" link set "$RUN_KILL_DEV" down || echo "kill_failed=true" >>"$dir/meta.env"
			echo "t_kill_done=$EPOCHREALTIME" >>"$dir/meta.env"
		) &
		kpid=$!
	fi
	[ "$REP" != 1 ] || [ "$BENCH_PERF" != 1 ] || profile_start "$dir"
	if [ "$REP" = 1 ]; then
		sleep "$SNAP_AT"
		snapshot "$dir" "$proto"
	fi
	wait "$cpid" || crc=$?
	tc_exit=$EPOCHREALTIME
	cpu_ticks cpu1
	wait "$spid" || src=$?
	[ -z "$kpid" ] || wait "$kpid" || true
	printf 't0=%s\nt_client_exit=%s\nclient_rc=%s\nserver_rc=%s\n' "$t0" "$tc_exit" "$crc" "$src" >>"$dir/meta.env"
	# CPU time of the whole VM from the client's launch to its exit.
	printf 'cpu_ticks_t0=%s\ncpu_ticks_client_exit=%s\nclk_tck=%s\n' "$cpu0" "$cpu1" "$CLK_TCK" >>"$dir/meta.env"
	counters "$dir" "$proto"
	[ -z "$ppid" ] || profile_end "$dir" "$proto" "$ppid"
}

# run_mptcp_connect DIR MAX_TIME_MS: the selftest's own tool, as
# simult_flows.sh runs it (BENCH_SIMULT_BYTES, 16 MiB, from the client and
# 80 KiB back).
run_mptcp_connect() {
	local dir=$1 max=$2 port=$((PORT_BASE + seq_no)) spid crc=0 src=0 t0 t1 i cpu0 cpu1
	mkdir -p "$dir"
	printf 'transport=mptcp_connect\nport=%s\nmax_time_ms=%s\n' "$port" "$max" >>"$dir/meta.env"
	if [ ! -x "$mptcp_connect" ]; then
		echo "mptcp_connect not available (built by bench/bench.sh from the kernel tree; pass --mptcp-connect)" >"$dir/error"
		return 0
	fi
	ip netns exec "$SRV" timeout 61 "$mptcp_connect" -jt 30 -l -p "$port" -T "$max" 0.0.0.0 \
		<"$tmp/small" >"$tmp/sout" 2>"$dir/server.err" &
	spid=$!
	for ((i = 0; i < 200; i++)); do
		ip netns exec "$SRV" ss -Hltn "sport = :$port" | grep -q . && break
		sleep 0.05
	done
	cpu_ticks cpu0
	t0=$EPOCHREALTIME
	ip netns exec "$CLI" timeout 61 "$mptcp_connect" -jt 30 -p "$port" -T "$max" "$SERVER_ADDR" \
		<"$tmp/large" >"$tmp/cout" 2>"$dir/client.err" || crc=$?
	t1=$EPOCHREALTIME
	cpu_ticks cpu1
	wait "$spid" || src=$?
	local cmp_large=0 cmp_small=0
	cmp -s "$tmp/large" "$tmp/sout" || cmp_large=1
	cmp -s "$tmp/small" "$tmp/cout" || cmp_small=1
	{
		printf 't0=%s\nt_client_exit=%s\nclient_rc=%s\nserver_rc=%s\n' "$t0" "$t1" "$crc" "$src"
		# CPU time of the whole VM from the client's launch to its exit.
		printf 'cpu_ticks_t0=%s\ncpu_ticks_client_exit=%s\nclk_tck=%s\n' "$cpu0" "$cpu1" "$CLK_TCK"
		printf 'bytes=%s\ncmp_sent_ok=%s\ncmp_back_ok=%s\n' "$(stat -c %s "$tmp/large")" \
			"$([ $cmp_large = 0 ] && echo true || echo false)" \
			"$([ $cmp_small = 0 ] && echo true || echo false)"
	} >>"$dir/meta.env"
	counters "$dir" mptcp_connect
}

# train_steps FILE: training steps rank 0 has reported in FILE.
train_steps() {
	local n=0 line
	while IFS= read -r line; do
		[[ $line == '{"step": '* ]] && n=$((n + 1))
	done <"$1" 2>/dev/null
	echo $n
}

# run_training DIR PROTO: DDP training between the planes' ends: rank 0
# (the c10d store and Gloo) in the server namespace at SERVER_ADDR, rank 1
# in the client namespace, Gloo bound to plane 1 on both (GLOO_SOCKET_IFNAME);
# under mrcize for mrc, mptcpize for mptcp. Once rank 0 has reported
# TRAIN_FAIL_STEP steps, the client's plane 1 goes down (as in the failover
# scenario); a run still going TRAIN_WAIT s later is killed. Writes
# meta.env, rank0.out (train.py's JSON lines), rank0.err, rank1.err.
run_training() {
	local dir=$1 proto=$2 port=$((PORT_BASE + seq_no)) wrap=() pid0 pid1 rc0=0 rc1=0 t0
	local t_kill=0 killed=false deadline limit cpu0 cpu1
	mkdir -p "$dir"
	case $proto in
	mrc) wrap=("$MRCIZE" run) ;;
	mptcp) wrap=("$MPTCPIZE" run) ;;
	esac
	{
		printf 'transport=%s\nport=%s\nserver_addr=%s\nsteps=%s\nfail_step=%s\n' \
			"$proto" "$port" "$SERVER_ADDR" "$TRAIN_STEPS" "$TRAIN_FAIL_STEP"
		printf 'wait_s=%s\ntorch_timeout_s=%s\nwrapper=%s\nkill_dev=c1\n' \
			"$TRAIN_WAIT" "$TRAIN_TIMEOUT" "${wrap[*]:-none}"
	} >>"$dir/meta.env"
	if [ ! -x "$TORCH_PY" ]; then
		echo "no PyTorch venv at $TORCH_PY (scripts/setup-pytorch.sh)" >"$dir/error"
		return 0
	fi
	if [ ${#wrap[@]} -gt 0 ] && ! command -v "${wrap[0]}" >/dev/null; then
		echo "${wrap[0]} not found" >"$dir/error"
		return 0
	fi
	cpu_ticks cpu0
	t0=$EPOCHREALTIME
	ip netns exec "$SRV" env GLOO_SOCKET_IFNAME=s1 "${wrap[@]}" "$TORCH_PY" "$top/demo/pytorch/train.py" \
		--rank 0 --world-size 2 --master-addr "$SERVER_ADDR" --master-port "$port" \
		--steps "$TRAIN_STEPS" --timeout "$TRAIN_TIMEOUT" >"$dir/rank0.out" 2>"$dir/rank0.err" &
	pid0=$!
	ip netns exec "$CLI" env GLOO_SOCKET_IFNAME=c1 "${wrap[@]}" "$TORCH_PY" "$top/demo/pytorch/train.py" \
		--rank 1 --world-size 2 --master-addr "$SERVER_ADDR" --master-port "$port" \
		--steps "$TRAIN_STEPS" --timeout "$TRAIN_TIMEOUT" >"$dir/rank1.out" 2>"$dir/rank1.err" &
	pid1=$!
	# The imports take a minute or two under TCG: a generous bound on the
	# whole run as well.
	limit=$((SECONDS + 900))
	local snap=0
	while kill -0 "$pid0" 2>/dev/null || kill -0 "$pid1" 2>/dev/null; do
		# The connections and their paths halfway to the failure.
		if [ "$REP" = 1 ] && [ $snap = 0 ] && [ "$(train_steps "$dir/rank0.out")" -ge $((TRAIN_FAIL_STEP / 2)) ]; then
			snap=1
			snapshot "$dir" "$proto"
		fi
		if [ "$t_kill" = 0 ] && [ "$(train_steps "$dir/rank0.out")" -ge "$TRAIN_FAIL_STEP" ]; then
			t_kill=$EPOCHREALTIME
			ip -n "$CLI" link set c1 down || echo "kill_failed=true" >>"$dir/meta.env"
			printf 't_kill=%s\nt_kill_done=%s\n' "$t_kill" "$EPOCHREALTIME" >>"$dir/meta.env"
			deadline=$((SECONDS + TRAIN_WAIT))
		fi
		if { [ "$t_kill" != 0 ] && [ $SECONDS -ge "$deadline" ]; } || [ $SECONDS -ge $limit ]; then
			killed=true
			kill "$pid0" "$pid1" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	wait "$pid0" || rc0=$?
	wait "$pid1" || rc1=$?
	cpu_ticks cpu1
	printf 't0=%s\nt_end=%s\nrank0_rc=%s\nrank1_rc=%s\nkilled=%s\n' "$t0" "$EPOCHREALTIME" \
		"$rc0" "$rc1" "$killed" >>"$dir/meta.env"
	printf 'cpu_ticks_t0=%s\ncpu_ticks_client_exit=%s\nclk_tck=%s\n' "$cpu0" "$cpu1" "$CLK_TCK" >>"$dir/meta.env"
	counters "$dir" "$proto"
}

# setup_transport PROTO TOPO_FUNC: the transport's own configuration in
# the topology just built.
setup_transport() {
	case $1 in
	mptcp)
		if [ "$2" = topo_simult ]; then mptcp_simult; else mptcp_planes; fi
		;;
	mptcp_connect) mptcp_simult ;;
	mrc)
		if [ "$2" = topo_simult ]; then mrc_endpoints_simult; else mrc_endpoints; fi
		mrc_ev_per_plane
		;;
	esac
}

# one_run SCENARIO_DIR PROTO TOPO_FUNC TOPO_ARGS...: fresh topology,
# transport set-up, one transfer, teardown. A failing set-up marks this run
# as failed (DIR/error) without stopping the benchmark.
one_run() {
	local sdir=$1 proto=$2 dir pdir rc
	shift 2
	pdir=$sdir/$proto${RUN_POINT:+/$RUN_POINT}
	dir=$pdir/rep$REP
	mkdir -p "$dir"
	new_namespaces
	topo_info "$@"
	printf 'rep=%s\nstarted=%s\n' "$REP" "$EPOCHREALTIME" >"$dir/meta.env"
	[ -z "$RUN_POINT_ENV" ] || printf '%s\n' "$RUN_POINT_ENV" >>"$dir/meta.env"
	log "$(basename "$sdir") $proto${RUN_POINT:+ $RUN_POINT} rep $REP"
	# Run in the background and waited for, so that errexit applies inside
	# (it does not in a subshell tested by if, && or ||).
	(
		trap - ERR
		set -e
		"$@"
		setup_transport "$proto" "$1"
	) >"$dir/setup.log" 2>&1 &
	rc=0
	wait $! || rc=$?
	if [ $rc != 0 ]; then
		echo "topology or transport set-up failed (exit $rc): $(tail -n 3 "$dir/setup.log" | tr '\n' ' ')" >"$dir/error"
		teardown
		return 0
	fi
	[ -d "$sdir/params" ] || topo_params "$sdir"
	[ "$REP" != 1 ] || proto_params "$pdir" "$proto"
	if [ "$proto" = mptcp_connect ]; then
		run_mptcp_connect "$dir" "$SIMULT_MAX_TIME"
	elif [ "$RUN_KIND" = training ]; then
		run_training "$dir" "$proto"
	else
		run_perf "$dir" "$proto"
	fi
	echo "finished=$EPOCHREALTIME" >>"$dir/meta.env"
	teardown
}

# --- Scenarios -----------------------------------------------------------------------

sdir=
# scenario_begin ID KEY=VALUE...: a new scenario directory; values that are
# JSON stay JSON in results.json.
scenario_begin() {
	local n
	n=$(find "$out/scenarios" -mindepth 1 -maxdepth 1 -type d | wc -l)
	sdir=$out/scenarios/$(printf '%02d' "$((n + 1))")-$1
	echo "$sdir" >"$out/current"
	mkdir -p "$sdir"
	printf 'id=%s\n' "$1" >"$sdir/scenario.env"
	shift
	printf '%s\n' "$@" >>"$sdir/scenario.env"
	log "scenario $(basename "$sdir")"
}

scenario_end() {
	echo "finished=$EPOCHREALTIME" >>"$sdir/scenario.env"
	if [ "$emit" = 1 ]; then
		emit_block scenario "$PY" "$COLLECT" scenario "$sdir"
	fi
}

# emit_block KIND COMMAND...: the command's output (JSON), compressed, on
# stdout between markers.
emit_block() {
	local kind=$1 f
	shift
	f=$(mktemp)
	if "$@" >"$f" 2>"$f.err"; then
		echo "@@mrc-bench begin $kind"
		gzip -c "$f" | base64 -w 76 | sed 's/^/@@mrc-bench /'
		echo "@@mrc-bench end $kind"
	else
		log "collecting $kind failed: $(tail -n 5 "$f.err")"
	fi
	rm -f "$f" "$f.err"
}

# for_reps PROTOS COMMAND...: COMMAND for every transport, repetitions
# interleaved (all transports once, then again) so that slow drifts of the
# VM touch every transport alike.
for_reps() {
	local protos=$1 reps=$2 proto
	shift 2
	local -a list
	IFS=, read -ra list <<<"$protos"
	for ((REP = 1; REP <= reps; REP++)); do
		for proto in "${list[@]}"; do
			"$@" "$proto"
		done
	done
}

throughput_run() { # proto
	RUN_CONNS=1 RUN_INTERVAL=$INTERVAL_MS RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_HARD=$HARD_TIMEOUT
	RUN_ARGS=(--duration "$DURATION" --msg-size "$MSG_SIZE")
	one_run "$sdir" "$1" topo_planes "$SC_LOSS" "$SC_RATES"
}

# sc_planes ID TITLE LOSS RATES [GRO]: GRO=1 for the GRO variant (gro_rx
# on the server's end of every plane).
sc_planes() {
	SC_LOSS=$3 SC_RATES=$4 SC_GRO=${5:-0}
	local gro=()
	[ "$SC_GRO" = 0 ] || gro=(gro_rx=server "base_scenario=${1%-gro}")
	scenario_begin "$1" "title=$2" kind=throughput topology=planes \
		"rates_mbit=$(csv_json "$4")" "delay_ms=$DELAY_MS" "loss_pct=$3" \
		"msg_size=$MSG_SIZE" "duration_s=$DURATION" "reps=$REPS" "${gro[@]}"
	for_reps "$PROTOS" "$REPS" throughput_run
	scenario_end
}

failover_run() { # proto
	RUN_CONNS=1 RUN_INTERVAL=$FAIL_INTERVAL_MS RUN_KILL_AT=$FAIL_AT RUN_KILL_DEV=c1
	RUN_HARD=$HARD_TIMEOUT
	RUN_ARGS=(--duration "$FAIL_DURATION" --msg-size "$MSG_SIZE")
	one_run "$sdir" "$1" topo_planes 0 "$SC_RATES"
}

sc_failover() {
	SC_RATES=$RATE,$RATE,$RATE,$RATE
	scenario_begin failover "title=Failover: plane 1 down mid-transfer" kind=failover \
		topology=planes "rates_mbit=$(csv_json "$SC_RATES")" "delay_ms=$DELAY_MS" loss_pct=0 \
		kill_plane=1 "kill_at_s=$FAIL_AT" "kill_command=ip link set c1 down (client side)" \
		"msg_size=$MSG_SIZE" "duration_s=$FAIL_DURATION" "reps=$REPS" \
		"interval_ms=$FAIL_INTERVAL_MS" "stall_timeout_s=$STALL"
	for_reps "$PROTOS" "$REPS" failover_run
	scenario_end
}

unshaped_run() { # MTU proto
	RUN_CONNS=1 RUN_INTERVAL=$INTERVAL_MS RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_HARD=$HARD_TIMEOUT
	RUN_ARGS=(--duration "$DURATION" --msg-size "$MSG_SIZE")
	one_run "$sdir" "$2" topo_unshaped "$1"
}

# sc_unshaped ID MTU [GRO]: GRO=1 for the GRO variant (gro_rx on the
# server's end, TSO off on the client's).
sc_unshaped() {
	SC_GRO=${3:-0}
	local title="One unshaped veth, MTU $2" gro=()
	if [ "$SC_GRO" = 1 ]; then
		title+=", GRO at the receiver"
		gro=(gro_rx=server tso_client=off "base_scenario=${1%-gro}")
	fi
	scenario_begin "$1" "title=$title" kind=throughput topology=unshaped \
		"mtu=$2" "msg_size=$MSG_SIZE" "duration_s=$DURATION" "reps=$REPS" "${gro[@]}"
	for_reps "$PROTOS" "$REPS" unshaped_run "$2"
	scenario_end
}

latency_run() { # proto
	RUN_CONNS=1 RUN_INTERVAL=$INTERVAL_MS RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_HARD=$HARD_TIMEOUT
	RUN_ARGS=(--duration "$DURATION" --msg-size "$LAT_SIZE" --mode latency)
	one_run "$sdir" "$1" topo_unshaped
}

sc_latency() {
	scenario_begin latency "title=Small-message round trip (one unshaped veth)" kind=latency \
		topology=unshaped "msg_size=$LAT_SIZE" "duration_s=$DURATION" "reps=$REPS"
	for_reps "$PROTOS" "$REPS" latency_run
	scenario_end
}

fairness_run() { # proto
	RUN_CONNS=$FAIR_CONNS RUN_INTERVAL=1000 RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_STALL=$FAIR_STALL RUN_HARD=$((${DURATION%.*} + 3 * FAIR_STALL + 20))
	RUN_ARGS=(--duration "$DURATION" --msg-size "$MSG_SIZE")
	one_run "$sdir" "$1" topo_planes 0 "$SC_RATES"
	RUN_STALL=
}

sc_fairness() {
	SC_RATES=$RATE,$RATE,$RATE,$RATE
	scenario_begin fairness "title=$FAIR_CONNS parallel connections over 4 equal planes" \
		kind=fairness topology=planes "rates_mbit=$(csv_json "$SC_RATES")" \
		"delay_ms=$DELAY_MS" loss_pct=0 "conns=$FAIR_CONNS" "msg_size=$MSG_SIZE" \
		"duration_s=$DURATION" "reps=$REPS"
	for_reps "$PROTOS" "$REPS" fairness_run
	scenario_end
}

simult_run() { # proto
	RUN_CONNS=1 RUN_INTERVAL=$INTERVAL_MS RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_HARD=$((3 * SIMULT_MAX_TIME / 1000 + 20))
	RUN_ARGS=(--bytes "$SIMULT_SIZE" --msg-size "$MSG_SIZE")
	one_run "$sdir" "$1" topo_simult "${SC_SIMULT[@]}"
}

# sc_simult ID TITLE RATE1 RATE2 DELAY1 DELAY2: one test case of
# simult_flows.sh, with its transfer size and time limit.
sc_simult() {
	local id=$1 title=$2
	shift 2
	SC_SIMULT=("$@")
	SIMULT_SIZE=$SIMULT_BYTES
	# simult_flows.sh: transfer time at the summed rate plus 10 % for
	# headers, plus 400 ms for mptcp_connect's join sleeps (-j), plus 50 ms
	# of slack on a non-debug kernel.
	SIMULT_MAX_TIME=$((1000 * SIMULT_SIZE * 8 * 10 / (($1 + $2) * 1000 * 1000 * 9) + 400 + 50))
	local protos=mptcp_connect,mptcp,mrc
	[ -z "${BENCH_SIMULT_PROTOS:-}" ] || protos=$BENCH_SIMULT_PROTOS
	scenario_begin "$id" "title=simult_flows: $title" kind=simult topology=simult_flows \
		"rates_mbit=[$1,$2]" "delays_ms=[$3,$4]" "bytes=$SIMULT_SIZE" \
		"max_time_ms=$SIMULT_MAX_TIME" "join_sleep_ms=400" "msg_size=$MSG_SIZE" \
		"reps=$SIMULT_REPS"
	for_reps "$protos" "$SIMULT_REPS" simult_run
	scenario_end
}

# scaling_run PROTO PATHS: one transfer over the unshaped veth with PATHS
# paths per connection. Without endpoints the veth is the connection's one
# plane, and a connection has the handshake's path plus ev_per_plane paths
# per plane: PATHS - 1 entropy values (at least 1, so the smallest
# connection has 2 paths; the report gives the count mrc-status showed).
scaling_run() {
	local n=$2
	RUN_CONNS=1 RUN_INTERVAL=$INTERVAL_MS RUN_KILL_AT='' RUN_KILL_DEV=''
	RUN_HARD=$HARD_TIMEOUT
	RUN_ARGS=(--duration "$DURATION" --msg-size "$MSG_SIZE")
	RUN_EV=$((n > 1 ? n - 1 : 1))
	RUN_POINT=p$n
	RUN_POINT_ENV=$(printf 'paths_target=%s\nev_per_plane=%s' "$n" "$RUN_EV")
	one_run "$sdir" "$1" topo_unshaped
	RUN_EV='' RUN_POINT='' RUN_POINT_ENV=''
}

# sc_path_scaling: the per-packet cost of MRC with 1 to 256 paths per
# connection (BENCH_SCALE_PATHS), CPU-bound on one unshaped veth. MRC only:
# MPTCP caps a connection at 8 subflows, SCTP sends on one path and TCP has
# one, so no peer has a counterpart of these points. Repetitions are
# interleaved over the points.
sc_path_scaling() {
	local n ok=() bad=()
	local -a pts
	IFS=, read -ra pts <<<"$SCALE_PATHS"
	for n in "${pts[@]}"; do
		if [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 256 ]; then
			ok+=("$n")
		else
			bad+=("$n")
		fi
	done
	scenario_begin path-scaling "title=Per-packet cost against paths per connection (MRC only, one unshaped veth)" \
		kind=scaling topology=unshaped "paths=$(IFS=,; csv_json "${ok[*]}")" 'transports=["mrc"]' \
		"msg_size=$MSG_SIZE" "duration_s=$DURATION" "reps=$REPS" "clk_tck=$CLK_TCK" \
		"cpu=/proc/stat of the whole VM (all CPUs) from the client's launch to its exit" \
		"packets=/proc/net/mrc of both namespaces after the run"
	for n in "${bad[@]}"; do
		echo "BENCH_SCALE_PATHS: '$n' is not a path count from 1 to 256; skipped" >>"$sdir/error"
	done
	if ! has "$PROTOS" mrc; then
		echo "MRC is not in BENCH_PROTOS ($PROTOS): nothing to run" >>"$sdir/error"
		ok=()
	fi
	for ((REP = 1; REP <= REPS; REP++)); do
		for n in "${ok[@]}"; do
			scaling_run mrc "$n"
		done
	done
	scenario_end
}

training_run() { # proto
	RUN_KIND=training
	one_run "$sdir" "$1" topo_planes 0 "$RATE,$RATE"
	RUN_KIND=''
}

# sc_pytorch: DDP training over 2 equal planes, plane 1 (the one of the
# rendezvous address, and so of TCP's connections) taken down mid-training.
sc_pytorch() {
	scenario_begin pytorch "title=PyTorch DDP training, plane 1 down mid-training" kind=training \
		topology=planes "rates_mbit=[$RATE,$RATE]" "delay_ms=$DELAY_MS" loss_pct=0 \
		kill_plane=1 "kill_command=ip link set c1 down (rank 1's side)" \
		"steps=$TRAIN_STEPS" "fail_step=$TRAIN_FAIL_STEP" "wait_s=$TRAIN_WAIT" \
		"torch_timeout_s=$TRAIN_TIMEOUT" "reps=$TRAIN_REPS" \
		"model=demo/pytorch/train.py defaults: MLP 64-256-256-8, batch 64 per rank, 1 thread, Gloo"
	for_reps "$TRAIN_PROTOS" "$TRAIN_REPS" training_run
	scenario_end
}

# run_scenario FUNC ARGS...: one scenario in a subshell, so that an
# unexpected failure of the harness itself ends that scenario only; it is
# recorded in the scenario's "error" file and the scenario is still
# reported.
run_scenario() {
	local rc
	rm -f "$out/current"
	set +e
	(
		set -eE
		trap teardown EXIT
		trap 'echo "harness error at line $LINENO: $BASH_COMMAND (exit $?)" >>"$(cat "$out/current" 2>/dev/null || echo "$out")/error"' ERR
		"$@"
	)
	rc=$?
	set -e
	teardown
	if [ $rc != 0 ] && [ -f "$out/current" ]; then
		sdir=$(cat "$out/current")
		log "scenario $(basename "$sdir") stopped by a harness error (exit $rc)"
		scenario_end
	fi
}

# --- Main -----------------------------------------------------------------------------

rm -rf "$out"
mkdir -p "$out/scenarios"
tmp=$(mktemp -d)
head -c "$SIMULT_BYTES" /dev/zero >"$tmp/large"
head -c $((20 * 4096)) /dev/zero >"$tmp/small"
start=$SECONDS

{
	printf 'started=%s\nkernel=%s\ncpus=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(uname -r)" "$(nproc)"
	printf 'mem_kib=%s\n' "$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)"
	printf 'cmdline=%s\n' "$(cat /proc/cmdline)"
	printf 'quick=%s\nreps=%s\nduration_s=%s\nfail_duration_s=%s\nfail_at_s=%s\n' \
		"$([ "${BENCH_QUICK:-0}" = 1 ] && echo true || echo false)" "$REPS" "$DURATION" "$FAIL_DURATION" "$FAIL_AT"
	printf 'simult_bytes=%s\n' "$SIMULT_BYTES"
	printf 'simult_reps=%s\nplane_rate_mbit=%s\nunequal_rates_mbit=%s\ndelay_ms=%s\nloss_pct=%s\n' \
		"$SIMULT_REPS" "$RATE" "$(csv_json "$UNEQUAL")" "$DELAY_MS" "$LOSS_PCT"
	printf 'tbf_burst=%s\ntbf_latency=%s\nmsg_size=%s\nlat_msg_size=%s\nfair_conns=%s\n' \
		"$TBF_BURST" "$TBF_LATENCY" "$MSG_SIZE" "$LAT_SIZE" "$FAIR_CONNS"
	printf 'hard_timeout_s=%s\n' "$HARD_TIMEOUT"
	printf 'stall_timeout_s=%s\ninterval_ms=%s\nfail_interval_ms=%s\nmptcp_endpoints=%s\nmrc_endpoints=%s\n' \
		"$STALL" "$INTERVAL_MS" "$FAIL_INTERVAL_MS" "$MPTCP_ENDPOINTS" "$MRC_ENDPOINTS"
	printf 'protos=%s\nscenarios=%s\n' "$PROTOS" "$SCENARIOS"
	printf 'scale_paths=%s\nclk_tck=%s\n' "$(csv_json "$SCALE_PATHS")" "$CLK_TCK"
	printf 'train_steps=%s\ntrain_fail_step=%s\ntrain_protos=%s\ntrain_reps=%s\n' \
		"$TRAIN_STEPS" "$TRAIN_FAIL_STEP" "$TRAIN_PROTOS" "$TRAIN_REPS"
	printf 'mrc_perf=%s\nmrc_status=%s\niproute2=%s\n' "$("$PERF" --version 2>&1)" \
		"$("$STATUS" --version 2>&1)" "$(ip -V 2>&1)"
	printf 'mptcp_connect=%s\nko=%s\nmrc_params=%s\nmrc_ns_params=%s\nrps=%s\n' \
		"${mptcp_connect:-none}" "$ko" "$MRC_PARAMS" "$MRC_NS_PARAMS" "$RPS"
} >"$out/meta.env"

# The module under test; a failure to load is recorded and every MRC run
# then fails with the socket error that mrc-perf reports.
if lsmod | grep -q '^mrc '; then
	echo "already loaded" >"$out/module.txt"
elif insmod "$ko" ${MRC_PARAMS//,/ } >"$out/module.txt" 2>&1; then
	echo "insmod $ko ${MRC_PARAMS//,/ }: ok" >>"$out/module.txt"
else
	echo "insmod $ko failed" >>"$out/module.txt"
fi
[ "$emit" = 0 ] || emit_block header "$PY" "$COLLECT" header "$out"

all4=$RATE,$RATE,$RATE,$RATE
if has "$SCENARIOS" planes-equal; then run_scenario sc_planes planes-equal "4 equal planes" 0 "$all4"; fi
if has "$SCENARIOS" planes-equal-gro; then
	run_scenario sc_planes planes-equal-gro "4 equal planes, GRO at the receiver" 0 "$all4" 1
fi
if has "$SCENARIOS" planes-unequal; then run_scenario sc_planes planes-unequal "4 unequal planes" 0 "$UNEQUAL"; fi
if has "$SCENARIOS" planes-unequal-gro; then
	run_scenario sc_planes planes-unequal-gro "4 unequal planes, GRO at the receiver" 0 "$UNEQUAL" 1
fi
if has "$SCENARIOS" planes-loss; then
	run_scenario sc_planes planes-loss "4 equal planes, ${LOSS_PCT}% random loss" "$LOSS_PCT" "$all4"
fi
if has "$SCENARIOS" failover; then run_scenario sc_failover; fi
if has "$SCENARIOS" unshaped; then run_scenario sc_unshaped unshaped 1500; fi
if has "$SCENARIOS" unshaped-gro; then run_scenario sc_unshaped unshaped-gro 1500 1; fi
if has "$SCENARIOS" unshaped-9000; then run_scenario sc_unshaped unshaped-9000 9000; fi
if has "$SCENARIOS" unshaped-9000-gro; then run_scenario sc_unshaped unshaped-9000-gro 9000 1; fi
if has "$SCENARIOS" latency; then run_scenario sc_latency; fi
if has "$SCENARIOS" fairness; then run_scenario sc_fairness; fi
if has "$SCENARIOS" simult; then
	# The five cases of simult_flows.sh: rates (Mbit/s) and delays (ms) of
	# its two links.
	run_scenario sc_simult simult-balanced "balanced bwidth" 10 10 0 0
	run_scenario sc_simult simult-balanced-delay "balanced bwidth with unbalanced delay" 10 10 1 25
	run_scenario sc_simult simult-unbalanced "unbalanced bwidth" 10 3 0 0
	run_scenario sc_simult simult-unbalanced-delay "unbalanced bwidth with unbalanced delay" 10 3 1 25
	run_scenario sc_simult simult-unbalanced-opposed "unbalanced bwidth with opposed, unbalanced delay" 10 3 25 1
fi
if has "$SCENARIOS" path-scaling; then run_scenario sc_path_scaling; fi
if has "$SCENARIOS" pytorch; then run_scenario sc_pytorch; fi
rm -f "$out/current"

{
	if lsmod | grep -q '^mrc '; then
		rmmod mrc 2>&1 && echo "rmmod mrc: ok" || echo "rmmod mrc failed"
	fi
} >>"$out/module.txt"
printf 'finished=%s\nelapsed_s=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - start))" >"$out/footer.env"
dmesg | tail -n 200 >"$out/dmesg.txt" || true
[ "$emit" = 0 ] || emit_block footer "$PY" "$COLLECT" footer "$out"
"$PY" "$COLLECT" results "$out" >"$out/results.json"
rm -rf "$tmp"
log "done in $((SECONDS - start)) s: $out/results.json"
