#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Idempotent setup: host packages, Rust pieces the kernel needs, virtme-ng,
# PyTorch (scripts/setup-pytorch.sh), the kernel source and the
# Rust-enabled test kernel. Safe to re-run: every step checks first and the
# kernel build is cached outside the repository, keyed by kernel version,
# toolchain and config hash.
#
# Usage: scripts/setup.sh [debug|release]   (default: debug)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
flavor=${1:-debug}
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"

log() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

APT_PKGS=(build-essential clang-14 llvm-14 lld-14 libclang-14-dev flex bison bc
	libelf-dev libssl-dev cpio xz-utils kmod iproute2 qemu-system-x86
	busybox-static udev "linux-source-$KVER_MAJOR" python3-pip python3-venv
	rsync ethtool python3-yaml python3-jsonschema python3-matplotlib linux-perf
	iperf3 curl mptcpize)

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing: ${missing[*]}"
	as_root apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "adding rust-src"
	rustup component add rust-src
fi

if [ "$(bindgen --version 2>/dev/null | awk '{print $2}')" != "$BINDGEN_VERSION" ]; then
	log "installing bindgen-cli $BINDGEN_VERSION"
	cargo install --locked bindgen-cli --version "$BINDGEN_VERSION"
fi

if [ ! -x "$MRC_VENV/bin/vng" ] || [ "$("$MRC_VENV/bin/vng" --version 2>/dev/null | awk '{print $2}')" != "$VNG_VERSION" ]; then
	log "installing virtme-ng $VNG_VERSION into $MRC_VENV"
	python3 -m venv "$MRC_VENV"
	"$MRC_VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
fi

# PyTorch for the CPU in a venv of its own, for demo/pytorch/, the
# selftest mrc_pytorch.sh and `make demo-pytorch` (idempotent: a venv that
# is up to date is only checked, in about 2 s).
MRC_CACHE=$MRC_CACHE "$here/scripts/setup-pytorch.sh"

# The test kernel. Source is unpacked once per version; each config gets its
# own O= build directory, named by the hash of everything that affects it.
tarball=$(ls /usr/src/linux-source-"$KVER_MAJOR".tar.* 2>/dev/null | head -n1)
[ -n "$tarball" ] || { log "linux-source-$KVER_MAJOR tarball not found in /usr/src"; exit 1; }
kver=$(kernel_full_version)
src="$MRC_CACHE/src/linux-$kver"
if [ ! -f "$src/.unpacked" ]; then
	log "unpacking $tarball into $src"
	rm -rf "$src" && mkdir -p "$src"
	tar -xf "$tarball" -C "$src" --strip-components=1
	touch "$src/.unpacked"
fi

kdir=$(kernel_build_dir "$flavor")
if [ -f "$kdir/.mrc-built" ]; then
	log "test kernel ($flavor) cached at $kdir"
	exit 0
fi

log "building $flavor test kernel $kver in $kdir (takes several minutes)"
mkdir -p "$kdir"
frags=("$here/selftests/config")
[ "$flavor" = debug ] && frags+=("$here/selftests/config.debug")
make -s -C "$src" O="$kdir" ARCH=x86_64 LLVM="$LLVM_SUFFIX" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$kdir" "$kdir/.config" "${frags[@]}" >/dev/null
make -s -C "$src" O="$kdir" ARCH=x86_64 LLVM="$LLVM_SUFFIX" olddefconfig >/dev/null
for f in "${frags[@]}"; do
	# Every option we ask for must survive olddefconfig; a silently
	# dropped dependency would make the tests run on the wrong kernel.
	while IFS= read -r line; do
		case "$line" in CONFIG_*=y|CONFIG_*=m) ;; *) continue ;; esac
		grep -qx "$line" "$kdir/.config" || { log "config option lost: $line"; exit 1; }
	done <"$f"
done
make -C "$src" O="$kdir" ARCH=x86_64 LLVM="$LLVM_SUFFIX" -j"$(nproc)" bzImage modules >"$kdir/build.log" 2>&1 ||
	{ tail -n 40 "$kdir/build.log"; log "kernel build failed, full log: $kdir/build.log"; exit 1; }
touch "$kdir/.mrc-built"
log "test kernel ready: $kdir/arch/x86/boot/bzImage"
