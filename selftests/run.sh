#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the selftests on the running kernel and prints TAP. Meant to run as
# root inside the test VM (scripts/vm.sh); after the tests it scans the
# kernel log for splats and kmemleak for leaks, and reports each scan as a
# test of its own. Exits non-zero if anything failed.

cd "$(dirname "$0")" || exit 1
. ./settings
tests=("$@")
[ ${#tests[@]} -gt 0 ] || read -ra tests <<<"$(sed -n 's/^TEST_PROGS := //p' Makefile)"

mount | grep -q ' /sys/kernel/debug ' || mount -t debugfs none /sys/kernel/debug
kmemleak=/sys/kernel/debug/kmemleak
[ -w "$kmemleak" ] && echo clear >"$kmemleak"
dmesg -C

n=0
failed=0
total=$((${#tests[@]} + 2))
echo "TAP version 13"
echo "1..$total"
report() { # report OK NAME [DETAIL]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	elif [ "$1" = 4 ]; then
		echo "ok $n $2 # SKIP ${3:-}"
	else
		echo "not ok $n $2${3:+ # $3}"
		failed=$((failed + 1))
	fi
}

for t in "${tests[@]}"; do
	echo "# running $t"
	start=$SECONDS
	timeout "$timeout" "./$t" 2>&1 | sed 's/^/# /'
	rc=${PIPESTATUS[0]}
	echo "# $t took $((SECONDS - start)) s"
	report "$rc" "$t"
done

lsmod | grep -q '^mrc ' && rmmod mrc

# Objects must be unreferenced for 5 s before kmemleak reports them.
if [ -w "$kmemleak" ]; then
	start=$SECONDS
	sleep 6
	echo scan >"$kmemleak"
	echo scan >"$kmemleak"
	leaks=$(cat "$kmemleak")
	echo "# kmemleak scan took $((SECONDS - start)) s"
	if [ -n "$leaks" ]; then
		echo "$leaks" | head -n 60 | sed 's/^/# /'
		report 1 kmemleak "$(grep -c 'unreferenced object' <<<"$leaks") leaked objects"
	else
		report 0 kmemleak
	fi
else
	report 4 kmemleak "kmemleak not available in this kernel"
fi

splats=$(dmesg | grep -E 'BUG:|WARNING:|KASAN|lockdep|Oops|leak|Call Trace|rcu_sched self-detected')
if [ -n "$splats" ]; then
	dmesg | sed 's/^/# /' | tail -n 80
	report 1 dmesg-clean "$(wc -l <<<"$splats") suspicious kernel log lines"
else
	report 0 dmesg-clean
fi

echo "# VM: $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
