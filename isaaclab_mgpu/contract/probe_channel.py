"""The side channel between probe ranks and the parent: files in the results folder.

The communicator under test may hang, so nothing about a rank's progress travels through it.
Each rank reports every stage it enters through ``train``'s progress channel (:mod:`.progress`):
the probe's own :data:`STAGES`, and in a collective the message size's index, bytes, mode and
phase (:func:`describe`). Each rank also replaces its results in ``result.<rank>.json``
atomically (:mod:`.files`) and dumps its stack into ``stack.<rank>.txt``
(:func:`.progress.stack_path`). The parent only reads these files. No torch here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract.progress import Report

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


def describe(report: Report) -> str:
    """``collective 3 at 64 B (in-place, timed)``, ``barrier``, ...: where a probe rank is."""
    if report.stage != "collective":
        return report.stage
    where = f"collective {report.index} at {human_bytes(report.size or 0)}"
    detail = ", ".join(x for x in (report.mode, report.phase) if x)
    return f"{where} ({detail})" if detail else where


def order(report: Report) -> tuple[int, int, int]:
    """A sortable position of a probe rank: stage, size index, mode (for naming the rank that lags)."""
    stage = STAGES.index(report.stage) if report.stage in STAGES else -1
    return (stage, report.index or 0, 1 if report.mode == "in-place" else 0)


def result_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` writes its results."""
    return folder / f"result.{rank}.json"


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
