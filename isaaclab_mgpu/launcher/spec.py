"""The typed launch specification: what the user asked for, validated, and nothing more.

``LaunchSpec`` is built once from the command line (``cli``) or from code, is frozen, and is the
only input of :func:`isaaclab_mgpu.launcher.resolve.resolve`. Every field that mirrors an Isaac Lab
``train_multigpu`` / torchrun option is ``None`` when the user did not set it, so the builder can
forward exactly the options that were given, as Isaac Lab does.

Validation here is static (ranges, choices, formats, combinations that cannot apply to the chosen
launch path). Anything that needs to look at the machine (visible GPUs, ports, files, SLURM)
belongs to ``resolve``. Every failure raises :class:`~isaaclab_mgpu.contract.errors.UsageError` with one
line naming the value and the fix.

Shapes every value must have, whatever its option: no control character in any text (a newline in
``--log_dir`` or ``--master_addr`` is a typo, never a name); numbers in ASCII digits (Python's
``int`` also reads full-width and Arabic-Indic ones, torchrun would get them verbatim); host names
non-empty and made of the characters a host name or address has; at most
:data:`MAX_RANKS_PER_NODE` ranks per node and :data:`MAX_NODES` nodes. For the built-in worker,
``--run_name`` and ``--experiment_name`` name one folder inside the log root: no ``/``, and never
``.`` or ``..``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Literal

from isaaclab_mgpu.contract import faults, worker_args
from isaaclab_mgpu.contract.devices import GPU_UUID, index_entry
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.layout import DEFAULT_LOG_ROOT, DEFAULT_TASK
from isaaclab_mgpu.contract.progress import AUTO
from isaaclab_mgpu.contract.text import has_control
from isaaclab_mgpu.contract.worker_args import WorkerArgs

RL_LIBRARIES = ("rsl_rl", "skrl", "rl_games")
ML_FRAMEWORKS = ("torch", "jax")
DEVICES = ("cuda", "cpu")
NPROC_TOKENS = ("gpu", "cpu", "auto")
RDZV_BACKENDS = ("static", "c10d", "etcd", "etcd-v2")
START_METHODS = ("spawn", "fork", "forkserver")

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
#: What a shrink keeps (``--shrink_keep``): the run's environment count, or each rank's.
SHRINK_KEEPS = ("total", "per_rank")
#: Signals ``--requeue_signal`` may name (SLURM's ``--signal`` warning; never a stop signal).
REQUEUE_SIGNALS = ("USR1", "USR2", "XCPU", "PWR")

Device = Literal["cuda", "cpu"]

#: More ranks on one node than any machine has GPUs or cores for: refused as a typo.
MAX_RANKS_PER_NODE = 1024
#: More nodes than any cluster has: refused as a typo too.
MAX_NODES = 65536

#: An integer as typed in ASCII digits (``int`` alone also reads full-width digits and ``1_0``).
_INT = re.compile(r"^[+-]?[0-9]+$")
#: A host name, IPv4 address, or IPv6 address (bare, or in brackets, with a zone).
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+(%[\w.-]+)?\]|[\w.:-]+(%[\w.-]+)?)$", re.ASCII)


def spelling(name: str) -> str:
    """Return the command-line spelling of a spec field (Isaac Lab's underscore form)."""
    return "--" + name


@dataclass(frozen=True)
class LaunchSpec:
    """A validated request to launch ``nproc_per_node`` ranks on each of ``nnodes`` nodes."""

    training_args: tuple[str, ...] = ()
    """Arguments for the worker, forwarded verbatim and in order (incl. ``key=value`` presets)."""

    command_line: tuple[str, ...] = ()
    """The command line as typed after ``mgpu`` (empty when built in code): what an interrupted run
    prints, with ``--resume`` of its folder, as the line that continues it."""

    rl_library: str | None = None
    """``rsl_rl``, ``skrl`` or ``rl_games`` (Isaac Lab tasks); ``None`` means rsl_rl (Isaac Lab's default)."""

    ml_framework: str | None = None
    """``torch`` or ``jax`` (skrl only); ``jax`` selects skrl's JAX launch contract."""

    device: Device = "cuda"
    """``cuda``: one GPU per rank, NCCL. ``cpu``: CPU ranks with gloo, no GPU needed."""

    nproc_per_node: str | None = None
    """Ranks per node: a positive integer or torchrun's ``gpu``/``cpu``/``auto``; ``None`` = default."""

    nnodes: str | None = None
    """Number of nodes, ``N`` or torchrun's elastic ``MIN:MAX``."""

    node_rank: int | None = None
    """This node's rank among ``nnodes`` (0-based)."""

    coordinator_address: str | None = None
    """JAX coordinator ``host:port`` (skrl JAX only)."""

    master_addr: str | None = None
    """torchrun ``--master_addr``: address of the rank-0 node (static rendezvous)."""

    master_port: int | None = None
    """torchrun ``--master_port``: port of the rank-0 node's store (static rendezvous)."""

    rdzv_backend: str | None = None
    """torchrun rendezvous backend: static, c10d, etcd or etcd-v2."""

    rdzv_endpoint: str | None = None
    """torchrun rendezvous endpoint ``host[:port]``."""

    rdzv_id: str | None = None
    """torchrun rendezvous id shared by every node of one job."""

    max_restarts: int | None = None
    """Restarts after a failed or hung attempt, each resuming from the run's newest checkpoint
    (mgpu's own restarts: the launcher itself gets none)."""

    min_nodes: int | None = None
    """Shrink instead of stop: when a node is lost and restarts remain, the others restart on fewer
    nodes, down to this many (also ``--nnodes MIN:MAX``'s MIN; :mod:`~isaaclab_mgpu.launcher.shrink`)."""

    shrink_keep: str = "total"
    """What a shrink keeps: ``total`` (the run's environment count: each rank's ``--num_envs``
    raised) or ``per_rank`` (each rank's count as it was)."""

    monitor_interval: float | None = None
    """torchrun ``--monitor_interval`` in seconds."""

    start_method: str | None = None
    """torchrun ``--start_method``: spawn, fork or forkserver."""

    role: str | None = None
    """torchrun ``--role`` name shown in log prefixes."""

    tee: str | None = None
    """torchrun ``--tee``: 0-3 or ``rank:value,...``; copy streams to console and log files."""

    redirects: str | None = None
    """torchrun ``--redirects``: 0-3 or ``rank:value,...``; send streams to log files only."""

    local_ranks_filter: str | None = None
    """Comma-separated local ranks whose output reaches the console."""

    log_dir: str | None = None
    """Folder for per-rank log files."""

    log_all_ranks: bool = False
    """Show every rank on the console instead of local rank 0 only."""

    virtual_local_rank: bool = False
    """torchrun ``--virtual_local_rank``: every worker sees LOCAL_RANK=0."""

    script: str | None = None
    """Run this torchrun-style training script instead of the built-in worker."""

    module: str | None = None
    """Run this Python module (``-m``) instead of the built-in worker."""

    inject_distributed: bool | None = None
    """Append ``--distributed`` to the worker arguments; default: only for the built-in worker."""

    gpu_ids: tuple[str, ...] | None = None
    """GPUs for this node's ranks (``--gpu_ids 0,2``): indices or ``GPU-``/``MIG-`` UUIDs. Indices
    count within an existing ``CUDA_VISIBLE_DEVICES``, as CUDA's device numbers do."""

    stall_timeout: float | str = AUTO
    """Seconds a training rank may go without reporting progress before the run counts as hung (0:
    off), or ``auto``: a bound that follows the run's steady iteration times
    (:data:`~isaaclab_mgpu.contract.progress.AUTO_FACTOR` times their median, at least
    :data:`~isaaclab_mgpu.contract.progress.AUTO_FLOOR_S`; see :mod:`.supervise.stall`)."""

    startup_timeout: float = 900.0
    """Seconds the ranks of a node may go without any start-up progress (rendezvous, process group,
    environments, first broadcast) before the launch counts as hung (0: off)."""

    stall_on_silence: bool = False
    """Also count a rank that reports no progress (a user script) as stalled after
    ``stall_timeout`` seconds without output."""

    oversubscribe_cpu: bool = False
    """Let ``train`` start more CPU ranks than :data:`~isaaclab_mgpu.launcher.resolve.CPU_RANKS_PER_CORE`
    per core (``--device cpu``); without it such a count is refused as a typo."""

    requeue: bool = False
    """SLURM: after the requeue signal's checkpoint, node 0 runs ``scontrol requeue`` and mgpu exits 75."""

    requeue_signal: str = "USR1"
    """The signal (without ``SIG``) that asks the ranks to checkpoint at the next iteration and stop."""

    simulate_fault: str | None = None
    """A fault the run meets for real, ``KIND@ITERATION[,rank=R]`` (kill, hang, requeue; see
    :mod:`isaaclab_mgpu.contract.faults`), to rehearse restarts, the stall watch and requeues."""

    keep_checkpoints: int | None = None
    """Rank 0 keeps the newest N checkpoints of the run, deleting older ones once a new one is whole
    (built-in worker and Isaac Lab tasks; None: keep all, as the libraries do)."""

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_options(cls, training_args: tuple[str, ...], **options: object) -> LaunchSpec:
        """Build a spec from command-line values (numbers may still be strings)."""
        typed = {name: _coerce(name, value) for name, value in options.items()}
        return cls(training_args=tuple(training_args), **typed)

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
        """The built-in worker's own reading of the training arguments: its parser, run as every
        rank will run it. None for a ``--script``/``-m`` program, or for arguments the parser
        refuses (:func:`isaaclab_mgpu.launcher.forwarded.check_training_args` says why, before
        anything is spawned)."""
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

        return int(signal.Signals["SIG" + self.requeue_signal.upper().removeprefix("SIG")])

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
        """The fewest nodes a shrink may leave (``--min_nodes``, or ``--nnodes MIN:MAX``'s MIN below
        MAX); None: a lost node stops the run."""
        low, high = node_counts(self.nnodes)
        floor = self.min_nodes if self.min_nodes is not None else (low if low < high else None)
        return floor if floor is not None and floor < high else None


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


def check_port(value: object, option: str) -> int:
    """Return ``value`` as a TCP port, or raise a UsageError naming ``option``."""
    text = str(value).strip()
    port = int(text) if _INT.match(text) else -1
    if not 1 <= port <= 65535:
        raise UsageError(f"{option} {value} is not a port; use a number from 1 to 65535")
    return port


def node_counts(nnodes: str | None) -> tuple[int, int]:
    """``(MIN, MAX)`` of ``--nnodes N`` (``(N, N)``) or torchrun's ``MIN:MAX``; ``(1, 1)`` when unset.

    The one reader of the ``nnodes`` notation; raises a UsageError when it is malformed.
    """
    if nnodes is None:
        return 1, 1
    parts = nnodes.split(":")
    counts = [int(p) for p in parts] if all(_INT.match(p.strip()) for p in parts) else []
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
    if not _INT.match(text):
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
    """Split ``--gpu_ids 0,2`` into its entries; raise on a malformed or repeated one.

    The notation is CUDA_VISIBLE_DEVICES' (:mod:`isaaclab_mgpu.contract.devices`), but an option
    is read strictly: an entry CUDA would stop at is an error here, not the end of the list.
    """
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


def _number(kind: type, what: str) -> Callable[[str, object], object]:
    def convert(name: str, value: object) -> object:
        text = str(value).strip()
        try:
            if not text.isascii() or (kind is int and not _INT.match(text)):
                raise ValueError(text)
            return kind(text)
        except ValueError:
            raise UsageError(f"{spelling(name)} {value!r} is not {what}") from None

    return convert


_COERCE: dict[str, Callable[[str, object], object]] = {
    "master_port": lambda name, value: check_port(value, spelling(name)),
    "node_rank": _number(int, "an integer; node ranks run from 0 to nnodes-1"),
    "max_restarts": _number(int, "an integer count of restarts"),
    "min_nodes": _number(int, "an integer count of nodes"),
    "keep_checkpoints": _number(int, "an integer count of checkpoints (1 or more)"),
    "monitor_interval": _number(float, "a number of seconds"),
    "gpu_ids": lambda name, value: parse_gpu_ids(str(value)),
    "stall_timeout": lambda name, value: (
        AUTO
        if str(value).strip().lower() == AUTO
        else _number(float, "a number of seconds (0: off) or auto")(name, value)
    ),
    "startup_timeout": _number(float, "a number of seconds (0: off)"),
}


def _coerce(name: str, value: object) -> object:
    if value is None or name not in _COERCE or not isinstance(value, str):
        return value
    return _COERCE[name](name, value)


def coerce_option(name: str, value: str) -> object:
    """``value`` as typed on the command line, converted to what spec field ``name`` holds."""
    return _coerce(name, value)


def _validate(s: LaunchSpec) -> None:
    _validate_text(s)
    if s.rl_library is not None and s.rl_library not in RL_LIBRARIES:
        raise UsageError(f"--rl_library {s.rl_library!r} is not supported; choose rsl_rl, skrl or rl_games")
    if s.ml_framework is not None and s.ml_framework not in ML_FRAMEWORKS:
        raise UsageError(f"--ml_framework {s.ml_framework!r} is unknown; choose torch or jax")
    if s.ml_framework is not None and s.library != "skrl" and s.builtin_worker:
        raise UsageError(f"--ml_framework {s.ml_framework} applies to skrl only; add --rl_library skrl")
    if s.device not in DEVICES:
        raise UsageError(f"--device {s.device!r} is unknown; choose cuda or cpu")
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
    if s.gpu_ids is not None:
        _validate_gpu_ids(s, nproc)

    _validate_nodes(s)

    if s.uses_jax:
        for name in TORCHRUN_ONLY:
            value = getattr(s, name)
            if value not in (None, False):
                raise UsageError(
                    f"{spelling(name)} is a torchrun option and does not apply to skrl JAX; "
                    "use --coordinator_address host:port to set the JAX rendezvous"
                )
        if s.coordinator_address is not None:
            split_host_port(s.coordinator_address, "--coordinator_address", port_required=True)
    elif s.coordinator_address is not None:
        raise UsageError(
            "--coordinator_address applies to skrl JAX only; add --rl_library skrl --ml_framework "
            "jax, or use --master_addr/--rdzv_endpoint for torchrun"
        )

    for name in ("stall_timeout", "startup_timeout"):
        value = getattr(s, name)
        if name == "stall_timeout" and value == AUTO:
            continue
        if isinstance(value, str) or not 0 <= value < float("inf"):
            shown = f"{value:g}" if isinstance(value, float | int) else repr(value)
            raise UsageError(f"{spelling(name)} {shown} must be 0 (off) or a number of seconds")
    if s.stall_on_silence and not s.stall_timeout:
        raise UsageError("--stall_on_silence needs a --stall_timeout above 0")

    if s.master_addr is not None:
        check_host(s.master_addr, "--master_addr")
    if s.master_port is not None:
        check_port(s.master_port, "--master_port")
    if s.rdzv_endpoint is not None:
        split_host_port(s.rdzv_endpoint, "--rdzv_endpoint", port_required=False)
    if s.rdzv_backend is not None and not _BACKEND_NAME.match(s.rdzv_backend):
        # torchrun also accepts backends registered by plugins, so only the shape is checked.
        raise UsageError(
            f"--rdzv_backend {s.rdzv_backend!r} is not a backend name; use one of "
            f"{', '.join(RDZV_BACKENDS)} or a registered plugin's name"
        )
    if s.start_method is not None and s.start_method not in START_METHODS:
        raise UsageError(f"--start_method {s.start_method!r} is unknown; choose spawn, fork or forkserver")
    if s.max_restarts is not None and s.max_restarts < 0:
        raise UsageError(f"--max_restarts {s.max_restarts} must be 0 or more")
    if s.keep_checkpoints is not None and s.keep_checkpoints < 1:
        raise UsageError(
            f"--keep_checkpoints {s.keep_checkpoints} keeps nothing to resume from; give 1 or more "
            "(leave it out to keep every checkpoint)"
        )
    if s.keep_checkpoints is not None and not s.builtin_worker:
        raise UsageError(
            "--keep_checkpoints applies to the built-in worker and Isaac Lab tasks; a --script/-m "
            "program saves (and keeps) its own checkpoints"
        )
    if s.requeue_signal.upper().removeprefix("SIG") not in REQUEUE_SIGNALS:
        raise UsageError(
            f"--requeue_signal {s.requeue_signal!r} is not a warning signal; use one of "
            f"{', '.join(REQUEUE_SIGNALS)} (the one #SBATCH --signal names)"
        )
    if s.simulate_fault is not None:
        _validate_fault(s)
    if s.monitor_interval is not None and not s.monitor_interval > 0:
        raise UsageError(f"--monitor_interval {s.monitor_interval} must be a positive number of seconds")
    for name in ("tee", "redirects"):
        value = getattr(s, name)
        if value is not None and not _STD_SPEC.match(value):
            raise UsageError(
                f"--{name} {value!r} is not a stream spec; use 0 (none), 1 (stdout), 2 (stderr), "
                "3 (both), or per local rank like 0:3,1:1"
            )
    if s.local_ranks_filter is not None:
        _validate_ranks_filter(s.local_ranks_filter, nproc)
        if s.log_all_ranks:
            raise UsageError("--local_ranks_filter and --log_all_ranks both given; choose one")


def check_host(value: str, option: str) -> str:
    """Return ``value`` when it is a host name or address, or raise a UsageError naming ``option``."""
    if not value.strip():
        raise UsageError(f"{option} is empty; give the host name or address of node 0, e.g. node01")
    if not _HOST.match(value):
        raise UsageError(
            f"{option} {value!r} is not a host name or address; use e.g. node01, 10.0.0.1 or [fe80::1]"
        )
    return value


def _validate_fault(s: LaunchSpec) -> None:
    try:
        fault = faults.parse(s.simulate_fault or "")
    except ValueError as exc:
        raise UsageError(f"--simulate_fault {s.simulate_fault!r} {exc}") from None
    if not s.builtin_worker:
        raise UsageError("--simulate_fault needs mgpu's worker (a --script/-m program reports no iterations)")
    if fault.kind == "drift" and s.isaac_task:
        raise UsageError(
            "--simulate_fault drift needs an embedded task: Isaac Lab tasks train on Isaac Lab's own "
            "code path, which has no drift check"
        )
    if fault.kind == "drift" and s.worker is not None and s.worker.drift_interval == 0:
        raise UsageError("--simulate_fault drift with --drift_interval 0: no check would ever see it")
    if fault.kind == "hang" and not s.stall_timeout:
        raise UsageError(
            "--simulate_fault hang with --stall_timeout 0: nothing would ever end the frozen rank; "
            "give --stall_timeout SECONDS"
        )


def _validate_text(s: LaunchSpec) -> None:
    """No option's text holds a control character; the worker's folder names stay one folder."""
    for f in fields(s):
        value = getattr(s, f.name)
        if f.name == "command_line":
            continue  # the typed line itself: each option's value is checked where it lands
        values = value if isinstance(value, tuple) and f.name != "training_args" else (value,)
        for v in values:
            if isinstance(v, str) and has_control(v):
                raise UsageError(
                    f"{spelling(f.name)} {v!r} holds a control character (a pasted newline?); "
                    "retype the value on one line"
                )
    # The worker's own arguments (--log_root, --run_name, --task with rl_games, --logger) are its
    # parser's to judge: isaaclab_mgpu.launcher.forwarded runs it before anything is spawned.


def _validate_gpu_ids(s: LaunchSpec, nproc: int | str | None) -> None:
    ids = s.gpu_ids or ()
    shown = ",".join(ids)
    if not ids:
        raise UsageError("--gpu_ids is empty; list the GPUs to use, e.g. --gpu_ids 0,2")
    if len(ids) > MAX_RANKS_PER_NODE:
        raise UsageError(
            f"--gpu_ids names {len(ids)} GPUs: no machine has that many; list at most {MAX_RANKS_PER_NODE}"
        )
    if tuple(parse_gpu_ids(shown)) != tuple(ids):
        raise UsageError(f"--gpu_ids {shown!r} is malformed; use e.g. --gpu_ids 0,2")
    if s.device == "cpu":
        raise UsageError("--gpu_ids selects GPUs, but --device cpu runs CPU ranks; drop one of them")
    if isinstance(nproc, int) and nproc != len(ids):
        raise UsageError(
            f"--num_gpus {nproc} but --gpu_ids {shown} names {len(ids)} GPU(s); one rank runs per "
            "GPU, so leave out --num_gpus (it defaults to the number of ids)"
        )


def _validate_nodes(s: LaunchSpec) -> None:
    low, high = node_counts(s.nnodes)
    if s.min_nodes is not None:
        if s.min_nodes < 1 or s.min_nodes > high:
            raise UsageError(f"--min_nodes {s.min_nodes} must be from 1 to --nnodes {s.nnodes or 1}")
        if low < high and s.min_nodes != low:
            raise UsageError(
                f"--min_nodes {s.min_nodes} and --nnodes {s.nnodes} disagree on the fewest nodes; "
                f"give one of them (--nnodes {high} --min_nodes {s.min_nodes}, "
                f"or --nnodes {s.min_nodes}:{high})"
            )
        if s.uses_jax:
            raise UsageError("--min_nodes: skrl JAX needs a fixed node count")
    if s.shrink_keep not in SHRINK_KEEPS:
        raise UsageError(f"--shrink_keep {s.shrink_keep!r} is not one of {', '.join(SHRINK_KEEPS)}")
    if s.uses_jax and s.nnodes is not None and ":" in s.nnodes:
        raise UsageError(f"--nnodes {s.nnodes!r}: skrl JAX needs a fixed node count")
    if s.node_rank is not None:
        if s.node_rank < 0:
            raise UsageError(f"--node_rank {s.node_rank} must be 0 or more")
        if s.node_rank >= s.nnodes_max:
            raise UsageError(
                f"--node_rank {s.node_rank} is not below --nnodes {s.nnodes or 1}; "
                f"node ranks run from 0 to {s.nnodes_max - 1}"
            )


def _validate_ranks_filter(value: str, nproc: int | str | None) -> None:
    parts = value.split(",")
    ranks = [int(r) for r in parts] if all(_INT.match(r.strip()) for r in parts) else [-1]
    if not ranks or min(ranks) < 0:
        raise UsageError(f"--local_ranks_filter {value!r} is not a list of local ranks; use e.g. 0 or 0,1")
    if isinstance(nproc, int) and max(ranks) >= nproc:
        raise UsageError(
            f"--local_ranks_filter {value!r} names local rank {max(ranks)}, but only "
            f"{nproc} ranks run per node"
        )


#: Options mgpu reads itself and also forwards to a ``--script``/``-m`` program (both spellings).
FORWARDED_OPTIONS = ("--rl_library", "--rl-library", "--ml_framework", "--ml-framework")
_PROGRAM_OPTIONS = ("-m", "--module", "--script")


def in_user_order(argv: Sequence[str], training_args: Sequence[str], program: str) -> tuple[str, ...]:
    """``training_args`` with the forwarded options put back where the user typed them.

    ``argv`` is the command line as typed; ``program`` the ``--script``/``-m`` value. The option
    parser takes ``--rl_library X`` out of the passthrough tokens; a program with sub-commands
    (``-m isaaclab train --rl_library rsl_rl``) needs it after its sub-command, exactly where the
    user wrote it. Options written before the program, or an argv that does not show the program,
    leave ``training_args`` as they are (the builder then puts the options right after it).
    """
    start = None
    for i, tok in enumerate(argv):
        if tok in _PROGRAM_OPTIONS and i + 1 < len(argv) and argv[i + 1] == program:
            start = i + 2
        elif tok in (f"-m{program}", f"--module={program}", f"--script={program}"):
            start = i + 1
        if start is not None:
            break
    if start is None:
        return tuple(training_args)
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
