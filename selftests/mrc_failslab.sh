#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Allocation failures (failslab and fail_page_alloc) injected into MRC
# during transfers, connects and netlink dumps. The stack trace filter of
# the fault injection limits them to allocations whose call chain passes
# through the module's code, in process context and in softirq alike, so
# that only allocations made on MRC's behalf fail. Every failure must be an
# error returned to the caller or a drop that a counter shows; nothing
# crashes, warns, hangs or leaks:
# - transfers both ways at once complete with every byte verified while
#   packets and acknowledgements cannot be allocated (all but the copy of
#   sent messages, whose failure is an error of send), and the losses show
#   in tx_errors and drop_no_memory;
# - each allocation that socket(), connect(), send() and close() make in
#   the calling task fails in turn (fail-nth): each time a call fails with
#   ENOMEM, or the message arrives intact;
# - a listener that cannot allocate a connection for a SYN counts it in
#   drop_no_memory, and the client's next SYN connects;
# - an event that cannot be allocated is reported to `mrc-status monitor`
#   as lost (ENOBUFS), and later events still arrive;
# - connections opened while allocations fail at random on both ends carry
#   their message intact or fail with ENOMEM;
# - dumps of connections and paths and the counters, while 40 connections
#   exist, are whole or fail with ENOMEM;
# - once injection stops, a transfer works, every connection ends and the
#   module unloads (no socket or connection left referenced); run.sh's
#   kmemleak and kernel log scans (panic_on_warn is set) then run.
#
#   ns A                          ns B
#   veth-a 10.77.0.1/24  <--->    veth-b 10.77.0.2/24

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
mrc_veth_pair "$A" "$B"

dbg=/sys/kernel/debug
mountpoint -q $dbg || mount -t debugfs none $dbg
for f in failslab fail_page_alloc; do
	if [ ! -e "$dbg/$f/require-start" ]; then
		mrc_skip "no $f with a stack trace filter (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC, CONFIG_FAULT_INJECTION_STACKTRACE_FILTER)"
		mrc_exit
	fi
done

# Start and end of the code of the module: its .text section, where the
# loader put it, and its size in the object file. (Only .init.text and
# .exit.text hold code besides.)
text=$(cat /sys/module/mrc/sections/.text)
size=$(readelf -SW "$MRC_KO" |
	sed -n 's/^ *\[ *[0-9]*\] \.text  *[A-Z]*  *[0-9a-f]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p')
if [ -z "$text" ] || [ -z "$size" ]; then
	mrc_fail "no address or size of mrc's .text (readelf: $size)"
	mrc_exit
fi
text_end=$(printf '0x%x' $((text + 0x$size)))
echo "# mrc code: $text to $text_end"

# The module's symbols and kmemleak's, by address. Reading /proc/kallsyms
# takes long in the VM: once.
awk '$4 == "[mrc]" || $3 ~ /^kmemleak_/' /proc/kallsyms | sort >"$tmp/syms"

# sym_range REGEX: the start and end (the next symbol) of the module's
# function whose name matches REGEX, as "START END"; nothing if none does.
sym_range() {
	awk -v re="$1" '$4 != "[mrc]" { next }
		f { print "0x" $1; exit }
		($2 == "t" || $2 == "T") && $3 ~ re { printf "0x%s ", $1; f = 1 }' "$tmp/syms"
}

# kmemleak's bookkeeping of each allocation, and of the scan areas of
# vmalloc's, allocates too: it copes with a failure (it falls back to its
# emergency pool, or scans a whole object and says so in the kernel log),
# but that is no failure of MRC's. Its entry points (kmemleak_alloc,
# _percpu, _vmalloc, ... kmemleak_scan_area) lie together in .ref.text:
# allocations under them are left alone, unless a test asks otherwise.
kml=""
if grep -q ' kmemleak_scan_area$' "$tmp/syms"; then
	kml=$(awk '
		$3 == "kmemleak_alloc" { s = $1 }
		f && $3 ~ /^kmemleak_/ { print "0x" s, "0x" $1; exit }
		$3 == "kmemleak_scan_area" { f = 1 }' "$tmp/syms")
	read -r kml_start kml_end <<<"$kml"
	if [ -z "$kml_start" ] || [ $((kml_end - kml_start)) -le 0 ] || [ $((kml_end - kml_start)) -gt 16384 ]; then
		mrc_fail "kmemleak's entry points are not together: $kml"
		mrc_exit
	fi
fi

# fi_set ATTR FILE VALUE
fi_set() {
	echo "$3" >"$dbg/$1/$2" || mrc_fail "cannot write $3 to $dbg/$1/$2"
}
fi_times=1000000
for f in failslab fail_page_alloc; do
	fi_set $f probability 0
	fi_set $f interval 1
	fi_set $f times $fi_times
	fi_set $f space 0
	fi_set $f verbose 0
	fi_set $f task-filter N
	fi_set $f ignore-gfp-wait N
	fi_set $f stacktrace-depth 32
done
fi_set failslab cache-filter N
# Nothing fails once the test ends, however it ends.
trap 'echo 0 >$dbg/failslab/probability; echo 0 >$dbg/fail_page_alloc/probability; mrc_cleanup' EXIT
fi_set fail_page_alloc ignore-gfp-highmem N
fi_set fail_page_alloc min-order 0

# inject PCT_SLAB PCT_PAGE [TIMES [REQUIRE_START REQUIRE_END [REJECT_START REJECT_END]]]:
# fails that percentage of the allocations from slabs and of pages whose
# call chain passes through the required range (by default the module's
# code) and not through the rejected one (by default kmemleak's), at most
# TIMES of each (default: no limit to speak of).
inject() {
	local f
	for f in failslab fail_page_alloc; do
		fi_set $f require-start "${4:-$text}"
		fi_set $f require-end "${5:-$text_end}"
		fi_set $f reject-start "${6:-${kml_start:-0}}"
		fi_set $f reject-end "${7:-${kml_end:-0}}"
		fi_set $f times "${3:-$fi_times}"
	done
	fi_set failslab probability "$1"
	fi_set fail_page_alloc probability "$2"
	fi_limit=${3:-$fi_times}
}

# stop_injecting VAR: stops failing allocations and sets VAR to how many
# failed since inject, from slabs and of pages: "SLAB PAGE".
stop_injecting() {
	fi_set failslab probability 0
	fi_set fail_page_alloc probability 0
	printf -v "$1" '%d %d' $((fi_limit - $(cat $dbg/failslab/times))) \
		$((fi_limit - $(cat $dbg/fail_page_alloc/times)))
}

# stats NS NAME...: the sum of these counters of /proc/net/mrc in NS.
stats() {
	local ns=$1 n sum=0 v
	shift
	for n in "$@"; do
		v=$(mrc_stat "$ns" "$n")
		sum=$((sum + ${v:-0}))
	done
	echo $sum
}

# ---------------------------------------------------------------------------
# (a) Transfers both ways at once, with packets and acknowledgements failing
# to be allocated on both ends. The copy of a sent message is left alone
# (its failure is an error of send(), tested below), so every transfer must
# complete intact. Pages with __GFP_HIGHMEM are left alone too: those are
# the reader's own pages, faulted in as recv() copies a message to them
# (GFP_HIGHUSER); their failure is the reader's EFAULT, not MRC's loss.
# (MRC allocates no such page while it moves packets; vmalloc's do, and
# the later phases fail them.)
copy=$(sym_range 'Msg7copy_in$')
[ -n "$copy" ] || copy=$(sym_range 'mrc_sys10op_sendmsg$')
if [ -z "$copy" ]; then
	mrc_fail "no Msg::copy_in nor op_sendmsg in /proc/kallsyms"
	mrc_exit
fi
read -r copy_start copy_end <<<"$copy"
lost0=$(($(stats "$A" tx_errors drop_no_memory) + $(stats "$B" tx_errors drop_no_memory)))
csum0=$(($(stats "$A" drop_udp_checksum) + $(stats "$B" drop_udp_checksum)))
ip netns exec "$A" "$PERF" server --addr 10.77.0.1 --port 9000 --timeout 120 --json \
	>"$tmp/srv_a.json" 2>"$tmp/srv_a.err" &
spid_a=$!
ip netns exec "$B" "$PERF" server --addr 10.77.0.2 --port 9001 --timeout 120 --json \
	>"$tmp/srv_b.json" 2>"$tmp/srv_b.err" &
spid_b=$!
ip netns exec "$B" "$PERF" client --addr 10.77.0.1 --port 9000 --bytes $((4 << 20)) \
	--retry-ms 30000 --timeout 120 --json >"$tmp/cli_b.json" 2>"$tmp/cli_b.err" &
cpid_b=$!
ip netns exec "$A" "$PERF" client --addr 10.77.0.2 --port 9001 --bytes $((4 << 20)) \
	--retry-ms 30000 --timeout 120 --json >"$tmp/cli_a.json" 2>"$tmp/cli_a.err" &
cpid_a=$!
# Both connections up (each namespace has a client and a server end).
mrc_wait_for 60 mrc_stat_cmp "$A" conns -ge 2 && mrc_wait_for 60 mrc_stat_cmp "$B" conns -ge 2 ||
	mrc_fail "transfers: connections not up within 60 s"
t0=$SECONDS
fi_set fail_page_alloc ignore-gfp-highmem Y
inject 1 5 "" "" "" "$copy_start" "$copy_end"
rcs=""
for p in $cpid_a $cpid_b $spid_a $spid_b; do
	wait $p
	rcs+="$? "
done
stop_injecting n_a
fi_set fail_page_alloc ignore-gfp-highmem N
lost=$(($(stats "$A" tx_errors drop_no_memory) + $(stats "$B" tx_errors drop_no_memory) - lost0))
csum=$(($(stats "$A" drop_udp_checksum) + $(stats "$B" drop_udp_checksum) - csum0))
echo "# transfers: $((SECONDS - t0)) s, failed allocations (slab, page): $n_a," \
	"tx_errors + drop_no_memory: $lost, retransmissions: $(stats "$A" tx_retransmits) $(stats "$B" tx_retransmits)"
cat "$tmp"/*.err | grep -v listening | sed 's/^/# /'
# digests FILE...: the digest of each mrc-perf JSON output, on one line
# (one start of Python, which takes seconds in the VM).
digests() {
	$MRC_PY - "$@" <<'PY'
import json, sys
out = []
for f in sys.argv[1:]:
    try:
        out.append(json.loads(open(f).readline())["digest"] or "none")
    except Exception:
        out.append("none")
print(" ".join(out))
PY
}
same() { [ "$1" = "$2" ] && [ "$1" != none ] && echo ok || echo "$1!=$2"; }
read -r dsa dcb dsb dca <<<"$(digests "$tmp/srv_a.json" "$tmp/cli_b.json" "$tmp/srv_b.json" "$tmp/cli_a.json")"
mrc_check "transfers both ways complete intact" "0 0 0 0 ok ok" "$rcs$(same "$dsa" "$dcb") $(same "$dsb" "$dca")"
read -r slab page <<<"$n_a"
mrc_check "transfers: allocations failed" ok "$([ $((slab + page)) -gt 0 ] && echo ok || echo none)"
mrc_check "transfers: losses counted in tx_errors and drop_no_memory" ok \
	"$([ "$lost" -gt 0 ] && echo ok || echo "none counted")"
# A veth corrupts nothing: a datagram of a GSO packet or GRO train that
# could not be split for want of memory is no checksum error.
mrc_check "transfers: no drop counted as a bad UDP checksum" 0 "$csum"

# ---------------------------------------------------------------------------
# (b) Connections. A server in A reads each connection's message, checks
# it, and closes the connection at its end.
ip netns exec "$A" $MRC_UTIL check-server 10.77.0.1 9100 >"$tmp/chk" 2>&1 &
chk=$!
listening() { grep -q '^listening' "$tmp/chk"; }
mrc_wait_for 60 listening || mrc_fail "check-server did not listen within 60 s"
sent=0
# sent_add FILE: adds the "sent N" of a client's output to sent.
sent_add() {
	local n
	n=$(sed -n 's/^sent //p' "$1")
	sent=$((sent + ${n:-0}))
}

# Every allocation of the client's own calls fails in turn.
t0=$SECONDS
inject 0 0
ip netns exec "$B" $MRC_UTIL fail-sweep 10.77.0.1 9100 --allow ENOMEM >"$tmp/sweep" 2>&1
rc=$?
stop_injecting n_sweep
sed 's/^/# /' "$tmp/sweep"
echo "# sweep: $((SECONDS - t0)) s, failed allocations (slab, page): $n_sweep"
mrc_check "each allocation of socket/connect/send/close failed in turn: ENOMEM or intact" 0 $rc
read -r slab page <<<"$n_sweep"
enomem=$(sed -n 's/^allocations failed.*ENOMEM \([0-9]*\).*/\1/p' "$tmp/sweep")
mrc_check "some of them failed a call with ENOMEM" ok "$([ "${enomem:-0}" -gt 0 ] && echo ok || echo none)"
sent_add "$tmp/sweep"

# A listener that cannot create a connection: the first allocation of the
# socket's work item, where the listener creates connections for SYNs,
# fails three times.
work=$(sym_range 'mrc_sys8work_run$')
if [ -n "$work" ]; then
	read -r work_start work_end <<<"$work"
	nomem0=$(mrc_stat "$A" drop_no_memory)
	inject 100 0 3 "$work_start" "$work_end"
	ip netns exec "$B" $MRC_UTIL connect-loop 10.77.0.1 9100 1 --first 5000 >"$tmp/lst" 2>&1
	rc=$?
	stop_injecting n_lst
	sed 's/^/# /' "$tmp/lst"
	mrc_check "listener short of memory: the client connects once it can" 0 $rc
	mrc_check "listener short of memory: each SYN dropped is counted in drop_no_memory" \
		"3 0 3" "$n_lst $(($(mrc_stat "$A" drop_no_memory) - nomem0))"
	sent_add "$tmp/lst"
else
	mrc_fail "no work_run of mrc in /proc/kallsyms"
fi

# An event that cannot be allocated: the monitor is told events were lost.
# The event of an endpoint added is sent by the task that adds it, whose
# first allocation in MRC is that event's (fail-nth survives exec).
ip netns exec "$B" "$MRC_STATUS" monitor >"$tmp/mon" 2>"$tmp/mon.err" &
mon=$!
# Subscribed once an event shows.
subscribed() { grep -q . "$tmp/mon"; }
for i in 1 2 3; do
	ip netns exec "$B" "$MRC_STATUS" endpoint add 10.77.0.2 >/dev/null
	ip netns exec "$B" "$MRC_STATUS" endpoint del 10.77.0.2 >/dev/null
	mrc_wait_for 5 subscribed && break
done
subscribed || mrc_fail "monitor: no events"
lines=$(wc -l <"$tmp/mon")
inject 0 0
ip netns exec "$B" sh -c 'echo 1 >/proc/self/fail-nth && exec "$0" endpoint add 10.77.0.2' \
	"$MRC_STATUS" >"$tmp/ep" 2>&1
rc=$?
stop_injecting n_ev
ip netns exec "$B" "$MRC_STATUS" endpoint del 10.77.0.2 >>"$tmp/ep" 2>&1
sed 's/^/# /' "$tmp/ep"
more() { [ "$(wc -l <"$tmp/mon")" -gt "$lines" ]; }
lost_ev() { grep -q 'events were lost' "$tmp/mon.err"; }
mrc_wait_for 30 more
mrc_wait_for 10 lost_ev
mrc_check "an event not allocated is reported lost to the monitor, later ones arrive" \
	"0 1 0 lost more" "$rc $n_ev $(lost_ev && echo lost) $(more && echo more)"
kill $mon 2>/dev/null
wait $mon 2>/dev/null

# Allocations fail at random on both ends while connections open, carry
# a message and close.
t0=$SECONDS
inject 3 3
ip netns exec "$B" $MRC_UTIL connect-loop 10.77.0.1 9100 40 --first 10000 --allow ENOMEM \
	>"$tmp/loop" 2>&1
rc=$?
stop_injecting n_loop
sed 's/^/# /' "$tmp/loop"
sent_add "$tmp/loop"
echo "# connections: $((SECONDS - t0)) s, failed allocations (slab, page): $n_loop"
mrc_check "connections while allocations fail: ENOMEM or intact" 0 $rc
read -r slab page <<<"$n_loop"
mrc_check "connections: allocations failed" ok "$([ $((slab + page)) -gt 0 ] && echo ok || echo none)"
ended() { mrc_stat_cmp "$A" conns -eq 0 && mrc_stat_cmp "$B" conns -eq 0; }
mrc_wait_for 60 ended || mrc_fail "connections left: $(mrc_stat "$A" conns) in A, $(mrc_stat "$B" conns) in B"
kill $chk
wait $chk
rc=$?
sed 's/^/# /' "$tmp/chk"
mrc_check "the server verified every message the clients saw through" \
	"0 verified $sent, bad 0" "$rc $(sed -n 's/.*\(verified [0-9]*, bad [0-9]*\).*/\1/p' "$tmp/chk")"

# ---------------------------------------------------------------------------
# (c) Netlink dumps while 40 connections exist: more than one batch of the
# connection table, and more than one netlink message.
ip netns exec "$A" $MRC_UTIL hold-server 10.77.0.1 9200 40 --timeout 120 >"$tmp/hs" 2>&1 &
hs=$!
mrc_wait_for 60 grep -q '^listening' "$tmp/hs"
ip netns exec "$B" $MRC_UTIL hold-client 10.77.0.1 9200 40 >"$tmp/hc" 2>&1 &
hc=$!
up() { grep -q '^up\|failed' "$tmp/hc"; }
mrc_wait_for 120 up
mrc_check "40 connections" "up 40 of 40" "$(cut -d' ' -f1-4 "$tmp/hc")"
declare -A dumps
t0=$SECONDS
inject 5 5
for i in $(seq 6); do
	for what in conns paths stats; do
		ip netns exec "$B" "$MRC_STATUS" $what >"$tmp/d.out" 2>"$tmp/d.err"
		rc=$?
		if [ $rc -ne 0 ]; then
			if grep -q 'Cannot allocate memory' "$tmp/d.err"; then
				dumps[$what-enomem]=$((${dumps[$what-enomem]:-0} + 1))
			else
				mrc_fail "$what: exit $rc: $(cat "$tmp/d.err")"
			fi
			continue
		fi
		# A line per connection, or per path, under a header.
		rows=$(($(wc -l <"$tmp/d.out") - 1))
		case $what in
		conns) ok=$([ $rows = 40 ] && echo y) ;;
		paths) ok=$([ $rows -ge 40 ] && echo y) ;;
		stats) ok=$(grep -q '^connections: 40 now' "$tmp/d.out" && echo y) ;;
		esac
		if [ "$ok" = y ]; then
			dumps[$what-ok]=$((${dumps[$what-ok]:-0} + 1))
		else
			mrc_fail "$what: incomplete output: $(head -c 600 "$tmp/d.out")"
		fi
	done
done
stop_injecting n_dump
res=""
for what in conns paths stats; do
	res+="$what ${dumps[$what-ok]:-0} ok ${dumps[$what-enomem]:-0} ENOMEM, "
done
echo "# dumps: $((SECONDS - t0)) s, $res failed allocations (slab, page): $n_dump"
mrc_check "dumps failed with ENOMEM" ok \
	"$([ $((${dumps[conns-enomem]:-0} + ${dumps[paths-enomem]:-0} + ${dumps[stats-enomem]:-0})) -gt 0 ] && echo ok || echo none)"
mrc_check "dumps succeeded whole" ok \
	"$([ $((${dumps[conns-ok]:-0} + ${dumps[paths-ok]:-0} + ${dumps[stats-ok]:-0})) -gt 0 ] && echo ok || echo none)"
kill -TERM $hc
wait $hc
wait $hs

# ---------------------------------------------------------------------------
# Injection stopped: a transfer works, every connection ends, the module
# unloads.
ip netns exec "$A" "$PERF" server --addr 10.77.0.1 --port 9300 --timeout 60 --json \
	>"$tmp/srv.json" 2>/dev/null &
spid=$!
ip netns exec "$B" "$PERF" client --addr 10.77.0.1 --port 9300 --bytes $((1 << 20)) \
	--retry-ms 30000 --timeout 60 --json >"$tmp/cli.json" 2>/dev/null
crc=$?
wait $spid
src=$?
read -r ds dc <<<"$(digests "$tmp/srv.json" "$tmp/cli.json")"
mrc_check "after injection: a transfer completes intact" "0 0 ok" "$crc $src $(same "$ds" "$dc")"
mrc_wait_for 60 ended
mrc_check "after injection: no connection left" "0 0" "$(mrc_stat "$A" conns) $(mrc_stat "$B" conns)"
rm -rf "$tmp"
mrc_cleanup
mrc_wait_for 20 rmmod mrc
mrc_check "rmmod" 0 $?
mrc_exit
