"""Isaac Lab tasks (``--task Isaac-...``) in each rank, when Isaac Lab is installed.

Isaac Lab 3 (Python 3.12, ``pip install isaaclab``; it downloads its robot and scene assets at
run time) registers its tasks with Gymnasium when ``isaaclab_tasks`` is imported. Each rank builds
the environment on its own device (``cuda:{LOCAL_RANK}`` or ``cpu``), so CPU ranks work where
Isaac Lab's own launcher stops at ``torch.cuda.set_device``. ``key=value`` items are handed to
Isaac Lab's Hydra configuration unchanged (e.g. ``presets=newton_mjwarp`` for the CPU physics).

Not exercised in this repository's CI (Isaac Lab needs Python 3.12 and downloads); its test runs
only where Isaac Lab is importable.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ..errors import UsageError


def available() -> bool:
    """True when Isaac Lab and its task registry are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("isaaclab", "isaaclab_tasks"))


def make(args: Any, num_envs: int, ctx: Any) -> Any:
    """Create the Isaac Lab environment ``args.task`` with ``num_envs`` environments on ``ctx.device``."""
    if not available():
        raise UsageError(
            f"--task {args.task}: not an embedded task (cartpole, pendulum) and Isaac Lab is not "
            "installed; install it with `uv sync --extra isaaclab` (Python 3.12)"
        )
    if args.rl_library != "rsl_rl":
        raise UsageError(
            f"--task {args.task}: Isaac Lab tasks are wired for --rl_library rsl_rl in this version"
        )
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  registers the Isaac-* environments
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper
    from isaaclab_tasks.utils import parse_env_cfg

    overrides = [f"{k}={v}" for k, v in args.overrides if not k.startswith(("env.", "agent."))]
    try:
        env_cfg = parse_env_cfg(args.task, device=ctx.device, num_envs=num_envs)
    except Exception as exc:  # the registry's own error names the unknown id
        raise UsageError(f"--task {args.task}: {exc}") from None
    env_cfg.seed = ctx.seed
    if overrides:
        try:
            from isaaclab_tasks.utils.hydra import apply_overrides
        except ImportError:
            raise UsageError(
                f"{' '.join(overrides)}: this Isaac Lab has no Hydra override API the worker knows "
                "(isaaclab_tasks.utils.hydra.apply_overrides); run Isaac Lab's train.py with --script"
            ) from None
        env_cfg = apply_overrides(env_cfg, overrides)
    return RslRlVecEnvWrapper(gym.make(args.task, cfg=env_cfg))
