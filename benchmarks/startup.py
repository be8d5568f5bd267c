"""Start-up: ``mgpu --help``, ``dry-run`` and ``check-env`` against ``torchrun --help``; ``mgpu runs``.

Goal: ``--help`` and ``dry-run`` under 0.1× torchrun's; ``check-env`` under a second; ``mgpu runs
--last`` and the table over 2,000 runs (synthetic summaries of 300 iterations each) under a second.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .common import BIN, MGPU, PYTHON, Figure, device, ranks, repeat, save, wall

DRY_RUN = ["dry-run", "--num_gpus", "4", "--master_port", "29504", "--task=cartpole", "--num_envs=4096"]


def run(repeats: int = 5) -> list[Figure]:
    """Measure and save the start-up figures."""
    mgpu = MGPU
    torchrun = (
        [str(BIN / "torchrun")] if (BIN / "torchrun").exists() else [PYTHON, "-m", "torch.distributed.run"]
    )
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    base = repeat(lambda: wall([*torchrun, "--help"]), repeats)

    def versus_torchrun(name: str, argv: list[str], goal: str = "< 0.1×") -> Figure:
        samples = repeat(lambda: wall(argv, env=env), repeats)
        return Figure(name, "s", samples, "torchrun --help", base, goal=goal)

    figures = [
        versus_torchrun("mgpu --help", [mgpu, "--help"]),
        versus_torchrun("mgpu dry-run", [mgpu, *DRY_RUN]),
    ]
    # check-env judges this machine for a launch of the benchmark device (the train preflight path).
    check = [mgpu, "check-env", "--device", device(), "--nproc_per_node", str(ranks())]
    samples = repeat(lambda: wall(check, ok=(0, 1)), repeats)  # 1: a check failed; still timed
    figures.append(Figure("mgpu check-env", "s", samples, "torchrun --help", base, goal="< 1 s"))
    with tempfile.TemporaryDirectory(prefix="mgpu-runs-") as tmp:
        fake_runs(Path(tmp), 2000)
        for args in (["--last"], []):
            samples = repeat(lambda a=args: wall([mgpu, "runs", tmp, *a]), repeats)
            name = f"mgpu runs {' '.join(args) or '(table)'}, 2,000 runs"
            figures.append(Figure(name, "s", samples, "torchrun --help", base, goal="< 1 s"))
    # Isaac Lab's launcher is not on PyPI's path: point ISAACLAB_MULTIGPU_LAUNCHER at its script.
    launcher = os.environ.get("ISAACLAB_MULTIGPU_LAUNCHER")
    if launcher:
        figures.append(versus_torchrun("Isaac Lab launcher --dry_run", [PYTHON, launcher, "--dry_run"]))
    save("startup", figures)
    return figures


def fake_runs(root: Path, count: int) -> None:
    """``count`` run folders with a summary.json of 300 iterations each (what ``mgpu runs`` reads)."""
    for i in range(count):
        lib = ("rsl_rl", "skrl")[i % 2]
        folder = root / lib / ("cartpole", "pendulum")[i // 2 % 2] / f"2026-01-01_00-00-00_run{i}"
        (folder / "rank_1").mkdir(parents=True)
        summary = {
            "status": "finished", "started_at": 1.7e9 + i, "backend": lib, "framework": "torch",
            "task": "cartpole", "world_size": 4, "iterations": 300, "s_per_iteration": 0.125,
            "env_steps_per_s": {"total": 5.2e5, "per_rank": [1.3e5] * 4}, "first_mean_reward": 1.0,
            "last_mean_reward": 190.0, "mean_rewards": [i / 300 for i in range(300)], "checksums_equal": True,
        }  # fmt: skip
        (folder / "summary.json").write_text(json.dumps(summary))
