#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Prints the kernel build directory to build mrc.ko against: the project's
# test kernel of the given flavour (debug|release) if it has been built,
# else the running kernel's.
. "$(dirname "$0")/env.sh"
flavor=${1:-debug}
if command -v dpkg-query >/dev/null && [ -n "$(kernel_full_version)" ]; then
	d=$(kernel_build_dir "$flavor")
	[ -f "$d/.mrc-built" ] && { echo "$d"; exit 0; }
fi
echo "/lib/modules/$(uname -r)/build"
