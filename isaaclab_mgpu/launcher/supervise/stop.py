"""When a supervised run stops, why, and how fast: :func:`decide`, every reason in one place.

Once per step the :class:`~isaaclab_mgpu.launcher.supervise.Supervisor` gathers what it saw
(:class:`Seen`) and where the run stands (:class:`Standing`), and does what :func:`decide` returns,
in order; nothing else starts a stop, speeds one up or sets its timings. The
:class:`~.shutdown.Shutdown` then runs its phases with the timings of the stop that began it. The
reasons, as :func:`decide` weighs them:

``Supervisor.kill()``, or a second interrupt
    SIGKILL the whole tree now. A second interrupt is a stop signal that comes while a stop is
    under way, :data:`~.shutdown.SAME_INTERRUPT` seconds or more after the first (sooner, it is
    the same Ctrl-C delivered twice: see :class:`~.shutdown.Interrupts`).
a first SIGINT, SIGTERM or SIGHUP, or ``Supervisor.stop(reason)``
    The signal (SIGTERM for ``stop``) goes to the launcher alone, which stops its ranks (they save
    a checkpoint on it); the phases follow with the user's ``--grace_period`` and
    ``--kill_after``. The run is interrupted: exit 130, 124 when something had to be SIGKILLed.
a hang (the stall watch's verdict)
    The hung ranks are SIGKILLed first (a hung rank saves nothing, and one resumed by SIGCONT could
    unblock a peer on another node before its own mgpu has spoken); then as on SIGTERM, with
    :data:`HANG_GRACE` and :data:`HANG_KILL_AFTER`. Exit 4.
a failed rank (the launcher's "failed (exitcode…)" line)
    The launcher stops the others itself: they wait in a collective that can never finish and can
    save nothing, while torchrun would give them 30 s before its own SIGKILL. The shutdown bounds
    that with :data:`FAILURE_GRACE` (the user's grace if shorter). The rank's exit code is the run's.
a local rank died (mgpu's worker ended without its done report, seen by the stall watch)
    Its local peers, waiting for it in a collective, are SIGKILLed: at once, or :data:`WANDB_WRITE_S`
    later when a W&B service runs among them (it writes its offline log every 15 s and drops the
    rest when its client is killed). torchrun then reports the failure: the reason above.
the launcher ended by itself
    What it left behind (orphaned grandchildren, setsid escapees) goes at once, not as a requested
    stop: nobody else will stop it.

A stop that comes while another is under way keeps the first one's timings; an interrupt still
reaches the launcher and makes the run interrupted.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

__all__ = [
    "FAILURE_GRACE",
    "HANG_GRACE",
    "HANG_KILL_AFTER",
    "WANDB_WRITE_S",
    "Kind",
    "Seen",
    "Standing",
    "Stop",
    "decide",
]

#: After a rank failed: seconds for the launcher to stop the others itself before SIGTERM to what
#: is left (``kill_after`` stays: W&B's service writing its offline file needs it).
FAILURE_GRACE = 2.0
#: A hung run is stopped quickly: its ranks are stuck by definition and are SIGKILLed first.
HANG_GRACE = 3.0
HANG_KILL_AFTER = 2.0
#: How often W&B's service (wandb-core 0.31, offline) writes its log to disk (measured: every 15 s).
WANDB_WRITE_S = 16.0


class Kind(enum.Enum):
    """What a :class:`Stop` does."""

    FORCE = "force"
    """SIGKILL the whole tree now (:meth:`~.shutdown.Shutdown.force`)."""
    INTERRUPT = "interrupt"
    """A signal or ``stop()``: the signal to the launcher, the shutdown with the user's timings."""
    HANG = "hang"
    """The stall watch's verdict: the hung ranks SIGKILLed, then as an interrupt, faster."""
    FAILURE = "failure"
    """A rank failed: the launcher stops the others; the shutdown bounds it."""
    PEERS = "peers"
    """A local rank died: SIGKILL its local peers after :attr:`Stop.grace` seconds."""
    ENDED = "ended"
    """The launcher ended by itself: what it left goes at once."""


@dataclass(frozen=True)
class Seen:
    """What one step of supervision saw: the facts :func:`decide` weighs."""

    signals: tuple[tuple[str, int], ...] = ()
    """Stop signals taken this step: ``("stop", sig)`` or ``("force", sig)`` (:meth:`.Interrupts.take`)."""

    asked: str | None = None
    """The reason given to ``Supervisor.stop()`` since the last step."""

    killed: bool = False
    """``Supervisor.kill()`` was called since the last step."""

    hang: bool = False
    """The stall watch found this node's run hung, this step."""

    failed: bool = False
    """The launcher printed a failed rank's line, seen for the first time this step."""

    rank_died: bool = False
    """The stall watch found a local rank dead with local peers waiting for it, this step."""

    wandb: bool = False
    """A W&B service runs among that dead rank's peers."""

    launcher_alive: bool = True
    """The launcher has not ended."""


@dataclass(frozen=True)
class Standing:
    """Where the run stands before this step's facts: what earlier stops did, and the options."""

    stopping: bool = False
    """The shutdown has begun."""

    interrupted: bool = False
    """An interrupt (a signal, ``stop()``, ``kill()``, a hang) stopped the run."""

    forced: bool = False
    """The tree is being SIGKILLed."""

    lone_rank: bool = False
    """A world of one rank: after it failed, there are no others to stop (and nothing to say)."""

    grace: float = 10.0
    """The user's ``--grace_period``."""

    kill_after: float = 5.0
    """The user's ``--kill_after``."""


@dataclass(frozen=True)
class Stop:
    """One thing to do about a reason to stop (see :func:`decide`)."""

    kind: Kind
    """What it does."""

    reason: str = ""
    """Why, as the stopping note says it (``SIGINT received``, ``hang found``)."""

    send: int | None = None
    """The signal the launcher alone gets (when still alive); None: nothing is sent."""

    grace: float | None = None
    """Seconds before SIGTERM to the tree (:attr:`Kind.PEERS`: before their SIGKILL); None: the shutdown's."""

    kill_after: float | None = None
    """Seconds between SIGTERM and SIGKILL; None: as the shutdown has it."""

    announce: bool = True
    """Tell people (the stopping note, the failure note, the forcing note)."""

    @property
    def interrupts(self) -> bool:
        """The run counts as interrupted from this stop on (no failed rank is looked for)."""
        return self.kind in (Kind.FORCE, Kind.INTERRUPT, Kind.HANG)

    @property
    def requested(self) -> bool:
        """A stop someone asked for (so a SIGKILL after SIGTERM counts, exit 124)."""
        return self.kind is not Kind.ENDED


def decide(seen: Seen, run: Standing) -> tuple[Stop, ...]:
    """What to do about what one step saw, in the order the reasons are weighed; () to go on."""
    stops: list[Stop] = []
    stopping, interrupted, forced = run.stopping, run.interrupted, run.forced

    def interrupt(kind: Kind, reason: str, sig: int, grace: float, kill_after: float) -> None:
        nonlocal stopping, interrupted
        # Said once: a stop while one is under way is only news when it is the first interrupt.
        stops.append(Stop(kind, reason, sig, grace, kill_after, announce=not stopping or not interrupted))
        stopping = interrupted = True

    def force(announce: bool) -> None:
        nonlocal stopping, interrupted, forced
        if not forced:
            stops.append(Stop(Kind.FORCE, announce=announce))
        stopping = interrupted = forced = True

    if seen.killed:
        force(announce=False)
    if seen.asked is not None:
        interrupt(Kind.INTERRUPT, seen.asked, signal.SIGTERM, run.grace, run.kill_after)
    for kind, sig in seen.signals:
        if kind == "stop":
            interrupt(Kind.INTERRUPT, f"{signal.Signals(sig).name} received", sig, run.grace, run.kill_after)
        else:
            force(announce=True)
    if stopping:
        return tuple(stops)
    if seen.hang:
        interrupt(Kind.HANG, "hang found", signal.SIGTERM, HANG_GRACE, HANG_KILL_AFTER)
    elif seen.failed and seen.launcher_alive:
        grace = min(run.grace, FAILURE_GRACE)  # the launcher stops the others; this only bounds it
        stops.append(Stop(Kind.FAILURE, "a rank failed", None, grace, run.kill_after, not run.lone_rank))
    elif seen.rank_died:
        stops.append(Stop(Kind.PEERS, "a rank died", grace=WANDB_WRITE_S if seen.wandb else 0.0))
    elif not seen.launcher_alive:
        stops.append(Stop(Kind.ENDED, "the launcher ended", announce=False))
    return tuple(stops)
