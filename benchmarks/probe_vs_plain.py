"""probe-nccl's busbw next to a plain torch.distributed all-reduce loop, same sizes, same run.

``uv run python benchmarks/probe_vs_plain.py [--rounds 3] [--sizes 8:1M] [--iters 50]``: each
round runs ``mgpu probe-nccl --device cpu --world-size 2`` and then the plain loop
(``plain_allreduce.py``) with 2 gloo ranks; it prints the median busbw = bytes/time · 2(n−1)/n of
both per size.
Also prints the hang-report time: a rank is SIGSTOPped in the timed loop and the script measures
how long after that ``probe-nccl`` exits with its hang report (``--hang-timeout`` seconds).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import geometric_mean, median

from isaaclab_mgpu.probe import channel
from isaaclab_mgpu.probe.config import parse_sizes
from isaaclab_mgpu.probe.results import bandwidths

HERE = Path(__file__).parent


def probe(sizes: str, iters: int, warmup: int, log_dir: str) -> dict:
    argv = [sys.executable, "-m", "isaaclab_mgpu", "probe-nccl", "--device", "cpu", "--world-size", "2"]
    argv += ["--sizes", sizes, "--iters", str(iters), "--warmup", str(warmup), "--json", "--log_dir", log_dir]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return json.loads(done.stdout)["world_sizes"][0]


def plain(sizes: tuple[int, ...], iters: int, warmup: int, log_dir: str) -> list[dict]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    argv += ["--log_dir", log_dir, str(HERE / "plain_allreduce.py")]
    argv += ["--sizes", ",".join(map(str, sizes)), "--iters", str(iters), "--warmup", str(warmup)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("["))
    return json.loads(line)


def hang_time(timeout: float, log_dir: str) -> tuple[float, float, str]:
    argv = [sys.executable, "-m", "isaaclab_mgpu", "probe-nccl", "--device", "cpu", "--world-size", "2"]
    argv += ["--sizes", "256K", "--iters", "1000000", "--warmup", "0", "--timeout", str(timeout)]
    argv += ["--json", "--log_dir", log_dir]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stopped = None
    while proc.poll() is None:
        if stopped is None:
            for folder in Path(log_dir).glob("probe-*/ws2"):
                beat = channel.read_heartbeats(folder).get(1)
                if beat and beat.stage == "collective" and beat.phase == "timed":
                    os.kill(beat.pid, signal.SIGSTOP)
                    stopped = time.monotonic()
        time.sleep(0.02)
    after_stop = time.monotonic() - stopped if stopped else float("nan")
    world = json.loads(proc.stdout.read())["world_sizes"][0]
    return after_stop, world["elapsed_s"] - timeout, world["status"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="8:1M")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--hang-timeout", type=float, default=20.0)
    args = p.parse_args()
    sizes = parse_sizes(args.sizes)
    with tempfile.TemporaryDirectory() as tmp:
        ip: dict[int, list[float]] = {s: [] for s in sizes}
        oop: dict[int, list[float]] = {s: [] for s in sizes}
        base: dict[int, list[float]] = {s: [] for s in sizes}
        for _ in range(args.rounds):  # interleaved, so both see the same machine load
            for row in probe(args.sizes, args.iters, args.warmup, tmp)["sizes"]:
                ip[row["bytes"]].append(row["in_place"]["busbw"])
                oop[row["bytes"]].append(row["out_of_place"]["busbw"])
            for row in plain(sizes, args.iters, args.warmup, tmp):
                base[row["bytes"]].append(bandwidths(row["bytes"], row["time_s"], 2)[1])
        print(f"2 gloo ranks, {args.iters} iters, median busbw (GB/s) over {args.rounds} interleaved rounds")
        head = ("size (B)", "probe in-place", "probe out-of-place", "plain loop", "in-place/plain")
        print(" ".join(f"{h:>{w}}" for h, w in zip(head, (10, 15, 19, 11, 15), strict=True)))
        ratios = []
        for s in sizes:
            a, b, c = median(ip[s]), median(oop[s]), median(base[s])
            ratios.append(a / c)
            print(f"{s:>10} {a:>15.4f} {b:>19.4f} {c:>11.4f} {a / c:>15.2f}")
        print(f"geometric mean of in-place/plain over sizes: {geometric_mean(ratios):.2f}")
        after_stop, overhead, status = hang_time(args.hang_timeout, tmp)
        print(
            f"hang: status {status}; reported {after_stop:.1f} s after SIGSTOP "
            f"(timeout {args.hang_timeout:g} s from launch start); {overhead:.1f} s past the timeout "
            "for diagnosis, stacks and teardown"
        )


if __name__ == "__main__":
    main()
