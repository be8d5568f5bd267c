"""A rank's one signal recorder: every signal handler of the rank side is here.

- Start-up: Python turns SIGINT into ``KeyboardInterrupt``, whose traceback from the middle of
  ``import torch`` is all a user would see of a Ctrl-C pressed then. :func:`quiet_interrupts` makes
  SIGINT end the process with :data:`~.errors.EXIT_INTERRUPTED` instead (a ``SystemExit``, which
  prints nothing); :func:`recording` replaces it while training.
- Training: :func:`recording` records SIGINT and SIGTERM (:class:`Recorder`) while its block runs
  and restores the handlers after. The built-in worker reads the record between iterations and
  stops at an iteration boundary; the Isaac Lab path asks for ``interrupt=True`` (the signal is
  recorded, then raised as ``KeyboardInterrupt``, on which Isaac Lab's libraries stop).
- SIGUSR1 is SLURM's "the time limit is near" (``--signal=USR1@90``): under ``mgpu`` the progress
  reporter (:mod:`.progress`) calls :func:`record_stop_requests`, so the rank survives it and
  :func:`stop_requested` turns True (a program that installed its own SIGUSR1 handler keeps it).

Handlers are installed from the main thread only (elsewhere Python refuses): off it, nothing is
recorded and the old behaviour stays. Standard library only: it runs before anything heavy.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED

__all__ = ["Recorder", "quiet_interrupts", "record_stop_requests", "recording", "stop_requested"]


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(EXIT_INTERRUPTED)


def quiet_interrupts() -> None:
    """Exit with the interrupted code, without a traceback, on SIGINT (main thread only)."""
    if _main_thread():
        signal.signal(signal.SIGINT, _stop)


class Recorder:
    """The stop signals received while :func:`recording` runs."""

    def __init__(self, interrupt: bool = False) -> None:
        self.signal: int | None = None
        """The last one received; None: none."""
        self._interrupt = interrupt

    def __call__(self, signum: int, frame: Any) -> None:
        self.signal = signum
        if self._interrupt and signum == signal.SIGINT:
            raise KeyboardInterrupt


@contextlib.contextmanager
def recording(
    signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM), *, interrupt: bool = False
) -> Iterator[Recorder]:
    """Record ``signals`` while the block runs (``interrupt``: SIGINT then raises
    ``KeyboardInterrupt``); the old handlers come back after."""
    recorder = Recorder(interrupt)
    if not _main_thread():
        yield recorder
        return
    old = {s: signal.signal(s, recorder) for s in signals}
    try:
        yield recorder
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


_stop_requested = False
_armed = False


def _record_stop_request(_signum: int, _frame: object) -> None:
    global _stop_requested
    _stop_requested = True


def record_stop_requests() -> None:
    """Record SIGUSR1 (see :func:`stop_requested`) instead of dying of it, unless handled already."""
    global _armed
    if _armed or not hasattr(signal, "SIGUSR1"):
        return
    _armed = True
    try:
        if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
            signal.signal(signal.SIGUSR1, _record_stop_request)
    except ValueError:
        _armed = False  # not the main thread: the next call made there tries again


def stop_requested() -> bool:
    """True once this rank got SIGUSR1 under ``mgpu`` (SLURM: the time limit is near)."""
    return _stop_requested
