"""What the worker needs from a training back-end, and the PPO settings they all share.

The worker owns the iteration loop (progress, stop agreement, checkpoints, summary); a back-end
only knows how to run *one* iteration (a rollout of ``rollout`` steps in every environment, then
the library's own PPO update, whose gradient all-reduce keeps the ranks identical), how to
fingerprint its parameters, how to show its state to the drift check, and how to save and load it.

:class:`PPOSettings` is one set of hyper-parameters mapped onto each library's own configuration,
so the three back-ends train the same problem the same way; ``agent.<field>=value`` on the command
line overrides a field.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

# The PPO settings and per-task defaults live with the other override targets (stdlib only).
from isaaclab_mgpu.contract.settings import DEFAULTS, FALLBACK, PPOSettings, TaskDefaults, settings_with

__all__ = ["DEFAULTS", "FALLBACK", "PPOSettings", "TaskDefaults", "Trainer", "checksum", "settings_with"]


def checksum(arrays: Iterable[np.ndarray]) -> str:
    """16 hex digits of SHA-256 over the arrays' float32 bytes, in the given order."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes())
    return h.hexdigest()[:16]


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

    def component_arrays(self) -> dict[str, list[Any]]:
        """The state the drift check hashes, as arrays per component: ``policy``, ``optimizer``,
        ``normalizer`` (:mod:`isaaclab_mgpu.rank.drift`)."""

    def perturb(self) -> str:
        """``--simulate_fault drift``: put this rank's state out of step; return the component."""

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume (picklable; torch tensors or bytes)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def log_iteration(self, iteration: int, start: int, total: int, scalars: Mapping[str, float]) -> None:
        """Write this iteration's curves and ``scalars`` with the library's own writer (rank 0 only)."""

    def resumed_at(self, iteration: int) -> None:
        """Mark in the event file that the run restarts after ``iteration`` completed iterations
        (:func:`session_start`), so TensorBoard drops what an attempt logged after that point."""

    def close(self) -> None:
        """Flush and close the library's writer."""


def session_start(add_event: Any, step: int) -> None:
    """Write TensorBoard's ``SessionLog.START`` at ``step`` through ``add_event`` (an event writer's).

    TensorBoard's readers treat it as a restart: events of earlier files at ``step`` or later are
    purged from the curves (what a failed attempt logged after its last checkpoint), so a resumed
    run reads as one curve with no step twice."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    add_event(Event(step=step, wall_time=time.time(), session_log=SessionLog(status=SessionLog.START)))


def skrl_resumed_at(agent: Any, timestep: int) -> None:
    """skrl's writer: its next scalars come after ``timestep`` (skrl writes at the step count)."""
    writer = getattr(agent, "writer", None)
    if writer is not None:
        # skrl's own SummaryWriter keeps its tensorboard EventFileWriter there.
        session_start(writer._event_file_writer.add_event, timestep + 1)


def skrl_log_iteration(agent: Any, timestep: int, scalars: Mapping[str, float]) -> None:
    """Add ``scalars`` at ``timestep`` (skrl counts environment steps) to skrl's own event file, if any."""
    writer = getattr(agent, "writer", None)
    if writer is not None:
        for tag, value in scalars.items():
            writer.add_scalar(tag=tag, value=float(value), timestep=timestep)


def skrl_close(agent: Any) -> None:
    """Flush and close skrl's writer (skrl leaves it open; queued events would be lost at exit), then
    finish the W&B run skrl opened, if any, which reads that event file a last time."""
    writer = getattr(agent, "writer", None)
    if writer is not None:
        writer.close()
        agent.writer = None
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def skrl_ppo_cfg(ppo: PPOSettings, scheduler: type, directory: str, logger: str = "none") -> dict[str, Any]:
    """skrl 2.1's ``PPO_CFG`` fields for :class:`PPOSettings` (torch and JAX take the same).

    With a ``logger``, skrl's own experiment writer puts its TensorBoard event file straight into
    ``directory`` (rank 0's run folder) once per iteration (``write_interval`` = one rollout);
    ``wandb`` also syncs it to Weights & Biases. skrl's checkpoints stay off: the worker saves its own.
    """
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


def skrl_scaler(
    cfg: dict[str, Any], ppo: PPOSettings, scaler: type, space: Any, device: Any
) -> dict[str, Any]:
    """``cfg`` (:func:`skrl_ppo_cfg`'s) with skrl's running standard scaler on the observations when
    ``agent.obs_normalization`` asks for one (skrl keeps it per rank: it does not synchronise it)."""
    if ppo.obs_normalization:
        cfg.update(observation_preprocessor=scaler,
                   observation_preprocessor_kwargs={"size": space, "device": device})  # fmt: skip
    return cfg


def skrl_network(ppo: PPOSettings) -> list[dict[str, Any]]:
    """skrl model-instantiator network spec for the hidden layers of :class:`PPOSettings`."""
    return [{"name": "net", "input": "OBSERVATIONS", "layers": ppo.hidden_dims, "activations": "elu"}]
