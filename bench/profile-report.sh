#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The hottest symbols of a `perf record -a -g` file, run in the VM that
# recorded it (the module's symbols are resolved from its /proc/kallsyms):
# self time with callers, self time by object, the module's functions, the
# entry points' inclusive cost per thread and over all threads, and the
# split by thread and CPU.
# Used by bench/profile-guest.sh (`make profile`) and by bench/run-guest.sh
# (`BENCH_PERF=1 make bench`).
#
# Usage: profile-report.sh PERF_DATA
set -euo pipefail
data=$1

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
entries='__sys_sendto|__sys_sendmsg|__sys_recvfrom|__sys_recvmsg|handle_softirqs|net_rx_action|process_backlog|__netif_receive_skb_core|udp_queue_rcv_one_skb|ip_finish_output2|__dev_queue_xmit|veth_xmit|run_timer_softirq|hrtimer_run_softirq|__crc32c_le_base|rep_movs_alternative|skb_segment|__udp_gso_segment|ip_route_output_key_hash|release_sock|lock_sock_nested|entry_SYSCALL_64_after_hwframe'
echo "== inclusive cost of the entry points, per thread (share of all CPU samples)"
# Where each thread's time goes: its system calls, the softirq work that
# interrupted it (receive processing, timers) and the copies.
perf report -i "$data" --children --sort pid,sym --stdio -g none 2>/dev/null |
	grep -E "\] ($entries)\$" |
	head -n 40 || true
echo "== inclusive cost of the entry points, all threads together (share of all CPU samples)"
perf report -i "$data" --children --sort sym --stdio -g none 2>/dev/null |
	grep -E "\] ($entries)\$" | head -n 40 || true
echo "== by thread (softirq work counts for the thread it interrupted)"
perf report -i "$data" --no-children --sort pid,dso --stdio -g none 2>/dev/null | grep "%" | head -n 16 || true
echo "== by CPU"
perf report -i "$data" --no-children --sort cpu --stdio -g none 2>/dev/null | grep "%" | head -n 8 || true
echo "== by CPU and thread"
perf report -i "$data" --no-children --sort cpu,pid --stdio -g none 2>/dev/null | grep "%" | head -n 12 || true
echo "== by object"
perf report -i "$data" --no-children --sort dso --stdio -g none 2>/dev/null | grep "%" | head -n 12 || true
