#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Generic netlink family "mrc": stats-get through mrc-status and through the
# kernel tree's own ynl client equal /proc/net/mrc exactly, per namespace;
# param-get/param-set and the endpoint table per namespace with policy and
# extack errors; changes
# need CAP_NET_ADMIN; a missing module is reported as such.
#
#   ns a  veth-a 10.77.0.1  <--->  veth-b 10.77.0.2  ns b

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
[ -x "$MRC_STATUS" ] || { echo "SKIP: $MRC_STATUS not built (make tools)"; exit $KSFT_SKIP; }
mrc_unload
mrc_load

port=$MRC_PORT_DEFAULT
mrc_netns_add a
mrc_netns_add b
mrc_veth_pair "$a" "$b"
ip netns exec "$a" $MRC_UTIL garbage 10.77.0.2 "$port" 7 >/dev/null
ip netns exec "$a" $MRC_UTIL rst 10.77.0.2 "$port" >/dev/null

# Every counter that both show must be equal; the drop reasons too.
compare='
import json, sys
proc = dict(l.split() for l in open("/proc/net/mrc"))
js = json.load(sys.stdin)
pairs = [(k, js[k], proc[k]) for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")]
pairs += [("drop_" + k, v, proc["drop_" + k]) for k, v in js["drops"].items()]
bad = [f"{k}: netlink {a} != proc {b}" for k, a, b in pairs if int(a) != int(b)]
rx = js["rx_packets"]
print("; ".join(bad) if bad else f"equal {len(pairs)} rx_packets={rx}")
'
out=$(ip netns exec "$b" "$MRC_STATUS" --json stats | ip netns exec "$b" $MRC_PY -c "$compare")
mrc_check "mrc-status stats equals /proc/net/mrc in b" "equal 16 rx_packets=64" "$out"
out=$(ip netns exec "$a" "$MRC_STATUS" --json stats | ip netns exec "$a" $MRC_PY -c "$compare")
mrc_check "mrc-status stats in a (sent nothing to a)" "equal 16 rx_packets=0" "$out"

# The kernel's own client reads the family from the spec.
ksrc=$(. "$MRC_DIR/scripts/env.sh" && kernel_src_dir)
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	out=$(ip netns exec "$b" $MRC_PY "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
		--schema "$ksrc/Documentation/netlink/genetlink-legacy.yaml" --do stats-get --output-json 2>&1)
	rx=$($MRC_PY -c 'import json,sys; print(json.loads(sys.stdin.read())["rx-packets"])' <<<"$out" 2>&1)
	mrc_check "ynl cli.py stats-get rx-packets" 64 "$rx"
else
	mrc_skip "kernel source with tools/net/ynl not found"
fi

# Changes need CAP_NET_ADMIN: an unprivileged user is refused before any handler runs.
out=$(ip netns exec "$b" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$MRC_STATUS" endpoint add 10.77.0.2 2>&1)
rc=$?
mrc_check "unprivileged endpoint add exit status" 1 "$rc"
case "$out" in
*CAP_NET_ADMIN*) mrc_ok "unprivileged endpoint add: permission error names CAP_NET_ADMIN" ;;
*) mrc_fail "unprivileged endpoint add: $out" ;;
esac
out=$(ip netns exec "$b" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$MRC_STATUS" --json stats 2>&1 | $MRC_PY -c 'import json,sys; print(json.load(sys.stdin)["rx_packets"])' 2>&1)
mrc_check "unprivileged users can read stats" 64 "$out"

# Tunables: defaults, a change in one namespace only, range and name
# checks with extended-ack messages, and CAP_NET_ADMIN for changes.
pjson() { ip netns exec "$1" "$MRC_STATUS" --json param show | $MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(f"{k}={d[k]}" for k in ("heartbeat_ms","miss_threshold","ev_per_plane","cc","user_timeout_ms")))'; }
defaults="heartbeat_ms=1 miss_threshold=3 ev_per_plane=4 cc=delay user_timeout_ms=30000"
mrc_check "default parameters" "$defaults" "$(pjson "$b")"
mrc_run "param set heartbeat_ms 5" ip netns exec "$b" "$MRC_STATUS" param set heartbeat_ms 5
mrc_run "param set cc reno" ip netns exec "$b" "$MRC_STATUS" param set cc reno
mrc_check "parameters changed in b" "heartbeat_ms=5 miss_threshold=3 ev_per_plane=4 cc=reno user_timeout_ms=30000" "$(pjson "$b")"
mrc_check "parameters of a untouched" "$defaults" "$(pjson "$a")"
out=$(ip netns exec "$b" "$MRC_STATUS" param set cc cubic 2>&1)
rc=$?
mrc_check "unknown cc refused" 1 "$rc"
case "$out" in
*"unknown congestion control"*) mrc_ok "unknown cc: extack message shown" ;;
*) mrc_fail "unknown cc: $out" ;;
esac
out=$(ip netns exec "$b" "$MRC_STATUS" param set miss_threshold 0 2>&1)
mrc_check "miss_threshold 0 refused by the policy" 1 "$?"
mrc_check "refused changes left everything as it was" "heartbeat_ms=5 miss_threshold=3 ev_per_plane=4 cc=reno user_timeout_ms=30000" "$(pjson "$b")"
out=$(ip netns exec "$b" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$MRC_STATUS" param set heartbeat_ms 9 2>&1)
case "$out" in
*CAP_NET_ADMIN*) mrc_ok "unprivileged param set refused with a CAP_NET_ADMIN message" ;;
*) mrc_fail "unprivileged param set: $out" ;;
esac
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	out=$(ip netns exec "$b" $MRC_PY "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
		--schema "$ksrc/Documentation/netlink/genetlink-legacy.yaml" --do param-get --output-json 2>&1 |
		$MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(d["heartbeat-ms"], d["cc"])' 2>&1)
	mrc_check "ynl cli.py param-get" "5 reno" "$out"
fi

# Endpoint table: add, show, delete, duplicates, capacity, per namespace.
eps() { ip netns exec "$1" "$MRC_STATUS" --json endpoint show | $MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s/%s/%d" % (e["addr"], e["ifindex"], e["backup"]) for e in d["endpoints"]) or "none")'; }
gen() { ip netns exec "$1" "$MRC_STATUS" --json endpoint show | $MRC_PY -c 'import json,sys; print(json.load(sys.stdin)["generation"])'; }
ifb=$(ip netns exec "$b" cat /sys/class/net/veth-b/ifindex)
mrc_run "endpoint add 10.77.0.2 dev veth-b" ip netns exec "$b" "$MRC_STATUS" endpoint add 10.77.0.2 --dev veth-b
# An empty table dumps no message, so the generation is first seen now.
g1=$(gen "$b")
mrc_run "endpoint add fd77::2 backup" ip netns exec "$b" "$MRC_STATUS" endpoint add fd77::2 --backup
mrc_check "endpoints in b" "10.77.0.2/$ifb/0 fd77::2/0/1" "$(eps "$b")"
mrc_check "generation bumped by the change" $((g1 + 1)) "$(gen "$b")"
mrc_check "endpoints in a" "none" "$(eps "$a")"
out=$(ip netns exec "$b" "$MRC_STATUS" endpoint add 10.77.0.2 2>&1)
mrc_check "duplicate endpoint refused" 1 "$?"
case "$out" in *"already exists"*) mrc_ok "duplicate: extack message shown" ;; *) mrc_fail "duplicate: $out" ;; esac
mrc_run "endpoint del fd77::2" ip netns exec "$b" "$MRC_STATUS" endpoint del fd77::2
mrc_check "endpoints after delete" "10.77.0.2/$ifb/0" "$(eps "$b")"
out=$(ip netns exec "$b" "$MRC_STATUS" endpoint del 10.99.0.1 2>&1)
mrc_check "delete of a missing endpoint refused" 1 "$?"
case "$out" in *"no such endpoint"*) mrc_ok "missing endpoint: extack message shown" ;; *) mrc_fail "missing endpoint: $out" ;; esac
for i in $(seq 1 15); do
	ip netns exec "$b" "$MRC_STATUS" endpoint add "10.88.0.$i" || mrc_fail "endpoint add 10.88.0.$i"
done
out=$(ip netns exec "$b" "$MRC_STATUS" endpoint add 10.88.0.16 2>&1)
mrc_check "17th endpoint refused" 1 "$?"
case "$out" in *"table full"*) mrc_ok "full table: extack message shown" ;; *) mrc_fail "full table: $out" ;; esac
mrc_check "endpoint dump lists all 16" 16 "$(eps "$b" | wc -w)"
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	out=$(ip netns exec "$b" $MRC_PY "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
		--schema "$ksrc/Documentation/netlink/genetlink-legacy.yaml" --dump endpoint-get --output-json 2>&1 |
		$MRC_PY -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>&1)
	mrc_check "ynl cli.py endpoint-get dump" 16 "$out"
fi

mrc_cleanup
mrc_run "rmmod" rmmod mrc
out=$("$MRC_STATUS" stats 2>&1)
rc=$?
mrc_check "mrc-status without the module: exit status" 2 "$rc"
case "$out" in
*"mrc module not loaded"*) mrc_ok "mrc-status without the module says so" ;;
*) mrc_fail "mrc-status without the module: $out" ;;
esac

mrc_exit
