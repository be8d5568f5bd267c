"""The baseline of ``benchmarks/probe.py``: a bare torch.distributed all-reduce loop, one rank.

Started by that benchmark under plain torchrun (``python -m torch.distributed.run --nproc_per_node
N --standalone benchmarks/plain_allreduce.py --device cpu|cuda --sizes 8,64,... --iters 50
--warmup 5``). gloo on CPU, NCCL on ``cuda:LOCAL_RANK``. Per size: ``warmup`` untimed in-place
all-reduces, then ``iters`` timed ones; rank 0 prints one JSON line with the slowest rank's mean
seconds per all-reduce. No result checks, heartbeats or stacks: just the loop the probe times.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    """Time the loop at every size and print the JSON line (rank 0)."""
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--sizes", required=True)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        sync()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        sync()
        mean = (time.perf_counter() - start) / args.iters
        elapsed = torch.tensor([mean], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        rows.append({"bytes": nbytes, "time_s": float(elapsed)})
    if dist.get_rank() == 0:
        print(json.dumps(rows), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
