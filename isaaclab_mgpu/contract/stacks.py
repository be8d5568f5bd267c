"""The stack-dump signal: how a supervisor has a rank write its Python stack without stopping it.

A rank calls :func:`register` once (the ranks' progress reporter and the probe worker do); from
then on :data:`STACK_SIGNAL` makes :mod:`faulthandler` append every thread's Python stack to the
file it named, and the rank runs on. The supervisor sends that signal only to a process of its
own tree that said, through its progress file, where its stack goes: a real-time signal's default
action is to terminate, so a process without the handler must never get it.

Why a real-time signal and not SIGUSR1: SLURM can deliver SIGUSR1 to every process of a job step
before the time limit (:mod:`.signals`), and never sends a real-time signal; ``SIGRTMIN + 5``
stays clear of those that threading libraries and timers claim. Where there are no real-time
signals (not Linux), :data:`STACK_SIGNAL` is None and no stack is dumped.

Standard library only.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path
from typing import IO

__all__ = ["STACK_SIGNAL", "register"]

#: The signal that makes a registered rank dump its stack; None where there is none to spare.
STACK_SIGNAL: int | None = signal.SIGRTMIN + 5 if hasattr(signal, "SIGRTMIN") else None

# Kept open for the life of the process: faulthandler writes to it from a signal handler.
_files: list[IO[str]] = []


def register(path: str | Path, *, fatal: bool = False, truncate: bool = False) -> str | None:
    """Dump this process's stack into ``path`` on :data:`STACK_SIGNAL` (``fatal``: on SIGSEGV… too)."""
    # Returns the absolute path, or None (no signal to spare, not the main interpreter, the folder
    # not writable): then the supervisor never sends the signal.
    if STACK_SIGNAL is None:
        return None
    try:
        stream = open(path, "w" if truncate else "a")  # noqa: SIM115  (see _files)
    except OSError:
        return None
    try:
        faulthandler.register(STACK_SIGNAL, file=stream, all_threads=True, chain=False)
        if fatal:
            faulthandler.enable(file=stream, all_threads=True)
    except (ValueError, RuntimeError, OSError):
        stream.close()
        return None
    _files.append(stream)
    return os.path.abspath(path)
