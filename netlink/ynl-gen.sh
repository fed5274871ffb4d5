#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the kernel tree's ynl-gen-c.py on netlink/mrc.yaml.
#
#   netlink/ynl-gen.sh KSRC                 regenerate include/uapi/linux/mrc_netlink.h
#                                           and netlink/mrc_nl_gen.[ch]
#   netlink/ynl-gen.sh --check KSRC         exit 1 if any of them differs from the spec
#   netlink/ynl-gen.sh --kernel DIR KSRC    write the kernel policy tables to DIR
#
# KSRC is a Linux 6.12 source tree. ynl-gen-c.py only accepts a spec inside a
# kernel-like tree: it loads the schema from the spec's grandparent directory
# and names the spec relative to the nearest directory holding MAINTAINERS
# (it loops forever when there is none). A temporary directory provides both,
# so the generated files name the spec "netlink/mrc.yaml".
set -eu

# Debian's interpreter, which has python3-yaml and python3-jsonschema.
PYTHON=${PYTHON:-/usr/bin/python3}

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

# Everything generated from the spec: the uapi header, and the kernel's
# policies and split-ops table (netlink/mrc_nl_gen.[ch], compiled into mrc.ko).
generate() { # OUT_HEADER OUT_KDIR
	$PYTHON "$gen" --mode uapi --header --spec "$spec" -o "$1"
	$PYTHON "$gen" --mode kernel --header --spec "$spec" -o "$2/mrc_nl_gen.h"
	$PYTHON "$gen" --mode kernel --source --spec "$spec" -o "$2/mrc_nl_gen.c"
}

case $mode in
uapi)
	generate "$header" "$top/netlink"
	;;
check)
	mkdir "$stage/out"
	generate "$stage/out/mrc_netlink.h" "$stage/out"
	stale=0
	for pair in "$header:mrc_netlink.h" "$top/netlink/mrc_nl_gen.h:mrc_nl_gen.h" \
		"$top/netlink/mrc_nl_gen.c:mrc_nl_gen.c"; do
		diff -u "${pair%%:*}" "$stage/out/${pair#*:}" || stale=1
	done
	if [ $stale -ne 0 ]; then
		echo "$0: generated files are stale; run: make netlink-gen" >&2
		exit 1
	fi
	;;
kernel)
	mkdir -p "$outdir"
	generate "$stage/mrc_netlink.h" "$outdir"
	;;
esac
