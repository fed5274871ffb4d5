#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo-pytorch`: PyTorch DDP training between two namespaces in the
# test VM, over MRC and over TCP, with a plane taken down mid-training (see
# scripts/demo-pytorch-guest.sh for the runs and their settings). Sets up
# what is missing (cached: the test kernel, the torch venv), builds mrc.ko
# and the tools, then boots the VM. The VM's output is also kept in
# DEMO_LOG (default /tmp/mrc-demo-pytorch-TIME.log). Takes about 10
# minutes under TCG: each run starts two Python processes that import
# torch, about a minute each.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# setup.sh runs scripts/setup-pytorch.sh too (the torch venv).
scripts/setup.sh debug
make -s KDIR="$(scripts/kdir.sh debug)" modules
make -s tools
log=${DEMO_LOG:-/tmp/mrc-demo-pytorch-$(date +%Y%m%d-%H%M%S).log}
envs=()
while IFS= read -r v; do
	envs+=("$v=${!v}")
done < <(compgen -e | grep -E '^(DEMO_|MRC_TORCH_PY$|MRC_CACHE$)' | grep -vx DEMO_LOG || true)
echo "VM output also in $log" >&2
scripts/vm.sh "$(printf '%q ' env "${envs[@]}" "$top/scripts/demo-pytorch-guest.sh")" 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
