#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Installs PyTorch for the CPU into a venv of the project's own, for the
# torch.distributed demos under demo/pytorch/: ${MRC_CACHE:-~/.cache/mrc}/venv-torch,
# made with Debian's /usr/bin/python3 (3.11) and python3-venv, holding
# exactly demo/pytorch/requirements.txt (torch 2.15.0 pinned, every wheel
# hash-checked, installed with --no-deps). Why that list and not the
# CPU-only wheels: demo/pytorch/README.md.
#
# Idempotent: a venv that already holds this list (a stamp of the list's
# hash) and imports torch is left as it is; a changed list is installed
# over it. Needs about 2.5 GB of download and 4.5 GB of disk while
# installing (4.1 GB after). Prints the torch version and whether Gloo is
# there; the venv's python is $MRC_CACHE/venv-torch/bin/python.
#
# Usage: scripts/setup-pytorch.sh [--force]   (--force: make the venv anew)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${MRC_CACHE:-$HOME/.cache/mrc}
venv=$cache/venv-torch
lock=$top/demo/pytorch/requirements.txt
py=/usr/bin/python3
torch_version=2.15.0
stamp=$venv/.mrc-requirements.sha256

say() { printf 'setup-pytorch: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ "${1:-}" = --force ] && { say "removing $venv"; rm -rf "$venv"; }

[ -x "$py" ] || die "$py not found (Debian's python3)"
grep -q "^torch==$torch_version " "$lock" || die "$lock does not pin torch==$torch_version"
want=$(sha256sum "$lock" | cut -d' ' -f1)

check() { # prints the version line; fails if torch does not import with Gloo
	"$venv/bin/python" - "$torch_version" <<'EOF'
import sys, time
t = time.monotonic()
import torch
import torch.distributed as dist
t = time.monotonic() - t
want = sys.argv[1]
ok = torch.__version__.split("+")[0] == want and dist.is_available() and dist.is_gloo_available()
print(f"torch {torch.__version__}, distributed {dist.is_available()}, "
      f"gloo {dist.is_gloo_available()}, cuda {torch.cuda.is_available()}, "
      f"import {t:.2f} s")
sys.exit(0 if ok else 1)
EOF
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && out=$(check 2>/dev/null); then
	say "up to date: $venv: $out"
	exit 0
fi

# python3-venv (ensurepip) is a separate Debian package.
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
	[ "$(id -u)" -eq 0 ] || die "python3-venv is missing: apt-get install python3-venv"
	say "installing python3-venv"
	apt-get install -y -q python3-venv >/dev/null
fi

mkdir -p "$cache"
avail_kb=$(df -Pk "$cache" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge $((5 * 1024 * 1024)) ] ||
	die "$cache has $((avail_kb / 1024)) MiB free; the install needs about 5 GiB"

start=$SECONDS
if [ ! -x "$venv/bin/python" ]; then
	say "creating $venv"
	"$py" -m venv "$venv"
fi
rm -f "$stamp"
say "installing $(grep -c '^[a-z]' "$lock") pinned wheels (about 2.5 GB) into $venv"
# No cache: the wheels would take another 2.5 GB under ~/.cache/pip.
"$venv/bin/python" -m pip install --no-cache-dir --no-deps --require-hashes \
	--disable-pip-version-check --progress-bar off -q -r "$lock"
out=$(check) || die "torch does not import with Gloo after the install: $out"
echo "$want" >"$stamp"
say "done in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1): $out"
