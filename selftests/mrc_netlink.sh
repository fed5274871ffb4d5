#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Generic netlink family "mrc": stats-get through mrc-status and through the
# kernel tree's own ynl client equal /proc/net/mrc exactly, per namespace;
# param-get/param-set and the endpoint table per namespace with policy and
# extack errors; endpoint load of a configuration file, idempotent, with
# --replace, and endpoints by interface; changes need CAP_NET_ADMIN; conn-get dumps of live
# connections over two planes on both ends (counts, paths, growing byte
# counters), isolated from a namespace without connections; conn-get of
# unknown connections and malformed conn-get requests fail with errno and
# extack; a missing module is reported as such.
#
#   ns a  veth-a 10.77.0.1  <--->  veth-b 10.77.0.2  ns b
#   ns x  vx1    10.79.1.1  <--->  vy1    10.79.1.2  ns y   (live connections)
#         vx2    10.79.2.1  <--->  vy2    10.79.2.2         ns c (none)

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
pairs = [(k, js[k], proc[k]) for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes",
                                       "conns", "conns_opened", "conns_failed",
                                       "ecn_ce_packets", "ecn_echoes", "tx_retry", "tx_rst",
                                       "tx_rst_limited", "tx_amp_limited")]
pairs.append(("retrans_packets", js["retrans_packets"], proc["tx_retransmits"]))
pairs += [("drop_" + k, v, proc["drop_" + k]) for k, v in js["drops"].items()]
bad = [f"{k}: netlink {a} != proc {b}" for k, a, b in pairs if int(a) != int(b)]
rx = js["rx_packets"]
print("; ".join(bad) if bad else f"equal {len(pairs)} rx_packets={rx}")
'
out=$(ip netns exec "$b" "$MRC_STATUS" --json stats | ip netns exec "$b" $MRC_PY -c "$compare")
mrc_check "mrc-status stats equals /proc/net/mrc in b" "equal 32 rx_packets=64" "$out"
out=$(ip netns exec "$a" "$MRC_STATUS" --json stats | ip netns exec "$a" $MRC_PY -c "$compare")
mrc_check "mrc-status stats in a (sent nothing to a)" "equal 32 rx_packets=0" "$out"

# The kernel's own client reads the family from the spec.
ksrc=$(. "$MRC_DIR/scripts/env.sh" && kernel_src_dir)
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	out=$(ip netns exec "$b" $MRC_PY_SITE "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
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
pjson() { ip netns exec "$1" "$MRC_STATUS" --json param show | $MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(f"{k}={d[k]}" for k in ("heartbeat_ms","miss_threshold","ev_per_plane","cc","user_timeout_ms","data_per_idle_probe","syn_retry_pct")))'; }
defaults="heartbeat_ms=1 miss_threshold=3 ev_per_plane=4 cc=delay user_timeout_ms=30000 data_per_idle_probe=32 syn_retry_pct=50"
mrc_check "default parameters" "$defaults" "$(pjson "$b")"
mrc_run "param set heartbeat_ms 5" ip netns exec "$b" "$MRC_STATUS" param set heartbeat_ms 5
mrc_run "param set cc reno" ip netns exec "$b" "$MRC_STATUS" param set cc reno
mrc_run "param set data_per_idle_probe 0" ip netns exec "$b" "$MRC_STATUS" param set data_per_idle_probe 0
mrc_run "param set syn_retry_pct 0" ip netns exec "$b" "$MRC_STATUS" param set syn_retry_pct 0
mrc_check "parameters changed in b" "heartbeat_ms=5 miss_threshold=3 ev_per_plane=4 cc=reno user_timeout_ms=30000 data_per_idle_probe=0 syn_retry_pct=0" "$(pjson "$b")"
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
out=$(ip netns exec "$b" "$MRC_STATUS" param set data_per_idle_probe 65536 2>&1)
mrc_check "data_per_idle_probe 65536 refused by the policy" 1 "$?"
out=$(ip netns exec "$b" "$MRC_STATUS" param set syn_retry_pct 101 2>&1)
mrc_check "syn_retry_pct 101 refused by the policy" 1 "$?"
mrc_check "refused changes left everything as it was" "heartbeat_ms=5 miss_threshold=3 ev_per_plane=4 cc=reno user_timeout_ms=30000 data_per_idle_probe=0 syn_retry_pct=0" "$(pjson "$b")"
out=$(ip netns exec "$b" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$MRC_STATUS" param set heartbeat_ms 9 2>&1)
case "$out" in
*CAP_NET_ADMIN*) mrc_ok "unprivileged param set refused with a CAP_NET_ADMIN message" ;;
*) mrc_fail "unprivileged param set: $out" ;;
esac
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	out=$(ip netns exec "$b" $MRC_PY_SITE "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
		--no-schema --do param-get --output-json 2>&1 |
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
	out=$(ip netns exec "$b" $MRC_PY_SITE "$ksrc/tools/net/ynl/cli.py" --spec "$MRC_DIR/netlink/mrc.yaml" \
		--no-schema --dump endpoint-get --output-json 2>&1 |
		$MRC_PY -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>&1)
	mrc_check "ynl cli.py endpoint-get dump" 16 "$out"
fi

# Endpoints from a configuration file (endpoint load), in a, whose table is
# empty: a first load adds, a second changes nothing (the table's
# generation stays), a changed file changes only what differs, --replace
# removes what the file does not name, and a file with a mistake changes
# nothing. "dev IFNAME" stands for the interface's global unicast addresses:
# not its link-local or host-scope ones.
ip -n "$a" link add mrcl0 type veth peer name mrcl1
ip -n "$a" addr add 10.78.0.1/24 dev mrcl0
ip -n "$a" addr add 10.78.0.2/24 dev mrcl0
ip -n "$a" addr add 10.78.9.9/32 dev mrcl0 scope host
ip -n "$a" addr add fd78::1/64 dev mrcl0 nodad
ip -n "$a" link set mrcl0 up
ip -n "$a" link set mrcl1 up
ifa=$(ip netns exec "$a" cat /sys/class/net/veth-a/ifindex)
ifl=$(ip netns exec "$a" cat /sys/class/net/mrcl0/ifindex)
conf=$(mktemp -d)
cat >"$conf/one.conf" <<'CONF'
# rails of a
10.77.0.1 dev veth-a
fd77::1 backup      # no interface: routing chooses
dev mrcl0
CONF
cat >"$conf/two.conf" <<'CONF'
10.77.0.1 dev veth-a backup
dev mrcl0 ipv6
10.77.0.9
CONF
load() { # NS ARGS...: the last line of endpoint load's output, or its exit status and error
	local ns=$1 out rc
	shift
	out=$(ip netns exec "$ns" "$MRC_STATUS" endpoint load "$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then tail -n 1 <<<"$out"; else echo "rc $rc: $out"; fi
}
mrc_check "load: first load adds all" "endpoints: 5 added, 0 removed, 0 changed, 0 unchanged" \
	"$(load "$a" "$conf/one.conf")"
mrc_check "load: endpoints, dev as its global unicast addresses" \
	"10.77.0.1/$ifa/0 fd77::1/0/1 10.78.0.1/$ifl/0 10.78.0.2/$ifl/0 fd78::1/$ifl/0" "$(eps "$a")"
g1=$(gen "$a")
mrc_check "load: second load changes nothing" "endpoints: no change, 5 unchanged" \
	"$(load "$a" "$conf/one.conf")"
mrc_check "load: second load left the generation" "$g1" "$(gen "$a")"
out=$(ip netns exec "$a" "$MRC_STATUS" --json endpoint load "$conf/one.conf" |
	$MRC_PY -c 'import json,sys; d=json.load(sys.stdin); print(*(len(d[k]) for k in ("added","removed","changed","unchanged","kept")), d["dry_run"])')
mrc_check "load --json: added removed changed unchanged kept dry_run" "0 0 0 5 0 False" "$out"
mrc_check "load of a changed file: only what differs, the rest kept" \
	"endpoints: 1 added, 0 removed, 1 changed, 1 unchanged, 3 others kept" \
	"$(load "$a" "$conf/two.conf")"
mrc_check "load of a changed file: endpoints" \
	"10.77.0.1/$ifa/1 fd77::1/0/1 10.78.0.1/$ifl/0 10.78.0.2/$ifl/0 fd78::1/$ifl/0 10.77.0.9/0/0" "$(eps "$a")"
g1=$(gen "$a")
mrc_check "load --replace --dry-run" \
	"endpoints: 0 added, 3 removed, 0 changed (dry run), 3 unchanged" \
	"$(load "$a" --replace --dry-run "$conf/two.conf")"
mrc_check "load --dry-run changed nothing" "$g1" "$(gen "$a")"
mrc_check "load --replace removes what the file does not name" \
	"endpoints: 0 added, 3 removed, 0 changed, 3 unchanged" "$(load "$a" --replace "$conf/two.conf")"
mrc_check "load --replace: endpoints" "10.77.0.1/$ifa/1 fd78::1/$ifl/0 10.77.0.9/0/0" "$(eps "$a")"
mrc_check "load --replace again changes nothing" "endpoints: no change, 3 unchanged" \
	"$(load "$a" --replace "$conf/two.conf")"
g1=$(gen "$a")
printf '10.77.0.5\n10.77.0.6 port 9000\n' >"$conf/bad.conf"
out=$(load "$a" --replace "$conf/bad.conf")
case "$out" in
"rc 2: mrc-status: $conf/bad.conf:2: an endpoint has no port"*) mrc_ok "load: a bad line is named, exit status 2" ;;
*) mrc_fail "load of a bad file: $out" ;;
esac
printf '10.77.0.5\ndev mrcl9\n' >"$conf/noif.conf"
mrc_check "load: a missing interface is named, exit status 1" \
	"rc 1: mrc-status: $conf/noif.conf:2: no interface named 'mrcl9'" "$(load "$a" --replace "$conf/noif.conf")"
mrc_check "load: files with mistakes changed nothing" "$g1" "$(gen "$a")"
out=$(ip netns exec "$a" "$MRC_STATUS" endpoint add --dev mrcl0 2>&1 | tail -n 1)
mrc_check "endpoint add --dev: the interface's addresses not yet there" \
	"endpoints: 2 added, 0 removed, 0 changed, 1 unchanged, 2 others kept" "$out"
out=$(ip netns exec "$a" "$MRC_STATUS" endpoint add --dev mrcl0 2>&1 | tail -n 1)
mrc_check "endpoint add --dev again changes nothing" \
	"endpoints: no change, 3 unchanged, 2 others kept" "$out"
mrc_check "load --replace of an empty file empties the table" \
	"endpoints: 0 added, 5 removed, 0 changed, 0 unchanged" "$(load "$a" --replace /dev/null)"
mrc_check "endpoints in a after all loads" "none" "$(eps "$a")"
rm -rf "$conf"

# Live connections, in namespaces of their own: y opens $nconn connections
# to x and sends 16 KiB on each five times a second (no faster: a
# sender as fast as it can leaves the debug VM no CPU for the dumps and
# commands below, which then take minutes), over two planes (two veth pairs, both
# offered as endpoints on both sides), so every connection has 2 x 4 paths
# (ev_per_plane 4) plus the handshake's path, seen from either end. c has
# the module but no connection.
echo "# live connections from ${SECONDS}s"
nconn=3
npath=9
tmp=$(mktemp -d)
mrc_netns_add x
mrc_netns_add y
mrc_netns_add c
for p in 1 2; do
	ip link add "vx$p" netns "$x" type veth peer name "vy$p" netns "$y"
	ip -n "$x" addr add "10.79.$p.1/24" dev "vx$p"
	ip -n "$y" addr add "10.79.$p.2/24" dev "vy$p"
	ip -n "$x" link set "vx$p" up
	ip -n "$y" link set "vy$p" up
	ip netns exec "$x" "$MRC_STATUS" endpoint add "10.79.$p.1"
	ip netns exec "$y" "$MRC_STATUS" endpoint add "10.79.$p.2"
done
ip netns exec "$x" $MRC_UTIL hold-server 10.79.1.1 9000 "$nconn" --timeout 60 >"$tmp/server" 2>&1 &
spid=$!
mrc_wait_for 120 grep -q listening "$tmp/server"
ip netns exec "$y" $MRC_UTIL hold-client 10.79.1.1 9000 "$nconn" --send 16384 --every 0.2 --cookies >"$tmp/client" 2>&1 &
cpid=$!
mrc_wait_for 120 grep -q "^cookies" "$tmp/client"
mrc_check "$nconn connections up" "up $nconn of $nconn" "$(grep -o "^up [0-9]* of [0-9]*" "$tmp/client")"
ip netns exec "$y" "$MRC_STATUS" --json conns >"$tmp/y1"
sleep 1
ip netns exec "$y" "$MRC_STATUS" --json conns >"$tmp/y2"
ip netns exec "$x" "$MRC_STATUS" --json conns >"$tmp/x"

# More requests while the connections run: the dumps and stats of c, and
# conn-get (do) of the first connection in y by session id, by cookie, and
# by session id from c.
read -r sid cookie <<<"$(grep -o '"session_id":"[0-9a-f]*","cookie":[0-9]*' "$tmp/y2" |
	head -n 1 | sed 's/"session_id":"\([0-9a-f]*\)","cookie":\([0-9]*\)/\1 \2/')"
ip netns exec "$c" "$MRC_STATUS" --json conns >"$tmp/c-conns"
ip netns exec "$c" "$MRC_STATUS" --json stats >"$tmp/c-stats"
ip netns exec "$y" "$MRC_STATUS" --json paths "$sid" >"$tmp/by-sid"
ip netns exec "$y" "$MRC_STATUS" --json show --cookie "$cookie" >"$tmp/by-cookie"
ip netns exec "$c" "$MRC_STATUS" paths "$sid" >"$tmp/c-sid" 2>&1
echo "rc $?" >>"$tmp/c-sid"

# One pass over the JSON documents: "KEY: VALUE" lines in $tmp/summary.
$MRC_PY - "$tmp" >"$tmp/summary" 2>&1 <<'PY'
import json, sys
tmp = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{tmp}/{name}"))
    except Exception as e:
        return {"connections": [], "conns": f"bad {name}: {e}", "rx_packets": "-"}
def conns(name):
    return load(name)["connections"]
def out(key, value):
    print(f"{key}: {value}")
for side, port in (("x", "local_port"), ("y2", "remote_port")):
    d = conns(side)
    out(side, " ".join([str(len(d)), ",".join(str(len(c["paths"])) for c in d) or "-",
                        "/".join(sorted({c["state"] for c in d})) or "-",
                        "port=" + "/".join(sorted({str(c[port]) for c in d}))]))
    out(side + " sessions", " ".join(sorted(c["session_id"] for c in d)))
out("y2 cookies", " ".join(str(c) for c in sorted(c["cookie"] or 0 for c in conns("y2"))))
PATH_KEYS = ("path_id", "plane", "local_addr", "state", "srtt_ns", "min_rtt_ns", "cwnd",
             "bytes_sent", "bytes_acked", "probes_sent", "probes_missed")
def why(line):
    with open(f"{tmp}/why", "a") as f:
        print(line, file=f)
def grew(field, paths=None, each=True):
    """Whether FIELD grew in the second dump: of each connection (or, with
    each=False, of at least one), summed over its paths whose local address
    starts with PATHS if given, else the connection's own."""
    one, two = ({c["session_id"]: c for c in conns(n)} for n in ("y1", "y2"))
    bad, good = [], 0
    for sid, c2 in sorted(two.items()):
        c1 = one.get(sid)
        if c1 is None:
            bad.append(sid + ":new")
            continue
        if paths is None:
            v1, v2 = c1[field], c2[field]
        else:
            v1, v2 = (sum(p[field] or 0 for p in c["paths"] if p["local_addr"].startswith(paths))
                      for c in (c1, c2))
        if v2 > v1:
            good += 1
            continue
        bad.append(f"{sid}:{v1}->{v2}")
        if each:
            why(f"{field} {paths or ''} of {sid} did not grow; its paths then and a second later:")
            for c in (c1, c2):
                for p in c["paths"]:
                    why(" ".join(f"{k}={p.get(k)}" for k in PATH_KEYS))
    ok = two and (not bad if each else good > 0)
    return "grew" if ok else " ".join(bad) or "none"
out("tx_bytes", grew("tx_bytes"))
for field in ("bytes_sent", "bytes_acked"):
    out(f"{field} all", grew(field, "10.79."))
    for plane in ("10.79.1.", "10.79.2."):
        out(f"{field} {plane}", grew(field, plane, each=False))
def sender_time():
    """Whether the sender's time accounts for the second between the two
    dumps, and went mostly to waiting for the application (it sends 16 KiB
    every 200 ms)."""
    one, two = ({c["session_id"]: c for c in conns(n)} for n in ("y1", "y2"))
    bad = []
    for sid, c2 in sorted(two.items()):
        t1, t2 = (sum((c.get("send_time_ns") or {}).values()) for c in (one.get(sid, {}), c2))
        app = (c2.get("send_time_ns") or {}).get("app", 0)
        if not (t2 - t1 >= 1e9 and app * 2 > t2):
            bad.append(f"{sid}:{t1}->{t2},app={app}")
    return " ".join(bad) if bad or not two else "accounted"
out("send_time", sender_time())
def counted():
    """Whether each connection's packet counters grew: DATA sent by y,
    received and acknowledged by x, ACKs received by y."""
    bad = []
    for side, keys in (("y", ("data_sent", "acks_received")), ("x", ("data_received", "acks_sent"))):
        now = {c["session_id"]: c.get("counters") or {} for c in conns("y2" if side == "y" else "x")}
        was = {c["session_id"]: c.get("counters") or {} for c in conns("y1")}
        for sid, k in sorted(now.items()):
            for key in keys:
                # x was dumped after y2, so its counters are compared with y1's of the
                # other direction: what x received must exceed what y had sent a second before.
                before = was.get(sid, {}).get("data_sent" if key == "data_received" else
                                              "acks_received" if key == "acks_sent" else key, 0)
                if k.get(key, 0) <= before:
                    bad.append(f"{side}:{sid}:{key}={k.get(key)}<={before}")
    return " ".join(bad) or "grew"
out("counters", counted())
out("c conns", len(conns("c-conns")))
s = load("c-stats")
out("c stats", f"{s['conns']} {s['rx_packets']}")
for how in ("by-sid", "by-cookie"):
    out(how, " ".join([str(len(conns(how)))] + [f"{c['session_id']} {len(c['paths'])}"
                                                 for c in conns(how)]))
out("c sid", open(f"{tmp}/c-sid").read().split("\n")[-2])
PY
got() { sed -n "s/^$1: //p" "$tmp/summary"; }

# Both ends list exactly the same $nconn sessions, established, with
# $npath paths each; x is the accepting end (local port 9000). The
# cookies are those the client's sockets report.
want="$nconn $(yes "$npath" | head -n "$nconn" | paste -sd,) established port=9000"
mrc_check "conns in y: connections, paths each, state" "$want" "$(got y2)"
mrc_check "conns in x: connections, paths each, state" "$want" "$(got x)"
mrc_check "x and y list the same sessions" "$(got 'y2 sessions')" "$(got 'x sessions')"
mrc_check "y: cookies are the sockets' SO_COOKIE" "$(sed -n 's/^cookies //p' "$tmp/client")" "$(got 'y2 cookies')"

# Counters grow while data flows: the sender's connection bytes, and its
# paths' bytes sent and acknowledged, and on each plane. A connection
# sending 16 KiB every 200 ms may leave a plane it measured as slower
# unused for a second (its first RTT samples can come from a stall of the
# emulated host), so the planes' counters must grow for some connection,
# not for each.
mrc_check "y: tx_bytes of each connection grew" grew "$(got tx_bytes)"
for field in bytes_sent bytes_acked; do
	mrc_check "y: $field of each connection's paths grew" grew "$(got "$field all")"
	for plane in 10.79.1. 10.79.2.; do
		mrc_check "y: $field of paths from ${plane}2 grew" grew "$(got "$field $plane")"
	done
done

# The sender's time is accounted limit by limit, and its counters move.
mrc_check "y: send_time_ns covers the second between dumps, mostly app-limited" accounted "$(got send_time)"
mrc_check "conn counters: y's data_sent and acks_received, x's data_received and acks_sent grew" grew "$(got counters)"

# On a failure above, the paths of the connection that failed it.
[ -s "$tmp/why" ] && sed 's/^/# /' "$tmp/why"

# Isolation: c sees no connection, counts none, and cannot get one by
# session id. conn-get by session id and by cookie gets that connection.
mrc_check "c: no connections in the dump" 0 "$(got 'c conns')"
mrc_check "c: stats count no connection and no packet" "0 0" "$(got 'c stats')"
mrc_check "c: conn-get of y's session fails" "rc 1" "$(got 'c sid')"
mrc_check "paths SESSION: that connection only" "1 $sid $npath" "$(got by-sid)"
mrc_check "show --cookie: that connection only" "1 $sid $npath" "$(got by-cookie)"

# Unknown connections: exit status 1, the kernel's errno and extack
# message and the attribute it names.
out=$(ip netns exec "$y" "$MRC_STATUS" paths 00000000deadbeef 2>&1)
mrc_check "paths of an unknown session: exit status" 1 "$?"
case "$out" in
*"no connection with session id 00000000deadbeef (conn-get: No such file or directory"*"no such connection, bad attribute 'session-id'"*)
	mrc_ok "unknown session: errno and extack shown" ;;
*) mrc_fail "unknown session: $out" ;;
esac
out=$(ip netns exec "$y" "$MRC_STATUS" show --cookie 18446744073709551615 2>&1)
mrc_check "show of an unknown cookie: exit status" 1 "$?"
case "$out" in
*"no connection with socket cookie 18446744073709551615 (conn-get: No such file or directory"*"no such connection, bad attribute 'cookie'"*)
	mrc_ok "unknown cookie: errno and extack shown" ;;
*) mrc_fail "unknown cookie: $out" ;;
esac

# Bad requests through the kernel tree's ynl client: errno and extack.
if [ -f "$ksrc/tools/net/ynl/cli.py" ]; then
	# The spec itself is checked against the schema above.
	ynl_err() { # SPEC JSON: the error and extack lines of a conn-get do
		ip netns exec "$y" $MRC_PY_SITE "$ksrc/tools/net/ynl/cli.py" --spec "$1" --no-schema \
			--do conn-get --json "$2" 2>&1 | sed -n 's/^[[:space:]]*\(error\|extack\): //p' | tr '\n' ' '
	}
	mrc_check "ynl conn-get without session-id or cookie" \
		"-22 {'msg': 'give exactly one of session-id and cookie'} " \
		"$(ynl_err "$MRC_DIR/netlink/mrc.yaml" '{}')"
	# A copy of the spec that sends session-id (of the conn attribute set,
	# the first one) as a u16: the policy's length check names it.
	awk '!done && prev ~ /name: session-id$/ && sub(/type: uint$/, "type: u16") { done = 1 }
		{ print; prev = $0 }' "$MRC_DIR/netlink/mrc.yaml" >"$tmp/u16.yaml"
	out=$(ynl_err "$tmp/u16.yaml" '{"session-id": 1}')
	case "$out" in
	"-22 {'msg': 'invalid attribute length', "*"'bad-attr': '.session-id'"*)
		mrc_ok "ynl conn-get with a 2-byte session-id: EINVAL, extack names session-id" ;;
	*) mrc_fail "ynl conn-get with a 2-byte session-id: $out" ;;
	esac
fi

# Dumps while connections open and close: in y a churn client opens and
# closes connections to x as fast as it can while each side dumps its
# table 5 times. A dump resumes by session key, so every held connection is
# listed exactly once, with all its paths, in every dump, torn or not.
# Each step is bounded: a process still running after 20 s is reported at
# once with where it sleeps (its kernel stack; the churn client adds its
# Python stack) and killed, so that a hang fails this check instead of the
# whole test.
hung=
exec 3>&1
# hang_report PID WHAT: reports a process that did not finish and kills it.
hang_report() {
	hung+=" $2"
	{
		echo "# $2 (pid $1) still running after 20 s: state" \
			"$(awk '/^State/ { print $2 }' "/proc/$1/status"), wchan $(cat "/proc/$1/wchan" 2>/dev/null)"
		sed 's/^/#   /' "/proc/$1/stack" 2>/dev/null
	} >&3
	kill -USR1 "$1" 2>/dev/null
	sleep 1
	kill -9 "$1" 2>/dev/null
}
# alive PID: the process has not exited (a zombie has).
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
gone() { ! alive "$1"; }
# bounded WHAT COMMAND...: runs the command for at most 20 s.
bounded() {
	local what=$1 pid deadline=$((SECONDS + 20))
	shift
	"$@" &
	pid=$!
	while alive "$pid" && [ $SECONDS -lt $deadline ]; do
		sleep 0.2
	done
	if alive "$pid"; then
		# Not waited for: a process stuck in the kernel may not die.
		hang_report "$pid" "$what"
		return 1
	fi
	wait "$pid"
}
ip netns exec "$y" $MRC_UTIL churn 10.79.1.1 9000 >"$tmp/churn" 2>&1 &
chpid=$!
mrc_wait_for 120 grep -q churning "$tmp/churn"
echo "# churning from ${SECONDS}s: $(head -c 200 "$tmp/churn" | tr '\n' ' ')"
for i in 1 2 3 4 5; do
	bounded "dump x$i" ip netns exec "$x" "$MRC_STATUS" --json conns >"$tmp/churn-x$i" 2>>"$tmp/churn-err"
	bounded "dump y$i" ip netns exec "$y" "$MRC_STATUS" --json conns >"$tmp/churn-y$i" 2>>"$tmp/churn-err"
done
kill "$chpid"
if mrc_wait_for 20 gone "$chpid"; then
	wait "$chpid"
	mrc_check "churn: every connection opened and sent its message" 0 "$?"
else
	hang_report "$chpid" "churn client after SIGTERM"
	mrc_fail "churn: the client did not stop"
fi
grep -A 30 '^Current thread\|^Thread 0x' "$tmp/churn" | sed 's/^/#   /'
mrc_check "churn: no dump and no churn step hung" "" "$hung"
grep -m 3 '^churn connection' "$tmp/churn" | sed 's/^/# /'
read -r listed torn others <<<"$($MRC_PY - "$tmp" "$(got 'y2 sessions')" "$npath" <<'PY'
import glob, json, sys
tmp, held, npath = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
bad, torn, others = [], 0, 0
for f in sorted(glob.glob(f"{tmp}/churn-[xy][0-9]")):
    try:
        d = json.load(open(f))
    except ValueError:
        bad.append(f[-2:] + ":no-json")
        continue
    torn += not d["consistent"]
    conns = d["connections"]
    for h in held:
        mine = [c for c in conns if c["session_id"] == h]
        if len(mine) != 1 or len(mine[0]["paths"]) != npath:
            bad.append(f"{f[-2:]}:{h}x{len(mine)}")
    others += sum(c["session_id"] not in held for c in conns)
print(",".join(bad) or "once-each", torn, others)
PY
)"
mrc_check "churn: each held connection listed once with $npath paths in all 10 dumps" once-each "$listed"
echo "# churn: $(tail -n 1 "$tmp/churn"); $torn of 10 dumps torn after 5 tries," \
	"$others listings of churning connections; stderr: $(sort -u "$tmp/churn-err" | head -n 2)"

# Closing: every connection ends on both sides.
kill "$cpid"
wait "$cpid"
mrc_check "client closed its connections" 0 "$?"
wait "$spid"
mrc_check "server saw every connection end" "0 connections left" "$(grep -o '[0-9]* connections left' "$tmp/server")"
mrc_wait_for 60 mrc_stat_cmp "$x" conns -eq 0
mrc_check "x: no connection left" 0 "$(mrc_stat "$x" conns)"
mrc_wait_for 60 mrc_stat_cmp "$y" conns -eq 0
mrc_check "y: no connection left" 0 "$(mrc_stat "$y" conns)"
# Every connection, held or churned, was opened once on each side and none failed.
churned=$(sed -n 's/^churned \([0-9]*\) connections.*/\1/p' "$tmp/churn" 2>/dev/null)
churned=${churned:-0}
for ns in x y; do
	mrc_check "$ns: conns_opened and conns_failed" "$((nconn + churned)) 0" \
		"$(mrc_stat "${!ns}" conns_opened) $(mrc_stat "${!ns}" conns_failed)"
done
rm -rf "$tmp"
echo "# live connections until ${SECONDS}s"

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
