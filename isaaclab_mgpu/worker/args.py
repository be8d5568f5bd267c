"""Worker command line: parsed once into a frozen :class:`WorkerArgs`, before any global state is touched.

Flags follow Isaac Lab's ``train.py`` spellings (underscores; hyphen spellings accepted too).
Positional ``key=value`` items are overrides: ``env.<field>=v`` and ``agent.<field>=v`` for the
embedded tasks; for Isaac Lab tasks they go to Isaac Lab's Hydra configuration (``env.<path>=v``,
``agent.<path>=v``, ``presets=newton_mjwarp``, ...; see :mod:`isaaclab_mgpu.tasks.isaaclab`).
An unknown option is an error: one line on stderr naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

LIBRARIES = ("rsl_rl", "skrl")
FRAMEWORKS = ("torch", "jax")
#: ``--resume`` without a path: the newest checkpoint of the newest earlier run of this experiment.
RESUME_LATEST = "latest"
DEFAULT_TASK = "cartpole"


@dataclass(frozen=True)
class WorkerArgs:
    """One rank's training request, as parsed from its argv."""

    rl_library: str = "rsl_rl"
    """``rsl_rl`` or ``skrl``."""

    ml_framework: str = "torch"
    """``torch`` or ``jax`` (skrl only)."""

    device: str | None = None
    """``cpu``, ``cuda`` or ``cuda:N``; None: CUDA when available, else CPU."""

    task: str = DEFAULT_TASK
    """An embedded task name, or an Isaac Lab task id (``Isaac-...``)."""

    num_envs: int | None = None
    """Environments per rank; None: the task's default."""

    max_iterations: int | None = None
    """Iterations to run in this invocation (a resumed run continues the count)."""

    seed: int = 42
    """Base seed; each rank adds its global rank."""

    save_interval: int = 50
    """Rank 0 writes a checkpoint every this many iterations (0: only at the end)."""

    resume: str | None = None
    """None, :data:`RESUME_LATEST`, or a run folder / checkpoint file to continue from."""

    run_name: str | None = None
    """Suffix of the run folder name."""

    experiment_name: str | None = None
    """Folder under ``logs/<library>/`` (default: the task name)."""

    log_root: str = "logs"
    """Root of the run folders."""

    distributed: bool = False
    """Train as one rank of a distributed run (WORLD_SIZE / JAX_WORLD_SIZE from the launcher)."""

    overrides: tuple[tuple[str, str], ...] = ()
    """``key=value`` items in order."""

    @property
    def experiment(self) -> str:
        """The experiment folder name."""
        return self.experiment_name or self.task

    def overrides_for(self, prefix: str) -> dict[str, str]:
        """Overrides ``<prefix>.<field>=value`` as ``{field: value}``."""
        return {k[len(prefix) + 1 :]: v for k, v in self.overrides if k.startswith(prefix + ".")}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse would print the usage first)
        sys.stderr.write(f"isaaclab_mgpu.worker: error: {message} (see --help)\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    # No abbreviations: "--max" must not silently become --max_iterations.
    p = _Parser(
        prog="python -m isaaclab_mgpu.worker",
        description="One rank of an mgpu training run.",
        allow_abbrev=False,
    )

    def add(name: str, **kw: object) -> None:
        names = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        p.add_argument(*names, dest=name, **kw)  # type: ignore[arg-type]

    add("rl_library", choices=LIBRARIES, default="rsl_rl", help="Training library.")
    add("ml_framework", choices=FRAMEWORKS, default="torch", help="skrl's ML framework.")
    add("device", default=None, help="cpu, cuda or cuda:N (default: CUDA when available).")
    add("task", default=DEFAULT_TASK, help="Embedded task (cartpole, pendulum) or Isaac Lab task id.")
    add("num_envs", type=int, default=None, help="Environments per rank.")
    add("max_iterations", type=int, default=None, help="Training iterations in this run.")
    add("seed", type=int, default=42, help="Base seed (each rank adds its rank).")
    add("save_interval", type=int, default=50, help="Checkpoint every N iterations.")
    add("resume", nargs="?", const=RESUME_LATEST, default=None, help="Continue from a run or checkpoint.")
    add("run_name", default=None, help="Suffix of the run folder.")
    add("experiment_name", default=None, help="Folder under logs/<library>/ (default: the task).")
    add("log_root", default="logs", help="Root folder of the runs.")
    add("distributed", action="store_true", help="Run as one rank of a distributed launch.")
    # Isaac Lab AppLauncher flags users commonly pass; meaningful for Isaac Lab tasks only.
    add("headless", action="store_true", help="Isaac Lab: run without a viewer.")
    return p


def option_strings() -> frozenset[str]:
    """Every flag the worker accepts, in both spellings."""
    return frozenset(s for action in _parser()._actions for s in action.option_strings)


def parse_args(argv: list[str]) -> WorkerArgs:
    """Parse ``argv``; exit 2 with one stderr line on any bad or unknown argument."""
    parser = _parser()
    ns, rest = parser.parse_known_args(argv)
    overrides: list[tuple[str, str]] = []
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or key.startswith("-") or not key:
            parser.error(f"unknown argument {item!r}; training options are listed by --help")
        overrides.append((key, value))
    for name in ("num_envs", "max_iterations"):
        value = getattr(ns, name)
        if value is not None and value < 1:
            parser.error(f"--{name} {value} must be at least 1")
    if ns.save_interval < 0:
        parser.error(f"--save_interval {ns.save_interval} must be 0 or more")
    if ns.rl_library != "skrl" and ns.ml_framework != "torch":
        parser.error(f"--ml_framework {ns.ml_framework} applies to skrl only; add --rl_library skrl")
    if ns.device is not None and not (ns.device in ("cpu", "cuda") or ns.device.startswith("cuda:")):
        parser.error(f"--device {ns.device!r} is unknown; use cpu, cuda or cuda:N")
    return WorkerArgs(
        rl_library=ns.rl_library,
        ml_framework=ns.ml_framework,
        device=ns.device,
        task=ns.task,
        num_envs=ns.num_envs,
        max_iterations=ns.max_iterations,
        seed=ns.seed,
        save_interval=ns.save_interval,
        resume=ns.resume,
        run_name=ns.run_name,
        experiment_name=ns.experiment_name,
        log_root=ns.log_root,
        distributed=ns.distributed,
        overrides=tuple(overrides),
    )
