#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Reliable transfers between two namespaces with mrc-perf: messages of
# 1 B to 1 MiB (seeded sizes and contents, each message checked by length
# and content at the receiver), a digest (XXH3-128) of everything sent
# equal to everything received, over IPv4 and IPv6; the same through netem loss,
# reordering, duplication and corruption; ECN marks echoed instead of
# losses; many concurrent connections;
# close with data in flight, then rmmod.

. "$(dirname "$0")/mrc_lib.sh"
mrc_perf_setup
# Jumbo frames, as in the fabrics MRC is for; mrc_sockapi.sh covers 1500.
mrc_veth_pair "$A" "$B" 9000

# verify NAME: compares the server's per-connection results with the
# client's; prints "conns=N bytes=B" on success.
verify() {
	$MRC_PY - "$tmp/srv.json" "$tmp/cli.json" <<'PY'
import json, sys
srv = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cli = json.loads(open(sys.argv[2]).read())
conns = cli.get("conns") or [cli]
bad = []
by = {s.get("conn"): s for s in srv}
for c in conns:
    s = by.get(c.get("conn"))
    if s is None:
        bad.append(f"conn {c.get('conn')}: no server result"); continue
    for k in ("msgs", "bytes", "digest"):
        if s[k] != c[k]:
            bad.append(f"conn {c['conn']}: {k} {s[k]} != {c[k]}")
    if not (s["ok"] and c["ok"]):
        bad.append(f"conn {c['conn']}: server {s.get('error')} client {c.get('error')}")
if len(srv) != len(conns):
    bad.append(f"{len(srv)} server results for {len(conns)} connections")
if bad:
    print("; ".join(bad[:5])); sys.exit(1)
print(f"conns={len(conns)} bytes={sum(c['bytes'] for c in conns)} "
      f"msgs={sum(c['msgs'] for c in conns)}")
PY
}

# diag: counters of both namespaces, on failure.
diag() {
	echo "# server namespace: $(ip netns exec "$A" cat /proc/net/mrc | grep -v ' 0$' | tr '\n' ' ')"
	echo "# client namespace: $(ip netns exec "$B" cat /proc/net/mrc | grep -v ' 0$' | tr '\n' ' ')"
}

# transfer NAME ADDR BYTES PARALLEL [CLIENT OPTIONS...]; PROTO (default
# mrc) chooses the transport.
transfer() {
	local name=$1 addr=$2 bytes=$3 par=$4 spid out
	shift 4
	ip netns exec "$A" "$PERF" server --proto "${PROTO:-mrc}" --addr "$addr" --port 9000 \
		--conns "$par" --timeout 300 --json >"$tmp/srv.json" 2>"$tmp/srv.err" &
	spid=$!
	ip netns exec "$B" "$PERF" client --proto "${PROTO:-mrc}" --addr "$addr" --port 9000 \
		--bytes "$bytes" --parallel "$par" --retry-ms 20000 --timeout 300 --json "$@" \
		>"$tmp/cli.json" 2>"$tmp/cli.err"
	local crc=$?
	wait $spid
	local src=$?
	if [ $crc = 0 ] && [ $src = 0 ] && out=$(verify); then
		mrc_ok "$name: $out"
	else
		mrc_fail "$name: client rc $crc, server rc $src: $(verify) $(tail -c 300 "$tmp/cli.err" "$tmp/srv.err")"
		diag
	fi
}

# gso_counts: "GSO packets sent by the client since gso_mark, and
# datagrams it sent less datagrams the server received" (0 on a clean
# link: each GSO packet arrived as all of its datagrams).
gso_mark() {
	gso0=$(mrc_stat "$B" tx_gso) tx0=$(mrc_stat "$B" tx_packets) rx0=$(mrc_stat "$A" rx_packets)
	gro0=$(mrc_stat "$A" rx_gro)
	rxall0=$(( $(mrc_stat "$A" rx_packets) + $(mrc_stat "$B" rx_packets) ))
	st0=$(( $(mrc_stat "$A" rx_stamped) + $(mrc_stat "$B" rx_stamped) ))
	stw0=$(( $(mrc_stat "$A" rx_stack_wait_us) + $(mrc_stat "$B" rx_stack_wait_us) ))
	bl0=$(( $(mrc_stat "$A" rx_backlog) + $(mrc_stat "$B" rx_backlog) ))
	bldrop0=$(( $(mrc_stat "$A" drop_sock_backlog) + $(mrc_stat "$B" drop_sock_backlog) ))
}
# backlog_counts: "datagrams that waited in the backlog of a socket its
# reader or writer held, and those that did not fit, since gso_mark", both
# ends.
backlog_counts() {
	echo "$(( $(mrc_stat "$A" rx_backlog) + $(mrc_stat "$B" rx_backlog) - bl0 ))" \
		"$(( $(mrc_stat "$A" drop_sock_backlog) + $(mrc_stat "$B" drop_sock_backlog) - bldrop0 ))"
}
gso_counts() {
	echo "$(( $(mrc_stat "$B" tx_gso) - gso0 )) $(( ($(mrc_stat "$B" tx_packets) - tx0) - \
		($(mrc_stat "$A" rx_packets) - rx0) ))"
}
# stamp_counts: "datagrams received, those of them stamped by the receive
# stack, and the microseconds these waited there", both ends, since
# gso_mark.
stamp_counts() {
	echo "$(( $(mrc_stat "$A" rx_packets) + $(mrc_stat "$B" rx_packets) - rxall0 ))" \
		"$(( $(mrc_stat "$A" rx_stamped) + $(mrc_stat "$B" rx_stamped) - st0 ))" \
		"$(( $(mrc_stat "$A" rx_stack_wait_us) + $(mrc_stat "$B" rx_stack_wait_us) - stw0 ))"
}
# gro_count: GSO packets the server took whole since gso_mark.
gro_count() {
	echo $(( $(mrc_stat "$A" rx_gro) - gro0 ))
}

# The same 64 MiB over MRC and over TCP on this veth: a throughput figure
# for comparison (this is a debug kernel under emulation), not a check.
start=$SECONDS
gso_mark
transfer "IPv4 1 B..1 MiB messages, 64 MiB" 10.77.0.1 $((64 << 20)) 1
read -r gso lost <<<"$(gso_counts)"
gro=$(gro_count)
read -r backlog backlog_drops <<<"$(backlog_counts)"
read -r rxall stamped stack_us <<<"$(stamp_counts)"
mrc_check "IPv4: data sent as UDP GSO packets, every datagram received" "some 0" \
	"$([ "$gso" -gt 0 ] && echo some || echo "$gso") $lost"
# Softirq does not wait for a reader or writer that holds its socket: the
# packets wait in the socket's backlog, which the task takes as it acts or
# releases the socket, and which holds a window's worth.
mrc_check "IPv4: packets for a held socket waited in its backlog, none dropped" "some 0" \
	"$([ "$backlog" -gt 0 ] && echo some || echo "$backlog") $backlog_drops"
echo "# datagrams that waited in a socket's backlog: $backlog"
# The veth hands the GSO packets on whole, and MRC takes them so: without
# an encap_rcv, UDP does not split them first (udp_unexpected_gso()).
mrc_check "IPv4: the server took GSO packets whole" some \
	"$([ "$gro" -gt 0 ] && echo some || echo "$gro")"
echo "# GSO packets sent $gso, taken whole $gro"
# Round trips are timed from a packet's arrival at the host: the receive
# stack stamps it (at netif_rx() on a veth), and MRC reads the stamp. A
# stamp older than 20 ms is not believed, so under emulation a few may
# go unused.
echo "# datagrams received $rxall, timed from the stack's stamp $stamped," \
	"waiting $((stack_us / (stamped > 0 ? stamped : 1))) us there on average"
mrc_check "IPv4: most datagrams timed from the receive stack's stamp" ok \
	"$([ $((2 * stamped)) -ge "$rxall" ] && [ "$rxall" -gt 0 ] && echo ok || echo "$stamped of $rxall")"
mrc_mbps=$(mrc_json_field "$tmp/cli.json" 'round(d["goodput_mbps"])')
echo "# IPv4 64 MiB took $((SECONDS - start)) s"
PROTO=tcp transfer "TCP, the same 64 MiB" 10.77.0.1 $((64 << 20)) 1
tcp_mbps=$(mrc_json_field "$tmp/cli.json" 'round(d["goodput_mbps"])')
echo "# one veth, MTU 9000: MRC $mrc_mbps Mbit/s, TCP $tcp_mbps Mbit/s"
start=$SECONDS
gso_mark
transfer "IPv6 1 B..1 MiB messages, 36 MiB" fd77::1 $((36 << 20)) 1
echo "# IPv6 36 MiB took $((SECONDS - start)) s"
read -r gso lost <<<"$(gso_counts)"
gro=$(gro_count)
mrc_check "IPv6: data sent as UDP GSO packets, every datagram received" "some 0" \
	"$([ "$gso" -gt 0 ] && echo some || echo "$gso") $lost"
mrc_check "IPv6: the server took GSO packets whole" some \
	"$([ "$gro" -gt 0 ] && echo some || echo "$gro")"
echo 0 >/sys/module/mrc/parameters/gso
gso_mark
transfer "IPv4 without GSO, 8 MiB" 10.77.0.1 $((8 << 20)) 1
mrc_check "gso=0: no GSO packet sent, every datagram received" "0 0" "$(gso_counts)"
mrc_check "gso=0 and no GRO: every datagram taken alone" 0 "$(gro_count)"
# GRO at the receiving end of the veth (which aggregates only what comes
# from an end without TSO) makes trains of the datagrams that UDP GRO
# hands MRC's socket whole.
ip netns exec "$A" ethtool -K veth-a gro on >/dev/null
ip netns exec "$B" ethtool -K veth-b tso off >/dev/null
gso_mark
transfer "IPv4 without GSO, GRO at the receiver, 8 MiB" 10.77.0.1 $((8 << 20)) 1
gro=$(gro_count)
mrc_check "GRO at the receiver: trains taken whole" some \
	"$([ "$gro" -gt 0 ] && echo some || echo "$gro")"
echo "# GRO trains taken whole: $gro"
ip netns exec "$A" ethtool -K veth-a gro off >/dev/null
ip netns exec "$B" ethtool -K veth-b tso on >/dev/null
echo 1 >/sys/module/mrc/parameters/gso

# Lossy link: both directions.
retx0=$(mrc_stat "$B" tx_retransmits)
for ns_dev in "$A veth-a" "$B veth-b"; do
	set -- $ns_dev
	tc -n "$1" qdisc add dev "$2" root netem delay 1ms loss 5% reorder 10% \
		duplicate 1% corrupt 0.5%
done
# A corrupted datagram is dropped by whichever layer's check covers the
# flipped bit: netem flips one in the linear part of a packet, which for
# MRC's data (payload in page fragments) is mostly the IP and UDP headers.
# IP header errors (InHdrErrors), UDP checksum errors (InCsumErrors) and
# MRC's CRC32C drops, in both directions (data, and acknowledgements).
corrupt_drops() {
	local ns n=0
	for ns in "$A" "$B"; do
		n=$((n + $(ip netns exec "$ns" awk '/^Ip: [0-9]/ { n += $5 }
			/^Udp: [0-9]/ { n += $8 } END { print n }' /proc/net/snmp) +
			$(mrc_stat "$ns" drop_bad_checksum)))
	done
	echo "$n"
}
csum0=$(corrupt_drops)
start=$SECONDS
transfer "IPv4 through 5% loss, 10% reorder, 1% dup, 0.5% corrupt, 8 MiB" 10.77.0.1 $((8 << 20)) 1
echo "# lossy 8 MiB took $((SECONDS - start)) s"
retx=$(( $(mrc_stat "$B" tx_retransmits) - retx0 ))
mrc_check "retransmissions counted on the lossy link" 1 $((retx > 0))
csum=$(($(corrupt_drops) - csum0))
mrc_check "corrupted datagrams dropped" 1 $((csum > 0))
echo "# retransmissions $retx, corrupted datagrams dropped $csum (IP header, UDP checksum, MRC CRC32C)"
for ns_dev in "$A veth-a" "$B veth-b"; do
	set -- $ns_dev
	tc -n "$1" qdisc del dev "$2" root
done

# ECN: every MRC packet leaves ECT(0), so netem's "ecn" loss marks it CE
# instead of dropping it: every MRC datagram B sends arrives in A (A's
# rx_packets grows by B's tx_packets), and the receiver counts the marks
# and echoes them. The same loss rate without "ecn" loses datagrams and
# costs retransmissions, the control that shows the marks replaced
# losses. (netem's own drop count would also hold B's ARP and neighbour
# discovery packets, which carry no ECN.) Retransmissions with marks are
# printed, not checked: none is needed, but a stall of the debug VM can
# still set off a retransmission timeout, whose packets are sent again (9
# once, against 34 in the control). IPv6 carries ECN in the traffic class,
# IPv4 in the TOS byte.
ecn_run() { # NAME ADDR NETEM...
	local name=$1 addr=$2 ce0 echo0 retx0
	shift 2
	tc -n "$B" qdisc add dev veth-b root netem "$@"
	ce0=$(mrc_stat "$A" ecn_ce_packets)
	echo0=$(mrc_stat "$B" ecn_echoes)
	retx0=$(mrc_stat "$B" tx_retransmits)
	tx0=$(mrc_stat "$B" tx_packets)
	rx0=$(mrc_stat "$A" rx_packets)
	transfer "$name" "$addr" $((8 << 20)) 1 --msg-size 65536
	# The last packets of the close may still be on their way.
	mrc_wait_for 10 all_arrived
	ecn_lost=$(datagrams_lost)
	ecn_ce=$(( $(mrc_stat "$A" ecn_ce_packets) - ce0 ))
	ecn_echo=$(( $(mrc_stat "$B" ecn_echoes) - echo0 ))
	ecn_retx=$(( $(mrc_stat "$B" tx_retransmits) - retx0 ))
	tc -n "$B" qdisc del dev veth-b root
	echo "# $name: $ecn_ce CE-marked DATA packets received, $ecn_echo echoes, $ecn_lost of B's datagrams lost, $ecn_retx retransmissions"
}
# MRC datagrams sent by B since ecn_run began that A has not received.
datagrams_lost() {
	echo $(( ($(mrc_stat "$B" tx_packets) - tx0) - ($(mrc_stat "$A" rx_packets) - rx0) ))
}
all_arrived() { [ "$(datagrams_lost)" -eq 0 ]; }
for addr in 10.77.0.1 fd77::1; do
	ecn_run "$addr: 3% ECN marks, 8 MiB" "$addr" loss 3% ecn
	mrc_check "$addr: marks received and echoed, every datagram arrived" "1 1 0" \
		"$((ecn_ce > 0)) $((ecn_echo > 0)) $ecn_lost"
done
ecn_run "10.77.0.1: 3% loss without ECN, 8 MiB" 10.77.0.1 loss 3%
mrc_check "3% loss without ECN: no marks, datagrams lost, retransmissions" "0 1 1" \
	"$ecn_ce $((ecn_lost > 0)) $((ecn_retx > 0))"

start=$SECONDS
transfer "16 concurrent connections, 256 KiB each" 10.77.0.1 262144 16 --msg-size 4096
echo "# 16 connections took $((SECONDS - start)) s"
# 200 connections at once. Their paths run over the same five network
# paths (the handshake's and four entropy values), which the namespace
# tracks once for all of them: sampled while the connections run, the
# client's peer path count stays 5 however many connections are open.
ip netns exec "$B" sh -c 'while :; do awk '\''$1 == "conns" || $1 == "peer_paths" { printf "%s ", $2 } END { print "" }'\'' /proc/net/mrc; sleep 0.2; done' >"$tmp/peers" &
sampler=$!
start=$SECONDS
transfer "200 concurrent connections, 64 KiB each" 10.77.0.1 65536 200 --msg-size 4096
echo "# 200 connections took $((SECONDS - start)) s"
kill $sampler
wait $sampler 2>/dev/null
# Early connections may finish before the last ones open: at least 100
# must be open at once.
out=$(awk '$1 >= 50 { n++; if ($2 != 5) bad = bad " " $2 "@" $1 } $1 > max { max = $1 }
	END { s = "none"; if (n > 0) s = "some"; if (bad != "") s = s " wrong:" bad
		a = max; if (max >= 100) a = "100+"
		printf "samples=%s at-once=%s", s, a }' "$tmp/peers")
echo "# peer path samples: $out (most connections open at once: $(awk '$1 > m { m = $1 } END { print m }' "$tmp/peers"))"
mrc_check "200 connections share 5 peer paths" "samples=some at-once=100+" "$out"

# A peer killed or a link gone mid-transfer: mrc_fault.sh. The running
# connections as mrc-status shows them, and their events: mrc_multipath.sh.

# Close with data in flight, then unload.
transfer "4 connections closing with data in flight, 16 MiB each" 10.77.0.1 $((16 << 20)) 4
mrc_wait_for 20 mrc_stat_cmp "$B" conns -eq 0
mrc_check "client connections gone" 0 $?
mrc_wait_for 20 mrc_stat_cmp "$A" conns -eq 0
mrc_check "server connections gone" 0 $?
rm -rf "$tmp"
mrc_cleanup
mrc_wait_for 20 rmmod mrc
mrc_check "rmmod once every socket is closed" 0 $?
mrc_exit
