"""Helpers for the training tests: run ``mgpu train`` (or a skrl-JAX stand-in) in a temporary folder.

Until ``isaaclab_mgpu.jaxrun`` lands, :func:`spawn_jax_ranks` starts the JAX ranks itself with the
environment contract jaxrun will provide (``JAX_*`` plus torch-style rank variables and one
``MGPU_RUN_STAMP``); once jaxrun exists the tests go through ``mgpu train`` like the others.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HAVE_JAXRUN = importlib.util.find_spec("isaaclab_mgpu.jaxrun") is not None
SUMMARY_KEYS = {
    "world_size",
    "backend",
    "framework",
    "device",
    "task",
    "iterations",
    "start_iteration",
    "end_iteration",
    "train_time_s",
    "s_per_iteration",
    "env_steps_per_s",
    "first_mean_reward",
    "last_mean_reward",
    "checksums",
    "checksums_equal",
    "exit_status",
}
BACKENDS = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl_torch": ["--rl_library", "skrl"],
    "skrl_jax": ["--rl_library", "skrl", "--ml_framework", "jax"],
}


def child_env(tmp: Path) -> dict[str, str]:
    """The environment for a training subprocess: lean, CPU-only, one JAX compile cache per session."""
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONUNBUFFERED="1",
    )
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "JAX_WORLD_SIZE", "JAX_RANK", "MGPU_RUN_STAMP"):
        env.pop(name, None)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train_argv(backend: str, *args: str) -> list[str]:
    """``mgpu train`` with two CPU ranks, or the JAX stand-in's rank argv."""
    return [*BACKENDS[backend], *args]


def start(backend: str, cwd: Path, *args: str) -> list[subprocess.Popen]:
    """Start a 2-rank CPU run; one Popen (mgpu) or, for JAX without jaxrun, one per rank."""
    env = child_env(cwd)
    if backend == "skrl_jax" and not HAVE_JAXRUN:
        return spawn_jax_ranks(cwd, env, [*BACKENDS[backend], "--device", "cpu", *args, "--distributed"])
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2"]
    argv += [*BACKENDS[backend], *args]
    return [
        subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ]


def spawn_jax_ranks(
    cwd: Path, env: dict[str, str], worker_args: list[str], n: int = 2
) -> list[subprocess.Popen]:
    """Stand-in for jaxrun: start ``n`` local JAX ranks with skrl's environment contract."""
    port = free_port()
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    procs = []
    for r in range(n):
        rank_env = dict(env)
        rank_env.update(
            JAX_LOCAL_RANK=str(r),
            JAX_RANK=str(r),
            JAX_WORLD_SIZE=str(n),
            JAX_COORDINATOR_ADDR="127.0.0.1",
            JAX_COORDINATOR_PORT=str(port),
            RANK=str(r),
            LOCAL_RANK=str(r),
            WORLD_SIZE=str(n),
            LOCAL_WORLD_SIZE=str(n),
            MGPU_RUN_STAMP=stamp,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "isaaclab_mgpu.worker", *worker_args],
                cwd=cwd,
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def finish(procs: list[subprocess.Popen], timeout: float = 240) -> tuple[list[int], str]:
    """Wait for every process; return exit codes and rank 0's (or mgpu's) output."""
    outputs = []
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        outputs.append(out)
    return [p.returncode for p in procs], outputs[0]


def run(backend: str, cwd: Path, *args: str, timeout: float = 240) -> tuple[int, str]:
    """Run to completion; return the worst exit code and the console output."""
    codes, out = finish(start(backend, cwd, *args), timeout)
    return max(codes, key=abs), out


def summary(cwd: Path, backend: str, run_name: str) -> tuple[dict, Path]:
    """The summary.json of the run folder ending in ``_<run_name>``."""
    lib = "rsl_rl" if backend == "rsl_rl" else "skrl"
    found = sorted((cwd / "logs" / lib).glob(f"*/*_{run_name}/summary.json"))
    assert found, f"no summary.json for run {run_name} under {cwd / 'logs' / lib}"
    return json.loads(found[-1].read_text()), found[-1].parent
