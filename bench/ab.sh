#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make ab`: two builds of mrc.ko side by side on the release test kernel,
# interleaved in one boot of the VM, with TCP as the yardstick of each
# round. One bulk transfer of 16 KiB messages over an unshaped veth per
# variant and round; reports goodput and the VM's busy CPU per megabyte
# delivered (both ends, /proc/stat) for each, and the medians.
#
# Usage: bench/ab.sh REV_A [REV_B]
#   REV_A, REV_B   git revisions; REV_B defaults to the working tree
# Settings (environment):
#   AB_PARAMS_A, AB_PARAMS_B   module parameters of each (e.g. "gso=1")
#   AB_SET_A, AB_SET_B   namespace tunables of each, set in both namespaces
#                  (NAME=VALUE of `mrc-status param set`, ','-separated,
#                  as BENCH_MRC_NS_PARAMS of make bench; e.g.
#                  "cc=reno,ev_per_plane=1")
#   AB_MODE (throughput; latency: 64-byte messages, each answered before
#   the next is sent, reporting the round trip's p50 and p99 in us instead)
#   AB_MTU (1500)  AB_ROUNDS (3)  AB_SECS (5)  AB_GRO (0: 1 turns GRO on
#   at the receiving end of the veth)  AB_RFS (0: 1 adds receive flow
#   steering to the packet steering, for every variant)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=scripts/env.sh
. scripts/env.sh

[ $# -ge 1 ] || { echo "usage: $0 REV_A [REV_B]" >&2; exit 2; }
scripts/setup.sh release
kdir=$(kernel_build_dir release)
out=$MRC_CACHE/ab
mkdir -p "$out"

# build REV DIR: mrc.ko of REV (a git revision, or "" for the working
# tree) built in DIR for the release kernel; prints its path.
build() {
	local rev=$1 dir=$2
	rm -rf "$dir" && mkdir -p "$dir"
	if [ -n "$rev" ]; then
		git -C "$top" archive "$rev" Kbuild '*.rs' '*.c' include netlink | tar -x -C "$dir"
	else
		rsync -a --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod' \
			--exclude='*.mod.c' --exclude='mrc_bindings_generated.rs' \
			--include='/Kbuild' --include='/*.rs' --include='/*.c' \
			--include='/include/***' --include='/netlink/***' --exclude='*' "$top/" "$dir/"
	fi
	make -s -C "$kdir" M="$dir" LLVM="$LLVM_SUFFIX" modules >&2
	echo "$dir/mrc.ko"
}

ko_a=$(build "$1" "$out/a")
ko_b=$(build "${2:-}" "$out/b")
make -s -C "$top" tools
echo "A: ${1} ${AB_PARAMS_A:-} ${AB_SET_A:-}" >&2
echo "B: ${2:-working tree} ${AB_PARAMS_B:-} ${AB_SET_B:-}" >&2
exec scripts/vm.sh --flavor release env \
	AB_PARAMS_A="${AB_PARAMS_A:-}" AB_PARAMS_B="${AB_PARAMS_B:-}" \
	AB_SET_A="${AB_SET_A:-}" AB_SET_B="${AB_SET_B:-}" \
	AB_MTU="${AB_MTU:-1500}" AB_ROUNDS="${AB_ROUNDS:-3}" AB_SECS="${AB_SECS:-5}" \
	AB_GRO="${AB_GRO:-0}" AB_RFS="${AB_RFS:-0}" AB_MODE="${AB_MODE:-throughput}" \
	"$top/bench/ab-guest.sh" "$ko_a" "$ko_b" "$top/tools/target/release/mrc-perf"
