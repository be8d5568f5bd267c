"""``mgpu runs``: the runs table (Rich), its JSON, the newest folder alone, and one run's story.

Every cell is a Rich ``Text`` (:mod:`.text`): names and folders come from files anyone may have
written. A field the summary holds with the wrong type shows as ``?`` (absent: ``-``). ``--json``
is strict JSON (never ``NaN``); ``--last`` writes the folder's bytes exactly as the file system
has them.

The rows, queued jobs included, are :mod:`isaaclab_mgpu.launcher.runs`'s. What a row's status
shows of its history (progress, restarts, requeues, the run it continues, its SLURM or Kubernetes
job) and how the table fits the terminal (:func:`fitted`, :data:`_COLUMNS`, :data:`PIPE_WIDTH`):
docs/commands.md, "mgpu runs".

:func:`story` prints one run's ledger (``mgpu runs <run folder>``) as a timeline: a headline, then
one line per event, each stretch of progress and checkpoints folded into one; :func:`story_json`
prints every event.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from isaaclab_mgpu.launcher.runs import RunRow, Story
from isaaclab_mgpu.report import note, out
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
    "queued": "dim",
    "starting": "cyan",
    "gone": "dim",
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
    if r.ledger and r.reached is not None:  # how far it got: ``requeued 34/150``, ``finished 150``
        done = r.status == "finished" or r.total is None
        shown.append_text(cell(f" {r.reached}" if done else f" {r.reached}/{r.total}"))
    counts = [_plural(n, word) for n, word in ((r.requeues, "requeue"), (r.restarts, "restart")) if n]
    notes = [", ".join(counts)] if counts else []
    if r.continues:  # the run goes on from another folder: name the one it continues
        notes.append(f"continues {Path(r.continues).name}")
    if r.continued_in:
        notes.append(f"continued in {Path(r.continued_in).name}")
    if r.job_kind is not None:  # a Kubernetes job, as kubectl says: where, why, and where its run is
        why = f": {r.job_reason}" if r.job_reason else ""
        notes.append(f"{r.job_kind} {r.job_name} in {r.job_namespace}{why}")
        if r.in_pods:
            notes.append("run folder in the pods' storage, not here")
    if r.job_state is not None and r.jobs:  # asked of SLURM: the newest job, and why it waits
        why = f" {r.job_reason}" if r.job_reason else ""
        notes.append(f"job {r.jobs[-1]}{f' {r.job_name}' if r.job_name else ''}: {r.job_state.lower()}{why}")
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
    """The runs table with the columns that fit in ``width`` (folder and status always), and its width."""
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
    """Print the newest run's folder alone, its bytes as the file system has them (not UTF-8 too)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(os.fsencode(folder) + b"\n")
    sys.stdout.buffer.flush()


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _headline(st: Story) -> str:
    f = st.fold
    reached = "?" if f.iteration is None else str(f.iteration)
    at = "" if f.iteration is None and f.total is None else f" {reached}"
    at += f"/{f.total}" if f.total is not None and st.status != "finished" else ""
    tallies = ((f.restarts, "restart"), (f.shrinks, "shrink"), (f.requeues, "requeue"))
    counts = [_plural(n, w) for n, w in tallies if n]
    if f.launches > 1:
        counts.insert(0, f"{f.launches} launches")
    if f.lost:
        counts.append(f"{_plural(f.lost, 'iteration')} lost")
    tail = f" ({', '.join(counts)})" if counts else ""
    code = f", exit {f.exit_code}" if f.exit_code not in (None, 0) else ""
    return f"{st.status}{at}{tail}{code}"


def _event_line(e: Any) -> tuple[str, str]:
    """What one event says: (its label, the rest of its line)."""
    from isaaclab_mgpu.contract import events as ev

    if isinstance(e, ev.Launched):
        x = e.essentials
        what = "/".join(str(v) for v in (x.get("library"), x.get("framework")) if v)
        what = " ".join(str(v) for v in (what, x.get("task") or x.get("script") or x.get("module")) if v)
        nodes = x.get("nnodes")
        ranks = f"{x.get('world_size')} ranks" + (f" on {nodes} nodes" if nodes not in (None, "1") else "")
        goal = f", to iteration {x['total']}" if x.get("total") else ""
        restart = f" (restart {e.job_restart})" if e.job_restart else ""
        job = f", SLURM job {e.job_id}{restart}" if e.job_id else ""
        cont = f", continuing at iteration {e.continued_from}" if e.continued_from is not None else ""
        return "launched", f"{what}, {ranks} on {e.host} ({x.get('device')}){goal}{job}{cont}"
    if isinstance(e, ev.AttemptStarted):
        at = f" from iteration {e.resumes_at}" if e.resumes_at else ""
        return f"attempt {e.attempt}", (
            f"{len(e.local_ranks)} local rank(s) of {e.world_size}{at}; logs {e.log_dir}"
        )
    if isinstance(e, ev.RanksUp):
        return "ranks up", f"pids {', '.join(f'{r}:{p}' for r, p in e.pids.items())}; per-rank logs {e.logs}"
    if isinstance(e, ev.StragglerNamed):
        slow = f" ({e.slower:.2f}x the others' busy time)" if e.slower else ""
        return "straggler", f"rank {e.rank}{f' on {e.rank_host}' if e.rank_host else ''}{slow}"
    if isinstance(e, ev.Stall):
        return "stall", e.verdict
    if isinstance(e, ev.Fault):
        who = f"rank {e.rank}" if e.rank is not None else "a rank"
        where = f" on {e.rank_host}" if e.rank_host else ""
        how = e.reason or (f"signal {e.signal}" if e.signal else f"exit code {e.exit_code}")
        at = ev.after_iteration(e.iteration)
        cost = (
            f" ({_plural(e.lost, 'iteration')} lost after checkpoint {e.checkpoint or 0})" if e.lost else ""
        )
        mend = "" if e.restartable in (None, True) else ": no restart can mend it"
        judged = f" [{e.failure_class}{mend}]" if e.failure_class is not None else ""
        return "fault" if e.outcome == "failed" else "hung", f"{who}{where}: {how}{at}{cost}{judged}"
    if isinstance(e, ev.DriftNamed):
        stop = "; the run stopped there (--on_drift stop)" if e.stopped else ""
        return "drift", (
            f"rank {e.rank}'s {e.component} differs from the other ranks' (equal at iteration "
            f"{e.since_iteration}, different at {e.found_at}){stop}"
        )
    if isinstance(e, ev.Restart):
        return "restart", (
            f"attempt {e.attempt} from iteration {e.from_iteration or 0} ({e.restarts_left} left)"
        )
    if isinstance(e, ev.Shrink):
        lost = ", ".join(f"node {n} ({h})" for n, h in zip(e.lost_nodes, e.lost_hosts, strict=False))
        envs = ""
        if e.num_envs_before is not None and e.num_envs_after is not None:
            envs = f", num_envs {e.num_envs_before} → {e.num_envs_after} per rank"
        return "shrink", (
            f"{lost} lost: {e.nodes_before} → {e.nodes_after} nodes, {e.ranks_before} → {e.ranks_after} "
            f"ranks{envs}, from iteration {e.from_iteration or 0}"
        )
    if isinstance(e, ev.Requeue):
        at = f" at iteration {e.iteration}" if e.iteration is not None else ""
        if e.requeued:
            return "requeue", f"stopped at a checkpoint{at} on {e.signal}; SLURM job {e.job_id} requeued"
        said = f"; scontrol requeue failed: {e.said}" if e.said else "; continue with --resume auto"
        return "stopped", f"at a checkpoint{at} on {e.signal}{said}"
    if isinstance(e, ev.Interrupted):
        return "interrupted", (
            f"at iteration {e.iteration}, exit {e.exit_code}" if e.iteration is not None else ""
        )
    if isinstance(e, ev.Finished):
        secs = f" in {e.seconds:.0f} s" if e.seconds is not None else ""
        return "finished", f"{'' if e.iteration is None else f'iteration {e.iteration}'}{secs}".strip()
    if isinstance(e, ev.Failed):
        return "failed", f"exit {e.exit_code}: {e.reason}"
    return e.kind, ""


def _trained(events: Sequence[Any]) -> str:
    """One line for a stretch of progress and checkpoint events."""
    from isaaclab_mgpu.contract import events as ev

    progress = [e for e in events if isinstance(e, ev.Progress)]
    saved = [e for e in events if isinstance(e, ev.Checkpoint)]
    parts = []
    if progress:
        first, last = progress[0], progress[-1]
        span = f"{first.iteration}" if first is last else f"{first.iteration} → {last.iteration}"
        parts.append(f"iteration {span}")
        if last.s_per_iteration is not None:
            parts.append(f"{last.s_per_iteration:.3f} s/it")
        if last.env_steps_per_s is not None:
            parts.append(f"{last.env_steps_per_s:,.0f} env-steps/s")
        rewards = [p.reward for p in progress if p.reward is not None]
        if rewards:
            parts.append(f"reward {rewards[0]:.2f}" + (f" → {rewards[-1]:.2f}" if len(rewards) > 1 else ""))
    if saved:
        parts.append(f"{_plural(len(saved), 'checkpoint')}, newest {saved[-1].iteration}")
    return ", ".join(parts)


def story(st: Story) -> None:
    """Print one run's ledger as a short timeline: the headline, then one line per event."""
    from rich.console import Console

    from isaaclab_mgpu.contract import events as ev

    console = Console(highlight=False)
    head = cell(f"{st.folder}: ")
    head.append_text(cell(_headline(st), _STATUS_STYLE.get(st.status, "")))
    console.print(head, crop=False, soft_wrap=True)

    def line(t: float, label: str, text: str) -> None:
        console.print(cell(f"  {_clock(t)}  {label:<12} {text}"), soft_wrap=True)

    # summary.json's bookkeeping (account, noted) is passed over: the figures are in the headline.
    shown = [e for e in st.events if not isinstance(e, ev.Account | ev.Noted)]
    for trained, group in itertools.groupby(shown, key=lambda e: isinstance(e, ev.Progress | ev.Checkpoint)):
        if trained:  # a stretch of progress and checkpoints: one line
            stretch = list(group)
            line(stretch[-1].time, "trained", _trained(stretch))
        else:
            for e in group:
                line(e.time, *_event_line(e))
    if st.skipped:
        console.print(
            cell(f"  ({_plural(st.skipped, 'line')} of the ledger skipped: torn, unknown or newer)", "dim")
        )


def story_json(st: Story) -> None:
    """Print the run's figures and every event as one JSON object."""
    out(json.dumps(st.as_json(), indent=2, allow_nan=False))
