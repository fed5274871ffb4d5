#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Shared helpers of the MRC selftests: kselftest exit codes, result
# printers, namespace helpers and the module under test.

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

MRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MRC_KO=${MRC_KO:-$MRC_DIR/mrc.ko}
# Without site (-S): the tests use the standard library only, and each
# start of Python in the debug VM costs seconds.
MRC_PY=${MRC_PY:-/usr/bin/python3 -S}
# With its site packages, for the kernel tree's ynl client (PyYAML).
MRC_PY_SITE=${MRC_PY_SITE:-/usr/bin/python3}
MRC_UTIL="$MRC_PY $MRC_DIR/selftests/mrc_util.py"
MRC_PORT_DEFAULT=4796
MRC_STATUS=${MRC_STATUS:-$MRC_DIR/tools/target/release/mrc-status}

mrc_ret=$KSFT_PASS
mrc_nr_ok=0
mrc_nr_fail=0
mrc_namespaces=()
# A process that stays in each namespace (mrc_netns_add), by name: counters
# are read through its /proc/PID/net with shell builtins. On the debug
# kernel under TCG every process started costs seconds while a transfer
# keeps the CPUs busy, so a poll through ip netns exec lags by that much.
declare -A mrc_ns_pid

mrc_ok()   { printf '[ OK ] %s\n' "$*"; mrc_nr_ok=$((mrc_nr_ok + 1)); }
mrc_fail() { printf '[FAIL] %s\n' "$*"; mrc_nr_fail=$((mrc_nr_fail + 1)); mrc_ret=$KSFT_FAIL; }
mrc_skip() { printf '[SKIP] %s\n' "$*"; [ "$mrc_ret" = "$KSFT_PASS" ] && mrc_ret=$KSFT_SKIP; }

# mrc_check DESCRIPTION EXPECTED ACTUAL
mrc_check() {
	if [ "$2" = "$3" ]; then mrc_ok "$1"; else mrc_fail "$1: expected '$2', got '$3'"; fi
}

# mrc_run DESCRIPTION COMMAND...: passes when the command exits 0.
mrc_run() {
	local d=$1 out
	shift
	if out=$("$@" 2>&1); then mrc_ok "$d"; else mrc_fail "$d: $out"; fi
}

mrc_require_root() {
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit $KSFT_SKIP; }
}

mrc_load() {
	lsmod | grep -q '^mrc ' || insmod "$MRC_KO" "$@"
}

mrc_unload() {
	lsmod | grep -q '^mrc ' && rmmod mrc
	return 0
}

mrc_refcnt() { cat /sys/module/mrc/refcnt; }

# mrc_netns_add VAR: creates a namespace with a random name, brings lo up,
# starts a process that stays in it and stores the name in VAR;
# mrc_cleanup deletes it.
mrc_netns_add() {
	local name
	name="mrc-$(mktemp -u XXXXXX)"
	ip netns add "$name" || return 1
	ip -n "$name" link set lo up
	mrc_namespaces+=("$name")
	# Not on the test's output: a process left behind by a test killed on
	# timeout would hold the pipe to run.sh open.
	ip netns exec "$name" sleep 1000000 </dev/null >/dev/null 2>&1 &
	mrc_ns_pid[$name]=$!
	printf -v "$1" '%s' "$name"
}

# mrc_ns_proc NS: true once NS's resident process is in NS (it enters it
# shortly after mrc_netns_add); sets mrc_proc to its /proc/PID.
mrc_ns_proc() {
	mrc_proc=/proc/${mrc_ns_pid[$1]:-none}
	[ "$mrc_proc/ns/net" -ef "/run/netns/$1" ]
}

mrc_cleanup() {
	local ns pids=()
	for ns in "${mrc_namespaces[@]}"; do
		[ -n "${mrc_ns_pid[$ns]:-}" ] && pids+=("${mrc_ns_pid[$ns]}")
	done
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null
		wait "${pids[@]}" 2>/dev/null
	fi
	for ns in "${mrc_namespaces[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	mrc_namespaces=()
	mrc_ns_pid=()
}

# mrc_veth_pair NS_A NS_B [MTU]: joins two namespaces with a veth pair,
# veth-a 10.77.0.1/24 fd77::1/64 in NS_A and veth-b 10.77.0.2/24 fd77::2/64
# in NS_B.
mrc_veth_pair() {
	ip link add veth-a netns "$1" mtu "${3:-1500}" type veth peer name veth-b \
		netns "$2" mtu "${3:-1500}" || return 1
	ip -n "$1" addr add 10.77.0.1/24 dev veth-a
	ip -n "$2" addr add 10.77.0.2/24 dev veth-b
	ip -n "$1" addr add fd77::1/64 dev veth-a nodad
	ip -n "$2" addr add fd77::2/64 dev veth-b nodad
	ip -n "$1" link set veth-a up
	ip -n "$2" link set veth-b up
}

# mrc_planes N NET [v6]: joins namespaces A and B with N veth planes, vaP
# 10.NET.P.1/24 in A and vbP 10.NET.P.2/24 in B (with "v6" also fdNET:P::1
# and ::2/64), each address an MRC endpoint on its side.
mrc_planes() {
	local p
	for p in $(seq "$1"); do
		ip link add "va$p" netns "$A" type veth peer name "vb$p" netns "$B" || return 1
		ip -n "$A" addr add "10.$2.$p.1/24" dev "va$p"
		ip -n "$B" addr add "10.$2.$p.2/24" dev "vb$p"
		ip -n "$A" link set "va$p" up
		ip -n "$B" link set "vb$p" up
		if [ "${3:-}" = v6 ]; then
			ip -n "$A" addr add "fd$2:$p::1/64" dev "va$p" nodad
			ip -n "$B" addr add "fd$2:$p::2/64" dev "vb$p" nodad
		fi
		ip netns exec "$A" "$MRC_STATUS" endpoint add "10.$2.$p.1"
		ip netns exec "$B" "$MRC_STATUS" endpoint add "10.$2.$p.2"
	done
}

# mrc_tcp_opens NS: TCP connections opened in NS so far (active + passive).
mrc_tcp_opens() {
	ip netns exec "$1" awk '/^Tcp: [0-9]/ { print $6 + $7 }' /proc/net/snmp
}

# mrc_require_perf: sets PERF to the mrc-perf binary, or fails the test.
mrc_require_perf() {
	PERF=${MRC_PERF:-$MRC_DIR/tools/target/release/mrc-perf}
	[ -x "$PERF" ] || { mrc_fail "mrc-perf not built (make tools)"; mrc_exit; }
}

# mrc_perf_setup: the start of a transfer test: root, the module, mrc-perf,
# a scratch directory in tmp, and two empty namespaces named by A and B.
mrc_perf_setup() {
	mrc_require_root
	mrc_load || exit $KSFT_FAIL
	mrc_require_perf
	tmp=$(mktemp -d)
	mrc_netns_add A
	mrc_netns_add B
}

# mrc_json_field FILE EXPR: evaluates a Python expression over the JSON
# document in FILE (bound to d); prints the result or "none".
mrc_json_field() {
	$MRC_PY - "$1" "$2" <<'PY'
import json, sys
try:
    d = json.loads(open(sys.argv[1]).readline())
    print(eval(sys.argv[2], {"d": d}))
except Exception as e:
    print("none")
PY
}

# mrc_stat NS NAME: one counter of /proc/net/mrc in namespace NS, read
# with builtins through the namespace's resident process.
mrc_stat() {
	local k v
	mrc_wait_for 30 mrc_ns_proc "$1" || return 1
	while read -r k v; do
		[ "$k" = "$2" ] && { echo "$v"; return 0; }
	done <"$mrc_proc/net/mrc"
}

# mrc_dev_bytes NS COLUMN DEV...: one counter of /proc/net/dev in namespace
# NS for each DEV, on one line (column 2: bytes received, 10: bytes sent).
mrc_dev_bytes() {
	local ns=$1 col=$2 line d out=""
	shift 2
	local -A v
	mrc_wait_for 30 mrc_ns_proc "$ns" || return 1
	while read -r line; do
		line=(${line/:/ })
		v[${line[0]}]=${line[$((col - 1))]}
	done <"$mrc_proc/net/dev"
	for d in "$@"; do
		out+="${v[$d]:-0} "
	done
	echo "$out"
}

# mrc_stat_cmp NS NAME OP VALUE: compares a counter with test(1)'s OP
# (-eq, -ge, ...); read afresh on every call, so it can be polled with
# mrc_wait_for (whose arguments the shell expands only once).
mrc_stat_cmp() {
	[ "$(mrc_stat "$1" "$2")" "$3" "$4" ]
}

# mrc_wait_for TIMEOUT_S COMMAND...: polls until the command succeeds. The
# command's arguments are expanded once, before the first try: poll a
# function that reads the state (such as mrc_stat_cmp), not "$(...)".
mrc_wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $deadline ] && return 1
		mrc_sleep 0.1
	done
}

# mrc_ms_since T0: milliseconds since T0, a value of $EPOCHREALTIME.
mrc_ms_since() {
	local t1=$EPOCHREALTIME
	echo $(( (${t1/./} - ${1/./}) / 1000 ))
}

# mrc_sleep SECONDS: sleep(1) without starting a process: a read that times
# out on a pipe that nobody writes to.
exec {mrc_sleep_fd}<> <(:)
mrc_sleep() {
	read -rt "$1" -u "$mrc_sleep_fd"
	return 0
}

mrc_exit() {
	mrc_cleanup
	printf '# %s: %d ok, %d failed\n' "$(basename "$0")" "$mrc_nr_ok" "$mrc_nr_fail"
	exit "$mrc_ret"
}

trap mrc_cleanup EXIT
