"""Patches of rsl-rl (``rsl_rl.runners.OnPolicyRunner``), for mgpu's worker and Isaac Lab's training.

**CPU ranks (gloo).** Upstream ``OnPolicyRunner._configure_multi_gpu`` (rsl-rl-lib 5.5) insists on
``cuda:LOCAL_RANK`` and calls ``init_process_group("nccl")`` and ``torch.cuda.set_device``.
:func:`set_rank_fields` sets the fields it sets without that set-up: mgpu's own runner
(:class:`isaaclab_mgpu.rank.backends.rsl_rl.MgpuRunner`) overrides the method with it, and around
Isaac Lab's training :func:`gloo_ranks` replaces the method so that it uses the worker's group.

**Observation (every device).** :func:`observe` wraps, on the runner Isaac Lab built,
``alg.broadcast_parameters`` (first checksum), ``logger.log`` (end of an iteration; mean reward
from the logger's own ``rewbuffer``; the drift check hashes ``alg``'s actor, critic and optimizer),
``save`` (the checkpoint's iteration; written through :func:`~.base.durable_saves`) and ``learn``
(last checksum, before Isaac Lab destroys the process group). On mgpu's checkpoint request (or a
drift under ``--on_drift stop``), agreed by every rank at the end of an iteration, rank 0 saves
``model_<it>.pt`` through ``OnPolicyRunner.save`` and ``learn`` ends there.

**Resume (every device).** Isaac Lab's ``train_rsl_rl.py`` resumes with ``OnPolicyRunner.load(path)``
(actor, critic with their normalisers, optimizer, ``iter``), then ``runner.learn(max_iterations)``.
:func:`continue_counter` changes three upstream behaviours on that runner, nothing else:

1. ``save`` stores ``iter``, the last *completed* iteration ``k``, and ``learn`` starts at
   ``current_learning_iteration``: a resume would train ``k`` again. After ``load`` the counter is ``k + 1``.
2. ``learn(n)`` runs ``n`` *more* iterations; ``--max_iterations`` is the run's total, so ``learn``
   is given what is left (none left: it trains nothing and saves the loaded state again).
3. ``Logger.init_logging_writer`` (called by ``learn``) opens a new TensorBoard writer; it starts
   with TensorBoard's restart marker at its first step (:func:`.tensorboard.restart_curve`), so the
   steps an interrupted attempt logged after its last checkpoint are dropped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from isaaclab_mgpu.rank import drift
from isaaclab_mgpu.rank.patches.base import Observer, StopTraining, durable_saves, replaced
from isaaclab_mgpu.rank.patches.tensorboard import restart_curve


def set_rank_fields(runner: Any, world_size: int, rank: int, local_rank: int) -> None:
    """Upstream ``_configure_multi_gpu``'s rank fields and ``cfg["multi_gpu"]``, without its NCCL set-up."""
    runner.gpu_world_size = world_size
    runner.is_distributed = world_size > 1
    runner.gpu_local_rank = local_rank if runner.is_distributed else 0
    runner.gpu_global_rank = rank if runner.is_distributed else 0
    runner.cfg["multi_gpu"] = (
        {"global_rank": runner.gpu_global_rank, "local_rank": runner.gpu_local_rank, "world_size": world_size}
        if runner.is_distributed
        else None
    )


def gloo_ranks() -> contextlib.AbstractContextManager[None]:
    """``OnPolicyRunner._configure_multi_gpu`` for CPU ranks whose gloo group already exists."""
    from rsl_rl.runners import OnPolicyRunner

    return replaced(OnPolicyRunner, "_configure_multi_gpu", _configure_multi_gpu_gloo)


def _configure_multi_gpu_gloo(self: Any) -> None:
    # rsl_rl OnPolicyRunner._configure_multi_gpu requires cuda:LOCAL_RANK and creates an NCCL group;
    # same fields, the worker's gloo group.
    import torch.distributed as dist

    world = int(os.getenv("WORLD_SIZE", "1"))
    set_rank_fields(self, world, int(os.getenv("RANK", "0")), int(os.getenv("LOCAL_RANK", "0")))
    if self.is_distributed and not dist.is_initialized():
        raise RuntimeError("mgpu's CPU rank has no gloo process group before rsl-rl starts")


def _torch_modules(obj: Any) -> list[Any]:
    import torch

    return [v for _, v in sorted(vars(obj).items()) if isinstance(v, torch.nn.Module)]


def observe(runner: Any, observer: Observer) -> None:
    """Report the runner's broadcast, iterations, saves and end to ``observer``; stop when it asks."""
    from rsl_rl.runners import OnPolicyRunner

    alg, logger = runner.alg, runner.logger
    steps = int(runner.env.num_envs) * int(runner.cfg["num_steps_per_env"])
    learn, log, save = runner.learn, logger.log, runner.save
    broadcast = getattr(alg, "broadcast_parameters", None)
    state = {"synced": False}
    observer.state(drift.rsl_rl_source(alg))  # for the drift check, at each logged iteration

    def sync() -> None:
        if not state["synced"]:
            state["synced"] = True
            observer.synced(_torch_modules(alg))

    if broadcast is not None:

        def broadcast_parameters(*args: Any, **kwargs: Any) -> Any:
            # rsl_rl PPO.broadcast_parameters: rank 0's parameters now on every rank.
            result = broadcast(*args, **kwargs)
            sync()
            return result

        alg.broadcast_parameters = broadcast_parameters

    def saved(path: str, *args: Any, **kwargs: Any) -> Any:
        # rsl_rl OnPolicyRunner.save stores iter = the index of the last completed iteration; its
        # torch.save(saved_dict, path) writes in place: made atomic and fsynced (durable_saves).
        with durable_saves(sys.modules[OnPolicyRunner.save.__module__]):
            result = save(path, *args, **kwargs)
        observer.saved(int(runner.current_learning_iteration) + 1)
        return result

    def logged(*args: Any, **kwargs: Any) -> Any:
        # rsl_rl Logger.log runs once per iteration on every rank (current_learning_iteration is set).
        sync()  # single rank: nothing was broadcast
        result = log(*args, **kwargs)
        buffer = getattr(logger, "rewbuffer", None)
        if observer.iteration(steps, sum(buffer) / len(buffer) if buffer else None):
            # Asked to checkpoint: save as learn's own save_interval branch would (the writer rank
            # only), then leave learn before its next iteration.
            if logger.writer is not None:
                runner.save(os.path.join(logger.log_dir, f"model_{runner.current_learning_iteration}.pt"))
            raise StopTraining
        return result

    def learned(*args: Any, **kwargs: Any) -> Any:
        # rsl_rl OnPolicyRunner.learn; Isaac Lab destroys the process group right after it returns.
        try:
            result = learn(*args, **kwargs)
        except StopTraining:  # saved already: what learn does after its loop, less the final save
            result = None
            if logger.writer is not None:
                logger.stop_logging_writer()
        sync()
        observer.finished()
        return result

    logger.log = logged
    runner.learn = learned
    runner.save = saved


def continue_counter(runner: Any, on_resumed: Callable[[int, str], None]) -> None:
    """Make ``runner`` (an ``OnPolicyRunner``) resume at the next iteration and learn up to the total."""
    load, learn, logger = runner.load, runner.learn, runner.logger
    init_writer = logger.init_logging_writer
    state: dict[str, int | None] = {"resumed_at": None}

    def loaded(path: str, *args: Any, **kwargs: Any) -> Any:
        # OnPolicyRunner.load sets current_learning_iteration to the checkpoint's last completed index.
        infos = load(path, *args, **kwargs)
        start = int(runner.current_learning_iteration) + 1
        runner.current_learning_iteration = start
        state["resumed_at"] = start
        on_resumed(start, path)
        return infos

    def learned(num_learning_iterations: int, *args: Any, **kwargs: Any) -> Any:
        # OnPolicyRunner.learn(n) trains n more; Isaac Lab passes max_iterations, mgpu's total.
        left = int(num_learning_iterations) - int(runner.current_learning_iteration)
        if left <= 0 and state["resumed_at"] is not None:
            runner.current_learning_iteration -= 1  # nothing left: keep the loaded checkpoint's own index
        return learn(max(left, 0), *args, **kwargs)

    def writer_opened(*args: Any, **kwargs: Any) -> Any:
        # rsl_rl Logger.init_logging_writer: a new event file in the run folder.
        result = init_writer(*args, **kwargs)
        writer = getattr(logger, "writer", None)
        if hasattr(writer, "_get_file_writer"):  # torch's SummaryWriter (and rsl-rl's W&B/Neptune ones)
            restart_curve(writer._get_file_writer().add_event, int(runner.current_learning_iteration))
        return result

    runner.load = loaded
    runner.learn = learned
    logger.init_logging_writer = writer_opened
