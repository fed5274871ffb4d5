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

# perf resolves the kernel's symbols but not the module's: those are
# replaced by the nearest [mrc] symbol of /proc/kallsyms at or below them.
grep '\[mrc\]' /proc/kallsyms | sort >/tmp/mrc.syms || true
resolve() {
	# Nothing to resolve without the module (and awk's two-file idiom
	# needs a non-empty first file).
	if [ ! -s /tmp/mrc.syms ]; then
		cat
		return
	fi
	awk 'NR == FNR { a[NR] = $1; s[NR] = $3; n = NR; next }
	{
		line = $0
		while (match(line, /0xffffffff[0-9a-f]+/)) {
			addr = substr(line, RSTART + 2, RLENGTH - 2)
			best = ""
			for (i = 1; i <= n; i++) {
				# Within 1 MiB below: in the module text, not past its end.
				if (length(a[i]) == length(addr) && a[i] <= addr &&
				    substr(a[i], 1, 11) == substr(addr, 1, 11)) best = s[i]
			}
			repl = best == "" ? substr(line, RSTART, RLENGTH) : "[mrc] " best
			line = substr(line, 1, RSTART - 1) repl substr(line, RSTART + RLENGTH)
			if (best == "") break
		}
		print line
	}' /tmp/mrc.syms -
}
echo "== hottest symbols (self time, share of all CPU samples), with callers"
perf report -i "$data" --no-children --sort sym --stdio -g caller,0.5,callee --percent-limit 0.5 2>/dev/null |
	grep -v '^#' | grep -v '^$' | resolve | head -n 150 || true
echo "== kernel and user symbols (self time, share of all CPU samples, no callers)"
perf report -i "$data" --no-children --sort dso,sym --stdio -g none --percent-limit 0.1 2>/dev/null |
	grep "%" | resolve | head -n 80 || true
echo "== module functions (self time, share of the busy CPU samples: all but the idle loop)"
# Each sample's own address, matched to the [mrc] symbol at or below it.
perf script -i "$data" -F ip,sym -G 2>/dev/null | awk '
	NR == FNR { a[NR] = $1; s[NR] = $3; n = NR; next }
	{
		if ($2 ~ /^(default_idle|poll_idle|cpu_idle_poll)/) next
		total++
		addr = $1
		while (length(addr) < 16) addr = "0" addr
		best = ""
		for (i = 1; i <= n; i++)
			if (a[i] <= addr && substr(a[i], 1, 11) == substr(addr, 1, 11)) best = s[i]
		if (best != "") c[best]++
	}
	END { for (f in c) printf "%7.2f%%  %s\n", 100 * c[f] / total, f }' /tmp/mrc.syms - |
	sort -rn | head -n 30 || true
echo "== inclusive cost of the entry points, per thread (share of all CPU samples)"
# Where each thread's time goes: its system calls, the softirq work that
# interrupted it (receive processing, timers) and the copies.
perf report -i "$data" --children --sort pid,sym --stdio -g none 2>/dev/null |
	grep -E '\] (__sys_sendto|__sys_sendmsg|__sys_recvfrom|__sys_recvmsg|handle_softirqs|net_rx_action|process_backlog|__netif_receive_skb_core|udp_queue_rcv_one_skb|ip_finish_output2|__dev_queue_xmit|veth_xmit|run_timer_softirq|__crc32c_le_base|rep_movs_alternative|skb_segment|__udp_gso_segment|ip_route_output_key_hash|release_sock|lock_sock_nested|entry_SYSCALL_64_after_hwframe)$' |
	head -n 40 || true
echo "== by thread (softirq work counts for the thread it interrupted)"
perf report -i "$data" --no-children --sort pid,dso --stdio -g none 2>/dev/null | grep "%" | head -n 16 || true
echo "== by CPU"
perf report -i "$data" --no-children --sort cpu --stdio -g none 2>/dev/null | grep "%" | head -n 8 || true
echo "== by CPU and thread"
perf report -i "$data" --no-children --sort cpu,pid --stdio -g none 2>/dev/null | grep "%" | head -n 12 || true
echo "== by object"
perf report -i "$data" --no-children --sort dso --stdio -g none 2>/dev/null | grep "%" | head -n 12 || true
