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
3. the libraries' own multi-GPU set-up: :func:`.rsl_rl.gloo_ranks`, :func:`.skrl.import_skrl`,
   :func:`.rl_games.patched`.

**Observation (every device).** mgpu's bookkeeping (:class:`isaaclab_mgpu.rank.isaac.Bookkeeper`,
an :class:`~.base.Observer`) learns the rank's folder from ``dump_train_configs`` (imported by name
into each ``train_<lib>``; Isaac Lab calls it with ``rank_dir`` right after naming the run folder),
and gets the runner that ``create_rsl_rl_runner`` (``train_rsl_rl``) or the runner class from
``import_skrl_runner`` (``train_skrl``) builds, for :func:`.rsl_rl.observe` and :func:`.skrl.observe`;
rl-games is observed through its agent classes (:mod:`.rl_games`). How each library saves and stops
on mgpu's checkpoint request, and goes on counting on a resume (:func:`.rsl_rl.continue_counter`,
:func:`.skrl.continue_timesteps`; rl-games needs no patch), is in its module. rl-games' TensorBoard
file gets no restart marker: it logs on three step axes (frames, epochs, seconds) in one file.

**W&B (rsl_rl, every device).** ``isaaclab_rl.utils.wandb.announce_new_run`` (imported by name
into ``train_rsl_rl`` and called on every rank with ``--logger wandb``) draws the run id with
``wandb.util.generate_id``, which wandb 0.31 no longer has: every rank fails with
``AttributeError`` before training. The name in that backend module is wrapped to set
``WANDB_RUN_ID`` first (W&B's own form) where it is not set yet; rsl-rl's ``WandbLogWriter`` on
rank 0 opens the W&B run under that id.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from isaaclab_mgpu.rank.patches import rl_games, rsl_rl, skrl
from isaaclab_mgpu.rank.patches.base import Observer, replaced
from isaaclab_mgpu.rank.worker import wandb_run

__all__ = ["Observer", "patched"]


@contextlib.contextmanager
def patched(library: str, framework: str, *, cpu: bool, observer: Observer) -> Iterator[None]:
    """Apply this rank's patches for the duration of Isaac Lab's training call."""
    with contextlib.ExitStack() as stack:
        if library == "skrl":
            skrl.import_for_isaaclab(
                framework, cpu=cpu, distributed=int(os.environ.get("WORLD_SIZE", "1")) > 1
            )
        backend = importlib.import_module(f"isaaclab_rl.entrypoints.backends.train_{library}")
        stack.enter_context(replaced(backend, "dump_train_configs", _observe_folder(backend, observer)))
        if cpu:
            stack.enter_context(replaced(backend, "validate_distributed_device", _cpu_device_ok))
            stack.enter_context(_cpu_sim_device())
        if library == "rsl_rl":
            _rsl_rl(stack, backend, cpu=cpu, observer=observer)
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


def _cpu_sim_device() -> contextlib.AbstractContextManager[None]:
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

    return replaced(sim_launcher, "_resolve_distributed_device", resolve_cpu)


# --- the RL libraries' runners, as Isaac Lab's backends build them ----------------------------


def _rsl_rl(stack: contextlib.ExitStack, backend: Any, *, cpu: bool, observer: Observer) -> None:
    original_create = backend.create_rsl_rl_runner

    def create_rsl_rl_runner(env: Any, agent_cfg: Any, log_dir: str | None = None) -> Any:
        # isaaclab_rl.rsl_rl.create_rsl_rl_runner, then mgpu's resume and observation hooks on the runner.
        runner = original_create(env, agent_cfg, log_dir=log_dir)
        rsl_rl.continue_counter(runner, observer.resumed)  # first: the observation wraps what it made
        rsl_rl.observe(runner, observer)
        return runner

    stack.enter_context(replaced(backend, "create_rsl_rl_runner", create_rsl_rl_runner))
    if hasattr(backend, "announce_new_run"):
        stack.enter_context(replaced(backend, "announce_new_run", _with_run_id(backend.announce_new_run)))
    if cpu:
        stack.enter_context(rsl_rl.gloo_ranks())


def _with_run_id(original: Callable[..., None]) -> Callable[..., None]:
    def announce_new_run(*args: Any, **kwargs: Any) -> None:
        # isaaclab_rl.utils.wandb.announce_new_run calls wandb.util.generate_id (gone in wandb 0.31)
        # unless WANDB_RUN_ID is set: set it first, as that function would, in W&B's own id form.
        os.environ.setdefault(wandb_run.RUN_ID, wandb_run.new_id())
        original(*args, **kwargs)

    return announce_new_run


def _skrl(backend: Any, *, observer: Observer) -> contextlib.AbstractContextManager[None]:
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

    return replaced(backend, "import_skrl_runner", import_skrl_runner)
