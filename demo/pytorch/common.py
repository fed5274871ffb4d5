# SPDX-License-Identifier: GPL-2.0
"""What the demos share: the rendezvous arguments and process group set-up.

Rank, world size and the master's address and port come from the command
line, else from the environment variables torch.distributed's launchers set
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). The process group uses the
Gloo backend with init_method="tcp://MASTER_ADDR:MASTER_PORT": rank 0 listens
on that address for the TCP store, and Gloo then connects every pair of ranks
over TCP as well.
"""

import argparse
import datetime
import json
import os
import sys


def add_rendezvous_args(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    p.add_argument("--rank", type=int, default=int(env("RANK", "-1")),
                   help="this process's rank (default: $RANK)")
    p.add_argument("--world-size", type=int, default=int(env("WORLD_SIZE", "2")),
                   help="number of processes (default: $WORLD_SIZE, else 2)")
    p.add_argument("--master-addr", default=env("MASTER_ADDR", "127.0.0.1"),
                   help="address of rank 0 (default: $MASTER_ADDR, else 127.0.0.1)")
    p.add_argument("--master-port", type=int, default=int(env("MASTER_PORT", "29500")),
                   help="TCP port of rank 0's store (default: $MASTER_PORT, else 29500)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a rendezvous or collective may take")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the same arithmetic every run)")


def init(args) -> float:
    """Joins the process group; returns the seconds the rendezvous took."""
    import time
    import torch
    import torch.distributed as dist

    if args.rank < 0 or args.rank >= args.world_size:
        sys.exit(f"rank {args.rank} is not in 0..{args.world_size - 1}: give --rank or set RANK")
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit("this torch build has no torch.distributed with Gloo")
    torch.set_num_threads(args.threads)
    host = args.master_addr
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    t0 = time.monotonic()
    dist.init_process_group(
        backend="gloo",
        init_method=f"tcp://{host}:{args.master_port}",
        rank=args.rank,
        world_size=args.world_size,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    return time.monotonic() - t0


def emit(obj) -> None:
    """Prints one JSON line and flushes it, so a reader sees it at once."""
    print(json.dumps(obj, sort_keys=False), flush=True)
