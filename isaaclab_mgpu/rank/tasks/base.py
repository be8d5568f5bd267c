"""The batched-torch task base: ``num_envs`` copies of one system stepping in lock-step on one device.

A task subclass describes its physics with four methods on whole batches (no Python loop over
environments); the base class does the bookkeeping every RL library needs: action clipping to
``[-1, 1]``, episode counters, time limits (``truncated``) versus failures (``terminated``),
automatic reset of finished environments (the returned observation is then the first one of the
new episode), and returns of completed episodes for reporting. Randomness comes from one
``torch.Generator`` per task seeded from the rank's seed, so two runs with the same seed and world
size replay the same initial states.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from isaaclab_mgpu.contract.settings import TaskCfg, apply_overrides

__all__ = ["EpisodeStats", "TaskCfg", "VecTask", "apply_overrides"]


@dataclass
class EpisodeStats:
    """Returns of the episodes that ended since the last :meth:`VecTask.pop_stats` call."""

    return_sum: float = 0.0
    """Sum of the returns of completed episodes."""

    episodes: int = 0
    """Number of completed episodes."""

    length_sum: float = 0.0
    """Sum of the lengths (in steps) of completed episodes."""


class VecTask:
    """A vectorized task with a Gymnasium-like batched ``step`` interface that resets finished episodes."""

    name: str = "task"
    num_obs: int = 0
    num_actions: int = 0
    cfg_class: type[TaskCfg] = TaskCfg

    def __init__(self, num_envs: int, device: str, seed: int, cfg: TaskCfg | None = None) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.cfg = cfg or self.cfg_class()
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.max_episode_length = self.cfg.episode_length
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._returns = torch.zeros(num_envs, device=self.device)
        self._stats = torch.zeros(3, dtype=torch.float64, device=self.device)
        self.state = self._reset_state(num_envs)
        self.obs = self._observe()

    # -- subclass interface ---------------------------------------------------------------------
    def _reset_state(self, n: int) -> torch.Tensor:
        """Return ``n`` fresh initial states, shape ``(n, state_dim)``."""
        raise NotImplementedError

    def _integrate(self, actions: torch.Tensor) -> None:
        """Advance ``self.state`` by one ``dt`` under ``actions`` in ``[-1, 1]``."""
        raise NotImplementedError

    def _observe(self) -> torch.Tensor:
        """Observations of the current state, shape ``(num_envs, num_obs)``."""
        raise NotImplementedError

    def _reward_terminated(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-environment reward and failure flag after the step."""
        raise NotImplementedError

    # -- shared mechanics ----------------------------------------------------------------------
    def uniform(self, n: int, low: float, high: float, dim: int = 1) -> torch.Tensor:
        """``(n, dim)`` samples from ``U(low, high)`` drawn from the task's generator."""
        u = torch.rand((n, dim), generator=self.generator, device=self.device)
        return low + (high - low) * u

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Apply ``actions``; return ``(obs, reward, terminated, truncated, info)``, auto-resetting."""
        actions = torch.clamp(actions.to(self.device, torch.float32).reshape(self.num_envs, -1), -1.0, 1.0)
        self._integrate(actions)
        self.episode_length_buf += 1
        reward, terminated = self._reward_terminated(actions)
        truncated = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        done = terminated | truncated
        self._returns += reward
        lengths = self.episode_length_buf[done].sum()
        sums = (self._returns[done].sum(), done.sum(), lengths)
        self._stats += torch.stack([v.to(self._stats) for v in sums])  # float64 on the task's device
        ids = done.nonzero(as_tuple=False).flatten()
        if ids.numel():
            self.state[ids] = self._reset_state(int(ids.numel()))
            self.episode_length_buf[ids] = 0
            self._returns[ids] = 0.0
        self.obs = self._observe()
        return self.obs, reward, terminated, truncated, {"time_outs": truncated}

    def pop_stats(self) -> EpisodeStats:
        """Return and clear the episode statistics gathered since the last call."""
        values = self._stats.tolist()
        self._stats.zero_()
        return EpisodeStats(values[0], int(values[1]), values[2])
