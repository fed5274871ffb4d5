#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# PyTorch's torch.distributed (Gloo backend, CPU) between two namespaces
# over MRC with mrcize: the namespaces are joined by two veth planes, each
# plane an MRC endpoint on both sides; rank 0 runs in A, rank 1 in B, both
# under `mrcize run`, with init_method tcp://ADDR:PORT at A's address on
# plane 1. demo/pytorch/collectives.py runs all_reduce, broadcast and
# all_gather from 4 B to 1 MiB and checks every result exactly.
#   a) both ranks exit 0 (every check passed, on every rank);
#   b) it went over MRC: both namespaces opened MRC connections (the
#      c10d store's and Gloo's), A's and B's MRC byte counters cover at
#      least what all_gather alone delivered, TCP opened no connection in
#      either namespace, mrcize logged nothing.
# Needs the torch venv of scripts/setup-pytorch.sh (`make setup` installs
# it): without it the test fails. Under TCG each rank's `import torch`
# takes about a minute; MRC_PYTORCH_MAX_BYTES and MRC_PYTORCH_ITERS change
# the run.

. "$(dirname "$0")/mrc_lib.sh"
mrc_require_root
MRCIZE=${MRCIZE:-$MRC_DIR/tools/target/release/mrcize}
TORCH_PY=${MRC_TORCH_PY:-${MRC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mrc}/venv-torch/bin/python}
DEMO=$MRC_DIR/demo/pytorch
MAX_BYTES=${MRC_PYTORCH_MAX_BYTES:-1048576}
ITERS=${MRC_PYTORCH_ITERS:-3}
# The ranks' own limit (rendezvous, each collective) and the run's.
RANK_TIMEOUT=300
RUN_TIMEOUT=900

[ -x "$MRCIZE" ] || { mrc_fail "mrcize not built (make tools)"; mrc_exit; }
if [ ! -x "$TORCH_PY" ]; then
	mrc_fail "no PyTorch venv at $TORCH_PY: run scripts/setup-pytorch.sh (make setup does)"
	mrc_exit
fi
mrc_load || exit $KSFT_FAIL
tmp=$(mktemp -d)
trap 'mrc_cleanup; rm -rf "$tmp"' EXIT
mrc_netns_add A
mrc_netns_add B

mrc_planes 2 82
MASTER=10.82.1.1
PORT=29500

# rank NS R IFACE: starts rank R of collectives.py in NS under mrcize.
# Gloo binds to IFACE's address (GLOO_SOCKET_IFNAME): by default it takes
# the address the host name resolves to, the same in both namespaces.
rank() {
	ip netns exec "$1" env GLOO_SOCKET_IFNAME="$3" \
		timeout "$RUN_TIMEOUT" "$MRCIZE" run "$TORCH_PY" "$DEMO/collectives.py" \
		--rank "$2" --world-size 2 --master-addr "$MASTER" --master-port "$PORT" \
		--timeout "$RANK_TIMEOUT" --max-bytes "$MAX_BYTES" --iters "$ITERS" \
		>"$tmp/rank$2.out" 2>"$tmp/rank$2.err" &
}

# sizes MAX: the tensor sizes collectives.py runs: 4, 16, ... below MAX,
# and MAX (rounded down to a multiple of 4).
sizes() {
	local s=4
	while [ "$s" -lt "$1" ]; do
		echo $s
		s=$((s * 4))
	done
	echo $(($1 - $1 % 4))
}
nsizes=$(sizes "$MAX_BYTES" | wc -l)
sum_sizes=$(($(sizes "$MAX_BYTES" | paste -sd+)))

rx0_a=$(mrc_stat "$A" rx_bytes)
rx0_b=$(mrc_stat "$B" rx_bytes)
op0_a=$(mrc_stat "$A" conns_opened)
op0_b=$(mrc_stat "$B" conns_opened)
tcp0_a=$(mrc_tcp_opens "$A")
tcp0_b=$(mrc_tcp_opens "$B")

echo "# collectives.py up to $MAX_BYTES B, $ITERS iterations, at $SECONDS s"
rank "$A" 0 va1
pid0=$!
rank "$B" 1 vb1
pid1=$!
wait $pid0
rc0=$?
wait $pid1
rc1=$?
echo "# ranks done at $SECONDS s"
sed 's/^/# rank 0: /' "$tmp/rank0.out" | grep -E '"event"|"bytes": '"$MAX_BYTES"','
for r in 0 1; do
	[ "$(eval echo \$rc$r)" = 0 ] || sed "s/^/# rank $r stderr: /" "$tmp/rank$r.err" | tail -n 30
done
mrc_check "rank 0 exit status" 0 "$rc0"
mrc_check "rank 1 exit status" 0 "$rc1"
end=$(grep '"event": "end"' "$tmp/rank0.out")
checks=$(echo "$end" | sed -n 's/.*"checks": \([0-9]*\).*/\1/p')
failures=$(echo "$end" | sed -n 's/.*"failures": \([0-9]*\).*/\1/p')
# Per dtype, size and iteration: 1 all_reduce, 1 broadcast, 2 all_gather
# checks on each of the 2 ranks.
mrc_check "collectives: every result checked" $((2 * nsizes * ITERS * 4 * 2)) "${checks:-none}"
mrc_check "collectives: no wrong result" 0 "${failures:-none}"

# --- over MRC, not TCP ----------------------------------------------------
opened_a=$(($(mrc_stat "$A" conns_opened) - op0_a))
opened_b=$(($(mrc_stat "$B" conns_opened) - op0_b))
echo "# MRC connections opened: A $opened_a, B $opened_b"
# B: rank 1's store client and its Gloo pair with rank 0.
if [ "$opened_b" -ge 2 ] && [ "$opened_a" -ge 2 ]; then
	mrc_ok "MRC carried the store and Gloo connections"
else
	mrc_fail "MRC connections opened: A $opened_a, B $opened_b, expected 2 or more each"
fi
# all_gather alone gives each rank the other's tensor of every size,
# dtype and iteration.
want=$((2 * ITERS * sum_sizes))
rx_a=$(($(mrc_stat "$A" rx_bytes) - rx0_a))
rx_b=$(($(mrc_stat "$B" rx_bytes) - rx0_b))
echo "# MRC bytes received: A $rx_a, B $rx_b; all_gather's payload to each rank: $want"
if [ "$rx_a" -ge "$want" ] && [ "$rx_b" -ge "$want" ]; then
	mrc_ok "the tensors went over MRC"
else
	mrc_fail "MRC bytes received: A $rx_a, B $rx_b, expected $want or more each"
fi
mrc_check "no TCP connection in A" "$tcp0_a" "$(mrc_tcp_opens "$A")"
mrc_check "no TCP connection in B" "$tcp0_b" "$(mrc_tcp_opens "$B")"
mrc_check "mrcize logged nothing" "" "$(grep -h '^mrcize:' "$tmp"/rank*.err)"

mrc_exit
