"""Every patch mgpu applies to Isaac Lab and the RL libraries it drives, in one module.

Isaac Lab's own per-library training code runs in each rank unchanged
(``isaaclab_rl.entrypoints.dispatch.run_train_cli``). Two kinds of narrow patches are applied
around it, each naming the upstream function it replaces or wraps and why. They are checked
against the Isaac Lab release they were written for (:data:`SUPPORTED`): any other version is
refused up front with one line naming the supported range (:func:`check_version`), never a
traceback from a patched private function.

**CPU ranks (gloo).** Isaac Lab and the libraries assume one GPU per rank. On CPU ranks the
worker joins a gloo process group itself *before* Isaac Lab runs, then:

1. ``isaaclab_rl.entrypoints.common.validate_distributed_device`` raises "Distributed training is
   not supported when using CPU device"; each ``train_<lib>`` backend imported it by name, so the
   name in that backend module is replaced by a check that lets CPU ranks through.
2. ``isaaclab.app.sim_launcher._resolve_distributed_device`` picks ``cuda:LOCAL_RANK`` and calls
   ``set_cuda_device`` ("Found no NVIDIA driver"); on CPU ranks it sets ``cpu`` instead.
3. rsl-rl ``OnPolicyRunner._configure_multi_gpu`` insists on ``cuda:LOCAL_RANK`` and calls
   ``init_process_group("nccl")`` and ``torch.cuda.set_device``; on CPU ranks it records the same
   rank fields and uses the group the worker already joined.
4. skrl (torch) calls ``init_process_group("nccl")`` and ``torch.cuda.set_device`` when
   ``import skrl`` runs with ``WORLD_SIZE > 1``: skrl is imported through
   :func:`isaaclab_mgpu.rank.patches.skrl.import_skrl` first, which makes that call a no-op.
5. rl-games ``A2CBase.__init__`` (``rl_games/common/a2c_common.py``) calls
   ``init_process_group("nccl")`` and stores ``cuda:LOCAL_RANK`` as its device, and ``train`` calls
   ``torch.cuda.set_device``: on CPU ranks that module sees a ``torch.distributed`` whose
   ``init_process_group`` uses the worker's group and a ``torch`` whose ``cuda.set_device`` does
   nothing, and the agent config keeps its CPU device; the rest of the multi-GPU set-up (ranks,
   rank-0-only writer, statistics and learning-rate schedule, gradient all-reduce) is rl-games' own.
   (A task with a central value network would need ``central_value.py`` treated alike; the
   cartpole tasks have none.)

6. skrl ``Agent.init`` resolves ``experiment.write_interval: auto`` to ``int(timesteps / 100)``,
   which is 0 for runs under 100 timesteps and silently turns TensorBoard off; for such runs
   "auto" becomes 1 (every timestep). Applies on every device.

skrl JAX ranks keep the fixes of :mod:`isaaclab_mgpu.rank.patches.skrl` (``multihost_utils``
import, cached ``pmap``).

**Observation (every device).** mgpu's bookkeeping (:class:`isaaclab_mgpu.rank.isaac.Bookkeeper`)
is told where the run folder is and when each iteration ends, without changing what trains:

- ``dump_train_configs`` (imported by name into each ``train_<lib>``) is wrapped to learn the
  rank's folder: Isaac Lab calls it with ``rank_dir`` right after naming the run folder.
- rsl-rl: ``create_rsl_rl_runner`` (in ``train_rsl_rl``) is wrapped; on the runner it returns,
  ``alg.broadcast_parameters`` (first checksum), ``logger.log`` (end of an iteration; mean reward
  from the logger's own ``rewbuffer``) and ``learn`` (last checksum, before Isaac Lab destroys the
  process group) are wrapped.
- skrl: the runner class from ``import_skrl_runner`` (in ``train_skrl``) is wrapped: the agent
  has broadcast its parameters when the runner exists (first checksum); ``agent.update`` ends an
  iteration (mean of the agent's "Total reward (mean)" statistics since the last update, kept
  from ``write_tracking_data``, which clears them); ``run`` ends training.
- rl-games: ``train_epoch`` of the continuous and discrete bases ends an iteration (mean of
  ``game_rewards``) and takes the first checksum on its first call, after ``train`` broadcast rank
  0's parameters; their ``train`` methods end training.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from isaaclab_mgpu.contract.errors import UsageError

#: Isaac Lab releases these patches were written against (``>=`` lower, ``<`` upper).
SUPPORTED = ("3.0", "3.1")
SUPPORTED_TEXT = f"isaaclab>={SUPPORTED[0]},<{SUPPORTED[1]}"


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def version_supported(version: str) -> bool:
    """True when ``version`` lies in :data:`SUPPORTED`."""
    low, high = (_release(v) for v in SUPPORTED)
    return low <= _release(version) < high


def installed_version() -> str | None:
    """The installed isaaclab distribution's version, or None."""
    from importlib import metadata  # 20 ms: only when an Isaac Lab task is named, not at every launch

    try:
        return metadata.version("isaaclab")
    except metadata.PackageNotFoundError:
        return None


def check_version(version: str | None = None) -> str:
    """Return the Isaac Lab version; raise a one-line UsageError outside :data:`SUPPORTED`."""
    version = installed_version() if version is None else version
    if version is None:
        raise UsageError(
            "Isaac Lab is not installed; install it with `uv pip install -e '.[isaaclab]'` on Python 3.12"
        )
    if not version_supported(version):
        raise UsageError(
            f"Isaac Lab {version} is not supported by this mgpu; it drives {SUPPORTED_TEXT} "
            f"(install one with `uv pip install '{SUPPORTED_TEXT}'`)"
        )
    return version


class Observer:
    """What the observation patches report to (implemented by the rank's Bookkeeper)."""

    def run_folder(self, rank_dir: str) -> None:
        """Isaac Lab named this rank's folder."""

    def synced(self, modules: list[Any]) -> None:
        """Parameters were broadcast from rank 0; ``modules`` hold them."""

    def iteration(self, steps: int, reward: float | None) -> None:
        """One iteration ended: this rank's env steps in it and its mean episode reward."""

    def finished(self) -> None:
        """Training returned normally (the process group still exists)."""


@contextlib.contextmanager
def _replaced(target: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, saved)


def _backend(library: str) -> Any:
    import importlib

    return importlib.import_module(f"isaaclab_rl.entrypoints.backends.train_{library}")


@contextlib.contextmanager
def patched(library: str, framework: str, *, cpu: bool, observer: Observer) -> Iterator[None]:
    """Apply this rank's patches for the duration of Isaac Lab's training call."""
    with contextlib.ExitStack() as stack:
        if library == "skrl":
            _import_skrl(framework, cpu=cpu, distributed=int(os.environ.get("WORLD_SIZE", "1")) > 1)
        backend = _backend(library)
        stack.enter_context(_replaced(backend, "dump_train_configs", _observe_folder(backend, observer)))
        if cpu:
            stack.enter_context(_replaced(backend, "validate_distributed_device", _cpu_device_ok))
            stack.enter_context(_cpu_sim_device())
        if library == "rsl_rl":
            stack.enter_context(_rsl_rl(backend, cpu=cpu, observer=observer))
        elif library == "skrl":
            stack.enter_context(_skrl(backend, observer=observer))
        elif library == "rl_games":
            stack.enter_context(_rl_games(cpu=cpu, observer=observer))
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

    with _replaced(sim_launcher, "_resolve_distributed_device", resolve_cpu):
        yield


def _import_skrl(framework: str, *, cpu: bool, distributed: bool) -> None:
    # Patch 4 (CPU ranks) and, for JAX, the torch-style WORLD_SIZE mgpu's JAX launcher sets hidden
    # from skrl's torch side. GPU torch ranks import skrl as Isaac Lab does: skrl creates the NCCL group.
    from isaaclab_mgpu.rank.patches.skrl import import_skrl, patch_skrl_jax

    jax = framework == "jax"
    if jax:
        jax_distributed = int(os.environ.get("JAX_WORLD_SIZE", "1")) > 1
        import_skrl(torch_distributed=False, jax_distributed=jax_distributed, cpu=cpu)
        patch_skrl_jax()
    elif cpu:
        import_skrl(torch_distributed=distributed, jax_distributed=False, cpu=cpu)


# --- rsl-rl ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _rsl_rl(backend: Any, *, cpu: bool, observer: Observer) -> Iterator[None]:
    from rsl_rl.runners import OnPolicyRunner

    original_create = backend.create_rsl_rl_runner

    def create_rsl_rl_runner(env: Any, agent_cfg: Any, log_dir: str | None = None) -> Any:
        # isaaclab_rl.rsl_rl.create_rsl_rl_runner, then mgpu's observation hooks on the runner.
        runner = original_create(env, agent_cfg, log_dir=log_dir)
        _observe_rsl_rl(runner, observer)
        return runner

    with contextlib.ExitStack() as stack:
        stack.enter_context(_replaced(backend, "create_rsl_rl_runner", create_rsl_rl_runner))
        if cpu:
            stack.enter_context(_replaced(OnPolicyRunner, "_configure_multi_gpu", _rsl_rl_gloo))
        yield


def _rsl_rl_gloo(self: Any) -> None:
    # rsl_rl OnPolicyRunner._configure_multi_gpu requires cuda:LOCAL_RANK and creates an NCCL group
    # (patch 3); same fields, the worker's gloo group.
    import torch.distributed as dist

    from isaaclab_mgpu.rank.backends.rsl_rl import set_rank_fields

    world = int(os.getenv("WORLD_SIZE", "1"))
    set_rank_fields(self, world, int(os.getenv("RANK", "0")), int(os.getenv("LOCAL_RANK", "0")))
    if self.is_distributed and not dist.is_initialized():
        raise RuntimeError("mgpu's CPU rank has no gloo process group before rsl-rl starts")


def _torch_modules(obj: Any) -> list[Any]:
    import torch

    found = [v for _, v in sorted(vars(obj).items()) if isinstance(v, torch.nn.Module)]
    return found


def _observe_rsl_rl(runner: Any, observer: Observer) -> None:
    alg, logger = runner.alg, runner.logger
    steps = int(runner.env.num_envs) * int(runner.cfg["num_steps_per_env"])
    learn, log = runner.learn, logger.log
    broadcast = getattr(alg, "broadcast_parameters", None)
    state = {"synced": False}

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

    def logged(*args: Any, **kwargs: Any) -> Any:
        # rsl_rl Logger.log runs once per iteration on every rank.
        sync()  # single rank: nothing was broadcast
        result = log(*args, **kwargs)
        buffer = getattr(logger, "rewbuffer", None)
        observer.iteration(steps, sum(buffer) / len(buffer) if buffer else None)
        return result

    def learned(*args: Any, **kwargs: Any) -> Any:
        # rsl_rl OnPolicyRunner.learn; Isaac Lab destroys the process group right after it returns.
        result = learn(*args, **kwargs)
        sync()
        observer.finished()
        return result

    logger.log = logged
    runner.learn = learned


# --- skrl --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _skrl(backend: Any, *, observer: Observer) -> Iterator[None]:
    original = backend.import_skrl_runner

    def import_skrl_runner(ml_framework: str) -> Any:
        # isaaclab_rl.skrl.import_skrl_runner; the class it returns is observed once built.
        runner_cls = original(ml_framework)

        def build(env: Any, cfg: dict) -> Any:
            _skrl_short_run_logging(cfg)
            runner = runner_cls(env, cfg)
            _observe_skrl(runner, cfg, observer)
            return runner

        return build

    with _replaced(backend, "import_skrl_runner", import_skrl_runner):
        yield


def _skrl_modules(agent: Any) -> list[Any]:
    models = getattr(agent, "models", {}) or {}
    return [models[k] for k in sorted(models) if models[k] is not None]


def _skrl_short_run_logging(cfg: dict) -> None:
    # skrl Agent.init resolves write_interval "auto" to int(timesteps / 100): 0 below 100 timesteps,
    # which turns its TensorBoard writer off entirely (patch 6); "auto" then means every timestep.
    experiment = cfg["agent"].setdefault("experiment", {})
    timesteps = int(cfg.get("trainer", {}).get("timesteps", 0))
    if experiment.get("write_interval", "auto") == "auto" and 0 < timesteps < 100:
        experiment["write_interval"] = 1


def _observe_skrl(runner: Any, cfg: dict, observer: Observer) -> None:
    agent = runner.agent
    rollouts = int(cfg["agent"]["rollouts"])
    env = runner.trainer.env
    steps = int(env.num_envs) * rollouts
    observer.synced(_skrl_modules(agent))  # skrl's agent broadcast rank 0's parameters when built
    update, run, write = agent.update, runner.run, agent.write_tracking_data
    means: list[float] = []

    def wrote(*args: Any, **kwargs: Any) -> Any:
        # skrl Agent.write_tracking_data clears the episode statistics it writes: keep their means.
        means.extend(float(v) for v in agent.tracking_data.get("Reward / Total reward (mean)", ()))
        return write(*args, **kwargs)

    def updated(*args: Any, **kwargs: Any) -> Any:
        # skrl Agent.update runs once per rollout (one iteration) on every rank.
        result = update(*args, **kwargs)
        pending = means + [float(v) for v in agent.tracking_data.get("Reward / Total reward (mean)", ())]
        means.clear()
        observer.iteration(steps, sum(pending) / len(pending) if pending else None)
        return result

    def ran(*args: Any, **kwargs: Any) -> Any:
        # skrl Runner.run; Isaac Lab writes the final checkpoint and destroys the group after it.
        result = run(*args, **kwargs)
        observer.finished()
        return result

    agent.write_tracking_data = wrote
    agent.update = updated
    runner.run = ran


# --- rl-games ----------------------------------------------------------------------------------


class _CpuTorch:
    """``torch`` as rl_games.common.a2c_common sees it on CPU ranks: ``cuda.set_device`` does nothing."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self.cuda = _CpuCuda(torch.cuda)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


class _CpuCuda:
    def __init__(self, cuda: Any) -> None:
        self._cuda = cuda

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cuda, name)

    def set_device(self, device: Any) -> None:
        # A2CBase.train / train_epoch pin cuda:LOCAL_RANK; a CPU rank has no CUDA device (patch 5).
        return None


class _KeepCpuDevice(dict):
    """rl-games' agent config on a CPU rank: ``A2CBase.__init__`` cannot switch it to CUDA (patch 5)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "device" and str(value).startswith("cuda"):
            return
        super().__setitem__(key, value)


class _JoinedGroup:
    """``torch.distributed`` as rl_games.common.a2c_common sees it on CPU ranks (patch 5)."""

    def __init__(self, dist: Any) -> None:
        self._dist = dist

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dist, name)

    def init_process_group(self, *args: Any, **kwargs: Any) -> None:
        # A2CBase.__init__ calls init_process_group("nccl"); the worker's gloo group already exists.
        if not self._dist.is_initialized():
            raise RuntimeError("mgpu's CPU rank has no gloo process group before rl-games starts")


@contextlib.contextmanager
def _rl_games(*, cpu: bool, observer: Observer) -> Iterator[None]:
    from rl_games.common import a2c_common

    base = a2c_common.A2CBase
    original_init = base.__init__

    def init_on_cpu(self: Any, base_name: str, params: dict) -> None:
        # A2CBase.__init__ with multi_gpu stores cuda:LOCAL_RANK as the device (patch 5); everything
        # else it does per rank (rank-0-only writer and stats, lr schedule) stays upstream's.
        if params["config"].get("multi_gpu", False):
            params["config"] = _KeepCpuDevice(params["config"])
        original_init(self, base_name, params)

    state = {"synced": False}

    def wrap_epoch(original: Callable[..., Any]) -> Callable[..., Any]:
        def train_epoch(self: Any) -> Any:
            # {Continuous,Discrete}A2CBase.train_epoch is one iteration; its first call comes after
            # train() broadcast rank 0's parameters.
            if not state["synced"]:
                state["synced"] = True
                observer.synced(_rl_games_modules(self))
            result = original(self)
            mean = self.game_rewards.get_mean() if self.game_rewards.current_size > 0 else None
            reward = float(mean.reshape(-1)[0]) if mean is not None else None
            observer.iteration(int(self.batch_size_envs), reward)
            return result

        return train_epoch

    def wrap_train(original: Callable[..., Any]) -> Callable[..., Any]:
        def train(self: Any) -> Any:
            # {Continuous,Discrete}A2CBase.train return after max_epochs; Isaac Lab then destroys the
            # process group.
            result = original(self)
            observer.finished()
            return result

        return train

    with contextlib.ExitStack() as stack:
        for cls in (a2c_common.ContinuousA2CBase, a2c_common.DiscreteA2CBase):
            stack.enter_context(_replaced(cls, "train_epoch", wrap_epoch(cls.train_epoch)))
            stack.enter_context(_replaced(cls, "train", wrap_train(cls.train)))
        if cpu:
            stack.enter_context(_replaced(base, "__init__", init_on_cpu))
            stack.enter_context(_replaced(a2c_common, "torch", _CpuTorch(sys.modules["torch"])))
            stack.enter_context(_replaced(a2c_common, "dist", _JoinedGroup(a2c_common.dist)))
        yield


def _rl_games_modules(agent: Any) -> list[Any]:
    modules = [agent.model]
    central = getattr(agent, "central_value_net", None)
    if getattr(agent, "has_central_value", False) and central is not None:
        modules.append(central)
    return modules
