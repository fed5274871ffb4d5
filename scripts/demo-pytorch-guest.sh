#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Guest half of `make demo-pytorch` (runs inside the VM, see
# demo-pytorch.sh): DDP training (demo/pytorch/train.py, Gloo on the CPU)
# between two namespaces joined by two veth planes, rank 0 in A, rank 1 in
# B, rendezvous (and Gloo's connection) at A's address on plane 2:
#
#   1. over MRC (both ranks under mrcize), no failure;
#   2. over MRC, plane 2 taken down mid-training: MRC moves the connections
#      to plane 1, training completes, and the final loss and weights are
#      the same to the bit as in run 1;
#   3. over plain TCP, no failure (the same result again);
#   4. over plain TCP, plane 2 taken down mid-training: TCP's connection is
#      on that plane; the run is given DEMO_TCP_WAIT seconds after the
#      failure to finish, fail or be killed.
#
# Then a summary table (demo/pytorch/summary.py). Settings (environment):
# DEMO_STEPS (60: a step over MRC takes about 0.55 s on the debug kernel
# under TCG), DEMO_FAIL_STEP (20: the plane goes down once rank 0 has done
# that many steps), DEMO_TCP_WAIT (180), DEMO_RUNS (the runs to do, by
# number: "1 2 3 4"), DEMO_RANK_TIMEOUT (torch's own timeout of the
# rendezvous and of each collective: 120 s, train.py's default),
# DEMO_RUN_LIMIT (1200 s: a run still going then is killed).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# Namespaces, MRC counters, mrc_sleep.
. "$top/selftests/mrc_lib.sh"

STEPS=${DEMO_STEPS:-60}
FAIL_STEP=${DEMO_FAIL_STEP:-20}
TCP_WAIT=${DEMO_TCP_WAIT:-180}
RUNS=${DEMO_RUNS:-1 2 3 4}
RANK_TIMEOUT=${DEMO_RANK_TIMEOUT:-120}
# A guard against a hang of a whole run (the imports take minutes under TCG).
RUN_LIMIT=${DEMO_RUN_LIMIT:-1200}
MRCIZE=${MRCIZE:-$top/tools/target/release/mrcize}
TORCH_PY=${MRC_TORCH_PY:-${MRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mrc}/venv-torch/bin/python}
out=${DEMO_GUEST_OUT:-/tmp/mrc-demo-pytorch}
PORT=29500
MASTER=10.83.2.1

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
note() { printf '  %s\n' "$*"; }

[ -x "$TORCH_PY" ] || { echo "no PyTorch venv at $TORCH_PY: run scripts/setup-pytorch.sh" >&2; exit 1; }
[ -x "$MRCIZE" ] || { echo "mrcize not built: make tools" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"

say "$(uname -r): insmod mrc.ko"
mrc_load || exit 1

tcp_opens() {
	ip netns exec "$1" awk '/^Tcp: [0-9]/ { print $6 + $7 }' /proc/net/snmp
}

# steps_done FILE: training steps rank 0 has reported.
steps_done() {
	local n=0 line
	while IFS= read -r line; do
		[[ $line == '{"step": '* ]] && n=$((n + 1))
	done <"$1"
	echo $n
}

# one_run N NAME mrc|tcp FAIL(0|1): a fresh pair of namespaces, one
# training run; its output and a meta.json go to $out/N-NAME.
one_run() {
	local n=$1 name=$2 transport=$3 fail=$4 d="$out/$1-$2" p wrap=() t0 t_fail=0 t_end
	local pid0 pid1 rc0 rc1 killed=0 deadline
	mkdir -p "$d"
	mrc_netns_add A
	mrc_netns_add B
	for p in 1 2; do
		ip link add "va$p" netns "$A" type veth peer name "vb$p" netns "$B"
		ip -n "$A" addr add "10.83.$p.1/24" dev "va$p"
		ip -n "$B" addr add "10.83.$p.2/24" dev "vb$p"
		ip -n "$A" link set "va$p" up
		ip -n "$B" link set "vb$p" up
		if [ "$transport" = mrc ]; then
			ip netns exec "$A" "$MRC_STATUS" endpoint add "10.83.$p.1"
			ip netns exec "$B" "$MRC_STATUS" endpoint add "10.83.$p.2"
		fi
	done
	[ "$transport" = mrc ] && wrap=("$MRCIZE" run)
	local tcp0_a tcp0_b rx0_a rx0_b
	tcp0_a=$(tcp_opens "$A")
	tcp0_b=$(tcp_opens "$B")
	rx0_a=$(mrc_stat "$A" rx_bytes)
	rx0_b=$(mrc_stat "$B" rx_bytes)

	say "run $n: $name: train.py, $STEPS steps, rendezvous at $MASTER:$PORT (plane 2)$([ "$transport" = mrc ] && echo ', both ranks under mrcize')"
	t0=$EPOCHREALTIME
	# Gloo binds to the address of plane 2 (by default it takes the
	# address the host name resolves to, the same in both namespaces).
	ip netns exec "$A" env GLOO_SOCKET_IFNAME=va2 "${wrap[@]}" "$TORCH_PY" "$top/demo/pytorch/train.py" \
		--rank 0 --world-size 2 --master-addr "$MASTER" --master-port "$PORT" \
		--steps "$STEPS" --timeout "$RANK_TIMEOUT" >"$d/rank0.out" 2>"$d/rank0.err" &
	pid0=$!
	ip netns exec "$B" env GLOO_SOCKET_IFNAME=vb2 "${wrap[@]}" "$TORCH_PY" "$top/demo/pytorch/train.py" \
		--rank 1 --world-size 2 --master-addr "$MASTER" --master-port "$PORT" \
		--steps "$STEPS" --timeout "$RANK_TIMEOUT" >"$d/rank1.out" 2>"$d/rank1.err" &
	pid1=$!

	local started=0 s limit=$((SECONDS + RUN_LIMIT)) shown=0 mon=''
	if [ "$transport" = mrc ]; then
		ip netns exec "$B" "$MRC_STATUS" monitor >"$d/monitor.txt" 2>&1 &
		mon=$!
	fi
	while kill -0 $pid0 2>/dev/null || kill -0 $pid1 2>/dev/null; do
		if [ $started = 0 ] && grep -q '"event": "start"' "$d/rank0.out"; then
			started=1
			note "ranks joined after $(mrc_ms_since "$t0") ms (import torch and rendezvous)"
		fi
		if [ "$fail" = 1 ] && [ "$t_fail" = 0 ]; then
			s=$(steps_done "$d/rank0.out")
			if [ "$s" -ge "$FAIL_STEP" ]; then
				# B's route over plane 2 goes, then its link (the
				# order of mrc_multipath.sh). The failure starts
				# with the route: B cannot send on plane 2 from then.
				t_fail=$EPOCHREALTIME
				ip -n "$B" route del 10.83.2.0/24 dev vb2
				ip -n "$B" link set vb2 down
				note "plane 2 down after step $s: ip -n B route del 10.83.2.0/24 dev vb2; ip -n B link set vb2 down"
				deadline=$((SECONDS + TCP_WAIT))
			fi
		fi
		# MRC's paths in B: while both planes are up (run 1), and 5 s
		# after plane 2 went down (run 2).
		if [ "$transport" = mrc ] && [ $shown = 0 ] &&
			{ { [ "$fail" = 0 ] && [ "$(steps_done "$d/rank0.out")" -ge "$FAIL_STEP" ]; } ||
				{ [ "$t_fail" != 0 ] && [ "$(mrc_ms_since "$t_fail")" -ge 5000 ]; }; }; then
			shown=1
			note "ip netns exec B mrc-status paths   # at step $(steps_done "$d/rank0.out")"
			ip netns exec "$B" "$MRC_STATUS" paths 2>&1 | sed 's/^/    /'
		fi
		if [ "$t_fail" != 0 ] && [ $SECONDS -ge "$deadline" ]; then
			note "still running $TCP_WAIT s after the failure, at step $(steps_done "$d/rank0.out"): killing both ranks"
			kill $pid0 $pid1 2>/dev/null
			killed=1
			break
		fi
		if [ $SECONDS -ge "$limit" ]; then
			note "still running after $RUN_LIMIT s, at step $(steps_done "$d/rank0.out"): killing both ranks"
			kill $pid0 $pid1 2>/dev/null
			killed=1
			break
		fi
		mrc_sleep 0.5
	done
	wait $pid0
	rc0=$?
	wait $pid1
	rc1=$?
	t_end=$EPOCHREALTIME
	note "rank 0 exited $rc0, rank 1 exited $rc1, $(mrc_ms_since "$t0") ms after the start"
	if [ -n "$mon" ]; then
		kill "$mon" 2>/dev/null
		wait "$mon" 2>/dev/null
		# Paths go suspect on a burst of losses and back (the
		# emulated CPUs stall at times): counted; the failures shown.
		note "mrc-status monitor in B: $(grep -c -e ' -> ' "$d/monitor.txt") path state changes," \
			"$(grep -c -e ' -> suspect' "$d/monitor.txt") to suspect," \
			"$(grep -c -e ' -> failed' "$d/monitor.txt") to failed:"
		grep -e ' -> failed' "$d/monitor.txt" | head -n 12 | sed 's/^/    /'
	fi
	local tcp_a tcp_b rx_a rx_b
	tcp_a=$(($(tcp_opens "$A") - tcp0_a))
	tcp_b=$(($(tcp_opens "$B") - tcp0_b))
	rx_a=$(($(mrc_stat "$A" rx_bytes) - rx0_a))
	rx_b=$(($(mrc_stat "$B" rx_bytes) - rx0_b))
	note "TCP connections opened: A $tcp_a, B $tcp_b; MRC bytes received: A $rx_a, B $rx_b"
	printf '{"run": %s, "name": "%s", "transport": "%s", "failure": %s, "fail_step": %s, "t_start": %s, "t_fail": %s, "t_end": %s, "rc0": %s, "rc1": %s, "killed": %s, "wait_s": %s, "tcp_opens": [%s, %s], "mrc_rx_bytes": [%s, %s]}\n' \
		"$n" "$name" "$transport" "$([ "$fail" = 1 ] && echo true || echo false)" "$FAIL_STEP" \
		"$t0" "$t_fail" "$t_end" "$rc0" "$rc1" "$([ $killed = 1 ] && echo true || echo false)" "$TCP_WAIT" \
		"$tcp_a" "$tcp_b" "$rx_a" "$rx_b" >"$d/meta.json"
	grep -h '"event": "end"' "$d/rank0.out" | sed 's/^/  rank 0: /'
	for r in 0 1; do
		[ "$(eval echo \$rc$r)" = 0 ] || tail -n 4 "$d/rank$r.err" | cut -c1-240 | sed "s/^/  rank $r stderr: /"
	done
	mrc_cleanup
}

for n in $RUNS; do
	case $n in
	1) one_run 1 mrc mrc 0 ;;
	2) one_run 2 mrc-plane2-down mrc 1 ;;
	3) one_run 3 tcp tcp 0 ;;
	4) one_run 4 tcp-plane2-down tcp 1 ;;
	esac
done
mrc_unload

say "summary"
/usr/bin/python3 -S "$top/demo/pytorch/summary.py" "$out"
