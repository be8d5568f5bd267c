"""The stall watch: tell a hung run from a slow one, on this node, from the ranks' progress reports.

Every rank of ``mgpu train`` reports its stage through :mod:`isaaclab_mgpu.progress` (a file per
rank in the folder ``MGPU_PROGRESS_DIR``). :class:`StallMonitor` reads those files every half
second and :func:`judge` decides:

Start-up (some local rank has not finished its first iteration yet)
    The first iteration holds just-in-time compilation (skrl JAX's first update compiles for tens
    of seconds on a loaded CPU), so it counts as start-up. The node counts as stalled when *no*
    local rank reported anything for ``startup_timeout`` seconds (from the launch when nothing was
    reported yet): one rank still compiling keeps the others, waiting for it in the first
    broadcast, from being cut off.
Training
    A rank counts as stalled when it reported nothing for ``stall_timeout`` seconds. Ranks move in
    lock-step (every iteration ends in collectives), so a slow but progressing rank makes the
    others wait less than one of its iterations; a rank writing a checkpoint counts as progressing
    while its process keeps writing.
Auto bound (``--stall_timeout auto``, the default; :class:`AutoBound`)
    The training bound follows the run's steady iterations, and is its cap while any rank saves
    (the rules: ``docs/supervision.md``, "The auto bound"); :meth:`StallMonitor.bound_news` words it.
Output fallback (``--stall_on_silence``)
    A rank that never reports (a user script without the helper) is judged by the last time its
    per-rank log files grew, against ``stall_timeout`` once it printed something.

Whom to blame, in this order: a local rank whose process is *stopped* (SIGSTOP, a debugger, a
frozen node); else the local rank(s) furthest behind (earliest iteration and stage) when the
local ranks disagree; else, on a multi-node run, a peer on another node (each node's mgpu sees
only its own ranks, which then all wait in the same collective); else every local rank, waiting
in the same place (a communication hang: ``mgpu probe-nccl`` tells). A multi-node rank whose
collective fails after waiting half the bound (:meth:`StallMonitor.after_failure`) tells the same
story later: the peer's node stopped its stalled rank and the connection broke.

Progress files are read as data, never trusted: a malformed one counts as absent, and
:meth:`~isaaclab_mgpu.contract.progress.Reports.rejected` names it once. Nothing here prints or
signals (see :mod:`.hang`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import psutil

from isaaclab_mgpu.contract.progress import (
    AUTO_FACTOR,
    AUTO_FLOOR_S,
    DONE,
    ITERATION_STAGES,
    STARTUP_STAGES,
    Report,
    Reports,
)

__all__ = ["RankState", "Report", "Stall", "StallMonitor", "StallOptions", "judge", "stack_tail"]

#: Stages in which a rank waits for its peers (a collective), as opposed to computing alone.
COLLECTIVE_STAGES = ("init", "trainer", "broadcast", "update", "sync", "finish")
#: What each stage is, for the report.
STAGE_TEXT = {
    "start": "start (imports)",
    "init": "init_process_group (rendezvous of the ranks)",
    "environment": "creating the environments",
    "trainer": "creating the trainer (skrl JAX: jax.distributed.initialize)",
    "broadcast": "the first parameter broadcast",
    "iteration": "an iteration",
    "rollout": "rollout",
    "update": "update (gradient all-reduce)",
    "sync": "the all-gather of iteration statistics",
    "checkpoint": "writing a checkpoint",
    "finish": "finishing (final checksums, last checkpoint)",
}
STACK_LINES = 12


@dataclass(frozen=True)
class StallOptions:
    """What the stall watch bounds, and what it knows about the launch."""

    stall_timeout: float = 300.0
    """Seconds without training progress before a rank counts as stalled (0: off). With ``auto``,
    the most the auto bound may grow to (:func:`isaaclab_mgpu.contract.progress.auto_cap`)."""

    auto: bool = False
    """``--stall_timeout auto``: the bound follows the run's steady iterations (:class:`AutoBound`)."""

    startup_timeout: float = 900.0
    """Seconds without start-up progress on this node before the launch counts as stalled (0: off)."""

    on_silence: bool = False
    """Judge ranks that never report by their output instead."""

    reports_expected: bool = True
    """The ranks run mgpu's worker, which always reports (a user script may not)."""

    multi_node: bool = False
    """Other nodes run ranks of this job (their mgpu watches them)."""


@dataclass(frozen=True)
class RankState:
    """One local rank at the moment of the verdict."""

    rank: int
    """Global rank."""

    local_rank: int | None
    """Rank on this node."""

    host: str | None
    """Host it runs on."""

    pid: int | None
    """Its process id, when it reported."""

    stage: str | None
    """Last stage it reported; None when it never reported."""

    iteration: int | None
    """Iteration of that stage (1-based), once training began."""

    warmup: bool
    """That iteration is the first its process runs (counted as start-up)."""

    quiet_s: float
    """Seconds since its last report (or output, with the output fallback)."""

    process: str
    """``running``, ``sleeping``, ``stopped``, ``gone``, ... (psutil's status), or ``unknown``."""

    stalled: bool
    """Past its bound."""

    by_output: bool = False
    """Judged by output silence, not by progress reports."""

    stack: str | None = None
    """Innermost frames of its main thread, dumped when the stall was found."""

    stack_file: str | None = None
    """Where its whole stack dump is (beside its per-rank logs)."""

    timed: int | None = None
    """Steady iterations its busy total covers (its last report's)."""

    busy_s: float | None = None
    """Their busy seconds."""

    def where(self) -> str:
        """``iteration 4, update (gradient all-reduce)`` or ``start-up: creating the environments``."""
        if self.stage is None:
            return "never reported (still starting, or the launcher never started it)"
        what = STAGE_TEXT.get(self.stage, self.stage)
        if self.stage in STARTUP_STAGES:
            return f"start-up: {what}"
        first = " (its first: start-up)" if self.warmup else ""
        return f"iteration {self.iteration}{first}, {what}" if self.iteration is not None else what

    def name(self) -> str:
        """``rank 1 (local rank 1) on node7``."""
        local = f" (local rank {self.local_rank})" if self.local_rank is not None else ""
        host = f" on {self.host}" if self.host else ""
        return f"rank {self.rank}{local}{host}"


@dataclass(frozen=True)
class Stall:
    """The verdict: this node's run is hung, where, and whom it blames."""

    phase: str
    """``training``, ``startup`` or ``rendezvous`` (no local rank ever reported)."""

    cause: str
    """``stopped``, ``behind``, ``peer`` (on another node), ``same-place`` or ``silent``."""

    timeout_s: float
    """The bound that was passed."""

    ranks: tuple[RankState, ...]
    """Every local rank."""

    culprits: tuple[int, ...]
    """Global ranks blamed (empty when the cause is on another node)."""

    failed_after_wait: bool = False
    """A local rank's collective failed after the long wait (the peer was stopped meanwhile)."""

    elsewhere: str | None = None
    """The culprit on another node, as its mgpu published it (:mod:`isaaclab_mgpu.launcher.peers`)."""

    def blamed(self) -> list[RankState]:
        """The blamed ranks' states."""
        return [r for r in self.ranks if r.rank in self.culprits]

    def progressing(self) -> list[RankState]:
        """Local ranks that reported recently (within half the bound)."""
        return [r for r in self.ranks if r.stage is not None and r.quiet_s < self.timeout_s / 2]

    def headline(self) -> str:
        """One line: who stalled, where, for how long, and the likely cause."""
        bound = f"{self.timeout_s:g} s"
        if self.phase == "rendezvous":
            return (
                f"no rank of this node reported any start-up progress within {bound}: the launcher is "
                "still in the rendezvous (a node never joined) or its ranks never started"
            )
        if self.cause == "peer":
            first = self.ranks[0] if self.ranks else None
            waiting = f"{first.name()} waited {first.quiet_s:.0f} s in {first.where()}" if first else ""
            broke = "; then its collective failed" if self.failed_after_wait else ""
            what = (
                "the ranks of another node never arrived"
                if self.phase == "startup"
                else "a peer on another node stopped reporting"
            )
            if self.elsewhere:
                return f"{what}: {self.elsewhere}; here {waiting}{broke}"
            return (
                f"{what}: no rank of this node is stopped or behind, {waiting}{broke} "
                "(this mgpu watches only its own node; see the other nodes' output)"
            )
        blamed = self.blamed()
        names = ", ".join(r.name() for r in blamed)
        if self.cause == "silent":
            return f"no output from {names} for {bound} (output watch, --stall_on_silence)"
        first = blamed[0]
        what = "no start-up progress" if self.phase == "startup" else "no progress"
        where = f"in {first.where()}" if first.stage is not None else first.where()
        text = f"{names}: {what} for {first.quiet_s:.0f} s (bound {bound}), {where}"
        if self.cause == "stopped":
            text += "; its process is stopped (SIGSTOP, a debugger, or a frozen machine)"
        elif self.cause == "behind":
            text += "; the other local ranks are past it, waiting for it"
        elif self.cause == "same-place":
            text += "; every local rank waits at the same point: a communication hang"
        return text


#: Stages in which rank 0 writes (a checkpoint, the final one): the auto bound is its cap then.
SAVE_STAGES = ("checkpoint", "finish")
#: Steady iterations a rank must have timed before the auto bound trusts their median.
AUTO_MIN_TIMED = 2


@dataclass
class AutoBound:
    """``--stall_timeout auto``: 20 x the median steady iteration, at least 30 s, at most ``cap``."""

    # Each read adds, per rank, the mean wall seconds of the iterations it timed since the last read.

    cap: float
    _seen: dict[int, tuple[int, float]] = field(default_factory=dict)
    _samples: deque[float] = field(default_factory=lambda: deque(maxlen=256))

    def update(self, reports: Mapping[int, Report]) -> None:
        """Take the ranks' latest totals."""
        for r, rep in reports.items():
            if rep.timed is None or rep.wall_s is None:
                continue
            timed, wall = self._seen.get(r, (0, 0.0))
            if rep.timed > timed:
                self._samples.append((rep.wall_s - wall) / (rep.timed - timed))
            if rep.timed != timed:
                self._seen[r] = (rep.timed, rep.wall_s)

    @property
    def steady_s(self) -> float | None:
        """The median steady iteration's seconds, once known."""
        if not self._seen or min(t for t, _ in self._seen.values()) < AUTO_MIN_TIMED:
            return None
        return statistics.median(self._samples) if self._samples else None

    def bound(self) -> float:
        """The bound now."""
        steady = self.steady_s
        return self.cap if steady is None else min(self.cap, max(AUTO_FLOOR_S, AUTO_FACTOR * steady))

    def describe(self) -> str:
        """``30 s (20x the 0.08 s steady iteration, floor 30 s)``."""
        steady = self.steady_s
        if steady is None:
            return f"{self.cap:g} s (no steady iteration yet)"
        what = f"{AUTO_FACTOR:g}x the {steady:.3g} s steady iteration, floor {AUTO_FLOOR_S:g} s"
        return f"{self.bound():.3g} s ({what})"


def _rank_state(
    rank: int,
    rep: Report | None,
    local: int | None,
    host: str | None,
    quiet: float,
    process: Callable[[int | None], str],
    stalled: bool,
    by_output: bool = False,
) -> RankState:
    """``rank`` as its last report ``rep`` shows it (``local`` and ``host`` when it never reported)."""
    return RankState(
        rank=rank,
        local_rank=rep.local_rank if rep else local,
        host=(rep.host if rep else None) or host,
        pid=rep.pid if rep else None,
        stage=rep.stage if rep else None,
        iteration=rep.iteration if rep else None,
        warmup=rep.warmup if rep else False,
        quiet_s=quiet,
        process=process(rep.pid) if rep else "unknown",
        stalled=stalled,
        by_output=by_output,
        stack_file=rep.stack_file if rep else None,
        timed=rep.timed if rep else None,
        busy_s=rep.busy_s if rep else None,
    )


def position(report: Report | None) -> tuple[int, int, int]:
    """A sortable place in the run: never reported < start-up stages < iterations < done."""
    if report is None:
        return (-1, 0, 0)
    if report.stage in STARTUP_STAGES:
        return (0, STARTUP_STAGES.index(report.stage), 0)
    if report.stage in ("finish", DONE):
        return (2, report.iteration or 0, 1 if report.stage == DONE else 0)
    order = ITERATION_STAGES.index(report.stage) if report.stage in ITERATION_STAGES else 0
    if report.warmup:  # a process's first iteration (JIT compilation) is still start-up
        return (0, len(STARTUP_STAGES) + order, 0)
    return (1, report.iteration or 0, order)


def judge(
    options: StallOptions,
    ranks: tuple[int, ...],
    reports: Mapping[int, Report],
    clocks: Mapping[int, float],
    now: float,
    started: float,
    process: Callable[[int | None], str],
    host: str | None = None,
) -> Stall | None:
    """The verdict for this node's ``ranks`` at ``now`` (epoch seconds), or None while all is well."""
    # clocks: each rank's last sign of progress (its report, later while it writes a checkpoint,
    # or its last output with the fallback).
    ranks = tuple(sorted(set(ranks) | set(reports)))
    watched = [r for r in ranks if r in reports or options.reports_expected or options.on_silence]
    if not watched:
        return None
    silent = {r for r in watched if r not in reports and options.on_silence and not options.reports_expected}
    # A silent-watched rank that printed nothing yet is still starting, like one that never reported.
    startup = any(r not in clocks if r in silent else position(reports.get(r))[0] < 1 for r in watched)

    def state(r: int, stalled: bool, quiet: float) -> RankState:
        return _rank_state(
            r, reports.get(r), ranks.index(r), host, quiet, process, stalled, by_output=r in silent
        )

    active = [r for r in watched if not (r in reports and reports[r].stage == DONE)]
    if startup:
        if not options.startup_timeout:
            return None
        newest = max([started, *(clocks[r] for r in active if r in clocks)])
        if now - newest < options.startup_timeout:
            return None
        bound = options.startup_timeout
        states = [state(r, r in active, now - clocks.get(r, started)) for r in watched]
        stalled = [s for s in states if s.stalled]
        phase = "startup" if reports else "rendezvous"
    else:
        if not options.stall_timeout:
            return None
        bound = options.stall_timeout
        quiet = {r: now - max(clocks.get(r, started), started) for r in watched}
        states = [state(r, r in active and quiet[r] >= bound, quiet[r]) for r in watched]
        stalled = [s for s in states if s.stalled]
        if not stalled:
            return None
        phase = "training"
    if phase == "rendezvous":
        return Stall(phase, "same-place", bound, tuple(states), tuple(s.rank for s in stalled))
    if stalled and all(s.by_output for s in stalled):
        return Stall(phase, "silent", bound, tuple(states), tuple(s.rank for s in stalled))
    stopped = [s for s in states if s.process == psutil.STATUS_STOPPED]
    candidates = [s for s in states if s.rank in active and not s.by_output]
    places = {s.rank: position(reports.get(s.rank)) for s in candidates}
    if stopped:
        return Stall(phase, "stopped", bound, tuple(states), tuple(s.rank for s in stopped))
    if len(set(places.values())) > 1:
        lowest = min(places.values())
        behind = tuple(r for r, p in places.items() if p == lowest)
        return Stall(phase, "behind", bound, tuple(states), behind)
    if options.multi_node:
        return Stall(phase, "peer", bound, tuple(states), ())
    return Stall(phase, "same-place", bound, tuple(states), tuple(s.rank for s in stalled))


def stack_tail(text: str, lines: int = STACK_LINES) -> str | None:
    """The innermost frames of the main thread from one faulthandler dump (``all_threads``)."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(("Current thread 0x", "Thread 0x", "Stack (most recent call first)")):
            blocks.append([line])
        elif blocks and line.strip():
            blocks[-1].append(line)
    if not blocks:
        return None
    # The signal handler runs in the main thread, which faulthandler lists as the current one.
    main = next((b for b in blocks if b[0].startswith("Current thread")), blocks[0])
    return "\n".join(main[: lines + 1])


def progress_folder() -> str:
    """A new node-local folder for the progress files (tmpfs when there is one)."""
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix="mgpu-progress-", dir=base)


@dataclass
class StallMonitor:
    """Reads this node's progress files and keeps each rank's last sign of progress."""

    options: StallOptions
    """The bounds."""

    folder: str
    """The progress folder the ranks write into (``MGPU_PROGRESS_DIR``)."""

    ranks: tuple[int, ...]
    """Global ranks started on this node, in local-rank order."""

    started: float = field(default_factory=time.time)
    """When the launch started (epoch seconds): the clock before any report."""

    host: str | None = None
    """This host's name, for ranks that never reported."""

    saving_elsewhere: Callable[[], bool] = lambda: False
    """Multi-node: a rank on another node is writing a checkpoint (what its mgpu published)."""

    files: Reports = field(init=False)
    """The progress files as last read (:meth:`~isaaclab_mgpu.contract.progress.Reports.read`)."""

    _writes: dict[int, tuple[int, float]] = field(default_factory=dict)
    _auto: AutoBound | None = None
    _saved_at: float | None = None
    _bound_said = False

    def __post_init__(self) -> None:
        self.files = Reports(self.folder)
        if self.options.auto:
            self._auto = AutoBound(cap=self.options.stall_timeout)

    @property
    def bound(self) -> float:
        """The training bound now (the auto bound as it stands, else ``stall_timeout``)."""
        return self._auto.bound() if self._auto is not None else self.options.stall_timeout

    def bound_news(self) -> str | None:
        """The auto bound in words, once, as soon as the run's steady iterations give it."""
        if self._auto is None or self._bound_said or self._auto.steady_s is None:
            return None
        self._bound_said = True
        return self._auto.describe()

    def dead(self) -> tuple[Report, ...]:
        """Ranks of mgpu's worker whose process ended without their done report: they died."""
        # The worker reports done at every end, an interrupted one too; a process found gone has
        # its report read once more: it may have written done between the last read and its exit.
        if not self.options.reports_expected:
            return ()
        ended = [r for r in self.files.last.values() if r.stage != DONE and process_status(r.pid) in _ENDED]
        if not ended:
            return ()
        last = self.files.read()
        return tuple(r for r in ended if r.rank in last and last[r.rank].stage != DONE)

    def check(
        self, now: float | None = None, output_times: Mapping[int, float] | None = None
    ) -> Stall | None:
        """Read the reports and judge; None while every rank progresses."""
        now = time.time() if now is None else now
        reports = self.files.read()
        clocks: dict[int, float] = {r: rep.time for r, rep in reports.items()}
        for r, rep in reports.items():
            if rep.stage == "checkpoint" and rep.pid is not None:
                clocks[r] = max(clocks[r], self._last_write(rep.pid, now))
        for r, t in (output_times or {}).items():
            if r not in reports:
                clocks[r] = t
        options = self.options
        if self._auto is not None:
            self._auto.update(reports)
            if any(rep.stage in SAVE_STAGES for rep in reports.values()) or self.saving_elsewhere():
                self._saved_at = now  # a save's seconds are bound by the cap, for every rank
            bound = self._auto.cap if self._saved_at == now else self._auto.bound()
            if self._saved_at is not None:  # the ranks that waited for the save count from its end
                clocks = {r: max(t, self._saved_at) for r, t in clocks.items()}
            options = replace(options, stall_timeout=bound)
        return judge(options, self.ranks, reports, clocks, now, self.started, process_status, self.host)

    def states(self) -> tuple[RankState, ...]:
        """Every local rank as its last report shows it now (nothing judged): what this node shares."""
        now = time.time()
        reports = self.files.last
        quiet = {r: now - (reports[r].time if r in reports else self.started) for r in self.ranks}
        return tuple(
            _rank_state(r, reports.get(r), local, self.host, quiet[r], process_status, False)
            for local, r in enumerate(self.ranks)
        )

    def _last_write(self, pid: int, now: float) -> float:
        # A checkpoint write of many minutes is progress: the rank's process keeps writing.
        try:
            written = psutil.Process(pid).io_counters().write_chars
        except (psutil.Error, AttributeError, OSError):
            return 0.0
        last = self._writes.get(pid)
        if last is None or written != last[0]:
            self._writes[pid] = (written, now)
            return now if last is not None else 0.0
        return last[1]

    def after_failure(
        self, local_rank: int, now: float | None = None, min_wait_s: float | None = None
    ) -> Stall | None:
        """A multi-node verdict for a local rank whose collective failed after waiting ``min_wait_s``."""
        # min_wait_s: by default half the bound.
        if not (self.options.multi_node and self.options.stall_timeout):
            return None
        bound = self.bound
        now = time.time() if now is None else now
        reports = self.files.last or self.files.read()
        rep = next((r for r in reports.values() if r.local_rank == local_rank), None)
        if rep is None or rep.stage not in COLLECTIVE_STAGES or position(rep)[0] != 1:
            return None
        waited = now - rep.time
        if waited < (bound / 2 if min_wait_s is None else min_wait_s):
            return None
        gone = lambda pid: "gone"  # noqa: E731
        states = tuple(
            _rank_state(r.rank, r, None, None, now - r.time, gone if r is rep else process_status, r is rep)
            for r in sorted(reports.values(), key=lambda r: r.rank != rep.rank)
        )
        return Stall("training", "peer", bound, states, (), failed_after_wait=True)

    def remove(self) -> None:
        """Delete the progress folder (rank 0's last account read first)."""
        self.files.read_account()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)


#: psutil statuses of a process that has ended (a zombie is one its parent has not reaped yet).
_ENDED = ("gone", "zombie", "dead")


def process_status(pid: int | None) -> str:
    """psutil's status of ``pid`` (``stopped`` for a SIGSTOPped process), or ``gone``."""
    if not isinstance(pid, int):
        return "unknown"
    try:
        return str(psutil.Process(pid).status())
    except psutil.Error:
        return "gone"
