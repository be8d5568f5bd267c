"""TEMPORARY stand-in for the agreed ``isaaclab_mgpu.supervise.Supervisor`` API (issue 3).

The real supervisor is being written on branch ``supervise``; until it lands, the probe imports
this minimal adapter with the same shape (``SuperviseOptions``, ``RunResult``, ``RankFailure``,
``Supervisor.start / wait / descendants / stop``). Delete this file once ``supervise`` is merged:
:mod:`isaaclab_mgpu.probe.run` prefers the real module whenever it provides ``Supervisor``.

What it does: the launcher runs in a new session; every poll records the live process tree
(torchrun starts each rank in its own session, so a process group would miss them);
``stop`` sends SIGTERM to the launcher, waits ``grace_period``, then SIGCONT + SIGTERM to every
recorded process, waits ``kill_after``, SIGKILLs what is left and reaps the launcher.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass

import psutil

from ..build import Command

#: How often ``wait`` records the process tree.
TRACK_EVERY_S = 0.5


@dataclass(frozen=True)
class SuperviseOptions:
    """How patiently the tree is shut down, and whether output reaches the console."""

    grace_period: float = 10.0
    """Seconds the launcher gets to shut its ranks down after SIGTERM."""

    kill_after: float = 5.0
    """Seconds between SIGTERM to the whole tree and SIGKILL of survivors."""

    console: bool = True
    """Mirror the launcher's output to the console."""


@dataclass(frozen=True)
class RankFailure:
    """The first rank that failed (the shim only knows the launcher's status)."""

    rank: int | None
    local_rank: int | None
    host: str | None
    exit_code: int | None
    signal: str | None
    traceback: str | None


@dataclass(frozen=True)
class RunResult:
    """How the launch ended."""

    exit_code: int
    interrupted: bool
    killed_after_grace: bool
    failure: RankFailure | None
    log_dir: str | None
    survivors: tuple[int, ...]


class Supervisor:
    """Minimal supervision of one launch command's process tree."""

    def __init__(self, cmd: Command, options: SuperviseOptions = SuperviseOptions()) -> None:
        self.cmd = cmd
        self.options = options
        self._proc: subprocess.Popen[bytes] | None = None
        self._tree: dict[int, psutil.Process] = {}
        self._stopped = False
        self._killed = False
        self._tracked_at = 0.0

    def start(self) -> None:
        """Spawn the launcher in a new session and start tracking its tree."""
        sink = None if self.options.console else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            self.cmd.argv,
            env={**os.environ, **self.cmd.env},
            start_new_session=True,
            stdout=sink,
            stderr=sink,
        )
        self._track()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Wait up to ``timeout`` seconds; the result once the launcher exited, else None."""
        assert self._proc is not None, "start() first"
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if time.monotonic() - self._tracked_at >= TRACK_EVERY_S:
                self._track()  # a scan of /proc: not on every 50 ms poll
            if self._proc.poll() is not None:
                return self._finish()
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05 if deadline is None else min(0.05, max(0.0, deadline - time.monotonic())))

    def descendants(self) -> list[psutil.Process]:
        """Every live process of the tree (launcher included)."""
        self._track()
        return [p for p in self._tree.values() if _alive(p)]

    def stop(self, reason: str) -> RunResult:
        """Shut the whole tree down (launcher first, then everyone, then SIGKILL) and reap it."""
        assert self._proc is not None, "start() first"
        self._stopped = True
        self._track()
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(self.options.grace_period)
        live = self.descendants()
        for p in live:
            _signal(p, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            _signal(p, signal.SIGTERM)
        _, live = psutil.wait_procs(live, timeout=self.options.kill_after)
        if live:
            self._killed = True
            for p in live:
                _signal(p, signal.SIGKILL)
            psutil.wait_procs(live, timeout=5)
        return self._finish()

    def _finish(self) -> RunResult:
        assert self._proc is not None
        code = self._proc.wait()
        survivors = tuple(p.pid for p in self._tree.values() if _alive(p))
        exit_code = 128 - code if code < 0 else code
        failure = None
        if code != 0 and not self._stopped:
            sig = signal.Signals(-code).name if code < 0 else None
            failure = RankFailure(None, None, None, None if code < 0 else code, sig, None)
        return RunResult(exit_code, self._stopped, self._killed, failure, self.cmd.log_dir, survivors)

    def _track(self) -> None:
        if self._proc is None:
            return
        self._tracked_at = time.monotonic()
        try:
            root = psutil.Process(self._proc.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in found:
            self._tree.setdefault(p.pid, p)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal(p: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        p.send_signal(sig)
