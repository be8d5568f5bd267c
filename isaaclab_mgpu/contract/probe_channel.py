"""The side channel between probe ranks and the parent: files in the results folder.

The communicator under test may hang, so nothing about a rank's progress travels through it.
Each rank atomically replaces ``heartbeat.<rank>.json`` before every stage it enters (so a hang
is reported in the stage it hangs in), appends its per-size results to ``result.<rank>.json``,
and registers ``stack.<rank>.txt`` for its Python stack on the stack-dump signal (and on a fatal
signal; see :mod:`isaaclab_mgpu.contract.stacks`), naming it in the heartbeat. The parent only
reads these files. No torch here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files

#: The probe all-reduces float32 elements.
ELEMENT_BYTES = 4


def element_count(nbytes: int) -> int:
    """float32 elements in a message of ``nbytes`` (whole elements, at least one)."""
    return max(1, nbytes // ELEMENT_BYTES)


def human_bytes(nbytes: int) -> str:
    """``8 B``, ``4 KiB``, ``64 MiB``: the largest binary unit that divides ``nbytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


#: Stages a rank passes through, in order.
STAGES = ("import", "init", "barrier", "collective", "teardown", "done")


@dataclass(frozen=True)
class Heartbeat:
    """A rank's last reported stage."""

    rank: int
    """Global rank."""

    local_rank: int
    """Rank on its node."""

    pid: int
    """Process id of the rank (on ``host``)."""

    host: str
    """Host the rank runs on."""

    stage: str
    """One of :data:`STAGES`: the stage the rank entered last."""

    time: float
    """When it entered the stage (``time.time()``)."""

    index: int | None = None
    """Collective stage: 0-based index of the message size."""

    size: int | None = None
    """Collective stage: message size in bytes."""

    mode: str | None = None
    """Collective stage: ``out-of-place`` or ``in-place``."""

    phase: str | None = None
    """Collective stage: ``warmup``, ``timed`` or ``check``."""

    stack_file: str | None = None
    """Where the stack-dump signal makes it write its stack; None: never send it that signal."""

    def describe(self) -> str:
        """``collective 3 at 64 B (in-place, timed)``, ``barrier``, ..."""
        if self.stage != "collective":
            return self.stage
        where = f"collective {self.index} at {human_bytes(self.size or 0)}"
        detail = ", ".join(x for x in (self.mode, self.phase) if x)
        return f"{where} ({detail})" if detail else where

    def progress(self) -> tuple[int, int, int]:
        """A sortable position: stage, size index, mode (for naming the rank that lags)."""
        order = STAGES.index(self.stage) if self.stage in STAGES else -1
        return (order, self.index or 0, 1 if self.mode == "in-place" else 0)


def heartbeat_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` writes its heartbeat."""
    return folder / f"heartbeat.{rank}.json"


def result_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` writes its results."""
    return folder / f"result.{rank}.json"


def stack_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` dumps its Python stack (the stack-dump signal, a fatal signal)."""
    return folder / f"stack.{rank}.txt"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` with ``data`` atomically, so a reader never sees half a file."""
    files.write_text(path, json.dumps(data))


def write_heartbeat(folder: Path, beat: Heartbeat) -> None:
    """Publish ``beat`` for the parent."""
    write_json(heartbeat_path(folder, beat.rank), beat.__dict__)


def read_heartbeats(folder: Path) -> dict[int, Heartbeat]:
    """Every rank's last heartbeat in ``folder``, by rank (unreadable or malformed files are skipped)."""
    beats: dict[int, Heartbeat] = {}
    for path in folder.glob("heartbeat.*.json"):
        try:
            beat = Heartbeat(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if _well_typed(beat):
            beats[beat.rank] = beat
    return beats


#: Each heartbeat field's JSON types, None allowed where the field is optional.
_TYPES: dict[str, tuple[type, ...]] = {
    "rank": (int,),
    "local_rank": (int,),
    "pid": (int,),
    "host": (str,),
    "stage": (str,),
    "time": (int, float),
    "index": (int, type(None)),
    "size": (int, type(None)),
    "mode": (str, type(None)),
    "phase": (str, type(None)),
    "stack_file": (str, type(None)),
}


def _well_typed(beat: Heartbeat) -> bool:
    """True when every field holds its type (a bool is no number here)."""
    return all(
        isinstance(value := getattr(beat, name), types) and not isinstance(value, bool)
        for name, types in _TYPES.items()
    )


def read_results(folder: Path) -> dict[int, dict[str, Any]]:
    """Every rank's results in ``folder``, by rank."""
    results: dict[int, dict[str, Any]] = {}
    for path in folder.glob("result.*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        results[int(data["rank"])] = data
    return results


def now() -> float:
    """Wall-clock time as heartbeats record it."""
    return time.time()
