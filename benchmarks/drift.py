"""The drift check: what hashing each rank's state every ``--drift_interval`` iterations costs.

Every iteration each rank adds the check's 13 numbers to the all-gather it already runs (no
collective is added); every ``--drift_interval`` iterations (default 10) it also hashes its policy
parameters, optimizer state and normalizer statistics (:mod:`isaaclab_mgpu.rank.drift`).
Per back-end (rsl-rl and skrl torch; cartpole, 256 envs, one iteration run first so the optimizer
holds its moments) the hashing of one check is timed in this process (the median of
:data:`CALLS` calls), and the added row's share of the gather is timed as packing and comparing the
wider row. The baseline is the steady iteration of a real 2-rank CPU run of rsl-rl (the run the
``timers`` benchmark makes, :func:`benchmarks.timers.real_iteration`). Figure: one check's cost
divided by the interval, plus the per-iteration row work, against that iteration, one sample per
repeat. Goal: under 0.5 %.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

import numpy as np

from .common import Figure, save
from .timers import real_iteration

#: Hash calls timed per back-end and repeat.
CALLS = 30
ENVS = 256
BACKENDS = (("rsl_rl", "torch"), ("skrl", "torch"))


def _trainer(library: str, framework: str, folder: str) -> Any:
    """One single-rank trainer on cartpole after one iteration (the optimizer holds its moments)."""
    from isaaclab_mgpu.contract.settings import DEFAULTS
    from isaaclab_mgpu.rank import backends, tasks
    from isaaclab_mgpu.rank.worker.rank import RankContext

    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=42)
    env = tasks.make("cartpole", ENVS, "cpu", 42, {})
    ppo = DEFAULTS["cartpole"].ppo
    trainer = backends.create(library, framework, env, ppo, ctx, folder, "none")
    trainer.iterate()
    return trainer


def check_cost(trainer: Any) -> float:
    """Seconds of one check's hashing on this rank (median of :data:`CALLS`)."""
    from isaaclab_mgpu.rank import drift

    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        drift.words(drift.hashes(trainer.drift_source().components()))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row_cost(world_size: int = 2) -> float:
    """Seconds the wider row adds to every iteration: the check's zero words packed in, and the
    gathered rows split and judged (what a non-check iteration does)."""
    from isaaclab_mgpu.rank import drift
    from isaaclab_mgpu.rank.worker import metrics

    base = np.zeros(metrics.WIDTH)
    gathered = np.zeros((world_size, metrics.WIDTH + drift.WIDTH))
    check = drift.Check(10)
    n = 20_000
    start = time.perf_counter()
    for i in range(n):
        np.concatenate([base, drift.words(None)])
        check.due(i + 1, world_size)
        metrics.summarize(gathered[:, : metrics.WIDTH])
    with_row = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        metrics.summarize(gathered[:, : metrics.WIDTH])
    without = time.perf_counter() - start
    return max(with_row - without, 0.0) / n


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the drift check's cost per iteration (default interval 10)."""
    from isaaclab_mgpu.contract.worker_args import WorkerArgs

    interval = WorkerArgs().drift_interval
    costs, iterations, checks = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        trainers = [_trainer(lib, fw, f"{folder}/{lib}_{fw}") for lib, fw in BACKENDS]
        for _ in range(repeats):
            _, seconds = real_iteration()
            per_check = max(check_cost(t) for t in trainers)
            costs.append((per_check / interval + row_cost()) * 1000)
            checks.append(per_check * 1000)
            iterations.append(seconds * 1000)
        for t in trainers:
            t.close()
    figure = Figure(
        f"drift check per iteration (one check every {interval} iterations, the slower back-end)", "ms",
        costs, "rsl-rl cartpole steady iteration, 2 CPU ranks, 256 envs each", iterations,
        goal="ratio < 0.005",
        note="one check's hashing (rsl-rl or skrl torch, the slower): "
        + ", ".join(f"{c:.2f}" for c in checks) + " ms",
    )  # fmt: skip
    save("drift", [figure])
    return [figure]
