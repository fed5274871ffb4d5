#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Malformed datagrams at the MRC port, over IPv4 and IPv6 through a veth
# pair: each is counted under its exact reason and dropped; well-formed
# packets for an unknown session are answered with an RST, as fast as the
# rate limit allows; DATA without a UDP checksum is dropped.
#
#   ns a                         ns b
#   veth-a 10.77.0.1/24  <--->   veth-b 10.77.0.2/24
#          fd77::1/64                   fd77::2/64

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_unload
mrc_load

port=$MRC_PORT_DEFAULT
mrc_netns_add a
mrc_netns_add b
mrc_veth_pair "$a" "$b"

classes="short bad_magic bad_version length_mismatch bad_checksum unknown_type bad_flags bad_body"
count=200
total=0
for dst in 10.77.0.2 fd77::2; do
	out=$(ip netns exec "$a" $MRC_UTIL garbage "$dst" "$port" "$count")
	set -- $out
	total=$((total + $2))
done
# Well-formed packets for a session nobody has are dropped too.
nclasses=$(($(echo $classes | wc -w) + 1))
mrc_check "datagrams sent" $((2 * count * nclasses)) "$total"

mrc_wait_for 5 mrc_stat_cmp "$b" rx_packets -eq "$total"
mrc_check "rx_packets in b" "$total" "$(mrc_stat "$b" rx_packets)"
for c in $classes no_session; do
	mrc_check "drop_$c" $((2 * count)) "$(mrc_stat "$b" "drop_$c")"
done
mrc_check "drop_no_memory" 0 "$(mrc_stat "$b" drop_no_memory)"
rst=$(mrc_stat "$b" tx_rst)
mrc_check "each well-formed packet answered with an RST or counted as rate-limited" \
	$((2 * count)) $((rst + $(mrc_stat "$b" tx_rst_limited)))
mrc_check "no transmit errors" 0 "$(mrc_stat "$b" tx_errors)"
mrc_check "nothing counted in the sender's namespace" 0 "$(mrc_stat "$a" rx_packets)"

# The RST itself, checked field by field, over both address families,
# once the rate limit's bucket has refilled.
mrc_sleep 0.2
for dst in 10.77.0.2 fd77::2; do
	mrc_check "RST for an unknown session from $dst" "rst ok" "$(ip netns exec "$a" $MRC_UTIL rst "$dst" "$port")"
done
mrc_check "tx_rst after the two probes" $((rst + 2)) "$(mrc_stat "$b" tx_rst)"

# DATA without a UDP checksum (a zero one, which IPv4 allows): MRC's own
# checksum leaves a DATA payload to the UDP checksum, so such a packet is
# dropped as one with a bad UDP checksum, before any session lookup.
udp0=$(mrc_stat "$b" drop_udp_checksum)
nos0=$(mrc_stat "$b" drop_no_session)
ip netns exec "$a" $MRC_UTIL garbage 10.77.0.2 "$port" "$count" --classes no_session \
	--no-udp-checksum >/dev/null
mrc_wait_for 5 mrc_stat_cmp "$b" drop_udp_checksum -ge $((udp0 + count))
mrc_check "DATA without a UDP checksum dropped as such" "$count" \
	$(($(mrc_stat "$b" drop_udp_checksum) - udp0))
mrc_check "and not looked up" "$nos0" "$(mrc_stat "$b" drop_no_session)"

mrc_cleanup
mrc_run "rmmod after the flood" rmmod mrc
mrc_exit
