"""Worker command line: parsed once into a frozen :class:`WorkerArgs`, before any global state is touched.

Flags follow Isaac Lab's ``train.py`` spellings (underscores; hyphen spellings accepted too).
Positional ``key=value`` items are overrides: ``env.<field>=v`` and ``agent.<field>=v`` for the
embedded tasks, keys and values checked here against :mod:`isaaclab_mgpu.contract.settings`; for Isaac
Lab tasks they go to Isaac Lab's Hydra configuration (``env.<path>=v``, ``agent.<path>=v``,
``presets=newton_mjwarp``, ...; see :mod:`isaaclab_mgpu.rank.isaac`), which judges them itself.
Isaac Lab tasks also take the options of Isaac Lab's own ``train`` (:data:`ISAAC_TRAIN_OPTIONS`),
handed to Isaac Lab verbatim (:attr:`WorkerArgs.isaac_args`).

:func:`parse` is pure (argparse only, no torch, no output) and raises :class:`WorkerArgsError`;
the launcher runs it on the exact arguments a rank will get, so everything it refuses is refused
before anything is spawned. The worker's own entry (one stderr line, exit status 2) is
:func:`isaaclab_mgpu.rank.worker.args.parse_args`.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import time
from dataclasses import dataclass

from isaaclab_mgpu.contract import resume
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.layout import DEFAULT_LOG_ROOT, DEFAULT_TASK, LOGGERS, STAMP_FORMAT, name_problem
from isaaclab_mgpu.contract.settings import TASK_CONFIGS, check_overrides
from isaaclab_mgpu.contract.text import has_control

LIBRARIES = ("rsl_rl", "skrl", "rl_games")
#: Libraries the embedded tasks train with (rl_games runs Isaac Lab tasks only).
EMBEDDED_LIBRARIES = ("rsl_rl", "skrl")
FRAMEWORKS = ("torch", "jax")
#: ``--on_drift``: name a drift and go on, or stop the run at a checkpoint.
DRIFT_ACTIONS = ("warn", "stop")
#: The embedded tasks by name (``isaaclab_mgpu.rank.tasks.TASKS`` has their classes; a test keeps both equal).
EMBEDDED_TASKS = tuple(TASK_CONFIGS)
#: Task ids with this prefix are Isaac Lab's and train on Isaac Lab's own code path.
ISAAC_PREFIX = "Isaac-"
#: A negative number, which argparse reads as a value (its own ``_negative_number_matcher``).
_NEGATIVE = re.compile(r"-\d+|-\d*\.\d+")

#: Options of Isaac Lab 3.0's ``train`` (rsl_rl, skrl, rl_games back-ends and the simulation launcher)
#: that the worker forwards verbatim for Isaac Lab tasks, with how many values each takes (``"?"``:
#: an optional value). Options the worker itself owns (:func:`_parser`) are not listed.
ISAAC_TRAIN_OPTIONS: dict[str, int | str] = {
    "--agent": 1, "--algorithm": 1, "--checkpoint": 1, "--logger": 1, "--log_project_name": 1,
    "--external_callback": 1, "--resume_optimizer_state": 0, "--no-resume_optimizer_state": 0,
    "--video": 0, "--video_length": 1, "--video_interval": 1, "--frontend": 1,
    "--export_io_descriptors": 0, "--ray-proc-id": 1, "-rid": 1,
    "--capture_env_sensors": 1, "--capture_env_sensors_length": 1, "--capture_env_sensors_interval": 1,
    "--capture_env_sensors_format": 1, "--sigma": 1, "--track": "?", "--wandb-project-name": 1,
    "--wandb-entity": 1, "--wandb-name": 1, "--viz": 1, "--visualizer": 1, "--max_visible_envs": 1,
    "--livestream": 1, "--xr": 0, "--deterministic": 0, "--experience": 1, "--kit_args": 1,
    "--verbose": 0, "--info": 0, "--anim_recording_enabled": 0, "--anim_recording_start_time": 1,
    "--anim_recording_stop_time": 1,
}  # fmt: skip


def is_isaac_task(task: str) -> bool:
    """True for an Isaac Lab task id (``Isaac-...``)."""
    return task.startswith(ISAAC_PREFIX)


@dataclass(frozen=True)
class WorkerArgs:
    """One rank's training request, as parsed from its argv."""

    rl_library: str = "rsl_rl"
    """``rsl_rl``, ``skrl`` or (Isaac Lab tasks only) ``rl_games``."""

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

    drift_interval: int = 10
    """Every this many iterations the ranks compare hashes of their states (0: never; embedded tasks)."""

    on_drift: str = "warn"
    """What a drift between the ranks does: ``warn`` (goes on) or ``stop`` (at a checkpoint: ``drifted``)."""

    resume: str | None = None
    """None, :data:`.resume.AUTO`, :data:`.resume.LATEST` (no path), or a run folder or checkpoint file."""

    run_name: str | None = None
    """Suffix of the run folder name."""

    run_timestamp: str | None = None
    """The run folder's stamp (Isaac Lab's ``--run_timestamp``); None: the launcher's ``MGPU_RUN_STAMP``."""

    experiment_name: str | None = None
    """Folder under ``logs/<library>/`` (default: the task name)."""

    log_root: str = DEFAULT_LOG_ROOT
    """Root of the run folders."""

    logger: str = "tensorboard"
    """Where rank 0 writes its curves: ``tensorboard``, ``wandb``, ``none`` (Isaac Lab tasks: Isaac Lab's)."""

    distributed: bool = False
    """Train as one rank of a distributed run (WORLD_SIZE / JAX_WORLD_SIZE from the launcher)."""

    overrides: tuple[tuple[str, str], ...] = ()
    """``key=value`` items in order."""

    isaac_args: tuple[str, ...] = ()
    """Isaac Lab ``train`` options (:data:`ISAAC_TRAIN_OPTIONS`) as given, in order."""

    @property
    def experiment(self) -> str:
        """The experiment folder name."""
        return self.experiment_name or self.task

    def overrides_for(self, prefix: str) -> dict[str, str]:
        """Overrides ``<prefix>.<field>=value`` as ``{field: value}``."""
        return {k[len(prefix) + 1 :]: v for k, v in self.overrides if k.startswith(prefix + ".")}


class WorkerArgsError(UsageError):
    """The worker refuses its argv; ``unknown`` is the offending item when it is not an option."""

    def __init__(self, message: str, unknown: str | None = None) -> None:
        super().__init__(message)
        self.unknown = unknown


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # raise instead of printing the usage and exiting
        raise WorkerArgsError(message)


def _folder_name(value: str) -> str:
    """One folder inside the log root (:func:`~isaaclab_mgpu.contract.layout.name_problem`)."""
    problem = name_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r} {problem}")
    return value


def _log_root(value: str) -> str:
    """A ``--log_root`` value: any folder, typed on one line."""
    if has_control(value):
        raise argparse.ArgumentTypeError(f"{value!r} holds a control character; retype it on one line")
    return value


def _stamp(value: str) -> str:
    """A ``--run_timestamp`` value: Isaac Lab's run folder stamp, which is also one path component."""
    try:
        time.strptime(value, STAMP_FORMAT)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a stamp like 2026-01-02_03-04-05") from None
    return value


def _parser(*, add_help: bool = True) -> argparse.ArgumentParser:
    # No abbreviations: "--max" must not silently become --max_iterations.
    p = _Parser(
        prog="python -m isaaclab_mgpu.worker",
        description="One rank of an mgpu training run.",
        allow_abbrev=False,
        add_help=add_help,
    )

    def add(name: str, **kw: object) -> None:
        names = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        p.add_argument(*names, dest=name, **kw)  # type: ignore[arg-type]

    add("rl_library", choices=LIBRARIES, default="rsl_rl", help="Training library.")
    add("ml_framework", choices=FRAMEWORKS, default="torch", help="skrl's ML framework.")
    add("device", default=None, help="cpu, cuda or cuda:N (default: CUDA when available).")
    add("task", default=DEFAULT_TASK, metavar="NAME", help="cartpole, pendulum or an Isaac Lab task id.")
    add("num_envs", type=int, default=None, help="Environments per rank.")
    add("max_iterations", type=int, default=None, help="Training iterations in this run.")
    add("seed", type=int, default=42, help="Base seed (each rank adds its rank).")
    add("save_interval", type=int, default=50, help="Checkpoint every N iterations.")
    add(
        "drift_interval",
        type=int,
        default=10,
        help="Compare the ranks' parameters, optimizer state and normalizers every N iterations (0: never).",
    )
    add(
        "on_drift",
        choices=DRIFT_ACTIONS,
        default="warn",
        help="When the ranks drift apart: warn (go on) or stop (all stop, rank 0 saves; mgpu exits 65).",
    )
    add(
        "resume",
        nargs="?",
        const=resume.LATEST,
        default=None,
        metavar="PATH",
        help="Continue from a run or checkpoint (default: the latest).",
    )
    add("run_name", type=_folder_name, default=None, metavar="NAME", help="Suffix of the run folder.")
    add(
        "run_timestamp",
        type=_stamp,
        default=None,
        metavar="STAMP",
        help="Stamp naming the run folder, like 2026-01-02_03-04-05 (default: the launch time).",
    )
    add(
        "experiment_name",
        type=_folder_name,
        default=None,
        metavar="NAME",
        help="Folder under logs/<library>/ (default: task).",
    )
    add("log_root", type=_log_root, default=DEFAULT_LOG_ROOT, metavar="DIR", help="Root folder of the runs.")
    add("distributed", action="store_true", help="Run as one rank of a distributed launch.")
    # Isaac Lab AppLauncher flags users commonly pass; meaningful for Isaac Lab tasks only.
    add("headless", action="store_true", help="Isaac Lab: run without a viewer.")
    return p


@dataclass(frozen=True)
class OptionHelp:
    """One worker option as ``--help`` lists it."""

    names: tuple[str, ...]
    """Its spellings, underscore form first."""

    metavar: str | None
    """What its value looks like; None for a flag."""

    help: str
    """What it does."""


def options_help() -> tuple[OptionHelp, ...]:
    """Every worker option with its spellings, value and help (for ``mgpu train --help``)."""
    out = []
    for action in _parser(add_help=False)._actions:
        if action.nargs == 0:
            metavar = None
        else:
            metavar = action.metavar or ("N" if action.type is int else action.dest.upper())
            metavar = f"[{metavar}]" if action.nargs == "?" else metavar
        out.append(OptionHelp(tuple(action.option_strings), metavar, action.help or ""))
    return tuple(out)


def option_strings() -> frozenset[str]:
    """Every flag the worker accepts, in both spellings, Isaac Lab's forwarded ones included."""
    own = frozenset(s for action in _parser()._actions for s in action.option_strings)
    return own | frozenset(ISAAC_TRAIN_OPTIONS)


def _is_option(item: str) -> bool:
    """Whether argparse reads ``item`` as an option (``-``, ``-1``, ``-.5`` and ``"-a -b"`` are values)."""
    return item.startswith("-") and item != "-" and " " not in item and not _NEGATIVE.fullmatch(item)


def _split_isaac(rest: list[str], parser: argparse.ArgumentParser) -> tuple[str, list[str], list[str]]:
    """Take Isaac Lab's options out of ``rest``: the ``--logger`` value, the others, what is left."""
    logger, isaac, left = "tensorboard", [], []
    i = 0
    while i < len(rest):
        flag, sep, value = rest[i].partition("=")
        arity = ISAAC_TRAIN_OPTIONS.get(flag)
        after = rest[i + 1] if i + 1 < len(rest) else None
        if sep or arity in (None, 0):
            n = 1
        elif arity == 1:
            if after is None or _is_option(after):
                parser.error(f"{flag} needs a value")
            n = 2
        else:  # "?": the next item is its value unless it is an option or an override
            n = 1 if after is None or after.startswith("-") or "=" in after else 2
        if arity is None:
            left.append(rest[i])
        elif flag == "--logger":
            logger = rest[i + 1] if n == 2 else value
        else:
            isaac.extend(rest[i : i + n])
        i += n
    return logger, isaac, left


def check_task(task: str) -> None:
    """Refuse a task name that is neither an embedded task nor an Isaac Lab task id."""
    if task in EMBEDDED_TASKS or is_isaac_task(task):
        return
    close = difflib.get_close_matches(task.lower(), EMBEDDED_TASKS, n=1, cutoff=0.7)
    if task.lower().startswith(ISAAC_PREFIX.lower()):
        close = [ISAAC_PREFIX + task[len(ISAAC_PREFIX) :]]
    hint = f"; did you mean {close[0]}?" if close else ""
    raise WorkerArgsError(
        f"--task {task!r} is not a task{hint} (embedded tasks: {', '.join(EMBEDDED_TASKS)}; "
        f"Isaac Lab task ids start with {ISAAC_PREFIX})"
    )


def parse(argv: list[str], *, add_help: bool = True) -> WorkerArgs:
    """Parse ``argv``; raise :class:`WorkerArgsError` on any bad or unknown argument."""
    parser = _parser(add_help=add_help)
    ns, rest = parser.parse_known_args(argv)
    logger, isaac, rest = _split_isaac(rest, parser)
    if logger not in LOGGERS and not is_isaac_task(ns.task):
        parser.error(f"--logger {logger!r} is unknown; choose tensorboard, wandb or none")
    if isaac and not is_isaac_task(ns.task):
        parser.error(f"{isaac[0].split('=')[0]} is an Isaac Lab option; it applies to Isaac Lab tasks only")
    if ns.rl_library not in EMBEDDED_LIBRARIES and not is_isaac_task(ns.task):
        parser.error(f"--rl_library {ns.rl_library} trains Isaac Lab tasks only; use rsl_rl or skrl")
    overrides: list[tuple[str, str]] = []
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or key.startswith("-") or not key:
            raise WorkerArgsError(f"unknown argument {item!r}", item)
        overrides.append((key, value))
    for name in ("num_envs", "max_iterations"):
        value = getattr(ns, name)
        if value is not None and value < 1:
            parser.error(f"--{name} {value} must be at least 1")
    for name in ("save_interval", "drift_interval"):
        if getattr(ns, name) < 0:
            parser.error(f"--{name} {getattr(ns, name)} must be 0 or more")
    if ns.rl_library != "skrl" and ns.ml_framework != "torch":
        parser.error(f"--ml_framework {ns.ml_framework} applies to skrl only; add --rl_library skrl")
    if ns.device is not None and not (ns.device in ("cpu", "cuda") or ns.device.startswith("cuda:")):
        parser.error(f"--device {ns.device!r} is unknown; use cpu, cuda or cuda:N")
    check_task(ns.task)
    if not is_isaac_task(ns.task):  # Isaac Lab's Hydra configuration judges its own overrides
        try:
            check_overrides(ns.task, overrides)
        except ValueError as exc:
            raise WorkerArgsError(str(exc)) from None
    # Every option of the parser is a field of the same name, but --headless (AppLauncher's).
    given = {f.name: getattr(ns, f.name) for f in dataclasses.fields(WorkerArgs) if hasattr(ns, f.name)}
    return WorkerArgs(**given, logger=logger, overrides=tuple(overrides), isaac_args=tuple(isaac))
