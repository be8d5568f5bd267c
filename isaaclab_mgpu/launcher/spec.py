"""The typed launch specification: what the user asked for, validated, and nothing more.

``LaunchSpec`` is built once from the command line (``cli``) or from code, is frozen, and is the
only input of :func:`isaaclab_mgpu.launcher.resolve.resolve`. Every field that mirrors an Isaac Lab
``train_multigpu`` / torchrun option is ``None`` when the user did not set it, so the builder can
forward exactly the options that were given, as Isaac Lab does.

**Each launch option is declared here, once**, as a field of :class:`LaunchSpec` in the form of
:mod:`isaaclab_mgpu.launcher.options` (its help is the field's documentation). Fields are in
``--help`` order.

Validation here is static: each value on its own, then the combinations that cannot apply to the
chosen launch path (:func:`_validate`). Anything that needs to look at the machine (visible GPUs,
ports, files, SLURM) belongs to ``resolve``. Every failure raises
:class:`~isaaclab_mgpu.contract.errors.UsageError` with one line naming the value and the fix.

Shapes every value must have, whatever its option: no control character in any text (a newline in
``--log_dir`` or ``--master_addr`` is a typo, never a name); numbers in ASCII digits (torchrun
would get full-width ones verbatim); host names made of the characters a host name or address
has; at most :data:`MAX_RANKS_PER_NODE` ranks per node and :data:`MAX_NODES` nodes.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from isaaclab_mgpu.contract import faults, worker_args
from isaaclab_mgpu.contract.devices import GPU_UUID, index_entry
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.layout import DEFAULT_LOG_ROOT, DEFAULT_TASK
from isaaclab_mgpu.contract.progress import AUTO
from isaaclab_mgpu.contract.worker_args import WorkerArgs
from isaaclab_mgpu.launcher.options import (
    INTEGER,
    LAUNCHING,
    RUNNING,
    at_least,
    check_options,
    from_text,
    number,
    option,
    parse_one,
)

NPROC_TOKENS = ("gpu", "cpu", "auto")
RDZV_BACKENDS = ("static", "c10d", "etcd", "etcd-v2")

#: Where the nodes of a launch meet: node count and rank, then the rendezvous (torchrun's names).
RENDEZVOUS_OPTIONS = (
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "rdzv_backend",
    "rdzv_endpoint",
    "rdzv_id",
)
#: torchrun options the launch forwards when set, in the order Isaac Lab's launcher emits them.
TORCHRUN_OPTIONS = (
    *RENDEZVOUS_OPTIONS,
    "monitor_interval",
    "start_method",
    "role",
    "tee",
    "redirects",
    "local_ranks_filter",
    "log_dir",
)
#: The launch options mgpu's JAX launcher takes as torchrun does.
JAXRUN_OPTIONS = ("nnodes", "node_rank", "tee", "local_ranks_filter", "log_dir")
#: torchrun options that skrl's JAX launch contract has no equivalent for.
TORCHRUN_ONLY = (*(name for name in TORCHRUN_OPTIONS if name not in JAXRUN_OPTIONS), "virtual_local_rank")
#: Signals ``--requeue_signal`` may name (SLURM's ``--signal`` warning; never a stop signal).
REQUEUE_SIGNALS = ("USR1", "USR2", "XCPU", "PWR")
#: What a shrink keeps (``--shrink_keep``): the run's environment count, or each rank's.
SHRINK_KEEPS = ("total", "per_rank")

#: More ranks on one node than any machine has GPUs or cores for: refused as a typo.
MAX_RANKS_PER_NODE = 1024
#: More nodes than any cluster has: refused as a typo too.
MAX_NODES = 65536

#: A host name, IPv4 address, or IPv6 address (bare, or in brackets, with a zone).
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]|[\w.:-]+(%[\w.-]+)?)$", re.ASCII)

#: ``--help`` panels of the launch options.
LAUNCH = "Launch options"
STALLS = "Hang detection (train)"
PROGRAM = "Your own training program (instead of the built-in worker)"
TORCHRUN = "torchrun options (forwarded when set)"
LOGS = "Logs"
RESTARTS = "Restarts, resume and requeue (train)"
#: CPU ranks per logical CPU beyond which a ``--device cpu`` count is taken for a typo (a CPU rank
#: is a whole training process; past a few per core they only time-slice). ``resolve`` applies it.
CPU_RANKS_PER_CORE = 4


def spelling(name: str) -> str:
    """The torchrun/Isaac Lab spelling of spec field ``name`` (``--nproc_per_node``), not ``--help``'s."""
    return "--" + name


_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]|[^:\[\]\s]+)(?::(?P<port>[^:]*))?$")
_BACKEND_NAME = re.compile(r"^[A-Za-z][\w.-]*$", re.ASCII)
_STD_SPEC = re.compile(r"^([0-3]|\d+:[0-3](,\d+:[0-3])*)$", re.ASCII)


def split_host_port(value: str, option: str, *, port_required: bool) -> tuple[str, int | None]:
    """Split ``host[:port]`` (IPv6 in brackets), raising a UsageError naming ``option``."""
    m = _HOST_PORT.match(value)
    if not m or not _HOST.match(m.group("host")):
        need = "host:port" if port_required else "host[:port]"
        raise UsageError(f"{option} {value!r} is malformed; give it as {need}, e.g. node01:29500")
    port = m.group("port")
    if port is None:
        if port_required:
            raise UsageError(f"{option} {value!r} has no port; give it as host:port, e.g. {value}:5000")
        return m.group("host"), None
    return m.group("host"), check_port(port, option)


def split_endpoint(endpoint: str) -> tuple[str, str | None]:
    """``host:digits`` as ``(host, port)`` (brackets kept), else ``(endpoint, None)``; never refuses."""
    head, _, tail = endpoint.rpartition(":")
    return (head, tail) if head and tail.isdigit() else (endpoint, None)


def check_port(value: object, option: str) -> int:
    """Return ``value`` as a TCP port, or raise a UsageError naming ``option``."""
    text = str(value).strip()
    port = int(text) if INTEGER.match(text) else -1
    if not 1 <= port <= 65535:
        raise UsageError(f"{option} {value} is not a port; use a number from 1 to 65535")
    return port


def node_counts(nnodes: str | None) -> tuple[int, int]:
    """``(MIN, MAX)`` of ``--nnodes N`` (``(N, N)``) or torchrun's ``MIN:MAX``; ``(1, 1)`` when unset."""
    if nnodes is None:
        return 1, 1
    parts = nnodes.split(":")
    counts = [int(p) for p in parts] if all(INTEGER.match(p.strip()) for p in parts) else []
    if not counts or len(parts) > 2 or min(counts) < 1 or counts != sorted(counts):
        raise UsageError(f"--nnodes {nnodes!r} must be a positive integer (or MIN:MAX)")
    if counts[-1] > MAX_NODES:
        raise UsageError(f"--nnodes {nnodes}: no cluster has that many nodes; give at most {MAX_NODES}")
    return counts[0], counts[-1]


def parse_nproc(value: str) -> int | str:
    """Return the rank count as an int, or one of torchrun's tokens gpu/cpu/auto."""
    text = value.strip().lower()
    if text in NPROC_TOKENS:
        return text
    if not INTEGER.match(text):
        raise UsageError(
            f"--num_gpus {value!r} is not a rank count; use a positive integer or gpu, cpu, auto"
        )
    n = int(text)
    if n < 1:
        raise UsageError(f"--num_gpus {value!r} must be at least 1")
    if n > MAX_RANKS_PER_NODE:
        raise UsageError(
            f"--num_gpus {value}: no machine runs that many ranks on one node; give at most "
            f"{MAX_RANKS_PER_NODE} (ranks per node, not in all: --nnodes multiplies them)"
        )
    return n


def parse_gpu_ids(value: str) -> tuple[str, ...]:
    """Split ``--gpu_ids 0,2`` into its entries; raise on a malformed or repeated one."""
    # CUDA_VISIBLE_DEVICES' notation, read strictly: an entry CUDA would stop at is an error here.
    ids: list[str] = []
    for raw in str(value).split(","):
        item = raw.strip()
        index = index_entry(item)
        if index is None and not GPU_UUID.match(item):
            raise UsageError(
                f"--gpu_ids {value!r}: {item!r} is neither a GPU index nor a GPU-/MIG- UUID; "
                "use e.g. --gpu_ids 0,2 (nvidia-smi -L lists the UUIDs)"
            )
        item = index or item
        if item in ids:
            raise UsageError(f"--gpu_ids {value!r}: {item} is listed twice; list each GPU once")
        ids.append(item)
    return tuple(ids)


def check_host(value: str, option: str) -> str:
    """Return ``value`` when it is a host name or address, or raise a UsageError naming ``option``."""
    if not value.strip():
        raise UsageError(f"{option} is empty; give the host name or address of node 0, e.g. node01")
    if not _HOST.match(value):
        raise UsageError(
            f"{option} {value!r} is not a host name or address; use e.g. node01, 10.0.0.1 or [fe80::1]"
        )
    return value


def _stall_seconds(text: str, flag: str) -> float | str:
    if text.strip().lower() == AUTO:
        return AUTO
    return number(float, "a valid number of seconds or auto")(text, flag)


def _seconds(value: Any, flag: str) -> None:
    if value != AUTO and not (isinstance(value, float | int) and value >= 0):
        shown = f"{value:g}" if isinstance(value, float | int) else repr(value)
        raise UsageError(f"{flag} {shown} must be 0 (off) or a number of seconds")


def _rdzv_backend(value: str, flag: str) -> None:
    # torchrun also accepts backends registered by plugins, so only the shape is checked.
    if not _BACKEND_NAME.match(value):
        raise UsageError(
            f"{flag} {value!r} is not a backend name; use one of {', '.join(RDZV_BACKENDS)} or a "
            "registered plugin's name"
        )


def _streams(value: str, flag: str) -> None:
    if not _STD_SPEC.match(value):
        raise UsageError(
            f"{flag} {value!r} is not a stream spec; use 0 (none), 1 (stdout), 2 (stderr), 3 (both), "
            "or per local rank like 0:3,1:1"
        )


def _local_ranks(value: str, flag: str) -> None:
    if not local_ranks(value) or min(local_ranks(value)) < 0:
        raise UsageError(f"{flag} {value!r} is not a list of local ranks; use e.g. 0 or 0,1")


def local_ranks(value: str) -> list[int]:
    """The ranks of ``--local_ranks_filter`` (``[]`` when it is malformed)."""
    parts = value.split(",")
    return [int(r) for r in parts] if all(INTEGER.match(r.strip()) for r in parts) else []


def _gpu_ids(ids: tuple[str, ...], flag: str) -> None:
    shown = ",".join(ids)
    if not ids:
        raise UsageError(f"{flag} is empty; list the GPUs to use, e.g. --gpu_ids 0,2")
    if len(ids) > MAX_RANKS_PER_NODE:
        raise UsageError(
            f"{flag} names {len(ids)} GPUs: no machine has that many; list at most {MAX_RANKS_PER_NODE}"
        )
    if tuple(parse_gpu_ids(shown)) != tuple(ids):
        raise UsageError(f"{flag} {shown!r} is malformed; use e.g. --gpu_ids 0,2")


def signal_name(value: str) -> str:
    """A ``--requeue_signal`` value as :data:`REQUEUE_SIGNALS` spells it: ``sigusr1`` -> ``USR1``."""
    return value.upper().removeprefix("SIG")


def _requeue_signal(value: str, flag: str) -> None:
    if signal_name(value) not in REQUEUE_SIGNALS:
        raise UsageError(
            f"{flag} {value!r} is not a warning signal; use one of {', '.join(REQUEUE_SIGNALS)} "
            "(the one #SBATCH --signal names)"
        )


def _fault(value: str, flag: str) -> None:
    try:
        faults.parse(value)
    except ValueError as exc:
        raise UsageError(f"{flag} {value!r} {exc}") from None


def _positive(value: float, flag: str) -> None:
    if not value > 0:
        raise UsageError(f"{flag} {value} must be a positive number of seconds")


@dataclass(frozen=True)
class LaunchSpec:
    """A validated request to launch ``nproc_per_node`` ranks on each of ``nnodes`` nodes."""

    training_args: tuple[str, ...] = ()
    """Arguments for the worker, forwarded verbatim and in order (incl. ``key=value`` presets)."""

    command_line: tuple[str, ...] = ()
    """The command line as typed after ``mgpu`` (empty when built in code), for the line that resumes it."""

    nproc_per_node: str | None = option(
        help="Ranks per node (also --nproc_per_node). Default: every visible GPU; 1 with --device cpu. "
        "gpu: one per visible GPU. cpu, auto: torchrun's meaning, one rank per CPU core, each still "
        "on a GPU unless --device cpu.",
        flag="num_gpus", aliases=("nproc_per_node",), metavar="N|gpu|cpu|auto", panel=LAUNCH,
        check=lambda value, _: parse_nproc(value),
    )  # fmt: skip
    gpu_ids: tuple[str, ...] | None = option(
        help="GPUs to run on: indices or UUIDs, e.g. 0,2 (within CUDA_VISIBLE_DEVICES when set).",
        names=("--gpus",), metavar="IDS", panel=LAUNCH, parse=lambda text, _: parse_gpu_ids(text),
        check=_gpu_ids,
    )  # fmt: skip
    rl_library: str | None = option(
        help="rsl_rl (default), skrl or rl_games.", panel=LAUNCH, choices=("rsl_rl", "skrl", "rl_games")
    )
    ml_framework: str | None = option(
        help="torch (default) or jax, for skrl.", panel=LAUNCH, choices=("torch", "jax")
    )
    device: Literal["cuda", "cpu"] = option(
        "cuda", "cuda: a GPU per rank, NCCL. cpu: CPU ranks, gloo.", panel=LAUNCH, choices=("cuda", "cpu")
    )
    oversubscribe_cpu: bool = option(
        False,
        f"--device cpu: allow more than {CPU_RANKS_PER_CORE} ranks per CPU (train refuses them).",
        panel=LAUNCH,
    )
    script: str | None = option(help="Run this training script.", panel=PROGRAM, metavar="PATH")
    module: str | None = option(
        help="Run this Python module.", names=("-m",), panel=PROGRAM, metavar="MODULE"
    )
    inject_distributed: bool | None = option(
        help="Append --distributed (built-in worker: default).", panel=PROGRAM,
        off=("no_inject_distributed", "Never append --distributed."),
    )  # fmt: skip
    nnodes: str | None = option(
        help="Nodes: N or MIN:MAX.", panel=TORCHRUN, check=lambda value, _: node_counts(value)
    )
    node_rank: int | None = option(
        help="This node's rank.", panel=TORCHRUN,
        parse=number(int, "an integer; node ranks run from 0 to nnodes-1"),
        check=at_least(0, "must be 0 or more"),
    )  # fmt: skip
    coordinator_address: str | None = option(
        help="JAX coordinator host:port (skrl JAX).", panel=TORCHRUN,
        check=lambda value, flag: split_host_port(value, flag, port_required=True),
    )  # fmt: skip
    master_addr: str | None = option(help="Rank-0 node address.", panel=TORCHRUN, check=check_host)
    master_port: int | None = option(
        help="Rank-0 node port.", panel=TORCHRUN, parse=check_port,
        check=check_port,
    )  # fmt: skip
    rdzv_backend: str | None = option(
        help="static, c10d, etcd or etcd-v2.", panel=TORCHRUN, check=_rdzv_backend
    )
    rdzv_endpoint: str | None = option(
        help="Rendezvous host[:port].", panel=TORCHRUN,
        check=lambda value, flag: split_host_port(value, flag, port_required=False),
    )  # fmt: skip
    rdzv_id: str | None = option(help="Rendezvous id of the job.", panel=TORCHRUN)
    max_restarts: int | None = option(
        help="Restarts after a failed or hung attempt, each resuming from the run's newest checkpoint in "
        "the same run folder (mgpu's own; torchrun gets none).",
        panel=RESTARTS, parse=number(int, "an integer count of restarts"),
        check=at_least(0, "must be 0 or more"),
    )  # fmt: skip
    monitor_interval: float | None = option(
        help="Seconds between worker checks.", panel=TORCHRUN,
        parse=number(float, "a number of seconds"), check=_positive,
    )  # fmt: skip
    start_method: str | None = option(
        help="spawn, fork or forkserver.", panel=TORCHRUN, choices=("spawn", "fork", "forkserver")
    )
    role: str | None = option(help="Worker role name.", panel=TORCHRUN)
    virtual_local_rank: bool = option(False, "Every worker sees LOCAL_RANK=0.", panel=TORCHRUN)
    tee: str | None = option(
        help="Streams to console and files: 0-3 or rank:v,...", panel=LOGS, check=_streams
    )
    redirects: str | None = option(
        help="Streams to files only: 0-3 or rank:v,...", panel=LOGS, check=_streams
    )
    local_ranks_filter: str | None = option(
        help="Local ranks shown on the console (default 0).", panel=LOGS, check=_local_ranks
    )
    log_dir: str | None = option(help="Per-rank log folder (default logs/mgpu).", panel=LOGS)
    log_all_ranks: bool = option(False, "Show every rank on the console.", panel=LOGS)

    stall_timeout: float | str = option(
        AUTO,
        "Seconds a rank may make no training progress before mgpu dumps every rank's stack, names the "
        "stalled rank and stops the run (exit 4). auto (the default): 20x the run's median steady "
        "iteration, at least 30 s (900 s, or --startup_timeout if more, until the first steady "
        "iterations and while a checkpoint is written). 0: off.",
        panel=STALLS, metavar="SECONDS|auto", parse=_stall_seconds, check=_seconds, commands=LAUNCHING,
    )  # fmt: skip
    startup_timeout: float = option(
        900.0,
        "Seconds this node's ranks may report no start-up progress (rendezvous, process group, "
        "environments, first broadcast) before the launch counts as hung. 0: off.",
        panel=STALLS, metavar="SECONDS", check=_seconds, commands=LAUNCHING,
    )  # fmt: skip
    stall_on_silence: bool = option(
        False,
        "For a --script/-m program that reports no progress: count a rank as stalled after "
        "--stall_timeout seconds without output.",
        panel=STALLS, commands=LAUNCHING,
    )  # fmt: skip

    requeue: bool = option(
        False,
        "SLURM: after the requeue signal's checkpoint, node 0 runs scontrol requeue $SLURM_JOB_ID and "
        "mgpu exits 75. dry-run --emit sbatch --requeue also writes #SBATCH --requeue and "
        "--open-mode=append.",
        panel=RESTARTS, commands=RUNNING,
    )  # fmt: skip
    keep_checkpoints: int | None = option(
        help="Keep only the newest N checkpoints of the run (the built-in worker's model_<N>.pt, Isaac "
        "Lab's rsl-rl model_<N>.pt, skrl agent_<N>.pt, rl-games nn/last_*.pth); older ones are deleted "
        "once a new one is whole on disk. Default: keep all.",
        panel=RESTARTS, metavar="N", commands=RUNNING,
        parse=number(int, "an integer count of checkpoints (1 or more)"),
        check=at_least(
            1, "keeps nothing to resume from; give 1 or more (leave it out to keep every checkpoint)"
        ),
    )  # fmt: skip
    min_nodes: int | None = option(
        help="Shrink instead of stop: when a node is lost and restarts remain, the other nodes restart "
        "from the newest checkpoint on fewer nodes, down to N (also --nnodes MIN:MAX).",
        panel=RESTARTS, metavar="N", commands=RUNNING, parse=number(int, "an integer count of nodes"),
        check=at_least(1, "must be 1 or more"),
    )  # fmt: skip
    shrink_keep: str = option(
        "total",
        "What a shrink keeps: total (the run's environment count; each rank's --num_envs raised) or "
        "per_rank (each rank's count as it was).",
        panel=RESTARTS, metavar="total|per_rank", commands=RUNNING, choices=SHRINK_KEEPS,
    )  # fmt: skip
    requeue_signal: str = option(
        "USR1",
        "The signal that asks the ranks to checkpoint at the next iteration and stop (SLURM: #SBATCH "
        "--signal=USR1@90).",
        panel=RESTARTS, metavar="SIGNAL", commands=RUNNING, check=_requeue_signal,
    )  # fmt: skip
    simulate_fault: str | None = option(
        help="Rehearse a failure: KIND@ITERATION[,rank=R] with KIND kill (the rank SIGKILLs itself), hang "
        "(it freezes) or requeue (its mgpu gets the requeue signal), in the first attempt, so "
        "--max_restarts, --stall_timeout and --requeue prove themselves.",
        panel=RESTARTS, metavar="KIND@IT[,rank=R]", commands=RUNNING, check=_fault,
    )  # fmt: skip

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_options(cls, training_args: tuple[str, ...], **options: object) -> LaunchSpec:
        """Build a spec from command-line values (text is read by each option's parser)."""
        return from_text(cls, training_args=tuple(training_args), **options)

    @property
    def library(self) -> str:
        """The RL library, with the default applied."""
        return self.rl_library or "rsl_rl"

    @property
    def framework(self) -> str:
        """The ML framework, with the default applied."""
        return self.ml_framework or "torch"

    @property
    def uses_jax(self) -> bool:
        """True when the launch follows skrl's JAX contract instead of torchrun."""
        return self.framework == "jax"

    @property
    def builtin_worker(self) -> bool:
        """True when the packaged worker (not a user script or module) runs in each rank."""
        return self.script is None and self.module is None

    @functools.cached_property
    def worker(self) -> WorkerArgs | None:
        """The built-in worker's own parse of the training arguments; None for a program or refused ones."""
        if not self.builtin_worker:
            return None
        head = ["--rl_library", self.library, "--ml_framework", self.framework]
        try:
            return worker_args.parse([*head, *self.training_args], add_help=False)
        except worker_args.WorkerArgsError:
            return None

    @property
    def task(self) -> str:
        """The built-in worker's task (its default when none is given or the program is the user's)."""
        return self.worker.task if self.worker is not None else DEFAULT_TASK

    @property
    def isaac_task(self) -> bool:
        """True when the built-in worker trains an Isaac Lab task."""
        return self.worker is not None and worker_args.is_isaac_task(self.worker.task)

    @property
    def run_name(self) -> str | None:
        """The built-in worker's ``--run_name``, or None."""
        return self.worker.run_name if self.worker is not None else None

    @property
    def log_root(self) -> str:
        """The built-in worker's ``--log_root`` (its default when not given)."""
        return self.worker.log_root if self.worker is not None else DEFAULT_LOG_ROOT

    @property
    def logger(self) -> str | None:
        """The built-in worker's ``--logger`` (``tensorboard`` unless given), or None."""
        return self.worker.logger if self.worker is not None else None

    @property
    def requeue_signum(self) -> int:
        """``requeue_signal`` as a signal number."""
        import signal

        return int(signal.Signals["SIG" + signal_name(self.requeue_signal)])

    @property
    def run_timestamp(self) -> str | None:
        """The built-in worker's ``--run_timestamp`` as given (it becomes the run's stamp), or None."""
        return self.worker.run_timestamp if self.worker is not None else None

    @property
    def nnodes_max(self) -> int:
        """The largest node count ``nnodes`` allows (1 when unset)."""
        return node_counts(self.nnodes)[1]

    @property
    def node_floor(self) -> int | None:
        """The fewest nodes a shrink may leave (``--min_nodes``, or MIN of ``--nnodes MIN:MAX``), or None."""
        low, high = node_counts(self.nnodes)
        floor = self.min_nodes if self.min_nodes is not None else (low if low < high else None)
        return floor if floor is not None and floor < high else None


_FIELDS = {f.name: f for f in dataclasses.fields(LaunchSpec)}


def coerce_option(name: str, value: str) -> object:
    """``value`` as typed on the command line, converted to what spec field ``name`` holds."""
    return parse_one(_FIELDS[name], value)


def _validate(s: LaunchSpec) -> None:
    """Each option on its own, then the combinations that cannot apply to the chosen launch path."""
    check_options(s)
    if s.ml_framework is not None and s.library != "skrl" and s.builtin_worker:
        raise UsageError(f"--ml_framework {s.ml_framework} applies to skrl only; add --rl_library skrl")
    if s.script is not None and s.module is not None:
        raise UsageError("--script and -m/--module both given; choose one")

    nproc = parse_nproc(s.nproc_per_node) if s.nproc_per_node is not None else None
    if s.uses_jax and isinstance(nproc, str):
        raise UsageError(
            f"--num_gpus {s.nproc_per_node!r}: skrl JAX needs an integer rank count, e.g. --num_gpus 2"
        )
    if s.oversubscribe_cpu and s.device != "cpu":
        raise UsageError("--oversubscribe_cpu applies to CPU ranks (--device cpu); a CUDA rank needs a GPU")
    if s.device == "cpu" and nproc == "gpu":
        raise UsageError("--num_gpus gpu with --device cpu; give the number of CPU ranks, e.g. 2")
    if s.gpu_ids is not None and s.device == "cpu":
        raise UsageError("--gpu_ids selects GPUs, but --device cpu runs CPU ranks; drop one of them")
    if s.gpu_ids is not None and isinstance(nproc, int) and nproc != len(s.gpu_ids):
        raise UsageError(
            f"--num_gpus {nproc} but --gpu_ids {','.join(s.gpu_ids)} names {len(s.gpu_ids)} GPU(s); one "
            "rank runs per GPU, so leave out --num_gpus (it defaults to the number of ids)"
        )

    if s.min_nodes is not None:
        low, high = node_counts(s.nnodes)
        if s.min_nodes > high:
            raise UsageError(f"--min_nodes {s.min_nodes} must be from 1 to --nnodes {s.nnodes or 1}")
        if low < high and s.min_nodes != low:
            raise UsageError(
                f"--min_nodes {s.min_nodes} and --nnodes {s.nnodes} disagree on the fewest nodes; "
                f"give one of them (--nnodes {high} --min_nodes {s.min_nodes}, "
                f"or --nnodes {s.min_nodes}:{high})"
            )
        if s.uses_jax:
            raise UsageError("--min_nodes: skrl JAX needs a fixed node count")
    if s.uses_jax and s.nnodes is not None and ":" in s.nnodes:
        raise UsageError(f"--nnodes {s.nnodes!r}: skrl JAX needs a fixed node count")
    if s.node_rank is not None and s.node_rank >= s.nnodes_max:
        raise UsageError(
            f"--node_rank {s.node_rank} is not below --nnodes {s.nnodes or 1}; "
            f"node ranks run from 0 to {s.nnodes_max - 1}"
        )
    if s.uses_jax:
        for name in TORCHRUN_ONLY:
            if getattr(s, name) not in (None, False):
                raise UsageError(
                    f"{spelling(name)} is a torchrun option and does not apply to skrl JAX; "
                    "use --coordinator_address host:port to set the JAX rendezvous"
                )
    elif s.coordinator_address is not None:
        raise UsageError(
            "--coordinator_address applies to skrl JAX only; add --rl_library skrl --ml_framework "
            "jax, or use --master_addr/--rdzv_endpoint for torchrun"
        )

    if s.stall_on_silence and not s.stall_timeout:
        raise UsageError("--stall_on_silence needs a --stall_timeout above 0")
    if s.keep_checkpoints is not None and not s.builtin_worker:
        raise UsageError(
            "--keep_checkpoints applies to the built-in worker and Isaac Lab tasks; a --script/-m "
            "program saves (and keeps) its own checkpoints"
        )
    if s.simulate_fault is not None:
        fault = faults.parse(s.simulate_fault)
        if not s.builtin_worker:
            raise UsageError(
                "--simulate_fault needs mgpu's worker (a --script/-m program reports no iterations)"
            )
        if fault.kind == "drift" and s.worker is not None and s.worker.drift_interval == 0:
            raise UsageError("--simulate_fault drift with --drift_interval 0: no check would ever see it")
        if fault.kind == "hang" and not s.stall_timeout:
            raise UsageError(
                "--simulate_fault hang with --stall_timeout 0: nothing would ever end the frozen rank; "
                "give --stall_timeout SECONDS"
            )
    if s.local_ranks_filter is not None:
        ranks = local_ranks(s.local_ranks_filter)
        if isinstance(nproc, int) and max(ranks) >= nproc:
            raise UsageError(
                f"--local_ranks_filter {s.local_ranks_filter!r} names local rank {max(ranks)}, but only "
                f"{nproc} ranks run per node"
            )
        if s.log_all_ranks:
            raise UsageError("--local_ranks_filter and --log_all_ranks both given; choose one")


#: Options mgpu reads itself and also forwards to a ``--script``/``-m`` program (both spellings).
FORWARDED_OPTIONS = ("--rl_library", "--rl-library", "--ml_framework", "--ml-framework")
_PROGRAM_OPTIONS = ("-m", "--module", "--script")


def in_user_order(argv: Sequence[str], training_args: Sequence[str], program: str) -> tuple[str, ...]:
    """``training_args`` with the forwarded options put back where ``argv`` shows them after ``program``."""
    # The option parser took --rl_library X out of the passthrough tokens; a program with
    # sub-commands (-m isaaclab train --rl_library rsl_rl) needs it after its sub-command.
    for i, tok in enumerate(argv):
        if tok in _PROGRAM_OPTIONS and i + 1 < len(argv) and argv[i + 1] == program:
            start = i + 2
            break
        if tok in (f"-m{program}", f"--module={program}", f"--script={program}"):
            start = i + 1
            break
    else:
        return tuple(training_args)  # the builder puts the options right after the program
    out: list[str] = []
    rest = list(training_args)
    tail = list(argv[start:])
    i = 0
    while i < len(tail) and tail[i] != "--":
        tok = tail[i]
        if tok in FORWARDED_OPTIONS and i + 1 < len(tail):
            out += tail[i : i + 2]
            i += 2
            continue
        if tok.split("=", 1)[0] in FORWARDED_OPTIONS and "=" in tok:
            out.append(tok)
        elif rest and tok == rest[0]:
            out.append(rest.pop(0))
        i += 1
    return (*out, *rest)
