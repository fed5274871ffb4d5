#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A small data-parallel training run whose result can be compared bit for bit.

A fixed-seed MLP learns a fixed random "teacher" MLP from synthetic data:
every step, each rank draws its own batch from a generator seeded by (seed,
rank, step), and DistributedDataParallel averages the gradients over the
group with Gloo (CPU). With the same seed, world size, steps and thread
count, every run does the same arithmetic, so the final weights are the same
to the last bit, whatever network carried the gradients: a transport that
lost, duplicated or reordered a byte would change the SHA-256 printed at the
end (or hang the run).

Rank 0 prints one JSON line per step (its local loss, the step's time and
the wall-clock time at its end, in Unix seconds), then
a final line with the loss averaged over the group, its exact value in hex,
and the SHA-256 of the final weights; every rank checks that its weights
hash the same as rank 0's and exits 1 if not.

    python3 train.py --rank 0 --world-size 2 --master-addr 10.0.0.1 --steps 50 &
    python3 train.py --rank 1 --world-size 2 --master-addr 10.0.0.1 --steps 50
"""

import argparse
import hashlib
import sys
import time

from common import add_rendezvous_args, emit, init


def weights_sha256(torch, model) -> str:
    """SHA-256 over the state dict: names, shapes, dtypes and raw bytes."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def mlp(torch, sizes):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rendezvous_args(p)
    p.add_argument("--steps", type=int, default=50, help="training steps")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--inputs", type=int, default=64, help="input features")
    p.add_argument("--hidden", type=int, default=256, help="hidden units (two hidden layers)")
    p.add_argument("--outputs", type=int, default=8, help="outputs")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=1234, help="seed of the model and the data")
    p.add_argument("--bucket-mb", type=float, default=25.0,
                   help="DDP gradient bucket size in MB (smaller: more, smaller all_reduces)")
    args = p.parse_args()

    t_import = time.monotonic()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    t_import = time.monotonic() - t_import

    torch.use_deterministic_algorithms(True)
    t_init = init(args)
    rank, world = args.rank, args.world_size

    sizes = [args.inputs, args.hidden, args.hidden, args.outputs]
    # The same initial weights on every rank (DDP also broadcasts rank 0's).
    torch.manual_seed(args.seed)
    model = mlp(torch, sizes)
    teacher_gen = torch.Generator().manual_seed(args.seed + 1)
    teacher = [torch.randn(a, b, generator=teacher_gen) / a ** 0.5
               for a, b in ((args.inputs, args.hidden), (args.hidden, args.outputs))]
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    n_params = sum(t.numel() for t in model.parameters())
    if rank == 0:
        emit({"event": "start", "torch": torch.__version__, "world_size": world,
              "params": n_params, "grad_bytes": n_params * 4, "steps": args.steps,
              "batch_per_rank": args.batch, "threads": args.threads,
              "import_s": round(t_import, 3), "rendezvous_s": round(t_init, 3),
              "initial_sha256": weights_sha256(torch, model)})

    loss = torch.zeros(())
    t_train = time.monotonic()
    step_times = []
    for step in range(args.steps):
        g = torch.Generator().manual_seed((args.seed * 1_000_003 + rank) * 1_000_003 + step)
        x = torch.randn(args.batch, args.inputs, generator=g)
        with torch.no_grad():
            y = torch.tanh(x @ teacher[0]) @ teacher[1]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP all_reduces the gradients here
        opt.step()
        dt = time.perf_counter() - t0
        step_times.append(dt)
        if rank == 0:
            emit({"step": step, "loss": loss.item(), "step_ms": round(dt * 1e3, 3),
                  "t": round(time.time(), 3)})
    train_s = time.monotonic() - t_train

    # The loss of the last step averaged over the group, and every rank's
    # weights compared with rank 0's.
    final = loss.detach().clone().reshape(1)
    dist.all_reduce(final)
    final_loss = final.item() / world
    digest = weights_sha256(torch, model)
    mine = torch.frombuffer(bytearray(bytes.fromhex(digest)), dtype=torch.uint8)
    root = mine.clone()
    dist.broadcast(root, src=0)
    same = torch.equal(mine, root)
    agree = torch.tensor([0 if same else 1], dtype=torch.int64)
    dist.all_reduce(agree)
    dist.barrier()
    dist.destroy_process_group()
    if not same:
        print(f"rank {rank}: weights differ from rank 0's: {digest}", file=sys.stderr)
    if rank == 0:
        st = sorted(step_times)
        emit({"event": "end", "steps": args.steps, "world_size": world,
              "final_loss": final_loss, "final_loss_hex": float(final_loss).hex(),
              "sha256": digest, "ranks_agree": int(agree.item()) == 0,
              "train_s": round(train_s, 3),
              "step_ms_median": round(st[len(st) // 2] * 1e3, 3) if st else None})
    return 0 if int(agree.item()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
