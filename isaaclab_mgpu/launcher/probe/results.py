"""Probe results: per-rank files turned into one table per launch, a status, an exit code. Pure.

Bandwidth follows nccl-tests: ``algbw = bytes / time`` and, for all-reduce,
``busbw = algbw * 2(n - 1)/n`` — the bandwidth each link must sustain, comparable across world
sizes and with hardware ceilings. A launch's time for a size is the slowest local rank's, and its
wrong-element count is the sum over local ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isaaclab_mgpu.contract.errors import EXIT_OK, EXIT_PROBE_ERROR, EXIT_PROBE_HANG, EXIT_PROBE_WRONG

OK = "ok"
HANG = "hang"
ERROR = "error"
WRONG = "wrong-result"
#: Worst first: the order in which a sweep's exit code is chosen.
SEVERITY = (HANG, WRONG, ERROR, OK)
EXIT_CODES = {OK: EXIT_OK, HANG: EXIT_PROBE_HANG, WRONG: EXIT_PROBE_WRONG, ERROR: EXIT_PROBE_ERROR}
MODES = ("out-of-place", "in-place")


def bus_factor(world_size: int) -> float:
    """All-reduce's bus-bandwidth factor ``2(n - 1)/n`` (0 for one rank: nothing crosses a link)."""
    return 2.0 * (world_size - 1) / world_size


def bandwidths(nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in GB/s (10⁹ bytes per second) for one all-reduce of ``nbytes``."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(world_size)


@dataclass(frozen=True)
class ModeResult:
    """One message size in one mode (out-of-place or in-place)."""

    time_s: float
    """Seconds per all-reduce, slowest rank."""

    algbw: float
    """Algorithm bandwidth in GB/s: bytes / time."""

    busbw: float
    """Bus bandwidth in GB/s: algbw · 2(n−1)/n."""

    wrong: int
    """Elements that differed from the closed-form sum, over all local ranks."""


@dataclass(frozen=True)
class SizeResult:
    """One row of the table."""

    bytes: int
    """Message size in bytes."""

    count: int
    """Elements per message."""

    type: str
    """Element type."""

    out_of_place: ModeResult
    """Result into a separate buffer."""

    in_place: ModeResult
    """Result over the input buffer."""

    @property
    def wrong(self) -> int:
        """Wrong elements in both modes."""
        return self.out_of_place.wrong + self.in_place.wrong


@dataclass(frozen=True)
class HungRank:
    """A rank that had not finished when the launch timed out."""

    rank: int
    """Global rank."""

    stage: str
    """Where its last heartbeat put it, e.g. ``collective 3 at 64 B (in-place, timed)``."""

    state: str | None
    """Its process state when the hang was called (``stopped``, ``sleeping``, ``running``, ``gone``)."""

    pid: int | None = None
    """Process id, when it had started."""

    host: str | None = None
    """Host it ran on."""

    since_s: float | None = None
    """Seconds since its last heartbeat."""

    stack: str | None = None
    """Its Python stack (faulthandler, SIGUSR1), when one could be collected."""

    stack_file: str | None = None
    """File holding that stack."""


@dataclass(frozen=True)
class WorldResult:
    """The outcome of one launch: a world size, or one pair of devices."""

    label: str
    """``world size 2`` or ``pair 0,1``."""

    world_size: int
    """Ranks in the launch."""

    status: str
    """``ok``, ``hang``, ``error`` or ``wrong-result``."""

    elapsed_s: float
    """Seconds from start to verdict (incl. launcher start-up and teardown)."""

    folder: str
    """Results folder: per-rank progress reports, results, stacks, logs."""

    init_s: float | None = None
    """Slowest rank's process-group initialisation, seconds."""

    barrier_s: float | None = None
    """Slowest rank's first barrier, seconds."""

    sizes: tuple[SizeResult, ...] = ()
    """Completed message sizes (all of them unless it hung)."""

    hung: tuple[HungRank, ...] = ()
    """Ranks that did not finish (hang only)."""

    error: str | None = None
    """What went wrong (error only)."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added for this launch (saved or candidate workarounds, a device pair)."""

    survivors: tuple[int, ...] = ()
    """PIDs still alive after teardown; always empty unless teardown failed."""

    @property
    def ok(self) -> bool:
        """True when the launch passed."""
        return self.status == OK


def aggregate(per_rank: Mapping[int, Mapping[str, Any]], world_size: int) -> tuple[SizeResult, ...]:
    """Combine per-rank results into rows: the sizes every rank finished, slowest time, summed #wrong."""
    if not per_rank:
        return ()
    done = min(len(r.get("sizes", ())) for r in per_rank.values())
    rows = []
    for i in range(done):
        entries = [r["sizes"][i] for r in per_rank.values()]
        first = entries[0]
        modes = {}
        for mode in MODES:
            time_s = max(e[mode]["time_s"] for e in entries)
            algbw, busbw = bandwidths(first["bytes"], time_s, world_size)
            modes[mode] = ModeResult(time_s, algbw, busbw, sum(int(e[mode]["wrong"]) for e in entries))
        oop, ip = modes["out-of-place"], modes["in-place"]
        rows.append(SizeResult(first["bytes"], first["count"], first["type"], oop, ip))
    return tuple(rows)


def slowest(per_rank: Mapping[int, Mapping[str, Any]], key: str) -> float | None:
    """The largest ``key`` (init_s, barrier_s) over ranks that reported it."""
    values = [float(r[key]) for r in per_rank.values() if key in r]
    return max(values) if values else None


def worst(statuses: Iterable[str]) -> str:
    """The most severe status of a sweep (``ok`` when empty)."""
    found = set(statuses)
    return next((s for s in SEVERITY if s in found), OK)


def exit_code(statuses: Iterable[str]) -> int:
    """What ``probe-nccl`` exits with: 0 only when every launch passed."""
    return EXIT_CODES[worst(statuses)]
