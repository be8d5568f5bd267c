"""Rehearsed faults: ``mgpu train --simulate_fault KIND@ITERATION[,rank=R]`` makes a run meet one for real.

It proves before a long run that restarts, the stall watch and the requeue path save it. The fault
is not mocked; it happens at the start of iteration ``ITERATION`` (1-based, as the console counts),
in the first attempt of an ``mgpu train`` only, and only when that attempt reaches the iteration
itself: a restart, a requeued job or a ``--resume`` that starts past it goes on.

- ``kill``: the rank SIGKILLs itself (a segfault, the OOM killer, a lost GPU);
- ``hang``: the rank stops making progress in a sleep (a deadlock, a stuck collective), and only
  the stall watch ends it;
- ``requeue``: the rank sends its node's ``mgpu`` the requeue signal (``--requeue_signal``, SLURM's
  ``--signal=USR1@90`` warning): the ranks save at the next iteration and stop; under SLURM with
  ``--requeue`` node 0 requeues the job, elsewhere ``mgpu`` exits 75 to be continued with
  ``--resume auto``;
- ``drift``: the rank nudges its own state out of step with the others (its normalizer
  statistics where its back-end keeps any, else one policy parameter), which the ranks'
  periodic drift check (``--drift_interval``) must name.

Without ``rank=``: :meth:`Fault.target`. The launcher hands the value to the ranks in
``MGPU_SIMULATE_FAULT``; each rank's progress reporter (:mod:`.progress`) fires a kill, a hang or a
requeue on the first report of that iteration; the built-in worker makes a drift itself, and an
Isaac Lab rank at the end of the iteration before (:mod:`isaaclab_mgpu.rank.isaac_drift`).

Standard library only: both processes import it.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from isaaclab_mgpu.contract import env

KINDS = ("kill", "hang", "requeue", "drift")
_SHAPE = re.compile(r"^(?P<kind>[a-z]+)@(?P<it>\d+)(?:[, ]+rank=(?P<rank>\d+))?$")


@dataclass(frozen=True)
class Fault:
    """One rehearsed fault."""

    kind: str
    """``kill``, ``hang``, ``requeue`` or ``drift``."""

    iteration: int
    """The iteration (1-based) at whose start it happens."""

    rank: int | None = None
    """The global rank it happens to; None: the highest (kill, hang), 0 (requeue) or 1 (drift)."""

    def text(self) -> str:
        """The canonical spelling (``kill@5,rank=1``), as ``MGPU_SIMULATE_FAULT`` carries it."""
        return f"{self.kind}@{self.iteration}" + (f",rank={self.rank}" if self.rank is not None else "")

    def target(self, world_size: int) -> int:
        """The rank it happens to in a run of ``world_size`` ranks."""
        if self.rank is not None:
            return self.rank
        if self.kind == "drift":
            return min(1, max(world_size - 1, 0))
        return 0 if self.kind == "requeue" else max(world_size - 1, 0)


_WHAT = {
    "kill": "SIGKILLs itself",
    "hang": "freezes (only the stall watch ends it)",
    "requeue": "sends its mgpu the requeue signal",
    "drift": "nudges its normalizer statistics (or a policy parameter) out of step",
}


def describe(fault: Fault, world_size: int) -> str:
    """One line for the console: who meets which fault, when."""
    return (
        f"simulated fault (--simulate_fault {fault.text()}): rank {fault.target(world_size)} "
        f"{_WHAT[fault.kind]} at iteration {fault.iteration} of the first attempt"
    )


def parse(value: str) -> Fault:
    """``KIND@ITERATION[,rank=R]`` as a :class:`Fault`; ValueError naming what is wrong."""
    m = _SHAPE.match(value.strip().lower())
    if m is None:
        raise ValueError("is not KIND@ITERATION[,rank=R], e.g. kill@5,rank=1")
    if m["kind"] not in KINDS:
        raise ValueError(f"has no fault {m['kind']!r}; choose {', '.join(KINDS)}")
    if int(m["it"]) < 1:
        raise ValueError("must name an iteration from 1 (the console's count)")
    return Fault(m["kind"], int(m["it"]), int(m["rank"]) if m["rank"] is not None else None)


def for_this_rank(environ: Mapping[str, str]) -> Fault | None:
    """The fault this rank is to meet in this attempt, or None (none asked, another rank, a later attempt)."""
    value = environ.get(env.SIMULATE_FAULT)
    if not value:
        return None
    try:
        fault = parse(value)
        rank = int(environ.get("RANK", environ.get("JAX_RANK", "0")) or 0)
        world = int(environ.get("WORLD_SIZE", environ.get("JAX_WORLD_SIZE", "1")) or 1)
        attempt = int(environ.get(env.ATTEMPT, "0") or 0)
    except ValueError:
        return None
    # The first attempt only: a restart resumes before the fault's iteration and must get past it.
    return fault if attempt == 0 and fault.target(world) == rank else None


def fire(fault: Fault, environ: Mapping[str, str]) -> None:
    """Meet ``fault`` now (a kill or a hang never returns; the worker makes a drift itself)."""
    rank = environ.get("RANK", environ.get("JAX_RANK", "0"))
    sys.stderr.write(f"[mgpu rank {rank}] simulated fault: {fault.kind} at iteration {fault.iteration}\n")
    sys.stderr.flush()
    if fault.kind == "drift":
        return
    if fault.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.kind == "hang":
        while True:  # no progress report again: the stall watch names this rank and ends the run
            time.sleep(3600)
    else:
        launcher = environ.get(env.LAUNCHER_PID)
        signame = environ.get(env.REQUEUE_SIGNAL, "USR1")
        if launcher and launcher.isdigit():
            os.kill(int(launcher), getattr(signal, f"SIG{signame}", signal.SIGUSR1))
