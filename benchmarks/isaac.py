"""Isaac Lab cartpole: 2 CPU ranks under mgpu against Isaac Lab's own single-process ``isaaclab train``.

Both run Isaac Lab's rsl-rl training code on ``Isaac-Cartpole-Direct`` with kitless Newton physics
(``presets=newton_mjwarp``), 64 environments per process, on CPU:

- baseline: ``isaaclab train --rl_library rsl_rl --task Isaac-Cartpole-Direct --num_envs 64
  --device cpu presets=newton_mjwarp agent.device=cpu --max_iterations N`` (one process);
- mgpu: ``mgpu train --device cpu --nproc_per_node 2 --task Isaac-Cartpole-Direct --num_envs 64
  --max_iterations N presets=newton_mjwarp`` (two ranks over gloo, 128 environments in all).

Both sides run with ``OMP_NUM_THREADS=1``: torchrun sets it for every rank, and a single process
left with torch's default thread pool oversubscribes a small machine, which measures threading,
not the launcher (``MGPU_BENCH_ISAAC_BASELINE_THREADS`` sets the baseline's value instead).
Seconds per iteration come from rsl-rl's own ``Iteration time`` lines (rank 0), the first
iteration left out (it compiles Warp kernels); env-steps/s = environments × ``num_steps_per_env``
× processes / seconds per iteration. The ratio is mgpu over baseline: above 1 for env-steps/s
means the two ranks together step more environments per second than one process.

Needs Isaac Lab (Python 3.12) and a local asset root (``ISAACSIM_ASSET_ROOT``; built with
``python -m isaaclab_mgpu.tools.isaac_assets`` when unset). Where Isaac Lab is not importable the
benchmark reports itself skipped and writes nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import Figure, save, stream

NUM_ENVS = 64
ITERATIONS = int(os.environ.get("MGPU_BENCH_ISAAC_ITERATIONS", "5"))
TASK = "Isaac-Cartpole-Direct"
ITERATION_TIME = re.compile(r"Iteration time:\s*([0-9.]+)s")
STEPS_PER_ENV = re.compile(r"^num_steps_per_env:\s*(\d+)", re.M)
TIMEOUT_S = 1800


def available() -> bool:
    """True when Isaac Lab's training entry points are importable here."""
    import importlib.util

    found = all(importlib.util.find_spec(m) is not None for m in ("isaaclab", "isaaclab_rl"))
    return sys.version_info >= (3, 12) and found


def _asset_root(tmp: Path) -> str:
    given = os.environ.get("ISAACSIM_ASSET_ROOT")
    if given:
        return given
    root = tmp / "assets"
    build = [sys.executable, "-m", "isaaclab_mgpu.tools.isaac_assets", str(root)]
    subprocess.run(build, check=True, timeout=300)
    return str(root)


def _measure(argv: list[str], cwd: Path, env: dict[str, str], processes: int) -> tuple[float, float]:
    """Median seconds per iteration (after the first) and env-steps/s of one training run."""
    cwd.mkdir(parents=True)
    run = stream(argv, cwd=cwd, env=env, timeout=TIMEOUT_S)
    if run.exit_code != 0:
        raise RuntimeError(f"{argv[:3]} exited {run.exit_code}:\n{run.tail(30)}")
    times = [float(m.group(1)) for _, line in run.lines if (m := ITERATION_TIME.search(line))]
    if len(times) < 2:
        raise RuntimeError(f"{argv[:3]}: fewer than two iterations reported:\n{run.tail(30)}")
    agent = next(cwd.glob("logs/rsl_rl/*/*/params/agent.yaml"))
    steps = int(STEPS_PER_ENV.search(agent.read_text()).group(1))  # type: ignore[union-attr]
    per_it = statistics.median(times[1:])
    return per_it, NUM_ENVS * steps * processes / per_it


def run(repeats: int = 3) -> list[Figure]:
    """Measure both sides ``repeats`` times; return s/it and env-steps/s figures (mgpu vs baseline)."""
    if not available():
        print("isaac: skipped (Isaac Lab is not importable with this Python)", flush=True)
        return []
    tmp = Path(tempfile.mkdtemp(prefix="mgpu-bench-isaac-"))
    env = {"ISAACSIM_ASSET_ROOT": _asset_root(tmp), "PYTHONUNBUFFERED": "1"}
    bindir = Path(sys.executable).parent
    isaaclab = (
        [str(bindir / "isaaclab")] if (bindir / "isaaclab").exists() else [sys.executable, "-m", "isaaclab"]
    )
    base_argv = [*isaaclab, "train", "--rl_library", "rsl_rl", "--task", TASK, "--num_envs", str(NUM_ENVS),
                 "--device", "cpu", "presets=newton_mjwarp", "agent.device=cpu",
                 "--max_iterations", str(ITERATIONS)]  # fmt: skip
    mgpu_argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
                 "--task", TASK, "--num_envs", str(NUM_ENVS), "--max_iterations", str(ITERATIONS),
                 "presets=newton_mjwarp"]  # fmt: skip
    base_env = {**env, "OMP_NUM_THREADS": os.environ.get("MGPU_BENCH_ISAAC_BASELINE_THREADS", "1")}
    base_it, base_rate, mgpu_it, mgpu_rate = [], [], [], []
    try:
        for i in range(repeats):
            s, r = _measure(base_argv, tmp / f"base{i}", base_env, 1)
            base_it.append(s)
            base_rate.append(r)
            s, r = _measure(mgpu_argv, tmp / f"mgpu{i}", env, 2)
            mgpu_it.append(s)
            mgpu_rate.append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    threads = base_env["OMP_NUM_THREADS"]
    note = (
        f"{TASK}, newton_mjwarp, {NUM_ENVS} envs per process, CPU, {ITERATIONS} iterations (first dropped), "
        f"baseline OMP_NUM_THREADS={threads}"
    )
    figures = [
        Figure(
            "seconds per iteration, 2 CPU ranks",
            "s",
            mgpu_it,
            "isaaclab train, 1 process",
            base_it,
            note=note,
            bounds=(1.0, None),  # each rank steps as many environments as the one process
        ),
        Figure(
            "env-steps/s, 2 CPU ranks",
            "steps/s",
            mgpu_rate,
            "isaaclab train, 1 process",
            base_rate,
            note=note,
            bounds=(None, 2.0),  # two processes step at most twice the environments of one
        ),
    ]
    save("isaac", figures)
    return figures
