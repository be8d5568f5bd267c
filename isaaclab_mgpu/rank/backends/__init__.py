"""Training back-ends: rsl-rl PPO, skrl PPO with torch, skrl PPO with JAX.

:func:`create` returns a :class:`~.base.Trainer` for one rank; the worker drives it. Library
modules are imported only inside it, after the worker has set Warp's flags. Work-arounds for
library defects live in :mod:`isaaclab_mgpu.rank.patches`.
"""

from __future__ import annotations

from typing import Any

from isaaclab_mgpu.contract.settings import PPOSettings
from isaaclab_mgpu.rank.backends.base import Trainer

__all__ = ["Trainer", "create"]


def create(
    library: str,
    framework: str,
    env: Any,
    ppo: PPOSettings,
    ctx: Any,
    directory: str,
    logger: str = "none",
) -> Trainer:
    """The trainer for ``library``/``framework`` on ``env``; rank 0's ``logger`` writes into ``directory``."""
    if library == "rsl_rl":
        from isaaclab_mgpu.rank.backends.rsl_rl import RslRlTrainer as trainer
    elif framework == "jax":
        from isaaclab_mgpu.rank.backends.skrl_jax import SkrlJaxTrainer as trainer
    else:
        from isaaclab_mgpu.rank.backends.skrl_torch import SkrlTorchTrainer as trainer
    return trainer(env, ppo, ctx, directory, logger)
