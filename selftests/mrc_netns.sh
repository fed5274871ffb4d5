#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Per-namespace state: every namespace gets its own MRC UDP port (IPv4 and
# IPv6) and /proc/net/mrc; deleting the namespace closes them, and the
# module unloads cleanly while namespaces exist.

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_unload
mrc_load

port=$MRC_PORT_DEFAULT
# Live UDP sockets of every namespace: the UDP slabs' object counts, exact
# once the per-CPU slabs are flushed back (shrink).
udp_socks() {
	echo 1 >/sys/kernel/slab/UDP/shrink
	echo 1 >/sys/kernel/slab/UDPv6/shrink
	awk '$1 ~ /^UDP(v6)?$/ { n += $2 } END { print n + 0 }' /proc/slabinfo
}
N=8

mrc_check "port open in init namespace" 2 "$(ss -Hlun "sport = :$port" | wc -l)"

base=$(udp_socks)
declare -a names
for i in $(seq 1 $N); do
	mrc_netns_add ns || mrc_fail "ip netns add"
	names+=("$ns")
done
for ns in "${names[@]}"; do
	n=$(ip netns exec "$ns" ss -Hlun "sport = :$port" | wc -l)
	[ "$n" = 2 ] || mrc_fail "$ns: expected 2 MRC UDP sockets, found $n"
	ip netns exec "$ns" test -r /proc/net/mrc || mrc_fail "$ns: no /proc/net/mrc"
done
[ "$mrc_nr_fail" -eq 0 ] && mrc_ok "IPv4 and IPv6 port and /proc/net/mrc in $N new namespaces"
mrc_check "UDP slab objects grew by 2 per namespace" $((base + 2 * N)) "$(udp_socks)"

# Counters are per namespace: traffic in one does not show in another.
a=${names[0]}
b=${names[1]}
ip netns exec "$a" $MRC_UTIL garbage 127.0.0.1 "$port" 5 --classes short >/dev/null
mrc_check "counter in the namespace that received" 5 "$(mrc_stat "$a" drop_short)"
mrc_check "counter in another namespace" 0 "$(mrc_stat "$b" drop_short)"

mrc_cleanup
# Namespace teardown is asynchronous and UDP sockets are RCU-freed.
sockets_back_to_base() { [ "$(udp_socks)" -eq "$base" ]; }
if mrc_wait_for 20 sockets_back_to_base; then
	mrc_ok "sockets freed when the namespaces were deleted"
else
	mrc_fail "sockets freed when the namespaces were deleted: $(udp_socks) != $base"
fi

# Unload with live namespaces: the pernet exit closes their ports.
mrc_netns_add ns
mrc_run "rmmod with a live namespace" rmmod mrc
mrc_check "port closed in the namespace after unload" 0 "$(ip netns exec "$ns" ss -Hlun "sport = :$port" | wc -l)"
mrc_check "no /proc/net/mrc after unload" 1 "$(ip netns exec "$ns" test -e /proc/net/mrc; echo $?)"

mrc_exit
