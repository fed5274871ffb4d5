#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Module load/unload: ten cycles, parameters, protocol and family
# registration, and a clean unload each time.

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
mrc_unload

for i in $(seq 1 10); do
	insmod "$MRC_KO" || { mrc_fail "insmod cycle $i"; break; }
	grep -q '^MRC ' /proc/net/protocols || mrc_fail "cycle $i: MRC missing from /proc/net/protocols"
	rmmod mrc || { mrc_fail "rmmod cycle $i"; break; }
	[ -d /sys/module/mrc ] && mrc_fail "cycle $i: /sys/module/mrc still present"
done
[ "$mrc_nr_fail" -eq 0 ] && mrc_ok "10 load/unload cycles"
mrc_check "protocol gone after unload" 0 "$(grep -c '^MRC ' /proc/net/protocols)"

mrc_load
mrc_check "default family parameter" 23 "$(cat /sys/module/mrc/parameters/family)"
mrc_check "default port parameter" "$MRC_PORT_DEFAULT" "$(cat /sys/module/mrc/parameters/port)"
mrc_check "refcount with no socket" 0 "$(mrc_refcnt)"
mrc_unload

insmod "$MRC_KO" port=5001
mrc_check "port parameter honoured" 5001 "$(cat /sys/module/mrc/parameters/port)"
mrc_check "UDP socket on the chosen port" 1 "$(ss -Hlun 'sport = :5001' | grep -c '0.0.0.0:5001')"
mrc_unload

# A family slot that is taken must fail the load with a clear error.
if insmod "$MRC_KO" family=2 2>/dev/null; then
	mrc_fail "family=2 (AF_INET) was accepted"
	mrc_unload
else
	mrc_ok "family=2 (taken by AF_INET) refused"
fi
for f in -1 0 46 1000; do
	out=$(insmod "$MRC_KO" family=$f 2>&1) && { mrc_fail "family=$f accepted"; mrc_unload; continue; }
	case "$out" in
	# insmod words EINVAL as "Invalid parameters".
	*"Invalid param"*)
		if dmesg | grep -q "family=$f is out of range"; then
			mrc_ok "family=$f refused with EINVAL and a log line"
		else
			mrc_fail "family=$f: EINVAL without the out-of-range message"
		fi ;;
	*) mrc_fail "family=$f: unexpected error: $out" ;;
	esac
done
mrc_check "no module left after refused load" 0 "$(lsmod | grep -c '^mrc ')"

mrc_exit
