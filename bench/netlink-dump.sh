#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Cost of listing connections over netlink: mrc-status --json conns with
# many idle connections, and mrc-status --json paths SESSION of one
# connection with many paths. Not part of make check.
#
#   bench/netlink-dump.sh [CONNS [PATHS [BIG_PATHS]]]    (default 1000 8 256)
#
# From the host it boots the debug test kernel in the VM (scripts/vm.sh) and
# runs itself there with --guest; it needs make modules and make tools.
#
# In the VM: namespaces a (server) and b (client) joined by a veth pair, one
# plane, ev_per_plane PATHS - 1 on both sides, so that each connection has
# PATHS paths (the handshake's path and PATHS - 1 entropy values); b opens
# CONNS idle connections to a (selftests/mrc_util.py hold-client/server).
# Then, in b: the wall time of several runs of mrc-status --json conns
# (and of mrc-status --json stats, the cost of starting it), a check that
# the dump holds exactly CONNS connections and CONNS * PATHS paths, and the
# datagrams and messages of the dump (bench/nl_count.py). Then one
# connection between c and d over 5 planes (5 address pairs on one veth
# pair, 5 endpoints on each side) with BIG_PATHS paths, listed with
# mrc-status --json paths SESSION. Prints the figures; exits non-zero if a
# count is not the expected one.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" != --guest ]; then
	exec "$top/scripts/vm.sh" "$top/bench/netlink-dump.sh" --guest "$@"
fi
shift
nconn=${1:-1000}
npath=${2:-8}
nbig=${3:-256}
reps=${BENCH_REPS:-5}

. "$top/selftests/mrc_lib.sh"
mrc_require_root
mrc_load || exit 1
tmp=$(mktemp -d)
status=$MRC_STATUS
count="$MRC_PY $top/bench/nl_count.py"
failed=0
say() { printf '# %s\n' "$*"; }
fig() { printf 'RESULT %s\n' "$*"; }
bad() { printf 'FAIL %s\n' "$*"; failed=1; }

# wall NS CMD...: seconds one run of CMD takes in namespace NS (output
# dropped), measured inside the namespace.
wall() {
	local ns=$1
	shift
	ip netns exec "$ns" bash -c 's=$(date +%s%N); "$@" >/dev/null; e=$?; t=$(date +%s%N);
		[ $e = 0 ] || echo "exit $e" >&2; echo $(( (t - s) / 1000000 ))' - "$@" |
		awk '{ printf "%.3f", $1 / 1000 }'
}

# times NS CMD...: REPS wall times of CMD, then min/median/max.
times() {
	local ns=$1 i t=()
	shift
	for i in $(seq "$reps"); do t+=("$(wall "$ns" "$@")"); done
	printf '%s\n' "${t[@]}" | sort -n | awk -v all="${t[*]}" '{ v[NR] = $1 }
		END { printf "min %s median %s max %s s (runs: %s)", v[1], v[int((NR + 1) / 2)], v[NR], all }'
}

# summary FILE: connections, paths and distinct path counts of a JSON dump.
summary() {
	$MRC_PY -c 'import json, sys
c = json.load(open(sys.argv[1]))["connections"]
n = [len(x["paths"]) for x in c]
st = sorted({p["state"] for x in c for p in x["paths"]})
print(len(c), sum(n), "per-conn=" + ",".join(map(str, sorted(set(n)))) if n else "-", "path-states=" + "/".join(st))' "$1"
}

# --- CONNS idle connections of PATHS paths ------------------------------
mrc_netns_add a
mrc_netns_add b
mrc_veth_pair "$a" "$b"
for ns in "$a" "$b"; do
	ip netns exec "$ns" "$status" param set ev_per_plane $((npath - 1)) || bad "param set"
done
say "$nconn connections with $npath paths each (ev_per_plane $((npath - 1)) + handshake path), one plane"
ip netns exec "$a" $MRC_UTIL hold-server 10.77.0.1 9000 "$nconn" --timeout 3600 >"$tmp/server" 2>&1 &
spid=$!
mrc_wait_for 120 grep -q listening "$tmp/server"
start=$SECONDS
ip netns exec "$b" $MRC_UTIL hold-client 10.77.0.1 9000 "$nconn" --progress 100 >"$tmp/client" 2>&1 &
cpid=$!
until grep -q "^up [0-9]* of" "$tmp/client" || ! kill -0 "$cpid" 2>/dev/null; do
	sleep 5
	[ $((SECONDS - start)) -ge 900 ] && break
done
sed 's/^/# client: /' "$tmp/client"
up=$(mrc_stat "$b" conns)
fig "connections up: $up of $nconn in $((SECONDS - start)) s (b); $(mrc_stat "$a" conns) in a"
[ "$up" = "$nconn" ] || bad "only $up of $nconn connections came up"
free -m | sed -n 2p | awk '{ print "# memory used " $3 " MiB of " $2 }'
for ns in "$a" "$b"; do
	ip netns exec "$ns" cat /proc/net/mrc | awk -v ns="$ns" '$2 != 0 { printf "%s=%s ", $1, $2 }
		END { print "" }' | sed "s/^/# \/proc\/net\/mrc in $ns: /"
done

ip netns exec "$b" "$status" --json conns >"$tmp/b.json"
read -r nc np rest <<<"$(summary "$tmp/b.json")"
fig "dump in b: $nc connections, $np paths ($rest)"
[ "$nc" = "$nconn" ] || bad "dump has $nc connections, not $nconn"
[ "$np" = $((nconn * npath)) ] || bad "dump has $np paths, not $((nconn * npath))"
fig "dump size: $(stat -c %s "$tmp/b.json") bytes of JSON"
fig "netlink (b): $(ip netns exec "$b" $count dump)"
fig "mrc-status --json stats (b): $(times "$b" "$status" --json stats)"
fig "mrc-status --json conns (b): $(times "$b" "$status" --json conns)"
fig "mrc-status conns, table (b): $(times "$b" "$status" conns)"
fig "mrc-status --json conns (a): $(times "$a" "$status" --json conns)"

# The server may still wait in accept() for connections that never came.
kill "$cpid" "$spid" 2>/dev/null
wait "$cpid" "$spid"
mrc_wait_for 120 mrc_stat_cmp "$b" conns -eq 0
say "after close: $(mrc_stat "$a" conns) connections in a, $(mrc_stat "$b" conns) in b"

# --- one connection of BIG_PATHS paths ----------------------------------
planes=5
ev=$(((nbig - 1 + planes - 1) / planes))
mrc_netns_add c
mrc_netns_add d
ip link add veth-c netns "$c" type veth peer name veth-d netns "$d"
ip -n "$c" link set veth-c up
ip -n "$d" link set veth-d up
for p in $(seq "$planes"); do
	ip -n "$c" addr add "10.90.$p.1/24" dev veth-c
	ip -n "$d" addr add "10.90.$p.2/24" dev veth-d
	ip netns exec "$c" "$status" endpoint add "10.90.$p.1"
	ip netns exec "$d" "$status" endpoint add "10.90.$p.2"
done
for ns in "$c" "$d"; do
	ip netns exec "$ns" "$status" param set ev_per_plane "$ev" || bad "param set"
done
want=$((planes * ev + 1))
say "one connection over $planes planes with ev_per_plane $ev: $want paths expected"
ip netns exec "$c" $MRC_UTIL hold-server 10.90.1.1 9001 1 --timeout 3600 >"$tmp/server2" 2>&1 &
spid=$!
mrc_wait_for 120 grep -q listening "$tmp/server2"
ip netns exec "$d" $MRC_UTIL hold-client 10.90.1.1 9001 1 >"$tmp/client2" 2>&1 &
cpid=$!
mrc_wait_for 300 grep -q "^up 1 of 1" "$tmp/client2"
sleep 2
ip netns exec "$d" "$status" --json conns >"$tmp/d.json"
read -r nc np rest <<<"$(summary "$tmp/d.json")"
fig "dump in d: $nc connection, $np paths ($rest)"
[ "$np" = "$want" ] || bad "the connection has $np paths, not $want"
sid=$($MRC_PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["connections"][0]["session_id"])' "$tmp/d.json")
fig "netlink conn-get do (d): $(ip netns exec "$d" $count get "$sid")"
fig "netlink conn-get dump (d): $(ip netns exec "$d" $count dump)"
ip netns exec "$d" "$status" --json paths "$sid" >"$tmp/paths.json" 2>"$tmp/paths.err"
rc=$?
read -r nc np rest <<<"$(summary "$tmp/paths.json" 2>/dev/null)"
fig "mrc-status --json paths $sid: exit $rc, $nc connection, $np paths $(cat "$tmp/paths.err")"
[ "$rc" = 0 ] && [ "$np" = "$want" ] || bad "mrc-status paths SESSION: exit $rc, ${np:-no} paths"
fig "mrc-status --json paths SESSION (d): $(times "$d" "$status" --json paths "$sid")"
fig "mrc-status paths SESSION, table (d): $(times "$d" "$status" paths "$sid")"
kill "$cpid" "$spid" 2>/dev/null
wait "$cpid" "$spid"

rm -rf "$tmp"
mrc_cleanup
mrc_wait_for 60 rmmod mrc
dmesg | grep -E 'BUG:|WARNING:|KASAN|Oops|Call Trace' | head -n 5 | sed 's/^/# dmesg: /'
[ "$failed" = 0 ] && echo "# netlink-dump: all counts as expected" || echo "# netlink-dump: FAILED"
exit "$failed"
