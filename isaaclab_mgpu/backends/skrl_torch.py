"""skrl PPO with PyTorch, on gloo CPU ranks as well as NCCL GPU ranks.

The worker joins the process group itself (gloo on CPU, NCCL on CUDA) and then imports skrl
through :func:`._patches.import_skrl`, which turns skrl's import-time ``init_process_group("nccl")``
into a no-op. skrl's default device string is ``cuda:{LOCAL_RANK}`` even without CUDA, so the
device is passed explicitly to models, memory and agent. The agent is driven step by step, the way
skrl's ``SequentialTrainer.train`` does (pre-interaction, act, step, record, post-interaction),
one worker iteration being ``rollouts`` steps, so the agent updates exactly once per iteration.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np
import torch

from ..tasks import VecTask
from ..worker.rank import RankContext
from ._patches import import_skrl
from .base import PPOSettings, checksum, skrl_network, skrl_ppo_cfg


def spaces(task: VecTask) -> tuple[gymnasium.spaces.Box, gymnasium.spaces.Box]:
    """Observation and action spaces of an embedded task."""
    obs = gymnasium.spaces.Box(-np.inf, np.inf, (task.num_obs,), dtype=np.float32)
    act = gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), dtype=np.float32)
    return obs, act


class SkrlTorchTrainer:
    """One rank of skrl PPO (torch); see the module docstring."""

    comm_kind = "torch"

    def __init__(self, task: VecTask, ppo: PPOSettings, ctx: RankContext, directory: str) -> None:
        import_skrl(torch_distributed=ctx.distributed, jax_distributed=False, cpu=not ctx.is_cuda)
        from skrl.agents.torch.ppo import PPO
        from skrl.memories.torch import RandomMemory
        from skrl.resources.schedulers.torch import KLAdaptiveLR
        from skrl.utils.model_instantiators.torch import deterministic_model, gaussian_model

        self.task, self.ppo, self.device = task, ppo, ctx.device
        obs_space, act_space = spaces(task)
        common = {"observation_space": obs_space, "action_space": act_space, "device": ctx.device}
        policy = gaussian_model(
            **common,
            network=skrl_network(ppo),
            output="ACTIONS",
            initial_log_std=math.log(ppo.init_std),
        )
        value = deterministic_model(**common, network=skrl_network(ppo), output="ONE")
        for role, model in (("policy", policy), ("value", value)):
            model.init_state_dict(role=role)  # materialise the lazy layers before the broadcast
        memory = RandomMemory(memory_size=ppo.rollout, num_envs=task.num_envs, device=ctx.device)
        # The agent broadcasts rank 0's parameters in its constructor when distributed.
        self.agent = PPO(
            models={"policy": policy, "value": value},
            memory=memory,
            observation_space=obs_space,
            action_space=act_space,
            device=ctx.device,
            cfg=skrl_ppo_cfg(ppo, KLAdaptiveLR, directory),
        )
        self.agent.init()
        self.agent.enable_training_mode(True)
        self.steps_per_iteration = task.num_envs * ppo.rollout
        self.timestep = 0
        self.obs = task.obs

    def sync(self) -> None:
        """Parameters were broadcast by skrl's PPO constructor; nothing left to do."""

    def iterate(self) -> None:
        agent, task = self.agent, self.task
        total = self.timestep + self.ppo.rollout
        obs = self.obs
        for _ in range(self.ppo.rollout):
            t = self.timestep
            agent.pre_interaction(timestep=t, timesteps=total)
            with torch.no_grad():
                actions, _ = agent.act(obs, None, timestep=t, timesteps=total)
                next_obs, reward, terminated, truncated, info = task.step(actions)
                agent.record_transition(
                    observations=obs,
                    states=None,
                    actions=actions,
                    rewards=reward.unsqueeze(1),
                    next_observations=next_obs,
                    next_states=None,
                    terminated=terminated.unsqueeze(1),
                    truncated=truncated.unsqueeze(1),
                    infos=info,
                    timestep=t,
                    timesteps=total,
                )
            agent.post_interaction(timestep=t, timesteps=total)
            obs = next_obs
            self.timestep += 1
        self.obs = obs

    def _models(self) -> list[torch.nn.Module]:
        return [self.agent.policy, self.agent.value]

    def checksum(self) -> str:
        tensors = [t for m in self._models() for _, t in sorted(m.state_dict().items())]
        return checksum(t.detach().float().cpu().numpy() for t in tensors)

    def state_dict(self) -> dict[str, Any]:
        a = self.agent
        return {
            "policy": a.policy.state_dict(),
            "value": a.value.state_dict(),
            "optimizer": a.optimizer.state_dict(),
            "timestep": self.timestep,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        a = self.agent
        a.policy.load_state_dict(state["policy"])
        a.value.load_state_dict(state["value"])
        a.optimizer.load_state_dict(state["optimizer"])
        self.timestep = int(state["timestep"])
