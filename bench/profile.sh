#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make profile`: where the CPU time of one bulk transfer (or, with
# MODE=latency, of 64-byte round trips) over an unshaped veth goes, both
# ends on the release test kernel's two CPUs. Builds mrc.ko for that
# kernel and the tools, then runs bench/profile-guest.sh in the VM:
# perf samples every CPU (cpu-clock, call graphs) for part of the transfer
# and prints the hottest symbols, the module's resolved from /proc/kallsyms.
#
# Usage: bench/profile.sh [mrc|tcp|mptcp|sctp] [SECONDS]   (mrc, 4)
# MRC_PARAMS: parameters for insmod (e.g. "gso=1").
# MRC_SET: namespace tunables set in both namespaces (NAME=VALUE of
#   `mrc-status param set`, ','-separated, e.g. "ev_per_plane=255").
# MODE: throughput (16 KiB messages, the default) or latency (64-byte
#   messages, each answered before the next is sent, as the bench's round
#   trip).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/env.sh
. scripts/env.sh

proto=${1:-mrc}
secs=${2:-4}
case $proto in mrc | tcp | mptcp | sctp) ;; *)
	echo "usage: $0 [mrc|tcp|mptcp|sctp] [SECONDS]" >&2
	exit 2
	;;
esac
case ${MODE:=throughput} in throughput | latency) ;; *)
	echo "MODE must be throughput or latency" >&2
	exit 2
	;;
esac
case $secs in '' | *[!0-9]*)
	echo "SECONDS must be a whole number" >&2
	exit 2
	;;
esac
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf (or make setup)" >&2; exit 1; }
scripts/setup.sh release
ko=$(build_release_module)
make -s -C "$top" tools
exec scripts/vm.sh --flavor release env MRC_PARAMS="${MRC_PARAMS:-}" MRC_SET="${MRC_SET:-}" MODE="$MODE" \
	"$top/bench/profile-guest.sh" "$ko" "$proto" "$secs" \
	"$top/tools/target/release/mrc-perf"
