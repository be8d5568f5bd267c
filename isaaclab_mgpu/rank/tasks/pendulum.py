"""Pendulum swing-up: a torque-limited motor must swing a hanging pendulum up and hold it there.

The motor is too weak to lift the pendulum directly, so the policy has to pump energy first:
harder than cartpole (no early termination to learn from, a longer credit-assignment horizon).
Physics: a rigid pendulum of unit mass and length, ``dt`` = 0.05 s, semi-implicit Euler, angular
velocity clipped to ±8 rad/s.

- **Observation** (3): ``cos(theta)``, ``sin(theta)``, angular velocity / 8 (``theta`` = 0 upright).
- **Action** (1): motor torque ``a * max_torque`` for ``a`` in ``[-1, 1]`` (``max_torque`` = 2 N m).
- **Reward** per step: ``-(theta^2 + 0.1 * theta_dot^2 + 0.001 * torque^2)`` with ``theta`` wrapped
  to ``[-pi, pi]``: 0 is the best, about -16 the worst.
- **Termination**: none. **Time limit**: ``episode_length`` = 100 steps (5 s).
- **Initial state**: ``theta`` uniform in ``[-pi, pi]``, angular velocity in ±1 rad/s.
"""

from __future__ import annotations

import math

import torch

from isaaclab_mgpu.contract.settings import PendulumCfg
from isaaclab_mgpu.rank.tasks.base import VecTask


class Pendulum(VecTask):
    """Swing a pendulum up and balance it (see the module docstring)."""

    name = "pendulum"
    num_obs = 3
    num_actions = 1
    cfg_class = PendulumCfg
    cfg: PendulumCfg

    def _reset_state(self, n: int) -> torch.Tensor:
        theta = self.uniform(n, -math.pi, math.pi)
        theta_dot = self.uniform(n, -1.0, 1.0)
        return torch.cat([theta, theta_dot], dim=1)

    def _integrate(self, actions: torch.Tensor) -> None:
        c = self.cfg
        theta, theta_dot = self.state.unbind(1)
        torque = actions[:, 0] * c.max_torque
        theta_dot = theta_dot + c.dt * (1.5 * 9.81 * torch.sin(theta) + 3.0 * torque)
        theta_dot = torch.clamp(theta_dot, -c.max_speed, c.max_speed)
        self.state = torch.stack([theta + c.dt * theta_dot, theta_dot], dim=1)
        self._torque = torque

    def _observe(self) -> torch.Tensor:
        theta, theta_dot = self.state.unbind(1)
        return torch.stack([torch.cos(theta), torch.sin(theta), theta_dot / self.cfg.max_speed], dim=1)

    def _reward_terminated(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        theta, theta_dot = self.state.unbind(1)
        wrapped = torch.remainder(theta + math.pi, 2 * math.pi) - math.pi
        reward = -(wrapped**2 + 0.1 * theta_dot**2 + 0.001 * self._torque**2)
        return reward, torch.zeros_like(reward, dtype=torch.bool)
