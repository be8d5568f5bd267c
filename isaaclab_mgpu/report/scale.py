"""Everything ``mgpu scale`` prints: a progress bar over the points, the table, one sentence a row.

Progress goes to stderr (a Rich bar on a terminal, one ``mgpu:`` line per point otherwise); the
table, the sentences and where the results are go to stdout. What each column means:
docs/scaling.md, "Reading the table".
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from isaaclab_mgpu.contract.summary import WARMUP_ITERATIONS
from isaaclab_mgpu.launcher.notes import Note
from isaaclab_mgpu.launcher.scale import PointDone, PointStarted
from isaaclab_mgpu.report import StderrProgress, note, out
from isaaclab_mgpu.report.text import cell, markup

#: A ceiling this much above ``k``× one rank is called out: it says more about the load than the box.
CEILING_SLACK = 1.1

if TYPE_CHECKING:
    from isaaclab_mgpu.launcher.scale import Planned, PointResult, Row, ScalePlan, Verdict


def _what(planned: Planned | PointResult) -> str:
    p = planned.point
    envs = f"{p.num_envs} envs/rank" if p.num_envs is not None else "default envs/rank"
    if p.ceiling:
        return f"{p.world_size} independent 1-rank runs, {envs} (ceiling)"
    return f"{p.world_size} rank{'s' if p.world_size > 1 else ''}, {envs}"


class ScaleProgress(StderrProgress):
    """The sweep's progress on stderr: its sink for notes (:mod:`isaaclab_mgpu.launcher.notes`)."""

    COLUMNS = (
        ("TextColumn", "[bold]scale"),
        ("MofNCompleteColumn",),
        ("BarColumn",),
        ("TextColumn", "{task.description}"),
        ("TimeElapsedColumn",),
    )

    def __init__(self, plan: ScalePlan) -> None:
        super().__init__()
        self.total = len(plan.points)
        self._task: Any = None

    def __enter__(self) -> ScaleProgress:
        super().__enter__()
        if self._progress is not None:
            self._task = self._progress.add_task("", total=self.total)
        return self

    @functools.singledispatchmethod
    def __call__(self, n: Note) -> None:
        """Show one of the sweep's notes: a point started or ended."""
        raise TypeError(f"no console line for the note {type(n).__name__}")

    @__call__.register
    def _started(self, n: PointStarted) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=markup(_what(n.planned)))
        else:
            note(f"scale point {n.index + 1}/{self.total}: {_what(n.planned)}")

    @__call__.register
    def _done(self, n: PointDone) -> None:
        r = n.result
        said = f"{_rate(r)} env-steps/s" if r.ok else f"{r.status}: {r.reason or ''}"
        if self._progress is not None:
            self._progress.console.print(cell(f"{_what(r)}: {said}"))
            self._progress.advance(self._task)
        else:
            note(f"scale point {n.index + 1}/{self.total} done: {said}")


def _rate(r: PointResult | None) -> str:
    return "–" if r is None or r.env_steps_per_s is None else f"{r.env_steps_per_s:,.0f}"


def _spread(r: PointResult) -> str:
    if r.env_steps_per_s_iqr is None or not r.env_steps_per_s:
        return ""
    lo, hi = r.env_steps_per_s_iqr
    return f" ±{(hi - lo) / 2 / r.env_steps_per_s * 100:.0f} %"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f} %"


def _gpus(r: PointResult) -> str:
    parts = []
    for g in r.gpus:
        mem = "?" if g.memory_peak_mib is None else f"{g.memory_peak_mib / 1024:.1f} GiB"
        util = "?" if g.utilization_pct is None else f"{g.utilization_pct:.0f} %"
        parts.append(f"{g.index}: {mem}, {util}")
    return "; ".join(parts)


def sentence(row: Row) -> str | None:
    """What a row means in one plain sentence (None for one rank or an unmeasured point)."""
    r = row.result
    k = r.point.world_size
    if not r.ok:
        return f"{_what(r)}: {r.status} ({r.reason})" if r.status != "not run" else None
    if k == 1 or row.speedup is None:
        return None
    who = f"{k} ranks" if r.point.num_envs is None else f"{k} ranks × {r.point.num_envs} envs"
    text = f"{who}: {row.speedup:.1f}× the env-steps/s of one, {row.efficiency * 100:.0f} % efficient"
    if row.vs_ceiling is not None and row.ceiling_speedup is not None:
        text += (
            f"; this box's ceiling ({k} independent runs side by side) is {row.ceiling_speedup:.1f}× one, "
            f"so the ranks reach {row.vs_ceiling * 100:.0f} % of what the box allows"
        )
        if row.ceiling_speedup > k * CEILING_SLACK:
            # k copies cannot out-step k times one rank: the one-rank point ran on a busier box.
            text += (
                f" (a ceiling above {k}× means the one-rank point ran slower than each copy: the "
                "machine's load changed between points; rerun, or raise --iterations)"
            )
    return text


def table(
    plan: ScalePlan, rows: Sequence[Row], *, target: float | None, verdicts: Sequence[Verdict] = ()
) -> None:
    """The results table, one sentence per row and the verdict lines, on stdout."""
    from rich.console import Console
    from rich.table import Table

    shown = Console()
    console = shown if shown.is_terminal else Console(width=160)  # a log or a pipe: one line a row
    has_ceiling = any(r.vs_ceiling is not None and r.result.point.world_size > 1 for r in rows)
    has_gpus = any(r.result.gpus for r in rows)
    t = Table(title=cell(title(plan)), title_justify="left")
    numbers = ["ranks", "envs/rank", "env-steps/s", "s/it", "speedup", "efficiency"]
    numbers += ["ceiling", "vs ceiling"] if has_ceiling else []
    numbers += [f"to reward {target:g}"] if target is not None else []
    for name in numbers:
        t.add_column(name, justify="right", no_wrap=True)
    if has_gpus:
        t.add_column("GPU: peak memory, util")
    t.add_column("status")
    for row in rows:
        r = row.result
        envs = r.num_envs_per_rank or r.point.num_envs
        cells = [
            str(r.point.world_size),
            "default" if envs is None else str(envs),
            _rate(r) + _spread(r) if r.ok else "–",
            "–" if r.s_per_iteration is None else f"{r.s_per_iteration:.3f}",
            _x(row.speedup),
            _pct(row.efficiency),
        ]
        if has_ceiling:
            cells += [_x(row.ceiling_speedup), _pct(row.vs_ceiling)]
        if target is not None:
            cells.append(_to_target(r))
        if has_gpus:
            cells.append(_gpus(r))
        cells.append(r.status if r.ok or not r.reason else f"{r.status}: {r.reason}")
        t.add_row(*(cell(c) for c in cells))
    console.print(t)
    for row in rows:
        said = sentence(row)
        if said:
            out(said)
    for v in verdicts:
        out(verdict_line(v))
    if has_ceiling:
        out(
            "ceiling: the same point run as that many independent 1-rank trainings at once (no "
            'communication), their summed env-steps/s shown against one rank\'s; "vs ceiling" is the '
            "ranks' rate against it, so what this box's cores cannot give is not counted against the "
            'collectives. "efficiency" is speedup ÷ ranks, against one rank × N.'
        )


def verdict_line(v: Verdict) -> str:
    """The sweep's answer for one environment count, one line: which world size, and why."""
    envs = f"{v.num_envs} envs/rank" if v.num_envs is not None else "the default envs/rank"
    row = v.best
    assert row is not None and row.speedup is not None and row.efficiency is not None
    k = row.result.point.world_size
    measured = f"{row.speedup:.1f}× one rank, {row.efficiency * 100:.0f} % efficient"
    if v.ranks > 1:
        return f"verdict: use {k} ranks at {envs}: {measured}"
    text = f"verdict: {k} ranks: {measured}: not worth it at {envs}"
    if v.cpu_bound and row.ceiling_speedup is not None:
        text += (
            f" (this box's cores allow only {row.ceiling_speedup:.1f}× one rank and the ranks reach "
            f"{(row.vs_ceiling or 0.0) * 100:.0f} % of that: the limit is the CPU, not the communication)"
        )
    return text


def _to_target(r: PointResult) -> str:
    if not r.ok:
        return "–"
    if r.time_to_target_s is None:
        return "not reached"
    about = "≈" if r.target_estimated else ""
    return f"{about}{r.time_to_target_s:.1f} s (it. {r.target_iteration})"


def title(plan: ScalePlan) -> str:
    spec = plan.spec
    lib = spec.library if spec.library != "skrl" else f"skrl {spec.framework}"
    return (
        f"mgpu scale: {lib} on {spec.task}, {spec.device}, {plan.options.iterations} iterations per point "
        f"(first {WARMUP_ITERATIONS} left out)"
    )


def written(json_path: Path, png_path: Path | None, why_no_png: str | None) -> None:
    """Where the results are."""
    out(f"results: {json_path}")
    if png_path is not None:
        out(f"picture: {png_path}")
    elif why_no_png:
        note(f"no picture: {why_no_png}")
