"""What a ``key=value`` override of the built-in worker may set, defined once and free of torch.

For the embedded tasks an override is ``env.<field>=value`` (a field of the task's configuration:
:class:`TaskCfg` and its per-task subclasses, :data:`TASK_CONFIGS`) or ``agent.<field>=value`` (a
field of :class:`PPOSettings`); the value is converted like the field's default and must make sense
(:data:`LIMITS`: ``env.episode_length=-1`` or ``agent.gamma=1.5`` is refused). The worker's parser
(:mod:`.worker_args`) runs :func:`check_overrides`, so the launcher refuses a misspelt key or a
bad value before spawning, with the rank's words. Standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskCfg:
    """Settings every embedded task shares (subclasses add their physics constants)."""

    episode_length: int = 200
    """Steps before an episode is cut by the time limit (``truncated``)."""

    dt: float = 0.02
    """Simulation time step in seconds."""


@dataclass(frozen=True)
class CartpoleCfg(TaskCfg):
    """Cartpole constants."""

    force_scale: float = 10.0
    """Force in newton for action 1."""

    cart_mass: float = 1.0
    """Mass of the cart in kg."""

    pole_mass: float = 0.1
    """Mass of the pole in kg."""

    pole_half_length: float = 0.5
    """Distance from the hinge to the pole's centre of mass in m."""

    x_limit: float = 2.4
    """Cart position beyond which the episode fails."""

    theta_limit: float = 0.6
    """Pole angle beyond which the episode fails."""


@dataclass(frozen=True)
class PendulumCfg(TaskCfg):
    """Pendulum constants."""

    episode_length: int = 100
    """Steps per episode (time limit only)."""

    dt: float = 0.05
    """Simulation time step in seconds."""

    max_torque: float = 2.0
    """Torque in N m for action 1."""

    max_speed: float = 8.0
    """Angular velocity clip in rad/s."""


#: The embedded tasks by name, with their configuration class (``rank.tasks.TASKS`` has the tasks).
TASK_CONFIGS: dict[str, type[TaskCfg]] = {"cartpole": CartpoleCfg, "pendulum": PendulumCfg}


@dataclass(frozen=True)
class PPOSettings:
    """PPO hyper-parameters shared by every back-end."""

    rollout: int = 16
    """Steps per environment per iteration."""

    epochs: int = 5
    """Passes over each rollout."""

    mini_batches: int = 4
    """Mini-batches per pass."""

    learning_rate: float = 1e-3
    """Initial learning rate (adapted to ``desired_kl``)."""

    desired_kl: float = 0.01
    """Target KL divergence of the adaptive learning-rate schedule."""

    gamma: float = 0.99
    """Discount factor."""

    lam: float = 0.95
    """GAE lambda."""

    clip: float = 0.2
    """PPO ratio clip."""

    entropy_coef: float = 0.005
    """Entropy bonus."""

    value_loss_coef: float = 1.0
    """Value-loss weight."""

    max_grad_norm: float = 1.0
    """Gradient-norm clip."""

    hidden: str = "32,32"
    """Hidden layer sizes of actor and critic, comma-separated."""

    init_std: float = 1.0
    """Initial action standard deviation."""

    obs_normalization: bool = False
    """Normalize observations with running statistics (rsl-rl's synchronised, skrl's rank-local)."""

    @property
    def hidden_dims(self) -> list[int]:
        """``hidden`` as a list of ints."""
        return [int(h) for h in self.hidden.split(",") if h.strip()]


@dataclass(frozen=True)
class TaskDefaults:
    """Per-task defaults for what the command line leaves out."""

    num_envs: int
    """Environments per rank."""

    max_iterations: int
    """Iterations per run."""

    ppo: PPOSettings
    """Hyper-parameters."""


DEFAULTS: dict[str, TaskDefaults] = {
    "cartpole": TaskDefaults(num_envs=256, max_iterations=50, ppo=PPOSettings()),
    "pendulum": TaskDefaults(
        num_envs=256,
        max_iterations=200,
        ppo=PPOSettings(rollout=32, hidden="64,64", gamma=0.98, entropy_coef=0.0, init_std=0.6),
    ),
}
#: Isaac Lab tasks bring their own agent configuration; these apply where ours is used.
FALLBACK = TaskDefaults(num_envs=1024, max_iterations=100, ppo=PPOSettings(hidden="128,128,128"))

#: Values that make no sense for a setting, refused before anything is spawned (a run of them
#: would train nonsense, e.g. ``env.episode_length=-1`` once trained 1-step episodes and exited 0):
#: name → (lowest, whether the lowest itself is allowed, highest or None). Every float must be finite.
#: ``mini_batches`` is left to the library, which splits the batch.
LIMITS: dict[str, tuple[float, bool, float | None]] = {
    "episode_length": (1, True, None),
    "dt": (0, False, None),
    "force_scale": (0, False, None),
    "cart_mass": (0, False, None),
    "pole_mass": (0, False, None),
    "pole_half_length": (0, False, None),
    "x_limit": (0, False, None),
    "theta_limit": (0, False, None),
    "max_torque": (0, False, None),
    "max_speed": (0, False, None),
    "rollout": (1, True, None),
    "epochs": (1, True, None),
    "learning_rate": (0, False, None),
    "desired_kl": (0, False, None),
    "gamma": (0, True, 1),
    "lam": (0, True, 1),
    "clip": (0, False, None),
    "entropy_coef": (0, True, None),
    "value_loss_coef": (0, True, None),
    "max_grad_norm": (0, False, None),
    "init_std": (0, False, None),
}


def _out_of_range(key: str, value: float) -> str | None:
    """What is wrong with ``value`` for the setting ``key`` (:data:`LIMITS`), or None."""
    if value != value or value in (float("inf"), float("-inf")):
        return "must be a finite number"
    low, inclusive, high = LIMITS.get(key, (float("-inf"), True, None))
    if value < low or (value == low and not inclusive) or (high is not None and value > high):
        above = f"at least {low:g}" if inclusive else f"above {low:g}"
        return f"must be {above}" + (f" and at most {high:g}" if high is not None else "")
    return None


def _replace(cfg: Any, prefix: str, what: str, overrides: Mapping[str, str]) -> Any:
    """``cfg`` with ``overrides`` applied, each typed like the field's default and within :data:`LIMITS`."""
    fields = [f.name for f in dataclasses.fields(cfg)]
    values: dict[str, Any] = {}
    for key, raw in overrides.items():
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
            hint = f"did you mean {prefix}.{close[0]}?" if close else f"known: {', '.join(sorted(fields))}"
            raise ValueError(f"{prefix}.{key} is not {what}; {hint}")
        kind = type(getattr(cfg, key))
        try:
            values[key] = _boolean(raw) if kind is bool else kind(raw)
        except ValueError:
            raise ValueError(f"{prefix}.{key}={raw}: the value must be {kind.__name__}") from None
        wrong = _out_of_range(key, values[key]) if kind in (int, float) else None
        if wrong:
            raise ValueError(f"{prefix}.{key}={raw}: the value {wrong}")
    return dataclasses.replace(cfg, **values)


def _boolean(raw: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``), as Hydra spells booleans."""
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(raw)


def apply_overrides(cfg: TaskCfg, overrides: Mapping[str, str]) -> TaskCfg:
    """``cfg`` with ``env.<field>=value`` overrides (given without the prefix) applied."""
    return _replace(cfg, "env", "a setting of this task", overrides)


def settings_with(ppo: PPOSettings, overrides: Mapping[str, str]) -> PPOSettings:
    """``ppo`` with ``agent.<field>=value`` overrides (given without the prefix) applied."""
    out = _replace(ppo, "agent", "a PPO setting", overrides)
    try:
        dims = out.hidden_dims
    except ValueError:
        dims = []
    if not dims or min(dims) < 1:
        raise ValueError(f"agent.hidden={out.hidden}: give layer sizes like 64,64")
    return out


def check_overrides(task: str, overrides: Iterable[tuple[str, str]]) -> None:
    """Raise ValueError for an override the embedded task ``task`` would refuse (each key once)."""
    groups: dict[str, dict[str, str]] = {"env": {}, "agent": {}}
    for key, value in overrides:
        prefix, dot, field = key.partition(".")
        if prefix not in groups or not dot or not field:
            close = difflib.get_close_matches(prefix, list(groups), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}.{field}?" if close and dot and field else ""
            raise ValueError(
                f"{key}={value} is not an override of the embedded tasks "
                f"(they take env.<field>=value and agent.<field>=value){hint}"
            )
        groups[prefix][field] = value
    apply_overrides(TASK_CONFIGS[task](), groups["env"])
    settings_with(DEFAULTS.get(task, FALLBACK).ppo, groups["agent"])
