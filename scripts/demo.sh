#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The demo: sets up what is missing (cached), builds mrc.ko, boots the test
# kernel in a VM and shows MRC there: the module and its socket family, the
# per-namespace UDP tunnel in two namespaces joined by veth planes, and the
# receive counters after traffic at the port.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/setup.sh debug
make -s KDIR="$(scripts/kdir.sh debug)" modules
make -s tools
exec scripts/vm.sh "$top/scripts/demo-guest.sh"
