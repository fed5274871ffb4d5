#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Closed sockets whose connections the peer never lets finish: a peer that
# acknowledges the FIN but never sends its own. At most max_orphans of them
# finish in the background, the others are reset at close; those that do
# are reset after fin_timeout_ms. Nothing is left behind: the namespace is
# deleted and the module unloaded at once.
#
#   ns a                         ns b
#   veth-a 10.77.0.1/24  <--->   veth-b 10.77.0.2/24

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_unload
mrc_load
ATTACK="$MRC_PY $MRC_DIR/selftests/mrc_attack.py"
params=/sys/module/mrc/parameters
tmp=$(mktemp -d)
mrc_netns_add a
mrc_netns_add b
mrc_veth_pair "$a" "$b"

echo 3000 >$params/fin_timeout_ms
echo 2 >$params/max_orphans

ip netns exec "$b" $ATTACK never-close 10.77.0.2 9100 4 >"$tmp/srv" 2>&1 &
srv=$!
listening() { grep -q '^listening' "$tmp/srv"; }
mrc_wait_for 60 listening || mrc_fail "the server did not listen within 60 s"
ip netns exec "$a" $MRC_UTIL hold-client 10.77.0.2 9100 4 >"$tmp/cli" 2>&1 &
cli=$!
up() { grep -q '^up\|failed' "$tmp/cli"; }
mrc_wait_for 60 up
mrc_check "four connections" "up 4 of 4" "$(cut -d' ' -f1-4 "$tmp/cli")"

# The client closes all four: two finish in the background, two are reset.
kill -TERM $cli
wait $cli
ended() { [ "$(grep -c '^eof\|^reset' "$tmp/srv")" -ge 4 ]; }
mrc_wait_for 30 ended
mrc_check "the peer saw two FINs and two RSTs" "eof=2 reset=2" \
	"eof=$(grep -c '^eof' "$tmp/srv") reset=$(grep -c '^reset' "$tmp/srv")"
mrc_check "two orphans left" 2 "$(mrc_stat "$a" orphans)"
mrc_check "two connections reset for want of an orphan slot" 2 "$(mrc_stat "$a" orphans_refused)"

# The peer never sends FIN: both orphans are reset after fin_timeout_ms.
t0=$EPOCHREALTIME
mrc_wait_for 60 mrc_stat_cmp "$a" orphans -eq 0
ms=$(mrc_ms_since "$t0")
mrc_check "the orphans were reset after fin_timeout_ms" "2 0" \
	"$(mrc_stat "$a" orphan_timeouts) $(mrc_stat "$a" conns)"
echo "# orphans gone ${ms} ms after the close had ended"
mrc_check "not before fin_timeout_ms" ok "$([ "$ms" -ge 1000 ] && echo ok || echo "$ms ms")"

echo 60000 >$params/fin_timeout_ms
echo 1024 >$params/max_orphans
kill $srv 2>/dev/null
wait $srv 2>/dev/null
t0=$SECONDS
mrc_cleanup
mrc_check "namespaces deleted at once" ok "$([ $((SECONDS - t0)) -le 20 ] && echo ok || echo "$((SECONDS - t0)) s")"
mrc_run "rmmod" rmmod mrc
rm -rf "$tmp"
mrc_exit
