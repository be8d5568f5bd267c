"""Start-up: ``mgpu --help``, ``dry-run`` and ``check-env`` against ``torchrun --help``.

Goal: ``--help`` and ``dry-run`` under 0.1× torchrun's; ``check-env`` under a second.
"""

from __future__ import annotations

import os

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
    # Isaac Lab's launcher is not on PyPI's path: point ISAACLAB_MULTIGPU_LAUNCHER at its script.
    launcher = os.environ.get("ISAACLAB_MULTIGPU_LAUNCHER")
    if launcher:
        figures.append(versus_torchrun("Isaac Lab launcher --dry_run", [PYTHON, launcher, "--dry_run"]))
    save("startup", figures)
    return figures
