#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Every test of the project, in order: setup (cached), host tests of the
# sans-IO core and tools, formatting, the uapi header as plain C, the module
# build and its clippy lint, then the selftests in the VM on the debug test
# kernel (which also scan for splats and kmemleak reports). The last line is
# "N passed, N failed"; the exit code is non-zero on any failure.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/env.sh

passed=0
failed=0
failed_steps=()
logdir=$(mktemp -d)
pass() { passed=$((passed + $1)); }
fail() { failed=$((failed + $1)); }

# step NAME COMMAND...: one test; output goes to a log shown on failure.
step() {
	local name=$1 log="$logdir/$1.log"
	shift
	printf '== %s\n' "$name"
	if "$@" >"$log" 2>&1; then
		pass 1
		echo "   ok"
		return 0
	fi
	fail 1
	failed_steps+=("$name")
	tail -n 40 "$log" | sed 's/^/   | /'
	echo "   FAILED ($name)"
	return 1
}

finish() {
	echo
	# Repeated at the end, where a truncated log still shows them.
	if [ "$failed" -gt 0 ]; then
		echo "failures:"
		[ ${#failed_steps[@]} -eq 0 ] || printf '  %s\n' "${failed_steps[@]}"
		grep -h -E '^not ok |\[FAIL\]|^test .* FAILED$' "$logdir"/*.log 2>/dev/null | sed 's/^/  /' || true
	fi
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

step setup scripts/setup.sh debug || finish
kdir=$(scripts/kdir.sh debug)

# Host tests: each cargo test counts as one test.
printf '== host tests (tools/)\n'
if (cd tools && cargo test --workspace 2>&1) >"$logdir/cargo-test.log"; then :; fi
read -r hp hf < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$logdir/cargo-test.log")
if ! grep -q '^test result:' "$logdir/cargo-test.log" || grep -q '^error' "$logdir/cargo-test.log"; then
	tail -n 40 "$logdir/cargo-test.log" | sed 's/^/   | /'
	hf=$((hf + 1))
fi
echo "   $hp passed, $hf failed"
pass "$hp"
fail "$hf"

step rustfmt make -s fmt-check
step netlink-spec make -s netlink-check
step bench-report /usr/bin/python3 bench/report.py --self-test
step uapi-header-c bash -c "printf '#include <sys/socket.h>\n#include <linux/mrc.h>\n#include <linux/mrc_netlink.h>\nint main(void){struct sockaddr_mrc a={.smrc_family=AF_MRC};return sizeof(a)==28?0:1;}\n' |
	cc -std=c99 -Wall -Werror -pedantic -I include/uapi -x c -o $logdir/uapi - && $logdir/uapi"

# The module must build without a single warning, with rustc and clippy.
no_warnings() { "$@" && ! grep -E '^(warning|error)(\[|:)' "$logdir/last-build.log"; }
build() { make -s KDIR="$kdir" "$@" >"$logdir/last-build.log" 2>&1; local r=$?; cat "$logdir/last-build.log"; return $r; }
rm -f mrc_main.o
step module-build no_warnings build modules
rm -f mrc_main.o
step module-clippy no_warnings build clippy
[ -f mrc.ko ] || finish
step tools-build make -s tools

printf '== selftests (VM, %s)\n' "$(basename "$kdir")"
scripts/vm.sh selftests/run.sh 2>&1 | tee "$logdir/vm.log" | sed 's/^/   | /'
vp=$(grep -c '^ok ' "$logdir/vm.log")
vf=$(grep -c '^not ok ' "$logdir/vm.log")
if ! grep -q '^# VM: ' "$logdir/vm.log"; then
	echo "   the VM run did not complete"
	vf=$((vf + 1))
fi
pass "$vp"
fail "$vf"
finish
