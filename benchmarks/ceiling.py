"""The cost of the second CPU rank: 2 ranks' env-steps/s against this box's own 2-process ceiling.

On CPU ranks the "ideal" of two ranks is not 2× one rank (they share the cores, memory bandwidth
and caches) but what two independent one-rank trainings reach side by side, with no communication.
Every repeat runs ``mgpu scale --device cpu --world_sizes 1,2`` (one rank; two ranks; two
independent one-rank runs at once, each point a full ``mgpu train``, ``OMP_NUM_THREADS=1``) for
rsl-rl and skrl torch on the embedded cartpole, 256 envs per rank, ``ITERATIONS`` iterations a
point (the first left out), the back-ends interleaved so every configuration sees the same load.
The figures are the steady env-steps/s ``mgpu scale`` reports (``summary.json``'s ``steady`` for
the ranks; for the ceiling, the summed medians over the iterations both copies ran at once).

Figures per back-end: the 2 ranks against the ceiling (the collectives' cost; the issue's goal
≥ 0.95), the ceiling against one rank (what the box allows, at most 2×) and 2 ranks against one;
each note gives the per-repeat ratios (min / median / max) and the 1-minute load around the
repeats (``scale.json``'s ``machine``), so a figure measured on a busy box says so. Run it on a
quiet box: ``uv run python -m benchmarks ceiling --repeats 3``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from .common import MGPU, Figure, save, stream

ITERATIONS = 80
NUM_ENVS = 256
BACKENDS = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl torch": ["--rl_library", "skrl", "--ml_framework", "torch"],
}


def one_sweep(backend: str) -> dict[str, float | None]:
    """One ``mgpu scale`` sweep; the three rates and the load before and after it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scale"
        argv = [MGPU, "scale", "--device", "cpu", "--world_sizes", "1,2", *BACKENDS[backend]]
        argv += ["--num_envs", str(NUM_ENVS), "--iterations", str(ITERATIONS), "--out", str(out)]
        argv += ["--save_interval", "0"]
        done = stream(argv, cwd=tmp, timeout=900)
        if done.exit_code != 0:
            raise RuntimeError(f"{backend}: mgpu scale exited {done.exit_code}:\n{done.tail()}")
        doc = json.loads((out / "scale.json").read_text())
    rate = {(p["point"]["world_size"], p["point"]["ceiling"]): p["env_steps_per_s"] for p in doc["points"]}
    return {
        "one": rate[1, False],
        "two": rate[2, False],
        "ceiling": rate[2, True],
        "load_before": doc["machine"]["load_1m_before"],
        "load_after": doc["machine"]["load_1m_after"],
    }


def _spread(values: list[float]) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"per repeat {low:.3f} / {mid:.3f} / {high:.3f} (min / median / max)"


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the ceiling figures."""
    runs: dict[str, list[dict[str, float | None]]] = {b: [] for b in BACKENDS}
    started = time.perf_counter()
    for _ in range(repeats):  # interleaved: both back-ends see the same machine load
        for backend in BACKENDS:
            runs[backend].append(one_sweep(backend))
    figures: list[Figure] = []
    for backend, rows in runs.items():

        def col(key: str, rows=rows) -> list[float]:
            return [float(r[key]) for r in rows if r[key] is not None]

        loads = [v for r in rows for v in (r["load_before"], r["load_after"]) if v is not None]
        load = f"; 1-min load {min(loads):.2f}–{max(loads):.2f}" if loads else ""
        vs = [r["two"] / r["ceiling"] for r in rows if r["two"] and r["ceiling"]]
        box = [r["ceiling"] / r["one"] for r in rows if r["ceiling"] and r["one"]]
        two = [r["two"] / r["one"] for r in rows if r["two"] and r["one"]]
        figures += [
            Figure(
                f"{backend}, 2 CPU ranks against 2 independent processes: env-steps/s", "steps/s",
                col("two"), "2 independent 1-rank processes side by side", col("ceiling"),
                goal="≥ 0.95", note=_spread(vs) + load,
            ),
            Figure(
                f"{backend}, 2 independent processes against 1 rank: env-steps/s", "steps/s",
                col("ceiling"), f"{backend}, 1 rank", col("one"), goal="2× ideal",
                note=_spread(box) + load, bounds=(None, 2.0),
            ),
            Figure(
                f"{backend}, 2 CPU ranks against 1 rank (mgpu scale): env-steps/s", "steps/s",
                col("two"), f"{backend}, 1 rank", col("one"), note=_spread(two) + load, bounds=(None, 2.0),
            ),
        ]  # fmt: skip
    extra = {
        "iterations": ITERATIONS,
        "num_envs_per_rank": NUM_ENVS,
        "elapsed_s": time.perf_counter() - started,
        "sweeps": runs,
    }
    save("ceiling", figures, extra)
    return figures
