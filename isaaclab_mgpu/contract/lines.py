"""The console lines a training rank prints that the launcher reads back: written and read here.

Rank 0 of the built-in worker prints one plain line per iteration and one when training ends
(:mod:`isaaclab_mgpu.rank.console`). On a terminal ``mgpu train`` turns them into its live bar
(:mod:`isaaclab_mgpu.report.bar`); the benchmarks read the same lines from a pipe. The writers
(:func:`iteration_line`, :func:`final_line`) and the readers (:data:`ITERATION`, :data:`FINAL`)
sit side by side, as do the bar's columns (:data:`BAR_COLUMNS`). The readers allow torchrun's
``[rank]:`` prefix.
"""

from __future__ import annotations

import re

#: How every line of the built-in worker's rank 0 starts.
PREFIX = "[mgpu]"
#: The ways a training run ends, as :func:`final_line` spells them (the summary's statuses):
#: ``stopped`` saved and stopped on the requeue signal, to be continued.
FINISHED, INTERRUPTED, STOPPED = "finished", "interrupted", "stopped"

#: An iteration line (:func:`iteration_line`), after an optional launcher prefix.
ITERATION = re.compile(
    r"^(?:\[[^\]]*\]:)?\[mgpu\] iteration (?P<it>\d+)/(?P<total>\d+) \| reward (?P<reward>\S+)"
    r"(?P<last> \(last\))? \| (?P<rate>[\d,.]+) steps/s \| (?P<spi>[\d.]+) s/it"
)
#: How a reward column marks the last known mean when no episode ended in this iteration.
LAST_KNOWN = " (last)"
#: Any line of the built-in worker's (rank 0's ``[mgpu]`` lines, every rank's ``[mgpu rank R]`` notes).
MGPU_LINE = re.compile(r"^(?:\[[^\]]*\]:)?\[mgpu[\] ]")
#: The end-of-run line (:func:`final_line`): what follows is the summary.
FINAL = re.compile(r"^(?:\[[^\]]*\]:)?\[mgpu\] (finished|interrupted|stopped):")
#: The iteration bar's columns as ``(Rich class name, *arguments)``: the bar a worker run by hand
#: draws on a terminal (:mod:`isaaclab_mgpu.rank.console`) and the one ``mgpu train`` draws from
#: rank 0's lines (:mod:`isaaclab_mgpu.report.bar`) are built from this one list.
BAR_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("TextColumn", "[bold]iteration"),
    ("MofNCompleteColumn",),
    ("BarColumn",),
    ("TextColumn", "{task.fields[info]}"),
    ("TimeElapsedColumn",),
    ("TextColumn", "ETA"),
    ("TimeRemainingColumn",),
)


def reward_text(value: float | None, last_known: float | None = None) -> str:
    """A mean reward as the lines show it: ``n/a`` before any episode ended, else the last known, marked."""
    if value is None:
        return "n/a" if last_known is None else f"{last_known:.2f}{LAST_KNOWN}"
    return f"{value:.2f}"


def iteration_info(
    reward: float | None, steps_per_s: float, seconds: float, last_known: float | None = None
) -> str:
    """What an iteration line says after its count: reward, env-steps/s, seconds per iteration."""
    return f"reward {reward_text(reward, last_known)} | {steps_per_s:,.0f} steps/s | {seconds:.2f} s/it"


def iteration_line(it: int, total: int, info: str) -> str:
    """Rank 0's line for iteration ``it`` (1-based) of ``total``, ``info`` from :func:`iteration_info`."""
    return f"{PREFIX} iteration {it}/{total} | {info}"


def final_line(status: str, text: str) -> str:
    """Rank 0's end-of-run line: :data:`FINISHED`, :data:`INTERRUPTED` or :data:`STOPPED`, then ``text``."""
    return f"{PREFIX} {status}: {text}"
