"""Everything ``probe-nccl`` prints: progress (stderr), the nccl-tests-like table and the verdict.

The table and the verdict go to stdout; with ``--json`` stdout carries one JSON document instead
(the same facts, plus the verdict and exit code) and nothing else. Progress always goes to stderr:
a Rich live display on a terminal, one plain ``mgpu:`` line per launch otherwise (logs, CI).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from isaaclab_mgpu.launcher.notes import Note
from isaaclab_mgpu.launcher.probe.run import LaunchAt, LaunchBegun, LaunchEnded, TrialDone, WorkaroundsApplied
from isaaclab_mgpu.report import StderrProgress, note, out, saved_workarounds
from isaaclab_mgpu.report.text import cell, markup

if TYPE_CHECKING:
    from isaaclab_mgpu.launcher.probe.bisect import Trial
    from isaaclab_mgpu.launcher.probe.results import WorldResult
    from isaaclab_mgpu.launcher.probe.run import ProbeSummary

#: Innermost stack lines shown per hung rank (the whole stack is in its file).
STACK_LINES = 8
#: Console width the results table is laid out for.
TABLE_WIDTH = 120


class ProbeDisplay(StderrProgress):
    """Progress of a probe on stderr: the probe's sink for its notes (:mod:`isaaclab_mgpu.launcher.notes`)."""

    COLUMNS = (
        ("SpinnerColumn",),
        ("TextColumn", "[bold]{task.fields[label]}[/]"),
        ("TextColumn", "{task.description}"),
        ("TimeElapsedColumn",),
    )

    def __init__(self) -> None:
        super().__init__()
        self._tasks: dict[str, Any] = {}

    @functools.singledispatchmethod
    def __call__(self, n: Note) -> None:
        """Show one of the probe's notes (one renderer per kind, below)."""
        raise TypeError(f"no console line for the note {type(n).__name__}")

    @__call__.register
    def _applied(self, n: WorkaroundsApplied) -> None:
        saved_workarounds(n.env.items())

    @__call__.register
    def _begun(self, n: LaunchBegun) -> None:
        if self._progress is not None:
            self._tasks[n.label] = self._progress.add_task(
                f"starting (timeout {n.timeout:g} s)", label=markup(n.label)
            )
        else:
            note(f"probe {n.label}: started (timeout {n.timeout:g} s)")

    @__call__.register
    def _at(self, n: LaunchAt) -> None:
        if self._progress is not None and n.label in self._tasks:
            # A rank's heartbeat names the stage: text, never markup for the progress column.
            self._progress.update(self._tasks[n.label], description=markup(n.text))

    @__call__.register
    def _ended(self, n: LaunchEnded) -> None:
        r = n.result
        if self._progress is not None and r.label in self._tasks:
            self._progress.remove_task(self._tasks.pop(r.label))
        extra = f" with {_env_text(r.env)}" if r.env else ""
        note(f"probe {r.label}{extra}: {r.status} ({r.elapsed_s:.1f} s)")

    @__call__.register
    def _trial(self, n: TrialDone) -> None:
        note(f"{n.label} with {n.trial.candidate.assignment}: {_outcome(n.trial)}")


def _outcome(trial: Trial) -> str:
    if trial.confirmed:
        return "fixes it, and it fails again without it (confirmed)"
    if trial.fixes:
        return f"passed, but the rerun without it passed too ({trial.without}): not attributable"
    return f"still {trial.status}"


def _env_text(env: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())


def verdict(s: ProbeSummary) -> str:
    """One line: where communication works or fails, and what to do about it."""
    launches = (*s.world, *s.pairs)
    sizes = ",".join(str(r.world_size) for r in s.world)
    if all(r.ok for r in launches):
        pairs = " and between every GPU pair" if s.pairs else ""
        at = "world size" if len(s.world) == 1 else "world sizes"
        return f"communication OK at {at} {sizes}{pairs} — a hang in training is in the task or launch"
    from isaaclab_mgpu.launcher.probe.results import worst

    status = worst(r.status for r in launches)
    bad = [r for r in launches if r.status == status]
    where = _where(bad)
    if status == "error":
        first = bad[0]
        return f"error at {where} — {first.error or 'the launch failed'}; logs in {first.folder}/logs"
    what = {"hang": "hang", "wrong-result": "wrong all-reduce results"}[status]
    return f"{what} at {where} — communication problem: {_advice(s, bad[0])}"


def _where(bad: list[WorldResult]) -> str:
    sizes = [str(r.world_size) for r in bad if r.label.startswith("world size")]
    pairs = [r.label.removeprefix("pair ") for r in bad if r.label.startswith("pair")]
    parts = []
    if sizes:
        parts.append(("world size " if len(sizes) == 1 else "world sizes ") + ",".join(sizes))
    if pairs:
        parts.append(("GPU pair " if len(pairs) == 1 else "GPU pairs ") + " ".join(pairs))
    return " and ".join(parts)


def _advice(s: ProbeSummary, first: WorldResult) -> str:
    stopped = [str(h.rank) for h in first.hung if h.state == "stopped"]
    if not stopped:
        return _fixes(s, first)
    who = ("rank " if len(stopped) == 1 else "ranks ") + ",".join(stopped)
    was = "was" if len(stopped) == 1 else "were"
    return f"{who} {was} stopped (SIGSTOP or a debugger) and the others waited for it; " + _fixes(s, first)


def _fixes(s: ProbeSummary, first: WorldResult) -> str:
    if s.backend != "nccl":
        return (
            "try GLOO_SOCKET_IFNAME=<interface> (the network ranks use), check firewalls, and that no "
            "rank is stopped or starved of CPU"
        )
    if s.search is not None:
        if not s.search.reproduced:
            return f"the failure did not come back when retried ({s.search_label}); it is intermittent"
        if s.search.confirmed:
            fixes = " or ".join(c.assignment for c in s.search.confirmed)
            saved = f" (saved: {s.saved})" if s.saved else " (--save-workaround stores it for train)"
            return f"{fixes} fixes it, confirmed both ways{saved}"
        return (
            "none of the documented NCCL variables fixed it; rerun with NCCL_DEBUG=INFO and check "
            "the topology (nvidia-smi topo -m), /dev/shm and ulimit -l"
        )
    from isaaclab_mgpu.launcher.workarounds import CANDIDATES

    some = ", ".join(c.assignment for c in CANDIDATES[:3])
    ws = first.world_size
    return f"try mgpu probe-nccl --world-size {ws} --try-workarounds (one at a time: {some}, ...)"


def show(s: ProbeSummary, *, as_json: bool) -> None:
    """Print the probe's result: tables and verdict, or one JSON document."""
    if as_json:
        out(json.dumps(summary_json(s), indent=2))
        return
    from rich.console import Console

    # The table needs about 110 columns; never squeeze it into a narrow terminal (it would elide digits).
    width = max(Console(file=sys.stdout).width, TABLE_WIDTH) if sys.stdout.isatty() else TABLE_WIDTH
    console = Console(file=sys.stdout, width=width, highlight=False)
    for result in (*s.world, *s.pairs):
        _show_launch(console, result)
    if s.search is not None:
        _show_search(console, s)
    if s.saved:
        _line(console, f"saved workaround {s.saved} for this machine in {s.store}")
    _line(console, verdict(s))


def _line(console: Any, text: str, style: str = "") -> None:
    """One line that may quote data (hosts, stages, paths, variables): text, never markup."""
    console.print(cell(text, style), soft_wrap=True)


def _show_launch(console: Any, r: WorldResult) -> None:
    from rich import box
    from rich.table import Table

    head = f"{r.label}: {r.status}"
    if r.init_s is not None:
        head += f" · init {r.init_s:.3f} s"
    if r.barrier_s is not None:
        head += f" · barrier {r.barrier_s * 1e3:.2f} ms"
    head += f" · {r.elapsed_s:.1f} s in all"
    if r.env:
        head += f" · {_env_text(r.env)}"
    _line(console, head, "bold")
    if r.sizes:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name in ("\nsize\n(B)", "\ncount\n(elements)", "\ntype\n"):
            table.add_column(name, justify="right", no_wrap=True)
        for mode in ("out-of-place", "in-place"):
            # Rich has no spanning headers: the mode names its group's first column, as in nccl-tests.
            for name in (f"{mode}\ntime\n(us)", "\nalgbw\n(GB/s)", "\nbusbw\n(GB/s)", "\n#wrong\n"):
                table.add_column(name, justify="right", no_wrap=True)
        for row in r.sizes:
            cells = [cell(row.bytes), cell(row.count), cell(row.type)]
            for m in (row.out_of_place, row.in_place):
                numbers = (f"{m.time_s * 1e6:.1f}", f"{m.algbw:.3f}", f"{m.busbw:.3f}")
                cells += [*map(cell, numbers), cell(m.wrong, "red" if m.wrong else "")]
            table.add_row(*cells)
        console.print(table)
        if r.world_size > 1:
            peak = max(r.sizes, key=lambda x: x.out_of_place.busbw)
            _line(
                console, f"  peak busbw {peak.out_of_place.busbw:.3f} GB/s at {peak.bytes} B (out-of-place)"
            )
        else:
            console.print("  busbw is 0 at world size 1: no data crosses a link")
    for h in r.hung:
        state = f", {h.state}" if h.state else ""
        where = f" (pid {h.pid} on {h.host}{state})" if h.pid is not None else ""
        age = f", last heartbeat {h.since_s:.1f} s ago" if h.since_s is not None else ""
        _line(console, f"  rank {h.rank}{where} did not finish: {h.stage}{age}")
        if h.stack:
            for line in _innermost(h.stack):
                _line(console, f"      {line}")
            _line(console, f"      full stack: {h.stack_file}")
    if r.error:
        _line(console, f"  error: {r.error}")
    if r.survivors:
        _line(console, f"  processes left after teardown: {r.survivors}", "red")
    _line(console, f"  files: {r.folder}")


def _innermost(stack: str) -> list[str]:
    """The current thread's innermost frames from a faulthandler dump."""
    lines = stack.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Current thread")), 0)
    frames = [line.strip() for line in lines[start + 1 :] if line.strip().startswith("File ")]
    return frames[:STACK_LINES]


def _show_search(console: Any, s: ProbeSummary) -> None:
    search = s.search
    assert search is not None
    _line(console, f"workaround search on {s.search_label}: baseline {search.baseline}", "bold")
    if s.skipped:
        _line(console, f"  not tried (already set): {', '.join(s.skipped)}")
    for t in search.trials:
        mark = "confirmed" if t.confirmed else ("passed once" if t.fixes else t.status)
        without = f", without it: {t.without}" if t.without is not None else ""
        _line(console, f"  {t.candidate.assignment:<32} with it: {t.status}{without} → {mark}")


def summary_json(s: ProbeSummary) -> dict[str, Any]:
    """The probe as a JSON-ready dict for tools and agents."""
    data = {
        "verdict": verdict(s),
        "exit_code": s.exit_code,
        "backend": s.backend,
        "device": s.device,
        "folder": s.folder,
        "applied_workarounds": dict(s.applied),
        "world_sizes": [dataclasses.asdict(r) for r in s.world],
        "pairs": [dataclasses.asdict(r) for r in s.pairs],
        "workaround_search": None,
        "saved_workaround": s.saved,
    }
    if s.search is not None:
        data["workaround_search"] = {
            "launch": s.search_label,
            "baseline": s.search.baseline,
            "skipped": list(s.skipped),
            "trials": [
                {
                    "variable": t.candidate.assignment,
                    "with": t.status,
                    "without": t.without,
                    "confirmed": t.confirmed,
                }
                for t in s.search.trials
            ],
            "confirmed": [c.assignment for c in s.search.confirmed],
        }
    return data
