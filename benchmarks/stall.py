"""Stall watch: how soon a frozen rank is reported, and what the progress reports cost per iteration.

Stall to report: ``mgpu train`` with ``ranks()`` ranks of rsl-rl on the embedded cartpole (64 envs
per rank, ``--stall_timeout T``) runs until rank 0 prints iteration 3; then the last rank is
SIGSTOPped (a frozen process, as a wedged GPU or a hung node looks from outside). The figures are
the seconds from the SIGSTOP to mgpu's ``mgpu: hang:`` line and to mgpu's exit (code 4, every
process gone), for T = 10 and 20 s; the baseline is T itself. Goal: the verdict within T + 5 s.

Cost of the reports: the worker reports three stages per iteration (``rollout``, ``update``,
``sync``); the figure is three :func:`isaaclab_mgpu.contract.progress.beat` calls into a tmpfs folder,
timed in this process over many calls, against the seconds per iteration of one CPU rank of
rsl-rl on the embedded cartpole (its default 256 envs) under ``mgpu train`` with the watch on.
Goal: under 1 % of the iteration.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import tempfile
import time

import psutil

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.contract.env import PROGRESS_DIR

from .common import MGPU, Figure, device, ranks, save

TIMEOUTS = (10, 20)
BEATS_PER_ITERATION = 3
CALLS = 5000
LINE = re.compile(r"\[mgpu\] iteration (\d+)/\d+ \|.*\| ([\d,.]+) steps/s \| ([\d.]+) s/it")
ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _last_rank(root: int, rank: int) -> psutil.Process:
    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if proc.environ().get("RANK") == str(rank):
                found.append((proc.create_time(), proc.pid, proc))
        except psutil.Error:
            continue
    if not found:
        raise RuntimeError(f"rank {rank} not found")
    return min(found)[2]


def one_stall(timeout: int) -> tuple[float, float]:
    """Freeze the last rank after iteration 3; return (seconds to the verdict, seconds to exit)."""
    n = ranks()
    argv = [MGPU, "train", "--device", device(), "--nproc_per_node", str(n), "--num_envs", "64"]
    argv += ["--max_iterations", "1000", "--save_interval", "0", "--stall_timeout", str(timeout)]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            argv, cwd=tmp, env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        tail: list[str] = []
        try:
            for line in proc.stdout:
                tail = [*tail[-30:], line]
                if "iteration 3/" in line:
                    break
            else:
                raise RuntimeError(f"training never reached iteration 3:\n{''.join(tail)}")
            _last_rank(proc.pid, n - 1).send_signal(signal.SIGSTOP)
            stopped = time.perf_counter()
            verdict = None
            for line in proc.stdout:
                tail = [*tail[-30:], line]
                if verdict is None and line.startswith("mgpu: hang: "):
                    verdict = time.perf_counter() - stopped
            code = proc.wait()
            ended = time.perf_counter() - stopped
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code != 4 or verdict is None:
            raise RuntimeError(f"expected a hang verdict and exit 4, got {code}:\n{''.join(tail)}")
        return verdict, ended


def beat_cost() -> float:
    """Seconds for one progress report into a tmpfs folder (mean over many calls)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as folder:
        reporter = progress.Reporter({PROGRESS_DIR: folder, "RANK": "0"})
        reporter.iteration(0)  # the first call also opens the stack file and registers faulthandler
        start = time.perf_counter()
        for i in range(CALLS):
            reporter.beat("rollout", i)
        return (time.perf_counter() - start) / CALLS


def iteration_seconds() -> float:
    """Median seconds per iteration of one CPU rank of rsl-rl cartpole under mgpu train (watch on)."""
    argv = [MGPU, "train", "--device", "cpu", "--nproc_per_node", "1", "--max_iterations", "8"]
    argv += ["--save_interval", "0"]
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            argv, cwd=tmp, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=600, check=False
        )
    if out.returncode != 0:
        raise RuntimeError(f"training failed: {out.stdout[-1500:]}{out.stderr[-1500:]}")
    per_it = [float(m.group(3)) for m in map(LINE.search, out.stdout.splitlines()) if m]
    return statistics.median(per_it[2:] or per_it)


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the stall figures."""
    figures = []
    ends: dict[int, list[float]] = {}
    for timeout in TIMEOUTS:
        runs = [one_stall(timeout) for _ in range(repeats)]
        ends[timeout] = [e for _, e in runs]
        figures.append(
            Figure(
                f"SIGSTOP of a rank to the hang verdict, --stall_timeout {timeout}", "s",
                [v for v, _ in runs], "--stall_timeout", [float(timeout)], goal=f"≤ {timeout + 5} s",
                reference=True,
                note=f"to mgpu's exit (code 4, tree gone): {', '.join(f'{e:.1f}' for e in ends[timeout])} s",
            )
        )  # fmt: skip
    costs = [beat_cost() * BEATS_PER_ITERATION * 1000 for _ in range(repeats)]
    iterations = [iteration_seconds() * 1000 for _ in range(repeats)]
    figures.append(
        Figure(
            f"progress reports per iteration ({BEATS_PER_ITERATION} beats, tmpfs)", "ms", costs,
            "cartpole iteration, 1 CPU rank, 256 envs (rsl-rl)", iterations, goal="ratio < 0.01",
        )
    )  # fmt: skip
    save("stall", figures, {"exit_s": {str(k): v for k, v in ends.items()}})
    return figures
