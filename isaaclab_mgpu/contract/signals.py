"""The rank side's one signal recorder (the worker, the Isaac Lab path, the progress reporter).

:func:`quiet_interrupts`: a Ctrl-C during start-up exits :data:`~.errors.EXIT_INTERRUPTED` without
the traceback of a half-done ``import torch``. :func:`recording`: SIGINT and SIGTERM recorded while
training (:class:`Recorder`; ``interrupt=True``, the Isaac Lab path's, then raises
``KeyboardInterrupt``, on which its libraries stop), the old handlers back after.
:func:`record_stop_requests`: under ``mgpu`` the rank survives SLURM's SIGUSR1 (the time limit is
near) and :func:`stop_requested` turns True (a handler of the program's own is kept). Main thread
only (Python refuses others). Standard library only: it runs before anything heavy.
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
    """Record ``signals`` while the block runs (``interrupt``: SIGINT raises ``KeyboardInterrupt``)."""
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
