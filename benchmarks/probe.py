"""Probe: ``mgpu probe-nccl``'s bandwidth next to a plain all-reduce loop, and its hang report time.

Bandwidth. Every repeat runs ``mgpu probe-nccl --world-size N`` (gloo on CPU ranks, NCCL on GPUs)
and then :mod:`benchmarks.plain_allreduce` under plain torchrun with the same world size, message
sizes, iteration and warm-up counts; the two alternate so both see the same machine load. The
figure per size is the probe's in-place bus bandwidth (``busbw = bytes/time · 2(n−1)/n``, as
nccl-tests; with one rank nothing crosses a link and the algorithm bandwidth ``bytes/time`` is
compared instead) over the plain loop's, both the slowest rank's mean time per all-reduce. The
last figure is the per-repeat geometric mean of those ratios over all sizes. Goal: within 5 %
(0.95–1.05×); a ratio above 1 means the probe measured more bandwidth than the plain loop.

Hang. ``probe-nccl --timeout T`` runs a long all-reduce loop; as soon as rank ``N-1``'s progress
report says it is in the timed loop it is SIGSTOPped (a rank stuck in the kernel or in a dead peer looks
the same from outside). The figures are the time from that signal until ``probe-nccl`` exits with
its hang report (ranks named, stacks collected, tree torn down), and how far past the timeout
that report came. Plain torchrun has no such report: its ranks wait in the collective until the
backend's own timeout (30 min for gloo, 10 min for NCCL by default).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import geometric_mean

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.launcher.probe.config import parse_sizes
from isaaclab_mgpu.launcher.probe.results import bandwidths

from .common import MGPU, PYTHON, Figure, device, ranks, save

HERE = Path(__file__).resolve().parent
#: Timed all-reduces per size: many on CPU, where one gloo call is short and scheduling noise large.
ITERS = {"cpu": 200, "cuda": 50}
WARMUP = 5
SIZES = {"cpu": "8,64,512,4K,32K,256K,1M", "cuda": "8,1K,64K,1M,16M,64M,256M"}
#: ``--timeout`` of the hang runs: above the launch start-up (up to ~20 s on a loaded 2-core box).
HANG_TIMEOUT = {"cpu": 30.0, "cuda": 20.0}
#: Each hang run lasts about the timeout, so it is repeated at most this often.
HANG_REPEATS = 3


def _device_args() -> list[str]:
    return ["--device", device(), "--world-size", str(ranks())]


def probe_once(sizes: str, log_dir: str) -> dict[int, float]:
    """One ``probe-nccl`` launch; in-place time per all-reduce (s) by message size."""
    argv = [MGPU, "probe-nccl", *_device_args(), "--sizes", sizes, "--iters", str(ITERS[device()])]
    argv += ["--warmup", str(WARMUP), "--json", "--log_dir", log_dir]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    world = json.loads(done.stdout)["world_sizes"][0]
    if world["status"] != "ok":
        raise RuntimeError(f"probe-nccl: {world['status']}: {world.get('error')}")
    return {row["bytes"]: row["in_place"]["time_s"] for row in world["sizes"]}


def plain_once(sizes: str, log_dir: str) -> dict[int, float]:
    """One plain torchrun launch of the bare all-reduce loop; time per all-reduce (s) by size."""
    argv = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks()), "--standalone"]
    argv += ["--log_dir", log_dir, str(HERE / "plain_allreduce.py"), "--device", device()]
    argv += ["--sizes", ",".join(map(str, parse_sizes(sizes))), "--iters", str(ITERS[device()])]
    argv += ["--warmup", str(WARMUP)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
    line = next(x for x in done.stdout.splitlines() if x.startswith("["))
    return {row["bytes"]: row["time_s"] for row in json.loads(line)}


def bandwidth(nbytes: int, seconds: float, world_size: int) -> float:
    """busbw (GB/s), or algbw with one rank."""
    algbw, busbw = bandwidths(nbytes, seconds, world_size)
    return busbw if world_size > 1 else algbw


def hang_once(timeout: float, log_dir: str) -> tuple[float, float, str]:
    """Stop one rank in the timed loop; return (s from the stop to the report, s past timeout, status)."""
    n = ranks()
    log_dir = tempfile.mkdtemp(dir=log_dir)  # its own folder: no report of an earlier launch
    argv = [MGPU, "probe-nccl", *_device_args(), "--sizes", "256K", "--iters", "100000000"]
    argv += ["--warmup", "0", "--timeout", str(timeout), "--json", "--log_dir", log_dir]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stopped = None
    while proc.poll() is None:
        if stopped is None:
            for folder in Path(log_dir).glob(f"probe-*/ws{n}"):
                beat = progress.Reports(folder).read().get(n - 1)
                if beat and beat.stage == "collective" and beat.phase == "timed":
                    try:
                        os.kill(beat.pid, signal.SIGSTOP)
                    except ProcessLookupError:  # the launch already ended; its report says why
                        continue
                    stopped = time.monotonic()
        time.sleep(0.02)
    after_stop = time.monotonic() - stopped if stopped else float("nan")
    assert proc.stdout is not None
    world = json.loads(proc.stdout.read())["world_sizes"][0]
    return after_stop, world["elapsed_s"] - timeout, world["status"]


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the probe figures."""
    sizes_text = SIZES[device()]
    sizes = parse_sizes(sizes_text)
    n = ranks()
    ours: dict[int, list[float]] = {s: [] for s in sizes}
    plain: dict[int, list[float]] = {s: [] for s in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            for s, t in probe_once(sizes_text, tmp).items():
                ours[s].append(bandwidth(s, t, n))
            for s, t in plain_once(sizes_text, tmp).items():
                plain[s].append(bandwidth(s, t, n))
        timeout = HANG_TIMEOUT[device()]
        hangs = [hang_once(timeout, tmp) for _ in range(min(repeats, HANG_REPEATS))]
    kind = "busbw" if n > 1 else "algbw"
    where = f"{n} {'gloo' if device() == 'cpu' else 'NCCL'} rank(s), {ITERS[device()]} iterations, in-place"
    figures = [
        Figure(
            f"probe {kind}, {s:,} B", "GB/s", ours[s], "plain all-reduce loop", plain[s],
            goal="0.95–1.05×", note=where if i == 0 else "",
        )
        for i, s in enumerate(sizes)
    ]  # fmt: skip
    per_repeat = [geometric_mean([ours[s][r] / plain[s][r] for s in sizes]) for r in range(repeats)]
    best = geometric_mean([max(ours[s]) / max(plain[s]) for s in sizes])
    figures.append(
        Figure(
            f"probe/plain {kind}, geometric mean over sizes", "×", per_repeat, goal="0.95–1.05",
            note=f"per repeat, over the sizes above; best of the repeats on each side: {best:.3g}",
        )
    )  # fmt: skip
    statuses = sorted({status for _, _, status in hangs})
    figures += [
        Figure(
            "stopped rank to hang report", "s", [a for a, _, _ in hangs], goal=f"≤ --timeout ({timeout:g} s)",
            note=f"--timeout {timeout:g} s counts from launch start; status {', '.join(statuses)}; "
            "plain torchrun reports nothing (gloo waits 30 min, NCCL 10 min)",
        ),
        Figure(
            "hang report past the timeout", "s", [b for _, b, _ in hangs], goal="—",
            note="naming the ranks, collecting their stacks, tearing the launch down",
        ),
    ]  # fmt: skip
    save(
        "probe",
        figures,
        {
            "sizes": list(sizes),
            "iters": ITERS[device()],
            "warmup": WARMUP,
            "world_size": n,
            "hang_statuses": statuses,
            "best_of_repeats_geomean": best,
        },
    )
    return figures
