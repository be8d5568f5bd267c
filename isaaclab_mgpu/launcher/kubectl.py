"""Kubernetes jobs through ``kubectl``: submit a written manifest, read a job's state, cancel it.

``mgpu submit --emit trainjob|pytorchjob`` hands the manifest it wrote (``<log_root>/mgpu/jobs/<name>.yaml``)
to :func:`submit`, which applies it and records a :class:`KubeJob` beside it (``<name>.kubernetes.json``,
read by :func:`submitted`); ``mgpu runs`` lists each recorded job as a row (:func:`rows_with_kubernetes`:
one :func:`job_state` per job, nothing without ``kubectl``), ``mgpu cancel NAME`` calls :func:`cancel` and
``mgpu logs NAME`` runs :func:`logs_argv` (node 0's pod). Everything goes through the user's own
``kubectl`` (its context, credentials and namespace); mgpu talks to no API server itself. Each
command's argv, what a second submit does, why a cancel waits for the pods, and the table of run
states :func:`state_of` reads from a job's conditions: docs/kubernetes.md, "Submit, follow, cancel".

A failing ``kubectl`` raises :class:`~isaaclab_mgpu.contract.errors.MgpuError` with its own
message; no ``kubectl`` on ``PATH`` is a :class:`~isaaclab_mgpu.contract.errors.UsageError`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from isaaclab_mgpu.contract.errors import MgpuError, UsageError
from isaaclab_mgpu.contract.layout import jobs_dir
from isaaclab_mgpu.launcher.runs import RunRow

#: The ``--emit`` kind → the object ``kind`` in the manifest and the resource ``kubectl`` names it by.
KINDS = {"trainjob": "TrainJob", "pytorchjob": "PyTorchJob"}
RESOURCES = {"TrainJob": "trainjobs.trainer.kubeflow.org", "PyTorchJob": "pytorchjobs.kubeflow.org"}
#: A job's states (``gone``: kubectl does not find the job; ``unknown``: kubectl failed to say).
State = Literal["queued", "running", "finished", "failed", "gone", "unknown"]
#: The record :func:`submit` writes beside the manifest: ``<name>`` + this.
RECORD_SUFFIX = ".kubernetes.json"
#: Seconds a ``kubectl get`` of a job's state may take (an unreachable API server: no answer).
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class KubeJob:
    """A job submitted through ``kubectl``, as recorded beside its manifest."""

    kind: str
    """``TrainJob`` or ``PyTorchJob``."""

    name: str
    """``metadata.name``: the ``--job_name``."""

    namespace: str
    """The namespace ``kubectl apply`` put it in."""

    manifest: str
    """The manifest file that was applied."""

    run_under: str = ""
    """Where the run lives in the pods: its experiment folder (empty in older records)."""


@dataclass(frozen=True)
class JobState:
    """What the operator says of a job, as a run state."""

    state: State
    """The run state (:data:`State`)."""

    reason: str = ""
    """The deciding condition's reason and message (empty: none)."""


def pod_selector(job: KubeJob) -> str:
    """The label selector of the job's pods."""
    if job.kind == "PyTorchJob":  # the v1 operator labels every replica with the job's name
        return f"training.kubeflow.org/job-name={job.name}"
    return f"jobset.sigs.k8s.io/jobset-name={job.name}"  # the TrainJob's JobSet has its name


def get_argv(job: KubeJob) -> list[str]:
    """``kubectl get <resource> NAME -n NAMESPACE -o json``."""
    return ["kubectl", "get", RESOURCES[job.kind], job.name, "-n", job.namespace, "-o", "json"]


def state_of(obj: Mapping[str, Any]) -> JobState:
    """The run state of a TrainJob or PyTorchJob object (``kubectl get -o json``'s answer)."""
    status = obj.get("status") or {}
    true = {
        c.get("type"): c
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping) and str(c.get("status")) == "True"
    }

    def said(kind: State, condition: str) -> JobState:
        c = true[condition]
        why = ": ".join(str(x) for x in (c.get("reason"), c.get("message")) if x)
        return JobState(kind, why)

    finished = "Complete" if obj.get("kind") == "TrainJob" else "Succeeded"
    for state, condition in (("failed", "Failed"), ("finished", finished), ("queued", "Suspended")):
        if condition in true:
            return said(state, condition)
    if obj.get("kind") == "TrainJob":
        jobs = [j for j in status.get("jobsStatus") or () if isinstance(j, Mapping)]
        if any(int(j.get("ready") or 0) > 0 for j in jobs):
            return JobState("running", "pods ready")
        return JobState("queued", "pods not ready yet" if "Created" in true else "not created yet")
    for condition in ("Restarting", "Running"):
        if condition in true:
            return said("running", condition)
    return JobState("queued", "pods not running yet")


def submit(manifest: Path, kind: str, run_under: str = "") -> KubeJob:
    """Apply ``manifest`` (an ``--emit`` ``kind``'s file) and record the job beside it."""
    previous = _record(record_path(manifest))
    if previous is not None:
        before = job_state(previous)
        if before.state in ("queued", "running"):
            raise UsageError(
                f"{previous.kind} {previous.name} in {previous.namespace} is already {before.state}; "
                "follow it, or cancel it before submitting again"
            )
        if before.state != "gone":
            cancel(previous)  # ended: out of the way, so that the manifest makes a new job
    done = _kubectl(["kubectl", "apply", "-f", str(manifest), "-o", "json"])
    wanted = KINDS[kind]
    try:
        answer = json.loads(done)
    except ValueError:
        raise MgpuError(f"kubectl apply -f {manifest} answered no JSON: {done.strip()[:200]}") from None
    items = answer.get("items", [answer]) if isinstance(answer, dict) else []
    found = next((i for i in items if isinstance(i, dict) and i.get("kind") == wanted), None)
    if found is None:
        raise MgpuError(f"kubectl apply -f {manifest} created no {wanted}")
    meta = found.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    job = KubeJob(wanted, str(meta.get("name")), namespace, str(manifest), run_under)
    record_path(manifest).write_text(json.dumps(asdict(job), indent=2) + "\n")
    return job


def record_path(manifest: Path) -> Path:
    """Where the record of the job applied from ``manifest`` lives: beside it."""
    return manifest.with_name(manifest.stem + RECORD_SUFFIX)


def submitted(log_root: str | Path) -> list[KubeJob]:
    """The Kubernetes jobs submitted from ``log_root`` (``<log_root>/mgpu/jobs/*.kubernetes.json``)."""
    paths = sorted(jobs_dir(log_root).glob(f"*{RECORD_SUFFIX}"))
    return [job for job in map(_record, paths) if job is not None]


def _record(path: Path) -> KubeJob | None:
    try:
        return KubeJob(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None  # none, or not a record of ours: nothing to follow


def job_state(job: KubeJob) -> JobState:
    """Ask ``kubectl`` for the job and say its state (``gone`` when it finds none)."""
    try:
        answer = _kubectl(get_argv(job), timeout=PROBE_TIMEOUT_S)
    except _NotFound:
        return JobState("gone", f"kubectl finds no {job.kind} {job.name} in {job.namespace}")
    try:
        return state_of(json.loads(answer))
    except (ValueError, AttributeError, TypeError) as exc:
        raise MgpuError(f"kubectl get {job.kind} {job.name} answered something unreadable: {exc}") from None


def cancel(job: KubeJob, *, now: bool = False) -> bool:
    """Delete the job once its pods have stopped and saved (``now``: force them, no save); False: gone."""
    wait = "false" if now else "true"
    try:
        _kubectl(["kubectl", "delete", RESOURCES[job.kind], job.name, "-n", job.namespace,
                  "--cascade=foreground", f"--wait={wait}"])  # fmt: skip
    except _NotFound:
        return False
    if now:  # grace period 0: the kubelet kills the pods at once (the job's own would not reach them:
        # the garbage collector deletes them with theirs)
        _kubectl(["kubectl", "delete", "pods", "-n", job.namespace, "-l", pod_selector(job),
                  "--grace-period=0", "--force"])  # fmt: skip
    return True


def logs_argv(job: KubeJob, *, follow: bool) -> list[str]:
    """``kubectl logs`` of node 0's pod, its whole console (``follow``: ``-f``, until the pod ends)."""
    tail = ["-f"] if follow else []
    if job.kind == "PyTorchJob":
        return ["kubectl", "logs", *tail, "-n", job.namespace, f"{job.name}-master-0"]
    # Node 0 is completion index 0 of the JobSet's indexed Job. By selector, kubectl shows only 10
    # lines unless told otherwise.
    node0 = f"{pod_selector(job)},batch.kubernetes.io/job-completion-index=0"
    return ["kubectl", "logs", *tail, "-n", job.namespace, "-l", node0, "--tail=-1"]


def rows_with_kubernetes(root: Path, rows: Sequence[RunRow]) -> list[RunRow]:
    """``rows`` (under ``root``) after a row per Kubernetes job submitted there, newest first."""
    jobs = submitted(root)
    if not jobs or shutil.which("kubectl") is None:
        return list(rows)
    mine = []
    for job in jobs:
        try:
            state = job_state(job)
        except MgpuError as exc:
            state = JobState("unknown", str(exc))  # kubectl's words
        where = jobs_dir(root) / record_path(Path(job.manifest)).name
        recorded = where.stat().st_mtime if where.exists() else 0.0
        visible = bool(job.run_under) and Path(job.run_under).is_dir()
        mine.append(RunRow(
            folder=job.run_under or job.manifest, status=state.state, started=recorded, job_state=state.state,
            job_reason=state.reason, job_name=job.name, job_kind=job.kind, job_namespace=job.namespace,
            in_pods=not visible,
        ))  # fmt: skip
    return sorted(mine, key=lambda row: row.started, reverse=True) + list(rows)


class _NotFound(MgpuError):
    """kubectl said the object does not exist."""


def _kubectl(argv: list[str], timeout: float | None = None) -> str:
    if shutil.which(argv[0]) is None:
        raise UsageError(
            "this needs kubectl, which is not on PATH here; run it where kubectl reaches the cluster, "
            "or print the manifest with mgpu dry-run … --emit trainjob"
        )
    # No stdin: kubectl must never wait for an answer (a login prompt) that no one will type.
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise MgpuError(f"{' '.join(argv[:3])} did not answer within {timeout:.0f} s") from None
    if done.returncode == 0:
        return done.stdout
    said = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
    if "(NotFound)" in said:  # the API server's answer for this object; not a missing resource type
        raise _NotFound(said)
    # client-go's log lines (``E1203 14:02:11.68 … memcache.go:265] …``) repeat before kubectl's
    # own sentence; the sentence is what the user needs.
    own = [line for line in said.splitlines() if line.strip() and not _KLOG.match(line)]
    raise MgpuError(f"{' '.join(argv[:3])} failed: {' '.join(own) if own else said.splitlines()[-1]}")


_KLOG = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")
