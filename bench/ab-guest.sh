#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run by bench/ab.sh inside the VM: rounds of one transfer each with module
# A, module B and TCP over an unshaped veth (receive packet steering over
# every CPU, as `make bench` sets it), then the medians.
#
# Usage: ab-guest.sh KO_A KO_B MRC_PERF   (settings from bench/ab.sh)
set -euo pipefail
ko_a=$1 ko_b=$2 perf_bin=$3
cli=mrcab-c srv=mrcab-s
mtu=${AB_MTU:-1500} rounds=${AB_ROUNDS:-3} secs=${AB_SECS:-5}
hz=$(getconf CLK_TCK)

for ns in "$cli" "$srv"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
ip link add u0 netns "$cli" mtu "$mtu" type veth peer name u0 netns "$srv" mtu "$mtu"
ip -n "$cli" addr add 10.81.0.1/24 dev u0
ip -n "$srv" addr add 10.81.0.2/24 dev u0
ip -n "$cli" link set u0 up
ip -n "$srv" link set u0 up
[ "${AB_GRO:-0}" = 0 ] || ip netns exec "$srv" ethtool -K u0 gro on >/dev/null
mask=$(printf '%x' $(((1 << $(nproc)) - 1)))
flows=0
if [ "${AB_RFS:-0}" != 0 ]; then
	# Receive flow steering: a flow's packets go to the CPU where the task
	# that reads or writes its socket last ran.
	flows=32768
	sysctl -qw net.core.rps_sock_flow_entries=$flows
fi
for ns in "$cli" "$srv"; do
	# shellcheck disable=SC2016 # expanded by the inner shell
	ip netns exec "$ns" sh -c 'for q in /sys/class/net/u0/queues/rx-*; do echo "$1" >"$q/rps_cpus"; echo "$2" >"$q/rps_flow_cnt"; done' sh "$mask" "$flows"
done

# busy_ticks: user+nice+system+irq+softirq+steal of all CPUs, /proc/stat.
busy_ticks() {
	local _cpu u n s _idle _iow irq sirq st _rest
	read -r _cpu u n s _idle _iow irq sirq st _rest </proc/stat
	echo $((u + n + s + irq + sirq + st))
}

# What one transfer sends, and the two figures reported of it.
mode_args=(--msg-size 16384) cols="goodput_mbps cpu_ms_per_mb"
if [ "${AB_MODE:-throughput}" = latency ]; then
	mode_args=(--msg-size 64 --mode latency) cols="p50_us p99_us"
fi

# one NAME PROTO: one transfer; prints NAME and the two figures of $cols.
one() {
	local name=$1 proto=$2 t0 t1 bytes mbps
	ip netns exec "$srv" "$perf_bin" server --proto "$proto" --port 5001 --json \
		>/tmp/ab-server.json 2>&1 &
	local spid=$!
	sleep 1
	t0=$(busy_ticks)
	ip netns exec "$cli" "$perf_bin" client --proto "$proto" --addr 10.81.0.2 --port 5001 \
		--duration "$secs" "${mode_args[@]}" --json >/tmp/ab-client.json 2>/tmp/ab-client.err ||
		echo "# $name: client failed: $(tail -n 2 /tmp/ab-client.err)"
	t1=$(busy_ticks)
	wait "$spid" || echo "# $name: server failed: $(tail -n 2 /tmp/ab-server.json)"
	if [ "${AB_MODE:-throughput}" = latency ]; then
		awk -v n="$name" \
			-v p50="$(grep -o '"p50":[0-9.]*' /tmp/ab-client.json | head -n 1 | cut -d: -f2)" \
			-v p99="$(grep -o '"p99":[0-9.]*' /tmp/ab-client.json | head -n 1 | cut -d: -f2)" \
			'BEGIN { printf "%s %.1f %.1f\n", n, p50, p99 }'
		return
	fi
	bytes=$(grep -o '"bytes":[0-9]*' /tmp/ab-client.json | head -n 1 | cut -d: -f2)
	mbps=$(grep -o '"goodput_mbps":[0-9.]*' /tmp/ab-client.json | head -n 1 | cut -d: -f2)
	awk -v n="$name" -v b="${bytes:-0}" -v m="${mbps:-0}" -v t=$((t1 - t0)) -v hz="$hz" \
		'BEGIN { printf "%s %.1f %.2f\n", n, m, (b > 0 ? 1000 * t / hz / (b / 1e6) : 0) }'
}

# with KO PARAMS NAME SETTINGS: one transfer over MRC with that module
# loaded and SETTINGS (NAME=VALUE of `mrc-status param set`, ','-separated)
# set in both namespaces.
with() {
	# shellcheck disable=SC2086 # parameters are words
	insmod "$1" $2
	local ns setting
	for ns in "$cli" "$srv"; do
		# shellcheck disable=SC2086 # the settings are words
		for setting in ${4//,/ }; do
			ip netns exec "$ns" "${perf_bin%/*}/mrc-status" param set "${setting%%=*}" "${setting#*=}" >/dev/null
		done
	done
	one "$3" mrc
	# Connections linger a moment after the transfer.
	for _ in $(seq 50); do rmmod mrc 2>/dev/null && return; sleep 0.2; done
	echo "# could not unload $1" >&2
	exit 1
}

echo "# unshaped veth, MTU $mtu, GRO ${AB_GRO:-0}, RFS ${AB_RFS:-0}, ${AB_MODE:-throughput}," \
	"$rounds rounds of $secs s; A: ${AB_PARAMS_A:-} ${AB_SET_A:-} B: ${AB_PARAMS_B:-} ${AB_SET_B:-}"
echo "# variant $cols"
for ((r = 1; r <= rounds; r++)); do
	with "$ko_a" "${AB_PARAMS_A:-}" A "${AB_SET_A:-}"
	with "$ko_b" "${AB_PARAMS_B:-}" B "${AB_SET_B:-}"
	one TCP tcp
done | tee /tmp/ab.txt
echo "# medians: variant $cols"
for v in A B TCP; do
	awk -v v="$v" '$1 == v { g[++n] = $2; c[n] = $3 }
	function med(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END { if (n) printf "%s %.1f %.2f\n", v, med(g, n), med(c, n) }' /tmp/ab.txt
done
