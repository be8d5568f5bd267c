"""Isaac Lab tasks (``--task Isaac-...``) in each rank, when Isaac Lab 3 is installed.

Isaac Lab 3 (Python 3.12, ``pip install isaaclab``; it downloads robot and scene assets at run
time) registers its tasks with Gymnasium when ``isaaclab_tasks`` is imported; that import and the
configuration step below are safe before any simulator starts. Each rank follows the steps of
Isaac Lab's own rsl-rl training back-end (``isaaclab_rl/entrypoints/backends/train_rsl_rl.py``):

1. **Configuration.** ``isaaclab_tasks.utils.hydra.resolve_task_config(task, "rsl_rl_cfg_entry_point")``
   loads the task's environment config and its own rsl-rl runner config and applies every
   ``key=value`` item through Isaac Lab's Hydra layer. That layer reads the items from
   ``sys.argv`` (``presets=a,b``, ``physics=NAME``, ``renderer=NAME``, ``env.<path>=v``,
   ``agent.<path>=v``, Hydra's own ``hydra.*``), so the worker sets ``sys.argv`` for the call and
   restores it afterwards. Hydra's output folder goes to the rank's run folder, so ranks never
   write into one shared ``outputs/`` folder at the same time.
2. **Runtime.** ``launch_simulation(env_cfg, launcher_args)`` (``isaaclab.app``; older Isaac Lab 3
   releases: ``isaaclab_tasks.utils.sim_launcher``) starts Isaac Sim only when the config needs it
   (PhysX, Kit cameras or the Kit viewer) and is a no-op for kitless Newton physics, e.g.
   ``presets=newton_mjwarp``, which runs on CPU. The launcher arguments say ``--device <this
   rank's device>`` and ``distributed=False``: with ``distributed`` set, Isaac Lab itself would pick
   ``cuda:{LOCAL_RANK}`` and call ``torch.cuda.set_device``, which fails on CPU ranks. The worker
   already owns the rank's device and process group.
3. **Environment.** ``gym.make(task, cfg=env_cfg)`` with ``scene.num_envs``, ``sim.device`` and the
   rank's seed set, wrapped by ``isaaclab_rl.rsl_rl.RslRlVecEnvWrapper(env, clip_actions=...)``.

The task's own runner config (network sizes, PPO settings, ``num_steps_per_env``,
``max_iterations``) drives rsl-rl, with ``device`` and ``seed`` set for the rank; change it with
``agent.<path>=value`` (Isaac Lab's Hydra syntax, e.g. ``agent.algorithm.learning_rate=5e-4``).

Not exercised in this repository's CI (Isaac Lab needs Python 3.12 and downloads); its end-to-end
test runs only where Isaac Lab is importable. The pure helpers here are tested everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

#: The registry key under which Isaac Lab tasks name their rsl-rl runner config.
AGENT_ENTRY_POINT = "rsl_rl_cfg_entry_point"

#: First components of the ``key=value`` items Isaac Lab's Hydra layer accepts.
HYDRA_ROOTS = ("env", "agent", "presets", "physics", "renderer", "hydra")


@dataclass(frozen=True)
class IsaacTask:
    """An Isaac Lab environment ready for rsl-rl, with the task's own runner config."""

    env: Any
    """The environment wrapped by ``RslRlVecEnvWrapper`` (an rsl-rl ``VecEnv``)."""

    agent_cfg: dict[str, Any] | None
    """The task's rsl-rl runner config as a dict (device and seed set), or None if it has none."""

    max_iterations: int | None
    """The task's default iteration count, from its runner config."""


def available() -> bool:
    """True when Isaac Lab and its task registry are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("isaaclab", "isaaclab_tasks"))


def hydra_overrides(overrides: Iterable[tuple[str, str]]) -> list[str]:
    """The ``key=value`` items as Isaac Lab's Hydra layer takes them, in order; reject foreign keys."""
    tokens = []
    for key, value in overrides:
        root = key.lstrip("+~").split(".", 1)[0]
        if root not in HYDRA_ROOTS:
            raise UsageError(
                f"{key}={value}: Isaac Lab tasks take env.<path>=v, agent.<path>=v, presets=a,b, "
                "physics=NAME, renderer=NAME or hydra.<option>=v"
            )
        tokens.append(f"{key}={value}")
    return tokens


def hydra_argv(prog: str, overrides: Iterable[tuple[str, str]], output_dir: str) -> list[str]:
    """The ``sys.argv`` Isaac Lab's Hydra layer reads: the items, then Hydra's output folder."""
    # Hydra's defaults put every rank into one outputs/<date>/<time> folder at the same moment.
    return [prog, *hydra_overrides(overrides), f"hydra.run.dir={output_dir}", "hydra.output_subdir=null"]


def launcher_argv(device: str) -> list[str]:
    """Isaac Lab launcher flags for one rank: headless, on the rank's own device."""
    return ["--headless", "--device", device]


def runner_cfg(agent: Mapping[str, Any], device: str, seed: int) -> dict[str, Any]:
    """The task's rsl-rl runner config for this rank (a copy, ``device`` and ``seed`` set)."""
    class_name = agent.get("class_name", "OnPolicyRunner")
    if class_name != "OnPolicyRunner":
        raise UsageError(
            f"this task's rsl-rl runner is {class_name}; mgpu trains OnPolicyRunner (PPO) tasks only"
        )
    return {**agent, "device": device, "seed": seed}


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def _resolve_configs(task: str, argv: list[str]) -> tuple[Any, Any]:
    from isaaclab_tasks.utils import hydra

    with _argv(argv):
        try:
            if hasattr(hydra, "resolve_task_config"):
                return hydra.resolve_task_config(task, AGENT_ENTRY_POINT)
            found: dict[str, Any] = {}  # early Isaac Lab 3: only the decorator form exists

            @hydra.hydra_task_config(task, AGENT_ENTRY_POINT)
            def capture(env_cfg: Any, agent_cfg: Any) -> None:
                found.update(env=env_cfg, agent=agent_cfg)

            capture()
            return found["env"], found["agent"]
        except SystemExit:  # Hydra reports a bad override itself, then exits
            raise UsageError(
                f"--task {task}: Isaac Lab's Hydra configuration rejected {' '.join(argv[1:-2]) or 'it'} "
                "(its message is above)"
            ) from None
        except Exception as exc:  # unknown task id, unknown preset, bad value: all named by Isaac Lab
            raise UsageError(f"--task {task}: {exc}") from None


def _launch_simulation() -> tuple[Any, Any]:
    try:
        from isaaclab.app import add_launcher_args, launch_simulation
    except ImportError:
        try:
            from isaaclab_tasks.utils.sim_launcher import add_launcher_args, launch_simulation
        except ImportError:
            raise UsageError(
                "this Isaac Lab has no launch_simulation (isaaclab.app); mgpu needs Isaac Lab 3"
            ) from None
    return add_launcher_args, launch_simulation


def open_task(
    args: Any, num_envs: int | None, ctx: Any, output_dir: str, stack: contextlib.ExitStack
) -> IsaacTask:
    """Create ``args.task`` on ``ctx.device``; ``stack`` closes the environment and the simulator."""
    overrides = list(args.overrides)
    hydra_overrides(overrides)  # bad keys fail before the heavy imports
    if not available():
        raise UsageError(
            f"--task {args.task}: not an embedded task (cartpole, pendulum) and Isaac Lab is not "
            "installed; install it with `uv sync --extra isaaclab` (Python 3.12)"
        )
    if args.rl_library != "rsl_rl":
        raise UsageError(
            f"--task {args.task}: Isaac Lab tasks are wired for --rl_library rsl_rl in this version"
        )
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  registers the Isaac-* environments
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

    with contextlib.suppress(ImportError):
        import isaaclab_tasks_experimental  # noqa: F401  Isaac Lab's own scripts register these too

    env_cfg, agent_cfg = _resolve_configs(args.task, hydra_argv(sys.argv[0], overrides, output_dir))
    add_launcher_args, launch_simulation = _launch_simulation()
    parser = argparse.ArgumentParser(add_help=False)
    add_launcher_args(parser)
    launcher_args, _ = parser.parse_known_args(launcher_argv(ctx.device))
    launcher_args.distributed = False

    if num_envs is not None:
        env_cfg.scene.num_envs = num_envs
    env_cfg.sim.device = ctx.device
    env_cfg.seed = ctx.seed
    stack.enter_context(launch_simulation(env_cfg, launcher_args))
    env = gym.make(args.task, cfg=env_cfg)
    stack.callback(env.close)

    agent = None
    if agent_cfg is not None:
        agent = runner_cfg(
            agent_cfg.to_dict() if hasattr(agent_cfg, "to_dict") else dict(agent_cfg), ctx.device, ctx.seed
        )
    clip = agent.get("clip_actions") if agent else None
    wrapped = RslRlVecEnvWrapper(env, clip_actions=clip)
    iterations = agent.get("max_iterations") if agent else None
    return IsaacTask(env=wrapped, agent_cfg=agent, max_iterations=int(iterations) if iterations else None)
