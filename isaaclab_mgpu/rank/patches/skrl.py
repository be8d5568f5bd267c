"""Patches of skrl 2.1, for mgpu's worker and Isaac Lab's skrl training; every one names its upstream.

1. ``skrl/__init__.py`` (``_Config.PyTorch.__init__``) calls ``torch.distributed.init_process_group
   ("nccl")`` and ``torch.cuda.set_device`` at *import* time whenever ``WORLD_SIZE > 1`` (a CPU rank
   dies importing skrl), and ``_Config.JAX.__init__`` calls ``jax.distributed.initialize`` whenever
   ``JAX_WORLD_SIZE > 1``. :func:`import_skrl` sets up only the runtime this rank uses: for skrl
   torch the worker's group already exists, so skrl's call is a no-op (``set_device`` skipped on
   CPU); for skrl JAX the torch-style ``WORLD_SIZE`` (our jaxrun sets it) is hidden during the import.
2. ``skrl.models.jax.base.Model.broadcast_parameters`` uses ``jax.experimental.multihost_utils``
   without importing it (``AttributeError`` on the first distributed run): imported here.
3. ``Model.reduce_parameters`` (skrl.models.jax.base) and ``PPO.update`` (skrl.agents.jax.ppo.ppo,
   KL reduction) build a fresh ``jax.pmap(lambda ...)`` per call, defeating JAX's compilation cache
   (~53 ms per call instead of ~1.3 ms). ``reduce_parameters`` is replaced by one using a single
   pmap; the PPO module gets a ``jax`` proxy whose ``pmap`` memoises by the lambda's code object
   (those lambdas close over nothing, so equal code means an equal function).
4. ``Agent.init`` resolves ``experiment.write_interval: auto`` to ``int(timesteps / 100)``, 0 (no
   TensorBoard) under 100 timesteps; there "auto" becomes 1 (:func:`short_run_logging`).
5. On one node's CPU ranks, fix 3's gradient all-reduce and PPO's KL sum (its lambda recognised by
   its code) go through :mod:`isaaclab_mgpu.rank.localcomm`'s channel instead of XLA's gloo, summed
   in rank order, so parameters stay bitwise equal. Their waits, and fix 3's ``psum``, go into the
   rank's progress report (:mod:`.timing`), timed after JAX computed their input.
6. Resume (Isaac Lab's ``train_skrl.py``): ``Agent.load(path)`` restores the agent's modules only,
   and ``Trainer.train`` counts ``range(cfg.timesteps)`` from 0. :func:`continue_timesteps` reads
   the timestep ``T`` from skrl's checkpoint name (``agent_<T>.pt``, ``.pickle`` for JAX), runs the
   timesteps left of the total and hands the agent's per-timestep calls the timestep counted from
   ``T``; the writer starts with TensorBoard's restart marker at ``T + 1`` (:mod:`.tensorboard`). A
   checkpoint between two updates is refused (the rollout memory is not in it), and ``auto``
   checkpoint intervals are rounded down to whole rollouts, at least one (:func:`checkpoints_at_updates`).
7. ``Agent.init`` (torch and JAX bases) keeps TensorBoard and checkpoints to rank 0 but calls
   ``wandb.init`` on every rank: on the others ``experiment.wandb`` is turned off first
   (:func:`_wandb_on_rank_zero`).
8. ``skrl.utils.tensorboard`` binds ``EventFileWriter`` by name at import, so W&B's
   ``sync_tensorboard`` (which replaces that class inside ``wandb.init``) never sees skrl's event
   file: the name looks the class up per writer (:func:`_writer_seen_by_wandb`).
9. ``skrl.agents.jax.base.Agent.init`` describes the models for W&B through the torch attribute
   ``_modules`` (``AttributeError`` on flax models): for JAX agents the W&B part of it runs here,
   the models by their ``repr`` (:func:`_open_wandb_for_jax`).
10. skrl's log formatter (``_Formatter``) wraps every line in ANSI colour codes, whatever the
   stream: before skrl is imported, the ``skrl`` logger gets a filter that gives its handlers a
   plain ``[skrl:LEVEL] message`` formatter (:func:`plain_log_lines`).
11. The running standard scaler's ``_parallel_variance`` (torch: the class's method; JAX: the
   module function its ``__call__`` looks up) updates from this rank's batch alone, so the ranks'
   scalers drift apart. On a distributed rank the batch's mean, variance and size are combined over
   every rank first (torch: :func:`.base.all_moments`; JAX: an all-gather through the channel or
   ``process_allgather``, summed in rank order) (:func:`sync_running_scalers`, :func:`_sync_jax_scalers`).

Fix 10 comes first, in :func:`import_skrl` and :func:`import_for_isaaclab`; fix 8, and fix 7 for
torch, are applied by :func:`patch_wandb` (from those two); fixes 7 and 9 for JAX agents by
:func:`patch_skrl_jax`.

**Observation of Isaac Lab's skrl runner**, :func:`observe`: the agent has broadcast its parameters
when the runner exists (first checksum); ``agent.update`` ends an iteration (mean of the agent's
"Total reward (mean)" since the last update, kept from ``write_tracking_data``, which clears it);
``write_checkpoint`` names a checkpoint's iteration and writes through :func:`.base.durable_saves`;
``run`` ends training. On mgpu's checkpoint request, agreed at an update, ``post_interaction``
finishes that timestep, rank 0 saves (unless the interval just did) and the trainer's loop ends;
Isaac Lab's own final ``agent_<total>`` checkpoint is then skipped, as after a Ctrl-C.

``MGPU_SKRL_JAX_STOCK_PMAP=1`` (benchmarks only; read when :func:`patch_skrl_jax` first runs) leaves
fix 3 out, so ``benchmarks/training.py`` can measure what the cache buys; fix 2 stays on.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from isaaclab_mgpu.contract import env, progress, resume
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.rank import drift, localcomm
from isaaclab_mgpu.rank.patches.base import (
    Observer,
    Proxy,
    StopTraining,
    all_moments,
    durable_saves,
    moment_sums,
    pooled_moments,
    replaced,
)
from isaaclab_mgpu.rank.patches.tensorboard import restart_curve


@contextlib.contextmanager
def _hidden_env(*names: str) -> Iterator[None]:
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def import_skrl(*, torch_distributed: bool, jax_distributed: bool, cpu: bool) -> Any:
    """Import skrl with its import-time distributed set-up limited to what this rank uses (fix 1)."""
    plain_log_lines()
    if "skrl" in sys.modules:
        import skrl

        if skrl.config.torch.is_distributed != torch_distributed or (
            skrl.config.jax.is_distributed != jax_distributed
        ):
            raise RuntimeError(
                "skrl was already imported with another distributed set-up in this process; "
                "start a fresh process for this run"
            )
    else:
        hide = [] if torch_distributed else ["WORLD_SIZE"]
        hide += [] if jax_distributed else ["JAX_WORLD_SIZE"]
        with _hidden_env(*hide), _torch_group_guard(torch_distributed, cpu):
            import skrl
    patch_wandb(torch_distributed=torch_distributed)
    if torch_distributed:
        sync_running_scalers()
    return skrl


def sync_running_scalers() -> None:
    """Fix 11: skrl torch's running standard scaler updates from every rank's batch (idempotent)."""
    from skrl.resources.preprocessors.torch import running_standard_scaler as module

    scaler = module.RunningStandardScaler
    original = scaler._parallel_variance
    if getattr(original, "_mgpu_all_ranks", False):
        return

    def _parallel_variance(self: Any, input_mean: Any, input_var: Any, input_count: int) -> None:
        # RunningStandardScaler._parallel_variance: this rank's batch only; every rank's, combined.
        original(self, *all_moments(input_mean, input_var, input_count))

    _parallel_variance._mgpu_all_ranks = True  # type: ignore[attr-defined]
    scaler._parallel_variance = _parallel_variance


class _PlainFormat(logging.Filter):
    """Fix 10: on each record, any coloured formatter of the ``skrl`` logger's handlers becomes plain."""

    def filter(self, record: logging.LogRecord) -> bool:
        for handler in logging.getLogger("skrl").handlers:
            if not getattr(handler.formatter, "_mgpu_plain", False):
                plain = logging.Formatter("[%(name)s:%(levelname)s] %(message)s")
                plain._mgpu_plain = True  # type: ignore[attr-defined]
                handler.setFormatter(plain)
        return True


def plain_log_lines() -> None:
    """Fix 10: skrl's log lines without ANSI colour codes (idempotent; before or after importing skrl)."""
    log = logging.getLogger("skrl")
    if not any(isinstance(f, _PlainFormat) for f in log.filters):
        log.addFilter(_PlainFormat())


def patch_wandb(*, torch_distributed: bool) -> None:
    """Fix 8, and fix 7 for the torch agents of a distributed run (skrl imported; idempotent)."""
    import skrl

    _writer_seen_by_wandb()
    if torch_distributed:
        import skrl.agents.torch.base as torch_base

        _wandb_on_rank_zero(torch_base.Agent, lambda: skrl.config.torch.rank)


def _wandb_on_rank_zero(agent_class: Any, rank: Any, *, jax: bool = False) -> None:
    """Fix 7 (and 9 for JAX agents): only rank 0 opens a W&B run (idempotent)."""
    original = agent_class.init
    if getattr(original, "_mgpu_wandb_rank_zero", False):
        return

    def init(self: Any, *args: Any, trainer_cfg: Any = None, **kwargs: Any) -> Any:
        # skrl.agents.<framework>.base.Agent.init: its distributed branch leaves wandb on ("TODO").
        if rank():
            self.cfg.experiment.wandb = False
        if not (jax and self.cfg.experiment.wandb):
            return original(self, *args, trainer_cfg=trainer_cfg, **kwargs)
        _open_wandb_for_jax(self, trainer_cfg)
        self.cfg.experiment.wandb = False  # open already: skrl's own init must not describe the models
        try:
            return original(self, *args, trainer_cfg=trainer_cfg, **kwargs)
        finally:
            self.cfg.experiment.wandb = True

    init._mgpu_wandb_rank_zero = True  # type: ignore[attr-defined]
    agent_class.init = init


def _open_wandb_for_jax(agent: Any, trainer_cfg: Any) -> None:
    """Fix 9: ``wandb.init`` as skrl.agents.jax.base.Agent.init calls it, the models by their repr."""
    import wandb

    trainer = {} if trainer_cfg is None else dataclasses.asdict(trainer_cfg)
    models = {name: repr(model) for name, model in agent.models.items()}
    kwargs = copy.deepcopy(agent.cfg.experiment.wandb_kwargs)
    kwargs.setdefault("name", os.path.split(agent.experiment_dir)[-1])
    kwargs.setdefault("sync_tensorboard", True)
    kwargs.setdefault("config", {})
    kwargs["config"].update({**dataclasses.asdict(agent.cfg), **trainer, **models})
    wandb.init(**kwargs)


def _writer_seen_by_wandb() -> None:
    """Fix 8: skrl's writer takes ``EventFileWriter`` from tensorboard when it is created (idempotent)."""
    import skrl.utils.tensorboard as skrl_tensorboard
    from tensorboard.summary.writer import event_file_writer

    if getattr(skrl_tensorboard.EventFileWriter, "_mgpu_late_bound", False):
        return

    def late_event_file_writer(*args: Any, **kwargs: Any) -> Any:
        # The class as it is now: W&B's sync_tensorboard subclass once wandb.init has run.
        return event_file_writer.EventFileWriter(*args, **kwargs)

    late_event_file_writer._mgpu_late_bound = True  # type: ignore[attr-defined]
    skrl_tensorboard.EventFileWriter = late_event_file_writer


@contextlib.contextmanager
def _torch_group_guard(active: bool, cpu: bool) -> Iterator[None]:
    if not active:
        yield
        return
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError("join the torch process group before importing skrl on a distributed rank")
    original_set_device = torch.cuda.set_device

    def init_process_group(*args: Any, **kwargs: Any) -> None:
        # skrl/__init__.py: _Config.PyTorch.__init__ hard-codes "nccl"; the group already exists.
        return None

    def set_device(device: Any) -> None:
        if not cpu:
            original_set_device(device)

    with (
        replaced(dist, "init_process_group", init_process_group),
        replaced(torch.cuda, "set_device", set_device),
    ):
        yield


_JAX_PATCHED = False


def patch_skrl_jax() -> None:
    """Apply fixes 2 and 3 to skrl's JAX model base and PPO agent, 7 and 9 to its agent base (idempotent)."""
    global _JAX_PATCHED
    if _JAX_PATCHED:
        return
    import jax
    import jax.experimental.multihost_utils  # fix 2: skrl uses it without importing it
    import skrl
    import skrl.agents.jax.base as jax_base

    _wandb_on_rank_zero(jax_base.Agent, lambda: skrl.config.jax.rank, jax=True)
    _sync_jax_scalers()

    if os.environ.get(env.SKRL_JAX_STOCK_PMAP) != "1":
        _cache_pmaps(jax)
    _JAX_PATCHED = True


def _sync_jax_scalers() -> None:
    """Fix 11 for skrl JAX: the running standard scaler updates from every rank's batch."""
    import jax.numpy as jnp
    import skrl
    from skrl.resources.preprocessors.jax import running_standard_scaler as module

    original = module._parallel_variance

    def _parallel_variance(running_mean: Any, running_variance: Any, current_count: Any, array: Any) -> Any:
        # skrl.resources.preprocessors.jax.running_standard_scaler._parallel_variance updates from
        # this rank's batch only: combined over every rank's here (fix 11), then skrl's update.
        if not skrl.config.jax.is_distributed:
            return original(running_mean, running_variance, current_count, array)
        axes = (0, 1) if array.ndim == 3 else (0,)
        n = float(array.shape[0] * (array.shape[1] if array.ndim == 3 else 1))
        mean = np.asarray(jnp.mean(array, axis=axes), dtype=np.float64)
        var = np.asarray(jnp.var(array, axis=axes, ddof=1), dtype=np.float64)
        packed = moment_sums(np.array([n]), mean, var, np.concatenate).astype(np.float32)
        t0 = time.perf_counter()
        channel = localcomm.current()
        if channel is not None and channel.fits(packed):
            rows = channel.all_gather(packed)
        else:
            from jax.experimental import multihost_utils

            rows = np.asarray(multihost_utils.process_allgather(packed)).reshape(-1, packed.size)
        progress.waited(time.perf_counter() - t0)
        total = rows.astype(np.float64).sum(axis=0)  # in rank order: the same bits on every rank
        m, v = (jnp.asarray(x, jnp.float32) for x in pooled_moments(total, mean.shape))
        n_all = np.float32(total[0])
        delta = m - running_mean
        count = current_count + n_all
        m2 = running_variance * current_count + v * n_all + delta**2 * current_count * n_all / count
        return running_mean + delta * n_all / count, m2 / count, count

    module._parallel_variance = _parallel_variance


def _cache_pmaps(jax: Any) -> None:
    """Fix 3: compile skrl's all-reduce ``pmap`` once instead of on every call."""
    import skrl.agents.jax.ppo.ppo as ppo_module
    import skrl.models.jax.base as model_base

    psum = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")

    def reduce_parameters(self: Any, tree: Any) -> Any:
        # skrl.models.jax.base.Model.reduce_parameters with the all-reduce compiled once (fix 3).
        from skrl import config

        leaves, treedef = jax.tree.flatten(tree)
        vector = model_base._vectorize_leaves(leaves)
        # JAX computes asynchronously: the gradients are waited for first, so that the clock below
        # times the all-reduce alone (the rank's busy/wait split, see .timing).
        vector.block_until_ready()
        t0 = time.perf_counter()
        channel = localcomm.current()
        if channel is not None and channel.fits(vector):
            # Fix 5: one node's CPU ranks sum through shared memory instead of XLA's gloo.
            host = np.array(vector)  # a writable host copy
            channel.all_reduce_(host)
            vector = jax.numpy.asarray(host)
        else:
            vector = psum(vector).block_until_ready()
        progress.waited(time.perf_counter() - t0)
        vector = vector / config.jax.world_size
        return jax.tree.unflatten(treedef, model_base._unvectorize_leaves(leaves, vector))

    model_base.Model.reduce_parameters = reduce_parameters
    ppo_module.jax = _CachedPmapJax(jax)


#: The all-reduce lambda of skrl's ``PPO.update``, ``jax.pmap(lambda x: jax.lax.psum(x, "i"),
#: axis_name="i")``, compiled here to recognise it by its code.
_PSUM = lambda x: jax.lax.psum(x, "i")  # noqa: E731, F821  (never called; ``jax`` is not imported here)


def _same_code(a: Any, b: Any) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in ("co_code", "co_names", "co_consts", "co_argcount"))


def _host_sum(channel: localcomm.LocalChannel) -> Callable[[Any], np.ndarray]:
    """``pmap(psum)`` of one array per process, summed through the shared-memory channel (float32, as JAX)."""

    def host_sum(x: Any) -> np.ndarray:
        host = np.array(x, dtype=np.float32)  # waits for x: the clock times the sum alone
        t0 = time.perf_counter()
        channel.all_reduce_(host)
        progress.waited(time.perf_counter() - t0)
        return host

    return host_sum


def _timed_psum(function: Any) -> Callable[[Any], Any]:
    """PPO.update's compiled ``pmap(psum)`` with its wait added to the rank's (see :mod:`.timing`)."""

    def timed_psum(x: Any) -> Any:
        if hasattr(x, "block_until_ready"):
            x.block_until_ready()
        t0 = time.perf_counter()
        result = function(x)
        if hasattr(result, "block_until_ready"):
            result.block_until_ready()
        progress.waited(time.perf_counter() - t0)
        return result

    return timed_psum


class _CachedPmapJax(Proxy):
    """``jax`` as seen by skrl.agents.jax.ppo.ppo, with ``pmap`` memoised per lambda code (fix 3)."""

    def __init__(self, jax: Any) -> None:
        super().__init__(jax)
        self._cache: dict[tuple[Any, ...], Any] = {}

    def pmap(self, fun: Any, *args: Any, **kwargs: Any) -> Any:
        code = getattr(fun, "__code__", None)
        if code is None or fun.__closure__ or fun.__defaults__ or args:
            return self._wrapped.pmap(fun, *args, **kwargs)
        channel = localcomm.current()
        is_psum = kwargs == {"axis_name": "i"} and _same_code(code, _PSUM.__code__)
        if channel is not None and is_psum:
            return _host_sum(channel)  # fix 5: PPO.update's KL sum through shared memory
        key = (code, tuple(sorted(kwargs.items())))
        if key not in self._cache:
            compiled = self._wrapped.pmap(fun, **kwargs)
            self._cache[key] = _timed_psum(compiled) if is_psum else compiled
        return self._cache[key]


def import_for_isaaclab(framework: str, *, cpu: bool, distributed: bool) -> None:
    """Import skrl before Isaac Lab's skrl training does, with fix 1 where this rank needs it."""
    # CPU ranks, and for JAX the torch-style WORLD_SIZE mgpu's JAX launcher sets hidden from skrl's
    # torch side. GPU torch ranks import skrl as Isaac Lab does: skrl creates the NCCL group.
    plain_log_lines()
    jax = framework == "jax"
    if jax:
        jax_distributed = int(os.environ.get("JAX_WORLD_SIZE", "1")) > 1
        import_skrl(torch_distributed=False, jax_distributed=jax_distributed, cpu=cpu)
        patch_skrl_jax()
    elif cpu:
        import_skrl(torch_distributed=distributed, jax_distributed=False, cpu=cpu)
    else:  # the same import Isaac Lab's would be (skrl creates the NCCL group), then the W&B fixes
        import skrl  # noqa: F401

        patch_wandb(torch_distributed=distributed)
        if distributed:
            sync_running_scalers()


def _agent_modules(agent: Any) -> list[Any]:
    models = getattr(agent, "models", {}) or {}
    return [models[k] for k in sorted(models) if models[k] is not None]


def short_run_logging(cfg: dict) -> None:
    """Fix 4: ``write_interval: auto`` means every timestep for runs under 100 timesteps."""
    # skrl Agent.init resolves write_interval "auto" to int(timesteps / 100): 0 below 100 timesteps,
    # which turns its TensorBoard writer off entirely.
    experiment = cfg["agent"].setdefault("experiment", {})
    timesteps = int(cfg.get("trainer", {}).get("timesteps", 0))
    if experiment.get("write_interval", "auto") == "auto" and 0 < timesteps < 100:
        experiment["write_interval"] = 1


def observe(runner: Any, cfg: dict, observer: Observer) -> None:
    """Report the runner's first checksum, iterations, saves and end to ``observer``; stop when it asks."""
    agent = runner.agent
    rollouts = int(cfg["agent"]["rollouts"])
    steps = int(runner.trainer.env.num_envs) * rollouts
    observer.synced(_agent_modules(agent))  # skrl's agent broadcast rank 0's parameters when built
    jax = ".jax." in type(agent).__module__
    observer.state(drift.skrl_jax_source(agent) if jax else drift.skrl_torch_source(agent))
    update, run, write = agent.update, runner.run, agent.write_tracking_data
    post, checkpoint = agent.post_interaction, agent.write_checkpoint
    means: list[float] = []
    state = {"stop": False}

    def wrote(*args: Any, **kwargs: Any) -> Any:
        # skrl Agent.write_tracking_data clears the episode statistics it writes: keep their means.
        means.extend(float(v) for v in agent.tracking_data.get("Reward / Total reward (mean)", ()))
        return write(*args, **kwargs)

    def updated(*args: Any, **kwargs: Any) -> Any:
        # skrl Agent.update runs once per rollout (one iteration) on every rank.
        result = update(*args, **kwargs)
        pending = means + [float(v) for v in agent.tracking_data.get("Reward / Total reward (mean)", ())]
        means.clear()
        state["stop"] = observer.iteration(steps, sum(pending) / len(pending) if pending else None)
        return result

    def checkpointed(*, timestep: int, timesteps: int) -> Any:
        # skrl Agent.write_checkpoint names the file agent_<timestep>: timestep // rollouts iterations.
        # It writes in place (torch.save; JAX: open and pickle.dump): atomic and fsynced here.
        with durable_saves(sys.modules[type(agent).write_checkpoint.__module__]):
            result = checkpoint(timestep=timestep, timesteps=timesteps)
        observer.saved(int(timestep) // rollouts)
        return result

    def posted(*, timestep: int, timesteps: int) -> Any:
        # skrl Agent.post_interaction: the update (above), then its own checkpoint and tracking writes
        # for timestep + 1. Asked to stop: save at that timestep unless it just did, then leave.
        result = post(timestep=timestep, timesteps=timesteps)
        if state["stop"]:
            done, interval = int(timestep) + 1, agent.checkpoint_interval
            if isinstance(interval, int) and interval > 0 and done % interval:  # rank 0 writes checkpoints
                agent.write_checkpoint(timestep=done, timesteps=timesteps)
            raise StopTraining
        return result

    def ran(*args: Any, **kwargs: Any) -> Any:
        # skrl Runner.run; Isaac Lab writes the final checkpoint and destroys the group after it.
        try:
            result = run(*args, **kwargs)
        except StopTraining:
            observer.finished()
            # Isaac Lab's train_skrl writes agent_<total timesteps> after run() returns; stopped
            # early that file would claim the whole run. Its KeyboardInterrupt branch skips it.
            raise KeyboardInterrupt from None
        observer.finished()
        return result

    agent.write_tracking_data = wrote
    agent.update = updated
    agent.write_checkpoint = checkpointed
    agent.post_interaction = posted
    runner.run = ran


# --- fix 6: resume ------------------------------------------------------------------------------

#: The agent's per-timestep calls the trainer makes (each takes ``timestep=`` and ``timesteps=``).
_PER_TIMESTEP = ("pre_interaction", "act", "record_transition", "post_interaction")


def checkpoints_at_updates(cfg: dict) -> None:
    """``experiment.checkpoint_interval: auto`` rounded down to whole rollouts (fix 6)."""
    experiment = cfg["agent"].setdefault("experiment", {})
    rollouts = int(cfg["agent"]["rollouts"])
    timesteps = int(cfg.get("trainer", {}).get("timesteps", 0))
    if experiment.get("checkpoint_interval", "auto") == "auto" and timesteps > 0:
        # skrl Agent.init resolves auto to int(timesteps / 10), seldom at an update.
        experiment["checkpoint_interval"] = max(int(timesteps / 10) // rollouts, 1) * rollouts


def continue_timesteps(runner: Any, cfg: dict, on_resumed: Callable[[int, str], None]) -> None:
    """Make a skrl ``Runner`` resumed with ``agent.load`` train on from the checkpoint's timestep."""
    agent, trainer = runner.agent, runner.trainer
    rollouts = int(cfg["agent"]["rollouts"])
    total = int(trainer.cfg.timesteps)
    load, run = agent.load, runner.run
    state = {"start": 0}

    def loaded(path: str) -> Any:
        # skrl Agent.load restores the modules only; the timestep is in skrl's checkpoint name.
        m = resume.ISAAC_CHECKPOINTS["skrl"][1].match(os.path.basename(path))
        if m is None or int(m.group(1)) % rollouts:
            raise UsageError(
                f"--resume {path}: not a skrl checkpoint taken at an update (agent_<T>, T a multiple "
                f"of {rollouts} rollouts); resume from one of those"
            )
        result = load(path)
        state["start"] = int(m.group(1))
        on_resumed(state["start"] // rollouts, path)
        return result

    def ran(*args: Any, **kwargs: Any) -> Any:
        # skrl Runner.run -> Trainer.train: range(cfg.timesteps) from 0; run the rest, counted from start.
        start = state["start"]
        writer = getattr(agent, "writer", None)
        if hasattr(writer, "_event_file_writer"):  # skrl.utils.tensorboard.SummaryWriter (rank 0)
            restart_curve(writer._event_file_writer.add_event, start + 1)
        if start:
            trainer.cfg.timesteps = max(total - start, 0)
            for name in _PER_TIMESTEP:
                setattr(agent, name, _shifted(getattr(agent, name), start, total))
        return run(*args, **kwargs)

    agent.load = loaded
    runner.run = ran


def _shifted(call: Callable[..., Any], start: int, total: int) -> Callable[..., Any]:
    def shifted(*args: Any, timestep: int, timesteps: int, **kwargs: Any) -> Any:
        return call(*args, timestep=timestep + start, timesteps=total, **kwargs)

    return shifted
