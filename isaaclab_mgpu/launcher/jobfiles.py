"""Job files for a cluster, from the same launch spec: a SLURM batch script, a Kubeflow PyTorchJob, a
Kubeflow Trainer v2 TrainJob with its TrainingRuntime.

``mgpu dry-run … --emit sbatch|pytorchjob|trainjob`` prints one of them instead of the torchrun
command. Every one runs, on every node, the one command :func:`job_command` renders from the spec:
``mgpu train`` with the options that were given (and only those), the training arguments in order,
and ``--resume auto`` for the built-in worker unless a ``--resume`` is given, so the first job and
every resubmitted, requeued or rerun one continue the newest unfinished run. Nothing node-specific
goes in: each node's mgpu fills ``--nnodes``, ``--node_rank`` and the rendezvous from what the
scheduler tells it (:mod:`.cluster`), so a node runs exactly what ``mgpu dry-run`` with the same
arguments prints inside the allocation or the pod.

- **sbatch**: one mgpu task per node, which starts that node's ranks; it runs the mgpu that wrote
  it (:func:`_program`), else ``mgpu`` from ``PATH``. Each line and why: docs/slurm.md, "The batch
  script, emitted".
- **pytorchjob**: ``kubeflow.org/v1``, one ``Master`` replica (node 0) and ``--nnodes`` − 1
  ``Worker`` replicas (docs/kubernetes.md, "The PyTorchJob, emitted").
- **trainjob**: ``trainer.kubeflow.org/v1alpha1`` as Kubeflow Trainer v2.3.0 runs it: a
  ``TrainingRuntime`` ``<job>-runtime`` of this job's own and the ``TrainJob`` whose
  ``runtimeRef`` names it, one YAML stream (docs/kubernetes.md, "The TrainJob and its
  TrainingRuntime, emitted").

Both Kubernetes kinds make a job that survives a lost pod (:func:`job_command`, :func:`_pod`): a
failed or evicted pod is rerun, its ranks save within ``--termination_grace`` and the rerun pod
continues the run from the log root on ``--pvc`` (docs/kubernetes.md, "The restart and resume
contract"); ``--requeue`` and ``--min_nodes`` are refused for them (:func:`emit` says why). An
option that does not apply to the chosen kind is refused in one line (:data:`APPLIES`), never
dropped.

``mgpu probe-nccl --nnodes N --emit sbatch`` gets the same batch script with the probe as the
step's command (:func:`probe_sbatch`; docs/probe-nccl.md, "Across nodes, as a job").

Pure: spec and :class:`JobOptions` in, text out.
"""

from __future__ import annotations

import copy
import dataclasses
import posixpath
import re
import sys
from dataclasses import dataclass

from isaaclab_mgpu.contract import resume
from isaaclab_mgpu.contract.errors import EXIT_NOT_RESTARTABLE, UsageError
from isaaclab_mgpu.launcher.build import shell_join
from isaaclab_mgpu.launcher.options import check_options, flag_of, option, to_argv
from isaaclab_mgpu.launcher.spec import LaunchSpec, parse_nproc

KINDS = ("sbatch", "pytorchjob", "trainjob")
KUBERNETES = ("pytorchjob", "trainjob")
#: The training operator's default rendezvous port (the container port ``pytorchjob-port``).
OPERATOR_PORT = 23456
#: SLURM's time-limit warning: the signal and how many seconds before the limit.
SLURM_WARNING = ("USR1", 90)
#: CPUs per rank when ``--cpus_per_rank`` is not given: a GPU rank's simulation and data
#: handling want a few; a CPU rank runs one thread (the tests' OMP_NUM_THREADS=1).
CPUS_PER_RANK = {"cuda": 4, "cpu": 1}
#: Memory requested per rank (GiB) when ``--memory`` is not given.
MEMORY_PER_RANK_GI = 16
#: Defaults of the Kubernetes options (each stated in its field's docstring and the option's help).
IMAGE = "isaaclab-mgpu:latest"
SHM_SIZE = "16Gi"
WORKDIR = "/workspace"
BACKOFF_LIMIT = 3
#: Seconds from the kubelet's SIGTERM to its SIGKILL: the whole stop of a pod (see :data:`STOP_RESERVE_S`).
TERMINATION_GRACE = 60
#: Seconds of ``terminationGracePeriodSeconds`` the pod command keeps back from train's
#: ``--grace_period`` (:func:`stop_grace`): ``--kill_after`` (5 s) and mgpu's own exit once its
#: processes are gone (up to 10 s measured on a loaded 2-core VM). torchrun itself SIGKILLs its
#: ranks 30 s after their SIGTERM, whatever the grace: a longer iteration plus save loses the save.
STOP_RESERVE_S = 20
#: Trainer v2.3.0's names: the replicated job and container that get ``numNodes`` pods and the
#: ``PET_*`` variables, and the pod-template label that marks that job as the trainer.
TRAINER_JOB, TRAINER_CONTAINER = "node", "node"
TRAINER_API = "trainer.kubeflow.org"
TRAINER_STEP_LABEL = (f"{TRAINER_API}/trainjob-ancestor-step", "trainer")

#: The ``--help`` panel of the job options, and the ones ``submit`` takes too.
JOBS = "Job files (dry-run --emit)"
_SUBMIT = ("dry-run", "submit")
#: The job options ``probe-nccl --emit sbatch`` takes too.
_PROBE = (*_SUBMIT, "probe-nccl")
#: A Kubernetes quantity (``16Gi``, ``500M``, ``2``) and a DNS-1123 name, as the API server reads them.
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?([KMGTPE]i|[kMGTPE])?")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class JobOptions:
    """What a job file needs beyond the launch spec (``dry-run --emit`` options; each help says it)."""

    # Every field but kind and job_name is None when not given, so an option given for a kind it
    # does not apply to is refused even when it repeats the default (APPLIES).

    kind: str | None = option(
        help="The job file that runs this launch on every node: sbatch (SLURM), pytorchjob (Kubeflow) or "
        "trainjob (Kubeflow Trainer v2: a TrainingRuntime and a TrainJob); dry-run prints it instead of "
        "the command, submit (default sbatch) submits it, probe-nccl (sbatch) prints the probe's job.",
        flag="emit", metavar="sbatch|pytorchjob|trainjob", panel=JOBS, commands=_PROBE,
    )  # fmt: skip
    job_name: str | None = option(
        help="Job file: the job's name (default mgpu-train; mgpu-probe for probe-nccl).",
        metavar="NAME",
        panel=JOBS,
        commands=_PROBE,
    )
    time: str | None = option(
        help="sbatch: the time limit (default 04:00:00).", flag="job_time", metavar="HH:MM:SS", panel=JOBS,
        commands=_PROBE,
    )  # fmt: skip
    partition: str | None = option(help="sbatch: the partition.", metavar="NAME", panel=JOBS, commands=_PROBE)
    job_requeue: bool = option(
        False, "Refused: now --requeue.", hidden=True, panel=JOBS, commands=("dry-run",)
    )
    rdzv_port: int | None = option(
        help="sbatch, pytorchjob: the rendezvous port (default: from the job id; 23456).", metavar="PORT",
        panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    cpus_per_rank: int | None = option(
        help="Job file: CPUs per rank (sbatch --cpus-per-task, a pod's CPU request; default 4, 1 with "
        "--device cpu).",
        metavar="N", panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    image: str | None = option(
        help=f"Kubernetes: the container image, with mgpu installed (default {IMAGE}).", metavar="IMAGE",
        panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    shm_size: str | None = option(
        help=f"Kubernetes: size of /dev/shm, a memory volume (default {SHM_SIZE}).", metavar="SIZE",
        panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    memory: str | None = option(
        help=f"Kubernetes: a pod's memory request (default {MEMORY_PER_RANK_GI}Gi per rank).", metavar="SIZE",
        panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    pvc: str | None = option(
        help="Kubernetes: a PersistentVolumeClaim mounted at the pods' log root, so a rerun pod continues "
        "the run (without it checkpoints die with the pod).",
        metavar="CLAIM", panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    workdir: str | None = option(
        help="Kubernetes: the container's working directory; logs/ in it is the log root (default "
        f"{WORKDIR}).",
        metavar="PATH", panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    backoff_limit: int | None = option(
        help="Kubernetes: times a failed or evicted pod is rerun, resuming the run (default "
        f"{BACKOFF_LIMIT}).",
        metavar="N", panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip
    termination_grace: int | None = option(
        help="Kubernetes: seconds from the kubelet's SIGTERM (the ranks save) to its SIGKILL (default "
        f"{TERMINATION_GRACE}).",
        metavar="SECONDS", panel=JOBS, commands=_SUBMIT,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_options(self)
        if self.kind is not None and self.kind not in KINDS:
            raise UsageError(
                f"--emit {self.kind!r} is not a job file kind; choose sbatch, pytorchjob or trainjob"
            )
        if self.job_requeue:
            raise UsageError(
                "--job_requeue is now --requeue: it writes #SBATCH --requeue and keeps --requeue on "
                "the train line; give --requeue"
            )
        for name, kinds in APPLIES.items():
            if getattr(self, name) is None:
                continue
            if self.kind is None:
                raise UsageError(
                    f"{_OPTION[name]} applies to a job file; add --emit {' or --emit '.join(kinds)}"
                )
            if self.kind not in kinds:
                raise UsageError(
                    f"{_OPTION[name]} does not apply to --emit {self.kind} (only to {', '.join(kinds)}); "
                    "leave it out"
                )
        self._check_values()

    def _check_values(self) -> None:
        if self.rdzv_port is not None and not 1 <= self.rdzv_port <= 65535:
            raise UsageError(f"--rdzv_port {self.rdzv_port} is not a port; use a number from 1 to 65535")
        for name, low in (("cpus_per_rank", 1), ("backoff_limit", 0), ("termination_grace", 1)):
            value = getattr(self, name)
            if value is not None and value < low:
                raise UsageError(f"{_OPTION[name]} {value}: give a whole number of at least {low}")
        for name in ("shm_size", "memory"):
            value = getattr(self, name)
            if value is not None and not _QUANTITY.fullmatch(value):
                raise UsageError(f"{_OPTION[name]} {value!r} is not a Kubernetes quantity; write e.g. 16Gi")
        if self.pvc is not None and not (len(self.pvc) <= 253 and _DNS_NAME.fullmatch(self.pvc)):
            raise UsageError(
                f"--pvc {self.pvc!r} is not a claim name; give the name of a PersistentVolumeClaim "
                "(lower-case letters, digits, '-')"
            )
        if self.workdir is not None and not posixpath.isabs(self.workdir):
            raise UsageError(f"--workdir {self.workdir!r} is not an absolute path; write e.g. /workspace")
        if self.kind in KUBERNETES and self.job_name is not None:
            longest = 63 - len("-runtime") if self.kind == "trainjob" else 63
            if not (len(self.job_name) <= longest and _DNS_NAME.fullmatch(self.job_name)):
                raise UsageError(
                    f"--job_name {self.job_name!r} is not a Kubernetes name; use lower-case letters, "
                    f"digits and '-', at most {longest} characters"
                )

    @property
    def name(self) -> str:
        """The job's name."""
        return self.job_name or "mgpu-train"


#: The kinds each :class:`JobOptions` field applies to.
APPLIES: dict[str, tuple[str, ...]] = {
    "job_name": KINDS,
    "time": ("sbatch",),
    "partition": ("sbatch",),
    "rdzv_port": ("sbatch", "pytorchjob"),
    "cpus_per_rank": KINDS,
    "image": KUBERNETES,
    "shm_size": KUBERNETES,
    "memory": KUBERNETES,
    "pvc": KUBERNETES,
    "workdir": KUBERNETES,
    "backoff_limit": KUBERNETES,
    "termination_grace": KUBERNETES,
}
#: Command-line names of the :class:`JobOptions` fields.
_OPTION = {f.name: flag_of(f) for f in dataclasses.fields(JobOptions) if f.metadata}


def train_argv(spec: LaunchSpec) -> list[str]:
    """``mgpu train``, each option of ``spec`` that differs from its default, the training arguments."""
    return ["mgpu", "train", *to_argv(spec), *spec.training_args]


def job_command(spec: LaunchSpec, grace_period: int | None = None) -> list[str]:
    """What every job runs on every node: :func:`train_argv` (a pod's with ``--grace_period``), resuming."""
    mgpu, train, *rest = train_argv(spec)
    argv = [mgpu, train, *(["--grace_period", str(grace_period)] if grace_period is not None else []), *rest]
    if spec.worker is not None and spec.worker.resume is None:
        argv += ["--resume", resume.AUTO]
    return argv


def stop_grace(termination_grace: int) -> int:
    """train's ``--grace_period`` in a pod of ``termination_grace`` s: all but :data:`STOP_RESERVE_S`."""
    return max(termination_grace - STOP_RESERVE_S, 1)


def emit(spec: LaunchSpec, options: JobOptions) -> str:
    """The job file ``options.kind`` for ``spec``."""
    if options.kind is None:
        raise ValueError("emit() needs a job file kind")
    _refuse_per_node(spec, options.kind, "the scheduler")
    if options.kind == "sbatch":
        return sbatch(spec, options)
    if spec.min_nodes is not None:  # an elastic --nnodes MIN:MAX is refused as such (ranks_per_node)
        raise UsageError(
            f"--emit {options.kind}: --min_nodes asks the survivors to go on without a lost pod, but the "
            "operator replaces a lost pod and restarts the job at its full size (Kubeflow Trainer v2.3.0 "
            "has no elastic policy; a PyTorchJob's elasticPolicy is torchrun's own shrink, which hangs "
            "its survivors): leave --min_nodes out"
        )
    if spec.requeue:
        raise UsageError(
            f"--emit {options.kind}: --requeue is SLURM's (every pod's mgpu train would refuse it); "
            "a Kubernetes job reruns a failed pod and it resumes by itself: leave --requeue out"
        )
    return pytorchjob(spec, options) if options.kind == "pytorchjob" else trainjob(spec, options)


def _program() -> list[str]:
    """How a SLURM job starts mgpu: this mgpu's interpreter, else ``mgpu`` from ``PATH``."""
    # A uv environment's mgpu is not on the nodes' PATH.
    return [sys.executable, "-m", "isaaclab_mgpu"] if sys.executable else ["mgpu"]


def sbatch(spec: LaunchSpec, options: JobOptions, command: list[str] | None = None) -> str:
    """A batch script: one ``srun mgpu train`` task per node (``command``: another, ``mgpu`` left out)."""
    nodes = (spec.nnodes or "1").replace(":", "-")
    ranks = ranks_per_node(spec, "sbatch")
    cpus = ranks * (options.cpus_per_rank or CPUS_PER_RANK[spec.device])
    signal, seconds = SLURM_WARNING
    name = options.name
    program = _program()
    argv = job_command(spec) if command is None else ["mgpu", *command]
    writer = "dry-run" if argv[1] == "train" else argv[1]
    lines = [
        "#!/bin/bash",
        f"# Written by mgpu {writer} --emit sbatch. Submit: sbatch {name}.sbatch",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={cpus}",
    ]
    if spec.device == "cuda":
        lines.append(f"#SBATCH --gpus-per-node={ranks}")
    if options.partition:
        lines.append(f"#SBATCH --partition={options.partition}")
    lines += [f"#SBATCH --time={options.time or '04:00:00'}", f"#SBATCH --signal={signal}@{seconds}"]
    if spec.requeue:
        lines += ["#SBATCH --requeue", "#SBATCH --open-mode=append"]
    shrinks = spec.node_floor is not None
    if shrinks:  # a lost node costs the job that node, not the allocation (mgpu shrinks the run)
        lines.append("#SBATCH --no-kill")
    lines += [f"#SBATCH --output={name}-%j.out", "", "set -euo pipefail", ""]
    train = argv[1] == "train"
    if train and spec.worker is not None and spec.worker.resume in (None, resume.AUTO):
        lines.append("# Submitting it again continues the newest unfinished run (--resume auto).")
    lines += [
        "# One mgpu per node (--ntasks-per-node=1); it starts that node's ranks and supervises them,",
        f"# with {cpus} CPUs ({ranks} ranks x {cpus // ranks}).",
    ]
    if sys.executable:
        lines += [
            "# The mgpu that wrote this file runs it: its environment's interpreter, which every node",
            "# must see at this path (python -m isaaclab_mgpu is mgpu).",
        ]
    else:
        lines.append("# mgpu must be on PATH on every node: activate its environment here if needed.")
    lines += [
        "#",
        "# Each node's mgpu fills what SLURM tells it: --nnodes from SLURM_NNODES, --node_rank from",
        "# SLURM_NODEID, --rdzv_id from SLURM_JOB_ID and --master_addr FIRST_HOST, the first host of",
        "# SLURM_JOB_NODELIST (SLURM's node 0), hosting torchrun's store on PORT. The ranks follow",
        "# --node_rank there, so global rank 0 runs on node 0, whose mgpu keeps the run's record.",
        f"# {signal} reaches every node's mgpu {seconds} s before the time limit.",
    ]
    if not train:
        lines += [
            f"# Each node's mgpu {argv[1]} reports its own ranks, per world size, to {name}-JOBID-NODE.out.",
            "# Each launch of the sweep meets at its own port (PORT, PORT+1, ...).",
        ]
    if spec.requeue:
        lines += [
            "# Then the ranks save a checkpoint and stop, node 0's mgpu runs scontrol requeue and exits",
            "# 75, and the requeued job runs this script again and continues the same run. Expected then:",
            "# srun's 'Exited with exit code 75' and slurmstepd's '*** STEP ... CANCELLED ... REQUEUE ***'.",
        ]
    lines += [
        "# Shared by every node (and by the nodes of a requeued job, which may be other ones): this",
        "# directory and its log root (logs/, or the --log_root given: run folders, checkpoints,",
        "# summary.json). A log root on a node's local disk cannot be continued elsewhere.",
    ]
    if train:
        ends = (
            [
                f"# --min_nodes {spec.node_floor}: a lost node does not end the job (#SBATCH --no-kill,",
                "# srun --no-kill --kill-on-bad-exit=0): the other nodes' mgpu restart the run on fewer",
                "# nodes.",
            ]
            if shrinks
            else ["# srun --kill-on-bad-exit=1: when one node's mgpu fails, SLURM ends the others' at once."]
        )
        lines += [
            *ends,
            "# Check inside an allocation:",
            f"# srun --ntasks-per-node=1 {shell_join(program)} dry-run <the same arguments>",
        ]
    if not spec.uses_jax and all(v is None for v in (spec.master_port, spec.rdzv_endpoint, spec.master_addr)):
        port = str(options.rdzv_port) if options.rdzv_port else "$((20000 + SLURM_JOB_ID % 10000))"
        lines += ["# The rendezvous port, the same on every node of this job:", f"MGPU_PORT={port}", ""]
        tail = ' --master_port "$MGPU_PORT"'
    else:
        lines.append("")
        tail = ""
    # Not requeueable even after a node failure (one that fails while srun ends the others): the
    # same failure would come round again. A site's RequeueExit list must leave 93 out.
    lines += [
        f"# mgpu exits {EXIT_NOT_RESTARTABLE} when no restart can mend the failure (the same error again,",
        "# a bad configuration): then this job is made not requeueable, so SLURM does not run it again.",
        f'trap \'status=$?; if [ "$status" -eq {EXIT_NOT_RESTARTABLE} ]; then '
        'scontrol update JobId="$SLURM_JOB_ID" Requeue=0 || true; fi\' EXIT',
    ]
    # srun inherits --cpus-per-task from the allocation on some SLURM versions only: state it.
    kill = "--no-kill --kill-on-bad-exit=0" if shrinks else "--kill-on-bad-exit=1"
    srun = f"srun {kill} --cpus-per-task={cpus}"
    if not train:  # each node's report in a file of its own (%N: the node's name); a probe node
        # that failed a launch must not end the others before they report (their timeouts bound them)
        srun = f"srun --cpus-per-task={cpus} --output={name}-%j-%N.out"
    lines.append(f"{srun} {shell_join([*program, argv[1]])}{tail} {shell_join(argv[2:])}".rstrip())
    return "\n".join(lines) + "\n"


def probe_sbatch(
    spec: LaunchSpec,
    probe_args: list[str],
    options: JobOptions,
    ranks: int,
    pair_args: list[str] | None = None,
) -> str:
    """The batch script of ``mgpu probe-nccl --nnodes N --emit sbatch``: the probe on every node."""
    if options.kind != "sbatch":
        raise UsageError(f"probe-nccl --emit {options.kind}: only --emit sbatch is written for the probe")
    _refuse_per_node(spec, "sbatch", "SLURM")
    command = ["probe-nccl", *train_argv(spec)[2:], *probe_args]
    text = sbatch(dataclasses.replace(spec, nproc_per_node=str(ranks)), options, command)
    if pair_args is None:
        return text
    if spec.master_addr is not None or spec.rdzv_endpoint is not None:
        raise UsageError("--pairs across nodes: each pair meets at its first node; leave --master_addr out")
    *head, step = text.rstrip("\n").split("\n")
    base = str(spec.master_port) if spec.master_port is not None else "$MGPU_PORT"
    cpus = options.cpus_per_rank or CPUS_PER_RANK[spec.device]
    pair = [
        "probe-nccl",
        *train_argv(dataclasses.replace(spec, nnodes="2", master_port=None))[2:],
        *pair_args,
    ]
    program = _program()
    out = f"{options.name}-%j-pair-${{NODES[i]}}-${{NODES[j]}}-%N.out"
    srun = (
        f'srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist="${{NODES[i]}},${{NODES[j]}}" '
        f'--cpus-per-task={cpus} --output="{out}"'
    )
    where = f'--master_addr "${{NODES[i]}}" --master_port "$(({base} + 100 + k))"'
    return "\n".join([
        *head,
        "status=0",
        f"{step} || status=$?",
        "",
        "# Every pair of nodes, one step after another: world size 2, one rank on each node; the",
        "# pair's first node (in SLURM's order, node 0 of the step) hosts the store, on a port of its own.",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "k=0",
        'for ((i = 0; i < ${#NODES[@]}; i++)); do',
        '  for ((j = i + 1; j < ${#NODES[@]}; j++)); do',
        "    k=$((k + 1))",
        "    code=0",
        f"    {srun} {shell_join([*program, pair[0]])} {where} {shell_join(pair[1:])} || code=$?",
        '    case $code in 0) said=ok ;; 3) said=wrong-result ;; 4) said=hang ;;',
        '      *) said="error (exit $code)" ;; esac',
        '    echo "node pair ${NODES[i]} ${NODES[j]}: $said"',
        '    if [ "$status" -eq 0 ]; then status=$code; fi',
        "  done",
        "done",
        'exit "$status"',
    ]) + "\n"  # fmt: skip


def pytorchjob(spec: LaunchSpec, options: JobOptions) -> str:
    """A PyTorchJob manifest: Master (node 0) and Workers, each pod running the same ``mgpu train``."""
    import yaml

    nodes, ranks = _fixed_nodes(spec, "pytorchjob"), ranks_per_node(spec, "pytorchjob")
    port = options.rdzv_port or OPERATOR_PORT
    pod = _pod(
        spec, options, ranks, container="pytorch", ports=[{"name": "pytorchjob-port", "containerPort": port}]
    )

    def replica(count: int) -> dict[str, object]:
        # Copies: PyYAML would write a shared object once and alias it (&id001) in the other replica.
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": copy.deepcopy(pod)}}

    replicas = {"Master": replica(1)}
    if nodes > 1:
        replicas["Worker"] = replica(nodes - 1)
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": options.name},
        "spec": {
            "nprocPerNode": str(ranks),
            "runPolicy": {"backoffLimit": _backoff(options), "cleanPodPolicy": "Running"},
            "pytorchReplicaSpecs": replicas,
        },
    }
    head = [
        f"# Written by mgpu dry-run --emit pytorchjob. Apply: kubectl apply -f {options.name}.yaml",
        "# Each pod's mgpu fills --nnodes, --node_rank and the rendezvous from the operator's",
        "# MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and PET_* variables. Check in a pod:",
        "# kubectl exec <pod> -- mgpu dry-run <the same arguments>",
        "# Restarts: restartPolicy OnFailure reruns a pod that exits non-zero or is evicted, up to",
        f"# runPolicy.backoffLimit ({_backoff(options)}) times in all; cleanPodPolicy Running deletes the",
        "# pods still running when the job ends.",
        *_survival(spec, options),
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump(doc, sort_keys=False, width=1000)


def trainjob(spec: LaunchSpec, options: JobOptions) -> str:
    """A TrainingRuntime of this job's own and the TrainJob that runs it (one YAML stream)."""
    import yaml

    nodes, ranks = _fixed_nodes(spec, "trainjob"), ranks_per_node(spec, "trainjob")
    runtime_name = f"{options.name}-runtime"
    pod = {"restartPolicy": "Never", **_pod(spec, options, ranks, container=TRAINER_CONTAINER)}
    runtime = {
        "apiVersion": f"{TRAINER_API}/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": runtime_name},
        "spec": {
            "mlPolicy": {"numNodes": nodes, "torch": {}},
            "template": {
                "spec": {
                    "failurePolicy": {"maxRestarts": _backoff(options)},
                    "replicatedJobs": [
                        {
                            "name": TRAINER_JOB,
                            "replicas": 1,
                            # backoffLimit 0: a failed pod fails its Job, and the JobSet then
                            # recreates every pod together (one rendezvous, one resume).
                            "template": {
                                "metadata": {"labels": dict([TRAINER_STEP_LABEL])},
                                "spec": {"backoffLimit": 0, "template": {"spec": pod}},
                            },
                        }
                    ],
                }
            },
        },
    }
    job = {
        "apiVersion": f"{TRAINER_API}/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": options.name},
        "spec": {
            "runtimeRef": {"name": runtime_name, "apiGroup": TRAINER_API, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": nodes, "numProcPerNode": ranks},
        },
    }
    head = [
        f"# Written by mgpu dry-run --emit trainjob. Apply: kubectl apply -f {options.name}.yaml",
        f"# Kubeflow Trainer v2: the TrainingRuntime {runtime_name} (this job's own: the restart policy",
        f"# lives in a runtime) and the TrainJob {options.name} that names it in runtimeRef.",
        "# Each pod's mgpu fills --nnodes, --num_gpus, --node_rank and the rendezvous from the torch",
        "# runtime's PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT,",
        f"# which the operator sets only in the container {TRAINER_CONTAINER!r} of the replicated job",
        f"# {TRAINER_JOB!r} labelled {TRAINER_STEP_LABEL[0]}: {TRAINER_STEP_LABEL[1]}. Check in a pod:",
        "# kubectl exec <pod> -- mgpu dry-run <the same arguments>",
        "# Restarts: a pod that exits non-zero or is evicted fails its Job (backoffLimit 0); the JobSet",
        f"# then recreates every pod, up to failurePolicy.maxRestarts ({_backoff(options)}) times.",
        *_survival(spec, options),
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump_all([runtime, job], sort_keys=False, width=1000)


def log_mount(spec: LaunchSpec, options: JobOptions) -> str:
    """Where the pods' log root is: ``--log_root`` (relative to the working directory) or ``logs``."""
    return posixpath.normpath(posixpath.join(options.workdir or WORKDIR, spec.log_root))


def ranks_per_node(spec: LaunchSpec, kind: str) -> int:
    """The ranks each node starts: the GPUs it asks the scheduler for, or ``--num_gpus`` CPU ranks (1)."""
    if spec.gpu_ids is not None:
        return len(spec.gpu_ids)
    value = parse_nproc(spec.nproc_per_node) if spec.nproc_per_node is not None else None
    if spec.device == "cpu" and value is None:
        return 1
    if not isinstance(value, int):
        what = "the GPUs" if spec.device == "cuda" else "the CPU ranks"
        raise UsageError(f"--emit {kind} needs --num_gpus N: {what} each node asks the scheduler for")
    return value


def _pod(
    spec: LaunchSpec, options: JobOptions, ranks: int, *, container: str, ports: list | None = None
) -> dict[str, object]:
    """The pod spec both Kubernetes kinds run: one container with ``mgpu train``, its volumes."""
    cpus = ranks * (options.cpus_per_rank or CPUS_PER_RANK[spec.device])
    resources: dict[str, object] = {
        "requests": {"cpu": cpus, "memory": options.memory or f"{ranks * MEMORY_PER_RANK_GI}Gi"}
    }
    if spec.device == "cuda":
        resources["limits"] = {"nvidia.com/gpu": ranks}
    main: dict[str, object] = {
        "name": container,
        "image": options.image or IMAGE,
        "workingDir": options.workdir or WORKDIR,
        "command": job_command(spec, stop_grace(options.termination_grace or TERMINATION_GRACE)),
    }
    if ports:
        main["ports"] = ports
    main["resources"] = resources
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    # NCCL needs more than a container's default 64 MB of /dev/shm ("failed to extend /dev/shm/nccl-…").
    volumes: list[dict[str, object]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size or SHM_SIZE}}
    ]
    if options.pvc:
        mounts.append({"name": "logs", "mountPath": log_mount(spec, options)})
        volumes.append({"name": "logs", "persistentVolumeClaim": {"claimName": options.pvc}})
    main["volumeMounts"] = mounts
    return {
        "terminationGracePeriodSeconds": options.termination_grace or TERMINATION_GRACE,
        "containers": [main],
        "volumes": volumes,
    }


def _survival(spec: LaunchSpec, options: JobOptions) -> list[str]:
    """The manifest's comment lines on what a rerun pod continues, and from where."""
    grace = options.termination_grace or TERMINATION_GRACE
    lines = [
        "# On the kubelet's SIGTERM the ranks save a checkpoint at the next iteration and mgpu exits",
        f"# 130 (124 if something had to be SIGKILLed), within terminationGracePeriodSeconds ({grace}),",
        f"# of which --grace_period {stop_grace(grace)} is the ranks'. SIGTERM to one pod alone (an",
        "# eviction) stops every node's ranks at the same iteration; the pods not signalled exit 1.",
    ]
    if spec.builtin_worker:
        lines.append("# The rerun pod's --resume auto continues the newest unfinished run (none: a new one).")
    else:
        lines.append("# Your program must continue from its own checkpoints when the pod is rerun.")
    where = log_mount(spec, options)
    if options.pvc:
        lines += [
            f"# Log root: the PersistentVolumeClaim {options.pvc} at {where} in every pod; for more than",
            "# one node it must be ReadWriteMany (every node reads the run folder).",
        ]
    else:
        lines += [
            f"# No --pvc: the log root {where} is inside the pod; its checkpoints die with the pod and a",
            "# restarted pod cannot continue the run (it starts a new one). Give --pvc CLAIM.",
        ]
    return lines


def _refuse_per_node(spec: LaunchSpec, kind: str, setter: str) -> None:
    """The job file must not fix ``--node_rank``: it differs per node and comes from the scheduler."""
    if spec.node_rank is not None:
        raise UsageError(f"--emit {kind}: --node_rank differs per node and {setter} sets it; leave it out")


def _fixed_nodes(spec: LaunchSpec, kind: str) -> int:
    if spec.nnodes is not None and ":" in spec.nnodes:
        raise UsageError(
            f"--emit {kind}: --nnodes {spec.nnodes} is elastic; give a fixed node count (the "
            "manifest runs one pod per node)"
        )
    return int(spec.nnodes or "1")


def _backoff(options: JobOptions) -> int:
    return BACKOFF_LIMIT if options.backoff_limit is None else options.backoff_limit
