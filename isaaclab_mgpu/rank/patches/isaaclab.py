"""Patches of Isaac Lab, and the order in which a rank applies every patch around Isaac Lab's training.

Isaac Lab's own per-library training code runs in each rank unchanged
(``isaaclab_rl.entrypoints.dispatch.run_train_cli``). :func:`patched` applies the narrow patches
around it, each naming the upstream function it replaces or wraps and why: Isaac Lab's here, the
RL libraries' in their own modules (:mod:`.rsl_rl`, :mod:`.skrl`, :mod:`.rl_games`). They are
written for the Isaac Lab release line :data:`isaaclab_mgpu.contract.isaaclab_version.SUPPORTED`;
any other version is refused up front, before a rank starts and again in the rank.

**CPU ranks (gloo).** Isaac Lab and the libraries assume one GPU per rank. On CPU ranks the
worker joins a gloo process group itself *before* Isaac Lab runs, then:

1. ``isaaclab_rl.entrypoints.common.validate_distributed_device`` raises "Distributed training is
   not supported when using CPU device"; each ``train_<lib>`` backend imported it by name, so the
   name in that backend module is replaced by a check that lets CPU ranks through.
2. ``isaaclab.app.sim_launcher._resolve_distributed_device`` picks ``cuda:LOCAL_RANK`` and calls
   ``set_cuda_device`` ("Found no NVIDIA driver"); on CPU ranks it sets ``cpu`` instead.
3. the libraries' own multi-GPU set-up: rsl-rl's ``_configure_multi_gpu``
   (:func:`.rsl_rl.gloo_ranks`), skrl's import-time process group (:func:`.skrl.import_skrl`),
   rl-games' ``A2CBase`` (:func:`.rl_games.patched`).

skrl JAX ranks keep the fixes of :mod:`.skrl` (``multihost_utils`` import, cached ``pmap``), and
skrl's short-run TensorBoard fix applies on every device.

**Observation (every device).** mgpu's bookkeeping (:class:`isaaclab_mgpu.rank.isaac.Bookkeeper`,
an :class:`~.base.Observer`) is told where the run folder is and when each iteration ends, without
changing what trains:

- ``dump_train_configs`` (imported by name into each ``train_<lib>``) is wrapped to learn the
  rank's folder: Isaac Lab calls it with ``rank_dir`` right after naming the run folder.
- ``create_rsl_rl_runner`` (in ``train_rsl_rl``) and the runner class from ``import_skrl_runner``
  (in ``train_skrl``) are wrapped to hand the runner they build to :func:`.rsl_rl.observe` and
  :func:`.skrl.observe`; rl-games is observed through its agent classes (:mod:`.rl_games`).
  Each library's save is observed too (the checkpoint's iteration goes into ``summary.json``).

**Checkpoint request (every device).** When the observer's iteration hook answers that every rank
agreed to stop (mgpu's requeue signal), each library saves through its own code and ends its
loop there: rsl-rl ``OnPolicyRunner.save`` then out of ``learn``; skrl ``write_checkpoint`` then
out of the trainer (Isaac Lab's final ``agent_<total>`` save skipped, as after Ctrl-C); rl-games
by ending at this epoch (``max_epochs``), so its own last-epoch branch saves and stops every rank.

**W&B (rsl_rl, every device).** ``isaaclab_rl.utils.wandb.announce_new_run`` (imported by name
into ``train_rsl_rl`` and called on every rank with ``--logger wandb``) draws the run id with
``wandb.util.generate_id``, which wandb 0.31 no longer has: every rank fails with
``AttributeError`` before training. The name in that backend module is wrapped to draw the id
itself (W&B's own form) where ``WANDB_RUN_ID`` is not set yet; Isaac Lab's announcement runs
unchanged, and rsl-rl's ``WandbLogWriter`` on rank 0 opens the W&B run under that id.

**Resume (every device).** Isaac Lab's own resume code runs (``--checkpoint``, the library's load on
every rank); where the library loses the iteration counter it is patched in that library's module,
on the runner Isaac Lab built: :func:`.rsl_rl.continue_counter`, :func:`.skrl.continue_timesteps`
(both report the iteration they resume at to the observer). rl-games needs no patch
(``A2CBase.restore`` brings back ``epoch_num`` and ``frame``, and ``max_epochs`` is a total); its
first observed epoch reports where it resumed. Its TensorBoard file gets no restart marker:
rl-games logs on three step axes (frames, epochs, seconds) in one file, and one marker step cannot
stand for all three.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from isaaclab_mgpu.rank.patches import rl_games, rsl_rl, skrl
from isaaclab_mgpu.rank.patches.base import Observer, replaced
from isaaclab_mgpu.rank.worker import wandb_run

__all__ = ["Observer", "patched"]


def _backend(library: str) -> Any:
    import importlib

    return importlib.import_module(f"isaaclab_rl.entrypoints.backends.train_{library}")


@contextlib.contextmanager
def patched(library: str, framework: str, *, cpu: bool, observer: Observer) -> Iterator[None]:
    """Apply this rank's patches for the duration of Isaac Lab's training call."""
    with contextlib.ExitStack() as stack:
        if library == "skrl":
            skrl.import_for_isaaclab(
                framework, cpu=cpu, distributed=int(os.environ.get("WORLD_SIZE", "1")) > 1
            )
        backend = _backend(library)
        stack.enter_context(replaced(backend, "dump_train_configs", _observe_folder(backend, observer)))
        if cpu:
            stack.enter_context(replaced(backend, "validate_distributed_device", _cpu_device_ok))
            stack.enter_context(_cpu_sim_device())
        if library == "rsl_rl":
            stack.enter_context(_rsl_rl(backend, cpu=cpu, observer=observer))
        elif library == "skrl":
            stack.enter_context(_skrl(backend, observer=observer))
        elif library == "rl_games":
            stack.enter_context(rl_games.patched(cpu=cpu, observer=observer))
        yield


def _observe_folder(backend: Any, observer: Observer) -> Callable[..., None]:
    original = backend.dump_train_configs

    def dump_train_configs(log_dir: str, env_cfg: Any, agent_cfg: Any) -> None:
        # isaaclab_rl.entrypoints.common.dump_train_configs, called with this rank's folder.
        observer.run_folder(log_dir)
        original(log_dir, env_cfg, agent_cfg)

    return dump_train_configs


def _cpu_device_ok(args_cli: Any) -> None:
    # common.validate_distributed_device refuses CPU outright; mgpu runs CPU ranks over gloo (patch 1).
    return None


@contextlib.contextmanager
def _cpu_sim_device() -> Iterator[None]:
    from isaaclab.app import sim_launcher

    original = sim_launcher._resolve_distributed_device

    def resolve_cpu(cfg: Any, args: dict) -> None:
        # sim_launcher._resolve_distributed_device picks cuda:LOCAL_RANK (patch 2).
        if not args.get("distributed", False):
            return original(cfg, args)
        if getattr(cfg, "sim", None) is not None:
            cfg.sim.device = "cpu"
        args["device"] = "cpu"
        return None

    with replaced(sim_launcher, "_resolve_distributed_device", resolve_cpu):
        yield


# --- the RL libraries' runners, as Isaac Lab's backends build them ----------------------------


@contextlib.contextmanager
def _rsl_rl(backend: Any, *, cpu: bool, observer: Observer) -> Iterator[None]:
    original_create = backend.create_rsl_rl_runner

    def create_rsl_rl_runner(env: Any, agent_cfg: Any, log_dir: str | None = None) -> Any:
        # isaaclab_rl.rsl_rl.create_rsl_rl_runner, then mgpu's resume and observation hooks on the runner.
        runner = original_create(env, agent_cfg, log_dir=log_dir)
        rsl_rl.continue_counter(runner, observer.resumed)  # first: the observation wraps what it made
        rsl_rl.observe(runner, observer)
        return runner

    with contextlib.ExitStack() as stack:
        stack.enter_context(replaced(backend, "create_rsl_rl_runner", create_rsl_rl_runner))
        if hasattr(backend, "announce_new_run"):
            stack.enter_context(replaced(backend, "announce_new_run", _with_run_id(backend.announce_new_run)))
        if cpu:
            stack.enter_context(rsl_rl.gloo_ranks())
        yield


def _with_run_id(original: Callable[..., None]) -> Callable[..., None]:
    def announce_new_run(*args: Any, **kwargs: Any) -> None:
        # isaaclab_rl.utils.wandb.announce_new_run calls wandb.util.generate_id (gone in wandb 0.31)
        # unless WANDB_RUN_ID is set: set it first, as that function would, in W&B's own id form.
        os.environ.setdefault(wandb_run.RUN_ID, wandb_run.new_id())
        original(*args, **kwargs)

    return announce_new_run


@contextlib.contextmanager
def _skrl(backend: Any, *, observer: Observer) -> Iterator[None]:
    original = backend.import_skrl_runner

    def import_skrl_runner(ml_framework: str) -> Any:
        # isaaclab_rl.skrl.import_skrl_runner; the class it returns is observed once built.
        runner_cls = original(ml_framework)

        def build(env: Any, cfg: dict) -> Any:
            skrl.short_run_logging(cfg)
            skrl.checkpoints_at_updates(cfg)
            runner = runner_cls(env, cfg)
            # first: the observation wraps what it made
            skrl.continue_timesteps(runner, cfg, observer.resumed)
            skrl.observe(runner, cfg, observer)
            return runner

        return build

    with replaced(backend, "import_skrl_runner", import_skrl_runner):
        yield
