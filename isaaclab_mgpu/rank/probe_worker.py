"""The per-rank probe: ``python -m isaaclab_mgpu.rank.probe_worker --results DIR ...`` under torchrun.

Launched by :mod:`isaaclab_mgpu.launcher.probe.run` through the same launch core as ``train`` (one
torchrun launch per world size). Each rank:

1. registers the stack-dump signal (:mod:`isaaclab_mgpu.contract.stacks`; fatal signals too) to
   dump its Python stack into ``stack.<rank>.txt``, survives SIGUSR1 (SLURM's time-limit warning)
   and reports every stage it enters through the progress channel (``probe_channel``);
2. initialises the default process group from torchrun's environment (NCCL on ``cuda:LOCAL_RANK``,
   eagerly, so the communicator is built inside the timed init; gloo on CPU ranks) and times it;
3. times a barrier;
4. for every message size, out-of-place then in-place: ``warmup`` untimed all-reduces,
   ``iters`` timed ones, then one all-reduce of a fresh buffer whose every element is compared
   with its closed-form sum; results go to ``result.<rank>.json`` after each step.

Rank ``r`` contributes ``(r + 1) * (i % 13 + 1)`` at element ``i``, so element ``i`` of the sum
is ``n(n + 1)/2 * (i % 13 + 1)``: small integers, exact in float32 in any reduction order.
``torch.distributed.all_reduce`` only works in place; out-of-place here is what torch's
functional all-reduce does: copy the input into a separate output buffer, reduce that, and
check the input was left untouched. The timed loop includes that copy.

No option injects faults: tests do that from a stand-in module that wraps this one.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files, progress, stacks
from isaaclab_mgpu.contract.probe_channel import ELEMENT_BYTES, element_count, result_path

#: Values repeat with this period along a buffer (see the module docstring).
PATTERN_PERIOD = 13


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the worker's own arguments (the parent builds them; people rarely do)."""
    p = argparse.ArgumentParser(prog="python -m isaaclab_mgpu.rank.probe_worker", description=__doc__)
    p.add_argument("--results", required=True, help="Folder for progress reports, results and stacks.")
    p.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--sizes", required=True, help="Comma-separated message sizes in bytes.")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    return p.parse_args(argv)


class Rank:
    """This rank's identity and its side channel to the parent."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.channel = progress.Channel(progress.progress_path(folder, self.rank))
        self.results: dict[str, Any] = {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "sizes": [],
        }

    def save(self) -> None:
        """Publish the results so far."""
        files.write_text(result_path(self.folder, self.rank), json.dumps(self.results))  # atomically


def main(argv: list[str] | None = None) -> int:
    """Run the probe in this rank; return its exit code."""
    args = parse_args(argv)
    from isaaclab_mgpu.rank.title import name_this_rank

    name_this_rank("isaaclab_mgpu.probe_worker")
    folder = Path(args.results)
    me = Rank(folder)
    stack_file = stacks.register(progress.stack_path(folder, me.rank), fatal=True, truncate=True)
    me.channel.open()  # the progress report names where the stack-dump signal writes
    me.channel.identify(me.rank, me.local_rank, stack_file)
    progress.record_stop_requests()
    me.channel.report("import")

    from torch.distributed.elastic.multiprocessing.errors import record

    return record(probe)(args, me)


def probe(args: argparse.Namespace, me: Rank) -> int:
    """Initialise the process group, then time and check every message size."""
    import torch
    import torch.distributed as dist

    if args.device == "cuda":
        torch.cuda.set_device(me.local_rank)
        device = torch.device("cuda", me.local_rank)
    else:
        device = torch.device("cpu")
    me.results |= {"backend": args.backend, "device": str(device), "torch": torch.__version__}
    if args.backend == "nccl":
        me.results["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())

    me.channel.report("init")
    start = time.perf_counter()
    if args.backend == "nccl":
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    me.results["init_s"] = time.perf_counter() - start
    me.save()

    me.channel.report("barrier")
    start = time.perf_counter()
    if args.backend == "nccl":
        dist.barrier(device_ids=[me.local_rank])
    else:
        dist.barrier()
    _sync(torch, device)
    me.results["barrier_s"] = time.perf_counter() - start
    me.save()

    sizes = [int(s) for s in args.sizes.split(",")]
    for index, nbytes in enumerate(sizes):
        count = element_count(nbytes)
        entry: dict[str, Any] = {"bytes": count * ELEMENT_BYTES, "count": count, "type": "float32"}
        for mode in ("out-of-place", "in-place"):
            entry[mode] = measure(torch, dist, device, me, index, nbytes, mode, args.iters, args.warmup)
        me.results["sizes"].append(entry)
        me.save()

    me.channel.report("teardown")
    dist.destroy_process_group()
    me.channel.report("done")
    return 0


def measure(
    torch: Any, dist: Any, device: Any, me: Rank, index: int, nbytes: int, mode: str, iters: int, warmup: int
) -> dict[str, Any]:
    """Time ``iters`` all-reduces of ``nbytes`` in ``mode``, then count wrong elements."""
    n = me.world_size
    count = element_count(nbytes)
    base = (torch.arange(count, device=device) % PATTERN_PERIOD + 1).to(torch.float32)
    mine = base * (me.rank + 1)
    expected = base * (n * (n + 1) // 2)
    del base
    inplace = mode == "in-place"
    send = mine.clone()
    recv = send if inplace else torch.empty_like(send)

    def once() -> None:
        if not inplace:
            recv.copy_(send)
        dist.all_reduce(recv)

    where = {"index": index, "size": nbytes, "mode": mode}
    me.channel.report("collective", phase="warmup", **where)
    for _ in range(warmup):
        once()
    _sync(torch, device)

    me.channel.report("collective", phase="timed", **where)
    start = time.perf_counter()
    for _ in range(iters):
        once()
    _sync(torch, device)
    elapsed = (time.perf_counter() - start) / iters

    me.channel.report("collective", phase="check", **where)
    send.copy_(mine)  # in place, the timed loop overwrote the input with repeated sums
    once()
    _sync(torch, device)
    wrong = int((recv != expected).sum().item())
    if not inplace:
        wrong += int((send != mine).sum().item())
    return {"time_s": elapsed, "wrong": wrong}


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    sys.exit(main())
