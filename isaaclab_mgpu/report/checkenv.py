"""Printing for ``check-env`` and the ``train`` preflight.

The table goes to stdout, grouped by area, one row per finding, then ``would launch:`` and the
exact command line on a line of its own (plain text, never wrapped, so it can be copied).
``--json`` prints :func:`as_dict` (:data:`SCHEMA`, see ``docs/check-env.md``): everything but
``facts`` is stable; ``facts`` mirrors the collector's dataclasses and may gain fields.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from isaaclab_mgpu.report import out
from isaaclab_mgpu.report.text import cell, printable

if TYPE_CHECKING:
    from isaaclab_mgpu.launcher.diagnostics import CheckResult
    from isaaclab_mgpu.launcher.diagnostics.rules import Finding

SCHEMA = "mgpu.check-env/1"
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def summary(findings: Iterable[Finding]) -> dict[str, int]:
    """Count of findings per status."""
    statuses = [f.status for f in findings]
    return {status: statuses.count(status) for status in ("pass", "warn", "fail")}


def would_launch(result: CheckResult) -> dict[str, Any]:
    """The ``would_launch`` object: the command ``train`` would run, or why it cannot be built."""
    p = result.facts.plan
    return {
        "command": p.command,
        "argv": list(p.argv) if p.command is not None else None,
        "error": p.error,
        "launcher": p.launcher,
        "device": p.device,
        "nproc_per_node": p.nproc,
        "nnodes": p.nnodes,
        "world_size": p.world_size,
    }


def as_dict(result: CheckResult) -> dict[str, Any]:
    """The whole report as a JSON-ready dict (the ``--json`` schema)."""
    return {
        "schema": SCHEMA,
        "ok": result.ok,
        "exit_code": result.exit_code,
        "summary": summary(result.findings),
        "checks": [dataclasses.asdict(f) for f in result.findings],
        "would_launch": would_launch(result),
        "facts": dataclasses.asdict(result.facts),
    }


def json_report(result: CheckResult) -> None:
    """Print the report as one JSON object on stdout."""
    out(json.dumps(as_dict(result), indent=2, default=str))


def table(result: CheckResult) -> None:
    """Print the findings as a Rich table grouped by area, then the command ``train`` would run."""
    from rich.console import Console
    from rich.table import Table

    # Piped output would default to 80 columns; 120 keeps observed values and fixes readable.
    console = Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 120)
    t = Table(title="mgpu check-env", show_lines=False, title_justify="left")
    t.add_column("area", style="bold")
    t.add_column("check", no_wrap=True)
    t.add_column("status")
    t.add_column("observed", overflow="fold")
    t.add_column("fix", overflow="fold")
    last = None
    for f in result.findings:
        if last is not None and f.area != last:
            t.add_section()
        # Observed values and fixes quote the environment and the arguments: text, never markup.
        t.add_row(
            cell(f.area if f.area != last else ""),
            cell(f.name),
            cell(f.status, _STYLE[f.status]),
            cell(f.observed),
            cell(f.fix or ""),
        )
        last = f.area
    console.print(t)
    counts = summary(result.findings)
    console.print(f"{counts['pass']} passed, {counts['warn']} warning(s), {counts['fail']} failed")
    plan = result.facts.plan
    if plan.command is not None:
        out("would launch:")
        out(plan.command)
    else:
        out(f"would launch: nothing, the command cannot be built: {printable(plan.error)}")
