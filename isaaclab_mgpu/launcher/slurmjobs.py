"""A SLURM run followed from the login node: what was submitted, what SLURM says of it, and the run.

``mgpu submit`` records each submission (:class:`Submission`) beside its job file, in
``<log_root>/mgpu/jobs/<name>-<job id>.json``. A run names its jobs itself:
every ``launched`` event of its ledger carries the SLURM job id (a requeued job keeps its id, a
resubmitted one adds a new one), so run ↔ jobs is read from the ledger, and a submission whose job
no run names yet is a job still queued (or starting).

:func:`probe_jobs` is the one place that asks SLURM (``squeue``, then ``sacct`` for a job ``squeue``
no longer knows); without ``squeue`` (not a SLURM login node) or when it fails, it answers None and
everything here behaves as without SLURM. :func:`with_jobs` is pure over what was probed: a
submission no run names yet whose job is alive is a row of its own (``queued`` or ``starting``), and
a run whose record says ``running`` while its newest job is no longer alive (:attr:`JobState.alive`)
is ``lost``, wherever it is read (docs/commands.md, "mgpu runs").

:func:`find_target` turns what a user names into a run folder and/or its submission; :class:`Follower`
reads rank 0's console of every attempt in order (``mgpu logs``, across restarts, requeues and
resubmissions). :func:`scancel` is how ``mgpu cancel`` stops a job (docs/commands.md, "mgpu cancel").
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract.errors import MgpuError, UsageError
from isaaclab_mgpu.contract.files import write_json
from isaaclab_mgpu.contract.layout import jobs_dir
from isaaclab_mgpu.launcher.runs import RunRow, find_runs, jobs_of, summary_folders

#: SLURM job states in which the job's processes may still run or run again.
ALIVE = frozenset(
    {
        *("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD"),
        *("REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"),
    }
)
#: Run statuses after which nothing more is written (``requeued``: the job goes on).
ENDED = ("finished", "failed", "hung", "interrupted", "stopped", "drifted", "lost")
#: Seconds a probe of SLURM may take.
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Submission:
    """One ``mgpu submit``: a SLURM job that trains (or continues) a run."""

    job_id: str
    """SLURM's job id (``sbatch --parsable``)."""

    name: str
    """The job's name (``--job_name``), by which ``mgpu logs`` and ``mgpu cancel`` find it."""

    job_file: str
    """The job file submitted (absolute)."""

    cwd: str
    """The folder it was submitted from: the job's working directory (absolute)."""

    run_under: str
    """The experiment folder the run lives in (``<log_root>/<library>/<experiment>``, as given)."""

    submitted_at: float
    """When (epoch seconds)."""

    command: tuple[str, ...] = ()
    """The command that submits it again (continuing the run: ``--resume auto``)."""


@dataclass(frozen=True)
class JobState:
    """What SLURM says of one job."""

    job_id: str
    state: str
    """SLURM's state (``PENDING``, ``RUNNING``, ``CANCELLED`` …); empty when SLURM does not know the job."""

    reason: str = ""
    """Why a pending job waits (``Resources``, ``BeginTime``, ``ReqNodeNotAvail`` …)."""

    @property
    def alive(self) -> bool:
        """True while the job's processes may run or run again."""
        return self.state in ALIVE


def record(log_root: str | Path, sub: Submission) -> Path:
    """Write ``sub`` beside its job file (``<name>-<job id>.json``); its path."""
    path = jobs_dir(log_root) / f"{sub.name}-{sub.job_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, dataclasses.asdict(sub))
    return path


def submissions(log_root: str | Path) -> list[Submission]:
    """The submissions recorded under ``log_root``, newest first (unreadable records skipped)."""
    out = []
    for path in jobs_dir(log_root).glob("*.json"):
        # AttributeError: JSON that is not an object (a list, a number) has no .get
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = json.loads(path.read_text())
            data["command"] = tuple(data.get("command") or ())
            out.append(Submission(**data))
    return sorted(out, key=lambda s: s.submitted_at, reverse=True)


def probe_jobs(job_ids: Iterable[str]) -> dict[str, JobState] | None:
    """What SLURM says of each job (``squeue``, then ``sacct``); None when ``squeue`` is missing or fails."""
    ids = sorted({j for j in job_ids if j})
    if not ids:
        return {}
    if shutil.which("squeue") is None:
        return None
    listed = _squeue(["-j", ",".join(ids)])
    if listed == "unknown":  # a single job id squeue no longer knows fails the query: ask for all
        listed = _squeue([])
    if not isinstance(listed, dict):
        return None
    out = {j: st for j, st in listed.items() if j in ids}
    out.update(_sacct([j for j in ids if j not in out]))
    return {job: out.get(job, JobState(job, "")) for job in ids}


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _squeue(select: Sequence[str]) -> dict[str, JobState] | str | None:
    """Every job ``squeue`` lists for ``select``; ``"unknown"``: it does not know the job; None: failed."""
    done = _run(["squeue", "-h", "-t", "all", *select, "-o", "%i|%T|%r"])
    if done is None:
        return None
    if done.returncode != 0:
        return "unknown" if "invalid job id" in (done.stderr or "").lower() else None
    out = {}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            reason = "" if parts[2] in ("None", "(null)") else parts[2]
            out[parts[0]] = JobState(parts[0], parts[1], reason)
    return out


def _sacct(ids: Sequence[str]) -> dict[str, JobState]:
    if not ids or shutil.which("sacct") is None:
        return {}
    done = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State"])
    if done is None or done.returncode != 0:
        return {}
    out = {}
    for line in done.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job in ids and state:
            out[job] = JobState(job, state.split()[0])  # "CANCELLED by 0"
    return out


def with_jobs(
    rows: Sequence[RunRow], subs: Sequence[Submission], states: Mapping[str, JobState] | None
) -> list[RunRow]:
    """``rows`` told what SLURM says, and a row per live submission no run names yet (pure)."""
    if states is None:
        return list(rows)
    named = {j for r in rows for j in r.jobs}
    out: list[RunRow] = []
    for sub in subs:
        st = states.get(sub.job_id)
        if sub.job_id in named or st is None or not st.alive:
            continue
        out.append(RunRow(
            folder=sub.run_under, status="queued" if st.state == "PENDING" else "starting",
            started=sub.submitted_at, jobs=(sub.job_id,), job_state=st.state, job_reason=st.reason,
            job_name=sub.name,
        ))  # fmt: skip
    for r in rows:
        st = states.get(r.jobs[-1]) if r.jobs else None
        if st is None:
            out.append(r)
            continue
        status = "lost" if r.status == "running" and not st.alive else r.status
        state = st.state or "unknown"
        out.append(dataclasses.replace(r, status=status, job_state=state, job_reason=st.reason))
    return out


def rows_with_jobs(root: Path, rows: Sequence[RunRow]) -> list[RunRow]:
    """``rows`` (under ``root``) with what SLURM says of their jobs and of the jobs submitted there."""
    subs = submissions(root)
    wanted = [r.jobs[-1] for r in rows if r.jobs] + [s.job_id for s in subs]
    return with_jobs(rows, subs, probe_jobs(wanted))  # nothing wanted: nothing probed, rows unchanged


def run_status(status: str, events: Sequence[ev.Event]) -> str:
    """A run's ``status`` told what SLURM says: ``lost`` when it says running and its newest job is over."""
    jobs = jobs_of(events) if status == "running" else ()
    if not jobs:
        return status
    states = probe_jobs(jobs[-1:])
    return "lost" if states is not None and not states[jobs[-1]].alive else status


# -- a run named by the user ----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a user named for ``mgpu logs`` or ``mgpu cancel``: a run, its newest submission, or both."""

    folder: Path | None
    """The run folder (None: its job has not started the run yet)."""

    submission: Submission | None
    """The newest submission of that name (None: named by its folder)."""

    jobs: tuple[str, ...] = ()
    """The run's SLURM jobs, oldest first (with a submission's job when no run names it yet)."""


def find_target(name: str, root: Path) -> Target:
    """The run ``name`` names: a run folder, a submitted job's name or a run folder's name under ``root``."""
    path = Path(name)
    if path.is_dir() and ((path / "events.jsonl").is_file() or (path / "summary.json").is_file()):
        return Target(path, None, _ledger_jobs(path))
    sub = next((s for s in submissions(root) if s.name == name), None)  # the newest
    if sub is not None:
        folder = run_of_job(sub.job_id, root)
        jobs = _ledger_jobs(folder) if folder is not None else ()
        return Target(folder, sub, jobs if sub.job_id in jobs else (*jobs, sub.job_id))
    found = max(
        (f for f in summary_folders(root) if f.name == name or f.name.endswith(f"_{name}")),
        key=lambda f: f.name,
        default=None,
    )
    if found is not None:
        return Target(found, None, _ledger_jobs(found))
    raise UsageError(
        f"no run or submitted job named {name!r} under {root}: give a run folder, or the --job_name of "
        f"an mgpu submit (mgpu runs {root} lists them)"
    )


def run_of_job(job_id: str, root: Path) -> Path | None:
    """The run folder under ``root`` whose ledger names SLURM job ``job_id`` (None: none yet)."""
    return next((Path(r.folder) for r in find_runs(root) if job_id in r.jobs), None)


def _ledger_jobs(folder: Path) -> tuple[str, ...]:
    ledger = ev.read(folder, kinds=("launched",))
    return jobs_of(ledger.events) if ledger is not None else ()


# -- rank 0's console -------------------------------------------------------------------------------


def rank0_logs(folder: Path, events: Sequence[ev.Event]) -> list[Path]:
    """Rank 0's console files of every attempt of the run, in order, from its ``ranks_up`` events."""
    base = _job_dir(folder, events)  # base / an absolute logs path is that path
    out = [
        elastic.rank_dir(base / e.logs, 0) / elastic.STDOUT
        for e in events
        if isinstance(e, ev.RanksUp) and e.logs
    ]
    return [p for p in dict.fromkeys(out) if p.is_file()]


def _job_dir(folder: Path, events: Sequence[ev.Event]) -> Path:
    """The folder the job ran in: ``folder`` less its recorded (relative) ``run_dir``."""
    run_dir = next((e.run_dir for e in events if isinstance(e, ev.Launched) and e.run_dir), None)
    here = folder.resolve()
    if run_dir is None or Path(run_dir).is_absolute():
        return here
    depth = len(Path(run_dir).parts)
    return here.parents[depth - 1] if 0 < depth <= len(here.parents) else here


class Follower:
    """Reads rank 0's console of a run as it grows, file after file (attempts, requeues, resubmits)."""

    def __init__(self, folder: Path) -> None:
        """Follow the run in ``folder``."""
        self.folder = folder
        self._offsets: dict[Path, int] = {}

    def read(self) -> tuple[list[str], ev.Fold | None, tuple[ev.Event, ...]]:
        """The whole new lines since the last read, and the run's figures and events now."""
        ledger = ev.read(self.folder)
        events = ledger.events if ledger is not None else ()
        lines: list[str] = []
        for path in rank0_logs(self.folder, events):
            start = self._offsets.get(path, 0)
            with contextlib.suppress(OSError), open(path, "rb") as fh:
                fh.seek(start)
                chunk = fh.read()
                whole, sep, _ = chunk.rpartition(b"\n")  # a torn last line is read whole next time
                if sep:
                    lines += whole.decode(errors="replace").split("\n")
                self._offsets[path] = start + len(whole) + len(sep)
        return lines, (ev.fold(events) if ledger is not None else None), events


def wait(check, timeout: float, every: float = 1.0):
    """``check()``'s first true value within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value or None
        time.sleep(every)


def scancel(job_id: str, *, now: bool) -> None:
    """Cancel ``job_id``: SIGTERM to every step (``now``: SIGKILL to every process of the job first)."""
    if shutil.which("scancel") is None:
        raise MgpuError("mgpu cancel needs SLURM's scancel, not on PATH here: run it on a login node")
    if now:
        _run(["scancel", "--full", "--signal=KILL", job_id])
    done = _run(["scancel", job_id])
    if done is None or done.returncode != 0:
        said = (done.stderr or done.stdout).strip() if done is not None else "no answer"
        raise MgpuError(f"scancel {job_id} failed: {said or 'no output'}")
