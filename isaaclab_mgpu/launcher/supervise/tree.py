"""Finding, signalling and reaping every process a launch started, wherever it went.

A launch's processes are found three ways, and the union is "the tree":

1. the launcher and its descendants by parent links (psutil);
2. every process whose environment carries this run's ``MGPU_RUN_ID`` marker — this finds
   processes that called ``setsid`` and orphans that were re-parented away;
3. the descendants of those, in case one of them started a child with a cleared environment.

On Linux ``mgpu`` also makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so
orphans of the tree are re-parented to ``mgpu`` instead of init; :func:`reap` collects their exit
status so they do not linger as zombies. The attribute belongs to the whole host process, which
may be a notebook or a test runner using the supervisor in-process: :func:`hold_subreaper` and
:func:`release_subreaper` count the runs that need it and put back the host's own setting when the
last one ends, and :func:`adopted_zombies` finds the dead orphans of a run's session to reap then.

Signals go to each process by PID (psutil guards against PID reuse) and, where ``os.killpg``
exists, also to each process group of the tree except ``mgpu``'s own, which catches a child forked
between the scan and the signal. Setting ``MGPU_NO_KILLPG=1`` forces the portable path (no
``killpg``, no subreaper: the psutil walk and the marker alone), so it can be tested on Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading

import psutil

from isaaclab_mgpu.launcher.supervise.watchdog import MARKER_ENV, marked_processes

__all__ = [
    "MARKER_ENV",
    "adopted_zombies",
    "alive",
    "get_subreaper",
    "hold_subreaper",
    "portable",
    "reap",
    "release_subreaper",
    "set_subreaper",
    "signal_tree",
    "tree",
]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_holders = 0
_host_setting: bool | None = None
_lock = threading.Lock()


def portable() -> bool:
    """True when the no-killpg path is in use (non-POSIX, or forced with ``MGPU_NO_KILLPG=1``)."""
    return not hasattr(os, "killpg") or os.environ.get("MGPU_NO_KILLPG", "") not in ("", "0")


def set_subreaper(on: bool = True) -> bool:
    """Make this process adopt its orphaned descendants, or stop (Linux); True when it took effect."""
    if not sys.platform.startswith("linux") or portable():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def get_subreaper() -> bool | None:
    """This process's child-subreaper attribute; None where it cannot be read (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        value = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
            return None
        return bool(value.value)
    except (OSError, AttributeError):
        return None


def hold_subreaper() -> bool:
    """Become a subreaper for one run (nested runs share it); True when this process is one now."""
    global _holders, _host_setting
    with _lock:
        if _holders == 0:
            _host_setting = get_subreaper()
            if not _host_setting and not set_subreaper(True):
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
            set_subreaper(False)


def adopted_zombies(sessions: set[int], exclude: set[int]) -> set[int]:
    """Dead children of this process that belong to one of ``sessions`` (orphans of a run's tree).

    Only those: another child of the host (its own ``subprocess.Popen``) keeps its exit status for
    whoever waits for it.
    """
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return set()
    found = set()
    for child in children:
        if child.pid in exclude:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE and os.getsid(child.pid) in sessions:
                found.add(child.pid)
        except (psutil.Error, OSError):
            continue
    return found


def alive(proc: psutil.Process) -> bool:
    """True when ``proc`` still runs (a zombie has already died)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _with_descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def tree(root_pid: int | None, run_id: str, since: float, exclude: frozenset[int]) -> list[psutil.Process]:
    """Every live process of the launch: the root's descendants, marked processes and theirs."""
    found: dict[int, psutil.Process] = {}
    roots: list[psutil.Process] = []
    if root_pid is not None:
        with contextlib.suppress(psutil.Error):
            roots.append(psutil.Process(root_pid))
    roots += marked_processes(run_id, since, exclude)
    for root in roots:
        for proc in _with_descendants(root):
            if proc.pid not in exclude and proc.pid not in found:
                found[proc.pid] = proc
    return [p for p in found.values() if alive(p)]


def signal_tree(procs: list[psutil.Process], sig: int) -> list[int]:
    """Send ``sig`` to every process (and, with killpg, to their groups); return the PIDs reached."""
    if not portable():
        own = os.getpgid(0)
        groups = set()
        for proc in procs:
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(proc.pid))
        for group in groups - {own}:
            with contextlib.suppress(OSError):
                os.killpg(group, sig)
    reached = []
    for proc in procs:
        try:
            proc.send_signal(sig)
            reached.append(proc.pid)
        except (psutil.Error, OSError):
            pass
    return reached


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
