"""What the worker needs from a training back-end (:class:`Trainer`), and the PPO settings they share.

The worker owns the iteration loop; a back-end only runs *one* iteration (a rollout, then the
library's own PPO update, whose gradient all-reduce keeps the ranks identical), fingerprints its
parameters, shows its state to the drift check, and saves and loads it. :class:`PPOSettings`
(``agent.<field>=value`` on the command line) maps onto each library's own configuration, so the
three back-ends train the same problem the same way.
"""

from __future__ import annotations

import hashlib
import operator
import os
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from isaaclab_mgpu.contract.settings import PPOSettings
from isaaclab_mgpu.rank.drift import Source

#: Isaac Lab's rsl-rl ``train.py`` values, set by the rsl-rl back-end; ``train_in_process`` restores them.
TORCH_FLAGS = {
    "cuda.matmul.allow_tf32": True,
    "cudnn.allow_tf32": True,
    "cudnn.deterministic": False,
    "cudnn.benchmark": False,
}


def torch_flag(path: str) -> tuple[Any, str]:
    """The object under ``torch.backends`` and the attribute that a :data:`TORCH_FLAGS` key names."""
    import torch

    owner, _, name = path.rpartition(".")
    return operator.attrgetter(owner)(torch.backends), name


def checksum(arrays: Iterable[np.ndarray]) -> str:
    """16 hex digits of SHA-256 over the arrays' float32 bytes, in the given order."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes())
    return h.hexdigest()[:16]


def parameters_checksum(modules: Iterable[Any]) -> str:
    """:func:`checksum` of the trained parameters of ``modules`` (torch modules or skrl JAX models)."""
    # Parameters only: normaliser buffers are updated per rank in every library's multi-GPU mode.
    arrays: list[np.ndarray] = []
    for module in modules:
        named = getattr(module, "named_parameters", None)
        if callable(named):  # torch.nn.Module
            arrays += [p.detach().float().cpu().numpy() for _, p in sorted(named())]
        else:  # skrl JAX model: parameters in .state_dict.params
            import jax

            state = module.state_dict
            arrays += [
                np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(getattr(state, "params", state))
            ]
    return checksum(arrays)


class Trainer(Protocol):
    """One rank's PPO learner bound to its environments."""

    comm_kind: str
    """Which runtime carries the worker's own collectives: ``torch`` or ``jax``."""

    steps_per_iteration: int
    """Environment steps this rank takes per iteration (``num_envs * rollout``)."""

    def iterate(self) -> None:
        """Run one rollout and one PPO update."""

    def checksum(self) -> str:
        """Fingerprint of the trained parameters (equal on every rank when synchronised)."""

    def drift_source(self) -> Source:
        """Where this rank's state is: what the drift check hashes, what ``--simulate_fault drift`` nudges."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (picklable; torch tensors or bytes)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def log_iteration(self, iteration: int, start: int, total: int, scalars: Mapping[str, float]) -> None:
        """Write this iteration's curves and ``scalars`` with the library's own writer (rank 0 only)."""

    def resumed_at(self, iteration: int) -> None:
        """Mark the restart after ``iteration`` in the event file (:mod:`..patches.tensorboard`)."""

    def close(self) -> None:
        """Flush and close the library's writer."""


def skrl_ppo_cfg(ppo: PPOSettings, scheduler: type, directory: str, logger: str = "none") -> dict[str, Any]:
    """skrl 2.1's ``PPO_CFG`` fields for :class:`PPOSettings` (torch and JAX take the same)."""
    # With a logger, skrl's writer puts its event file into ``directory`` once per rollout (W&B syncs
    # it); skrl's checkpoints stay off: the worker saves its own.
    folder = os.path.normpath(directory)
    experiment = {
        "directory": os.path.dirname(folder) or ".",
        "experiment_name": os.path.basename(folder),
        "write_interval": ppo.rollout if logger != "none" else 0,
        "checkpoint_interval": 0,
    }
    if logger == "wandb":
        experiment.update(wandb=True, wandb_kwargs={"project": "isaaclab-mgpu"})
    return {
        "rollouts": ppo.rollout,
        "learning_epochs": ppo.epochs,
        "mini_batches": ppo.mini_batches,
        "discount_factor": ppo.gamma,
        "gae_lambda": ppo.lam,
        "learning_rate": ppo.learning_rate,
        "learning_rate_scheduler": scheduler,
        "learning_rate_scheduler_kwargs": {"kl_threshold": ppo.desired_kl},
        "grad_norm_clip": ppo.max_grad_norm,
        "ratio_clip": ppo.clip,
        "value_clip": ppo.clip,
        "entropy_loss_scale": ppo.entropy_coef,
        "value_loss_scale": ppo.value_loss_coef,
        "experiment": experiment,
    }
