"""skrl PPO with PyTorch, on gloo CPU ranks as well as NCCL GPU ranks; what both skrl back-ends share.

The worker joins the process group itself (gloo on CPU, NCCL on CUDA), then imports skrl through
:func:`isaaclab_mgpu.rank.patches.skrl.import_skrl`. skrl's default device string is
``cuda:{LOCAL_RANK}`` even without CUDA, so the device is passed explicitly. The agent is driven
step by step as skrl's ``SequentialTrainer.train`` does (:func:`skrl_rollout`), one worker
iteration being ``rollouts`` steps, so the agent updates exactly once per iteration.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import gymnasium
import numpy as np
import torch

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.rank import drift
from isaaclab_mgpu.rank.backends.base import PPOSettings, checksum, skrl_ppo_cfg
from isaaclab_mgpu.rank.patches.skrl import import_skrl
from isaaclab_mgpu.rank.patches.tensorboard import restart_curve
from isaaclab_mgpu.rank.tasks import VecTask
from isaaclab_mgpu.rank.worker.rank import RankContext


def skrl_rollout(
    trainer: Any,
    *,
    to_task: Callable[[Any], torch.Tensor] = lambda a: a,
    from_task: Callable[[torch.Tensor], Any] = lambda t: t,
    guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> None:
    """One PPO rollout through skrl's agent interface, as ``SequentialTrainer.train`` steps it."""
    # to_task/from_task carry tensors between the torch task and the agent's framework; guard wraps
    # acting and recording (torch.no_grad for torch agents).
    agent, task = trainer.agent, trainer.task
    total = trainer.timestep + trainer.ppo.rollout
    obs = trainer.obs
    for _ in range(trainer.ppo.rollout):
        t = trainer.timestep
        agent.pre_interaction(timestep=t, timesteps=total)
        with guard():
            actions, _ = agent.act(obs, None, timestep=t, timesteps=total)
            next_obs_t, reward, terminated, truncated, info = task.step(to_task(actions))
            next_obs = from_task(next_obs_t)
            agent.record_transition(
                observations=obs,
                states=None,
                actions=actions,
                rewards=from_task(reward.unsqueeze(1)),
                next_observations=next_obs,
                next_states=None,
                terminated=from_task(terminated.unsqueeze(1)),
                truncated=from_task(truncated.unsqueeze(1)),
                infos=info,
                timestep=t,
                timesteps=total,
            )
        if t == total - 1:
            progress.beat("update")  # the last step's post-interaction runs skrl's PPO update
        agent.post_interaction(timestep=t, timesteps=total)
        obs = next_obs
        trainer.timestep += 1
    trainer.obs = obs


class SkrlAgentSteps:
    """What both skrl trainers (torch and JAX) do alike around skrl's agent, by its own calls."""

    framework: str
    """skrl's name for the trainer's framework (``torch`` or ``jax``), as in its module paths."""

    agent: Any
    timestep: int

    def _build(self, task: VecTask, ppo: PPOSettings, device: Any, directory: str, logger: str) -> None:
        """skrl's PPO agent for ``task``, with its policy and value models and rollout memory."""

        def skrl(module: str) -> Any:  # skrl's module of this framework
            return importlib.import_module(module.format(self.framework))

        models = skrl("skrl.utils.model_instantiators.{}")
        obs_space = gymnasium.spaces.Box(-np.inf, np.inf, (task.num_obs,), dtype=np.float32)
        act_space = gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), dtype=np.float32)
        common = {"observation_space": obs_space, "action_space": act_space, "device": device}
        network = [{"name": "net", "input": "OBSERVATIONS", "layers": ppo.hidden_dims, "activations": "elu"}]
        policy = models.gaussian_model(
            **common, network=network, output="ACTIONS", initial_log_std=math.log(ppo.init_std)
        )
        value = models.deterministic_model(**common, network=network, output="ONE")
        for role, model in (("policy", policy), ("value", value)):
            model.init_state_dict(role=role)  # materialise the lazy layers before the broadcast
        memory = skrl("skrl.memories.{}").RandomMemory(
            memory_size=ppo.rollout, num_envs=task.num_envs, device=device
        )
        cfg = skrl_ppo_cfg(ppo, skrl("skrl.resources.schedulers.{}").KLAdaptiveLR, directory, logger)
        if ppo.obs_normalization:  # skrl keeps the scaler per rank: it does not synchronise it
            cfg.update(observation_preprocessor=skrl("skrl.resources.preprocessors.{}").RunningStandardScaler,
                       observation_preprocessor_kwargs={"size": obs_space, "device": device})  # fmt: skip
        # The agent broadcasts rank 0's parameters in its constructor when distributed; skrl's
        # Agent.init keeps the writer (and, patched, the W&B run) to rank 0 itself.
        self.agent = skrl("skrl.agents.{}.ppo").PPO(
            models={"policy": policy, "value": value},
            memory=memory,
            observation_space=obs_space,
            action_space=act_space,
            device=device,
            cfg=cfg,
        )
        self.agent.init()
        self.agent.enable_training_mode(True)
        self.task, self.ppo = task, ppo
        self.steps_per_iteration = task.num_envs * ppo.rollout
        self.timestep = 0

    def drift_source(self) -> drift.Source:
        """The models, optimizer state and running standard scalers (:mod:`isaaclab_mgpu.rank.drift`)."""
        source = drift.skrl_jax_source if self.framework == "jax" else drift.skrl_torch_source
        return source(self.agent)

    def sync(self) -> None:
        """Parameters were broadcast by skrl's PPO constructor; nothing left to do."""

    def log_iteration(self, iteration: int, start: int, total: int, scalars: Mapping[str, float]) -> None:
        """skrl wrote its own tracking data at the end of the rollout; add ``scalars`` at that step."""
        writer = getattr(self.agent, "writer", None)
        if writer is not None:  # skrl counts environment steps
            for tag, value in scalars.items():
                writer.add_scalar(tag=tag, value=float(value), timestep=self.timestep)

    def resumed_at(self, iteration: int) -> None:
        """Tell skrl's writer that the run goes on after this attempt's first step."""
        writer = getattr(self.agent, "writer", None)
        if writer is not None:  # skrl's own SummaryWriter keeps its tensorboard EventFileWriter there
            restart_curve(writer._event_file_writer.add_event, self.timestep + 1)

    def close(self) -> None:
        """Close skrl's writer (skrl leaves it open), then finish the W&B run skrl opened, if any."""
        writer = getattr(self.agent, "writer", None)
        if writer is not None:
            writer.close()
            self.agent.writer = None
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            wandb.finish()


class SkrlTorchTrainer(SkrlAgentSteps):
    """One rank of skrl PPO (torch); see the module docstring."""

    comm_kind = "torch"
    framework = "torch"

    def __init__(
        self, task: VecTask, ppo: PPOSettings, ctx: RankContext, directory: str, logger: str = "none"
    ) -> None:
        import_skrl(torch_distributed=ctx.distributed, jax_distributed=False, cpu=not ctx.is_cuda)
        self._build(task, ppo, ctx.device, directory, logger)
        self.obs = task.obs

    def iterate(self) -> None:
        skrl_rollout(self, guard=torch.no_grad)

    def checksum(self) -> str:
        models = (self.agent.policy, self.agent.value)
        tensors = [t for m in models for _, t in sorted(m.state_dict().items())]
        return checksum(t.detach().float().cpu().numpy() for t in tensors)

    def state_dict(self) -> dict[str, Any]:
        a = self.agent
        return {
            "policy": a.policy.state_dict(),
            "value": a.value.state_dict(),
            "optimizer": a.optimizer.state_dict(),
            "timestep": self.timestep,
            **({"scaler": a._observation_preprocessor.state_dict()} if self._scaled() else {}),
        }

    def _scaled(self) -> bool:
        return isinstance(self.agent._observation_preprocessor, torch.nn.Module)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        a = self.agent
        a.policy.load_state_dict(state["policy"])
        a.value.load_state_dict(state["value"])
        a.optimizer.load_state_dict(state["optimizer"])
        if self._scaled() and "scaler" in state:
            a._observation_preprocessor.load_state_dict(state["scaler"])
        self.timestep = int(state["timestep"])
