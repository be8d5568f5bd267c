"""Embedded vectorized tasks: train out of the box, on CPU or CUDA, nothing to download.

=============  =====  =======  =====================================================
task           obs    actions  what
=============  =====  =======  =====================================================
``cartpole``   4      1        balance a pole on a cart (default)
``pendulum``   3      1        swing a torque-limited pendulum up and hold it
=============  =====  =======  =====================================================

Each task is a :class:`~.base.VecTask` with batched torch physics (see its module). :func:`make`
builds one from its name, with ``env.<field>=value`` overrides from the command line.
"""

from __future__ import annotations

from isaaclab_mgpu.rank.tasks.base import EpisodeStats, TaskCfg, VecTask, apply_overrides
from isaaclab_mgpu.rank.tasks.cartpole import Cartpole
from isaaclab_mgpu.rank.tasks.pendulum import Pendulum

TASKS: dict[str, type[VecTask]] = {"cartpole": Cartpole, "pendulum": Pendulum}

__all__ = ["TASKS", "EpisodeStats", "TaskCfg", "VecTask", "make"]


def make(
    name: str, num_envs: int, device: str, seed: int, overrides: dict[str, str] | None = None
) -> VecTask:
    """Build the embedded task ``name`` with ``num_envs`` environments on ``device``."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; embedded tasks: {', '.join(TASKS)}")
    cls = TASKS[name]
    cfg = apply_overrides(cls.cfg_class(), overrides or {})
    return cls(num_envs, device, seed, cfg)
