"""skrl PPO with JAX: one process per rank under skrl's ``JAX_*`` launch contract, CPU or GPU.

Importing skrl initialises JAX's multi-process runtime from the ``JAX_*`` variables our jaxrun sets
(on CPU, JAX's cross-process collectives run over gloo); skrl's defects there are worked around in
:mod:`isaaclab_mgpu.rank.patches.skrl`. The embedded tasks run in torch on the same device:
observations and actions cross through NumPy on CPU and DLPack on CUDA. Checkpoints hold the
flax-serialised parameters and optimizer states (skrl's own ``Agent.save`` keeps a stale optimizer:
``PPO`` replaces its optimizer object on every step).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from isaaclab_mgpu.rank.backends.base import PPOSettings, parameters_checksum
from isaaclab_mgpu.rank.backends.skrl_torch import SkrlAgentSteps, skrl_rollout
from isaaclab_mgpu.rank.patches.skrl import import_skrl, patch_skrl_jax
from isaaclab_mgpu.rank.tasks import VecTask
from isaaclab_mgpu.rank.worker.rank import RankContext


class SkrlJaxTrainer(SkrlAgentSteps):
    """One rank of skrl PPO (JAX); see the module docstring."""

    comm_kind = "jax"
    framework = "jax"

    def __init__(
        self, task: VecTask, ppo: PPOSettings, ctx: RankContext, directory: str, logger: str = "none"
    ) -> None:
        skrl = import_skrl(torch_distributed=False, jax_distributed=ctx.distributed, cpu=not ctx.is_cuda)
        patch_skrl_jax()
        import jax

        self._jax = jax
        skrl.config.jax.key = ctx.seed
        skrl.config.jax.backend = "jax"  # as Isaac Lab's train.py sets it (skrl 2.1 no longer reads it)
        self.cuda = ctx.is_cuda
        self._build(
            task, ppo, skrl.config.jax.parse_device("cuda" if ctx.is_cuda else "cpu"), directory, logger
        )
        self.obs = self._to_jax(task.obs)

    def _to_jax(self, t: torch.Tensor) -> Any:
        if self.cuda:
            return self._jax.dlpack.from_dlpack(t.contiguous())
        return self._jax.numpy.asarray(t.numpy())

    def _to_torch(self, a: Any) -> torch.Tensor:
        if self.cuda:
            return torch.from_dlpack(a)
        return torch.from_numpy(np.array(a))

    def iterate(self) -> None:
        skrl_rollout(self, to_task=self._to_torch, from_task=self._to_jax)

    def checksum(self) -> str:
        return parameters_checksum((self.agent.policy, self.agent.value))

    def state_dict(self) -> dict[str, Any]:
        import flax

        a = self.agent
        return {
            "policy": flax.serialization.to_bytes(a.policy.state_dict.params),
            "value": flax.serialization.to_bytes(a.value.state_dict.params),
            "policy_optimizer": flax.serialization.to_bytes(a.policy_optimizer.state),
            "value_optimizer": flax.serialization.to_bytes(a.value_optimizer.state),
            "policy_learning_rate": float(a.policy_learning_rate),
            "value_learning_rate": float(a.value_learning_rate),
            "timestep": self.timestep,
            **({"scaler": flax.serialization.to_bytes(self._scaler().state_dict)} if self._scaler() else {}),
        }

    def _scaler(self) -> Any:
        """skrl's running standard scaler on the observations, if configured."""
        scaler = self.agent._observation_preprocessor
        return scaler if isinstance(getattr(scaler, "state_dict", None), dict) else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import flax

        a = self.agent
        for name in ("policy", "value"):
            model = getattr(a, name)
            params = flax.serialization.from_bytes(model.state_dict.params, state[name])
            model.state_dict = model.state_dict.replace(params=params)
            opt = getattr(a, f"{name}_optimizer")
            opt_state = flax.serialization.from_bytes(opt.state, state[f"{name}_optimizer"])
            setattr(a, f"{name}_optimizer", opt.replace(state=opt_state))
            setattr(a, f"{name}_learning_rate", state[f"{name}_learning_rate"])
        if (scaler := self._scaler()) is not None and "scaler" in state:
            scaler.state_dict = flax.serialization.from_bytes(scaler.state_dict, state["scaler"])
        self.timestep = int(state["timestep"])
