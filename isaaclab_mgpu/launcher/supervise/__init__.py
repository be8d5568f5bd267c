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

Stop — one code path, :meth:`Supervisor._step`, driven by :meth:`Supervisor.wait`
    A stop begins with the first SIGINT/SIGTERM/SIGHUP (the handlers installed by
    :func:`supervise` only record it), with :meth:`Supervisor.stop`, or when the launcher reports
    a failed rank. The signal is passed to the launcher alone, so torchrun's own shutdown runs
    (it forwards it to the ranks and prints its failure summary). ``grace_period`` seconds later,
    or as soon as the launcher is gone, every remaining process of the tree gets SIGTERM plus
    SIGCONT (a stopped process must run to die of it); ``kill_after`` seconds after that,
    SIGKILL, repeated until nothing is left. A second interrupt SIGKILLs the tree at once (one
    arriving within half a second of the first is the same Ctrl-C, delivered twice: by the
    terminal to mgpu's process group and again by a wrapper such as ``uv run``).
    When the launcher ends by itself, processes that outlived it (orphaned grandchildren, setsid
    escapees) go the same way without waiting.

Stall watch — :mod:`.stall`, with ``SuperviseOptions.stall``
    The launcher gets ``MGPU_PROGRESS_DIR`` (a fresh node-local folder) so every rank reports its
    progress there (:mod:`isaaclab_mgpu.progress`). When the watch finds this node's run hung,
    every local rank that reports gets SIGUSR1 (faulthandler dumps its Python stack beside its
    logs; a stopped rank gets SIGCONT to take the signal and is stopped again right after), the
    verdict goes to the :class:`Progress`, the local ranks are SIGKILLed (a hung rank saves
    nothing, and one resumed by a SIGTERM+SIGCONT could unblock a peer on another node before its
    own mgpu has spoken), and the launcher is stopped through the same path as below with a short
    grace period. The run then exits :data:`~isaaclab_mgpu.contract.errors.EXIT_HANG`.

Result
    :class:`RunResult` keeps the launcher's status and names the first failed rank: torchrun
    always exits 1 when a worker fails, so the rank's real code (or signal) is read from the
    launcher's "Root Cause" summary on its stderr, and the traceback from that rank's ``@record``
    error file, even when its console output was filtered (see :mod:`.rootcause`). Exit codes are
    listed in :mod:`isaaclab_mgpu.contract.errors`.

The launcher's stdout is passed straight through (or, with ``SuperviseOptions.on_stdout``, handed
line by line to a live progress view); its stderr is read line by line to find
failures, and mirrored to the console minus torch elastic's own Python traceback (its failure
summary, which says more, is kept).

Notes for people (stopping, escalating, where the logs are) go to a :class:`Progress` given by
the caller (``report.supervise`` implements it); this package never imports the printing layer.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from isaaclab_mgpu.contract.errors import (
    EXIT_HANG,
    EXIT_INTERRUPTED,
    EXIT_KILLED_AFTER_GRACE,
    MgpuError,
    UsageError,
)
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.supervise import rootcause
from isaaclab_mgpu.launcher.supervise import stall as _stall
from isaaclab_mgpu.launcher.supervise import tree as proctree
from isaaclab_mgpu.launcher.supervise import watchdog as _watchdog
from isaaclab_mgpu.launcher.supervise.watchdog import DONE, MARKER_ENV

__all__ = [
    "MARKER_ENV",
    "Progress",
    "RankFailure",
    "RunResult",
    "Stall",
    "StallOptions",
    "SuperviseOptions",
    "Supervisor",
    "supervise",
]

Stall = _stall.Stall
StallOptions = _stall.StallOptions

#: Signals that start a stop; a second one of any of them kills the tree at once.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_POLL = 0.1
_PROBE = 0.5
#: Signals this close to the first are the same Ctrl-C: a terminal sends SIGINT to the whole
#: foreground group, and wrappers such as ``uv run`` forward it to mgpu once more.
_SAME_INTERRUPT = 0.5
_GIVE_UP = 5.0
#: How often the stall watch reads the progress reports.
_STALL_POLL = 0.5
#: A hung run is stopped quickly: its ranks are stuck by definition and are SIGKILLed first.
_HANG_GRACE = 3.0
_HANG_KILL_AFTER = 2.0
#: How long to wait for the dumped stacks.
_STACK_WAIT = 3.0
_ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
_TRACEBACK_STARTS = (
    "Traceback (most recent call last):",
    "During handling of the above exception",
    "The above exception was the direct cause",
)


def _restarts(argv: tuple[str, ...]) -> bool:
    """True when torchrun may restart failed workers (then a failed rank does not end the run)."""
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--max_restarts", "--max-restarts"):
            return argv[i + 1] not in ("0", "")
    return False


@dataclass(frozen=True)
class SuperviseOptions:
    """How patiently a run is stopped, and whether the launcher's output reaches the console."""

    grace_period: float = 10.0
    """Seconds after the first Ctrl-C/SIGTERM for the launcher's own shutdown."""

    kill_after: float = 5.0
    """Seconds between SIGTERM to the whole tree and SIGKILL of the survivors."""

    console: bool = True
    """Mirror the launcher's output and the supervisor's notes to the console."""

    stall: _stall.StallOptions | None = None
    """Watch the ranks' progress reports for stalls (``mgpu train``); None: no watch."""
    on_stdout: Callable[[bytes], None] | None = None
    """Hand each line of the launcher's stdout to this (a live progress view) instead of passing
    the stream straight through; called from a reader thread, finished before the result."""

    def __post_init__(self) -> None:
        for name in ("grace_period", "kill_after"):
            value = getattr(self, name)
            if not value >= 0:
                raise UsageError(f"--{name} {value!r} must be 0 or more seconds")


@dataclass(frozen=True)
class RankFailure:
    """The first rank that failed, as far as the launcher and the rank's files tell."""

    rank: int | None
    """Global rank."""

    local_rank: int | None
    """Rank on its node."""

    host: str | None
    """Host the rank ran on."""

    exit_code: int | None
    """The rank's exit code, when it exited."""

    signal: str | None
    """Name of the signal that killed it (e.g. ``SIGSEGV``), when it was killed."""

    traceback: str | None
    """Tail of the traceback in the rank's ``@record`` error file, if any."""

    stderr_tail: str | None = None
    """Last lines of the rank's stderr log, when there is no error file."""

    log_path: str | None = None
    """The rank's log folder (``stdout.log``, ``stderr.log``, ``error.json``)."""

    @property
    def code(self) -> int:
        """The shell-style code of this failure: the exit code, or 128+N for signal N."""
        return rootcause.exit_status_code(self.exit_code, self.signal)


@dataclass(frozen=True)
class RunResult:
    """How a supervised run ended."""

    exit_code: int
    """What ``mgpu`` exits with (see :mod:`isaaclab_mgpu.contract.errors`)."""

    interrupted: bool
    """A stop was requested (signal or :meth:`Supervisor.stop`)."""

    killed_after_grace: bool
    """Some process of the tree had to be SIGKILLed after the grace period."""

    failure: RankFailure | None
    """The first failed rank, when a rank failed."""

    log_dir: str | None
    """This run's per-rank log folder (``<log_dir>/<run_id>_<rand>``)."""

    survivors: tuple[int, ...]
    """PIDs of the tree still alive at the end; empty unless a process could not be killed."""

    stall: _stall.Stall | None = None
    """The stall watch's verdict when the run was stopped as hung."""


class Progress(Protocol):
    """What the supervisor tells people while a run stops (``report.supervise`` implements it)."""

    def log_folder(self, path: str) -> None: ...

    def stopping(self, reason: str, launcher: str, grace: float, kill_after: float) -> None: ...

    def stopping_after_failure(self, launcher: str, grace: float) -> None: ...

    def forcing(self, count: int) -> None: ...

    def escalating(self, count: int, grace: float) -> None: ...

    def killing(self, count: int) -> None: ...

    def stragglers(self, count: int, launcher: str) -> None: ...

    def stall(self, stall: _stall.Stall) -> None: ...


class _Silent:
    """The :class:`Progress` of a run without a console: says nothing."""

    def log_folder(self, path: str) -> None:
        pass

    def stopping(self, reason: str, launcher: str, grace: float, kill_after: float) -> None:
        pass

    def stopping_after_failure(self, launcher: str, grace: float) -> None:
        pass

    def forcing(self, count: int) -> None:
        pass

    def escalating(self, count: int, grace: float) -> None:
        pass

    def killing(self, count: int) -> None:
        pass

    def stragglers(self, count: int, launcher: str) -> None:
        pass

    def stall(self, stall: _stall.Stall) -> None:
        pass


class Supervisor:
    """Owns one launch's process tree from start to the last process gone."""

    def __init__(
        self, cmd: Command, options: SuperviseOptions | None = None, progress: Progress | None = None
    ) -> None:
        self.cmd = cmd
        self.options = options or SuperviseOptions()
        self._say: Progress = progress if progress is not None and self.options.console else _Silent()
        self.run_id = uuid.uuid4().hex
        self._since = 0.0
        self._launcher: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._out_reader: threading.Thread | None = None
        self._lines: collections.deque[str] = collections.deque(maxlen=500)
        self._failed_seen: tuple[int, int, int] | None = None
        self._signals: list[tuple[int, float]] = []
        self._first_signal_at = 0.0
        self._handled = 0
        self._stop_at: float | None = None
        self._interrupted = False
        self._forced = False
        self._term_at: float | None = None
        self._kill_at: float | None = None
        self._killed_after_grace = False
        self._known: set[int] = set()
        self._log_dir: str | None = None
        self._next_probe = 0.0
        self._result: RunResult | None = None
        self._fail_fast = not _restarts(cmd.argv)
        self._grace = self.options.grace_period
        self._kill_after_s = self.options.kill_after
        self._monitor: _stall.StallMonitor | None = None
        self._next_stall_check = 0.0
        self._stall: _stall.Stall | None = None
        self._failure_judged = False
        self._subreaper = False
        self._sessions: set[int] = set()

    # -- public -----------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the launcher in a new session and start tracking its tree."""
        if self._launcher is not None:
            raise RuntimeError("Supervisor.start() called twice")
        self._subreaper = proctree.hold_subreaper()
        self._since = time.time() - 1.0  # psutil's create_time is coarser than time.time()
        env = {**os.environ, **self.cmd.env, MARKER_ENV: self.run_id}
        watch = self.options.stall
        if watch is not None and watch.active:
            folder = _stall.progress_folder()
            self._monitor = _stall.StallMonitor(
                watch, folder, tuple(sorted(self.cmd.rank_devices)), host=socket.gethostname()
            )
            env[_stall.DIR_ENV] = folder
        # The watchdog also removes the progress folder when mgpu dies without doing it itself.
        leftovers = [self._monitor.folder] if self._monitor is not None else []
        self._watchdog = subprocess.Popen(
            [sys.executable, _watchdog.__file__, self.run_id, repr(self._since), *leftovers],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        stdout = None if self.options.console else subprocess.DEVNULL
        if self.options.console and self.options.on_stdout is not None:
            stdout = subprocess.PIPE
        try:
            self._launcher = subprocess.Popen(
                self.cmd.argv,
                env=env,
                stdout=stdout,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self._release_watchdog()
            self._release_subreaper()
            if self._monitor is not None:
                self._monitor.remove()
            raise MgpuError(f"could not start {self.cmd.launcher}: {exc}") from exc
        self._known.add(self._launcher.pid)
        self._reader = threading.Thread(target=self._read_stderr, name="mgpu-launcher-stderr", daemon=True)
        self._reader.start()
        if stdout == subprocess.PIPE:
            self._out_reader = threading.Thread(
                target=self._read_stdout, name="mgpu-launcher-stdout", daemon=True
            )
            self._out_reader.start()

    def interrupt(self, signum: int) -> None:
        """Record a stop signal (safe in a signal handler); :meth:`wait` acts on it."""
        self._signals.append((signum, time.monotonic()))

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Supervise until the run is over and its tree gone; None if ``timeout`` passed first."""
        end = None if timeout is None else time.monotonic() + timeout
        while self._result is None:
            self._step()
            if self._result is not None or (end is not None and time.monotonic() >= end):
                break
            time.sleep(_POLL)
        return self._result

    def descendants(self) -> list[psutil.Process]:
        """Every live process of the tree (launcher included)."""
        pid = self._launcher.pid if self._launcher is not None else None
        exclude = frozenset({os.getpid(), *([self._watchdog.pid] if self._watchdog else [])})
        procs = proctree.tree(pid, self.run_id, self._since, exclude)
        for p in procs:
            if p.pid not in self._known:
                self._known.add(p.pid)
                with contextlib.suppress(OSError):
                    self._sessions.add(os.getsid(p.pid))
        return procs

    def stop(self, reason: str) -> RunResult:
        """Stop the run through the one shutdown path and return its result."""
        if self._result is None:
            self._begin_stop(signal.SIGTERM, reason)
        result = self.wait()
        assert result is not None
        return result

    def kill(self) -> RunResult:
        """SIGKILL the whole tree now (as a second Ctrl-C does) and return the result."""
        if self._result is None:
            if self._stop_at is None:
                self._begin_stop(None, "killed")
            self._forced = True
        result = self.wait()
        assert result is not None
        return result

    # -- the one shutdown path -----------------------------------------------------------------

    def _begin_stop(self, sig: int | None, reason: str) -> None:
        announce = self._stop_at is None or not self._interrupted
        self._interrupted = True
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        launcher = self._launcher
        if sig is not None and launcher is not None and launcher.poll() is None:
            with contextlib.suppress(OSError):
                launcher.send_signal(sig)
        if announce and sig is not None:
            self._say.stopping(reason, self.cmd.launcher, self._grace, self._kill_after_s)

    def _step(self) -> None:
        assert self._launcher is not None, "start() first"
        now = time.monotonic()
        while self._handled < len(self._signals):
            sig, at = self._signals[self._handled]
            self._handled += 1
            if not self._interrupted:
                self._first_signal_at = at
                self._begin_stop(sig, f"{signal.Signals(sig).name} received")
            elif at - self._first_signal_at < _SAME_INTERRUPT:
                continue  # one Ctrl-C delivered twice: by the terminal and by a wrapper (uv run)
            elif not self._forced:
                self._forced = True
                self._say.forcing(len(self.descendants()))
        rc = self._launcher.poll()
        if self._failed_seen is not None and self._monitor is not None and not self._failure_judged:
            # Multi-node: a collective that fails after a long wait means a stalled peer elsewhere.
            self._failure_judged = True
            if self._stall is None and self._stop_at is None:
                self._stall = self._monitor.after_failure(self._failed_seen[1])
                if self._stall is not None:
                    self._say.stall(self._stall)
        if self._failed_seen is not None and self._stop_at is None and rc is None and self._fail_fast:
            self._stop_at = now
            if self.cmd.world_size != 1:  # a lone rank has no others to stop
                self._say.stopping_after_failure(self.cmd.launcher, self._grace)
        if now >= self._next_probe:
            self._next_probe = now + _PROBE
            if self._log_dir is None:
                self._probe_log_dir()
            self._adopt()
        if rc is None and self._stop_at is None:
            if self._monitor is not None and now >= self._next_stall_check:
                self._next_stall_check = now + _STALL_POLL
                self._watch_stalls()
            return

        procs = self.descendants()
        self._reap()
        if self._forced:
            proctree.signal_tree(procs, signal.SIGKILL)
            self._kill_at = self._kill_at or now
        elif procs:
            # Once the launcher is gone nobody else will stop what is left: no reason to wait.
            orphaned = rc is not None or self._stop_at is None
            deadline = now if orphaned else self._stop_at + self._grace
            if self._term_at is None and now >= deadline:
                if rc is None:
                    self._say.escalating(len(procs), self._grace)
                else:
                    self._say.stragglers(len(procs), self.cmd.launcher)
                proctree.signal_tree(procs, signal.SIGTERM)
                proctree.signal_tree(procs, signal.SIGCONT)
                self._term_at = now
            elif self._term_at is not None and now >= self._term_at + self._kill_after_s:
                if self._kill_at is None:
                    self._say.killing(len(procs))
                if self._stop_at is not None:
                    self._killed_after_grace = True
                proctree.signal_tree(procs, signal.SIGKILL)
                self._kill_at = self._kill_at or now
        gave_up = self._kill_at is not None and now - self._kill_at > _GIVE_UP
        rc = self._launcher.poll()
        if rc is not None and (not procs or gave_up):
            self._finish(rc)

    # -- the stall watch ---------------------------------------------------------------------

    def _watch_stalls(self) -> None:
        assert self._monitor is not None
        stall = self._monitor.check(output_times=self._output_times())
        if stall is None:
            return
        stall = _stall.with_stacks(stall, self._dump_stacks(stall))
        self._stall = stall
        self._say.stall(stall)
        # Hung ranks save nothing; SIGKILL keeps a stopped one from resuming (and unblocking a
        # peer on another node) during a SIGTERM+SIGCONT shutdown.
        pids = {r.pid for r in stall.ranks if r.pid is not None}
        tree = [p for p in self.descendants() if p.pid in pids]
        proctree.signal_tree([*tree, *(c for p in tree for c in _children(p))], signal.SIGKILL)
        self._grace, self._kill_after_s = _HANG_GRACE, _HANG_KILL_AFTER
        self._begin_stop(signal.SIGTERM, "hang found")

    def _dump_stacks(self, stall: _stall.Stall) -> dict[int, str | None]:
        """SIGUSR1 every local rank that registered faulthandler; return each one's stack tail."""
        pending: dict[int, tuple[psutil.Process, Path, int, bool]] = {}
        for r in stall.ranks:
            if r.pid is None or not r.stack_file or r.process == "gone":
                continue  # a rank without the handler would die of SIGUSR1
            path = Path(r.stack_file)
            try:
                proc = psutil.Process(r.pid)
                size = path.stat().st_size if path.exists() else 0
                proc.send_signal(signal.SIGUSR1)
                stopped = r.process == psutil.STATUS_STOPPED
                if stopped:
                    proc.send_signal(signal.SIGCONT)  # delivers the pending SIGUSR1
            except (psutil.Error, OSError):
                continue
            pending[r.rank] = (proc, path, size, stopped)
        stacks: dict[int, str | None] = {}
        deadline = time.monotonic() + _STACK_WAIT
        last: dict[int, int] = {}
        while pending and time.monotonic() < deadline:
            for rank, (proc, path, size, stopped) in list(pending.items()):
                now_size = path.stat().st_size if path.exists() else 0
                if now_size > size and now_size == last.get(rank):  # faulthandler writes in one go
                    if stopped:
                        with contextlib.suppress(psutil.Error):
                            proc.send_signal(signal.SIGSTOP)  # keep it as it was found
                    stacks[rank] = _read_from(path, size)
                    del pending[rank]
                last[rank] = now_size
            time.sleep(0.01)
        for rank, (proc, path, size, stopped) in pending.items():
            if stopped:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGSTOP)
            stacks[rank] = _read_from(path, size)
        return {rank: _stall.stack_tail(text) if text else None for rank, text in stacks.items()}

    def _output_times(self) -> dict[int, float] | None:
        """Each local rank's last output (its log files' newest change), for --stall_on_silence."""
        assert self._monitor is not None
        if not self._monitor.options.on_silence or self._log_dir is None:
            return None
        times = {}
        for local, rank in enumerate(self._monitor.ranks):
            folder = rootcause.rank_folder(self._log_dir, local)
            if folder is None:
                continue
            stamps = []
            for name in ("stdout.log", "stderr.log"):
                with contextlib.suppress(OSError):
                    info = (folder / name).stat()
                    if info.st_size:  # an empty file is the launcher's, not the rank's output
                        stamps.append(info.st_mtime)
            if stamps:
                times[rank] = max(stamps)
        return times

    def _adopt(self) -> None:
        # Orphans of the tree re-parented to us (subreaper) are reaped when they die; note them
        # while they still carry the marker, which a zombie's /proc entry no longer shows.
        owned = {self._launcher.pid if self._launcher else -1, self._watchdog.pid if self._watchdog else -1}
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return
        for child in children:
            if child.pid in owned or child.pid in self._known:
                continue
            try:
                if child.environ().get(MARKER_ENV) == self.run_id:
                    self._known.add(child.pid)
            except (psutil.Error, OSError):
                continue
        self._reap()

    def _reap(self) -> None:
        owned = {self._launcher.pid if self._launcher else -1, self._watchdog.pid if self._watchdog else -1}
        self._known -= proctree.reap(self._known - owned)

    def _finish(self, rc: int) -> None:
        for reader in (self._reader, self._out_reader):
            if reader is not None:
                reader.join(timeout=2.0)
        survivors = tuple(p.pid for p in self.descendants())
        self._reap()
        self._release_watchdog()
        self._release_subreaper()
        if self._monitor is not None:
            self._monitor.remove()
        failure = None if self._interrupted or rc == 0 else self._failure()
        if self._log_dir is None:
            self._log_dir = self._newest_run_dir()
        if self._stall is not None:
            code = EXIT_HANG
        elif self._interrupted:
            code = EXIT_KILLED_AFTER_GRACE if self._killed_after_grace else EXIT_INTERRUPTED
        elif rc != 0:
            if failure is not None and (failure.exit_code or failure.signal):
                code = failure.code
            else:
                code = rc if rc > 0 else 128 - rc
        else:
            code = 0
        self._result = RunResult(
            exit_code=code,
            interrupted=self._interrupted,
            killed_after_grace=self._killed_after_grace,
            failure=failure,
            log_dir=self._log_dir,
            survivors=survivors,
            stall=self._stall,
        )

    def _release_subreaper(self) -> None:
        if not self._subreaper:
            return
        self._subreaper = False
        proctree.release_subreaper()
        # Orphans adopted while we were a subreaper stay our children: collect every tree process
        # we saw and the dead children of the sessions the tree used (the launcher's, and those
        # of setsid escapees that were seen). An escapee that dies within one probe interval
        # without being seen is indistinguishable from the host's own child and is left alone.
        owned = {self._launcher.pid if self._launcher else -1, self._watchdog.pid if self._watchdog else -1}
        sessions = self._sessions | ({self._launcher.pid} if self._launcher is not None else set())
        sessions.discard(os.getsid(0))
        proctree.reap(self._known - owned | proctree.adopted_zombies(sessions, owned))

    def _release_watchdog(self) -> None:
        dog = self._watchdog
        if dog is None or dog.stdin is None or dog.stdin.closed:
            return
        try:
            dog.stdin.write(DONE + b"\n")
            dog.stdin.close()
            dog.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            dog.kill()
            dog.wait()

    # -- what the launcher says ----------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self._launcher is not None and self._launcher.stdout is not None
        sink = self.options.on_stdout
        assert sink is not None
        for raw in iter(self._launcher.stdout.readline, b""):
            try:
                sink(raw)
            except Exception:  # a display problem must never stop the supervision
                sys.stdout.buffer.write(raw)
                sys.stdout.flush()

    def _read_stderr(self) -> None:
        assert self._launcher is not None and self._launcher.stderr is not None
        out = getattr(sys.stderr, "buffer", None) if self.options.console else None
        held: list[bytes] = []
        for raw in iter(self._launcher.stderr.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.startswith("["):
                self._lines.append(line)
                if self._failed_seen is None:
                    self._failed_seen = rootcause.failed_line(line)
            if out is None:
                continue
            if held:
                # Hold back a launcher traceback (and its chain) until its last line shows whose it is.
                held.append(raw)
                if line and not line[0].isspace() and not line.startswith(_TRACEBACK_STARTS):
                    if not line.startswith("torch.distributed.elastic."):
                        out.write(b"".join(held))
                    held = []
                    out.flush()
                continue
            if line.startswith(_TRACEBACK_STARTS):
                held = [raw]
                continue
            out.write(raw)
            out.flush()
        if out is not None and held:
            out.write(b"".join(held))
            out.flush()

    def _probe_log_dir(self) -> None:
        # Each rank's error-file path is <run dir>/attempt_<k>/<local_rank>/error.json.
        try:
            ranks = psutil.Process(self._launcher.pid).children() if self._launcher else []
        except psutil.Error:
            return
        for rank in ranks:
            try:
                path = rank.environ().get(_ERROR_FILE_ENV)
            except (psutil.Error, OSError):
                continue
            if path:
                self._log_dir = str(Path(path).parent.parent.parent)
                self._say.log_folder(self._log_dir)
                return

    def _newest_run_dir(self) -> str | None:
        root = Path(self.cmd.log_dir)
        try:
            dirs = [d for d in root.iterdir() if d.is_dir() and d.stat().st_mtime >= self._since]
        except OSError:
            return None
        return str(max(dirs, key=lambda d: d.stat().st_mtime)) if dirs else None

    def _failure(self) -> RankFailure | None:
        parsed = rootcause.parse_root_cause(self._lines)
        run_dir = self._log_dir
        if run_dir is None and parsed is not None and parsed.error_file:
            run_dir = str(Path(parsed.error_file).parent.parent.parent)
            self._log_dir = run_dir
        run_dir = run_dir or self._newest_run_dir()
        if parsed is None:
            earliest = rootcause.earliest_error_file(run_dir)
            if earliest is None:
                return None
            parsed = rootcause.ParsedFailure(None, earliest[0], None, None, None, str(earliest[1]))
        exit_code, sig = rootcause.split_exitcode(parsed.exitcode)
        folder = rootcause.rank_folder(run_dir, parsed.local_rank)
        error_file = parsed.error_file or (str(folder / "error.json") if folder else None)
        tb = rootcause.read_error_file(error_file) if error_file else None
        rank = parsed.rank
        if rank is None and parsed.local_rank is not None:
            rank = min(self.cmd.rank_devices, default=0) + parsed.local_rank
        return RankFailure(
            rank=rank,
            local_rank=parsed.local_rank,
            host=parsed.host or socket.gethostname(),
            exit_code=exit_code,
            signal=sig,
            traceback=tb,
            stderr_tail=None if tb else rootcause.tail(folder / "stderr.log" if folder else None),
            log_path=str(folder) if folder else None,
        )


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def supervise(
    cmd: Command, options: SuperviseOptions | None = None, progress: Progress | None = None
) -> RunResult:
    """Run ``cmd`` under a :class:`Supervisor` with Ctrl-C/SIGTERM handling; return the result."""
    sup = Supervisor(cmd, options, progress)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {}
    if in_main:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, _frame: sup.interrupt(signum))
    result = None
    try:
        sup.start()
        result = sup.wait()
    finally:
        if result is None and sup._launcher is not None:
            # An error inside mgpu itself: the tree must not outlive it.
            result = sup.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return result
