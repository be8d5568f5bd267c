"""The run ledger: ``events.jsonl``, every event of a run's life as one typed JSON line.

A run folder (:mod:`.layout`) holds :data:`~.layout.EVENTS`, an append-only file of events, one JSON
object per line. Every event carries the schema version ``v`` (:data:`VERSION`), its ``kind``,
``time`` (epoch seconds), the ``host`` of the writer and the ``attempt`` it belongs to (None before
the first attempt and after the last), then the fields of its kind: each kind is one dataclass
below (:data:`KINDS`), read and written by :mod:`.records`.

**One writer**, node 0's ``mgpu`` (:mod:`isaaclab_mgpu.launcher.ledger`; why: ``docs/ledger.md``,
"Who writes it"). :class:`Appender` writes each event with one ``os.write`` of one line on a file
opened ``O_APPEND``: a reader sees whole lines, and at most the last one torn.

**Reading.** :func:`read` skips what it cannot use and counts it (:class:`Ledger`): a torn or
non-JSON line, an unknown ``kind``, a newer ``v`` (a later mgpu's kinds are not guessed at), an
event whose fields do not read. An older or equal version reads by the rules of :mod:`.records`.

:func:`fold` turns a run's events into its story's figures (:class:`Fold`): the status, the
iterations reached and the total, restarts, requeues, faults, stragglers. :func:`summary_of`
folds them into the run's ``summary.json`` (:class:`~.summary.Summary`): node 0's mgpu writes
nothing else there, so the file always equals the fold of the ledger beside it.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

from isaaclab_mgpu.contract import records
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.layout import EVENTS
from isaaclab_mgpu.contract.records import Count, NonNegative

__all__ = [
    "KINDS",
    "VERSION",
    "Appender",
    "Event",
    "Fold",
    "Ledger",
    "fold",
    "line",
    "parse",
    "read",
    "summarize",
    "summary_of",
]

#: The schema's version: a reader skips events of a newer one.
VERSION = 1
#: Bytes at the start of a line that hold its kind, as :func:`line` writes it (``{"v":1,"kind":…``).
_KIND_AT = 48


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event carries; :attr:`kind` names the dataclass of its own fields."""

    kind: ClassVar[str] = ""

    time: float
    """When it happened (epoch seconds)."""

    host: str | None = None
    """The writer's host (node 0's)."""

    attempt: Count | None = None
    """The attempt it belongs to (0: the launch's first); None outside any attempt."""


@dataclass(frozen=True, kw_only=True)
class Launched(Event):
    """``mgpu train`` started (node 0)."""

    kind: ClassVar[str] = "launched"

    argv: tuple[str, ...] = ()
    """mgpu's command line as typed (``mgpu train …``), when known."""

    essentials: Mapping[str, Any] = field(default_factory=dict)
    """The resolved launch: library, framework, task, world size, nodes, device, ``total``, restarts."""

    job_id: str | None = None
    """The SLURM job, under SLURM."""

    job_restart: Count | None = None
    """SLURM's restart count of the job (0: first start; more: a requeued job)."""

    run_dir: str | None = None
    """The run folder (None until the ranks name it: Isaac Lab's)."""

    continued_from: int | None = None
    """The iteration this launch continues the run at (a resume or a requeued job); None: a new run."""

    pid: int | None = None
    """This ``mgpu``'s process id (with :attr:`pid_started`: is the launcher still there)."""

    pid_started: float | None = None
    """When that process started (epoch seconds, as the system counts it)."""


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(Event):
    """One launch of the ranks began."""

    kind: ClassVar[str] = "attempt_started"

    world_size: Count | None = None
    """Ranks in the run (all nodes)."""

    local_ranks: tuple[Count, ...] = ()
    """Global ranks on this node."""

    launcher_pid: int | None = None
    """The pid of the launcher (torchrun or jaxrun)."""

    resumes_at: Count | None = None
    """The iteration of the checkpoint it starts from (0: from scratch); None when not known yet."""

    log_dir: str | None = None
    """The attempt's launcher log folder (the per-rank folders are under it)."""


@dataclass(frozen=True, kw_only=True)
class RanksUp(Event):
    """Every local rank has reported: the ranks met (rendezvous complete) and are starting."""

    kind: ClassVar[str] = "ranks_up"

    pids: Mapping[str, int] = field(default_factory=dict)
    """Each local rank's process id, by global rank (JSON keys are strings)."""

    logs: str | None = None
    """The folder of the per-rank log folders (``<local rank>/stdout.log``), once the launcher made it."""


@dataclass(frozen=True)
class RankPace:
    """One rank's pace over a progress event's window."""

    rank: Count
    busy_s: NonNegative | None = None
    """Seconds it worked per iteration."""
    wait_s: NonNegative | None = None
    """Seconds it waited in collectives per iteration."""


@dataclass(frozen=True, kw_only=True)
class Progress(Event):
    """Where the run is (every few seconds while it trains, not every iteration)."""

    kind: ClassVar[str] = "progress"

    iteration: Count
    """Iterations the run has completed (the lowest rank's report)."""

    s_per_iteration: NonNegative | None = None
    """Seconds per iteration over the window since the last progress event."""

    env_steps_per_s: NonNegative | None = None
    """Env-steps per second of all ranks (rank 0's account, steady)."""

    reward: float | None = None
    """The latest mean episode reward (rank 0's account)."""

    ranks: tuple[Annotated[RankPace, records.ROW], ...] = ()
    """Per-rank busy/wait seconds per iteration over the window, where the ranks time them."""


@dataclass(frozen=True, kw_only=True)
class Checkpoint(Event):
    """A checkpoint the launcher found in the run folder."""

    kind: ClassVar[str] = "checkpoint"

    iteration: Count
    """Iterations it holds."""

    path: str | None = None
    """Its file (None: a library's own checkpoint, known by its iteration alone)."""

    bytes: Count | None = None
    """Its size."""


@dataclass(frozen=True, kw_only=True)
class StragglerNamed(Event):
    """A rank named as the straggler (its busy time stays well above the others')."""

    kind: ClassVar[str] = "straggler"

    rank: Count
    rank_host: str | None = None
    """Where it runs."""
    slower: NonNegative | None = None
    """Its busy time over the other ranks' median."""
    iteration: Count | None = None
    """The last iteration of the window compared."""


@dataclass(frozen=True, kw_only=True)
class Stall(Event):
    """The stall watch's verdict: the run hung."""

    kind: ClassVar[str] = "stall"

    verdict: str
    """The verdict's headline."""

    ranks: tuple[Count, ...] = ()
    """The ranks it blames."""

    phase: str | None = None
    """``rendezvous``, ``startup`` or ``training``."""


@dataclass(frozen=True, kw_only=True)
class Fault(Event):
    """An attempt ended by a failed or hung rank."""

    kind: ClassVar[str] = "fault"

    outcome: str = "failed"
    """``failed`` or ``hung``."""

    rank: Count | None = None
    """The failed (or stalled) rank, when known."""

    rank_host: str | None = None
    """Where it ran."""

    exit_code: int | None = None
    """Its exit code (a signal's death: None, see :attr:`signal`)."""

    signal: str | None = None
    """The signal that ended it (``SIGKILL``)."""

    reason: str | None = None
    """The reason line: the rank's own words, or how it failed."""

    iteration: Count | None = None
    """Iterations the run had completed when the attempt ended."""

    checkpoint: Count | None = None
    """The newest checkpoint's iteration then."""

    lost: Count | None = None
    """Iterations done after that checkpoint: work a restart repeats."""

    failure_class: str | None = None
    """mgpu's class of the failure (``cuda_oom``, …; :mod:`~isaaclab_mgpu.launcher.verdicts`), if judged."""

    restartable: bool | None = None
    """Whether a restart can mend it (False: mgpu spends no restart on it)."""

    fix: str | None = None
    """What to change, when mgpu knows."""


def after_iteration(done: int | None) -> str:
    """A fault's place as told everywhere: `` after iteration 4`` (the live line: "during iteration 5")."""
    if done is None:
        return ""
    return " before the first iteration" if done == 0 else f" after iteration {done}"


@dataclass(frozen=True, kw_only=True)
class Restart(Event):
    """mgpu restarts the run after a fault; :attr:`attempt` is the new attempt's number."""

    kind: ClassVar[str] = "restart"

    from_iteration: Count | None = None
    """The checkpoint's iteration the new attempt resumes from (0: from scratch)."""

    lost: Count | None = None
    """Iterations the restart repeats."""

    restarts_left: Count | None = None
    """Restarts left after this one."""


@dataclass(frozen=True, kw_only=True)
class Shrink(Event):
    """A node was lost and the run goes on on fewer nodes (``--min_nodes``), before its :class:`Restart`."""

    kind: ClassVar[str] = "shrink"

    lost_nodes: tuple[Count, ...] = ()
    """The lost nodes' ranks in the world before."""

    lost_hosts: tuple[str, ...] = ()
    """Their hosts."""

    nodes_before: Count | None = None
    """Nodes before."""

    nodes_after: Count | None = None
    """Nodes after."""

    ranks_before: Count | None = None
    """World size before."""

    ranks_after: Count | None = None
    """World size after."""

    num_envs_before: Count | None = None
    """Environments per rank before (None: not known to mgpu)."""

    num_envs_after: Count | None = None
    """Environments per rank after."""

    from_iteration: Count | None = None
    """The checkpoint's iteration the smaller world resumes from."""

    keeper_before: Count | None = None
    """The node rank (before) of the node that keeps the record now: not 0 when node 0 was lost."""


@dataclass(frozen=True, kw_only=True)
class Requeue(Event):
    """The ranks saved a checkpoint and stopped on the requeue signal."""

    kind: ClassVar[str] = "requeue"

    signal: str | None = None
    """The requeue signal (``SIGUSR1``)."""

    iteration: Count | None = None
    """Iterations completed (the checkpoint's)."""

    job_id: str | None = None
    """The SLURM job requeued."""

    requeued: bool = False
    """True when ``scontrol requeue`` took it; False: stopped, to be continued by hand (exit 75)."""

    said: str | None = None
    """What ``scontrol requeue`` said when it failed."""


@dataclass(frozen=True, kw_only=True)
class Interrupted(Event):
    """The run was stopped as asked (Ctrl-C, SIGTERM, SIGHUP)."""

    kind: ClassVar[str] = "interrupted"

    iteration: Count | None = None
    """Iterations completed."""

    exit_code: int | None = None
    """What ``mgpu train`` exits with (130, or 143 for SIGTERM)."""

    cancelled: bool = False
    """Asked by ``mgpu cancel`` (:data:`~.layout.CANCEL`): a stop to continue, so the run is ``stopped``."""


@dataclass(frozen=True, kw_only=True)
class DriftNamed(Event):
    """The ranks' states stopped matching (the worker's drift check, ``--drift_interval``)."""

    kind: ClassVar[str] = "drift"

    rank: Count
    """The rank whose state differs."""

    component: str
    """What differs first: ``policy``, ``optimizer`` or ``normalizer``."""

    since_iteration: Count | None = None
    """The last check that found every rank equal."""

    found_at: Count | None = None
    """The iteration whose check found it."""

    stopped: bool = False
    """The run stopped on it (``--on_drift stop``: a checkpoint saved, exit 65)."""


@dataclass(frozen=True, kw_only=True)
class Finished(Event):
    """The run reached its end."""

    kind: ClassVar[str] = "finished"

    iteration: Count | None = None
    """Iterations completed."""

    seconds: NonNegative | None = None
    """Wall seconds of this launch."""


@dataclass(frozen=True, kw_only=True)
class Failed(Event):
    """The run ended failing: its last attempt failed or hung and no restart followed."""

    kind: ClassVar[str] = "failed"

    exit_code: int | None = None
    """What ``mgpu train`` exits with."""

    reason: str | None = None
    """Why, in one line."""

    iteration: Count | None = None
    """Iterations completed."""


@dataclass(frozen=True, kw_only=True)
class Account(Event):
    """Rank 0's account of its attempt, as it last reported it (written when it changed)."""

    kind: ClassVar[str] = "account"

    fields: Mapping[str, Any] = field(default_factory=dict)
    """``summary.json`` fields rank 0 knows, as JSON, merged by :func:`~.summary.absorb`."""

    rewards_from: Count = 0
    """Completed iterations before the first of ``fields["mean_rewards"]``."""


@dataclass(frozen=True, kw_only=True)
class Noted(Event):
    """``summary.json`` fields the launcher sets: the attempts, how the run ended, stragglers, drift."""

    kind: ClassVar[str] = "summary"

    fields: Mapping[str, Any] = field(default_factory=dict)
    """The fields (:class:`~.summary.Summary`'s names, as JSON)."""


#: Every kind this version knows, by name.
KINDS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        Launched, AttemptStarted, RanksUp, Progress, Checkpoint, StragglerNamed, Stall, Fault,
        Restart, Shrink, Requeue, DriftNamed, Interrupted, Finished, Failed, Account, Noted,
    )
}  # fmt: skip


def line(event: Event) -> bytes:
    """``event`` as one line of strict JSON (``v`` and ``kind`` first), ending in a newline."""
    return (json.dumps(as_json(event), allow_nan=False, separators=(",", ":")) + "\n").encode()


def parse(text: str) -> Event | None:
    """One line read as an event; None when it is skipped (see :class:`Ledger`)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    v, cls = data.get("v"), KINDS.get(data.get("kind"))  # type: ignore[arg-type]
    if cls is None or not isinstance(v, int) or isinstance(v, bool) or v > VERSION:
        return None
    return records.read(cls, data).whole()


@dataclass(frozen=True)
class Ledger:
    """A run's events as read, and what was skipped."""

    events: tuple[Event, ...]
    """The events that read, in the file's order."""

    skipped: int = 0
    """Lines skipped: torn, not JSON, unknown kind, newer version, fields that do not read."""


def read(folder: str | Path, kinds: Collection[str] | None = None) -> Ledger | None:
    """The ledger in run folder ``folder``; None when it has none. ``kinds``: only these, others unparsed."""
    try:
        raw = (Path(folder) / EVENTS).read_bytes()
    except OSError:
        return None
    out: list[Event] = []
    skipped = 0
    passed = [f'"kind":"{k}"'.encode() for k in KINDS if kinds is not None and k not in kinds]
    for chunk in raw.splitlines():
        if not chunk.strip() or any(p in chunk[:_KIND_AT] for p in passed):
            continue
        event = parse(chunk.decode("utf-8", errors="replace"))
        if event is None:
            skipped += 1
        else:
            out.append(event)
    return Ledger(tuple(out), skipped)


def as_json(event: Event) -> dict[str, Any]:
    """``event`` as JSON-ready data, as its line holds it."""
    return {"v": VERSION, "kind": event.kind, **records.plain(event)}


class Appender:
    """Appends events to one ledger file: each one ``os.write`` of one line on an ``O_APPEND`` fd."""

    def __init__(self, path: str | Path) -> None:
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, event: Event) -> bool:
        """Write ``event``; False when the file cannot take it (closed, disk full): the run goes on."""
        if self._fd is None:
            return False
        try:
            os.write(self._fd, line(event))
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the file (further events are dropped)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


@dataclass(frozen=True)
class Fold:
    """A run's story in figures, folded from its events (:func:`fold`)."""

    status: str = "running"
    """One of :data:`~.summary.STATUSES`."""

    iteration: int | None = None
    """Iterations the run has completed, as far as the events say."""

    total: int | None = None
    """Iterations the run is to reach (``--max_iterations``), when known."""

    launches: int = 0
    """``mgpu train`` launches of the run (1 + resumes and requeued jobs)."""

    attempts: int = 0
    """Attempts over every launch."""

    restarts: int = 0
    """Restarts mgpu made."""

    requeues: int = 0
    """Stops at a checkpoint on the requeue signal (requeued jobs, or stops to continue by hand)."""

    faults: tuple[Fault, ...] = ()
    """Every fault, in order."""

    stragglers: tuple[int, ...] = ()
    """Ranks named as stragglers."""

    lost: int = 0
    """Iterations repeated by restarts."""

    shrinks: int = 0
    """Restarts on fewer nodes after a lost node (``--min_nodes``)."""

    exit_code: int | None = None
    """The last launch's exit code, once it ended."""

    world_size: int | None = None
    """Ranks, from the last attempt or launch."""

    essentials: Mapping[str, Any] = field(default_factory=dict)
    """The first launch's resolved essentials."""

    started: float | None = None
    """When the first launch started."""


def fold(events: Iterable[Event]) -> Fold:
    """The figures of a run's story (see :class:`Fold`)."""
    f = Fold()
    faults: list[Fault] = []
    stragglers: list[int] = []
    for e in events:
        changes: dict[str, Any] = {}
        it = getattr(e, "iteration", None)
        if isinstance(it, int) and not isinstance(e, StragglerNamed):
            changes["iteration"] = max(it, f.iteration or 0)
        if isinstance(e, Launched):
            ess = e.essentials
            total = ess.get("total")
            changes.update(
                launches=f.launches + 1, status="running", exit_code=None,
                total=total if isinstance(total, int) else f.total,
                essentials=f.essentials or ess, started=f.started if f.started is not None else e.time,
            )  # fmt: skip
            ws = ess.get("world_size")
            if isinstance(ws, int):
                changes["world_size"] = ws
        elif isinstance(e, AttemptStarted):
            changes.update(attempts=f.attempts + 1, status="running")
            if e.world_size is not None:
                changes["world_size"] = e.world_size
        elif isinstance(e, Fault):
            faults.append(e)
        elif isinstance(e, Restart):
            changes.update(restarts=f.restarts + 1, lost=f.lost + (e.lost or 0))
        elif isinstance(e, Shrink):
            changes["shrinks"] = f.shrinks + 1
            if e.ranks_after is not None:
                changes["world_size"] = e.ranks_after
        elif isinstance(e, StragglerNamed):
            if e.rank not in stragglers:
                stragglers.append(e.rank)
        elif isinstance(e, DriftNamed) and e.stopped:
            changes.update(status="drifted", exit_code=65)
        elif isinstance(e, Requeue):
            changes.update(requeues=f.requeues + 1, status="requeued" if e.requeued else "stopped")
            changes["exit_code"] = 75
        elif isinstance(e, Failed):
            hung = bool(faults) and faults[-1].outcome == "hung"
            changes.update(status="hung" if hung else "failed", exit_code=e.exit_code)
        elif isinstance(e, Interrupted):
            changes.update(status="stopped" if e.cancelled else "interrupted", exit_code=e.exit_code)
        elif isinstance(e, Finished):
            changes.update(status="finished", exit_code=0)
        f = dataclasses.replace(f, **changes)
    return dataclasses.replace(f, faults=tuple(faults), stragglers=tuple(stragglers))


def summary_of(events: Iterable[Event]) -> summaries.Summary:
    """The run's ``summary.json``: its events folded (one fold, the only way the file is made)."""
    s = summaries.Summary()
    for e in events:
        s = summarize(s, e)
    return s


def summarize(s: summaries.Summary, e: Event) -> summaries.Summary:
    """``s`` after event ``e`` (``launched``, ``attempt_started``, ``account``, ``summary`` change it)."""
    if isinstance(e, Launched):
        # What a launch sets, when it knows it; every other field is kept.
        ess = e.essentials
        launch = {
            "backend": ess.get("library"), "framework": ess.get("framework"), "task": ess.get("task"),
            "world_size": ess.get("world_size"), "total_iterations": ess.get("total"),
            "launcher_pid": e.pid, "launcher_host": e.host, "launcher_started": e.pid_started,
            "slurm_job_id": e.job_id,
        }  # fmt: skip
        fresh = summaries.Summary.from_json(launch)
        known = {k: v for k in launch if (v := getattr(fresh, k)) is not None}
        started = s.started_at if s.started_at is not None else e.time
        return s.replace(**known, status="running", started_at=started, run_dir=s.run_dir or e.run_dir)
    if isinstance(e, AttemptStarted):
        if s.start_iteration is None and e.resumes_at is not None:
            # Where the run began, before any account: a first launch lost before rank 0 gave one
            # (mgpu SIGKILLed) still counts from here when a later launch continues it.
            return s.replace(status="running", attempt=e.attempt, start_iteration=e.resumes_at)
        return s.replace(status="running", attempt=e.attempt)
    if isinstance(e, Account | Noted):
        given = [k for k in e.fields if k in _FIELDS]
        read = summaries.Summary.from_json({k: e.fields[k] for k in given})
        if isinstance(e, Account):
            return summaries.absorb(s, read, given, e.rewards_from)
        return s.replace(**{k: getattr(read, k) for k in given})
    return s


_FIELDS = frozenset(f.name for f in dataclasses.fields(summaries.Summary)) - {"extra", "invalid"}
