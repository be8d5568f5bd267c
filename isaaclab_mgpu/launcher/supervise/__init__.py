"""Supervising a launch: every process dies, the exit code tells the truth, the logs are findable.

:class:`Supervisor` runs a built :class:`~isaaclab_mgpu.launcher.build.Command` (torchrun or our
``jaxrun``) and owns the whole process tree it grows.

Start
    The launcher starts in its own session with ``MGPU_RUN_ID=<uuid>`` added to its environment,
    so every descendant carries the marker (see :mod:`.tree`). Before that, ``mgpu`` makes itself
    a child subreaper on Linux and starts the :mod:`.watchdog`, which kills every marked process
    if ``mgpu`` dies without cleaning up (SIGKILL, crash, lost terminal). When the run ends the
    subreaper attribute goes back to what the host process had and the dead orphans the run left
    with it are reaped, so a process using the supervisor in-process is left as it was.

Stop — one decision, :func:`.stop.decide`, and one code path, :class:`.shutdown.Shutdown`
    Each step of :meth:`Supervisor.wait` gathers what could stop the run and does what
    :func:`.stop.decide` says: every reason to stop and its timing is listed there, the phases that
    follow in :mod:`.shutdown`. Signals are only recorded where they arrive: the caller installs the
    handlers and hands the recorder in (:class:`.shutdown.Interrupts`), or calls
    :meth:`Supervisor.interrupt`; the checkpoint signal is never a stop (see :mod:`.shutdown`).

Stall watch — :mod:`.hang` and :mod:`.stall`, with ``SuperviseOptions.stall``
    The launcher gets ``MGPU_PROGRESS_DIR`` (a fresh node-local folder) so every rank reports its
    progress there (:mod:`isaaclab_mgpu.progress`), also with both bounds at 0 (no stall verdict
    then; the reports still give the ledger its progress and rank 0's account, the straggler and
    drift watch, and a dead rank's fast stop). A hang is told (``StallFound``) and stopped as
    :mod:`.stop` says, exit :data:`~isaaclab_mgpu.contract.errors.EXIT_HANG` (the steps:
    ``docs/supervision.md``, "When the run hangs"). From the same reports come the straggler
    (``StragglerFound``, :attr:`RunResult.stragglers`) and the worker's drift (``DriftFound``,
    :attr:`RunResult.drift`), each named once.

Result — :mod:`.result`
    :class:`RunResult` keeps the launcher's status and names the first failed rank.

:mod:`.output` reads the launcher's streams, :mod:`.logs` finds the per-rank log folder. What people
are told goes, as :mod:`isaaclab_mgpu.launcher.notes`, to the caller's ``Tell`` (``report.supervise``
renders it); this package never imports the printing layer.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from isaaclab_mgpu.contract.env import ERROR_FILE, LAUNCHER_PID, PROGRESS_DIR, RUN_ID
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, EnvironmentProblem, MgpuError, UsageError
from isaaclab_mgpu.contract.summary import Straggler
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.notes import Tell, silent
from isaaclab_mgpu.launcher.supervise import logs, notes
from isaaclab_mgpu.launcher.supervise import tree as proctree
from isaaclab_mgpu.launcher.supervise import watchdog as _watchdog
from isaaclab_mgpu.launcher.supervise.hang import HangWatch
from isaaclab_mgpu.launcher.supervise.output import LauncherOutput
from isaaclab_mgpu.launcher.supervise.result import (
    RankFailure,
    RunResult,
    exit_code,
    first_failure,
    missing_logs_specs,
)
from isaaclab_mgpu.launcher.supervise.shutdown import STOP_SIGNALS, Interrupts, Phase, Shutdown
from isaaclab_mgpu.launcher.supervise.stall import Report, Stall, StallOptions
from isaaclab_mgpu.launcher.supervise.stop import Kind, Seen, Standing, Stop, decide
from isaaclab_mgpu.launcher.verdicts import PEER_GONE


def _has_wandb_service(procs: list[psutil.Process]) -> bool:
    """True when one of ``procs`` has W&B's service among its children."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if any(c.name().startswith("wandb-core") for c in proc.children()):
                return True
    return False


__all__ = [
    "STOP_SIGNALS",
    "RankFailure",
    "RunResult",
    "Stall",
    "StallOptions",
    "SuperviseOptions",
    "Supervisor",
]

_POLL = 0.1
#: How often the log folder is looked for and orphans adopted.
_PROBE = 0.5


def _peer_broke(failure: RankFailure) -> bool:
    """True when the rank's end came from another node: a broken connection, a stop sent there."""
    text = (failure.traceback or "") + (failure.stderr_tail or "")
    return failure.exit_code == EXIT_INTERRUPTED or any(marker in text for marker in PEER_GONE)


@dataclass(frozen=True)
class SuperviseOptions:
    """How patiently a run is stopped, and whether the launcher's output reaches the console."""

    grace_period: float = 10.0
    """Seconds after the first Ctrl-C/SIGTERM for the launcher's own shutdown."""

    kill_after: float = 5.0
    """Seconds between SIGTERM to the whole tree and SIGKILL of the survivors."""

    console: bool = True
    """Mirror the launcher's output and the supervisor's notes to the console."""

    stall: StallOptions | None = None
    """Watch the ranks' progress reports for stalls (``mgpu train``); None: no watch."""

    on_stdout: Callable[[bytes], None] | None = None
    """Hand each line of the launcher's stdout to this (a live progress view), from a reader thread."""

    debug: bool = False
    """Mirror torch elastic's own failure summary (its "Root Cause" block) to the console too."""

    quiet_start: bool = False
    """Until rank 0's first iteration, show only the built-in worker's own lines (:mod:`.output`)."""

    alive_port: int | None = None
    """Multi-node with ``--min_nodes``: the port by which the other nodes tell this mgpu is alive."""

    def __post_init__(self) -> None:
        for name in ("grace_period", "kill_after"):
            value = getattr(self, name)
            if not value >= 0:
                raise UsageError(f"--{name} {value!r} must be 0 or more seconds")


class Supervisor:
    """Owns one launch's process tree from start to the last process gone."""

    def __init__(
        self,
        cmd: Command,
        options: SuperviseOptions | None = None,
        tell: Tell | None = None,
        signals: Interrupts | None = None,
    ) -> None:
        """``signals``: the recorder the caller's handlers write into (default: fed by :meth:`interrupt`)."""
        self.cmd = cmd
        self.options = options or SuperviseOptions()
        self._say: Tell = tell if tell is not None and self.options.console else silent
        self.run_id = uuid.uuid4().hex
        self._since = 0.0
        self._launcher: subprocess.Popen[bytes] | None = None
        self._rc: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        # Replaced in start(), once the start time and the watchdog's PID are known.
        self._tree = proctree.RunTree(self.run_id, 0.0, frozenset({os.getpid()}))
        self._output = LauncherOutput(
            self.options.console,
            self.options.on_stdout,
            failure_summary=self.options.debug,
            quiet_start=self.options.quiet_start,
        )
        self._signals = signals if signals is not None else Interrupts()
        self._shutdown = Shutdown(
            members=self.descendants,
            first_alive=lambda: self._launcher_rc() is None,
            grace=self.options.grace_period,
            kill_after=self.options.kill_after,
            on_terminate=self._terminating,
            on_kill=lambda count: self._say(notes.Killing(count)),
        )
        self._interrupted = False  # set by _apply() alone, as every flag of a stop
        self._asked: str | None = None
        self._killed = False
        self._failed_seen = False
        self._tree_now: Callable[[], list[psutil.Process]] = self.descendants
        self._watch: HangWatch | None = None
        self._run_folder_said = False
        self._peers_stopped = False
        self._peers_kill_at: float | None = None
        self._peers: list[psutil.Process] = []
        self._dead_rank: Report | None = None
        self._stall: Stall | None = None
        self._log_dir: str | None = None
        self._next_probe = 0.0
        self._subreaper = False
        self._result: RunResult | None = None

    # -- public -----------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the launcher in a new session and start tracking its tree."""
        if self._launcher is not None:
            raise RuntimeError("Supervisor.start() called twice")
        self._subreaper = proctree.hold_subreaper()
        self._since = time.time() - 1.0  # psutil's create_time is coarser than time.time()
        # The launcher PID: a rank's simulated requeue (--simulate_fault) signals this process.
        env = {**os.environ, **self.cmd.env, RUN_ID: self.run_id, LAUNCHER_PID: str(os.getpid())}
        watch = self.options.stall
        if watch is not None:  # both bounds 0: no verdicts, but the reports still feed the ledger
            self._watch = HangWatch(watch, self.cmd, self.options.alive_port)
            env[PROGRESS_DIR] = self._watch.monitor.folder  # so that every rank reports
        self._start_watchdog()
        assert self._watchdog is not None
        self._tree = proctree.RunTree(self.run_id, self._since, frozenset({os.getpid(), self._watchdog.pid}))
        try:
            self._launcher = subprocess.Popen(
                self.cmd.argv,
                env=env,
                stdout=self._output.stdout(),
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self._release()
            raise MgpuError(f"could not start {self.cmd.launcher}: {exc}") from exc
        # Until its exit status is collected, the launcher's PID cannot be anyone else's.
        with contextlib.suppress(psutil.Error):
            self._tree.root = psutil.Process(self._launcher.pid)
        self._output.start(self._launcher)

    def interrupt(self, signum: int) -> None:
        """Record a signal (safe in a signal handler); :meth:`wait` acts on it."""
        self._signals.record(signum)

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Supervise until the run is over and its tree gone; None if ``timeout`` passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        while self._result is None:
            self._step()
            if self._result is not None or (end is not None and time.monotonic() >= end):
                break
            time.sleep(_POLL)
        return self._result

    @property
    def launcher_pid(self) -> int | None:
        """The launcher's process id, once started."""
        return self._launcher.pid if self._launcher is not None else None

    @property
    def log_dir(self) -> str | None:
        """The folder of the per-rank log folders, once found."""
        return self._log_dir

    def reports(self) -> dict[int, Report]:
        """The local ranks' last progress reports, as the stall watch last read them (no file read)."""
        return dict(self._watch.monitor.files.last) if self._watch is not None else {}

    def account(self) -> dict[str, Any] | None:
        """Rank 0's account of its attempt, when it is a local rank that gave one."""
        return self._watch.monitor.files.read_account() if self._watch is not None else None

    def stragglers(self) -> tuple[Straggler, ...]:
        """The ranks named as stragglers so far."""
        return tuple(self._watch.stragglers.named) if self._watch is not None else ()

    def descendants(self) -> list[psutil.Process]:
        """Every live process of the tree (launcher included while it runs)."""
        return self._tree.live()

    def stop(self, reason: str) -> RunResult:
        """Stop the run through the one shutdown path and return its result."""
        if self._result is None:
            self._asked = reason  # the next step decides, as for a signal
        result = self.wait()
        assert result is not None
        return result

    def kill(self) -> RunResult:
        """SIGKILL the whole tree now (as a second Ctrl-C does) and return the result."""
        if self._result is None:
            self._killed = True
        result = self.wait()
        assert result is not None
        return result

    # -- one step of supervision -------------------------------------------------------------

    def _step(self) -> None:
        assert self._launcher is not None, "start() first"
        now = time.monotonic()
        self._tree_now = functools.cache(self.descendants)  # walked at most once a step, if at all
        if now >= self._next_probe:
            self._next_probe = now + _PROBE
            if self._log_dir is None and (found := logs.from_ranks(self._tree.root)) is not None:
                self._log_dir = found
                self._say(notes.LogFolder(found))
            self._tree.adopt(self._owned())
            self._tree.reap(self._owned())
        for stop in decide(self._see(now), self._standing()):
            self._apply(stop)
        if self._shutdown.phase is Phase.RUNNING:
            return
        self._shutdown.step()
        self._tree.reap(self._owned())
        if self._shutdown.done and self._launcher_rc() is not None:
            self._finish(self._launcher_rc())

    def _see(self, now: float) -> Seen:
        """What could stop the run, as this step finds it; the watches look while nothing else does."""
        asked, killed = self._asked, self._killed
        self._asked, self._killed = None, False
        signals = tuple(self._signals.take(stopping=self._interrupted or killed or asked is not None))
        alive = self._launcher_rc() is None
        calm = self._shutdown.phase is Phase.RUNNING and not (signals or asked or killed)
        failed = self._output.failed
        first_failure = failed is not None and not self._failed_seen
        if first_failure:
            self._failed_seen = True
            if calm and self._watch is not None and self._stall is None:
                # Multi-node: a collective that fails after a long wait means a stalled peer elsewhere.
                self._stall = self._watch.after_failure(failed[1])
                if self._stall is not None:
                    self._say(notes.StallFound(self._stall))
        hang = died = wandb = False
        if calm and not first_failure and alive and self._watch is not None and self._watch.due(now):
            hang, died, wandb = self._watch_stalls()
        return Seen(
            signals=signals,
            asked=asked,
            killed=killed,
            hang=hang,
            failed=first_failure,
            rank_died=died,
            wandb=wandb,
            launcher_alive=alive,
        )

    def _standing(self) -> Standing:
        return Standing(
            stopping=self._shutdown.phase is not Phase.RUNNING,
            interrupted=self._interrupted,
            forced=self._shutdown.forced,
            lone_rank=self.cmd.world_size == 1,
            grace=self.options.grace_period,
            kill_after=self.options.kill_after,
        )

    def _apply(self, stop: Stop) -> None:
        """Do what :func:`~.stop.decide` said: the one place a stop begins, with its timings."""
        if stop.kind is Kind.PEERS:
            rank, wait = self._dead_rank, stop.grace or 0.0
            assert rank is not None
            self._peers_kill_at = time.monotonic() + wait
            self._say(
                notes.RankDied(rank.rank, rank.host, rank.iteration, rank.stage, len(self._peers), wait)
            )
            return
        if stop.interrupts:
            self._interrupted = True
        if stop.send is not None:
            self._output.stopped = True  # the launcher's KeyboardInterrupt from here on is ours
        if stop.kind is Kind.FORCE:
            if stop.announce:
                self._say(notes.Forcing(len(self.descendants())))
            self._shutdown.force()
            return
        if stop.kind is Kind.HANG:
            assert self._watch is not None and self._stall is not None
            proctree.signal_tree(self._watch.hung(self._stall, self._tree_now()), signal.SIGKILL)
        self._shutdown.begin(stop.requested, grace=stop.grace, kill_after=stop.kill_after)
        if stop.send is not None and self._launcher is not None and self._launcher_rc() is None:
            with contextlib.suppress(OSError):
                self._launcher.send_signal(stop.send)
        if not stop.announce:
            return
        grace, kill_after = self._shutdown.grace, self._shutdown.kill_after
        if stop.kind is Kind.FAILURE:
            self._say(notes.StoppingAfterFailure(self.cmd.launcher, grace, kill_after))
        else:
            self._say(notes.Stopping(stop.reason, self.cmd.launcher, grace, kill_after))

    def _terminating(self, count: int, launcher_alive: bool) -> None:
        if launcher_alive:
            self._say(notes.Escalating(count, self._shutdown.grace))
        else:
            self._say(notes.Outlived(count, self.cmd.launcher))

    def _launcher_rc(self) -> int | None:
        """The launcher's exit status, once it ended (its PID is then released from the tree)."""
        if self._rc is None and self._launcher is not None:
            self._rc = self._launcher.poll()
            if self._rc is not None:
                self._tree.root = None  # its exit status was collected: its PID may be anyone's now
        return self._rc

    def _owned(self) -> set[int]:
        """Children of ours that are not the tree's to reap: the launcher (Popen waits) and the watchdog."""
        return {p.pid for p in (self._launcher, self._watchdog) if p is not None}

    # -- the stall watch ---------------------------------------------------------------------

    def _watch_stalls(self) -> tuple[bool, bool, bool]:
        """One look of the stall watch, told here: (a hang found, a rank died, W&B among its peers)."""
        assert self._watch is not None
        times = None
        if self._watch.monitor.options.on_silence and self._log_dir is not None:
            times = logs.output_times(self._log_dir, self._watch.monitor.ranks)
        stall = self._watch.check(self._tree_now, times)
        died = wandb = False
        if stall is None and self._peers_kill_at is None:
            # A local rank died with peers waiting for it: kept for their SIGKILL.
            if (dead := self._watch.died(self._tree_now)) is not None:
                self._dead_rank, self._peers = dead
                died, wandb = True, _has_wandb_service(self._peers)
        elif stall is None and not self._peers_stopped and time.monotonic() >= self._peers_kill_at:
            # decide() said when (Kind.PEERS): they wait for the dead rank in a collective that
            # cannot finish, where they cannot even run a SIGTERM handler, and can save nothing.
            self._peers_stopped = True
            proctree.signal_tree(self._peers, signal.SIGKILL)
        if stall is None and (slow := self._watch.straggler()) is not None:
            self._say(notes.StragglerFound(slow))
        if (drift := self._watch.drift()) is not None:
            self._say(notes.DriftFound(drift))
        if (bound := self._watch.monitor.bound_news()) is not None:
            self._say(notes.StallBound(bound))
        if not self._run_folder_said and (folder := self._watch.run_folder()) is not None:
            self._run_folder_said = True
            self._say(notes.RunFolder(*folder))
        for path, why in self._watch.monitor.files.rejected():
            self._say(notes.IgnoredReport(path, why))
        if stall is not None:
            self._stall = stall
            self._say(notes.StallFound(stall))
        return stall is not None, died, wandb

    # -- logs and the end ----------------------------------------------------------------------

    def _finish(self, rc: int) -> None:
        said = self._log_dir is not None  # told when it was found, while the run ran
        self._output.join()
        survivors = tuple(p.pid for p in self.descendants())
        self._tree.reap(self._owned())
        newest = lambda: logs.made_since(self.cmd.log_dir, self._since)  # noqa: E731
        failure = None
        if not self._interrupted and rc != 0:
            ranks, own = tuple(sorted(self.cmd.rank_devices)), self.cmd.env.get(ERROR_FILE)
            failure, self._log_dir = first_failure(self._output.lines, self._log_dir, ranks, newest, own)
        elsewhere, lost, hosts, folder = None, (), (), None
        if failure is not None and self._stall is None and self._watch is not None and _peer_broke(failure):
            # Before the watch is released: the other nodes' reports say which one went away.
            elsewhere = self._watch.explain_failure()
            self._stall = self._watch.hang_elsewhere(failure.local_rank, elsewhere)
            if self._stall is not None:
                self._say(notes.StallFound(self._stall))
            lost, hosts = self._watch.peer_loss()  # what a shrink leaves out (launcher.shrink)
            folder = (self._watch.run_folder() or (None, None))[0]
        stragglers, found_drift, ended = (), None, None
        if self._watch is not None:
            # One last read, for both: a rank that stopped on a drift reported it after the last look.
            self._watch.monitor.files.read()
            if (drift := self._watch.drift()) is not None:
                self._say(notes.DriftFound(drift))
            stragglers, found_drift = self._watch.stragglers.named, self._watch.drift_found
            ended = self._watch.ended()
        self._release()
        if self._log_dir is None:
            self._log_dir = newest()
        if self._log_dir is not None and not said:
            self._say(notes.LogFolder(self._log_dir))  # a run too short to be seen running: said once, now
        self._result = RunResult(
            exit_code=exit_code(
                rc,
                stall=self._stall,
                interrupted=self._interrupted,
                killed_after_grace=self._shutdown.killed_after_grace,
                failure=failure,
            ),
            interrupted=self._interrupted,
            killed_after_grace=self._shutdown.killed_after_grace,
            failure=failure,
            log_dir=self._log_dir,
            survivors=survivors,
            stall=self._stall,
            elsewhere=elsewhere,
            stragglers=stragglers,
            drift=found_drift,
            ended=ended,
            lost_nodes=lost,
            node_hosts=hosts,
            run_folder=folder,
        )
        if failure is None and rc != 0 and (told := missing_logs_specs(self._output.lines, self.cmd.argv[0])):
            raise EnvironmentProblem(told)  # no rank ran: a restart would meet the same

    # -- the watchdog and the subreaper attribute ------------------------------------------------

    def _start_watchdog(self) -> None:
        # The watchdog also removes the progress folder when mgpu dies without doing it itself.
        folders = [self._watch.monitor.folder] if self._watch is not None else []
        self._watchdog = subprocess.Popen(
            [sys.executable, _watchdog.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self._watchdog.stdin is not None
        with contextlib.suppress(OSError):  # it died at once: the run goes on without the safety net
            self._watchdog.stdin.write(_watchdog.header(self.run_id, self._since, folders))
            self._watchdog.stdin.flush()

    def _release(self) -> None:
        """Hand back what the run held: the watchdog, the subreaper attribute, the progress folder."""
        self._release_watchdog()
        self._release_subreaper()
        if self._watch is not None:
            self._watch.remove()

    def _release_subreaper(self) -> None:
        if not self._subreaper:
            return
        self._subreaper = False
        proctree.release_subreaper()
        # Orphans adopted while we were a subreaper stay our children: collect every tree process
        # we saw and the dead children of the sessions the tree used (the launcher's, and those
        # of setsid escapees that were seen). An escapee that dies within one probe interval
        # without being seen is indistinguishable from the host's own child and is left alone.
        owned = self._owned()
        sessions = self._tree.sessions | ({self._launcher.pid} if self._launcher is not None else set())
        sessions.discard(os.getsid(0))
        self._tree.reap(owned)
        proctree.reap(proctree.adopted_zombies(sessions, owned))

    def _release_watchdog(self) -> None:
        dog = self._watchdog
        if dog is None or dog.stdin is None or dog.stdin.closed:
            return
        try:
            dog.stdin.write(_watchdog.DONE + b"\n")
            dog.stdin.close()
            dog.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            dog.kill()
            dog.wait()
