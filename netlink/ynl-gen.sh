#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the kernel tree's ynl-gen-c.py on netlink/mrc.yaml.
#
#   netlink/ynl-gen.sh KSRC                 regenerate include/uapi/linux/mrc_netlink.h
#   netlink/ynl-gen.sh --check KSRC         exit 1 if that header differs from the spec
#   netlink/ynl-gen.sh --kernel DIR KSRC    write the kernel policy tables to DIR
#
# KSRC is a Linux 6.12 source tree. ynl-gen-c.py only accepts a spec inside a
# kernel-like tree: it loads the schema from the spec's grandparent directory
# and names the spec relative to the nearest directory holding MAINTAINERS
# (it loops forever when there is none). A temporary directory provides both,
# so the generated files name the spec "netlink/mrc.yaml".
set -eu

usage() {
	echo "usage: $0 [--check | --kernel DIR] KSRC" >&2
	exit 2
}

mode=uapi
outdir=
case "${1:-}" in
--check) mode=check; shift ;;
--kernel) mode=kernel; outdir=${2:-}; [ -n "$outdir" ] || usage; shift 2 ;;
esac
[ $# -eq 1 ] || usage
ksrc=$1

top=$(cd "$(dirname "$0")/.." && pwd)
gen=$ksrc/tools/net/ynl/ynl-gen-c.py
schema=$ksrc/Documentation/netlink/genetlink-legacy.yaml
header=$top/include/uapi/linux/mrc_netlink.h
[ -f "$gen" ] && [ -f "$schema" ] || {
	echo "$0: $ksrc is not a kernel source tree with tools/net/ynl" >&2
	exit 2
}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/netlink"
: >"$stage/MAINTAINERS"
ln -s "$schema" "$stage/genetlink-legacy.yaml"
ln -s "$top/netlink/mrc.yaml" "$stage/netlink/mrc.yaml"
spec=$stage/netlink/mrc.yaml

case $mode in
uapi)
	python3 "$gen" --mode uapi --header --spec "$spec" -o "$header"
	;;
check)
	python3 "$gen" --mode uapi --header --spec "$spec" -o "$stage/mrc_netlink.h"
	if ! diff -u "$header" "$stage/mrc_netlink.h"; then
		echo "$0: $header is stale; run: $0 KSRC" >&2
		exit 1
	fi
	;;
kernel)
	mkdir -p "$outdir"
	python3 "$gen" --mode kernel --header --spec "$spec" -o "$outdir/mrc_nl_gen.h"
	python3 "$gen" --mode kernel --source --spec "$spec" -o "$outdir/mrc_nl_gen.c"
	;;
esac
