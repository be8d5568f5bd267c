"""Collecting the Python stacks of hung ranks: the launcher's half of :mod:`isaaclab_mgpu.contract.stacks`.

:func:`collect` is the one way mgpu asks ranks for their stacks: ``mgpu stacks`` calls it directly,
``train``'s stall watch and ``probe-nccl``'s hang report through :func:`of_ranks`, which takes only
the processes of the supervised tree that their progress reports name by PID. Each process comes as
a psutil object (psutil refuses to signal a PID that was reused), with the file the rank registered,
and gets :data:`~isaaclab_mgpu.contract.stacks.STACK_SIGNAL`; a stopped one (SIGSTOP, a debugger)
also gets SIGCONT, which delivers the pending signal, and is stopped again once its stack is
written, so the verdict still sees it as it was found. faulthandler writes a dump in one go: a file
that grew and then kept its size is done. What was written after the signal is returned; a rank that
wrote nothing within ``wait`` seconds is missing from the result.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

from isaaclab_mgpu.contract.stacks import STACK_SIGNAL

__all__ = ["WAIT_S", "collect", "of_ranks"]

#: How long to wait for the dumped stacks.
WAIT_S = 3.0
_POLL = 0.02


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def collect(targets: Mapping[int, tuple[psutil.Process, str | Path]], wait: float = WAIT_S) -> dict[int, str]:
    """Have each rank's process dump its stack into its file; return, by rank, the text each one wrote."""
    if STACK_SIGNAL is None:
        return {}
    pending: dict[int, tuple[psutil.Process, Path, int, bool]] = {}
    for key, (proc, name) in targets.items():
        path = Path(name)
        try:
            stopped = proc.status() == psutil.STATUS_STOPPED
            before = _size(path)
            proc.send_signal(STACK_SIGNAL)
            if stopped:
                proc.send_signal(signal.SIGCONT)  # delivers the pending stack signal
        except (psutil.Error, OSError):
            continue
        pending[key] = (proc, path, before, stopped)
    stacks: dict[int, str] = {}
    last: dict[int, int] = {}
    deadline = time.monotonic() + wait
    while pending and time.monotonic() < deadline:
        for key, (proc, path, before, stopped) in list(pending.items()):
            size = _size(path)
            if size > before and size == last.get(key):
                _restop(proc, stopped)
                stacks[key] = _read_from(path, before)
                del pending[key]
            last[key] = size
        time.sleep(_POLL)
    for key, (proc, path, before, stopped) in pending.items():
        _restop(proc, stopped)
        text = _read_from(path, before)
        if text:
            stacks[key] = text
    return stacks


def of_ranks(tree: list[psutil.Process], ranks: Iterable[Any]) -> dict[int, str]:
    """:func:`collect` from the ``ranks`` (with ``rank``, ``pid``, ``stack_file``) that are in ``tree``."""
    members = {p.pid: p for p in tree}  # a PID outside the tree is no rank: never signalled
    return collect(
        {r.rank: (members[r.pid], r.stack_file) for r in ranks if r.pid in members and r.stack_file}
    )


def _restop(proc: psutil.Process, stopped: bool) -> None:
    if stopped:
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(signal.SIGSTOP)  # keep it as it was found
