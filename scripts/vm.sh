#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs a command as root inside a QEMU VM booted on the project's test
# kernel (virtme-ng, host root file system shared read-only, TCG since KVM
# is not usable here). Output and exit code are the command's.
#
# Usage: scripts/vm.sh [--flavor debug|release] COMMAND...
set -euo pipefail
. "$(dirname "$0")/env.sh"

flavor=debug
if [ "${1:-}" = --flavor ]; then
	flavor=$2
	shift 2
fi
kdir=$(kernel_build_dir "$flavor")
[ -f "$kdir/.mrc-built" ] || { echo "test kernel not built: run make setup" >&2; exit 1; }

append="root=/dev/root panic_on_warn=1 oops=panic"
# The guest caches the shared root file system (9p cache=loose): it is
# read-only to the guest and does not change under a run. Under TCG every
# program start costs a fraction of a second and a Python start seconds;
# caching cuts both, and the boot, by about 40 %. The kernel takes the last
# rootflags, so these replace virtme-ng's (the same with the cache added).
append+=" rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose"
[ "$flavor" = debug ] && append+=" kmemleak=on"
# 2 GiB: two PyTorch ranks need about 700 MB each (MRC_VM_MEMORY overrides).
exec vng --run "$kdir/arch/x86/boot/bzImage" --disable-kvm --cpus 2 --memory "${MRC_VM_MEMORY:-2G}" \
	--append "$append" --exec "$*"
