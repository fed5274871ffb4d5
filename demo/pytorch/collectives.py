#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Gloo collectives between processes, with every result checked exactly.

For each tensor size from 4 bytes up to --max-bytes (growing 4x, the last
one --max-bytes itself) and each element type (int32, float32), runs
all_reduce (sum), broadcast (the root turns with the iteration) and
all_gather --iters times. Every rank fills its tensors with a pattern of
its rank, the iteration and the element index, so each result is known in
advance; integer values below 2^24 make float32 sums exact too. A result
that differs in any element is reported and the run exits 1 (on every rank:
the failures are summed over the group at the end).

Rank 0 prints one JSON line per size and operation (median time over the
iterations, algorithm bandwidth), then a summary line.

    python3 collectives.py --rank 0 --world-size 2 --master-addr 10.0.0.1 &
    python3 collectives.py --rank 1 --world-size 2 --master-addr 10.0.0.1
"""

import argparse
import statistics
import sys
import time

from common import add_rendezvous_args, emit, init


def sizes(max_bytes: int) -> list[int]:
    """4, 16, 64, ... bytes up to max_bytes, and max_bytes (a multiple of 4)."""
    out, s = [], 4
    while s < max_bytes:
        out.append(s)
        s *= 4
    out.append(max_bytes)
    return out


def pattern(torch, n: int, rank: int, it: int, dtype):
    """n elements that depend on rank, iteration and index: values below
    65521, so that sums over up to 256 ranks are exact in float32."""
    base = torch.arange(n, dtype=torch.int64)
    return ((base * 40503 + rank * 97 + it * 31) % 65521).to(dtype)


def first_difference(torch, got, want) -> str:
    bad = (got != want).nonzero()
    i = int(bad[0][0]) if len(bad) else -1
    return (f"{len(bad)} of {want.numel()} elements differ; first at {i}: "
            f"got {got[i].item()}, want {want[i].item()}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rendezvous_args(p)
    p.add_argument("--max-bytes", type=int, default=4 << 20,
                   help="largest tensor in bytes (default 4 MiB; at least 4)")
    p.add_argument("--iters", type=int, default=5, help="iterations per size and operation")
    p.add_argument("--inject-error", type=int, metavar="RANK", default=-1,
                   help="test of the checks: RANK changes one element of its first "
                        "all_reduce result before checking it")
    args = p.parse_args()
    if args.max_bytes < 4:
        p.error("--max-bytes must be at least 4")
    args.max_bytes -= args.max_bytes % 4

    t_import = time.monotonic()
    import torch
    import torch.distributed as dist
    t_import = time.monotonic() - t_import
    t_init = init(args)
    rank, world = args.rank, args.world_size
    if rank == 0:
        emit({"event": "start", "torch": torch.__version__, "world_size": world,
              "import_s": round(t_import, 3), "rendezvous_s": round(t_init, 3),
              "max_bytes": args.max_bytes, "iters": args.iters})

    failures = 0
    checks = 0
    t_all = time.monotonic()
    for dtype in (torch.int32, torch.float32):
        for nbytes in sizes(args.max_bytes):
            n = nbytes // 4
            times = {"all_reduce": [], "broadcast": [], "all_gather": []}
            for it in range(args.iters):
                exact = [pattern(torch, n, r, it, torch.int64) for r in range(world)]
                mine = [e.to(dtype) for e in exact]

                t = mine[rank].clone()
                t0 = time.perf_counter()
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
                times["all_reduce"].append(time.perf_counter() - t0)
                if rank == args.inject_error and checks == 0:
                    t[n // 2] += 1
                want = torch.stack(exact).sum(dim=0).to(dtype)
                checks += 1
                if not torch.equal(t, want):
                    failures += 1
                    print(f"rank {rank}: all_reduce {dtype} {nbytes} B iteration {it}: "
                          f"{first_difference(torch, t, want)}", file=sys.stderr, flush=True)

                root = it % world
                t = mine[rank].clone() if rank == root else torch.zeros(n, dtype=dtype)
                t0 = time.perf_counter()
                dist.broadcast(t, src=root)
                times["broadcast"].append(time.perf_counter() - t0)
                checks += 1
                if not torch.equal(t, mine[root]):
                    failures += 1
                    print(f"rank {rank}: broadcast from {root} {dtype} {nbytes} B iteration "
                          f"{it}: {first_difference(torch, t, mine[root])}",
                          file=sys.stderr, flush=True)

                out = [torch.zeros(n, dtype=dtype) for _ in range(world)]
                t0 = time.perf_counter()
                dist.all_gather(out, mine[rank])
                times["all_gather"].append(time.perf_counter() - t0)
                for r in range(world):
                    checks += 1
                    if not torch.equal(out[r], mine[r]):
                        failures += 1
                        print(f"rank {rank}: all_gather {dtype} {nbytes} B iteration {it}, "
                              f"part of rank {r}: {first_difference(torch, out[r], mine[r])}",
                              file=sys.stderr, flush=True)
            if rank == 0:
                for op, ts in times.items():
                    med = statistics.median(ts)
                    emit({"op": op, "dtype": str(dtype).removeprefix("torch."), "bytes": nbytes,
                          "iters": len(ts), "median_s": round(med, 6),
                          "max_s": round(max(ts), 6),
                          "algbw_MBps": round(nbytes / med / 1e6, 3) if med > 0 else None})

    # Every rank learns whether any rank saw a wrong result.
    total = torch.tensor([failures, checks], dtype=torch.int64)
    dist.all_reduce(total)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        emit({"event": "end", "checks": int(total[1]), "failures": int(total[0]),
              "seconds": round(time.monotonic() - t_all, 3)})
    if int(total[0]):
        print(f"rank {rank}: {int(total[0])} of {int(total[1])} checks failed in the group",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
