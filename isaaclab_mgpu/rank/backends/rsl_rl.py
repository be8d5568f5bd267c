"""rsl-rl PPO (``OnPolicyRunner``) on gloo CPU ranks as well as NCCL GPU ranks.

:class:`MgpuRunner` overrides only ``OnPolicyRunner._configure_multi_gpu`` (rsl-rl-lib 5.5 insists on
NCCL and ``cuda:{LOCAL_RANK}``, :mod:`isaaclab_mgpu.rank.patches.rsl_rl`): the process group follows
the rank's device and the rank comes from the worker's context. Everything else (parameter
broadcast, bucketed gradient all-reduce, KL all-reduce) is rsl-rl's own.

The worker drives iterations itself through the algorithm's public steps (``act``,
``process_env_step``, ``compute_returns``, ``update``), so it can report, checkpoint and stop
between any two; ``OnPolicyRunner.learn`` would run them all in one call. Curves go through
rsl-rl's own ``Logger`` as ``learn`` feeds it, so rank 0's run folder gets the tags rsl-rl users
know (``Train/mean_reward``, ...); the report block ``Logger.log`` prints is swallowed.

With ``--logger wandb`` the writer is rsl-rl's ``WandbLogWriter``, whose ``add_scalar`` logs with
a step and leaves W&B's row open until a later step arrives: the worker commits the row once the
iteration's scalars are in (:meth:`RslRlTrainer.log_iteration`), so a rank 0 that dies has every
iteration it finished in its W&B run.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Mapping
from typing import Any

import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.rank import drift
from isaaclab_mgpu.rank.backends.base import TORCH_FLAGS, PPOSettings, checksum, torch_flag
from isaaclab_mgpu.rank.patches.rsl_rl import set_rank_fields
from isaaclab_mgpu.rank.patches.tensorboard import restart_curve
from isaaclab_mgpu.rank.tasks import VecTask
from isaaclab_mgpu.rank.worker.rank import RankContext, init_torch_group


def set_torch_flags() -> None:
    """Apply :data:`.base.TORCH_FLAGS` (TF32 on, cuDNN non-deterministic, no autotuning)."""
    for path, value in TORCH_FLAGS.items():
        setattr(*torch_flag(path), value)


class TaskVecEnv(VecEnv):
    """An embedded :class:`VecTask` seen through rsl-rl's ``VecEnv`` interface."""

    def __init__(self, task: VecTask) -> None:
        self.task = task
        self.num_envs = task.num_envs
        self.num_actions = task.num_actions
        self.max_episode_length = task.max_episode_length
        self.device = task.device
        # The task's configuration dataclass: rsl-rl's W&B writer stores it (``asdict``) as the run's config.
        self.cfg = task.cfg

    @property
    def episode_length_buf(self) -> torch.Tensor:  # type: ignore[override]
        return self.task.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.task.episode_length_buf = value

    def get_observations(self) -> TensorDict:
        return TensorDict({"policy": self.task.obs}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        _, reward, terminated, truncated, info = self.task.step(actions)  # task.obs is the new obs
        dones = (terminated | truncated).long()
        return self.get_observations(), reward, dones, {"time_outs": info["time_outs"], "log": {}}


class MgpuRunner(OnPolicyRunner):
    """``OnPolicyRunner`` whose multi-GPU set-up also accepts CPU ranks (gloo)."""

    def __init__(self, env: VecEnv, train_cfg: dict, ctx: RankContext, log_dir: str | None = None) -> None:
        self.ctx = ctx
        super().__init__(env, train_cfg, log_dir=log_dir, device=ctx.device)

    def _configure_multi_gpu(self) -> None:
        """Upstream's fields, but gloo on CPU / NCCL on CUDA, and the rank from the worker."""
        ctx = self.ctx
        set_rank_fields(self, ctx.world_size, ctx.rank, ctx.local_rank)
        if not self.is_distributed:
            return
        if ctx.is_cuda and self.device != f"cuda:{self.gpu_local_rank}":
            raise ValueError(f"device {self.device!r} does not match local rank {self.gpu_local_rank}")
        init_torch_group(ctx)


def logger_cfg(logger: str) -> Any:
    """rsl-rl 5.5's ``cfg["logger"]`` for ``--logger``: the plain ``"tensorboard"`` or W&B's dict form."""
    if logger == "wandb":
        return {"class_name": "WandbLogWriter", "project_name": "isaaclab-mgpu"}
    return "tensorboard"


def train_cfg(ppo: PPOSettings) -> dict[str, Any]:
    """rsl-rl 5.5's runner configuration for :class:`PPOSettings`."""
    mlp = {"class_name": "MLPModel", "hidden_dims": ppo.hidden_dims, "activation": "elu",
           "obs_normalization": ppo.obs_normalization}  # fmt: skip
    return {
        "num_steps_per_env": ppo.rollout,
        "save_interval": 0,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "check_for_nan": True,
        "actor": {
            **mlp,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": ppo.init_std},
        },
        "critic": dict(mlp),
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": ppo.epochs,
            "num_mini_batches": ppo.mini_batches,
            "clip_param": ppo.clip,
            "gamma": ppo.gamma,
            "lam": ppo.lam,
            "value_loss_coef": ppo.value_loss_coef,
            "entropy_coef": ppo.entropy_coef,
            "learning_rate": ppo.learning_rate,
            "max_grad_norm": ppo.max_grad_norm,
            "use_clipped_value_loss": True,
            "schedule": "adaptive",
            "desired_kl": ppo.desired_kl,
        },
    }


class RslRlTrainer:
    """One rank of rsl-rl PPO (see the module docstring)."""

    comm_kind = "torch"

    def __init__(
        self, env: Any, ppo: PPOSettings, ctx: RankContext, directory: str, logger: str = "none"
    ) -> None:
        self.env = TaskVecEnv(env)
        cfg = train_cfg(ppo)
        writes = logger != "none" and ctx.rank == 0
        if writes:
            cfg["logger"] = logger_cfg(logger)
        self.runner = MgpuRunner(self.env, cfg, ctx, directory if writes else None)
        self.log = self.runner.logger
        if writes:
            self.log.init_logging_writer()
        self._times = (0.0, 0.0)
        self._losses: dict[str, float] = {}
        self.alg = self.runner.alg
        self.rollout = int(self.runner.cfg["num_steps_per_env"])
        self.steps_per_iteration = self.env.num_envs * self.rollout
        self.alg.train_mode()
        self.obs = self.env.get_observations().to(ctx.device)

    def sync(self) -> None:
        """Broadcast rank 0's parameters (rsl-rl's own ``broadcast_parameters``)."""
        if self.runner.is_distributed:
            self.alg.broadcast_parameters()

    def iterate(self) -> None:
        alg, env, device = self.alg, self.env, self.runner.device
        obs = self.obs
        start = time.perf_counter()
        with torch.inference_mode():
            for _ in range(self.rollout):
                actions = alg.act(obs)
                obs, rewards, dones, extras = env.step(actions.to(env.device))
                obs, rewards, dones = obs.to(device), rewards.to(device), dones.to(device)
                alg.process_env_step(obs, rewards, dones, extras)
                self.log.process_env_step(rewards, dones, extras, None)
            collected = time.perf_counter()
            alg.compute_returns(obs)
        progress.beat("update")  # rsl-rl's update all-reduces the gradients
        self._losses = alg.update()
        self._times = (collected - start, time.perf_counter() - collected)
        self.obs = obs

    def log_iteration(self, iteration: int, start: int, total: int, scalars: Mapping[str, float]) -> None:
        """rsl-rl's own log of 0-based ``iteration`` (as ``learn`` counts), then ``scalars``."""
        writer = self.log.writer
        if writer is None:
            return
        with contextlib.redirect_stdout(io.StringIO()):  # Logger.log prints a report block
            self.log.log(
                it=iteration,
                start_it=start,
                total_it=total,
                collect_time=self._times[0],
                learn_time=self._times[1],
                loss_dict=self._losses,
                learning_rate=self.alg.learning_rate,
                action_std=self.alg.get_policy().output_std,
                rnd_weight=None,
            )
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, iteration)
        from rsl_rl.utils.wandb_log_writer import WandbLogWriter

        if isinstance(writer, WandbLogWriter):
            import wandb

            wandb.log({}, step=iteration, commit=True)  # the row is whole: W&B writes it now

    def resumed_at(self, iteration: int) -> None:
        """rsl-rl logs 0-based iteration ``it`` at step ``it``: the resumed run's first is ``iteration``."""
        writer = self.log.writer
        file_writer = getattr(writer, "_get_file_writer", None)  # torch's SummaryWriter (not W&B's)
        if file_writer is not None:
            restart_curve(file_writer().add_event, iteration)

    def close(self) -> None:
        """Flush and close rsl-rl's writer (TensorBoard's SummaryWriter or a LogWriter such as W&B)."""
        from rsl_rl.utils.log_writer import LogWriter

        writer = self.log.writer
        if isinstance(writer, LogWriter):
            self.log.stop_logging_writer()
        elif writer is not None:
            writer.close()
        self.log.writer = None

    def checksum(self) -> str:
        saved = self.alg.save()
        tensors = [
            saved[k][name] for k in ("actor_state_dict", "critic_state_dict") for name in sorted(saved[k])
        ]
        return checksum(t.detach().float().cpu().numpy() for t in tensors)

    def drift_source(self) -> drift.Source:
        """The models (their buffers hold rsl-rl's empirical normalizer) and the optimizer."""
        return drift.rsl_rl_source(self.alg)

    def state_dict(self) -> dict[str, Any]:
        return self.alg.save()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alg.load(state, None, strict=True)
