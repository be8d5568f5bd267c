"""The launch pipeline the commands share: spec → resolve → build → print or supervise."""

from __future__ import annotations

from . import report
from .build import Command, build
from .resolve import ResolvedSpec, probe_machine, resolve
from .spec import LaunchSpec


def prepare(spec: LaunchSpec, *, strict: bool) -> tuple[ResolvedSpec, Command]:
    """Resolve ``spec`` against this machine and build its command."""
    resolved = resolve(spec, probe_machine(), strict=strict)
    return resolved, build(resolved)


def plan(spec: LaunchSpec, *, as_json: bool) -> int:
    """Print the command ``train`` would exec (``dry-run``); problems are warnings."""
    resolved, cmd = prepare(spec, strict=False)
    report.dry_run(cmd, resolved, as_json=as_json)
    return 0


def train(spec: LaunchSpec, *, preflight: bool = True) -> int:
    """Launch and supervise ``spec``; return the run's exit code."""
    from .supervise import supervise

    resolved, cmd = prepare(spec, strict=True)
    if preflight:
        from .diagnostics import preflight as run_preflight

        run_preflight(spec, resolved)
    report.resolve_notes(resolved)
    return supervise(cmd)
