"""The stall watch inside a supervised run: when to look, and the stacks that go with a verdict.

:class:`HangWatch` owns the run's progress folder (``MGPU_PROGRESS_DIR``, handed to the launcher)
and its :class:`~.stall.StallMonitor`. Every :data:`POLL_S` seconds the supervisor asks it for a
verdict. When the monitor finds the node hung, every local rank that reported a stack file *and*
is a live process of the supervised tree dumps its Python stack (:func:`.stacks.collect`); a PID
read from a progress file is only a key into the tree, never signalled as such. The verdict comes
back with each rank's innermost frames, and :meth:`HangWatch.hung` names the processes to SIGKILL
first (the ranks that reported and their children).
"""

from __future__ import annotations

from collections.abc import Mapping

import psutil

from isaaclab_mgpu.launcher.supervise import stacks
from isaaclab_mgpu.launcher.supervise.stall import (
    DIR_ENV,
    Stall,
    StallMonitor,
    StallOptions,
    progress_folder,
    stack_tail,
    with_stacks,
)

__all__ = ["HANG_GRACE", "HANG_KILL_AFTER", "POLL_S", "HangWatch"]

#: How often the stall watch reads the progress reports.
POLL_S = 0.5
#: A hung run is stopped quickly: its ranks are stuck by definition and are SIGKILLed first.
HANG_GRACE = 3.0
HANG_KILL_AFTER = 2.0


class HangWatch:
    """The stall watch of one run on this node."""

    def __init__(self, options: StallOptions, ranks: tuple[int, ...], host: str | None) -> None:
        self.monitor = StallMonitor(options, progress_folder(), ranks, host=host)
        self._next = 0.0

    @property
    def folder(self) -> str:
        """The progress folder the ranks write into."""
        return self.monitor.folder

    @property
    def env(self) -> dict[str, str]:
        """What the launcher's environment gets so that every rank reports."""
        return {DIR_ENV: self.monitor.folder}

    def due(self, now: float) -> bool:
        """True when it is time to look again (every :data:`POLL_S` seconds)."""
        if now < self._next:
            return False
        self._next = now + POLL_S
        return True

    def check(self, tree: list[psutil.Process], output_times: Mapping[int, float] | None) -> Stall | None:
        """The verdict with the hung ranks' stacks, or None while the run progresses."""
        stall = self.monitor.check(output_times=output_times)
        if stall is None:
            return None
        members = {p.pid: p for p in tree}
        targets = {
            r.rank: (members[r.pid], r.stack_file)
            for r in stall.ranks
            if r.pid in members and r.stack_file and r.process != "gone"
        }
        dumped = stacks.collect(targets)
        return with_stacks(stall, {rank: stack_tail(text) for rank, text in dumped.items()})

    @staticmethod
    def hung(stall: Stall, tree: list[psutil.Process]) -> list[psutil.Process]:
        """The tree's processes of the ranks in ``stall``, with their children."""
        pids = {r.pid for r in stall.ranks if r.pid is not None}
        ranks = [p for p in tree if p.pid in pids]
        return [*ranks, *(child for p in ranks for child in _children(p))]

    def remove(self) -> None:
        """Delete the progress folder."""
        self.monitor.remove()


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []
