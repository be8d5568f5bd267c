"""Finding, signalling and reaping every process a launch started, wherever it went.

A launch's processes are found four ways, and the union is "the tree" (:class:`RunTree`):

1. the launcher and its descendants by parent links (psutil), while the launcher is unreaped —
   until its exit status is collected its PID cannot belong to anyone else;
2. every process of the user running mgpu whose environment carries this run's ``MGPU_RUN_ID``
   marker (:func:`~.watchdog.marked_processes`): processes that called ``setsid``, and orphans;
3. the descendants of those, in case one of them started a child with a cleared environment;
4. every process seen in the tree before that still runs.

Each process is held as a :class:`psutil.Process` from the moment it is seen; psutil compares the
process's start time before it sends a signal, so a PID that was freed and reused by a stranger is
never signalled, and a reaped launcher is no root any more.

On Linux ``mgpu`` also makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so
orphans of the tree are re-parented to ``mgpu`` instead of init and :func:`reap` collects them.
The attribute belongs to the whole host process (maybe a notebook or a test runner):
:func:`hold_subreaper` and :func:`release_subreaper` count the runs that need it and put back the
host's own setting when the last one ends.

Signals go to each process through its psutil object and, where ``os.killpg`` exists, also to
each process group *led by a live process of the tree* (never ``mgpu``'s own), which catches a
child forked between the scan and the signal; a group whose leader is gone may not be the run's
any more. ``MGPU_NO_KILLPG=1`` forces the portable path (no ``killpg``, no subreaper: the psutil
walk and the marker alone), so it can be tested on Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading

import psutil

from isaaclab_mgpu.contract.env import NO_KILLPG, RUN_ID
from isaaclab_mgpu.launcher.supervise.watchdog import alive, marked_processes, send_each

__all__ = [
    "RunTree",
    "adopted_zombies",
    "alive",
    "children",
    "hold_subreaper",
    "reap",
    "release_subreaper",
    "signal_tree",
]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_holders = 0
_host_setting: bool | None = None
_lock = threading.Lock()


def _portable() -> bool:
    """True when the no-killpg path is in use (non-POSIX, or forced with ``MGPU_NO_KILLPG=1``)."""
    return not hasattr(os, "killpg") or os.environ.get(NO_KILLPG, "") not in ("", "0")


def _prctl(option: int, arg: object) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _set_subreaper(on: bool) -> bool:
    """Make this process adopt its orphaned descendants, or stop (Linux); True when it took effect."""
    return sys.platform.startswith("linux") and not _portable() and _prctl(_PR_SET_CHILD_SUBREAPER, int(on))


def _get_subreaper() -> bool | None:
    """This process's child-subreaper attribute; None where it cannot be read (not Linux)."""
    value = ctypes.c_int(0)
    if not sys.platform.startswith("linux") or not _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value)):
        return None
    return bool(value.value)


def hold_subreaper() -> bool:
    """Become a subreaper for one run (nested runs share it); True when this process is one now."""
    global _holders, _host_setting
    with _lock:
        if _holders == 0:
            _host_setting = _get_subreaper()
            if not _host_setting and not _set_subreaper(True):
                return False
        _holders += 1
        return True


def release_subreaper() -> None:
    """End one :func:`hold_subreaper`; the last one puts back the host process's own setting."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0 and not _host_setting:
            _set_subreaper(False)


def adopted_zombies(sessions: set[int], exclude: set[int]) -> set[int]:
    """Dead children of this process in one of ``sessions`` (orphans of a run's tree), ``exclude`` aside."""
    # Only those: another child of the host (its own subprocess.Popen) keeps its exit status.
    found = set()
    for child in children():
        if child.pid in exclude:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE and os.getsid(child.pid) in sessions:
                found.add(child.pid)
        except (psutil.Error, OSError):
            continue
    return found


def children(proc: psutil.Process | None = None, recursive: bool = False) -> list[psutil.Process]:
    """The children of ``proc`` (default: this process), none when it cannot be read."""
    try:
        return (psutil.Process() if proc is None else proc).children(recursive=recursive)
    except psutil.Error:
        return []


class RunTree:
    """The processes of one run, held as psutil objects from the moment they are seen."""

    def __init__(self, run_id: str, since: float, exclude: frozenset[int]) -> None:
        self.run_id = run_id
        self.since = since
        """Epoch seconds before the run started: marked processes are younger."""
        self.exclude = exclude
        """PIDs never counted (mgpu itself, its watchdog)."""
        self.root: psutil.Process | None = None
        """The launcher while it is unreaped; None before it started and once it is reaped."""
        self.known: dict[int, psutil.Process] = {}
        """Every process of the tree seen so far (the root aside), by PID."""
        self.sessions: set[int] = set()
        """Sessions the tree's processes were seen in (for :func:`adopted_zombies`)."""

    def live(self) -> list[psutil.Process]:
        """Every live process of the tree (the root included while it runs)."""
        found: dict[int, psutil.Process] = {}
        roots = [self.root] if self.root is not None else []
        roots += marked_processes(self.run_id, self.since, self.exclude)
        for root in roots:
            for proc in [root, *children(root, recursive=True)]:
                if proc.pid not in self.exclude:
                    found.setdefault(proc.pid, proc)
        for pid, proc in self.known.items():
            found.setdefault(pid, proc)
        procs = [p for p in found.values() if alive(p)]
        for proc in procs:
            self._note(proc)
        return procs

    def _note(self, proc: psutil.Process) -> None:
        if proc is self.root or (self.root is not None and proc.pid == self.root.pid):
            return
        held = self.known.get(proc.pid)
        if held is None or (held is not proc and not held.is_running()):
            self.known[proc.pid] = proc
            with contextlib.suppress(OSError):
                self.sessions.add(os.getsid(proc.pid))

    def adopt(self, owned: set[int]) -> None:
        """Note children of this process that carry the marker (orphans re-parented to a subreaper)."""
        # While they live: a zombie's /proc entry no longer shows its environment.
        for child in children():
            if child.pid in owned or child.pid in self.known:
                continue
            try:
                if child.environ().get(RUN_ID) == self.run_id:
                    self._note(child)
            except (psutil.Error, OSError):
                continue

    def reap(self, owned: set[int]) -> None:
        """Collect the exit status of the tree's dead processes that are this process's children."""
        ours = {pid for pid, proc in self.known.items() if pid not in owned and proc.is_running()}
        for pid in reap(ours):
            self.known.pop(pid, None)


def signal_tree(procs: list[psutil.Process], sig: int) -> None:
    """Send ``sig`` to every process (and, with killpg, to the groups they lead)."""
    if not _portable():
        own = os.getpgid(0)
        for proc in procs:
            with contextlib.suppress(OSError, psutil.Error):
                if proc.pid != own and os.getpgid(proc.pid) == proc.pid and proc.is_running():
                    os.killpg(proc.pid, sig)
    send_each(procs, sig)


def reap(candidates: set[int]) -> set[int]:
    """Collect the exit status of adopted children among ``candidates``; return the PIDs reaped."""
    reaped = set()
    if not hasattr(os, "waitpid"):
        return reaped
    for pid in list(candidates):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # not (or no longer) our child
        if done:
            reaped.add(pid)
    return reaped
