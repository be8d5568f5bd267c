"""A plain torch.distributed all-reduce loop, the baseline probe-nccl is compared against.

Run under torchrun: ``python -m torch.distributed.run --nproc_per_node 2 --standalone
benchmarks/plain_allreduce.py --sizes 8,16,... --iters 50 --warmup 5``. Prints one JSON line
(rank 0): per size the slowest rank's seconds per in-place all-reduce. No checks, no heartbeats.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", required=True)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        buf = torch.ones(nbytes // 4, dtype=torch.float32)
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        elapsed = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        rows.append({"bytes": nbytes, "time_s": float(elapsed)})
    if dist.get_rank() == 0:
        print(json.dumps(rows))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
