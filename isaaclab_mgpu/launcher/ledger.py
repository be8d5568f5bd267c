"""The run's one ledger writer: node 0's ``mgpu train`` appends every event of the run to its
``events.jsonl`` (the kinds and the one-writer rule: :mod:`isaaclab_mgpu.contract.events`).

``mgpu train`` makes one :class:`RunLedger` per launch (:func:`for_launch`) and hands it down: the
command layer writes ``launched`` and, in ``conclude``, the end (``requeue`` before ``scontrol
requeue``, which cancels the job step); the attempts loop (:mod:`.attempts`) writes each attempt's
events from what its supervisor already reads (the ranks' progress reports and rank 0's account,
each ``account`` event with only the rewards not sent before): no second channel. ``progress``
comes every :data:`PROGRESS_S` seconds while the iteration moves, and once as an attempt ends.

Where the ledger goes and how summary.json folds it: docs/ledger.md ("Where it is", "summary.json
is the ledger's fold"); here :func:`write_summary` is the package's one writer of the file,
:meth:`RunLedger.open` the place where events waiting for an Isaac Lab run's folder are written,
and :func:`script_folder` a ``--script`` run's folder. Other nodes' ledgers are off.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract import files, resume
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import RUN_DIR_REPORT
from isaaclab_mgpu.contract.layout import CANCEL, EVENTS, SUMMARY
from isaaclab_mgpu.contract.progress import DONE

if TYPE_CHECKING:
    from isaaclab_mgpu.contract.progress import Report
    from isaaclab_mgpu.launcher.build import Command
    from isaaclab_mgpu.launcher.resolve import ResolvedSpec
    from isaaclab_mgpu.launcher.supervise import Supervisor
    from isaaclab_mgpu.launcher.supervise.stall import Stall

__all__ = [
    "PROGRESS_S",
    "RunLedger",
    "essentials",
    "for_launch",
    "newest_checkpoint",
    "script_folder",
    "write_summary",
]

#: Seconds between two progress events while the run trains (a long run writes a few a minute).
PROGRESS_S = 10.0
#: Seconds between two looks at the run folder's checkpoints and rank 0's account.
_LOOK_S = 2.0
#: Stages after which a rank's reported iteration is complete.
_ENDED = ("finish", DONE)
#: The kinds that change ``summary.json`` (:func:`~isaaclab_mgpu.contract.events.summarize`).
_SUMMARIZED = ("launched", "attempt_started", "account", "summary")


def write_summary(folder: str | Path, summary: summaries.Summary) -> Path:
    """Replace ``folder``'s summary.json with ``summary`` atomically (its one writer); return its path."""
    path = Path(folder) / SUMMARY
    files.write_json(path, summary.to_json())
    return path


def script_folder(cmd: Command) -> Path:
    """A ``--script`` run's folder: this launch's folder of per-rank logs, ``logs/mgpu/<program>/<stamp>``."""
    return Path(os.path.dirname(cmd.log_dir))


def newest_checkpoint(run_dir: Path | None, named_by_rank: bool) -> tuple[int | None, Path | None]:
    """The newest checkpoint's iteration (0: none; None off node 0) and file (None: a library's own)."""
    if run_dir is None:
        return None, None
    if named_by_rank:  # the library's own checkpoints: rank 0's account gave the newest one's iteration
        found = summaries.read(run_dir)
        return (found.checkpoint_iteration if found is not None else None) or 0, None
    newest = resume.newest_whole(run_dir).checkpoint
    if newest is None:
        return 0, None
    return resume.saved_iteration(newest) or 0, newest


class RunLedger:
    """The run's ledger, written by node 0's ``mgpu`` alone; events wait in memory for the folder."""

    def __init__(self, folder: Path | None = None, *, enabled: bool = True, summarized: bool = True) -> None:
        self.enabled = enabled  # False on a node > 0, which writes nothing
        self.summarized = summarized  # False: no summary.json (a --script run has no rank 0 of mgpu's)
        self.folder: Path | None = None
        self.attempt: int | None = None
        self.host = socket.gethostname()
        self._appender: ev.Appender | None = None
        self._waiting: list[ev.Event] = []
        self._window: _Window | None = None
        self._before: tuple[tuple[Mapping[str, Any], ...], ...] = ((), ())
        self.summary = summaries.Summary()
        """The run's summary as folded so far (what summary.json holds once the folder is known)."""
        if folder is not None:
            self.open(folder)

    def open(self, folder: Path) -> None:
        """Start writing into ``folder``'s ledger (the events so far first); later calls do nothing."""
        if not self.enabled or self._appender is not None:
            return
        earlier = ev.read(folder)
        legacy = summaries.read(folder) if earlier is None or not earlier.events else None
        try:
            self._appender = ev.Appender(Path(folder) / EVENTS)
        except OSError:
            self.enabled = False  # the run goes on without its ledger, as with a full disk
            return
        self.folder = Path(folder)
        with contextlib.suppress(OSError):  # an earlier launch's mgpu cancel: this launch goes on
            (self.folder / CANCEL).unlink(missing_ok=True)
        self.summary = ev.summary_of(earlier.events if earlier is not None else ())
        if legacy is not None:  # a summary written before the ledger: its first event, as it was
            self._append(ev.Noted(time=time.time(), host=self.host, fields=legacy.to_json()))
        self._before = (self.summary.attempts, self.summary.restarts)  # earlier launches'
        for event in self._waiting:
            self._append(event)
        self._waiting.clear()

    def write(self, kind: type[ev.Event], **fields: Any) -> None:
        """Append one event of ``kind`` (time, host and attempt added unless given)."""
        if not self.enabled:
            return
        fields.setdefault("attempt", self.attempt)
        event = kind(time=time.time(), host=self.host, **fields)
        if self._appender is None:
            self._waiting.append(event)
        else:
            self._append(event)

    def _append(self, event: ev.Event) -> None:
        assert self._appender is not None and self.folder is not None
        self._appender.append(event)
        if event.kind in _SUMMARIZED:
            self.summary = ev.summarize(self.summary, event)
        if event.kind in _SUMMARIZED and self.summarized:
            with contextlib.suppress(OSError):  # a full disk: the ledger holds it, the run goes on
                write_summary(self.folder, self.summary)

    def note(self, **fields: Any) -> None:
        """Set ``fields`` (:class:`~isaaclab_mgpu.contract.summary.Summary`'s) in the run's summary."""
        plain = summaries.Summary().replace(**fields).to_json()
        self.write(ev.Noted, fields={k: plain[k] for k in fields})

    def record_attempts(self, attempts: Sequence[Any], restarting: bool) -> None:
        """Note the run's attempts and restarts so far in its summary, after earlier launches' records."""
        before, restarts_before = self._before
        # Records written before launches were counted belong to the first one.
        launch = 1 + max((_count(a.get("launch")) for a in before), default=-1)
        ended = list(attempts) if restarting else list(attempts[:-1])
        restarts = tuple({**a.as_json(), "launch": launch, "resumed_from": a.checkpoint} for a in ended)
        now = tuple({**a.as_json(), "launch": launch} for a in attempts)
        self.note(attempts=(*before, *now), restarts=(*restarts_before, *restarts))

    def settle(self, status: str, exit_status: int, **fields: Any) -> None:
        """Record how the run ended when its rank 0 could not: only a summary still ``running``."""
        if (self.summary.status or "running") == "running":
            self.note(status=status, exit_status=exit_status, settled_by="launcher", **fields)

    def close(self) -> None:
        """Stop writing (a ledger never opened drops what waited)."""
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        self.enabled = False

    # -- one attempt -------------------------------------------------------------------------

    def watcher(
        self, number: int, cmd: Command, resumes_at: int | None, run_dir: Path | None, named_by_rank: bool
    ) -> Callable[..., None]:
        """What the attempts loop calls with attempt ``number``'s supervisor: begun, every poll, final."""
        report = cmd.env.get(RUN_DIR_REPORT) if named_by_rank else None

        def watch(sup: Supervisor, begun: bool, *, final: bool = False) -> None:
            nonlocal run_dir
            if run_dir is None and report and self.enabled:
                run_dir = resume.reported_run_dir(report)
                if run_dir is not None:
                    self.open(run_dir)
            if begun:  # the attempt launched its ranks
                self.attempt = number
                ranks = tuple(sorted(cmd.rank_devices))
                self.write(ev.AttemptStarted, world_size=cmd.world_size, local_ranks=ranks,
                           launcher_pid=sup.launcher_pid, resumes_at=resumes_at,
                           log_dir=cmd.log_dir)  # fmt: skip
                self._window = _Window(set(ranks), resumes_at)
            else:
                self.look(sup, run_dir, named_by_rank, final=final)

        return watch

    def look(
        self, sup: Supervisor, run_dir: Path | None, named_by_rank: bool, *, final: bool = False
    ) -> None:
        """What the attempt's supervisor read since the last look as events (``final``: the last progress)."""
        reports, account = sup.reports(), sup.account()  # every poll, as ever (the account's file is cached)
        w = self._window
        if not self.enabled or w is None:
            return
        # A run folder that cannot be read now is read at the next look: the run goes on.
        with contextlib.suppress(OSError):
            now = time.monotonic()
            if not w.up and w.ranks and w.ranks <= set(reports):
                w.up = True
                pids = {str(r): rep.pid for r, rep in sorted(reports.items()) if rep.pid is not None}
                self.write(ev.RanksUp, pids=pids, logs=sup.log_dir)
            for s in sup.stragglers():
                if s.rank not in w.stragglers:
                    w.stragglers.add(s.rank)
                    last = s.iterations[-1] if s.iterations else None
                    self.write(
                        ev.StragglerNamed, rank=s.rank, rank_host=s.host, slower=s.slower, iteration=last
                    )
            if not final and now < w.next_look:
                return
            w.next_look = now + _LOOK_S
            if account is not None and account != w.account:
                self._account(w, account)
            iteration, path = newest_checkpoint(run_dir, named_by_rank)
            if iteration is not None and iteration > 0 and iteration != w.checkpoint:
                w.checkpoint = iteration
                self.write(
                    ev.Checkpoint, iteration=iteration, path=str(path) if path else None, bytes=_size(path)
                )
            if final or now >= w.next_progress:
                self._progress(w, reports, run_dir, now)

    def _account(self, w: _Window, account: Mapping[str, Any]) -> None:
        """Rank 0's account as an event: the rewards it already sent in this attempt left out."""
        rewards = list(account.get("mean_rewards") or ())
        start = _count(account.get("start_iteration"))
        sent = w.sent if start == w.account_start else []
        kept = len(sent) if rewards[: len(sent)] == sent else 0
        self.write(ev.Account, fields={**account, "mean_rewards": rewards[kept:]}, rewards_from=start + kept)
        w.account, w.sent, w.account_start = account, rewards, start

    def _progress(self, w: _Window, reports: Mapping[int, Report], run_dir: Path | None, now: float) -> None:
        done = [_completed(r) for r in reports.values() if r.iteration is not None]
        if not done:
            return
        iteration = min(done)
        s = self.summary if run_dir is not None else None
        if s is not None and s.end_iteration is not None and s.attempt == self.attempt:
            iteration = max(iteration, s.end_iteration)
        if w.iteration is not None and iteration <= w.iteration:
            return
        w.next_progress = now + PROGRESS_S
        paces = tuple(p for r in sorted(reports) if (p := w.pace(reports[r])) is not None)
        lead = min(reports)
        s_it = w.s_per_iteration(reports[lead], iteration, now)
        rate, reward = (s.env_steps_rate, s.last_mean_reward) if s is not None else (None, None)
        w.iteration, w.at = iteration, now
        w.totals = {r: (rep.timed, rep.busy_s, rep.wait_s, rep.wall_s) for r, rep in reports.items()}
        self.write(
            ev.Progress,
            iteration=iteration,
            s_per_iteration=s_it,
            env_steps_per_s=rate,
            reward=reward,
            ranks=paces,
        )

    def attempt_ended(self, stall: Stall | None, fault: Mapping[str, Any] | None) -> None:
        """The attempt ended: its stall verdict, and its ``fault`` event's fields when it failed or hung."""
        self._window = None
        if stall is not None:
            culprits = tuple(sorted(stall.culprits or ()))
            self.write(ev.Stall, verdict=stall.headline(), ranks=culprits, phase=stall.phase)
        if fault is not None:
            self.write(ev.Fault, **fault)

    def adopt(self, folder: Path) -> None:
        """Become the run's one writer (a node that became node 0 when node 0 was lost)."""
        if self._appender is None:
            self.enabled = True
            self.open(folder)

    def restart(self, number: int, *, from_iteration: int | None, lost: int | None, left: int) -> None:
        """mgpu restarts the run as attempt ``number``."""
        self.attempt = number
        self.write(ev.Restart, from_iteration=from_iteration, lost=lost, restarts_left=left)


class _Window:
    """What the last progress event covered, and what has been written in this attempt."""

    def __init__(self, ranks: set[int], resumes_at: int | None) -> None:
        self.ranks = ranks
        self.up = False
        self.stragglers: set[int] = set()
        self.checkpoint: int | None = resumes_at
        self.iteration: int | None = None
        self.at = time.monotonic()
        self.totals: dict[int, tuple[Any, ...]] = {}
        self.next_look = 0.0
        self.next_progress = 0.0
        self.account: Mapping[str, Any] | None = None
        """Rank 0's account as last written."""
        self.sent: list[Any] = []
        """The rewards of this attempt already written in ``account`` events."""
        self.account_start: int | None = None

    def pace(self, rep: Report) -> ev.RankPace | None:
        """The rank's busy and wait seconds per timed iteration since the last progress event."""
        timed0, busy0, wait0, _ = self.totals.get(rep.rank, (0, 0.0, 0.0, 0.0))
        if rep.timed is None or rep.busy_s is None or rep.wait_s is None or rep.timed <= (timed0 or 0):
            return None
        n = rep.timed - (timed0 or 0)
        return ev.RankPace(rep.rank, (rep.busy_s - (busy0 or 0.0)) / n, (rep.wait_s - (wait0 or 0.0)) / n)

    def s_per_iteration(self, rep: Report, iteration: int, now: float) -> float | None:
        """Seconds per iteration since the last progress event: the lead rank's timed ones, else by clock."""
        timed0, _, _, wall0 = self.totals.get(rep.rank, (0, 0.0, 0.0, 0.0))
        if rep.timed is not None and rep.wall_s is not None and rep.timed > (timed0 or 0):
            return (rep.wall_s - (wall0 or 0.0)) / (rep.timed - (timed0 or 0))
        if self.iteration is not None and iteration > self.iteration:
            return (now - self.at) / (iteration - self.iteration)
        return None


def _count(value: Any) -> int:
    """``value`` when it is a count (an int, not a bool, >= 0), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _completed(rep: Report) -> int:
    """Iterations a rank completed: its report names the iteration that began, until it finishes."""
    assert rep.iteration is not None
    return rep.iteration if rep.stage in _ENDED else max(0, rep.iteration - 1)


def _size(path: Path | None) -> int | None:
    try:
        return os.stat(path).st_size if path is not None else None
    except OSError:
        return None


def for_launch(
    resolved: ResolvedSpec,
    cmd: Command,
    run_dir: Path | None,
    named_by_rank: bool,
    continued: bool,
    trains: tuple[str, int | None] | None,
) -> RunLedger:
    """This launch's ledger, its ``launched`` event written; ``trains``: the worker's task and total."""
    spec = resolved.spec
    if (resolved.node_rank or 0) != 0:
        return RunLedger(enabled=False)
    folder = run_dir
    if folder is None and not spec.builtin_worker:
        folder = script_folder(cmd)  # train made it for this launch alone (pipeline.own_log_folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return RunLedger(enabled=False)  # no ledger where none can be made; the run goes on
    ledger = RunLedger(folder, summarized=spec.builtin_worker)
    at, _ = newest_checkpoint(run_dir, named_by_rank) if continued else (None, None)
    ledger.write(
        ev.Launched,
        argv=spec.command_line,
        essentials=essentials(resolved, cmd, trains),
        job_id=resolved.slurm_job_id,
        job_restart=resolved.slurm_restart_count if resolved.slurm_job_id else None,
        run_dir=str(folder) if folder is not None else None,
        continued_from=at,
        pid=os.getpid(),
        pid_started=psutil.Process().create_time(),
    )
    return ledger


def essentials(resolved: ResolvedSpec, cmd: Command, trains: tuple[str, int | None] | None) -> dict[str, Any]:
    """What a person needs to know of the resolved launch, in the ``launched`` event."""
    spec = resolved.spec
    return {
        "library": spec.library if spec.builtin_worker else None,
        "framework": spec.framework if spec.builtin_worker else None,
        "task": trains[0] if trains else None,
        "script": spec.script,
        "module": spec.module,
        "world_size": cmd.world_size,
        "nnodes": resolved.nnodes,
        "nproc_per_node": resolved.nproc,
        "device": spec.device,
        "total": trains[1] if trains else None,
        "max_restarts": spec.max_restarts or 0,
        "requeue": spec.requeue,
        "launcher": cmd.launcher,
    }
