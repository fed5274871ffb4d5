#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: MRC against MPTCP, SCTP and TCP on the release test kernel.
# Sets up what is missing (the release kernel is cached like the debug one),
# builds mrc.ko for that kernel from a copy of the module sources (the
# tree's own build, for the debug kernel, is left alone), the tools and the
# MPTCP selftest's mptcp_connect, runs bench/run-guest.sh in the VM, then
# writes the report: bench/results.json, bench/plots/*.svg and the tables of
# BENCHMARKS.md. The VM's output and the run's results.json stay in
# bench/out/<time>/ (BENCH_OUT moves it).
#
# Settings: BENCH_* environment variables, passed on to the VM (list in
# BENCHMARKS.md); BENCH_QUICK=1 for a smoke run.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/env.sh
. scripts/env.sh

py=${BENCH_PYTHON:-/usr/bin/python3}
log() { printf '[bench] %s\n' "$*" >&2; }

# The plots need matplotlib; find out before the long part.
plots=()
if [ "${BENCH_PLOTS:-1}" = 0 ]; then
	plots=(--no-plots)
elif ! "$py" -c 'import matplotlib' 2>/dev/null; then
	log "the plots need matplotlib for $py:"
	log "    apt-get install python3-matplotlib"
	log "or run 'BENCH_PLOTS=0 make bench' for the tables only"
	exit 1
fi

out=${BENCH_OUT:-$top/bench/out/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

scripts/setup.sh release
ko=$(build_release_module)

make -s -C "$top" tools

# The simult_flows scenarios also run the selftest's own mptcp_connect; it
# builds from the kernel source in seconds. Without it those scenarios
# measure MPTCP with mrc-perf only.
mc_dir=$MRC_CACHE/bench/selftests
mc=$mc_dir/mptcp_connect
mkdir -p "$mc_dir"
if ! make -s -C "$(kernel_src_dir)/tools/testing/selftests/net/mptcp" OUTPUT="$mc_dir" "$mc" \
	>"$out/mptcp_connect-build.log" 2>&1; then
	log "mptcp_connect did not build (see $out/mptcp_connect-build.log); simult_flows runs MPTCP with mrc-perf only"
	mc=
fi

# The guest writes into its own /tmp (the host's file system is read-only
# in the VM) and prints each finished scenario on stdout (run-guest.sh
# --emit); the host keeps the VM's stdout apart from its stderr so that
# those blocks arrive intact.
envs=()
while IFS= read -r v; do
	envs+=("$v=${!v}")
done < <(compgen -e | grep '^BENCH_' || true)
guest=(env "${envs[@]}" "$top/bench/run-guest.sh" --ko "$ko" --emit)
[ -z "$mc" ] || guest+=(--mptcp-connect "$mc")
guest+=(/tmp/mrc-bench)
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	log "running the smoke benchmark in the VM (a few minutes); output in $out"
else
	log "running the benchmark in the VM (about 17 minutes under TCG); output in $out"
fi
set +e
scripts/vm.sh --flavor release "$(printf '%q ' "${guest[@]}")" \
	2> >(tee "$out/vm.err" >&2) | tee "$out/vm.out" | grep --line-buffered -v '^@@mrc-bench '
vm_rc=${PIPESTATUS[0]}
set -e

"$py" bench/collect.py extract "$out/vm.out" -o "$out/results.json"
complete=$("$py" -c 'import json, sys; r = json.load(open(sys.argv[1])); print("yes" if r["complete"] else "no", len(r["scenarios"]))' "$out/results.json")
read -r complete nscen <<<"$complete"
if [ "$nscen" = 0 ]; then
	log "the VM run produced no results (exit status $vm_rc); see $out/vm.out and $out/vm.err"
	exit 1
fi
"$py" bench/report.py "$out/results.json" "${plots[@]}"
if [ "$vm_rc" != 0 ] || [ "$complete" != yes ]; then
	log "the VM run did not finish (exit status $vm_rc): the report covers $nscen scenarios"
	exit 1
fi
log "done: BENCHMARKS.md, bench/results.json, bench/plots/ (raw: $out)"
