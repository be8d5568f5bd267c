"""``mgpu runs``: the runs table (Rich), its JSON, and the newest folder alone.

Every cell is a Rich ``Text`` (:mod:`.text`): names and folders come from files anyone may have
written. A field the summary holds with the wrong type shows as ``?`` (absent: ``-``). ``--json``
is strict JSON (never ``NaN``); ``--last`` writes the folder's bytes exactly as the file system
has them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence

from isaaclab_mgpu.launcher.runs import RunRow
from isaaclab_mgpu.report import out
from isaaclab_mgpu.report.text import cell

_STATUS_STYLE = {
    "finished": "green",
    "running": "cyan",
    "interrupted": "yellow",
    "failed": "bold red",
    "hung": "bold magenta",
    "stopped": "yellow",
    "requeued": "cyan",
    "lost": "bold red",
}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _reward(r: RunRow) -> str:
    def one(name: str, value: float | None) -> str:
        return "?" if name in r.invalid else _num(value, ".2f")

    first, last = one("reward_first", r.reward_first), one("reward_last", r.reward_last)
    return "-" if first == last == "-" else f"{first} → {last}"


def _checks(value: bool | None) -> object:
    if value is None:
        return cell("-")
    return cell("ok") if value else cell("DIFFER", "bold red")


def _cells(r: RunRow) -> list[object]:
    def field(name: str, shown: object) -> object:
        return cell("?", "dim") if name in r.invalid else shown

    return [
        cell(time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else "-"),
        field("library", cell(r.library or "-")),
        field("framework", cell(r.framework or "-")),
        field("task", cell(r.task or "-")),
        field("world_size", cell(_num(r.world_size, "d"))),
        field("iterations", cell(_num(r.iterations, "d"))),
        field("s_per_iteration", cell(_num(r.s_per_iteration, ".3f"))),
        field("env_steps_per_s", cell(_num(r.env_steps_per_s, ",.0f"))),
        cell(_reward(r)),
        field("checksums_equal", _checks(r.checksums_equal)),
        _status(r),
        cell(r.folder),
    ]


def _status(r: RunRow) -> object:
    shown = cell(r.status, _STATUS_STYLE.get(r.status, ""))
    if r.restarts:
        shown.append(f" ({r.restarts} restart{'s' if r.restarts > 1 else ''})")
    return shown


def table(rows: Sequence[RunRow], root: str, *, limit: int = 0) -> None:
    """Print the newest ``limit`` runs (0: all) as one table (a note on stderr when there are none)."""
    from rich.console import Console
    from rich.table import Table

    from isaaclab_mgpu.report import note

    if not rows:
        note(f"no runs under {root} (looked for */*/*/summary.json)")
        return
    shown = rows[:limit] if limit > 0 else rows
    t = Table(header_style="bold")
    for name, justify in (
        ("started", "left"), ("library", "left"), ("framework", "left"), ("task", "left"),
        ("ranks", "right"), ("iterations", "right"), ("s/it", "right"), ("env-steps/s", "right"),
        ("reward first → last", "right"), ("checksums", "left"), ("status", "left"), ("folder", "left"),
    ):  # fmt: skip
        t.add_column(name, justify=justify, overflow="fold" if name == "folder" else "ellipsis")
    for r in shown:
        t.add_row(*_cells(r))
    console = Console()
    if not console.is_terminal:  # a file or pipe has no width; keep one run per line
        console = Console(width=250)
    console.print(t)
    if len(shown) < len(rows):
        note(f"the newest {len(shown)} runs under {root}; --limit 0 shows all")


def as_json(rows: Sequence[RunRow]) -> None:
    """Print the runs as one JSON list, newest first."""
    out(json.dumps([r.as_json() for r in rows], indent=2, allow_nan=False))


def last(folder: str) -> None:
    """Print the newest run's folder alone (for ``cat "$(mgpu runs --last)/summary.json"``): its
    bytes as the file system has them, so a name that is not UTF-8 still names the folder."""
    sys.stdout.flush()
    sys.stdout.buffer.write(os.fsencode(folder) + b"\n")
    sys.stdout.buffer.flush()
