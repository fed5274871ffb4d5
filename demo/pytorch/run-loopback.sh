#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs a demo with WORLD (default 2) processes on this host over loopback
# TCP, with the Python of the torch venv (scripts/setup-pytorch.sh). Rank
# 0's output goes to standard output, every other rank's to
# $OUT/rank-N.log (a temporary directory unless OUT is set). Exits non-zero
# if any rank does, or if the run takes longer than TIMEOUT seconds.
#
# Usage: demo/pytorch/run-loopback.sh collectives.py|train.py [ARGS...]
#   WORLD=2 PORT=29500 TIMEOUT=600 OUT=dir MRC_CACHE=~/.cache/mrc
set -u
here=$(cd "$(dirname "$0")" && pwd)
script=$1
shift
py=${MRC_TORCH_PY:-${MRC_CACHE:-$HOME/.cache/mrc}/venv-torch/bin/python}
[ -x "$py" ] || { echo "no $py: run scripts/setup-pytorch.sh" >&2; exit 2; }
world=${WORLD:-2}
port=${PORT:-$((29500 + RANDOM % 1000))}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"

pids=()
for ((r = 1; r < world; r++)); do
	timeout "${TIMEOUT:-600}" "$py" "$here/$script" --rank "$r" --world-size "$world" \
		--master-addr 127.0.0.1 --master-port "$port" "$@" >"$out/rank-$r.log" 2>&1 &
	pids+=($!)
done
timeout "${TIMEOUT:-600}" "$py" "$here/$script" --rank 0 --world-size "$world" \
	--master-addr 127.0.0.1 --master-port "$port" "$@"
rc=$?
for ((r = 1; r < world; r++)); do
	wait "${pids[$((r - 1))]}"
	st=$?
	if [ $st -ne 0 ]; then
		echo "rank $r exited $st; its output:" >&2
		sed 's/^/  /' "$out/rank-$r.log" >&2
		rc=${rc/#0/$st}
	fi
done
exit "$rc"
