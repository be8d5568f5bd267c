"""Pure command builders: a :class:`ResolvedSpec` in, a :class:`Command` (argv + env) out.

No I/O, no ``os.environ``, no clock: the same resolved spec always gives the same command, which
is what ``dry-run`` prints and ``train`` execs.

torchrun path (rsl-rl, skrl with torch, any ``--script``/``-m``)::

    PYTHON -m torch.distributed.run --nproc_per_node N [--standalone] [launcher options in Isaac
        Lab's order, incl. --tee 3 --log_dir DIR] --local_ranks_filter 0 [--virtual_local_rank]
        (-m isaaclab_mgpu.worker --rl_library LIB [--ml_framework F] [--device cpu] | SCRIPT | -m MOD)
        TRAINING ARGS... --distributed

skrl JAX path: the same shape through :mod:`isaaclab_mgpu.jaxrun` (:mod:`.jaxrun`)::

    PYTHON -m isaaclab_mgpu.jaxrun --nproc_per_node N [--nnodes M --node_rank R]
        --coordinator_address HOST:PORT --tee 3 --log_dir DIR --local_ranks_filter 0 WORKER...

Differences from Isaac Lab's launcher, on purpose: docs/migration.md, "What changes on purpose"
(``--max_restarts`` is not passed on: mgpu restarts each attempt itself, :mod:`.attempts`). In the
per-rank logs' ``<log root>/<run name>/<launch>/attempt_<k>/`` (:mod:`.logspecs`, :func:`run_name`),
``<launch>`` is the resolved ``log_launch``, else the run stamp, so a dry-run creates nothing; the
command says attempt 0, :func:`for_attempt` gives it for a later attempt. The ``--rdzv_id`` mgpu
gives (a one-node SLURM job: its job id) is the same on every node: the static rendezvous prefixes
its store keys with it.

Where the environment sets a ``PET_<FLAG>`` the command leaves out, the command states torchrun's
own default for it (why: :mod:`.cluster`).
"""

from __future__ import annotations

import dataclasses
import os.path
import re
import shlex
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from isaaclab_mgpu.contract import elastic, faults
from isaaclab_mgpu.contract import env as env_names
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.progress import AUTO
from isaaclab_mgpu.contract.text import UNPRINTABLE, escaped, printable
from isaaclab_mgpu.launcher.cluster import DEFAULT_MASTER_PORT, TORCHRUN_DEFAULTS
from isaaclab_mgpu.launcher.resolve import ResolvedSpec
from isaaclab_mgpu.launcher.spec import TORCHRUN_OPTIONS, LaunchSpec, signal_name, split_endpoint

WORKER_MODULE = "isaaclab_mgpu.worker"
#: torchrun's port for a c10d endpoint given without one.
C10D_PORT = 29400
JAXRUN_MODULE = "isaaclab_mgpu.jaxrun"
DEFAULT_LOG_DIR = "logs/mgpu"
#: torchrun's ``--logs_specs``: mgpu's per-rank layout (the ``torchrun.logs_specs`` entry point).
LOGS_SPECS = "mgpu"
#: Set for the launch when ``--gpu_ids`` selected GPUs.
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Command:
    """A launch ready to exec: the argv, the environment it adds, and what it will start."""

    argv: tuple[str, ...]
    """The full command line, starting with the Python interpreter."""

    env: Mapping[str, str]
    """Variables the launch adds to the inherited environment."""

    world_size: int | None
    """Total ranks across all nodes, when known."""

    rank_devices: Mapping[int, str]
    """Global rank → device for the ranks started on this node."""

    launcher: str
    """``torchrun`` or ``jaxrun``."""

    log_dir: str
    """This attempt's ``--log_dir``: ``<log root>/<run name>/<launch>/attempt_<k>``."""

    rendezvous: Rendezvous | None = None
    """The store the nodes of a multi-node torchrun launch share (None: one node, or skrl JAX)."""

    @property
    def line(self) -> str:
        """The exact command as one shell line (:func:`shell_join`), after the GPU selection."""
        line = shell_join(self.argv)
        gpus = self.env.get(CUDA_VISIBLE_DEVICES)
        return line if gpus is None else f"{CUDA_VISIBLE_DEVICES}={shell_quote(gpus)} {line}"


def shell_quote(word: str) -> str:
    """``shlex.quote``, but a word with an unprintable character becomes bash's ``$'…'``, escaped."""
    # So the line stays one line, never sends a raw ESC to a terminal, and still runs as printed.
    if printable(word) == word:
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif unicodedata.category(ch) not in UNPRINTABLE:
            out.append(ch)
        elif 0x80 <= ord(ch) < 0x100:  # bash reads \xHH as one byte; a C1 control is \u0085
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(escaped(ch))
    return "$'" + "".join(out) + "'"


def shell_join(argv: tuple[str, ...] | list[str]) -> str:
    """The words of ``argv`` as one shell line (:func:`shell_quote` each)."""
    return " ".join(shell_quote(w) for w in argv)


@dataclass(frozen=True)
class Rendezvous:
    """Where the nodes of one torchrun launch meet: the store torchrun serves, and this node's place."""

    host: str
    """The store's host (``--master_addr``, or the ``--rdzv_endpoint`` host)."""

    port: int
    """The store's port (``--master_port`` or 29500; the endpoint's port or c10d's 29400)."""

    id: str
    """The rendezvous id every node passes (``--rdzv_id``)."""

    node_rank: int | None
    """This node's rank, when known (c10d assigns it otherwise)."""

    nnodes: int
    """The largest node count of the launch."""

    static: bool
    """The static rendezvous: node 0's torchrun serves the store."""


def build(r: ResolvedSpec) -> Command:
    """Build the command for ``r``: torchrun, or jaxrun for skrl JAX."""
    s = r.spec
    opts = _launcher_options(r)
    if s.uses_jax:
        head = [r.python, "-m", JAXRUN_MODULE, "--nproc_per_node", str(r.nproc)]
        head += _flags(opts, ("nnodes", "node_rank"))
        host, port = r.coordinator or ("127.0.0.1", 0)
        head += ["--coordinator_address", f"{host}:{port}"]
        head += _flags(opts, ("tee", "local_ranks_filter", "log_dir"))
        head += _default_filter(s)
        launcher = "jaxrun"
    else:
        head = [r.python, "-m", "torch.distributed.run", "--nproc_per_node", str(r.nproc)]
        if r.standalone:
            head.append("--standalone")
        head += _flags(opts, TORCHRUN_OPTIONS)
        # Each rank's files go straight into the attempt folder, named by its global rank
        # (isaaclab_mgpu.launcher.logspecs, registered as a torchrun.logs_specs entry point).
        head += ["--logs_specs", LOGS_SPECS]
        head += _default_filter(s)
        if s.virtual_local_rank:
            head.append("--virtual_local_rank")
        launcher = "torchrun"

    argv = [*head, *worker_tail(s)]
    # Every rank reads the stall bounds (isaaclab_mgpu.progress): its process group's timeout follows.
    env = {
        env_names.RUN_STAMP: r.run_stamp,
        env_names.STALL_TIMEOUT: s.stall_timeout if s.stall_timeout == AUTO else _arg(float(s.stall_timeout)),
        env_names.STARTUP_TIMEOUT: _arg(float(s.startup_timeout)),
        **dict(r.extra_env),
    }
    if r.cuda_visible_devices is not None:
        env[CUDA_VISIBLE_DEVICES] = r.cuda_visible_devices
    if r.omp_num_threads is not None:
        env["OMP_NUM_THREADS"] = r.omp_num_threads
    if s.simulate_fault is not None:
        fault = faults.parse(s.simulate_fault)
        if r.world_size is not None and fault.target(r.world_size) >= r.world_size:
            raise UsageError(
                f"--simulate_fault {s.simulate_fault}: rank {fault.rank} is not in this run of "
                f"{r.world_size} ranks; choose a rank from 0 to {r.world_size - 1}"
            )
        env[env_names.SIMULATE_FAULT] = fault.text()
        env[env_names.REQUEUE_SIGNAL] = signal_name(s.requeue_signal)
    if s.keep_checkpoints is not None:
        env[env_names.KEEP_CHECKPOINTS] = str(s.keep_checkpoints)
    return Command(
        argv=tuple(argv),
        env=env,
        world_size=r.world_size,
        rank_devices=_rank_devices(r),
        launcher=launcher,
        log_dir=str(opts["log_dir"]),
        rendezvous=None if s.uses_jax else _meeting(r, opts),
    )


def for_attempt(cmd: Command, number: int) -> Command:
    """``cmd`` for mgpu's attempt ``number``: its launcher logs into ``.../attempt_<number>``."""
    argv = list(cmd.argv)
    at = argv.index("--log_dir") + 1 if "--log_dir" in argv else None
    if at is None or at >= len(argv) or argv[at] != cmd.log_dir:
        return cmd  # not a command of this builder's: nothing to rename
    launch = os.path.dirname(cmd.log_dir)  # <log root>/<run name>/<launch>
    root, name = os.path.split(launch)
    log_dir = elastic.attempt_log_dir(os.path.dirname(root), os.path.basename(root), name, number)
    argv[at] = log_dir
    return dataclasses.replace(cmd, argv=tuple(argv), log_dir=log_dir)


def log_root(r: ResolvedSpec) -> str:
    """The per-rank logs' root: ``--log_dir``, else ``logs/mgpu``."""
    return r.spec.log_dir or DEFAULT_LOG_DIR


def run_name(r: ResolvedSpec) -> str:
    """The run's log folder name: library and task (or the program), ``_<run_name>`` when given."""
    # No clock, so dry-run prints the same line for the same spec; one folder: only ._+- kept.
    s = r.spec
    if s.builtin_worker:
        what = f"{s.library}_{s.task}"
    else:
        what = os.path.splitext(os.path.basename(s.script or ""))[0] or (s.module or "run").rsplit(".", 1)[-1]
    given = s.run_name
    name = f"{what}_{given}" if given else what
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip(".") or "run"


def _meeting(r: ResolvedSpec, opts: dict[str, object]) -> Rendezvous | None:
    if r.standalone or r.nnodes_max <= 1:
        return None
    static = opts.get("rdzv_backend") in (None, "static") and not opts.get("rdzv_endpoint")
    if static:
        host, port = r.spec.master_addr or "127.0.0.1", r.spec.master_port or DEFAULT_MASTER_PORT
    else:
        host, given = split_endpoint(str(opts["rdzv_endpoint"]))
        port = int(given or C10D_PORT)
    return Rendezvous(host.strip("[]"), port, str(opts["rdzv_id"]), r.node_rank, r.nnodes_max, static)


def worker_tail(s: LaunchSpec) -> list[str]:
    """The per-rank program and its arguments, ``--distributed`` last where it applies."""
    if s.script is not None:
        tail = [s.script]
    elif s.module is not None:
        tail = ["-m", s.module]
    else:
        tail = ["-m", WORKER_MODULE, "--rl_library", s.library]
        if s.library == "skrl":
            tail += ["--ml_framework", s.framework]
        if s.device == "cpu":
            tail += ["--device", "cpu"]
    if not s.builtin_worker:
        # Where the user wrote them after the program, the CLI left them in place (spec.in_user_order).
        if s.rl_library is not None and not _given(s.training_args, "--rl_library", "--rl-library"):
            tail += ["--rl_library", s.rl_library]
        if s.ml_framework is not None and not _given(s.training_args, "--ml_framework", "--ml-framework"):
            tail += ["--ml_framework", s.ml_framework]
    tail += list(s.training_args)
    inject = s.builtin_worker if s.inject_distributed is None else s.inject_distributed
    if inject and "--distributed" not in s.training_args:
        tail.append("--distributed")
    return tail


def _launcher_options(r: ResolvedSpec) -> dict[str, object]:
    s = r.spec
    opts: dict[str, object] = {
        name: getattr(s, name) for name in TORCHRUN_OPTIONS if getattr(s, name) is not None
    }
    opts.update(
        nnodes=r.nnodes,
        node_rank=r.node_rank,
        rdzv_endpoint=r.rdzv_endpoint,
    )
    opts["log_dir"] = elastic.attempt_log_dir(log_root(r), run_name(r), r.log_launch or r.run_stamp, 0)
    multi_node = r.nnodes_max > 1
    if s.rdzv_id is None and multi_node and not s.uses_jax:
        opts["rdzv_id"] = _rendezvous_id(r)
    elif s.rdzv_id is None and not r.standalone and not s.uses_jax:
        # torchrun's default id, "none", would be every rank's TORCHELASTIC_RUN_ID: a one-node
        # SLURM job on a fixed port (the emitted script's) is named by its job id, any other
        # launch on a fixed port by its address.
        opts["rdzv_id"] = r.slurm_job_id or _rendezvous_id(r)
    if s.tee is None and s.redirects is None:
        opts["tee"] = "3"
    if not s.uses_jax:
        opts.update(_environment_pins(r, opts))
    return opts


def _environment_pins(r: ResolvedSpec, opts: dict[str, object]) -> dict[str, str]:
    """torchrun's own default for each flag it would otherwise read from ``PET_<FLAG>``."""
    # Only where it matters: --standalone sets the rendezvous backend, endpoint and id itself,
    # and only the static rendezvous reads the master address, port and node rank.
    static = not r.standalone and opts.get("rdzv_backend") in (None, "static")
    pins = {}
    for flag, default in TORCHRUN_DEFAULTS:
        if flag not in r.torchrun_env or opts.get(flag) is not None:
            continue
        if r.standalone and flag in ("rdzv_backend", "rdzv_endpoint", "rdzv_id"):
            continue
        if not static and flag in ("master_addr", "master_port", "node_rank"):
            continue
        if flag == "local_ranks_filter" and _default_filter(r.spec):
            continue
        pins[flag] = default
    return pins


def _rendezvous_id(r: ResolvedSpec) -> str:
    """``mgpu_<host>_<port>`` of the rendezvous: the same on every node of the launch."""
    s = r.spec
    host, port = s.master_addr or "127.0.0.1", str(s.master_port or DEFAULT_MASTER_PORT)
    if r.rdzv_endpoint:
        host, given = split_endpoint(r.rdzv_endpoint)
        port = given or port
    host = re.sub(r"[^A-Za-z0-9.-]+", "-", host.strip("[]"))
    return f"mgpu_{host}_{port}"


def _given(args: tuple[str, ...], *names: str) -> bool:
    """True when one of ``names`` is among ``args`` (``--name value`` or ``--name=value``)."""
    return any(a.split("=", 1)[0] in names for a in args)


def _flags(opts: dict[str, object], names: tuple[str, ...]) -> list[str]:
    """``--name value`` for each of ``names`` that ``opts`` sets, in that order."""
    words: list[str] = []
    for name in names:
        if opts.get(name) is not None:
            words += [f"--{name}", _arg(opts[name])]
    return words


def _default_filter(s: LaunchSpec) -> list[str]:
    # Isaac Lab's launcher appends its console filter after every forwarded option.
    shown = s.local_ranks_filter is not None or s.log_all_ranks
    return [] if shown else ["--local_ranks_filter", "0"]


def _arg(value: object) -> str:
    # Numbers as the user would type them: --monitor_interval 5, not 5.0.
    return format(value, "g") if isinstance(value, float) else str(value)


def _rank_devices(r: ResolvedSpec) -> dict[int, str]:
    if not isinstance(r.nproc, int):
        return {}
    first = (r.node_rank or 0) * r.nproc
    return {first + i: "cpu" if r.spec.device == "cpu" else f"cuda:{i}" for i in range(r.nproc)}
