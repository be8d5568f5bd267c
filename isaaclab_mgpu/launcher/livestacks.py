"""``mgpu stacks``: every local rank's live Python stack, with the run left running.

A rank under ``mgpu train`` registers :data:`~isaaclab_mgpu.contract.stacks.STACK_SIGNAL` with
faulthandler at its first progress call, writing into ``stack.txt`` beside its torchrun logs. This
module finds those ranks on this machine and asks them for their stacks through the stall watch's
collector (:func:`isaaclab_mgpu.launcher.supervise.stacks.collect`): the ranks write, the run goes on.

Which processes: this user's processes that carry mgpu's run marker (``MGPU_RUN_ID``) and a rank
number, whose ``/proc/<pid>/status`` shows the stack signal *caught*: the signal's default action
ends a process, so a rank that has not installed the handler yet is left alone and named as such.
A run folder given on the command line selects the run whose ``MGPU_RUN_STAMP`` begins the folder's
name, else (a run continued by a later launch) the run started by the ``mgpu`` its ledger's last
``launched`` event names (``MGPU_LAUNCHER_PID``). Without one, only runs started from this directory
count: another checkout's run is never signalled. One such run is taken; several are listed and
none is signalled.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from isaaclab_mgpu.contract import elastic, env, events
from isaaclab_mgpu.contract.elastic import STACK_FILE
from isaaclab_mgpu.contract.errors import MgpuError, UsageError
from isaaclab_mgpu.contract.stacks import STACK_SIGNAL
from isaaclab_mgpu.launcher.supervise import stacks

__all__ = ["LiveRank", "LiveRun", "dump", "find_runs", "pick"]


@dataclass(frozen=True)
class LiveRank:
    """One rank process of a running run on this machine."""

    rank: int
    """Global rank."""

    local_rank: int
    """Rank on this node."""

    process: psutil.Process
    """The process, held so that a PID reused meanwhile is never signalled."""

    stack_file: Path
    """Where the rank's faulthandler writes (``stack.txt`` beside its torchrun logs)."""

    ready: bool
    """The rank has the stack handler installed (a rank still starting has not)."""


@dataclass(frozen=True)
class LiveRun:
    """The ranks of one running launch on this machine."""

    run_id: str
    """mgpu's run marker."""

    stamp: str | None
    """The run folder's stamp (``MGPU_RUN_STAMP``)."""

    started: float
    """When its first rank started (seconds since the epoch)."""

    ranks: tuple[LiveRank, ...]
    """Its local ranks, by global rank."""

    cwd: str | None = None
    """The directory it was started from (its ranks' working directory), when readable."""

    launcher_pid: int | None = None
    """The ``mgpu`` that started it (``MGPU_LAUNCHER_PID``)."""


def _caught(pid: int, signum: int) -> bool:
    """True when ``pid`` has a handler for ``signum`` (``SigCgt`` in /proc/<pid>/status)."""
    try:
        # errors="replace": the Name line is whatever the process named itself, any bytes.
        with open(f"/proc/{pid}/status", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _rank(environ: dict[str, str]) -> tuple[int, int] | None:
    for prefix in ("", "JAX_"):
        rank, local = environ.get(f"{prefix}RANK"), environ.get(f"{prefix}LOCAL_RANK")
        if rank is not None and rank.isdigit() and local is not None and local.isdigit():
            return int(rank), int(local)
    return None


def find_runs(processes: Iterable[psutil.Process] | None = None) -> list[LiveRun]:
    """The running launches of this user on this machine, newest first."""
    uid = os.getuid()
    found: dict[str, list[tuple[float, str | None, LiveRank, str | None, int | None]]] = {}
    for proc in psutil.process_iter() if processes is None else processes:
        try:
            if proc.uids().real != uid:
                continue
            environ = proc.environ()
            run_id, error_file = environ.get(env.RUN_ID), environ.get(env.ERROR_FILE)
            where = _rank(environ)
            if not run_id or not error_file or where is None:
                continue
            started, cwd = proc.create_time(), proc.cwd()
        except (psutil.Error, OSError):
            continue
        ready = STACK_SIGNAL is not None and _caught(proc.pid, STACK_SIGNAL)
        rank = LiveRank(where[0], where[1], proc, elastic.beside_error_file(error_file, STACK_FILE), ready)
        mgpu = environ.get(env.LAUNCHER_PID, "")
        found.setdefault(run_id, []).append(
            (started, environ.get(env.RUN_STAMP), rank, cwd, int(mgpu) if mgpu.isdigit() else None)
        )
    runs = [
        LiveRun(
            run_id=run_id,
            stamp=next((m[1] for m in members if m[1]), None),
            started=min(m[0] for m in members),
            ranks=tuple(sorted((m[2] for m in members), key=lambda r: r.rank)),
            cwd=members[0][3],
            launcher_pid=members[0][4],
        )
        for run_id, members in found.items()
    ]
    return sorted(runs, key=lambda r: r.started, reverse=True)


def pick(runs: list[LiveRun], folder: str | None, here: str | None = None) -> LiveRun:
    """The run ``folder`` names, else the one run started from ``here`` (default: this directory)."""
    if folder is None:
        here = os.path.realpath(here or os.getcwd())
        mine = [r for r in runs if r.cwd is not None and os.path.realpath(r.cwd) == here]
        if not mine:  # nothing to show, as `mgpu runs --last` with no run: 1, not bad input
            elsewhere = f" ({len(runs)} elsewhere: name its run folder)" if runs else ""
            raise MgpuError(f"no running mgpu run started from {here}{elsewhere}", exit_code=1)
        if len(mine) > 1:
            listed = ", ".join(f"{r.stamp or r.run_id} ({len(r.ranks)} ranks)" for r in mine)
            raise UsageError(f"{len(mine)} running runs started here: {listed}; name one: mgpu stacks FOLDER")
        return mine[0]
    name = Path(folder).name
    for run in runs:
        if run.stamp and name.startswith(run.stamp):
            return run
    launched = _launched(folder)
    if launched is not None and launched.host == socket.gethostname():
        for run in runs:
            if run.launcher_pid is not None and run.launcher_pid == launched.pid:
                return run
    raise UsageError(f"{folder!r}: no running rank on this machine writes this run; see mgpu runs")


def _launched(folder: str) -> events.Launched | None:
    """The last ``launched`` event of the folder's ledger: the ``mgpu`` now keeping the run."""
    ledger = events.read(folder, kinds=("launched",))
    found = [e for e in ledger.events if isinstance(e, events.Launched)] if ledger is not None else []
    return found[-1] if found else None


def dump(run: LiveRun, wait: float = stacks.WAIT_S) -> dict[int, str]:
    """Every ready rank's stack, by global rank (a rank that wrote nothing in ``wait`` s is absent)."""
    return stacks.collect({r.rank: (r.process, r.stack_file) for r in run.ranks if r.ready}, wait=wait)
