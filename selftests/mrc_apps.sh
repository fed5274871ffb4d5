#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unmodified TCP applications over MRC with mrcize (tools/mrcize): two
# namespaces joined by two veth planes, each plane an MRC endpoint on both
# sides.
#   a) iperf3 server and client (4 parallel streams) under mrcize: every
#      stream moves bytes and the addresses the program sees are right; a
#      run over IPv6; a run that loses plane 2 mid-test and still finishes
#      without error;
#   b) curl fetches a 16 MiB file from python3 -m http.server, both under
#      mrcize: the checksum matches;
#   c) the traffic went over MRC: the namespaces' MRC counters (and
#      mrc-status conns during the run) show the connections and bytes,
#      TCP opened no connection, mrcize logged nothing;
#   d) mrcize --fallback reaches plain TCP servers over TCP (no MRC
#      listener on that port: refused, then TCP) and says so: iperf3
#      (blocking connect) and curl from http.server (non-blocking connect).

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_load || exit $KSFT_FAIL
MRCIZE=${MRCIZE:-$MRC_DIR/tools/target/release/mrcize}
[ -x "$MRCIZE" ] || { mrc_fail "mrcize not built (make tools)"; mrc_exit; }
for p in iperf3 curl; do
	command -v $p >/dev/null || { mrc_fail "$p not installed (scripts/setup.sh installs it)"; mrc_exit; }
done
tmp=$(mktemp -d)
trap 'mrc_cleanup; rm -rf "$tmp"' EXIT
mrc_netns_add A
mrc_netns_add B

mrc_planes 2 81 v6
SRV=10.81.1.1

# mrcize_lines FILE...: mrcize's lines on stderr.
mrcize_lines() {
	grep -h '^mrcize:' "$@"
}

# iperf_server PORT [mrcize]: a one-off iperf3 server in A on PORT, under
# mrcize unless the second argument is "plain"; waits until it listens.
iperf_server() {
	local wrap=("$MRCIZE" run)
	[ "${2:-}" = plain ] && wrap=()
	ip netns exec "$A" "${wrap[@]}" iperf3 -s -1 --forceflush -p "$1" \
		>"$tmp/srv-$1.out" 2>"$tmp/srv-$1.err" &
	spid=$!
	mrc_wait_for 60 grep -q 'Server listening' "$tmp/srv-$1.out" ||
		mrc_fail "iperf3 server on port $1 did not start: $(cat "$tmp/srv-$1.err")"
}

# iperf_check NAME FILE STREAMS [LOCAL REMOTE]: the client's JSON report
# has STREAMS streams that each sent and received bytes, and no error; with
# LOCAL and REMOTE, every connection has those addresses (getsockname()
# and getpeername() through mrcize). Sets iperf_bytes to the bytes
# received in all.
iperf_check() {
	local r
	r=$($MRC_PY - "$2" "$3" "${4:-}" "${5:-}" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no report: {e}")
    sys.exit()
if "error" in d:
    print("error:", d["error"])
    sys.exit()
s = d["end"]["streams"]
per = [(x["sender"]["bytes"], x["receiver"]["bytes"]) for x in s]
ok = len(s) == int(sys.argv[2]) and all(a > 0 and b > 0 for a, b in per)
hosts = {(c["local_host"], c["remote_host"]) for c in d["start"]["connected"]}
if sys.argv[3]:
    ok = ok and hosts == {(sys.argv[3], sys.argv[4])}
print(f"ok={ok} streams={len(s)} hosts={sorted(hosts)} received={d['end']['sum_received']['bytes']}")
PY
)
	echo "# $1: $r"
	mrc_check "$1: $3 streams moved bytes" "ok=True streams=$3" "$(echo "$r" | cut -d' ' -f1-2)"
	iperf_bytes=${r##*received=}
}

rx0=$(mrc_stat "$A" rx_bytes)
tcp0_a=$(mrc_tcp_opens "$A")
tcp0_b=$(mrc_tcp_opens "$B")

# --- a) iperf3 -P 4 -------------------------------------------------------
echo "# iperf3 at ${SECONDS} s"
iperf_server 5201
ip netns exec "$B" "$MRCIZE" run iperf3 -c "$SRV" -p 5201 -t 3 -P 4 --json \
	>"$tmp/cli1.json" 2>"$tmp/cli1.err" &
cpid=$!
# Control connection and four streams, seen in B while the test runs.
if mrc_wait_for 60 mrc_stat_cmp "$B" conns -ge 5; then
	mrc_ok "iperf3: 5 MRC connections during the run"
	ip netns exec "$B" "$MRC_STATUS" conns | sed 's/^/# conns: /'
else
	mrc_fail "iperf3: MRC connections in B: $(mrc_stat "$B" conns), expected 5"
fi
wait $cpid
mrc_check "iperf3 client exit status" 0 $?
wait $spid
mrc_check "iperf3 server exit status" 0 $?
iperf_check "iperf3 -P 4" "$tmp/cli1.json" 4 10.81.1.2 "$SRV"
rx1=$(mrc_stat "$A" rx_bytes)
# MRC's received bytes (headers included) cover what iperf3 received.
if [ "$((rx1 - rx0))" -ge "${iperf_bytes:-1}" ] 2>/dev/null; then
	mrc_ok "iperf3 bytes went over MRC ($((rx1 - rx0)) MRC bytes >= $iperf_bytes)"
else
	mrc_fail "iperf3 bytes over MRC: $((rx1 - rx0)) < ${iperf_bytes:-?}"
fi

# --- a'') IPv6 --------------------------------------------------------------
echo "# iperf3 over IPv6 at ${SECONDS} s"
iperf_server 5201
ip netns exec "$B" "$MRCIZE" run iperf3 -c fd81:1::1 -p 5201 -t 1 --json \
	>"$tmp/cli6.json" 2>"$tmp/cli6.err"
mrc_check "iperf3 over IPv6: client exit status" 0 $?
wait $spid
iperf_check "iperf3 over IPv6" "$tmp/cli6.json" 1 fd81:1::2 fd81:1::1
rx1=$(mrc_stat "$A" rx_bytes)

# --- a') plane 2 goes down mid-test ---------------------------------------
echo "# iperf3, plane 2 down, at ${SECONDS} s"
iperf_server 5201
ip netns exec "$B" "$MRCIZE" run iperf3 -c "$SRV" -p 5201 -t 5 -P 2 --json \
	>"$tmp/cli2.json" 2>"$tmp/cli2.err" &
cpid=$!
# Once data flows: B's route over plane 2 goes, then its link (see
# mrc_multipath.sh for the order).
mrc_wait_for 60 mrc_stat_cmp "$A" rx_bytes -ge $((rx1 + (2 << 20)))
ip -n "$B" route del 10.81.2.0/24 dev vb2
ip -n "$B" link set vb2 down
echo "# plane 2 down at $(( ($(mrc_stat "$A" rx_bytes) - rx1) >> 20 )) MiB"
wait $cpid
mrc_check "iperf3 with plane 2 down: client exit status" 0 $?
wait $spid
mrc_check "iperf3 with plane 2 down: server exit status" 0 $?
iperf_check "iperf3 plane 2 down" "$tmp/cli2.json" 2
ip -n "$B" link set vb2 up
ip -n "$B" route replace 10.81.2.0/24 dev vb2 2>/dev/null

# --- b) curl from python3 -m http.server ----------------------------------
echo "# curl at ${SECONDS} s"
mkdir "$tmp/www"
head -c $((16 << 20)) /dev/urandom >"$tmp/www/blob"
want=$(sha256sum <"$tmp/www/blob" | cut -d' ' -f1)
ip netns exec "$A" "$MRCIZE" run $MRC_PY -u -m http.server 8080 --bind "$SRV" \
	--directory "$tmp/www" >"$tmp/http.out" 2>"$tmp/http.err" &
hpid=$!
if mrc_wait_for 120 grep -q 'Serving HTTP' "$tmp/http.out"; then
	ip netns exec "$B" "$MRCIZE" run curl -sS --max-time 120 -o "$tmp/got" \
		"http://$SRV:8080/blob" 2>"$tmp/curl.err"
	mrc_check "curl exit status" 0 $?
	got=$(sha256sum <"$tmp/got" 2>/dev/null | cut -d' ' -f1)
	mrc_check "curl: 16 MiB file intact" "$want" "$got"
else
	mrc_fail "http.server did not start: $(cat "$tmp/http.err")"
fi
kill $hpid 2>/dev/null
wait $hpid 2>/dev/null

# --- c) MRC, not TCP --------------------------------------------------------
mrc_check "no TCP connection in A" "$tcp0_a" "$(mrc_tcp_opens "$A")"
mrc_check "no TCP connection in B" "$tcp0_b" "$(mrc_tcp_opens "$B")"
lines=$(mrcize_lines "$tmp"/*.err)
mrc_check "mrcize logged nothing (no TCP in place of MRC)" "" "$lines"

# --- d) --fallback to a plain TCP server --------------------------------------
echo "# fallback at ${SECONDS} s"
iperf_server 5202 plain
ip netns exec "$B" "$MRCIZE" run --fallback iperf3 -c "$SRV" -p 5202 -t 1 --json \
	>"$tmp/cli3.json" 2>"$tmp/cli3.fb"
mrc_check "fallback: iperf3 client exit status" 0 $?
wait $spid
iperf_check "iperf3 over the TCP fallback" "$tmp/cli3.json" 1
fb=$(mrcize_lines "$tmp/cli3.fb")
echo "$fb" | sed 's/^/# /'
# iperf3's control connection and its one data connection.
mrc_check "fallback: mrcize said so for both connections" 2 \
	"$(grep -c 'no MRC listener at 10.81.1.1:5202 (Connection refused): falling back to TCP' <<<"$fb")"
if [ "$(mrc_tcp_opens "$B")" -gt "$tcp0_b" ]; then
	mrc_ok "fallback: TCP carried it"
else
	mrc_fail "fallback: no TCP connection opened in B"
fi

# curl connects without blocking and gives up on POLLERR: mrcize waits in
# connect() for MRC's refusal and puts the TCP socket in place there.
head -c $((1 << 20)) /dev/urandom >"$tmp/www/small"
want=$(sha256sum <"$tmp/www/small" | cut -d' ' -f1)
ip netns exec "$A" $MRC_PY -u -m http.server 8081 --bind "$SRV" \
	--directory "$tmp/www" >"$tmp/http2.out" 2>"$tmp/http2.log" &
hpid=$!
if mrc_wait_for 120 grep -q 'Serving HTTP' "$tmp/http2.out"; then
	ip netns exec "$B" "$MRCIZE" run --fallback curl -sS --max-time 60 \
		-o "$tmp/got-small" "http://$SRV:8081/small" 2>"$tmp/curl2.fb"
	mrc_check "fallback, non-blocking connect: curl exit status" 0 $?
	got=$(sha256sum <"$tmp/got-small" 2>/dev/null | cut -d' ' -f1)
	mrc_check "fallback, non-blocking connect: file intact" "$want" "$got"
	sed 's/^/# /' "$tmp/curl2.fb"
	mrc_check "fallback, non-blocking connect: mrcize said so" 1 \
		"$(grep -c 'no MRC listener at 10.81.1.1:8081 (Connection refused): falling back to TCP' "$tmp/curl2.fb")"
else
	mrc_fail "plain http.server did not start: $(cat "$tmp/http2.log")"
fi
kill $hpid 2>/dev/null
wait $hpid 2>/dev/null

mrc_exit
