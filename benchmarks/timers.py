"""Stage timers: what the busy/wait split (the straggler watch, the auto stall bound) costs an iteration.

Per iteration a rank of the built-in worker makes three progress reports (each reads the clock;
the one that begins an iteration also closes the previous one's busy/wait totals) and calls one
timed wrapper per collective (:mod:`isaaclab_mgpu.rank.patches.timing`). A real 2-rank CPU run of
rsl-rl on the embedded cartpole (256 envs per rank, under torchrun with a progress folder of its
own, ``OMP_NUM_THREADS=1``) gives the collectives per steady iteration and the seconds per steady
iteration, from each rank's last report (``collectives`` and ``wall_s`` over ``timed``). The cost
of the three reports (into tmpfs) and of one wrapper (around a no-op, less the no-op) is timed in
this process over many calls. Figure: three reports plus the collectives' wrappers, against that
iteration, one sample per repeat. Goal: under 1 %.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.contract.env import PROGRESS_DIR

from .common import PYTHON, Figure, save

CALLS = 20_000
BEATS_PER_ITERATION = 3
ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def report_cost() -> float:
    """Seconds for one report, every third one beginning an iteration (the worker's pattern)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as folder:
        reporter = progress.Reporter({PROGRESS_DIR: folder, "RANK": "0"})
        reporter.iteration(0)  # the first call opens the file and registers the stack handler
        start = time.perf_counter()
        for i in range(CALLS):
            reporter.beat("rollout", i + 1)
            reporter.beat("update")
            reporter.beat("sync")
        return (time.perf_counter() - start) / (3 * CALLS)


def wrapper_cost() -> float:
    """Seconds the timed wrapper adds to one collective call."""
    from isaaclab_mgpu.rank.patches import timing

    def noop(*args: object) -> None:
        return None

    timed = timing.clocked(noop)
    arg = object()
    best = []
    for fn in (noop, timed, noop, timed):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn(arg)
        best.append(time.perf_counter() - start)
    return max((min(best[1], best[3]) - min(best[0], best[2])) / CALLS, 0.0)


def real_iteration() -> tuple[float, float]:
    """(timed collectives per iteration, seconds per steady iteration) of a real 2-rank CPU run."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "progress")
        os.mkdir(folder)
        argv = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                "-m", "isaaclab_mgpu.worker", "--distributed", "--device", "cpu", "--num_envs", "256",
                "--max_iterations", "12", "--save_interval", "0",
                "--log_root", os.path.join(tmp, "logs")]  # fmt: skip
        env = {**os.environ, **ENV, PROGRESS_DIR: folder}
        out = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"training failed: {out.stdout[-1500:]}{out.stderr[-1500:]}")
        reports = [json.loads(progress.progress_path(folder, r).read_text()) for r in (0, 1)]
    calls = statistics.fmean(r["collectives"] / r["timed"] for r in reports)
    return calls, statistics.fmean(r["wall_s"] / r["timed"] for r in reports)


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the timers' cost per iteration."""
    costs, iterations, calls = [], [], []
    for _ in range(repeats):
        n, seconds = real_iteration()
        costs.append((BEATS_PER_ITERATION * report_cost() + n * wrapper_cost()) * 1000)
        iterations.append(seconds * 1000)
        calls.append(n)
    figure = Figure(
        f"stage timers per iteration ({BEATS_PER_ITERATION} reports + one wrapper per collective)", "ms",
        costs, "rsl-rl cartpole steady iteration, 2 CPU ranks, 256 envs each", iterations,
        goal="ratio < 0.01", note=f"timed collectives per iteration: {', '.join(f'{c:.0f}' for c in calls)}",
    )  # fmt: skip
    save("timers", [figure])
    return [figure]
