"""The straggler watch: which rank holds the others back, named while the run goes on.

Every rank's iteration lasts as long as the slowest rank's (the others wait for it in the
collectives), so the slow rank shows in its *busy* time (the iteration less its waits), which
every rank reports (:mod:`isaaclab_mgpu.progress`: cumulative ``busy_s`` over ``timed`` steady
iterations; see ``docs/supervision.md``).

:class:`StragglerWatch` is fed each rank's latest totals (this node's progress reports, and on a
multi-node run the other nodes' ranks as their mgpu published them, :mod:`isaaclab_mgpu.launcher.peers`).
A *window* closes once every rank has timed :data:`WINDOW` more iterations since the last one
closed; in it each rank's busy seconds per iteration are compared with the median of the other
ranks'. A rank at least :data:`THRESHOLD` times that median (and :data:`MIN_EXCESS_S` above it)
in :data:`WINDOWS` windows in a row is named, once: :meth:`StragglerWatch.update` returns a
:class:`~isaaclab_mgpu.contract.summary.Straggler` for the console and ``summary.json``.

Why these figures (measured on a loaded 2-core machine): ``docs/supervision.md``, "Busy time and
stragglers". A single slow window names nobody.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from isaaclab_mgpu.contract.summary import Straggler

__all__ = ["MIN_EXCESS_S", "THRESHOLD", "WINDOW", "WINDOWS", "RankTotals", "StragglerWatch"]

#: Iterations every rank must have timed for a window to close.
WINDOW = 5
#: Busy time per iteration, as a multiple of the other ranks' median, that counts as slow.
THRESHOLD = 1.5
#: ... and at least this many seconds per iteration above it (sub-millisecond noise is no straggler).
MIN_EXCESS_S = 0.002
#: Slow windows in a row before the rank is named.
WINDOWS = 3


@dataclass(frozen=True)
class RankTotals:
    """One rank's busy-time totals, as its last report gave them."""

    rank: int
    """Global rank."""

    timed: int
    """Steady iterations timed so far."""

    busy_s: float
    """Their busy seconds, in all."""

    iteration: int | None = None
    """The iteration it reported last."""

    host: str | None = None
    """Its host."""


@dataclass
class StragglerWatch:
    """Compares the ranks' busy time window by window; names a straggler once."""

    devices: Mapping[int, str] = field(default_factory=dict)
    """Global rank → device (``cpu``, ``cuda:N``) of this node's ranks."""

    gpu_state: Callable[[str], str | None] = lambda device: None
    """The NVML line of a device of this node (clocks, throttle reasons, temperature, PCIe link)."""

    windows: int = WINDOWS

    _start: dict[int, RankTotals] = field(default_factory=dict)
    _streak: dict[int, int] = field(default_factory=dict)
    _named: dict[int, Straggler] = field(default_factory=dict)

    @property
    def named(self) -> tuple[Straggler, ...]:
        """Every straggler named so far, in the order they were named."""
        return tuple(self._named.values())

    def update(self, ranks: Mapping[int, RankTotals]) -> Straggler | None:
        """Take the ranks' latest totals; a straggler named for the first time, else None."""
        if len(ranks) < 2:
            return None
        if set(ranks) != set(self._start) or any(ranks[r].timed < self._start[r].timed for r in ranks):
            self._start = dict(ranks)  # a rank appeared or restarted: begin a fresh window
            self._streak.clear()
            return None
        done = {r: ranks[r].timed - self._start[r].timed for r in ranks}
        if min(done.values()) < WINDOW:
            return None
        per_it = {r: (ranks[r].busy_s - self._start[r].busy_s) / done[r] for r in ranks}
        first = min(t.iteration or 0 for t in self._start.values())
        self._start = dict(ranks)
        found = None
        for r, busy in per_it.items():
            others = statistics.median(v for k, v in per_it.items() if k != r)
            slow = others > 0 and busy >= THRESHOLD * others and busy - others >= MIN_EXCESS_S
            self._streak[r] = self._streak.get(r, 0) + 1 if slow else 0
            if self._streak[r] >= self.windows and r not in self._named and found is None:
                device = self.devices.get(r)
                found = Straggler(
                    rank=r,
                    host=ranks[r].host,
                    device=device,
                    busy_s=round(busy, 6),
                    others_busy_s=round(others, 6),
                    slower=round(busy / others, 3),
                    iterations=(first, max(t.iteration or 0 for t in ranks.values())),
                    gpu=self.gpu_state(device) if device and device.startswith("cuda") else None,
                )
                self._named[r] = found
        return found
