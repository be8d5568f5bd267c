"""The one shutdown path of every launch mgpu supervises: running → stopping → terminating → killing → done.

:class:`Shutdown` is shared by the :class:`~isaaclab_mgpu.launcher.supervise.Supervisor` and the JAX
launcher (:mod:`isaaclab_mgpu.launcher.jaxrun`). Its :meth:`Shutdown.sequence` reads top to bottom:

stopping
    The first request went to whoever stops the ranks best: the launcher alone (torchrun forwards
    it to its ranks and prints its failure summary), or the ranks themselves (jaxrun). Wait until
    they are gone or ``grace`` seconds passed since the request. A launch that ended by itself
    and left processes behind skips this wait: nobody else will stop them.
terminating
    SIGTERM, then SIGCONT (a stopped process must run to die of it), to every process left in the
    tree; wait ``kill_after`` seconds for them to go.
killing
    SIGKILL to every survivor, repeated until none is left or :data:`GIVE_UP` seconds passed (a
    process in uninterruptible sleep cannot be killed; it is named as a survivor).

A second interrupt (:meth:`Shutdown.force`) jumps to killing from wherever the sequence is. The
caller drives the sequence with :meth:`Shutdown.step` from its own loop, so nothing here blocks.

Signals are only recorded where they arrive: :meth:`Interrupts.installed` installs handlers that
only record, into the launch's one :class:`Interrupts` (``mgpu train``'s attempts loop keeps one for
all its attempts). :meth:`Interrupts.take` tells the first stop signal from the same Ctrl-C
delivered twice (within :data:`SAME_INTERRUPT` seconds: the terminal signals the whole foreground
group and wrappers such as ``uv run`` forward it once more) and from a second, deliberate one. The
checkpoint signal (``--requeue_signal``, SIGUSR1 by default, what SLURM's ``--signal`` sends before
the time limit) is never a stop: it is only recorded (:attr:`Interrupts.checkpoint_at`) for the
attempts loop (:mod:`isaaclab_mgpu.launcher.attempts`); elsewhere mgpu merely survives it.
"""

from __future__ import annotations

import contextlib
import enum
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psutil

from isaaclab_mgpu.launcher.supervise.tree import signal_tree

__all__ = [
    "CHECKPOINT_SIGNAL",
    "GIVE_UP",
    "SAME_INTERRUPT",
    "STOP_SIGNALS",
    "Interrupts",
    "Phase",
    "Shutdown",
    "ignored",
]

#: Signals that start a stop; a second one of any of them kills the tree at once.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
#: SLURM's "checkpoint and stop soon" (``--requeue_signal``'s default): recorded, never a stop.
CHECKPOINT_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)
#: Signals this close to the first are the same Ctrl-C.
SAME_INTERRUPT = 0.5
#: How long SIGKILL is repeated before the survivors are given up on.
GIVE_UP = 5.0


class Phase(enum.Enum):
    """Where a shutdown is."""

    RUNNING = "running"
    STOPPING = "stopping"
    TERMINATING = "terminating"
    KILLING = "killing"
    DONE = "done"


class Interrupts:
    """Signals as the handlers recorded them (appending is all a handler does), read by the loops."""

    def __init__(
        self, checkpoint_signal: int | None = CHECKPOINT_SIGNAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.checkpoint_signal = checkpoint_signal
        """The signal that asks for a checkpoint (``--requeue_signal``): recorded, never a stop."""
        self.clock = clock
        """The monotonic clock arrivals are read on."""
        self._got: list[tuple[int, float]] = []
        self._seen = 0
        self._first_at: float | None = None

    @property
    def signals(self) -> tuple[int, ...]:
        """What the handlers are installed for: the stop signals and the checkpoint signal."""
        extra = () if self.checkpoint_signal is None else (self.checkpoint_signal,)
        return (*STOP_SIGNALS, *extra)

    def record(self, signum: int) -> None:
        """Note ``signum`` (safe in a signal handler)."""
        self._got.append((signum, self.clock()))

    @property
    def stop_asked(self) -> bool:
        """A stop signal arrived, taken or not."""
        return any(sig != self.checkpoint_signal for sig, _ in list(self._got))

    @property
    def checkpoint_at(self) -> float | None:
        """When the checkpoint signal first arrived (monotonic seconds); None while it has not."""
        return next((at for sig, at in list(self._got) if sig == self.checkpoint_signal), None)

    def take(self, stopping: bool) -> Iterator[tuple[str, int]]:
        """Each new stop signal as ``("stop", sig)`` (the first) or ``("force", sig)`` (a second)."""
        # stopping: a stop was already requested some other way, so any signal is a second one.
        while self._seen < len(self._got):
            sig, at = self._got[self._seen]
            self._seen += 1
            if sig == self.checkpoint_signal:
                continue
            if not stopping:
                stopping = True
                self._first_at = at
                yield "stop", sig
            elif self._first_at is None or at - self._first_at >= SAME_INTERRUPT:
                yield "force", sig

    @contextlib.contextmanager
    def installed(self) -> Iterator[bool]:
        """While inside, :attr:`signals` only call :meth:`record`; yields whether the handlers are in."""
        # Handlers can only be installed from the main thread.
        if threading.current_thread() is not threading.main_thread():
            yield False
            return
        previous = {
            sig: signal.signal(sig, lambda signum, _frame: self.record(signum)) for sig in self.signals
        }
        try:
            yield True
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@contextlib.contextmanager
def ignored(signum: int) -> Iterator[None]:
    """While inside, ``signum`` is ignored, so a process started here inherits SIG_IGN for it."""
    # exec keeps an ignored signal ignored, where a handler would revert to the default (death).
    previous = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, previous)


@dataclass
class Shutdown:
    """One launch's shutdown, driven step by step (see the module docstring)."""

    members: Callable[[], list[psutil.Process]]
    """Every live process of the tree, looked up afresh at each call."""

    first_alive: Callable[[], bool]
    """True while whoever got the first request (the launcher, or the ranks) is still running."""

    grace: float
    """Seconds of stopping before terminating (:meth:`begin` may give others)."""

    kill_after: float
    """Seconds of terminating before killing (:meth:`begin` may give others)."""

    on_terminate: Callable[[int, bool], None] = lambda count, first_alive: None
    """Told how many processes get SIGTERM, and whether the launcher was still running."""

    on_kill: Callable[[int], None] = lambda count: None
    """Told how many processes ignored SIGTERM and get SIGKILL (not after :meth:`force`)."""

    clock: Callable[[], float] = time.monotonic
    """The monotonic clock the deadlines are read on."""

    phase: Phase = Phase.RUNNING
    """Where the shutdown is."""

    requested: bool = False
    """A stop was asked for (a signal, a failed rank, a hang); False when the launch just ended."""

    forced: bool = False
    """Kill at once (a second interrupt)."""

    killed_after_grace: bool = False
    """A requested stop had to SIGKILL a process that ignored SIGTERM."""

    started_at: float | None = None
    """When the shutdown began (monotonic)."""

    _steps: Iterator[Phase] | None = field(default=None, repr=False)

    def begin(
        self, requested: bool = True, *, grace: float | None = None, kill_after: float | None = None
    ) -> None:
        """Start the sequence (once), with ``grace`` and ``kill_after`` if given."""
        self.requested = self.requested or requested
        if self._steps is not None:
            return
        self.grace = self.grace if grace is None else grace
        self.kill_after = self.kill_after if kill_after is None else kill_after
        self.started_at = self.clock()
        self.phase = Phase.STOPPING
        self._steps = self.sequence()

    def force(self) -> None:
        """Kill the whole tree now (a second interrupt)."""
        self.forced = True
        self.begin(requested=self.requested)

    def step(self) -> Phase:
        """Advance the sequence as far as it can go now; return the phase it is in."""
        if self._steps is not None and self.phase is not Phase.DONE:
            next(self._steps, None)
        return self.phase

    @property
    def done(self) -> bool:
        """Nothing of the tree is left alive (or the survivors were given up on)."""
        return self.phase is Phase.DONE

    def sequence(self) -> Iterator[Phase]:
        """The phases in order; yields while waiting, returns once the tree is gone."""
        assert self.started_at is not None
        self.phase = Phase.STOPPING
        while not self.forced and self.first_alive() and self.clock() < self.started_at + self.grace:
            yield self.phase

        procs = self.members()
        if procs and not self.forced:
            self.phase = Phase.TERMINATING
            self.on_terminate(len(procs), self.first_alive())
            signal_tree(procs, signal.SIGTERM)
            signal_tree(procs, signal.SIGCONT)
            deadline = self.clock() + self.kill_after
            while not self.forced and self.clock() < deadline:
                yield self.phase
                if not self.members():
                    break

        procs = self.members()
        if procs:
            self.phase = Phase.KILLING
            if not self.forced:
                self.on_kill(len(procs))
                self.killed_after_grace = self.requested
            deadline = self.clock() + GIVE_UP
            while procs and self.clock() < deadline:
                signal_tree(procs, signal.SIGKILL)
                yield self.phase
                procs = self.members()
        self.phase = Phase.DONE
