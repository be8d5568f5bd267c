"""Job files for a cluster, from the same launch spec: a SLURM batch script, a Kubeflow PyTorchJob.

``mgpu dry-run … --emit sbatch`` / ``--emit pytorchjob`` prints one of them instead of the torchrun
command. Both run, on every node, the one command :func:`train_argv` renders from the spec:
``mgpu train`` with the options that were given (and only those) and the training arguments in
order. Nothing node-specific goes in: each node's mgpu fills ``--nnodes``, ``--node_rank`` and the
rendezvous from what the scheduler tells it (:mod:`.cluster`), so what a node runs is exactly what
``mgpu dry-run`` with the same arguments prints inside the allocation or the pod.

- **sbatch**: ``#SBATCH --nodes`` (``--nnodes``), ``--ntasks-per-node=1`` (one mgpu per node, which
  starts that node's ranks), ``--gpus-per-node`` (``--num_gpus``; none with ``--device cpu``),
  ``--time``, ``--signal=USR1@90`` (SLURM's warning 90 s before the time limit, to every node's
  mgpu), ``--requeue`` when asked. The rendezvous port is fixed in the script: ``--master_port``
  when given, else one derived from the job id (two jobs sharing a first node then rarely collide);
  the first host of the allocation hosts torchrun's store there.
- **pytorchjob**: ``kubeflow.org/v1`` ``PyTorchJob``, one ``Master`` replica (node 0) and
  ``--nnodes`` − 1 ``Worker`` replicas, ``nprocPerNode``, the container ``pytorch`` with the
  operator's port ``pytorchjob-port``, ``nvidia.com/gpu`` limits, and ``/dev/shm`` as a memory
  volume (a container's default 64 MB is too small for NCCL). The operator then sets
  ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` and ``PET_NNODES``/``PET_NODE_RANK``/
  ``PET_NPROC_PER_NODE`` in each pod.

Pure: spec and :class:`JobOptions` in, text out.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.launcher.build import shell_join
from isaaclab_mgpu.launcher.spec import LaunchSpec, parse_nproc, spelling

KINDS = ("sbatch", "pytorchjob")
#: The training operator's default rendezvous port (the container port ``pytorchjob-port``).
OPERATOR_PORT = 23456
#: SLURM's time-limit warning: the signal and how many seconds before the limit.
SLURM_WARNING = ("USR1", 90)

#: Spec fields the job file must not fix: they differ per node and come from the scheduler.
_PER_NODE = ("node_rank",)
#: Command-line names of the :class:`JobOptions` fields that are not ``--<field>``.
_JOB_OPTION_NAMES = {"time": "--job_time", "requeue": "--job_requeue"}
#: Command-line names of spec fields that are not ``--<field>``.
_OPTION_NAMES = {"nproc_per_node": "--num_gpus", "module": "--module"}


@dataclass(frozen=True)
class JobOptions:
    """What a job file needs beyond the launch spec (``dry-run --emit`` options)."""

    kind: str | None
    """``sbatch`` or ``pytorchjob``; None: no job file (then every other field must keep its default)."""

    job_name: str = "mgpu-train"
    """The job's name (``#SBATCH --job-name``, the PyTorchJob's ``metadata.name``)."""

    time: str = "04:00:00"
    """sbatch: the time limit (``#SBATCH --time``)."""

    partition: str | None = None
    """sbatch: the partition (``#SBATCH --partition``); None: the cluster's default."""

    requeue: bool = False
    """sbatch: ``#SBATCH --requeue`` (rerun the script after the time-limit checkpoint)."""

    rdzv_port: int | None = None
    """The rendezvous port (sbatch: derived from the job id; pytorchjob: 23456)."""

    image: str = "isaaclab-mgpu:latest"
    """pytorchjob: the container image (a placeholder name: build one with Isaac Lab and mgpu in it)."""

    shm_size: str = "16Gi"
    """pytorchjob: size of the memory volume mounted at /dev/shm."""

    def __post_init__(self) -> None:
        if self.kind is None:
            for f in dataclasses.fields(self):
                if f.name != "kind" and getattr(self, f.name) != f.default:
                    option = _JOB_OPTION_NAMES.get(f.name, f"--{f.name}")
                    raise UsageError(
                        f"{option} applies to a job file; add --emit sbatch or --emit pytorchjob"
                    )
            return
        if self.kind not in KINDS:
            raise UsageError(f"--emit {self.kind!r} is not a job file kind; choose sbatch or pytorchjob")
        if self.rdzv_port is not None and not 1 <= self.rdzv_port <= 65535:
            raise UsageError(f"--rdzv_port {self.rdzv_port} is not a port; use a number from 1 to 65535")


def train_argv(spec: LaunchSpec) -> list[str]:
    """``mgpu train``, each option of ``spec`` that differs from its default, the training arguments."""
    argv = ["mgpu", "train"]
    for f in dataclasses.fields(LaunchSpec):
        value = getattr(spec, f.name)
        if f.name == "training_args" or value == f.default:
            continue
        if f.name == "inject_distributed":
            argv.append("--inject_distributed" if value else "--no_inject_distributed")
        elif value is True:
            argv.append(_option(f.name))
        else:
            argv += [_option(f.name), _typed(value)]
    return [*argv, *spec.training_args]


def emit(spec: LaunchSpec, options: JobOptions) -> str:
    """The job file ``options.kind`` for ``spec``."""
    if options.kind is None:
        raise ValueError("emit() needs a job file kind")
    for name in _PER_NODE:
        if getattr(spec, name) is not None:
            raise UsageError(
                f"--emit {options.kind}: {spelling(name)} differs per node and the scheduler sets it; "
                "leave it out"
            )
    return sbatch(spec, options) if options.kind == "sbatch" else pytorchjob(spec, options)


def sbatch(spec: LaunchSpec, options: JobOptions) -> str:
    """A batch script: one ``srun mgpu train`` task per node, SLURM filling each node's part."""
    nodes = (spec.nnodes or "1").replace(":", "-")
    gpus = _per_node(spec, "sbatch") if spec.device == "cuda" else None
    signal, seconds = SLURM_WARNING
    lines = [
        "#!/bin/bash",
        f"# Written by mgpu dry-run --emit sbatch. Submit: sbatch {options.job_name}.sbatch",
        f"#SBATCH --job-name={options.job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if gpus is not None:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    lines += [f"#SBATCH --time={options.time}", f"#SBATCH --signal={signal}@{seconds}"]
    if options.requeue:
        lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append"]
    lines += [f"#SBATCH --output={options.job_name}-%j.out", "", "set -euo pipefail", ""]
    lines += [
        "# One mgpu per node (--ntasks-per-node=1); it starts that node's ranks and supervises them.",
        "# mgpu must be on PATH on every node: activate its environment here if needed.",
        "#",
        "# Each node's mgpu fills what SLURM tells it: --nnodes from SLURM_NNODES, --node_rank from",
        "# SLURM_NODEID, --rdzv_id from SLURM_JOB_ID, --rdzv_backend c10d and --rdzv_endpoint",
        "# FIRST_HOST:PORT, the first host of SLURM_JOB_NODELIST hosting torchrun's store on PORT.",
        f"# {signal} reaches every node's mgpu {seconds} s before the time limit.",
        "# Check inside an allocation: srun --ntasks-per-node=1 mgpu dry-run <the same arguments>",
    ]
    argv = train_argv(spec)
    if (
        spec.master_port is None
        and not spec.uses_jax
        and spec.rdzv_endpoint is None
        and spec.master_addr is None
    ):
        port = str(options.rdzv_port) if options.rdzv_port else "$((20000 + SLURM_JOB_ID % 10000))"
        lines += ["# The rendezvous port, the same on every node of this job:", f"MGPU_PORT={port}", ""]
        tail = ' --master_port "$MGPU_PORT"'
    else:
        lines.append("")
        tail = ""
    lines.append(f"srun {_shell(argv[:2])}{tail} {_shell(argv[2:])}".rstrip())
    return "\n".join(lines) + "\n"


def pytorchjob(spec: LaunchSpec, options: JobOptions) -> str:
    """A PyTorchJob manifest: Master (node 0) and Workers, each pod running the same ``mgpu train``."""
    import yaml

    if spec.nnodes is not None and ":" in spec.nnodes:
        raise UsageError(
            f"--emit pytorchjob: --nnodes {spec.nnodes} is elastic; give a fixed node count (the "
            "manifest has one Master and nnodes-1 Worker replicas)"
        )
    nodes = int(spec.nnodes or "1")
    nproc = _per_node(spec, "pytorchjob") if spec.device == "cuda" else int(spec.nproc_per_node or "1")
    port = options.rdzv_port or OPERATOR_PORT
    container: dict[str, object] = {
        "name": "pytorch",
        "image": options.image,
        "command": train_argv(spec),
        "ports": [{"name": "pytorchjob-port", "containerPort": port}],
    }
    if spec.device == "cuda":
        container["resources"] = {"limits": {"nvidia.com/gpu": nproc}}
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}}

    def replica(count: int) -> dict[str, object]:
        # Copies: PyYAML would write a shared object once and alias it (&id001) in the other replica.
        template = {"spec": {"containers": [copy.deepcopy(container)], "volumes": [copy.deepcopy(volume)]}}
        return {"replicas": count, "restartPolicy": "Never", "template": template}

    replicas = {"Master": replica(1)}
    if nodes > 1:
        replicas["Worker"] = replica(nodes - 1)
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": options.job_name},
        "spec": {"nprocPerNode": str(nproc), "pytorchReplicaSpecs": replicas},
    }
    head = (
        "# Written by mgpu dry-run --emit pytorchjob. Apply: kubectl apply -f "
        f"{options.job_name}.yaml\n"
        "# Each pod's mgpu fills --nnodes, --node_rank and the rendezvous from the operator's\n"
        "# MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and PET_* variables. Check in a pod:\n"
        "# kubectl exec <pod> -- mgpu dry-run <the same arguments>\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, width=1000)


def _per_node(spec: LaunchSpec, kind: str) -> int:
    """The GPUs (ranks) per node, which the job file must ask the scheduler for."""
    if spec.gpu_ids is not None:
        return len(spec.gpu_ids)
    value = parse_nproc(spec.nproc_per_node) if spec.nproc_per_node is not None else None
    if not isinstance(value, int):
        raise UsageError(f"--emit {kind} needs --num_gpus N: the GPUs each node asks the scheduler for")
    return value


def _option(name: str) -> str:
    return _OPTION_NAMES.get(name, spelling(name))


def _typed(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return format(value, "g") if isinstance(value, float) else str(value)


def _shell(argv: list[str]) -> str:
    return shell_join(argv)  # as dry-run prints a command: one line, control characters escaped
