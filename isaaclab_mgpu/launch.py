"""The launch pipeline the commands share: spec → resolve → build → print or supervise."""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import report, workarounds
from .build import Command, build
from .resolve import ResolvedSpec, probe_machine, resolve
from .spec import LaunchSpec


def prepare(
    spec: LaunchSpec, *, strict: bool, extra_env: Mapping[str, str] | None = None
) -> tuple[ResolvedSpec, Command]:
    """Resolve ``spec`` against this machine and build its command."""
    resolved = resolve(spec, probe_machine(), strict=strict, extra_env=extra_env)
    return resolved, build(resolved)


def saved_workarounds(spec: LaunchSpec, *, enabled: bool) -> dict[str, str]:
    """NCCL variables saved for this machine by ``probe-nccl --save-workaround`` (GPU launches)."""
    return workarounds.for_launch(os.environ, device=spec.device, enabled=enabled)


def plan(spec: LaunchSpec, *, as_json: bool, use_saved_workarounds: bool = True) -> int:
    """Print the command ``train`` would exec (``dry-run``); problems are warnings."""
    extra = saved_workarounds(spec, enabled=use_saved_workarounds)
    resolved, cmd = prepare(spec, strict=False, extra_env=extra)
    report.dry_run(cmd, resolved, as_json=as_json)
    return 0


def train(spec: LaunchSpec, *, use_saved_workarounds: bool = True) -> int:
    """Launch and supervise ``spec``; return the run's exit code."""
    from .supervise import supervise

    extra = saved_workarounds(spec, enabled=use_saved_workarounds)
    resolved, cmd = prepare(spec, strict=True, extra_env=extra)
    report.resolve_notes(resolved)
    return supervise(cmd)
