"""The one impure step before a launch: look at the machine and fill in what the spec left open.

:func:`probe_machine` gathers every fact a launch depends on into a :class:`Machine`; :func:`resolve`
is then a function of ``(LaunchSpec, Machine)`` plus two narrow probes it is handed (is a port free,
pick a free port), so tests can resolve against any machine they describe.

What resolve decides:

- **Visible devices** without importing torch: ``CUDA_VISIBLE_DEVICES`` when set, read as CUDA
  reads it (:mod:`isaaclab_mgpu.contract.devices`), else the NVML device count (:mod:`.nvml`), else 0.
- **GPU selection** (``--gpu_ids``, :func:`selected_devices`): as docs/commands.md says ("GPU
  selection"), indices counted within an existing ``CUDA_VISIBLE_DEVICES``.
- **Logger**: ``--logger wandb`` for the built-in worker needs wandb importable by the ranks.
- **Ranks per node**: ``--num_gpus`` against the visible GPUs and CPUs (docs/commands.md, "Launch
  options").
- **SLURM and Kubernetes**: first of all, the options left out are filled from the scheduler's
  variables (:mod:`.cluster`).
- **Rendezvous**: one node and no address or port given → torchrun ``--standalone`` (a free port
  chosen by the store itself, so concurrent runs never collide). A given master port must be free
  on the rank-0 node. skrl JAX without ``--coordinator_address`` on one node gets 127.0.0.1 and a
  free port.
- **How mgpu is typed here** (:func:`invocation`), for every command mgpu tells the user to run.

In ``strict`` mode (``train``) a machine fact that makes the launch impossible raises an
:class:`~isaaclab_mgpu.contract.errors.EnvironmentProblem`; otherwise (``dry-run``) it becomes a warning
and the command is still built, so a command can be planned on a login node.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from isaaclab_mgpu.contract.devices import identity, parse_device_list
from isaaclab_mgpu.contract.errors import EnvironmentProblem, UsageError
from isaaclab_mgpu.contract.layout import STAMP_FORMAT
from isaaclab_mgpu.launcher import cluster, nvml
from isaaclab_mgpu.launcher.spec import (
    CPU_RANKS_PER_CORE,
    LaunchSpec,
    node_counts,
    parse_nproc,
    split_host_port,
)

__all__ = [
    "Machine",
    "ResolvedSpec",
    "VisibleDevices",
    "invocation",
    "probe_machine",
    "resolve",
]


@dataclass(frozen=True)
class Machine:
    """Facts about this machine that a launch depends on (see :func:`probe_machine`)."""

    environ: Mapping[str, str] = field(default_factory=dict)
    """The environment the launch inherits."""

    python: str = "python"
    """The interpreter that runs torchrun / the JAX launcher."""

    hostname: str = "localhost"
    """This host's name, used in reports."""

    nvml_gpu_count: int | None = None
    """GPUs NVML reports, or None when NVML is unavailable (no driver)."""

    nvml_gpu_uuids: tuple[str, ...] | None = None
    """UUIDs of NVML's GPUs in index order; None when not probed or NVML is unavailable."""

    cpu_count: int = 1
    """Logical CPUs, for torchrun's ``cpu`` rank count."""

    run_stamp: str = "1970-01-01_00-00-00"
    """One timestamp for the run folder, shared by every rank."""

    mgpu_on_path: str | None = None
    """Where ``mgpu`` is found on ``PATH``, or None: not there."""

    parent: str | None = None
    """The name of the process that started this one (``uv`` under ``uv run``), or None."""


@dataclass(frozen=True)
class VisibleDevices:
    """GPUs a process launched here would see."""

    count: int
    """How many GPUs are visible."""

    source: str
    """Where the count comes from: CUDA_VISIBLE_DEVICES, NVML or none."""

    entries: tuple[str, ...] = ()
    """The visible entries as written in CUDA_VISIBLE_DEVICES (indices or UUIDs)."""


@dataclass(frozen=True)
class ResolvedSpec:
    """A launch spec with every machine-dependent choice made; the builder's only input."""

    spec: LaunchSpec
    """What the user asked for, with what the cluster's environment filled in (:mod:`.cluster`)."""

    python: str
    """Interpreter that starts the launcher."""

    nproc: int | str
    """Ranks per node: an int, or torchrun's token when the count could not be known (dry-run)."""

    visible: VisibleDevices
    """GPUs visible to the launch."""

    nnodes: str | None = None
    """Node count to pass on (None: single node, nothing to pass)."""

    node_rank: int | None = None
    """This node's rank to pass on."""

    standalone: bool = False
    """Use torchrun ``--standalone`` (single node, free port picked by the store)."""

    rdzv_endpoint: str | None = None
    """Rendezvous endpoint to pass on."""

    coordinator: tuple[str, int] | None = None
    """JAX coordinator host and port (skrl JAX only)."""

    run_stamp: str = ""
    """Timestamp shared by every rank of this run."""

    log_launch: str | None = None
    """This launch's own per-rank log folder under ``<log root>/<run name>`` (None: ``run_stamp``)."""

    filled: tuple[str, ...] = ()
    """One note per value filled from the environment (SLURM, Kubernetes): ``--nnodes 2 from PET_NNODES``."""

    overridden: tuple[str, ...] = ()
    """One note per environment variable an explicit option overrode."""

    torchrun_env: tuple[str, ...] = ()
    """torchrun flags the environment sets through ``PET_<FLAG>`` (torchrun reads them itself)."""

    warnings: tuple[str, ...] = ()
    """Problems tolerated because the resolve was not strict (dry-run)."""

    extra_env: tuple[tuple[str, str], ...] = ()
    """Additional environment variables for every rank (e.g. saved NCCL workarounds)."""

    cuda_visible_devices: str | None = None
    """``CUDA_VISIBLE_DEVICES`` for the launch when ``--gpu_ids`` selected GPUs, else None."""

    slurm_job_id: str | None = None
    """``SLURM_JOB_ID`` when mgpu runs inside a SLURM job (recorded in the run's summary)."""

    slurm_restart_count: int = 0
    """``SLURM_RESTART_COUNT``: how often SLURM requeued this job (> 0: continue its run)."""

    omp_num_threads: str | None = None
    """``OMP_NUM_THREADS=1`` for several torchrun ranks on a node and none set here, as torchrun
    would set it (stated, so it prints no banner); None: the inherited value, or none."""

    invoked_as: tuple[str, ...] = ("mgpu",)
    """How a user starts this mgpu at a prompt (:func:`invocation`)."""

    @property
    def world_size(self) -> int | None:
        """Total ranks across nodes, when known."""
        return self.nproc * self.nnodes_max if isinstance(self.nproc, int) else None

    @property
    def nnodes_max(self) -> int:
        """The largest node count of the launch (1 on a single node)."""
        return node_counts(self.nnodes)[1]


def probe_machine(environ: Mapping[str, str] | None = None, *, gpu_uuids: bool = False) -> Machine:
    """Gather the facts a launch depends on from this process and machine."""
    # NVML only when it matters: the GPU count, or the UUIDs that --gpu_ids is checked against.
    env = dict(os.environ if environ is None else environ)
    gpus = nvml.list_gpus() if gpu_uuids or "CUDA_VISIBLE_DEVICES" not in env else None
    return Machine(
        environ=env,
        python=sys.executable or "python3",
        hostname=socket.gethostname(),
        nvml_gpu_count=None if gpus is None else len(gpus),
        nvml_gpu_uuids=None if gpus is None else tuple(uuid for _, uuid in gpus),
        cpu_count=os.cpu_count() or 1,
        run_stamp=time.strftime(STAMP_FORMAT),
        mgpu_on_path=shutil.which("mgpu", path=env.get("PATH")),
        parent=_parent_name(),
    )


def _parent_name() -> str | None:
    """The parent process's name (Linux ``/proc``), or None where it cannot be read."""
    try:
        with open(f"/proc/{os.getppid()}/comm") as f:
            return f.read().strip() or None
    except OSError:
        return None


def invocation(machine: Machine) -> tuple[str, ...]:
    """How a user starts this mgpu at a prompt: ``uv run mgpu``, ``mgpu`` or ``PYTHON -m isaaclab_mgpu``."""
    # Under uv run, this environment's mgpu is not on a plain shell's PATH.
    if machine.parent == "uv" and machine.environ.get("UV_RUN_RECURSION_DEPTH"):
        return ("uv", "run", "mgpu")
    here = os.path.dirname(os.path.abspath(machine.python))
    if machine.mgpu_on_path and os.path.dirname(os.path.abspath(machine.mgpu_on_path)) == here:
        return ("mgpu",)
    return (machine.python, "-m", "isaaclab_mgpu")


def visible_devices(machine: Machine) -> VisibleDevices:
    """Count the GPUs a launch from ``machine`` would see, without importing torch."""
    cvd = machine.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        devices = parse_device_list(cvd, uuids=machine.nvml_gpu_uuids, count=machine.nvml_gpu_count)
        if not devices.valid:
            raise UsageError(f"CUDA_VISIBLE_DEVICES={cvd!r}: {devices.problem}; {devices.fix}")
        return VisibleDevices(len(devices.entries), "CUDA_VISIBLE_DEVICES", devices.entries)
    if machine.nvml_gpu_count is not None:
        n = machine.nvml_gpu_count
        return VisibleDevices(n, "NVML", tuple(str(i) for i in range(n)))
    return VisibleDevices(0, "none")


def selected_devices(spec: LaunchSpec, machine: Machine) -> VisibleDevices:
    """The GPUs this node's ranks get: :func:`visible_devices`, narrowed by ``--gpu_ids``."""
    visible = visible_devices(machine)
    ids = spec.gpu_ids
    if ids is None:
        return visible
    shown = ",".join(ids)
    if visible.count == 0:  # no driver: the ids cannot be checked
        return VisibleDevices(len(ids), f"--gpu_ids (unchecked: {visible.source})", ids)
    if len(ids) > visible.count:
        raise UsageError(
            f"--gpu_ids {shown} names {len(ids)} GPUs, but only {visible.count} are visible "
            f"({visible.source}); list at most {visible.count}"
        )
    uuids = machine.nvml_gpu_uuids
    chosen: list[str] = []
    keys: list[str] = []
    for gpu in ids:
        if gpu.isdigit():
            if int(gpu) >= visible.count:
                relative = " (counted within CUDA_VISIBLE_DEVICES)" if visible.source != "NVML" else ""
                raise UsageError(
                    f"--gpu_ids {shown}: index {gpu} is out of range; {visible.count} GPU(s) are "
                    f"visible{relative}, use indices 0..{visible.count - 1}"
                )
            entry = visible.entries[int(gpu)]
        else:
            entry = gpu
        key = identity(entry, uuids)
        where = f"--gpu_ids {shown}: {gpu}"
        if key is None:
            raise UsageError(f"{where} is not a GPU of this machine; nvidia-smi -L lists them")
        if key in keys:
            raise UsageError(f"{where} names a GPU already listed; list each GPU once")
        hidden = uuids is not None and key not in (identity(e, uuids) for e in visible.entries)
        if hidden and not gpu.isdigit():
            raise UsageError(f"{where} is hidden by CUDA_VISIBLE_DEVICES; list a visible GPU")
        keys.append(key)
        chosen.append(entry)
    return VisibleDevices(len(chosen), f"--gpu_ids {shown}", tuple(chosen))


def port_is_free(port: int) -> bool:
    """True when ``port`` can be bound on every interface of this host, as torchrun's store binds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR, as c10d's TCPStore sets it: a port whose last connections linger in
        # TIME_WAIT (a requeued SLURM job on its job-derived port, seconds after the first
        # instance) is free for the store; a port something listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def pick_free_port() -> int:
    """Ask the kernel for a free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def module_installed(name: str) -> bool:
    """True when ``name`` is importable here (the ranks run this interpreter); nothing is imported."""
    import importlib.util

    return importlib.util.find_spec(name) is not None


def resolve(
    spec: LaunchSpec,
    machine: Machine,
    *,
    strict: bool,
    port_free: Callable[[int], bool] = port_is_free,
    free_port: Callable[[], int] = pick_free_port,
    extra_env: Mapping[str, str] | None = None,
) -> ResolvedSpec:
    """Make every machine-dependent choice for ``spec``; raise or warn per ``strict``."""
    filled = cluster.fill(spec, machine.environ)
    spec = filled.spec
    if spec.logger == "wandb" and not module_installed("wandb"):
        raise UsageError(
            "--logger wandb: wandb is not installed for this Python; install it (uv add wandb) or "
            "use --logger tensorboard"
        )
    warnings: list[str] = []

    def problem(message: str) -> None:
        if strict:
            raise EnvironmentProblem(message)
        warnings.append(message)

    visible = _devices(spec, machine, problem)
    nproc = _resolve_nproc(spec, machine, visible, problem)
    if spec.script is not None and os.path.isdir(spec.script):
        raise UsageError(f"--script {spec.script!r} is a folder; give the path of a Python file in it")
    if spec.script is not None and not os.path.isfile(spec.script):
        raise UsageError(f"--script {spec.script!r} does not exist; give the path of a Python file")
    standalone, coordinator = _rendezvous(spec, port_free=port_free, free_port=free_port, problem=problem)
    if not spec.uses_jax:
        cluster.check_torchrun_env(machine.environ, standalone=standalone)

    job_id = machine.environ.get("SLURM_JOB_ID") or None
    restarts = machine.environ.get("SLURM_RESTART_COUNT", "")
    if spec.requeue and job_id is None:
        problem("--requeue needs a SLURM job (no SLURM_JOB_ID here); outside SLURM use --resume auto")

    several_torchrun_ranks = not spec.uses_jax and isinstance(nproc, int) and nproc > 1
    return ResolvedSpec(
        spec=spec,
        python=machine.python,
        nproc=nproc,
        visible=visible,
        nnodes=spec.nnodes,
        node_rank=spec.node_rank,
        standalone=standalone,
        rdzv_endpoint=spec.rdzv_endpoint,
        coordinator=coordinator,
        run_stamp=spec.run_timestamp or machine.run_stamp,  # a given stamp names the run on every node
        filled=filled.filled,
        overridden=filled.overridden,
        torchrun_env=() if spec.uses_jax else cluster.torchrun_env(machine.environ),
        warnings=tuple(warnings),
        extra_env=tuple(sorted((extra_env or {}).items())),
        cuda_visible_devices=",".join(visible.entries) if spec.gpu_ids is not None else None,
        slurm_job_id=job_id,
        slurm_restart_count=int(restarts) if restarts.isdigit() else 0,
        omp_num_threads="1" if several_torchrun_ranks and "OMP_NUM_THREADS" not in machine.environ else None,
        invoked_as=invocation(machine),
    )


def _devices(spec: LaunchSpec, machine: Machine, problem: Callable[[str], None]) -> VisibleDevices:
    """The GPUs this node's ranks get (none for CPU ranks, whatever CUDA_VISIBLE_DEVICES says)."""
    if spec.device != "cuda":
        return VisibleDevices(0, "not used (--device cpu)")
    visible = selected_devices(spec, machine)
    unchecked = machine.nvml_gpu_count is None and "CUDA_VISIBLE_DEVICES" not in machine.environ
    if spec.gpu_ids is not None and unchecked:
        problem(
            f"no GPU is visible here, so --gpu_ids {','.join(spec.gpu_ids)} cannot be checked; "
            "run on a GPU node, or use --device cpu without --gpu_ids"
        )
    return visible


def _rendezvous(
    spec: LaunchSpec,
    *,
    port_free: Callable[[int], bool],
    free_port: Callable[[], int],
    problem: Callable[[str], None],
) -> tuple[bool, tuple[str, int] | None]:
    """``(torchrun --standalone, JAX coordinator)``, each chosen where the options give none."""
    multi_node = spec.nnodes_max > 1
    if spec.uses_jax:
        if spec.coordinator_address is not None:  # port_required: its port is an int
            return False, split_host_port(
                spec.coordinator_address, "--coordinator_address", port_required=True
            )
        if multi_node:
            raise UsageError(
                "a multi-node skrl JAX launch needs --coordinator_address host:port (the address of node 0)"
            )
        return False, ("127.0.0.1", free_port())
    rendezvous_given = any(
        v is not None for v in (spec.master_addr, spec.master_port, spec.rdzv_endpoint, spec.rdzv_backend)
    )
    if multi_node and spec.master_addr is None and spec.rdzv_endpoint is None:
        raise UsageError(
            f"--nnodes {spec.nnodes} needs a rendezvous address: --master_addr HOST (with "
            "--master_port) or --rdzv_endpoint HOST:PORT --rdzv_backend c10d"
        )
    if spec.master_port is not None and (spec.node_rank or 0) == 0 and not port_free(spec.master_port):
        problem(
            f"--master_port {spec.master_port} is already in use on this host; pick another "
            "port or leave it out to get a free one"
        )
    return not multi_node and not rendezvous_given, None


def _resolve_nproc(
    spec: LaunchSpec, machine: Machine, visible: VisibleDevices, problem: Callable[[str], None]
) -> int | str:
    requested = parse_nproc(spec.nproc_per_node) if spec.nproc_per_node is not None else None
    if spec.device == "cpu":
        if requested is None:
            return 1
        if isinstance(requested, str):
            return machine.cpu_count
        most = CPU_RANKS_PER_CORE * machine.cpu_count
        if requested > most and not spec.oversubscribe_cpu:
            problem(
                f"--num_gpus {requested} with --device cpu: more than {CPU_RANKS_PER_CORE} ranks per "
                f"CPU ({most} on the {machine.cpu_count} here); use --num_gpus {machine.cpu_count}, "
                "or add --oversubscribe_cpu if you mean it"
            )
        return requested
    # torchrun's "cpu" (and "auto" without GPUs) means one rank per CPU core; with --device cuda
    # each of them still drives a GPU (cuda:LOCAL_RANK), so it is checked against the GPUs too.
    per_core = f"--num_gpus {requested} means one CUDA rank per CPU core, {machine.cpu_count} here"
    cpu_ranks = f"for CPU ranks use --device cpu --num_gpus {max(2, min(machine.cpu_count, 4))}"
    if visible.count == 0:
        if requested == "cpu":
            problem(f"{per_core}, but no GPU is visible ({visible.source}); {cpu_ranks}")
            return machine.cpu_count
        problem(
            f"no GPU is visible here ({visible.source}); use --device cpu to run CPU ranks "
            "with gloo, or run on a GPU node"
        )
        return requested if requested is not None else "gpu"
    if requested == "cpu":
        if machine.cpu_count > visible.count:
            problem(
                f"{per_core}, more than the {visible.count} GPU(s) visible ({visible.source}); "
                f"use --num_gpus gpu for one rank per GPU, or {cpu_ranks}"
            )
        return machine.cpu_count
    if requested is None or isinstance(requested, str):
        return visible.count
    if requested > visible.count:
        problem(
            f"--num_gpus {requested} is more than the {visible.count} GPU(s) visible "
            f"({visible.source}); use --num_gpus {visible.count} or fewer"
        )
    return requested
