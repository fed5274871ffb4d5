#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Faults mid-transfer between two namespaces joined by a veth pair:
# - the server process is killed: its socket closes with unread data and
#   answers with RST, and the client fails with ECONNRESET at once (within
#   5 s of the server's exit);
# - the link goes down for 2 s, less than the user timeout: the transfer
#   resumes and completes intact;
# - the link is deleted: nothing answers any more, and the client fails
#   with ETIMEDOUT one user timeout (set to 3 s with mrc-status) after the
#   last progress.

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
mrc_veth_pair "$A" "$B"

# errs: the tools' error output, as comments.
errs() {
	cat "$tmp/cli.err" "$tmp/srv.err" | grep -v listening | sed 's/^/# /'
}

# start BYTES: a server in A and a client in B, in the background.
start() {
	ip netns exec "$A" "$PERF" server --proto mrc --addr 10.77.0.1 --port 9000 \
		--timeout 120 --json >"$tmp/srv.json" 2>"$tmp/srv.err" &
	spid=$!
	ip netns exec "$B" "$PERF" client --proto mrc --addr 10.77.0.1 --port 9000 \
		--bytes "$1" --retry-ms 20000 --timeout 120 --json \
		>"$tmp/cli.json" 2>"$tmp/cli.err" &
	cpid=$!
	# Transferring: the server has received something.
	mrc_wait_for 60 mrc_stat_cmp "$A" rx_bytes -gt $((rx0 + (1 << 20)))
}

# Peer killed. The time counts from the server's exit: a killed process
# can take seconds to exit on a loaded VM, and its socket closes only then.
rx0=$(mrc_stat "$A" rx_bytes)
start $((1 << 30))
kill -9 $spid
wait $spid 2>/dev/null
t0=$EPOCHREALTIME
wait $cpid
crc=$?
ms=$(mrc_ms_since "$t0")
# Elapsed seconds with one decimal.
dt=$((ms / 1000)).$((ms % 1000 / 100))
mrc_check "peer killed: client fails with ECONNRESET" "rc=1 errno=104" \
	"rc=$crc errno=$(mrc_json_field "$tmp/cli.json" 'd["errno"]')"
mrc_check "peer killed: client told within 5 s (took $dt s)" 1 $((ms <= 5000))
mrc_wait_for 20 mrc_stat_cmp "$B" conns -eq 0
mrc_check "peer killed: no connection left" 0 $?

# Link down for 2 s, then back.
ip netns exec "$B" "$MRC_STATUS" set user-timeout-ms 10000
rx0=$(mrc_stat "$A" rx_bytes)
start $((8 << 20))
ip -n "$B" link set veth-b down
sleep 2
ip -n "$B" link set veth-b up
wait $cpid
crc=$?
wait $spid
src=$?
errs
dig_s=$(mrc_json_field "$tmp/srv.json" 'd["digest"]')
dig_c=$(mrc_json_field "$tmp/cli.json" 'd["digest"]')
mrc_check "link down 2 s: transfer completes intact" "0 0 ok" \
	"$crc $src $([ "$dig_s" = "$dig_c" ] && [ "$dig_s" != none ] && echo ok || echo "$dig_s != $dig_c")"

# Link deleted.
ip netns exec "$B" "$MRC_STATUS" set user-timeout-ms 3000
ip netns exec "$A" "$MRC_STATUS" set user-timeout-ms 3000
rx0=$(mrc_stat "$A" rx_bytes)
start $((1 << 30))
# The time counts from before the deletion, which can itself take seconds
# on a loaded VM (the device is unregistered only once its references are
# gone). The user timeout runs from the last acknowledgement, which can come
# during the deletion, since the device passes packets for part of it. The
# upper bound only has to tell the 3 s timeout from the 30 s default: how
# much later than 3 s the client hears of it depends on how slowly the
# emulated CPUs run, which a test cannot bound (the simulator checks the
# deadline itself, in tools/mrc-core/tests/multipath_sim.rs).
t0=$EPOCHREALTIME
ip -n "$B" link del veth-b
del_ms=$(mrc_ms_since "$t0")
wait $cpid
crc=$?
ms=$(mrc_ms_since "$t0")
dt=$((ms / 1000)).$((ms % 1000 / 100))
echo "# link deleted: ip took $del_ms ms, the client failed $ms ms after it started"
errs
mrc_check "link deleted: client fails with ETIMEDOUT" "rc=1 errno=110" \
	"rc=$crc errno=$(mrc_json_field "$tmp/cli.json" 'd["errno"]')"
mrc_check "link deleted: after the 3 s user timeout, well before the 30 s default (took $dt s)" 1 \
	$((ms >= 2500 && ms <= 15000))
wait $spid
src=$?
mrc_check "link deleted: server fails with ETIMEDOUT" "rc=1 errno=110" \
	"rc=$src errno=$(mrc_json_field "$tmp/srv.json" 'd["errno"]')"

rm -rf "$tmp"
mrc_cleanup
mrc_wait_for 20 rmmod mrc
mrc_check "rmmod" 0 $?
mrc_exit
