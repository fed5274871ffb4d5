#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A connection under attack by hosts and users that know its session id:
# forged RST, FIN, DATA, ACK and PROBE_ACK packets from a third host and
# from an unprivileged user on the client's own host, with random numbers
# where the attacker has to guess. The connection carries on and delivers
# every byte; each forgery is dropped and counted under its reason. An
# unprivileged user cannot read session ids at all. Answers to packets for
# unknown sessions are rate-limited. A listener is no amplifier: SYNs with a
# forged source get back at most three times their bytes. A flood of SYNs
# from forged sources does not keep a real client out. A flood of
# one-byte messages is held
# within the receiving socket's buffer, counted at the packets' real size.
# A local user cannot bind foreign addresses or privileged ports, nor reach
# a listener bound to loopback from the network.
#
#   ns a (client)              ns b (server)                 ns c (attacker)
#   veth-a 10.77.0.1  <---->   veth-b 10.77.0.2
#                              veth-bc 10.78.0.2   <---->    veth-c 10.78.0.3
#                              (10.79.0.0/16, forged sources, via 10.78.0.3)

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
a=$B b=$A
mrc_netns_add c
mrc_veth_pair "$a" "$b"
ip link add veth-c netns "$c" type veth peer name veth-bc netns "$b"
ip -n "$c" addr add 10.78.0.3/24 dev veth-c
ip -n "$b" addr add 10.78.0.2/24 dev veth-bc
ip -n "$c" link set veth-c up
ip -n "$b" link set veth-bc up
ip -n "$c" route add 10.77.0.0/24 via 10.78.0.2

port=$MRC_PORT_DEFAULT
ATTACK="$MRC_PY $MRC_DIR/selftests/mrc_attack.py"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# A long transfer from a to b, verified at the end.
ip netns exec "$b" "$PERF" server --addr 10.77.0.2 --port 9000 --conns 1 --timeout 240 \
	--msg-size 4096 --json >"$tmp/srv.json" 2>"$tmp/srv.err" &
spid=$!
# It runs until the attacks below are over (the debug VM takes seconds to
# start each program, and a slow host minutes for all of them), then
# stops at $tmp/stop; that each attack found the connection there is
# checked.
ip netns exec "$a" "$PERF" client --addr 10.77.0.2 --port 9000 --duration 600 \
	--stop-file "$tmp/stop" --msg-size 4096 --retry-ms 20000 --timeout 240 \
	--json >"$tmp/cli.json" 2>"$tmp/cli.err" &
cpid=$!
t_start=$EPOCHREALTIME

conn_json() { # NS [USER...]: the namespace's connections as JSON, one per line
	local ns=$1
	shift
	ip netns exec "$ns" "$@" "$MRC_STATUS" --json conns 2>&1 |
		$MRC_PY -c 'import json,sys
d = json.load(sys.stdin)
for c in d.get("connections", d if isinstance(d, list) else []):
    print(json.dumps(c))'
}
established() { conn_json "$b" | grep -q '"state": *"established"'; }
mrc_wait_for 60 established || mrc_fail "the connection was not established within 60 s"
sid=$(conn_json "$b" | $MRC_PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["session_id"])')
echo "# session $sid"

# What an unprivileged user in either namespace can learn: the connection,
# but not its session id; and no events (they carry session ids).
for ns in "$a" "$b"; do
	out=$(conn_json "$ns" "${NOBODY[@]}")
	mrc_check "unprivileged: the connection is listed, without its session id" "1 0" \
		"$(grep -c cookie <<<"$out") $(grep -c session_id <<<"$out")"
done
out=$(timeout 5 ip netns exec "$b" "${NOBODY[@]}" "$MRC_STATUS" monitor 2>&1)
mrc_check "unprivileged: monitor refused" 1 "$?"
case "$out" in
*CAP_NET_ADMIN*) mrc_ok "unprivileged monitor: the error names CAP_NET_ADMIN" ;;
*) mrc_fail "unprivileged monitor: $out" ;;
esac

snap() { # NS: the counters the forgeries may move, on one line
	local k
	for k in drop_wrong_source drop_conn_bad_rst drop_conn_out_of_window \
		drop_conn_invalid drop_conn_bad_probe drop_no_session drop_conn_duplicate \
		drop_conn_bad_state drop_rcvbuf; do
		printf '%s ' "$(mrc_stat "$1" "$k")"
	done
}
delta() { # BEFORE AFTER: the difference, field by field
	local -a x=($1) y=($2)
	local i out=""
	for i in "${!x[@]}"; do out+="$((y[i] - x[i])) "; done
	echo "${out% }"
}

# An off-path host that knows the session id: every forgery is from an
# address that is none of the client's.
n=20
before=$(snap "$b")
mrc_check "off-path forgeries sent" "forged $((5 * n))" \
	"$(ip netns exec "$c" $ATTACK forge 10.77.0.2 "$port" "$sid" --count $n)"
mrc_wait_for 10 mrc_stat_cmp "$b" drop_wrong_source -ge $(( ${before%% *} + 5 * n ))
# The transfer's own retransmissions and copies may arrive twice meanwhile
# (drop_conn_duplicate); no forgery can, as each is counted once, above.
read -r ws rst oow inv probe nosess _ state rcvbuf <<<"$(delta "$before" "$(snap "$b")")"
mrc_check "off-path: each forgery dropped as from a wrong source, nothing else moved" \
	"$((5 * n)) 0 0 0 0 0 0 0" "$ws $rst $oow $inv $probe $nosess $state $rcvbuf"

# An unprivileged user on the client's host: the right source address, so
# only the numbers it must guess stand between it and the connection.
before=$(snap "$b")
mrc_check "local forgeries sent" "forged $((5 * n))" \
	"$(ip netns exec "$a" "${NOBODY[@]}" $ATTACK forge 10.77.0.2 "$port" "$sid" \
		--count $n --src 10.77.0.1)"
mrc_sleep 1
d=$(delta "$before" "$(snap "$b")")
echo "# drops by wrong_source bad_rst out_of_window invalid bad_probe no_session duplicate bad_state rcvbuf: $d"
read -r _ rst oow inv probe nosess dup _ <<<"$d"
mrc_check "local: every RST out of window, dropped" $n "$rst"
mrc_check "local: every FIN and DATA outside the window, dropped" "ok" \
	"$([ $((oow + dup)) -ge $((2 * n)) ] && echo ok || echo "$((oow + dup)) < $((2 * n))")"
mrc_check "local: every ACK invalid, dropped" "ok" \
	"$([ "$inv" -ge $n ] && echo ok || echo "$inv < $n")"
mrc_check "local: every PROBE_ACK unmatched, dropped" $n "$probe"
mrc_check "local: the connection was still there for all of them" 0 "$nosess"

# A client that picks, for a SYN of its own, the session id of a live
# connection (learnt or guessed): the SYN reaches that connection, which
# takes it from no address but its peer's, and as an established
# connection takes no SYN at all. No second connection is made and the
# first carries on: whoever chooses an id can shut out only itself.
before=$(snap "$b")
conns0=$(mrc_stat "$b" conns)
ip netns exec "$c" $ATTACK syn 10.77.0.2 "$port" 9000 "10.78.0.3:$port" --sid "$sid" >/dev/null
ip netns exec "$a" "${NOBODY[@]}" $ATTACK syn 10.77.0.2 "$port" 9000 "10.77.0.1:$port" \
	--sid "$sid" >/dev/null
mrc_sleep 1
read -r ws _ _ _ _ nosess _ state _ <<<"$(delta "$before" "$(snap "$b")")"
mrc_check "SYN reusing a live session id: dropped from another host, and as a SYN for an established connection from the client's host" \
	"1 1 0" "$ws $state $nosess"
mrc_check "SYN reusing a live session id: no second connection" "$conns0" "$(mrc_stat "$b" conns)"
mrc_check "the connection is still established after the attacks" 1 \
	"$(conn_json "$b" | grep -c '"state": *"established"')"

echo "# the attacks took $(mrc_ms_since "$t_start") ms from the transfer's start"
touch "$tmp/stop"
wait $cpid
crc=$?
wait $spid
src=$?
res=$($MRC_PY - "$tmp/srv.json" "$tmp/cli.json" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).readline())
c = json.loads(open(sys.argv[2]).read())
ok = s["ok"] and c["ok"] and s["digest"] == c["digest"] and s["bytes"] == c["bytes"] > 0
print("intact" if ok else f"server {s.get('error')} client {c.get('error')} bytes {s['bytes']}/{c['bytes']}")
PY
)
mrc_check "the transfer under attack completed, every byte intact" "0 0 intact" "$crc $src $res"
[ "$res" = intact ] || tail -c 400 "$tmp/cli.err" "$tmp/srv.err" | sed 's/^/# /'

# Answers to packets for unknown sessions: no faster than the rate limit
# over the time from the first packet sent to the last one handled; the
# rest counted. The emulated VM cannot send faster than the default limit
# (1000 a second), so the test lowers it to 100 a second, burst 10.
params=/sys/module/mrc/parameters
rate0=$(cat $params/rst_rate) burst0=$(cat $params/rst_burst)
echo 100 >$params/rst_rate
echo 10 >$params/rst_burst
rst0=$(mrc_stat "$b" tx_rst) lim0=$(mrc_stat "$b" tx_rst_limited) ns0=$(mrc_stat "$b" drop_no_session)
t0=$EPOCHREALTIME
read -r _ sent us <<<"$(ip netns exec "$c" $ATTACK unknown-flood 10.77.0.2 "$port" 3000)"
mrc_wait_for 20 mrc_stat_cmp "$b" drop_no_session -ge $((ns0 + 3000))
ms=$(mrc_ms_since "$t0")
rst=$(($(mrc_stat "$b" tx_rst) - rst0)) lim=$(($(mrc_stat "$b" tx_rst_limited) - lim0))
mrc_check "unknown sessions: each answered or counted as limited" "$sent" $((rst + lim))
bound=$((10 + ms / 10 + 1))
echo "$rate0" >$params/rst_rate
echo "$burst0" >$params/rst_burst
echo "# $sent packets sent in $us us, handled within $ms ms: $rst RSTs, $lim limited (bound $bound)"
mrc_check "unknown sessions: RSTs within the rate limit" ok \
	"$([ "$rst" -le "$bound" ] && echo ok || echo "$rst > $bound")"

# A listener as an amplifier: SYNs from the attacker with the client's
# address as their source, and as their UDP port one where an ordinary
# socket counts what arrives; each for a new session that nobody completes.
# The victim gets at most three times the SYNs' bytes, however long the
# half-open connections retransmit (nine SYN_ACKs over 51 s each, seven of
# them within the 6.3 s after the SYN, were the SYN_ACKs not held back).
ip netns exec "$b" sh -c 'for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 >"$f"; done'
# Its backlog is 16: SYNs without a retry token may fill half of it
# (syn_retry_pct), and each of the five must make a half-open connection.
ip netns exec "$b" $ATTACK listen 10.77.0.2 9300 --backlog 16 --seconds 240 >"$tmp/amp.out" 2>&1 &
amp=$!
amp_listening() { grep -q '^listening' "$tmp/amp.out"; }
mrc_wait_for 60 amp_listening || mrc_fail "the listener for forged SYNs did not start"
ip netns exec "$a" $ATTACK udp-count 10.77.0.1 9999 --seconds 8 --go "$tmp/amp-go" \
	>"$tmp/victim.out" 2>&1 &
victim=$!
victim_listening() { grep -q '^listening' "$tmp/victim.out"; }
mrc_wait_for 60 victim_listening || mrc_fail "the victim's socket did not start"
syns=5
amp0=$(mrc_stat "$b" tx_amp_limited)
read -r _ nsyn syn_bytes _ <<<"$(ip netns exec "$c" $ATTACK spoof-syn 10.77.0.2 "$port" 9300 \
	--src 10.77.0.1 --sport 9999 --count $syns)"
touch "$tmp/amp-go"
wait $victim
read -r _ nrx rx_bytes <<<"$(tail -n 1 "$tmp/victim.out")"
echo "# ${nsyn:-no} forged SYNs of ${syn_bytes:-0} bytes in all: the victim got ${nrx:-no} MRC datagrams, ${rx_bytes:-0} bytes"
mrc_check "amplification: the listener answered the forged SYNs" ok \
	"$([ "${nsyn:-0}" -eq $syns ] && [ "${nrx:-0}" -gt 0 ] && echo ok ||
		echo "$(tail -n 1 "$tmp/victim.out")")"
mrc_check "amplification: the victim got at most three times the SYNs' bytes" ok \
	"$([ "${rx_bytes:-0}" -le $((3 * ${syn_bytes:-0})) ] && echo ok ||
		echo "${rx_bytes:-0} > 3 * ${syn_bytes:-0}")"
# Each half-open connection of the forged SYNs shows in mrc-status the
# SYN_ACKs it held back (amp_limited), while its handshake runs (until about
# 51 s after the SYNs): "N of M" of them have held some back.
amp_conns() {
	ip netns exec "$b" "$MRC_STATUS" --json conns 2>&1 | $MRC_PY -c 'import json, sys
t = sys.stdin.read()
try:
    cs = json.loads(t)["connections"]
except ValueError:
    print(t[:200].replace("\n", " ")); sys.exit()
half = [c for c in cs if c["state"] == "syn_received" and c.get("remote_addr") == "10.77.0.1"]
n = sum(1 for c in half if (c.get("counters") or {}).get("amp_limited", 0) > 0)
print(f"{n} of {len(half)}")' >"$tmp/amp-conns"
	[ "$(cat "$tmp/amp-conns")" = "$syns of $syns" ]
}
mrc_wait_for 30 amp_conns
mrc_check "amplification: each half-open connection shows its SYN_ACKs held back" \
	"$syns of $syns" "$(cat "$tmp/amp-conns")"

# A sender of one-byte messages to a reader that reads nothing: each takes
# the least window a packet takes, so the window holds the sender back
# before the receiver's memory runs out and no packet is dropped; the
# receiving host holds at most twice the socket's receive buffer of them,
# counted at their real size. Once the reader reads, every message
# arrives, in order.
n=3000 go=$tmp/go
# The tiny flood's connection at either end on one line (MRC port 7000):
# what tells why a sender would wait, its RTOs and window probes, and what
# the sink dropped and the answers it withheld (acks-limited).
tiny_conns() {
	{
		conn_json "$a" | sed 's/^/a /'
		conn_json "$b" | sed 's/^/b /'
	} | $MRC_PY -c 'import json, sys
out = []
for line in sys.stdin:
    side, _, j = line.partition(" ")
    try:
        c = json.loads(j)
    except ValueError:
        continue
    if (c.get("remote_port") if side == "a" else c.get("local_port")) != 7000:
        continue
    if side == "a":
        who, names = "sender", ("data_sent", "retransmits", "rtos", "rto_losses",
                                "window_probes", "acks_received")
    else:
        who, names = "sink", ("data_received", "rcv_dropped", "duplicates", "acks_sent",
                              "acks_limited")
    k = c.get("counters") or {}
    paths = ",".join("%s:%s" % (p.get("id"), p.get("state")) for p in c.get("paths") or [])
    err = " " + str(c["error"]) if c.get("error") else ""
    out.append("%s %s%s paths %s %s" % (who, c.get("state"), err, paths,
                                         " ".join("%s %s" % (n, k.get(n, 0)) for n in names)))
print("; ".join(out) if out else "no connection on port 7000")'
}
# The MRC counters of a namespace ("key value" a line), and those that moved
# between two such snapshots.
proc_counts() { mrc_wait_for 30 mrc_ns_proc "$1" && cat "$mrc_proc/net/mrc"; }
proc_moved() { # BEFORE AFTER
	awk 'NR == FNR { v[$1] = $2; next }
		($1 in v) && $2 != v[$1] && $2 ~ /^[0-9]+$/ { printf "%s %+d ", $1, $2 - v[$1] }' "$1" "$2"
}
nobuf0=$(mrc_stat "$b" drop_conn_no_buffer)
rcvbuf0=$(mrc_stat "$b" drop_rcvbuf)
ip netns exec "$b" $ATTACK tiny-sink 10.77.0.2 7000 $n --rcvbuf 65536 --go "$go" \
	>"$tmp/sink.out" 2>&1 &
sink=$!
listening() { grep -q '^listening' "$tmp/sink.out"; }
mrc_wait_for 60 listening || mrc_fail "the sink did not listen within 60 s"
ip netns exec "$a" $ATTACK tiny-flood 10.77.0.2 7000 $n >"$tmp/flood.out" 2>&1 &
flood=$!
flood_state() { grep -q '^stalled\|^sent\|^sending\|^stuck\|Error' "$tmp/flood.out"; }
mrc_wait_for 120 flood_state
held=$(mrc_stat "$b" rmem_total)
rcvbuf=$(sed -n 's/^rcvbuf //p' "$tmp/sink.out")
echo "# sink SO_RCVBUF $rcvbuf; held $held bytes; $(head -n 1 "$tmp/flood.out")"
mrc_check "tiny flood: the sender was held back" ok \
	"$(grep -q '^stalled' "$tmp/flood.out" && echo ok || head -c 300 "$tmp/flood.out")"
mrc_check "tiny flood: the receiver holds at most twice its buffer" ok \
	"$([ "${held:-0}" -gt 0 ] && [ "$held" -le $((2 * ${rcvbuf:-0} + 65536)) ] && echo ok ||
		echo "held ${held:-none} for SO_RCVBUF ${rcvbuf:-none}")"
# Only its window probes, backed off, may find no room.
echo "# tiny flood: $(($(mrc_stat "$b" drop_conn_no_buffer) - nobuf0)) window probes found no room"
mrc_check "tiny flood: the window held the sender back before the receiver's memory ran out" 0 \
	$(($(mrc_stat "$b" drop_rcvbuf) - rcvbuf0))
echo "# tiny flood stalled: $(tiny_conns)"
proc_counts "$a" >"$tmp/proc-a.0"
proc_counts "$b" >"$tmp/proc-b.0"
touch "$go"
# Until both ends are done, the counters of their connection once a second:
# the last sample before a socket closed tells how its connection ended.
t0=$EPOCHREALTIME
while kill -0 $flood 2>/dev/null || kill -0 $sink 2>/dev/null; do
	proc_counts "$a" >"$tmp/proc-a.1"
	proc_counts "$b" >"$tmp/proc-b.1"
	echo "$(mrc_ms_since "$t0") ms: $(tiny_conns); namespace counters since, sender's: $(proc_moved "$tmp/proc-a.0" "$tmp/proc-a.1"); sink's: $(proc_moved "$tmp/proc-b.0" "$tmp/proc-b.1")" >>"$tmp/tiny.log"
	mrc_sleep 1
done &
sampler=$!
wait $flood
wait $sink
wait $sampler
echo "# tiny flood read: $(grep -v 'no connection' "$tmp/tiny.log" | tail -n 1)"
sink_end=$(tail -n 1 "$tmp/sink.out")
flood_end=$(tail -n 1 "$tmp/flood.out" | cut -d' ' -f1-2)
mrc_check "tiny flood: every message arrived once the reader read" "received $n ok" "$sink_end"
mrc_check "tiny flood: the sender sent them all" "sent $n" "$flood_end"
if [ "$sink_end" != "received $n ok" ] || [ "$flood_end" != "sent $n" ]; then
	echo "# tiny flood failed: sink: $(tail -n 2 "$tmp/sink.out" | tr '\n' ' ')"
	echo "# tiny flood failed: sender: $(tail -n 2 "$tmp/flood.out" | tr '\n' ' ')"
	sed 's/^/# tiny flood: /' "$tmp/tiny.log"
fi

# A peer that ignores the window (a handshake and packets of its own over a
# plain UDP socket) sends 1000 one-byte messages at once to a reader that
# reads nothing: the receiving host still holds at most twice the socket's
# receive buffer of them, and drops and counts the rest, beyond the window
# (drop_conn_no_buffer) or beyond the socket's memory (drop_rcvbuf).
n=1000
ip netns exec "$b" $ATTACK tiny-sink 10.77.0.2 7001 $n --rcvbuf 65536 --go "$tmp/never" \
	>"$tmp/sink2.out" 2>&1 &
sink=$!
listening2() { grep -q '^listening' "$tmp/sink2.out"; }
mrc_wait_for 60 listening2 || mrc_fail "the second sink did not listen within 60 s"
nobuf0=$(mrc_stat "$b" drop_conn_no_buffer)
rcvbuf0=$(mrc_stat "$b" drop_rcvbuf)
res=$(ip netns exec "$a" "${NOBODY[@]}" $ATTACK raw-flood 10.77.0.2 "$port" 7001 $n --src 10.77.0.1)
raw_dropped() {
	[ $(($(mrc_stat "$b" drop_conn_no_buffer) - nobuf0 + $(mrc_stat "$b" drop_rcvbuf) - rcvbuf0)) -gt 0 ]
}
mrc_wait_for 10 raw_dropped
held=$(mrc_stat "$b" rmem_total)
rcvbuf=$(sed -n 's/^rcvbuf //p' "$tmp/sink2.out")
dropped="$(($(mrc_stat "$b" drop_conn_no_buffer) - nobuf0)) beyond the window, $(($(mrc_stat "$b" drop_rcvbuf) - rcvbuf0)) beyond the memory"
echo "# raw flood: $res; sink SO_RCVBUF $rcvbuf; held $held bytes; dropped $dropped"
mrc_check "raw flood: the peer connected and sent them all" "sent $n" "${res%% acks *}"
# The receiver answers packets it has no room for at most 50 times a second
# (burst 8): a few ACKs over the time the flood took, not one for each
# packet dropped. The ten packets it took have ACKs of their own.
acks=$(echo "$res" | sed -n 's/.* acks \([0-9]*\) .*/\1/p')
ms=$(echo "$res" | sed -n 's/.* ms \([0-9]*\)$/\1/p')
mrc_check "raw flood: a few ACKs answer the packets dropped" ok \
	"$([ "${acks:-x}" -le $((8 + 50 * (${ms:-0} + 1000) / 1000 + 20)) ] 2>/dev/null &&
		[ "$acks" -lt $((n / 4)) ] && echo ok || echo "${acks:-no} ACKs in ${ms:-?} ms")"
limited=$(conn_json "$b" | $MRC_PY -c 'import json,sys
print(max([json.loads(l)["counters"].get("acks_limited", 0) for l in sys.stdin] or [0]))')
echo "# raw flood: $acks ACKs came back for $n packets sent in $ms ms; $limited answers withheld (acks-limited)"
mrc_check "raw flood: the answers withheld are counted" ok \
	"$([ "${limited:-0}" -gt 0 ] && echo ok || echo "acks_limited ${limited:-none}")"
mrc_check "raw flood: the receiver holds at most twice its buffer" ok \
	"$([ "${held:-0}" -gt 0 ] && [ "$held" -le $((2 * ${rcvbuf:-0} + 65536)) ] && echo ok ||
		echo "held ${held:-none} for SO_RCVBUF ${rcvbuf:-none}")"
mrc_check "raw flood: the packets over it were dropped and counted" ok \
	"$(raw_dropped && echo ok || echo "$dropped")"
kill $sink 2>/dev/null
wait $sink 2>/dev/null

# A local user binds only the host's addresses and unprivileged ports (as
# for TCP), and a listener bound to one address does not hear SYNs sent to
# another.
mrc_check "unprivileged bind: a foreign address, a privileged port, a free one" \
	"nonlocal=EADDRNOTAVAIL privileged=EACCES local=ok" \
	"$(ip netns exec "$b" "${NOBODY[@]}" $ATTACK bind-rules 10.99.0.1 10.77.0.2 5555)"
mrc_check "root binds a privileged port" "nonlocal=EADDRNOTAVAIL privileged=ok local=ok" \
	"$(ip netns exec "$b" $ATTACK bind-rules 10.99.0.1 10.77.0.2 5556)"
ip netns exec "$b" $ATTACK listen 127.0.0.1 9200 --seconds 120 >"$tmp/lo.out" 2>&1 &
lo=$!
lo_listening() { grep -q '^listening' "$tmp/lo.out"; }
mrc_wait_for 60 lo_listening || mrc_fail "the loopback listener did not start"
mrc_check "a listener on 127.0.0.1 is not reachable from the network" ECONNREFUSED \
	"$(ip netns exec "$a" $ATTACK connect 10.77.0.2 9200)"
kill $lo 2>/dev/null
wait $lo 2>/dev/null

# A flood of SYNs from random forged sources at a listener while a real
# client connects. Once the listener's half-open connections hold
# syn_retry_pct (50 %) of its backlog, a SYN without a token gets a RETRY
# (smaller than the SYN) and costs nothing; the client answers it with the
# token, which proves its address, and takes a slot the flood cannot reach.
# SYNs with a made-up token are dropped.
stat0() { local v; v=$(mrc_stat "$@"); echo "${v:-0}"; }
flood_snap() { # the listener's counters the flood moves, on one line
	local k
	for k in rx_bytes tx_bytes tx_retry drop_backlog drop_bad_token conns; do
		printf '%s ' "$(stat0 "$b" "$k")"
	done
}
ip -n "$b" route add 10.79.0.0/16 via 10.78.0.3
backlog=16 nflood=4000
ip netns exec "$b" $ATTACK listen 10.77.0.2 9400 --backlog $backlog --seconds 240 \
	>"$tmp/fl.out" 2>&1 &
fl=$!
fl_listening() { grep -q '^listening' "$tmp/fl.out"; }
mrc_wait_for 60 fl_listening || mrc_fail "the listener for the SYN flood did not start"
before=$(flood_snap)
ip netns exec "$c" $ATTACK spoof-syn 10.77.0.2 "$port" 9400 --src 10.79.0.0/16 \
	--count $nflood --seconds 12 >"$tmp/flood.out" 2>"$tmp/flood.err" &
flood=$!
# The flood has filled what it can of the backlog once the listener turns
# SYNs away: with RETRYs, or (before RETRY existed) as over its backlog.
turned_away() {
	local t
	t=$(($(stat0 "$b" tx_retry) + $(stat0 "$b" drop_backlog)))
	read -r _ _ r0 d0 _ <<<"$before"
	[ "$t" -ge $((r0 + d0 + 100)) ]
}
mrc_wait_for 120 turned_away || mrc_fail "the SYN flood did not reach the listener"
during=$(flood_snap)
res=$(ip netns exec "$a" $ATTACK connect 10.77.0.2 9400 --seconds 15)
after_connect=$(flood_snap)
wait $flood
read -r _ nsent flood_bytes flood_us <<<"$(cat "$tmp/flood.out")"
end=$(flood_snap)
read -r rx0 tx0 r0 d0 _ conns0 <<<"$before"
read -r _ _ _ _ _ conns1 <<<"$during"
read -r _ _ _ _ _ conns2 <<<"$after_connect"
read -r rx3 tx3 r3 d3 _ conns3 <<<"$end"
read -r verdict ms <<<"$res"
[ "${nsent:-0}" = $nflood ] || sed 's/^/# flood: /' "$tmp/flood.err"
half_open=$(( $(printf '%s\n' "$conns1" "$conns2" "$conns3" | sort -n | tail -n 1) - conns0 ))
echo "# SYN flood: ${nsent:-no} SYNs from random sources, ${flood_bytes:-0} bytes in ${flood_us:-0} us;" \
	"listener (backlog $backlog): $((r3 - r0)) RETRYs, $((d3 - d0)) over the backlog," \
	"$half_open connections at most (about 95 KiB each); it sent $((tx3 - tx0)) bytes" \
	"for $((rx3 - rx0)) received"
echo "# SYN flood: the client's connect: $res"
mrc_check "SYN flood: every SYN of the flood sent" $nflood "${nsent:-0}"
mrc_check "SYN flood: a real client connects within 5 s" ok \
	"$([ "$verdict" = connected ] && [ "${ms:-99999}" -le 5000 ] && echo ok || echo "$res")"
# The flood's half-open connections hold at most half the backlog; the
# client's connection adds one.
mrc_check "SYN flood: half-open connections within half the backlog" ok \
	"$([ "$half_open" -le $((backlog / 2 + 1)) ] && echo ok || echo "$half_open connections")"
mrc_check "SYN flood: SYNs beyond it answered with RETRY, none over the backlog" ok \
	"$([ $((r3 - r0)) -gt 0 ] && [ "$d3" -eq "$d0" ] && echo ok ||
		echo "$((r3 - r0)) RETRYs, $((d3 - d0)) over the backlog")"
mrc_check "SYN flood: the listener sent fewer bytes than the flood brought" ok \
	"$([ $((tx3 - tx0)) -lt $((rx3 - rx0)) ] && echo ok || echo "$((tx3 - tx0)) >= $((rx3 - rx0))")"
# SYNs that carry a token the listener did not make are dropped, counted.
tok0=$(stat0 "$b" drop_bad_token)
ip netns exec "$c" $ATTACK spoof-syn 10.77.0.2 "$port" 9400 --src 10.79.0.0/16 \
	--count 20 --token >/dev/null 2>&1
bad_token() { mrc_stat_cmp "$b" drop_bad_token -ge $((tok0 + 20)); }
mrc_wait_for 10 bad_token
mrc_check "SYN flood: SYNs with forged tokens dropped" 20 $(($(stat0 "$b" drop_bad_token) - tok0))
nl=$(ip netns exec "$b" "$MRC_STATUS" --json stats |
	$MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(d["tx_retry"], d["drops"]["bad_token"])' 2>&1)
mrc_check "SYN flood: mrc-status stats shows the RETRYs and the forged tokens" \
	"$(stat0 "$b" tx_retry) $(stat0 "$b" drop_bad_token)" "$nl"
kill $fl 2>/dev/null
wait $fl 2>/dev/null

# The half-open connections of the forged SYNs fail once their handshake
# times out, about 51 s after the SYNs; each held back six SYN_ACKs at least
# (three of the size of the SYN fit in its budget, fewer of a larger size).
withheld() { mrc_stat_cmp "$b" tx_amp_limited -ge $((${amp0:-0} + 6 * syns)); }
mrc_wait_for 90 withheld
mrc_check "amplification: the SYN_ACKs held back are counted" ok \
	"$(withheld && echo ok || echo "tx_amp_limited $(mrc_stat "$b" tx_amp_limited) from ${amp0:-none}")"
kill $amp 2>/dev/null
wait $amp 2>/dev/null
# Nothing of the forged SYNs outlives the test: their half-open connections
# end when their handshakes time out, about 51 s after them, and with them
# the sockets that hold the module.
mrc_wait_for 90 mrc_stat_cmp "$b" conns -eq 0
mrc_check "the half-open connections of forged SYNs ended" 0 "$(stat0 "$b" conns)"

mrc_cleanup
rm -rf "$tmp"
mrc_exit
