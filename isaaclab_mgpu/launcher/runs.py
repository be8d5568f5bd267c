"""Reading run folders afterwards: the list ``mgpu runs`` shows, and the folder a launch will use.

The layout is :mod:`isaaclab_mgpu.contract.layout`'s, ``summary.json`` is
:mod:`isaaclab_mgpu.contract.summary`'s record (a field of the wrong type shows as unknown, named in
:attr:`RunRow.invalid`, never as a traceback), written by the run's ledger (:mod:`.ledger`) alone.

:func:`find_runs` reads only summary files (one directory walk, three levels deep at most, no
descent below a folder that holds a ``summary.json``, no symlink followed), newest first by the
folder names' stamps, and only as many as it is asked for, so listing thousands of runs stays fast.
A run that says ``running`` but whose launcher (recorded by pid, host and start time) is gone from
this host shows as ``lost``: a SIGKILLed launcher cannot settle its run. :func:`linked` gives each
row the chain of runs it continues in folders of their own (``continues``), back to the first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.errors import MgpuError
from isaaclab_mgpu.contract.layout import EVENTS, STAMP_FORMAT, SUMMARY
from isaaclab_mgpu.contract.summary import Steady, Summary
from isaaclab_mgpu.contract.text import has_control

#: Statuses of a run that stopped before its total and may be continued (``--resume auto``).
UNFINISHED = ("interrupted", "failed", "hung", "stopped", "requeued", "lost", "drifted")


def create_run_folder(experiment_dir: Path, stamp: str, run_name: str | None) -> Path:
    """Create this run's folder exclusively: ``<stamp>[_<run_name>]``, else ``<stamp>-2[_…]``, ``-3``…"""
    experiment_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        name = stamp if n == 1 else f"{stamp}-{n}"
        folder = experiment_dir / (f"{name}_{run_name}" if run_name else name)
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
            return folder
    raise OSError(f"no free run folder name under {experiment_dir} for {stamp}")


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """One run as ``mgpu runs`` lists it (from its summary.json alone); None: not known."""

    folder: str
    library: str | None = None
    framework: str | None = None
    task: str | None = None
    world_size: int | None = None
    iterations: int | None = None
    s_per_iteration: float | None = None
    """Steady seconds per iteration over every segment, else the run's steady pace, else its mean."""
    env_steps_per_s: float | None = None
    """Steady env-steps/s of all ranks, chosen as ``s_per_iteration`` is."""
    warmup_s: float | None = None
    """Seconds of the warm-up iterations (compilation, first allocations), apart from the pace."""
    reward_first: float | None = None
    reward_last: float | None = None
    checksums_equal: bool | None = None
    status: str
    """One of the summary statuses, or ``unknown`` when the summary's is not one."""

    started: float
    """Start time (seconds since the epoch): the summary's ``started_at``, else the folder's stamp."""

    invalid: tuple[str, ...] = ()
    """This row's fields whose summary value was invalid: ``None`` (``started``: the folder's stamp)."""

    restarts: int = 0
    """Restarts mgpu made in this run (each recorded in its summary.json)."""

    exit_status: int | None = None
    """What ``mgpu train`` exited with, when the run ended."""

    rank_exit_code: int | None = None
    """The failed rank's own code when it collided with a reserved one (``exit_status`` then 1)."""

    continues: str | None = None
    """The run folder this run continues in a folder of its own (its summary's ``continues``)."""

    chain: tuple[str, ...] = ()
    """Every earlier folder of the run this one continues, oldest first (following ``continues``)."""

    continued_in: str | None = None
    """A listed run that continues this one in a folder of its own."""

    segments: int = 0
    """Stretches of training in this folder (launches, restarts, requeued jobs, resumes)."""

    train_time_s: float | None = None
    """Seconds in the training loop over every segment."""

    wait_share: float | None = None
    """The collectives' share of an iteration, mean over the ranks (its summary's ``timing``)."""

    stragglers: tuple[int, ...] = ()
    """Ranks named as stragglers during the run."""

    reached: int | None = None
    """Iterations the run has completed (its summary's ``end_iteration``, else its ledger's)."""

    total: int | None = None
    """Iterations the run is to reach, when known (its summary's, else its ledger's)."""

    requeues: int = 0
    """Stops at a checkpoint on the requeue signal (its ledger's ``requeue`` events)."""

    ledger: bool = False
    """The run folder holds a ledger (``events.jsonl``: ``mgpu runs <folder>`` tells its story)."""

    drift: str | None = None
    """The first drift between the ranks, short: ``rank 1 normalizer @20`` (its summary's ``drift``)."""

    nodes: int | None = None
    """Nodes the run trains on (its ledger's launch), when known."""

    jobs: tuple[str, ...] = ()
    """The SLURM jobs that trained it, oldest first (its ledger's launches; a requeue keeps the id)."""

    job_state: str | None = None
    """SLURM's state of its newest job (``mgpu runs`` on a SLURM login node; None: not asked)."""

    job_reason: str | None = None
    """Why that job waits, as SLURM says (``Resources``, ``BeginTime`` …), when it is pending."""

    job_name: str | None = None
    """The submitted job's name (a job whose run has not started yet, or a Kubernetes job)."""

    job_kind: str | None = None
    """``TrainJob`` or ``PyTorchJob``: a row for a Kubernetes job (None: not one)."""

    job_namespace: str | None = None
    """The Kubernetes job's namespace."""

    in_pods: bool = False
    """The folder is where the run lives in the Kubernetes job's pods, not visible from here."""

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return asdict(self)


#: The summary field behind each row field that can be invalid.
_ROW_FIELDS = {
    "library": "backend",
    "framework": "framework",
    "task": "task",
    "world_size": "world_size",
    "iterations": "iterations",
    "s_per_iteration": "s_per_iteration",
    "env_steps_per_s": "env_steps_per_s",
    "reward_first": "first_mean_reward",
    "reward_last": "last_mean_reward",
    "checksums_equal": "checksums_equal",
    "status": "status",
    "started": "started_at",
    "wait_share": "timing",
    "stragglers": "stragglers",
    "drift": "drift",
}


def status_of(s: Summary) -> str:
    """The run's status: ``lost`` when ``running`` but its launcher on this host is gone."""
    if "status" in s.invalid:
        return "unknown"
    if s.status == "running" and _launcher_gone(s.launcher_pid, s.launcher_host, s.launcher_started):
        return "lost"
    if s.status is not None:
        return s.status
    # Summaries written before statuses existed are finished or interrupted.
    if s.interrupted:
        return "interrupted"
    return "finished" if (s.exit_status or 0) == 0 else "failed"


def _launcher_gone(pid: int | None, host: str | None, started: float | None) -> bool:
    """True when ``pid`` on ``host`` (this one), started at ``started``, is gone."""
    if pid is None or host != socket.gethostname():
        return False
    import psutil

    try:
        now = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    return started is not None and abs(now - started) > 1.0


def ledger_status(events: Sequence[ev.Event], fold: ev.Fold) -> str:
    """The run's status by its ledger: the fold's, ``lost`` when its ``mgpu`` is gone from this host."""
    if fold.status != "running":
        return fold.status
    last = next((e for e in reversed(events) if isinstance(e, ev.Launched)), None)
    if last is not None and _launcher_gone(last.pid, last.host, last.pid_started):
        return "lost"
    return "running"


#: The kinds a table row needs from a ledger: the progress and checkpoint lines are passed over.
_ROW_KINDS = frozenset(ev.KINDS) - {"progress", "checkpoint", "ranks_up"}


def _folder_time(folder: Path) -> float:
    """When the run started, from its folder name's stamp, else the summary's modification time."""
    try:
        return time.mktime(time.strptime(folder.name[:19], STAMP_FORMAT))
    except ValueError:
        with contextlib.suppress(OSError):
            return (folder / SUMMARY).stat().st_mtime
    return 0.0


def row(folder: Path, s: Summary, ledger: ev.Ledger | None = None) -> RunRow:
    """A :class:`RunRow` from one summary, with its restarts, requeues and total from its ledger."""
    steady = s.steady or Steady()
    run = s.whole
    if run is not None and run.segments > 1 and run.steady_s_per_iteration:
        pace, rate = run.steady_s_per_iteration, run.steady_env_steps_per_s
    else:
        pace = steady.s_per_iteration or s.s_per_iteration
        rate = s.env_steps_rate
    r = RunRow(
        folder=str(folder),
        library=s.backend,
        framework=s.framework,
        task=s.task,
        world_size=s.world_size,
        iterations=s.iterations,
        s_per_iteration=pace,
        env_steps_per_s=rate,
        warmup_s=steady.warmup_s,
        reward_first=s.first_mean_reward,
        reward_last=s.last_mean_reward,
        checksums_equal=s.checksums_equal,
        status=status_of(s),
        started=s.started_at if s.started_at is not None else _folder_time(folder),
        invalid=tuple(name for name, field in _ROW_FIELDS.items() if field in s.invalid),
        restarts=len(s.restarts),
        exit_status=s.exit_status,
        rank_exit_code=s.rank_exit_code,
        continues=s.continues,
        segments=run.segments if run is not None else 0,
        train_time_s=run.train_time_s if run is not None else s.train_time_s,
        wait_share=s.timing.collective_share if s.timing is not None else None,
        stragglers=tuple(x.rank for x in s.stragglers),
        reached=s.end_iteration,
        total=s.total_iterations,
        drift=f"rank {s.drift.rank} {s.drift.component} @{s.drift.found_at}" if s.drift is not None else None,
    )
    return _with_ledger(r, ledger) if ledger is not None else r


def _with_ledger(r: RunRow, ledger: ev.Ledger) -> RunRow:
    f = ev.fold(ledger.events)
    reached = r.reached if r.reached is not None else f.iteration
    nodes = str(f.essentials.get("nnodes") or "")
    return dataclasses.replace(
        r, restarts=max(r.restarts, f.restarts), requeues=f.requeues, reached=reached,
        total=r.total if r.total is not None else f.total, ledger=True, jobs=jobs_of(ledger.events),
        nodes=int(nodes) if nodes.isascii() and nodes.isdigit() else None,
    )  # fmt: skip


def jobs_of(events: Sequence[ev.Event]) -> tuple[str, ...]:
    """The SLURM jobs a run's ledger names, oldest first (one per job, its requeues counted once)."""
    return tuple(dict.fromkeys(e.job_id for e in events if isinstance(e, ev.Launched) and e.job_id))


def ledger_row(folder: Path, ledger: ev.Ledger) -> RunRow:
    """A :class:`RunRow` from a ledger alone (a ``--script`` run keeps no summary)."""
    f = ev.fold(ledger.events)
    ess = f.essentials
    program = ess.get("script") or ess.get("module")
    r = RunRow(
        folder=str(folder), library=_text(ess.get("library")), framework=_text(ess.get("framework")),
        task=_text(ess.get("task")) or (Path(program).name if isinstance(program, str) else None),
        world_size=f.world_size, status=ledger_status(ledger.events, f),
        started=f.started if f.started is not None else _folder_time(folder),
        exit_status=f.exit_code, stragglers=f.stragglers,
    )  # fmt: skip
    return _with_ledger(r, ledger)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Story:
    """One run's ledger, for ``mgpu runs <run folder>``."""

    folder: str
    events: tuple[ev.Event, ...]
    """Every event, in order."""
    skipped: int
    """Lines of the ledger that did not read (torn, unknown kind, newer version)."""
    fold: ev.Fold
    """The figures folded from the events."""
    status: str
    """The fold's status, or ``lost`` (see :func:`ledger_status`)."""

    def as_json(self) -> dict[str, Any]:
        """The story as JSON-ready data: the figures, then every event as its line holds it."""
        f = self.fold
        return {
            "folder": self.folder, "status": self.status, "iteration": f.iteration, "total": f.total,
            "launches": f.launches, "attempts": f.attempts, "restarts": f.restarts,
            "requeues": f.requeues, "faults": len(f.faults), "lost_iterations": f.lost,
            "stragglers": list(f.stragglers), "exit_code": f.exit_code, "skipped": self.skipped,
            "events": [ev.as_json(e) for e in self.events],
        }  # fmt: skip


def story(folder: Path) -> Story | None:
    """The story of the run in ``folder`` from its ledger; None when it has none."""
    ledger = ev.read(folder)
    if ledger is None:
        return None
    f = ev.fold(ledger.events)
    return Story(str(folder), ledger.events, ledger.skipped, f, ledger_status(ledger.events, f))


#: Links :func:`chain_of` follows at most (a chain of continued runs is a few folders long).
MAX_CHAIN = 64


def chain_of(continues: str | None, known: dict[str, Summary]) -> tuple[str, ...]:
    """The folders a run continues, oldest first (a loop or an unreadable folder ends the chain)."""
    chain: list[str] = []
    while continues and continues not in chain and len(chain) < MAX_CHAIN:
        chain.append(continues)
        s = known.get(_key(continues)) or summaries.read(continues)
        continues = s.continues if s is not None else None
    return tuple(reversed(chain))


def _key(folder: str | Path) -> str:
    try:
        return str(Path(folder).resolve())
    except OSError:
        return str(folder)


def linked(rows: list[RunRow], known: dict[str, Summary]) -> list[RunRow]:
    """``rows`` with their chains: who each continues and, among the rows, which run continues it."""
    later = {_key(r.continues): r.folder for r in rows if r.continues}
    return [
        dataclasses.replace(r, chain=chain_of(r.continues, known), continued_in=later.get(_key(r.folder)))
        for r in rows
    ]


def last_folder(rows: list[RunRow], root: str) -> str:
    """The newest run's folder, for ``"$(mgpu runs --last)"``; raise when none, or not handed back intact."""
    if not rows:
        raise MgpuError(f"no run under {root} (looked for */*/*/summary.json)")
    folder = rows[0].folder
    if has_control(folder):
        raise MgpuError(
            f"the newest run's folder {folder!r} has a control character (a newline?) in its name, "
            "which $(mgpu runs --last) would not give back intact; rename it, or use mgpu runs --json"
        )
    return folder


def summary_folders(root: Path, depth: int = 3) -> Iterator[Path]:
    """Folders under ``root`` (itself included, ``depth`` levels down) with a summary.json or a ledger."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    if any(e.name in (SUMMARY, EVENTS) and e.is_file() for e in entries):
        yield Path(root)
        return
    if depth == 0:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
            yield from summary_folders(Path(e.path), depth - 1)


def find_runs(root: Path, limit: int = 0) -> list[RunRow]:
    """The newest ``limit`` runs (0: all) under ``root``, ordered by folder stamps before any is read."""
    folders = sorted(summary_folders(Path(root)), key=lambda f: (_folder_time(f), str(f)), reverse=True)
    rows: list[RunRow] = []
    known: dict[str, Summary] = {}
    for folder in folders:
        found = summaries.read(folder)
        ledger = ev.read(folder, kinds=_ROW_KINDS)
        if found is not None:
            rows.append(row(folder, found, ledger))
            if found.continues:
                known[_key(folder)] = found
        elif ledger is not None:
            rows.append(ledger_row(folder, ledger))
        if limit and len(rows) >= limit:
            break
    return linked(rows, known)
