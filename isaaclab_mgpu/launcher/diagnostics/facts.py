"""Facts about this machine and the planned launch, gathered once, judged by :mod:`.rules`.

:func:`collect` is the only impure part of ``check-env``: package metadata (never importing the
packages), NVML (:mod:`isaaclab_mgpu.launcher.nvml`), limits, ``/dev/shm``, environment variables,
probes of the launch (port, host names, TCP to the master address) and the command planned with
``train``'s core (``pipeline.prepare(strict=False)``), all into frozen dataclasses a test can write.

Without ``--deep`` this finishes well under a second: name lookups run in a daemon thread with a
deadline (a broken resolver cannot hang the command) and the TCP probe has a short timeout.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import resource
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract.errors import MgpuError
from isaaclab_mgpu.launcher import workarounds
from isaaclab_mgpu.launcher.diagnostics.deep import DeepFacts, collect_deep
from isaaclab_mgpu.launcher.nvml import GpuFacts, gpu_facts
from isaaclab_mgpu.launcher.spec import LaunchSpec, split_host_port

#: Distributions whose versions are reported (``nvidia-nccl-*`` and ``jax-cuda*`` are found by prefix).
PACKAGES = ("torch", "rsl-rl-lib", "skrl", "jax", "jaxlib", "warp-lang", "isaaclab", "tensordict")
_PREFIXES = ("nvidia-nccl-", "jax-cuda")
#: SLURM variables worth showing; resolve fills the launch from the first five.
SLURM_VARS = (
    "SLURM_JOB_ID",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_JOB_NODELIST",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_LOCALID",
    "SLURM_GPUS_ON_NODE",
)
#: How long a name lookup or the TCP probe may take before it counts as failed.
NET_TIMEOUT = 1.0
UNLIMITED = -1


@dataclass(frozen=True)
class Package:
    """An installed distribution, read from its metadata (never imported)."""

    name: str
    """Distribution name as installed."""

    version: str | None
    """Version, or None when not installed."""

    cuda: str | None = None
    """CUDA version the build targets, when the package says (torch ``version.py``, plugin name)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits and shared memory of this process."""

    shm_bytes: int | None
    """Size of ``/dev/shm`` in bytes (None: not mounted)."""

    memlock_soft: int
    """``ulimit -l`` in bytes, ``UNLIMITED`` (-1) when unlimited."""

    memlock_hard: int
    """Hard memlock limit in bytes, -1 when unlimited."""

    nofile_soft: int
    """Open-files soft limit (``ulimit -n``), -1 when unlimited."""

    nofile_hard: int
    """Open-files hard limit, -1 when unlimited."""

    cpu_count: int
    """CPUs this process may run on (its affinity mask)."""

    omp_num_threads: str | None
    """``OMP_NUM_THREADS`` as set, or None."""


@dataclass(frozen=True)
class Plan:
    """The launch ``train`` would make with the given options, and what it depends on."""

    device: str
    """``cuda`` or ``cpu``."""

    launcher: str
    """``torchrun`` or ``jaxrun``."""

    library: str
    """RL library (with defaults applied)."""

    framework: str
    """ML framework (with defaults applied)."""

    builtin_worker: bool
    """True when the packaged worker runs (so the RL library must be installed)."""

    nproc: int | None
    """Ranks on this node, when known."""

    world_size: int | None
    """Ranks across all nodes, when known."""

    nnodes: int
    """Nodes (the maximum of an elastic range)."""

    node_rank: int
    """This node's rank (0 when unset)."""

    command: str | None
    """The exact command line, or None when it could not be built."""

    argv: tuple[str, ...] = ()
    """The command's argv."""

    error: str | None = None
    """Why the command could not be built (the error ``train`` would stop with)."""

    warnings: tuple[str, ...] = ()
    """Problems resolve tolerated because it was not strict."""

    filled: tuple[str, ...] = ()
    """Values filled from the environment (SLURM)."""

    visible_entries: tuple[str, ...] = ()
    """GPUs the launch would use (indices or UUIDs as CUDA_VISIBLE_DEVICES names them)."""


@dataclass(frozen=True)
class Endpoint:
    """A host:port the launch will use, and what probing it showed."""

    role: str
    """``master``, ``rdzv_endpoint`` or ``coordinator``."""

    host: str
    """Host as given."""

    port: int | None
    """Port as given or defaulted."""

    local: bool
    """True when this host is where the endpoint must be served (node rank 0 / a local address)."""

    port_free: bool | None = None
    """For a local endpoint: whether the port can be bound now."""

    resolves: bool | None = None
    """Whether the host name resolves."""

    address: str | None = None
    """What it resolved to."""

    reachable: str | None = None
    """TCP probe from a non-zero node rank: ``open``, ``refused``, ``timeout`` or ``unreachable``."""


@dataclass(frozen=True)
class NetFacts:
    """This host's name and the rendezvous endpoints of the launch."""

    hostname: str
    """``socket.gethostname()``."""

    hostname_address: str | None
    """What the host name resolves to, or None."""

    hostname_error: str | None
    """Why it did not resolve."""

    endpoints: tuple[Endpoint, ...] = ()
    """The rendezvous endpoints the options name."""


@dataclass(frozen=True)
class DiskFacts:
    """The file system the run writes its checkpoints to (the built-in worker's ``--log_root``)."""

    log_root: str
    """The log root as given (``logs`` by default; Isaac Lab tasks always ``logs``)."""

    mount: str
    """Mount point of the file system holding it (or its nearest existing folder)."""

    free_bytes: int | None
    """Bytes this user may still write there (None: unknown)."""

    resume_checkpoint: str | None = None
    """On a resume of a built-in worker's run: the checkpoint it continues from, when known."""

    checkpoint_bytes: int | None = None
    """That checkpoint's size in bytes."""


@dataclass(frozen=True)
class Facts:
    """Everything ``check-env`` judges; produced by :func:`collect`, judged by :mod:`.rules`."""

    python_version: str
    """``MAJOR.MINOR.PATCH`` of this interpreter."""

    python_executable: str
    """Path of this interpreter (the one that starts the launcher)."""

    packages: tuple[Package, ...]
    """Installed versions of the packages a launch may use."""

    gpu: GpuFacts
    """NVML view of GPUs, driver and topology."""

    cuda_visible_devices: str | None
    """``CUDA_VISIBLE_DEVICES`` as set, or None."""

    cuda_device_order: str | None
    """``CUDA_DEVICE_ORDER`` as set, or None."""

    nccl_env: tuple[tuple[str, str], ...]
    """``NCCL_*`` and ``TORCH_NCCL_*`` settings set, sorted; image labels excluded (:func:`nccl_env`)."""

    saved_workarounds: tuple[tuple[str, str], ...]
    """Workarounds saved for this machine (``train`` applies them)."""

    workaround_store: str
    """Path of the saved-workaround store."""

    machine_key: str
    """Key of this machine in that store."""

    limits: Limits
    """Shared memory and resource limits."""

    slurm: tuple[tuple[str, str], ...]
    """SLURM variables set, in :data:`SLURM_VARS` order."""

    net: NetFacts
    """Host name and rendezvous endpoints."""

    plan: Plan
    """The launch that ``train`` would make."""

    deep: DeepFacts | None = None
    """Facts that need torch or jax, gathered in subprocesses, when ``--deep`` was asked for."""

    env_labels: tuple[tuple[str, str], ...] = ()
    """Image labels that look like NCCL settings (``NCCL_VERSION``), sorted: read by nothing."""

    ignored_workarounds: tuple[str, ...] = ()
    """Why parts of the workaround store are not applied (unreadable, or not what mgpu saves)."""

    disk: DiskFacts | None = None
    """Free space where the run writes (the built-in worker and Isaac Lab tasks; None: a user script)."""


def nccl_env(environ: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The ``NCCL_*``/``TORCH_NCCL_*`` settings in ``environ``, and the image labels among them."""
    named = sorted((k, v) for k, v in environ.items() if k.startswith(("NCCL_", "TORCH_NCCL_")))
    # An image labels itself with NCCL_VERSION; no NCCL parameter names a version, so a name ending
    # in _VERSION is a label, not a setting.
    settings = tuple((k, v) for k, v in named if not k.endswith("_VERSION"))
    labels = tuple((k, v) for k, v in named if k.endswith("_VERSION"))
    return settings, labels


def collect(spec: LaunchSpec, *, deep: bool = False, resolved: object | None = None) -> Facts:
    """Gather every fact ``check-env`` judges for launching ``spec`` from this machine."""
    env = dict(os.environ)
    gpu = gpu_facts()
    hostname = socket.gethostname()
    store = workarounds.store_path(env)
    key = workarounds.machine_key(hostname, tuple(g.name for g in gpu.gpus))
    saved = workarounds.saved_for(store, key)
    plan = plan_launch(spec, env, resolved)
    settings, labels = nccl_env(env)
    return Facts(
        python_version=".".join(str(v) for v in sys.version_info[:3]),
        python_executable=sys.executable,
        packages=installed_packages(),
        gpu=gpu,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        cuda_device_order=env.get("CUDA_DEVICE_ORDER"),
        nccl_env=settings,
        saved_workarounds=tuple(sorted(saved.variables.items())),
        ignored_workarounds=saved.ignored,
        workaround_store=str(store),
        machine_key=key,
        limits=limits(env),
        slurm=tuple((k, env[k]) for k in SLURM_VARS if k in env),
        net=net_facts(spec, plan, hostname),
        plan=plan,
        deep=collect_deep(env) if deep else None,
        env_labels=labels,
        disk=disk_facts(spec),
    )


def disk_facts(spec: LaunchSpec) -> DiskFacts | None:
    """Free space on the log root's file system and, on a resume, the size of what it continues."""
    if not spec.builtin_worker:
        return None
    from isaaclab_mgpu.contract import layout, space

    isaac = spec.isaac_task
    root = layout.DEFAULT_LOG_ROOT if isaac else spec.log_root
    checkpoint = None
    if not isaac:
        with contextlib.suppress(MgpuError, SystemExit, OSError, ValueError):
            checkpoint = _resumed_checkpoint(spec)
    size = None
    if checkpoint is not None:
        with contextlib.suppress(OSError):
            size = checkpoint.stat().st_size
    return DiskFacts(
        log_root=root,
        mount=str(space.mount_point(root)),
        free_bytes=space.free_bytes(root),
        resume_checkpoint=str(checkpoint) if checkpoint is not None else None,
        checkpoint_bytes=size,
    )


def _resumed_checkpoint(spec: LaunchSpec) -> Path | None:
    """The checkpoint a built-in worker's ``--resume`` (a path, ``auto`` or bare) would continue from."""
    from isaaclab_mgpu.contract import resume
    from isaaclab_mgpu.launcher.continuation import identity_of, unfinished_run

    ident, given = identity_of(spec)
    if not given:
        return None
    path: Path | None = Path(given)
    if given in (resume.AUTO, resume.LATEST):
        experiment = Path(ident.log_root) / ident.library / ident.experiment
        path = unfinished_run(resume.own_run_folders(experiment, Path(ident.log_root)), ident)
    if path is None:
        return None
    return resume.newest_whole(path).checkpoint if path.is_dir() else path if path.is_file() else None


def installed_packages() -> tuple[Package, ...]:
    """Versions of :data:`PACKAGES` and NCCL / jax CUDA plugin wheels, from metadata only."""
    found = _dist_info_versions()
    out = []
    for name in PACKAGES:
        cuda = _torch_cuda() if name == "torch" and name in found else None
        out.append(Package(name, found.get(name), cuda))
    for name in sorted(found):
        if name.startswith(_PREFIXES):
            m = re.search(r"cuda(\d+)|cu(\d+)$", name)
            cuda = (m.group(1) or m.group(2)) if m else None
            out.append(Package(name, found[name], cuda))
    return tuple(out)


def _dist_info_versions() -> dict[str, str]:
    """Installed distributions by normalised name, from ``NAME-VERSION.dist-info`` folder names."""
    # Reading every METADATA file costs ~0.1 s per start; the folder names say the same.
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if not folder.endswith(".dist-info"):
                continue
            name, sep, version = folder[: -len(".dist-info")].partition("-")
            if sep:
                found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), version)
    return found


def _torch_cuda() -> str | None:
    """torch's CUDA build version read from ``torch/version.py`` without importing torch."""
    with contextlib.suppress(Exception):
        spec = importlib.util.find_spec("torch")
        if spec and spec.submodule_search_locations:
            text = Path(next(iter(spec.submodule_search_locations)), "version.py").read_text()
            m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
            return m.group(1) if m else "none"
    return None


def _limit(which: int) -> tuple[int, int]:
    soft, hard = (UNLIMITED if v == resource.RLIM_INFINITY else int(v) for v in resource.getrlimit(which))
    return soft, hard


def limits(environ: Mapping[str, str]) -> Limits:
    """Shared memory size, memlock and open-files limits, usable CPUs, OMP_NUM_THREADS."""
    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_frsize * st.f_blocks
    except OSError:
        shm = None
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    memlock, nofile = _limit(resource.RLIMIT_MEMLOCK), _limit(resource.RLIMIT_NOFILE)
    return Limits(shm, *memlock, *nofile, cpus, environ.get("OMP_NUM_THREADS"))


def plan_launch(spec: LaunchSpec, environ: Mapping[str, str], resolved: object | None = None) -> Plan:
    """Resolve and build ``spec`` with the launch core (not strict) and describe the result."""
    from isaaclab_mgpu.launcher.build import build
    from isaaclab_mgpu.launcher.pipeline import prepare
    from isaaclab_mgpu.launcher.resolve import ResolvedSpec

    base = dict(
        device=spec.device,
        launcher="jaxrun" if spec.uses_jax else "torchrun",
        library=spec.library,
        framework=spec.framework,
        builtin_worker=spec.builtin_worker,
        nnodes=spec.nnodes_max,
        node_rank=spec.node_rank or 0,
    )
    try:
        if isinstance(resolved, ResolvedSpec):
            r, cmd = resolved, build(resolved)
        else:
            r, cmd = prepare(spec, strict=False, environ=environ)
    except MgpuError as exc:
        return Plan(**base, nproc=None, world_size=None, command=None, error=str(exc))
    return Plan(
        **{**base, "nnodes": r.nnodes_max, "node_rank": r.node_rank or 0},
        nproc=r.nproc if isinstance(r.nproc, int) else None,
        world_size=r.world_size,
        command=cmd.line,
        argv=tuple(cmd.argv),
        warnings=tuple(r.warnings),
        filled=tuple(r.filled),
        visible_entries=tuple(r.visible.entries),
    )


def lookup(host: str, timeout: float = NET_TIMEOUT) -> tuple[str | None, str | None]:
    """Resolve ``host`` to an IPv4/IPv6 address within ``timeout``: (address, error)."""
    answer: list[tuple[str | None, str | None]] = []

    def resolve() -> None:
        # In a daemon thread, given up after ``timeout``: a hung resolver must not hang us.
        try:
            found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            answer.append((str(found[0][4][0]), None) if found else (None, "no address"))
        except Exception as exc:
            answer.append((None, f"{type(exc).__name__}: {exc}"))

    t = threading.Thread(target=resolve, daemon=True)
    t.start()
    t.join(timeout)
    return answer[0] if answer else (None, f"no answer within {timeout:g} s")


def tcp_probe(host: str, port: int, timeout: float = NET_TIMEOUT) -> str:
    """Try one TCP connection: ``open``, ``refused`` (host answered), ``timeout`` or ``unreachable``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError:
        return "unreachable"


_LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def net_facts(spec: LaunchSpec, plan: Plan, hostname: str) -> NetFacts:
    """Resolve this host's name; probe the rendezvous endpoints the options name."""
    from isaaclab_mgpu.launcher.build import C10D_PORT, DEFAULT_MASTER_PORT
    from isaaclab_mgpu.launcher.resolve import port_is_free

    address, error = lookup(hostname)
    endpoints = []
    wanted: list[tuple[str, str, int | None]] = []
    if spec.uses_jax and spec.coordinator_address:
        host, port = split_host_port(spec.coordinator_address, "--coordinator_address", port_required=True)
        wanted.append(("coordinator", host.strip("[]"), port))
    if spec.master_addr or spec.master_port:
        wanted.append(("master", spec.master_addr or "127.0.0.1", spec.master_port or DEFAULT_MASTER_PORT))
    if spec.rdzv_endpoint:
        host, port = split_host_port(spec.rdzv_endpoint, "--rdzv_endpoint", port_required=False)
        wanted.append(("rdzv_endpoint", host.strip("[]"), port or C10D_PORT))
    for role, host, port in wanted:
        local = plan.node_rank == 0 and (host in _LOCAL or host in (hostname, address))
        free = port_is_free(port) if local and port else None
        resolves, addr, reachable = None, None, None
        if host and host not in _LOCAL:
            addr, _ = lookup(host)
            resolves = addr is not None
        if resolves is not False and not local and plan.nnodes > 1 and port:
            reachable = tcp_probe(host, port)
        endpoints.append(Endpoint(role, host, port, local, free, resolves, addr, reachable))
    return NetFacts(hostname, address, error, tuple(endpoints))
