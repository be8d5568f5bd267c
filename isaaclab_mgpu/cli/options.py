"""Launch options shared by every command, declared once.

:func:`launch_command` turns a function taking ``spec: LaunchSpec`` into a Typer command that
accepts every launcher option of Isaac Lab's ``train_multigpu`` (declared in the underscore
spelling; :mod:`.command` makes the hyphen spelling work too), collects unknown options and
``key=value`` overrides as training arguments, and hands the function a validated
:class:`~isaaclab_mgpu.launcher.spec.LaunchSpec`. For a :class:`~.command.LaunchCommand` the training
arguments are also checked against the built-in worker's options (:mod:`isaaclab_mgpu.launcher.forwarded`).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer

from isaaclab_mgpu.cli.command import PASSTHROUGH, VERBATIM, LaunchCommand, option_names
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, Interrupted, UsageError
from isaaclab_mgpu.contract.progress import AUTO
from isaaclab_mgpu.launcher.resolve import CPU_RANKS_PER_CORE
from isaaclab_mgpu.launcher.spec import LaunchSpec, in_user_order

__all__ = ["PASSTHROUGH", "SHARED", "STATE", "launch_command", "spec_for", "spec_from_options"]

LAUNCH = "Launch options"
STALLS = "Hang detection (train)"
PROGRAM = "Your own training program (instead of the built-in worker)"
TORCHRUN = "torchrun options (forwarded when set)"
LOGS = "Logs"
RESTARTS = "Restarts, resume and requeue (train)"


class _State:
    debug = False
    argv: list[str] | None = None
    """The command line as typed, while :func:`isaaclab_mgpu.cli.main` runs it."""


STATE = _State()


class Number(click.ParamType):
    """Click's integer or float, read only from ASCII digits and finite.

    Click converts with Python's ``int``/``float``, which also read full-width and Arabic-Indic
    digits, ``1_000``, ``nan`` and ``inf``; none of those is a number a user means here.
    """

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self.kind) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        ok = text.isascii() and "_" not in text
        number = (click.INT if self.kind is int else click.FLOAT).convert(text, param, ctx) if ok else None
        if number is None or (self.kind is float and not math.isfinite(number)):
            self.fail(f"{value!r} is not a valid {self.name} (a finite number in ASCII digits)", param, ctx)
        return number


#: Every numeric option's type (``click_type=``).
INT, FLOAT = Number(int), Number(float)


class SecondsOrAuto(Number):
    """A number of seconds, or ``auto`` (``--stall_timeout``: the bound follows the run's pace)."""

    def __init__(self) -> None:
        super().__init__(float)
        self.name = "number of seconds or auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() == AUTO:
            return AUTO
        return super().convert(value, param, ctx)


SECONDS_OR_AUTO = SecondsOrAuto()


def _set_debug(value: bool) -> bool:
    if value:
        STATE.debug = True
    return value


def _names(name: str, *extra: str) -> list[str]:
    # The hyphen spelling is accepted through the context's token_normalize_func (see .command).
    return ["--" + name, *extra]


def _opt(name: str, help: str, *extra: str, panel: str = TORCHRUN, **kw: Any) -> Any:
    return typer.Option(*_names(name, *extra), help=help, rich_help_panel=panel, **kw)


#: Shared by train, dry-run and probe-nccl (not a launch-spec field: it selects the environment).
NO_SAVED_WORKAROUNDS = typer.Option(
    "--no_saved_workarounds",
    help="Do not apply the NCCL workarounds probe-nccl saved for this machine.",
)

JOBS = "Job files (dry-run --emit)"


def _job(name: str, help: str, **kw: Any) -> Any:
    return typer.Option("--" + name, help=help, rich_help_panel=JOBS, **kw)


#: dry-run's job-file options (not launch-spec fields: they describe the job around the launch).
#: Each defaults to None (not given): an option given for a kind it does not apply to is refused.
EMIT = Annotated[
    str | None,
    _job(
        "emit",
        "Print a job file that runs this launch on every node instead: sbatch (SLURM), pytorchjob "
        "(Kubeflow) or trainjob (Kubeflow Trainer v2: a TrainingRuntime and a TrainJob).",
        metavar="sbatch|pytorchjob|trainjob",
    ),
]
JOB_NAME = Annotated[
    str | None, _job("job_name", "Job file: the job's name (default mgpu-train).", metavar="NAME")
]
JOB_TIME = Annotated[
    str | None, _job("job_time", "sbatch: the time limit (default 04:00:00).", metavar="HH:MM:SS")
]
PARTITION = Annotated[str | None, _job("partition", "sbatch: the partition.", metavar="NAME")]
JOB_REQUEUE = Annotated[bool, _job("job_requeue", "Refused: now --requeue.", hidden=True)]
RDZV_PORT = Annotated[
    int | None,
    _job(
        "rdzv_port",
        "sbatch, pytorchjob: the rendezvous port (default: from the job id; 23456).",
        metavar="PORT",
        click_type=INT,
    ),
]
CPUS_PER_RANK = Annotated[
    int | None,
    _job(
        "cpus_per_rank",
        "Job file: CPUs per rank (sbatch --cpus-per-task, a pod's CPU request; default 4, 1 with "
        "--device cpu).",
        metavar="N",
        click_type=INT,
    ),
]
IMAGE = Annotated[
    str | None,
    _job(
        "image",
        "Kubernetes: the container image, with mgpu installed (default isaaclab-mgpu:latest).",
        metavar="IMAGE",
    ),
]
SHM_SIZE = Annotated[
    str | None,
    _job("shm_size", "Kubernetes: size of /dev/shm, a memory volume (default 16Gi).", metavar="SIZE"),
]
MEMORY = Annotated[
    str | None, _job("memory", "Kubernetes: a pod's memory request (default 16Gi per rank).", metavar="SIZE")
]
PVC = Annotated[
    str | None,
    _job(
        "pvc",
        "Kubernetes: a PersistentVolumeClaim mounted at the pods' log root, so a rerun pod continues "
        "the run (without it checkpoints die with the pod).",
        metavar="CLAIM",
    ),
]
WORKDIR = Annotated[
    str | None,
    _job(
        "workdir",
        "Kubernetes: the container's working directory; logs/ in it is the log root (default /workspace).",
        metavar="PATH",
    ),
]
BACKOFF_LIMIT = Annotated[
    int | None,
    _job(
        "backoff_limit",
        "Kubernetes: times a failed or evicted pod is rerun, resuming the run (default 3).",
        metavar="N",
        click_type=INT,
    ),
]
TERMINATION_GRACE = Annotated[
    int | None,
    _job(
        "termination_grace",
        "Kubernetes: seconds from the kubelet's SIGTERM (the ranks save) to its SIGKILL (default 60).",
        metavar="SECONDS",
        click_type=INT,
    ),
]

GRACE_PERIOD = Annotated[
    float,
    typer.Option(
        "--grace_period",
        metavar="SECONDS",
        click_type=FLOAT,
        help="After Ctrl-C/SIGTERM: time for the launcher's own shutdown, then SIGTERM to all.",
    ),
]
KILL_AFTER = Annotated[
    float,
    typer.Option(
        "--kill_after",
        metavar="SECONDS",
        click_type=FLOAT,
        help="Then SIGKILL whatever survives SIGTERM this long.",
    ),
]

# name -> (annotation, default); the annotation carries the typer.Option.
SHARED: dict[str, tuple[Any, Any]] = {
    "nproc_per_node": (
        Annotated[
            str | None,
            typer.Option(
                *_names("num_gpus"),
                metavar="N|gpu|cpu|auto",
                help=(
                    "Ranks per node (also --nproc_per_node). Default: every visible GPU; 1 with "
                    "--device cpu. gpu: one per visible GPU. cpu, auto: torchrun's meaning, one rank "
                    "per CPU core, each still on a GPU unless --device cpu."
                ),
                rich_help_panel=LAUNCH,
            ),
        ],
        None,
    ),
    "gpu_ids": (
        Annotated[
            str | None,
            typer.Option(
                *_names("gpu_ids"),
                "--gpus",
                metavar="IDS",
                help="GPUs to run on: indices or UUIDs, e.g. 0,2 (within CUDA_VISIBLE_DEVICES when set).",
                rich_help_panel=LAUNCH,
            ),
        ],
        None,
    ),
    "rl_library": (
        Annotated[str | None, _opt("rl_library", "rsl_rl (default), skrl or rl_games.", panel=LAUNCH)],
        None,
    ),
    "ml_framework": (
        Annotated[str | None, _opt("ml_framework", "torch (default) or jax, for skrl.", panel=LAUNCH)],
        None,
    ),
    "device": (
        Annotated[
            str,
            _opt("device", "cuda: a GPU per rank, NCCL. cpu: CPU ranks, gloo.", panel=LAUNCH),
        ],
        "cuda",
    ),
    "oversubscribe_cpu": (
        Annotated[
            bool,
            _opt(
                "oversubscribe_cpu",
                f"--device cpu: allow more than {CPU_RANKS_PER_CORE} ranks per CPU (train refuses them).",
                panel=LAUNCH,
            ),
        ],
        False,
    ),
    "script": (
        Annotated[
            str | None,
            _opt("script", "Run this training script.", panel=PROGRAM, metavar="PATH"),
        ],
        None,
    ),
    "module": (
        Annotated[
            str | None,
            typer.Option(
                "-m",
                "--module",
                metavar="MODULE",
                help="Run this Python module.",
                rich_help_panel=PROGRAM,
            ),
        ],
        None,
    ),
    # Two flags rather than one --x/--no_x pair: Typer's help gives negative names a column of their
    # own, which squeezes every name in the panel at 80 columns.
    "inject_distributed": (
        Annotated[
            bool,
            _opt("inject_distributed", "Append --distributed (built-in worker: default).", panel=PROGRAM),
        ],
        False,
    ),
    "no_inject_distributed": (
        Annotated[
            bool,
            _opt("no_inject_distributed", "Never append --distributed.", panel=PROGRAM),
        ],
        False,
    ),
    "nnodes": (Annotated[str | None, _opt("nnodes", "Nodes: N or MIN:MAX.")], None),
    "node_rank": (Annotated[str | None, _opt("node_rank", "This node's rank.")], None),
    "coordinator_address": (
        Annotated[str | None, _opt("coordinator_address", "JAX coordinator host:port (skrl JAX).")],
        None,
    ),
    "master_addr": (Annotated[str | None, _opt("master_addr", "Rank-0 node address.")], None),
    "master_port": (Annotated[str | None, _opt("master_port", "Rank-0 node port.")], None),
    "rdzv_backend": (
        Annotated[str | None, _opt("rdzv_backend", "static, c10d, etcd or etcd-v2.")],
        None,
    ),
    "rdzv_endpoint": (
        Annotated[str | None, _opt("rdzv_endpoint", "Rendezvous host[:port].")],
        None,
    ),
    "rdzv_id": (Annotated[str | None, _opt("rdzv_id", "Rendezvous id of the job.")], None),
    "max_restarts": (
        Annotated[
            str | None,
            _opt(
                "max_restarts",
                "Restarts after a failed or hung attempt, each resuming from the run's newest "
                "checkpoint in the same run folder (mgpu's own; torchrun gets none).",
                panel=RESTARTS,
            ),
        ],
        None,
    ),
    "monitor_interval": (
        Annotated[str | None, _opt("monitor_interval", "Seconds between worker checks.")],
        None,
    ),
    "start_method": (
        Annotated[str | None, _opt("start_method", "spawn, fork or forkserver.")],
        None,
    ),
    "role": (Annotated[str | None, _opt("role", "Worker role name.")], None),
    "virtual_local_rank": (
        Annotated[bool, _opt("virtual_local_rank", "Every worker sees LOCAL_RANK=0.")],
        False,
    ),
    "tee": (
        Annotated[str | None, _opt("tee", "Streams to console and files: 0-3 or rank:v,...", panel=LOGS)],
        None,
    ),
    "redirects": (
        Annotated[str | None, _opt("redirects", "Streams to files only: 0-3 or rank:v,...", panel=LOGS)],
        None,
    ),
    "local_ranks_filter": (
        Annotated[
            str | None,
            _opt("local_ranks_filter", "Local ranks shown on the console (default 0).", panel=LOGS),
        ],
        None,
    ),
    "log_dir": (
        Annotated[str | None, _opt("log_dir", "Per-rank log folder (default logs/mgpu).", panel=LOGS)],
        None,
    ),
    "log_all_ranks": (
        Annotated[bool, _opt("log_all_ranks", "Show every rank on the console.", panel=LOGS)],
        False,
    ),
    "debug": (
        Annotated[
            bool,
            typer.Option(
                "--debug",
                help="Show tracebacks.",
                callback=_set_debug,
                is_eager=True,
                rich_help_panel=LAUNCH,
            ),
        ],
        False,
    ),
}


#: Stall watch options of train and dry-run (the launch spec carries them: ranks derive their
#: process-group timeout from them).
STALL: dict[str, tuple[Any, Any]] = {
    "stall_timeout": (
        Annotated[
            str,
            _opt(
                "stall_timeout",
                "Seconds a rank may make no training progress before mgpu dumps every rank's stack, "
                "names the stalled rank and stops the run (exit 4). auto (the default): 20x the "
                "run's median steady iteration, at least 30 s (900 s, or --startup_timeout if more, "
                "until the first steady iterations and while a checkpoint is written). 0: off.",
                panel=STALLS,
                metavar="SECONDS|auto",
                click_type=SECONDS_OR_AUTO,
            ),
        ],
        AUTO,
    ),
    "startup_timeout": (
        Annotated[
            float,
            _opt(
                "startup_timeout",
                "Seconds this node's ranks may report no start-up progress (rendezvous, process "
                "group, environments, first broadcast) before the launch counts as hung. 0: off.",
                panel=STALLS,
                metavar="SECONDS",
                click_type=FLOAT,
            ),
        ],
        900.0,
    ),
    "stall_on_silence": (
        Annotated[
            bool,
            _opt(
                "stall_on_silence",
                "For a --script/-m program that reports no progress: count a rank as stalled "
                "after --stall_timeout seconds without output.",
                panel=STALLS,
            ),
        ],
        False,
    ),
}


#: Requeue options of train and dry-run.
REQUEUE: dict[str, tuple[Any, Any]] = {
    "requeue": (
        Annotated[
            bool,
            _opt(
                "requeue",
                "SLURM: after the requeue signal's checkpoint, node 0 runs scontrol requeue "
                "$SLURM_JOB_ID and mgpu exits 75. dry-run --emit sbatch --requeue also writes "
                "#SBATCH --requeue and --open-mode=append.",
                panel=RESTARTS,
            ),
        ],
        False,
    ),
    "keep_checkpoints": (
        Annotated[
            str | None,
            _opt(
                "keep_checkpoints",
                "Keep only the newest N checkpoints of the run (the built-in worker's model_<N>.pt, "
                "Isaac Lab's rsl-rl model_<N>.pt, skrl agent_<N>.pt, rl-games nn/last_*.pth); older "
                "ones are deleted once a new one is whole on disk. Default: keep all.",
                panel=RESTARTS,
                metavar="N",
            ),
        ],
        None,
    ),
    "min_nodes": (
        Annotated[
            str | None,
            _opt(
                "min_nodes",
                "Shrink instead of stop: when a node is lost and restarts remain, the other nodes "
                "restart from the newest checkpoint on fewer nodes, down to N (also --nnodes MIN:MAX).",
                panel=RESTARTS,
                metavar="N",
            ),
        ],
        None,
    ),
    "shrink_keep": (
        Annotated[
            str,
            _opt(
                "shrink_keep",
                "What a shrink keeps: total (the run's environment count; each rank's --num_envs "
                "raised) or per_rank (each rank's count as it was).",
                panel=RESTARTS,
                metavar="total|per_rank",
            ),
        ],
        "total",
    ),
    "requeue_signal": (
        Annotated[
            str,
            _opt(
                "requeue_signal",
                "The signal that asks the ranks to checkpoint at the next iteration and stop "
                "(SLURM: #SBATCH --signal=USR1@90).",
                panel=RESTARTS,
                metavar="SIGNAL",
            ),
        ],
        "USR1",
    ),
    "simulate_fault": (
        Annotated[
            str | None,
            _opt(
                "simulate_fault",
                "Rehearse a failure: KIND@ITERATION[,rank=R] with KIND kill (the rank SIGKILLs "
                "itself), hang (it freezes) or requeue (its mgpu gets the requeue signal), in the "
                "first attempt, so --max_restarts, --stall_timeout and --requeue prove themselves.",
                panel=RESTARTS,
                metavar="KIND@IT[,rank=R]",
            ),
        ],
        None,
    ),
}


def spec_from_options(training_args: list[str], values: dict[str, Any]) -> LaunchSpec:
    """Build the LaunchSpec from parsed option values and the passthrough arguments."""
    fields = {k: v for k, v in values.items() if k not in ("debug", "no_inject_distributed")}
    if values.get("inject_distributed") and values.get("no_inject_distributed"):
        raise UsageError("--inject_distributed and --no_inject_distributed both given; choose one")
    # Neither flag: None, the default that depends on the worker (see LaunchSpec.inject_distributed).
    fields["inject_distributed"] = (
        True if values.get("inject_distributed") else False if values.get("no_inject_distributed") else None
    )
    fields["command_line"] = tuple(STATE.argv or ())
    program = values.get("module") or values.get("script")
    if program and STATE.argv is not None:
        training_args = list(in_user_order(STATE.argv, training_args, program))
    return LaunchSpec.from_options(tuple(training_args), **fields)


def spec_for(ctx: click.Context, values: dict[str, Any]) -> LaunchSpec:
    """The LaunchSpec of a parsed command; a launch command's training arguments checked too."""
    spec = spec_from_options(list(ctx.args), values)
    if isinstance(ctx.command, LaunchCommand):
        from isaaclab_mgpu.launcher.forwarded import check_training_args

        check_training_args(
            spec,
            launcher_options=option_names(ctx.command),
            verbatim=ctx.meta.get(VERBATIM, 0),
            command=ctx.info_name or "train",
        )
    elif spec.training_args and ctx.command is not None:
        from isaaclab_mgpu.launcher.forwarded import check_misspelt_options

        check_misspelt_options(spec.training_args, option_names(ctx.command), ctx.info_name or "mgpu")
    return spec


def launch_command(fn: Callable[..., Any], *, groups: tuple[dict[str, tuple[Any, Any]], ...] = ()) -> Any:
    """Give ``fn(spec, ...)`` every shared launch option (and ``groups``); it receives the LaunchSpec."""
    options = {name: value for group in (SHARED, *groups) for name, value in group.items()}
    own = inspect.signature(fn)
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values() if p.name != "spec"
    ]
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
        for name, (ann, default) in options.items()
    ]

    @functools.wraps(fn)
    def wrapper(ctx: typer.Context, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in options}
        spec = spec_for(ctx, values)
        try:
            return fn(spec=spec, **kwargs)
        except KeyboardInterrupt:  # outside supervision (which handles its own); Typer would swallow it
            raise Interrupted("stopped by Ctrl-C", exit_code=EXIT_INTERRUPTED) from None

    wrapper.__signature__ = own.replace(parameters=[ctx_param, *params, *shared])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        "ctx": typer.Context,
        **{p.name: p.annotation for p in params},
        **{name: ann for name, (ann, _) in options.items()},
    }
    return wrapper


def train_launch_command(fn: Callable[..., Any]) -> Any:
    """:func:`launch_command` plus the stall-watch and requeue options (train and dry-run)."""
    return launch_command(fn, groups=(STALL, REQUEUE))
