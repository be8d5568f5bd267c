"""Where an iteration's time goes, per stage, at 1 and N CPU ranks, for each embedded back-end.

Each repeat trains rsl-rl, skrl torch and skrl JAX on the embedded cartpole (256 envs per rank,
``ITERATIONS`` iterations, ``OMP_NUM_THREADS=1``) under plain torchrun (skrl JAX: mgpu's JAX
launcher) with ``benchmarks/stage_rank.py`` in place of the worker module: at 1 rank, at
``ranks()`` ranks as shipped (small collectives through the node's shared-memory channel), and at
``ranks()`` ranks with ``MGPU_CPU_COLLECTIVES=gloo`` (every collective on gloo), interleaved.

Per run, the steady iterations (after the first ``WARMUP``) give milliseconds per iteration of each
stage (see ``stage_rank.py``: ``env``, ``act``, ``record``, ``update`` and the ``collectives`` inside
it, ``gather``, ``checksum``, ``log``, ``progress``, and ``other``: the rest of the iteration), plus
the process's user and system CPU milliseconds and context switches per iteration, averaged over
the ranks. Each N-rank figure has the 1-rank run of the same back-end as its baseline, so the ratio
says how much a stage grew with the second rank; ``update`` minus ``collectives`` is the library's
own arithmetic, ``collectives`` the transport.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from .common import PYTHON, ROOT, Figure, ranks, save, stream

ITERATIONS, WARMUP = 30, 2
NUM_ENVS = 256
BACKENDS = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl torch": ["--rl_library", "skrl", "--ml_framework", "torch"],
    "skrl jax": ["--rl_library", "skrl", "--ml_framework", "jax"],
}
STAGES = ("env", "act", "record", "update", "collectives", "gather", "checksum", "log", "progress")
#: Per-iteration figures derived from the snapshots besides the stages.
EXTRA = ("iteration", "other", "cpu user", "cpu system", "context switches")
VARIANTS = {"shared memory": {}, "gloo": {"MGPU_CPU_COLLECTIVES": "gloo"}}


def _launcher(backend: str, n: int, tmp: Path) -> list[str]:
    script = str(ROOT / "benchmarks" / "stage_rank.py")
    if backend == "skrl jax":
        return [PYTHON, "-m", "isaaclab_mgpu.jaxrun", "--nproc_per_node", str(n), "--coordinator_address",
                "127.0.0.1:0", "--log_dir", str(tmp / "jaxrun"), script]  # fmt: skip
    return [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", str(n), "--standalone", script]


def per_iteration(snapshots: list[dict]) -> dict[str, float]:
    """Milliseconds (or counts) per steady iteration from one rank's snapshots."""
    marks = [s for s in snapshots if s["tag"].startswith("iteration ")]
    marks += [s for s in snapshots if s["tag"] == "finish"]
    first, last = marks[WARMUP], marks[-1]
    n = len(marks) - 1 - WARMUP
    if n < 1:
        raise RuntimeError(f"{len(marks) - 1} iterations: too few after {WARMUP} warm-up")

    def delta(key: str) -> float:
        return (last["times"].get(key, 0.0) - first["times"].get(key, 0.0)) * 1000 / n

    out = {stage: delta(stage) for stage in STAGES}
    out["iteration"] = (last["t"] - first["t"]) * 1000 / n
    counted = out["env"] + out["act"] + out["record"] + out["update"] + out["gather"]
    out["other"] = out["iteration"] - counted - out["checksum"] - out["log"] - out["progress"]
    out["cpu user"] = (last["user"] - first["user"]) * 1000 / n
    out["cpu system"] = (last["system"] - first["system"]) * 1000 / n
    switches = last["voluntary"] + last["involuntary"] - first["voluntary"] - first["involuntary"]
    out["context switches"] = switches / n
    return out


def one_run(backend: str, n: int, env: dict[str, str]) -> dict[str, float]:
    """Train once; the stage figures averaged over the ranks."""
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        argv = [*_launcher(backend, n, tmp), "--distributed", "--device", "cpu", "--task", "cartpole"]
        argv += [*BACKENDS[backend], "--num_envs", str(NUM_ENVS), "--max_iterations", str(ITERATIONS)]
        argv += ["--save_interval", "0", "--log_root", str(tmp / "logs")]
        out = tmp / "stages"
        run_env = {"OMP_NUM_THREADS": "1", "MGPU_BENCH_STAGES_OUT": str(out), **env}
        done = stream(argv, cwd=tmp, env=run_env, timeout=900)
        if done.exit_code != 0:
            raise RuntimeError(f"{backend} x{n} exited {done.exit_code}:\n{done.tail()}")
        files = sorted(tmp.glob("stages.rank*.json"))
        rows = [per_iteration(json.loads(p.read_text())["snapshots"]) for p in files]
    if len(rows) != n:
        raise RuntimeError(f"{backend} x{n}: {len(rows)} rank files")
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]}


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the stage figures."""
    n = ranks()
    keys = [(b, 1, "shared memory") for b in BACKENDS]
    keys += [(b, n, v) for b in BACKENDS for v in VARIANTS] if n > 1 else []
    runs: dict[tuple[str, int, str], list[dict[str, float]]] = {k: [] for k in keys}
    for _ in range(repeats):  # interleaved: every configuration sees the same machine load
        for key in keys:
            backend, k, variant = key
            runs[key].append(one_run(backend, k, VARIANTS[variant]))
    figures = []
    for backend in BACKENDS:
        one = runs[backend, 1, "shared memory"]
        for stat in (*EXTRA[:1], *STAGES, *EXTRA[1:]):
            unit = "per iteration" if stat == "context switches" else "ms/iteration"
            figures.append(Figure(f"{backend}, 1 rank: {stat}", unit, [r[stat] for r in one]))
            for variant in VARIANTS if n > 1 else ():
                many = runs[backend, n, variant]
                figures.append(
                    Figure(
                        f"{backend}, {n} ranks ({variant}): {stat}", unit, [r[stat] for r in many],
                        f"{backend}, 1 rank", [r[stat] for r in one],
                    )
                )  # fmt: skip
    save("stages", figures, {"iterations": ITERATIONS, "warmup": WARMUP, "num_envs_per_rank": NUM_ENVS})
    return figures
