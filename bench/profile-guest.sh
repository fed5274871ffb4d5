#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run by bench/profile.sh inside the VM: one mrc-perf transfer of 16 KiB
# messages over an unshaped veth between two namespaces (receive packet
# steering over every CPU, as `make bench` sets it), perf sampling every
# CPU for SECONDS of it, then the hottest symbols with their callers.
#
# Usage: profile-guest.sh KO PROTO SECONDS MRC_PERF
# MRC_PARAMS: insmod parameters; MRC_SET: namespace tunables (NAME=VALUE of
# `mrc-status param set`, ','-separated), set in both namespaces. MODE:
# throughput (the default) or latency (64-byte messages, each answered
# before the next).
set -euo pipefail
ko=$1 proto=$2 secs=$3 perf_bin=$4
cli=mrcp-c srv=mrcp-s data=/tmp/mrc-profile.data

# shellcheck disable=SC2086 # parameters are words
[ "$proto" != mrc ] || insmod "$ko" ${MRC_PARAMS:-}
sysctl -qw kernel.kptr_restrict=0 kernel.perf_event_paranoid=-1
for ns in "$cli" "$srv"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
ip link add u0 netns "$cli" type veth peer name u0 netns "$srv"
ip -n "$cli" addr add 10.81.0.1/24 dev u0
ip -n "$srv" addr add 10.81.0.2/24 dev u0
ip -n "$cli" link set u0 up
ip -n "$srv" link set u0 up
mask=$(printf '%x' $(((1 << $(nproc)) - 1)))
for ns in "$cli" "$srv"; do
	# shellcheck disable=SC2016 # expanded by the inner shell
	ip netns exec "$ns" sh -c 'for q in /sys/class/net/u0/queues/rx-*/rps_cpus; do echo "$1" >"$q"; done' sh "$mask"
done
[ "$proto" != mptcp ] || ip netns exec "$srv" sysctl -qw net.mptcp.enabled=1
sets=${MRC_SET:-}
if [ "$proto" = mrc ]; then
	for ns in "$cli" "$srv"; do
		# shellcheck disable=SC2086 # the settings are words
		for setting in ${sets//,/ }; do
			ip netns exec "$ns" "${perf_bin%/*}/mrc-status" param set "${setting%%=*}" "${setting#*=}" >/dev/null
		done
	done
fi

mode_args=(--msg-size 16384)
[ "${MODE:-throughput}" != latency ] || mode_args=(--msg-size 64 --mode latency)
ip netns exec "$srv" "$perf_bin" server --proto "$proto" --port 5001 --json >/tmp/server.json 2>&1 &
sleep 1
ip netns exec "$cli" "$perf_bin" client --proto "$proto" --addr 10.81.0.2 --port 5001 \
	--duration $((secs + 3)) "${mode_args[@]}" --json >/tmp/client.json 2>&1 &
client=$!
sleep 1.5
if [ "$proto" = mrc ]; then
	# The sending connection at the start and at the end of the samples.
	ip netns exec "$cli" "${perf_bin%/*}/mrc-status" show >/tmp/status-0.txt 2>&1 || true
fi
perf record -q -e cpu-clock -F 2000 -a -g -o "$data" -- sleep "$secs" 2>/dev/null
if [ "$proto" = mrc ]; then
	ip netns exec "$cli" "${perf_bin%/*}/mrc-status" show >/tmp/status-1.txt 2>&1 || true
fi
wait "$client" || echo "the client failed: $(tail -n 2 /tmp/client.json)"
echo "goodput of the whole transfer (perf ran for part of it):" \
	"$(grep -o '"goodput_mbps":[0-9.]*' /tmp/client.json | head -n 1 | cut -d: -f2) Mbit/s"
if [ "${MODE:-throughput}" = latency ]; then
	echo "round trips of the whole run (perf ran for part of it):" \
		"$(grep -o '"msgs":[0-9]*' /tmp/client.json | head -n 1 | cut -d: -f2)," \
		"p50 $(grep -o '"p50":[0-9.]*' /tmp/client.json | head -n 1 | cut -d: -f2) us"
fi
if [ "$proto" = mrc ]; then
	echo "== /proc/net/mrc of the receiving namespace, then the sending one"
	ip netns exec "$srv" cat /proc/net/mrc
	ip netns exec "$cli" cat /proc/net/mrc
	echo "== the sending connection (mrc-status show) when sampling began, then when it ended"
	cat /tmp/status-0.txt /tmp/status-1.txt
fi

"$(dirname "$0")/profile-report.sh" "$data"
