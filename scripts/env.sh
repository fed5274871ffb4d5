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
