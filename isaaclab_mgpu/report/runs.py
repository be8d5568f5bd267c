"""``mgpu runs``: the runs table (Rich), its JSON, and the newest folder alone.

Every cell is a Rich ``Text`` (:mod:`.text`): names and folders come from files anyone may have
written. A field the summary holds with the wrong type shows as ``?`` (absent: ``-``). ``--json``
is strict JSON (never ``NaN``); ``--last`` writes the folder's bytes exactly as the file system
has them.

A run's status carries its history: ``finished (1 restart)``, and for a run Isaac Lab continued in
a new folder ``continues <folder>`` on the later one and ``continued in <folder>`` on the earlier
(``--json``: ``restarts``, ``continues``, ``chain`` oldest first, ``continued_in``).

The table fits the terminal (80 to 120 columns and more): the folder, what a user copies, is always
printed whole on one line, with the status; the other columns (:data:`_COLUMNS`, most important
first) give way from the end when the width runs out. Sent to a file or pipe it is
:data:`PIPE_WIDTH` wide (``COLUMNS`` sets another width).
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    "drifted": "bold red",
    "requeued": "cyan",
    "lost": "bold red",
}
#: The table's columns, most important first; narrower terminals drop them from the end of this
#: list (the folder and the status always stay). The folder's name already says the library, the
#: experiment (the task unless ``--experiment_name``) and the start time, so those give way first.
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("folder", "left"),
    ("status", "left"),
    ("iterations", "right"),
    ("reward first → last", "right"),
    ("ranks", "right"),
    ("library", "left"),
    ("s/it", "right"),
    ("env-steps/s", "right"),
    ("wait %", "right"),
    ("checksums", "left"),
    ("task", "left"),
    ("started", "left"),
)
#: Width of a table sent to a file or pipe (no terminal to measure): one run per line, readable.
PIPE_WIDTH = 120


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _reward(r: RunRow) -> str:
    def one(name: str, value: float | None) -> str:
        return "?" if name in r.invalid else _num(value, ".2f")

    first, last = one("reward_first", r.reward_first), one("reward_last", r.reward_last)
    return "-" if first == last == "-" else f"{first} → {last}"


def _checks(r: RunRow) -> object:
    """The end's checksums, or the drift the periodic check found (which says more: who, what, when)."""
    if r.drift is not None:
        return cell(f"DRIFT {r.drift}", "bold red")
    if "checksums_equal" in r.invalid:
        return cell("?", "dim")
    if r.checksums_equal is None:
        return cell("-")
    return cell("ok") if r.checksums_equal else cell("DIFFER", "bold red")


def _library(r: RunRow) -> object:
    if "library" in r.invalid or "framework" in r.invalid:
        return cell("?", "dim")
    return cell("/".join(x for x in (r.library, r.framework) if x) or "-")


def _cells(r: RunRow) -> dict[str, object]:
    def field(name: str, shown: object) -> object:
        return cell("?", "dim") if name in r.invalid else shown

    return {
        "folder": cell(r.folder),
        "status": _status(r),
        "iterations": field("iterations", cell(_num(r.iterations, "d"))),
        "reward first → last": cell(_reward(r)),
        "ranks": field("world_size", cell(_num(r.world_size, "d"))),
        "library": _library(r),
        "s/it": field("s_per_iteration", cell(_num(r.s_per_iteration, ".3f"))),
        "env-steps/s": field("env_steps_per_s", cell(_num(r.env_steps_per_s, ",.0f"))),
        # The collectives' share of an iteration (summary.json's timing), with the stragglers named.
        "wait %": field("wait_share", cell(_wait(r))),
        "checksums": _checks(r),
        "task": field("task", cell(r.task or "-")),
        "started": cell(time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else "-"),
    }


def _wait(r: RunRow) -> str:
    share = "-" if r.wait_share is None else f"{100 * r.wait_share:.0f}%"
    slow = f" (straggler {', '.join(map(str, r.stragglers))})" if r.stragglers else ""
    return share + slow


def _status(r: RunRow) -> object:
    shown = cell(r.status, _STATUS_STYLE.get(r.status, ""))
    notes = [f"{r.restarts} restart{'s' if r.restarts > 1 else ''}"] if r.restarts else []
    if r.continues:  # the run goes on from another folder: name the one it continues
        notes.append(f"continues {Path(r.continues).name}")
    if r.continued_in:
        notes.append(f"continued in {Path(r.continued_in).name}")
    if notes:
        shown.append_text(cell(f" ({'; '.join(notes)})"))  # folder names are data: escaped as cells are
    return shown


def _table(rows: Sequence[dict[str, object]], columns: Sequence[tuple[str, str]]) -> Any:
    from rich import box
    from rich.table import Table

    t = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, justify in columns:
        # The folder is what a user copies: whole, never cut or folded.
        overflow = "ignore" if name == "folder" else "ellipsis"
        t.add_column(name, justify=justify, no_wrap=True, overflow=overflow)
    for cells in rows:
        t.add_row(*(cells[name] for name, _ in columns))  # type: ignore[arg-type]
    return t


def fitted(rows: Sequence[RunRow], width: int) -> tuple[Any, int]:
    """The runs table with the most important columns that fit in ``width`` (folder and status
    always), and the width to print it at: wider than ``width`` only when those two alone are."""
    from rich.console import Console

    cells = [_cells(r) for r in rows]
    measure = Console(width=10_000, file=io.StringIO())
    columns = list(_COLUMNS)
    while True:
        t = _table(cells, columns)
        needed = measure.measure(t).maximum
        if needed <= width:
            return t, width
        if len(columns) <= 2:
            return t, needed  # a folder is never cut: the terminal wraps the long line instead
        columns.pop()


def table(rows: Sequence[RunRow], root: str, *, limit: int = 0) -> None:
    """Print the newest ``limit`` runs (0: all) as one table (a note on stderr when there are none)."""
    from rich.console import Console

    from isaaclab_mgpu.report import note

    if not rows:
        note(f"no runs under {root} (looked for */*/*/summary.json)")
        return
    shown = rows[:limit] if limit > 0 else rows
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:  # a file or pipe has no width of its own
        console = Console(width=PIPE_WIDTH)
    t, width = fitted(shown, console.width)
    if width > console.width:  # Rich renders at most the console's width
        console = Console(width=width, force_terminal=console.is_terminal)
    console.print(t, crop=False)
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
