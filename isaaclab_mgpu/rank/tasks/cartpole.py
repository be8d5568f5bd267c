"""Cartpole balance: push a cart on a rail so that the hinged pole stays upright.

Physics: the classic cart-pole equations (frictionless cart and hinge, point-mass pole), batched
in torch and integrated with semi-implicit Euler at ``dt`` = 0.02 s.

- **Observation** (4): cart position ``x`` [m], cart velocity [m/s], pole angle ``theta`` [rad,
  0 = upright], pole angular velocity [rad/s].
- **Action** (1): horizontal force on the cart, ``a * force_scale`` newton for ``a`` in ``[-1, 1]``.
- **Reward** per step: ``1 - theta^2 - 0.01 * x_dot^2`` while alive, ``-2`` on the failing step.
  A balanced pole earns close to 1 per step, so the episode return is roughly the number of
  steps survived (at most ``episode_length`` = 200).
- **Termination**: ``|x| > 2.4`` m or ``|theta| > 0.6`` rad. **Time limit**: ``episode_length``.
- **Initial state**: ``x`` in ±0.5 m, ``theta`` in ±0.2 rad, velocities in ±0.1.
"""

from __future__ import annotations

import torch

from isaaclab_mgpu.contract.settings import CartpoleCfg
from isaaclab_mgpu.rank.tasks.base import VecTask


class Cartpole(VecTask):
    """Balance a pole on a cart (see the module docstring)."""

    name = "cartpole"
    num_obs = 4
    num_actions = 1
    cfg_class = CartpoleCfg
    cfg: CartpoleCfg

    def _reset_state(self, n: int) -> torch.Tensor:
        state = self.uniform(n, -0.1, 0.1, 4)
        state[:, 0] = self.uniform(n, -0.5, 0.5).squeeze(1)
        state[:, 2] = self.uniform(n, -0.2, 0.2).squeeze(1)
        return state

    def _integrate(self, actions: torch.Tensor) -> None:
        c = self.cfg
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = actions[:, 0] * c.force_scale
        total = c.cart_mass + c.pole_mass
        sin, cos = torch.sin(theta), torch.cos(theta)
        tmp = (force + c.pole_mass * c.pole_half_length * theta_dot**2 * sin) / total
        theta_acc = (9.81 * sin - cos * tmp) / (
            c.pole_half_length * (4.0 / 3.0 - c.pole_mass * cos**2 / total)
        )
        x_acc = tmp - c.pole_mass * c.pole_half_length * theta_acc * cos / total
        x_dot = x_dot + c.dt * x_acc
        theta_dot = theta_dot + c.dt * theta_acc
        self.state = torch.stack([x + c.dt * x_dot, x_dot, theta + c.dt * theta_dot, theta_dot], dim=1)

    def _observe(self) -> torch.Tensor:
        return self.state.clone()

    def _reward_terminated(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cfg
        x, x_dot, theta, _ = self.state.unbind(1)
        terminated = (x.abs() > c.x_limit) | (theta.abs() > c.theta_limit)
        alive = 1.0 - theta**2 - 0.01 * x_dot**2
        reward = torch.where(terminated, torch.full_like(alive, -2.0), alive)
        return reward, terminated
