# SPDX-License-Identifier: GPL-2.0
# Shared settings for the project's scripts. Sourced, not run.

KVER_MAJOR=6.12
LLVM_SUFFIX=-14
BINDGEN_VERSION=0.69.5
VNG_VERSION=1.42
MRC_CACHE=${MRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mrc}
MRC_VENV=$MRC_CACHE/venv
MRC_TOP=${MRC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export PATH="$HOME/.cargo/bin:$MRC_VENV/bin:$PATH"

# Full version of the Debian kernel source package, e.g. 6.12.117.
kernel_full_version() {
	dpkg-query -W -f='${Version}' "linux-source-$KVER_MAJOR" 2>/dev/null | sed 's/-.*//'
}

# Build directory of the test kernel: one per kernel version, toolchain and
# config, so a rebuild happens only when one of them changes.
kernel_build_dir() {
	local flavor=$1 frags=("$MRC_TOP/selftests/config") h
	[ "$flavor" = debug ] && frags+=("$MRC_TOP/selftests/config.debug")
	h=$({ cat "${frags[@]}"; rustc --version; echo "clang$LLVM_SUFFIX"; } | sha256sum | cut -c1-12)
	echo "$MRC_CACHE/kernel/$(kernel_full_version)-$flavor-$h"
}

# Unpacked kernel source of the test kernel.
kernel_src_dir() {
	echo "$MRC_CACHE/src/linux-$(kernel_full_version)"
}

# Builds mrc.ko for the release test kernel in a copy of the module sources
# (the tree's own build, for the debug kernel, is left alone) and prints
# the module's path. Build products of earlier runs stay in the copy, so
# rebuilds are incremental: a source is copied only when its content
# differs, and then stamped with the time of the copy, so that it is newer
# than the objects an earlier build (of another tree, perhaps) left.
build_release_module() {
	local kdir moddir
	kdir=$(kernel_build_dir release)
	moddir=$MRC_CACHE/bench/module-$(basename "$kdir")
	mkdir -p "$moddir" || return
	rsync -rlp --checksum --delete \
		--exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='*.d' --exclude='*.rmeta' \
		--exclude='mrc_bindings_generated.rs' --exclude='modules.order' --exclude='Module.symvers' \
		--include='/Kbuild' --include='/*.rs' --include='/*.c' \
		--include='/include/***' --include='/netlink/***' --exclude='*' \
		"$MRC_TOP/" "$moddir/" || return
	printf 'building mrc.ko for %s in %s\n' "$(basename "$kdir")" "$moddir" >&2
	make -s -C "$kdir" M="$moddir" LLVM="$LLVM_SUFFIX" modules >&2 || return
	echo "$moddir/mrc.ko"
}
