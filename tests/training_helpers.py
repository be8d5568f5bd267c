"""Helpers for the training tests: run ``mgpu train`` with two CPU ranks in a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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

#: The mean-reward tag each library's own writer uses, and one loss tag of each.
LIBRARY_TAGS = {
    "rsl_rl": ("Train/mean_reward", "Loss/surrogate", "Loss/value", "Loss/learning_rate", "Policy/mean_std"),
    "skrl_torch": ("Reward / Total reward (mean)", "Loss / Policy loss", "Loss / Value loss",
                   "Learning / Learning rate", "Policy / Standard deviation"),
    "skrl_jax": ("Reward / Total reward (mean)", "Loss / Policy loss", "Loss / Value loss",
                 "Learning / Policy learning rate", "Policy / Standard deviation"),
}  # fmt: skip
MGPU_TAGS = ("mgpu/mean_reward", "mgpu/mean_episode_length", "mgpu/checksums_equal")
#: Pace tags: the first (warm-up) iteration under mgpu/warmup/, the steady ones under mgpu/.
PACE_TAGS = ("env_steps_per_s", "env_steps_per_s/rank_0", "env_steps_per_s/rank_1", "s_per_iteration")
# Episodes truncated at 16 steps (one rollout): every iteration ends episodes, so each has a reward.
CHEAP = ("--num_envs", "16", "--max_iterations", "3", "env.episode_length=16")


def child_env(tmp: Path) -> dict[str, str]:
    """The environment for a training subprocess: lean, CPU-only, one JAX compile cache per session."""
    env = dict(os.environ)
    # One thread per rank and a fixed hash seed: a run depends on its --seed alone, not on the machine's
    # core count or the caller's environment (the learning thresholds are measured per seed).
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONHASHSEED="0",
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONUNBUFFERED="1",
    )
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "JAX_WORLD_SIZE", "JAX_RANK", "MGPU_RUN_STAMP"):
        env.pop(name, None)
    return env


def offline_wandb_env(tmp: Path) -> dict[str, str]:
    """:func:`child_env` for an offline W&B run: none of the caller's W&B settings, no network, W&B's
    files under ``tmp/wandb/``."""
    env = {k: v for k, v in child_env(tmp).items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(tmp))
    return env


def wandb_records(path: Path) -> list[dict]:
    """Every record of the offline W&B run folder ``path``, as W&B's own reader of its run file
    prints them (``wandb leet inspect --json``: one JSON object per record)."""
    cmd = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def same_curves(history: list[dict], tensorboard: dict, tags, step: str) -> None:
    """Each of ``tags`` in the W&B ``history`` rows (stepped by ``step``) is the event file's curve:
    the same steps and the same values (TensorBoard keeps float32: equal to its precision)."""
    for tag in tags:
        logged = [(int(h[step]), h[tag]) for h in history if tag in h]
        curve = tensorboard[tag]
        assert [st for st, _ in logged] == [st for st, _ in curve], (tag, logged, curve)
        assert [v for _, v in logged] == pytest.approx([v for _, v in curve], rel=1e-6), tag


def start(backend: str, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``mgpu train`` with 2 CPU ranks of ``backend`` (in ``env``, else :func:`child_env`'s);
    output merged on stdout."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2"]
    argv += [*BACKENDS[backend], *args]
    return subprocess.Popen(
        argv, cwd=cwd, env=env or child_env(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def run(
    backend: str, cwd: Path, *args: str, timeout: float = 240, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run to completion; return mgpu's exit code and the console output."""
    proc = start(backend, cwd, *args, env=env)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def summary(cwd: Path, backend: str, run_name: str) -> tuple[dict, Path]:
    """The summary.json of the run folder ending in ``_<run_name>``."""
    lib = "rsl_rl" if backend == "rsl_rl" else "skrl"
    found = sorted((cwd / "logs" / lib).glob(f"*/*_{run_name}/summary.json"))
    assert found, f"no summary.json for run {run_name} under {cwd / 'logs' / lib}"
    return json.loads(found[-1].read_text()), found[-1].parent


def scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``folder``, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
