"""``mgpu runs``: the runs table (Rich), its JSON, and the newest folder alone."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from isaaclab_mgpu.launcher.runs import RunRow
from isaaclab_mgpu.report import out

_STATUS_STYLE = {
    "finished": "green",
    "running": "cyan",
    "interrupted": "yellow",
    "failed": "bold red",
    "hung": "bold magenta",
}


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _reward(r: RunRow) -> str:
    if r.reward_first is None and r.reward_last is None:
        return "-"
    return f"{_num(r.reward_first, '.2f')} → {_num(r.reward_last, '.2f')}"


def _checks(value: bool | None) -> str:
    return "-" if value is None else ("ok" if value else "[bold red]DIFFER[/]")


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
        style = _STATUS_STYLE.get(r.status, "")
        t.add_row(
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)) if r.started else "-",
            r.library or "-",
            r.framework or "-",
            r.task or "-",
            _num(r.world_size, "d"),
            _num(r.iterations, "d"),
            _num(r.s_per_iteration, ".3f"),
            _num(r.env_steps_per_s, ",.0f"),
            _reward(r),
            _checks(r.checksums_equal),
            f"[{style}]{r.status}[/]" if style else r.status,
            r.folder,
        )
    console = Console()
    if not console.is_terminal:  # a file or pipe has no width; keep one run per line
        console = Console(width=250)
    console.print(t)
    if len(shown) < len(rows):
        note(f"the newest {len(shown)} runs under {root}; --limit 0 shows all")


def as_json(rows: Sequence[RunRow]) -> None:
    """Print the runs as one JSON list, newest first."""
    out(json.dumps([r.as_json() for r in rows], indent=2))


def last(rows: Sequence[RunRow]) -> None:
    """Print the newest run's folder alone (for ``cat "$(mgpu runs --last)/summary.json"``)."""
    out(rows[0].folder)
