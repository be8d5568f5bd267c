"""The launch pipeline the commands share: spec → resolve → build → print or supervise."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import report, workarounds
from .build import Command, build
from .errors import Interrupted, WorkerFailure
from .resolve import ResolvedSpec, probe_machine, resolve
from .spec import LaunchSpec

if TYPE_CHECKING:
    from .supervise import RunResult, SuperviseOptions


def prepare(
    spec: LaunchSpec, *, strict: bool, extra_env: Mapping[str, str] | None = None
) -> tuple[ResolvedSpec, Command]:
    """Resolve ``spec`` against this machine and build its command."""
    machine = probe_machine(gpu_uuids=spec.gpu_ids is not None)
    resolved = resolve(spec, machine, strict=strict, extra_env=extra_env)
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


def train(
    spec: LaunchSpec,
    options: SuperviseOptions | None = None,
    *,
    preflight: bool = True,
    use_saved_workarounds: bool = True,
) -> int:
    """Launch and supervise ``spec``; 0 on success, else raise the error carrying the exit code."""
    from .supervise import supervise

    extra = saved_workarounds(spec, enabled=use_saved_workarounds)
    resolved, cmd = prepare(spec, strict=True, extra_env=extra)
    if preflight:
        from .diagnostics import preflight as run_preflight

        run_preflight(spec, resolved)
    report.resolve_notes(resolved)
    return exit_code(supervise(cmd, options), cmd.launcher)


def exit_code(result: RunResult, launcher: str) -> int:
    """Map a run's result to 0, or raise the :mod:`errors` exception that carries its exit code."""
    if result.interrupted:
        how = "survivors were SIGKILLed" if result.killed_after_grace else "every process ended"
        raise Interrupted(f"interrupted; {how}", exit_code=result.exit_code)
    if result.failure is not None:
        f = result.failure
        what = f"signal {f.signal}" if f.signal else f"exit code {f.exit_code}"
        where = f" on {f.host}" if f.host else ""
        raise WorkerFailure(f"rank {f.rank}{where} failed with {what}", exit_code=result.exit_code)
    if result.exit_code != 0:
        message = f"{launcher} failed with exit code {result.exit_code}"
        raise WorkerFailure(message, exit_code=result.exit_code)
    return 0
