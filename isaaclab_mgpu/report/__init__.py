"""All console output of mgpu: the one package that prints (a module per area beside this one).

Launcher side, command layer: runs in the ``mgpu`` process and is imported only by
:mod:`isaaclab_mgpu.launch` and :mod:`isaaclab_mgpu.cli`; the rank side prints through
:mod:`isaaclab_mgpu.rank.console`.

Machine-readable output (a dry-run line, ``--json``) goes to stdout exactly as built, never
through Rich, so it cannot be wrapped or re-styled. Messages for people go to stderr, one line
each, prefixed ``mgpu:``, with any control character from data escaped (:mod:`.text`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from isaaclab_mgpu.contract.env import STALL_TIMEOUT, STARTUP_TIMEOUT
from isaaclab_mgpu.contract.progress import (
    AUTO,
    AUTO_FACTOR,
    AUTO_FLOOR_S,
    auto_cap,
    process_group_timeout,
)
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.resolve import ResolvedSpec
from isaaclab_mgpu.launcher.spec import LaunchSpec
from isaaclab_mgpu.report.text import printable


def out(line: str) -> None:
    """Write one line to stdout, untouched."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """Write one ``mgpu:`` line to stderr (control characters escaped: it stays one line)."""
    sys.stderr.write(f"mgpu: {printable(message)}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    """Write one ``mgpu: warning:`` line to stderr."""
    note(f"warning: {message}")


def error(message: str) -> None:
    """Write one ``mgpu: error:`` line to stderr."""
    note(f"error: {message}")


def stopped(message: str, *, clean: bool) -> None:
    """A run stopped on request: a plain line, or a warning when processes had to be killed."""
    (note if clean else warn)(message)


def command_json(cmd: Command, resolved: ResolvedSpec) -> dict[str, Any]:
    """The command as a JSON-ready dict for tools and agents."""
    return {
        "command": cmd.line,
        "argv": list(cmd.argv),
        "env": dict(cmd.env),
        "launcher": cmd.launcher,
        "world_size": cmd.world_size,
        "nproc_per_node": resolved.nproc,
        "rank_devices": {str(k): v for k, v in cmd.rank_devices.items()},
        "log_dir": cmd.log_dir,
        "visible_gpus": {"count": resolved.visible.count, "source": resolved.visible.source},
        "filled": list(resolved.filled),
        "overridden": list(resolved.overridden),
        "warnings": list(resolved.warnings),
        "stall_watch": stall_watch(resolved),
    }


def stall_watch(resolved: ResolvedSpec) -> dict[str, Any]:
    """The stall bounds ``train`` watches with, and the ranks' process-group timeouts they imply."""
    s = resolved.spec
    env = {STALL_TIMEOUT: str(s.stall_timeout), STARTUP_TIMEOUT: str(s.startup_timeout)}
    startup, stall = process_group_timeout(startup=True, environ=env), process_group_timeout(environ=env)
    watch: dict[str, Any] = {
        "stall_timeout_s": s.stall_timeout,
        "startup_timeout_s": s.startup_timeout,
        "stall_on_silence": s.stall_on_silence,
        "process_group_timeout_s": {
            "startup": startup.total_seconds() if startup else None,
            "training": stall.total_seconds() if stall else None,
        },
    }
    if s.stall_timeout == AUTO:  # the bound train computes from the run's steady iterations
        watch["auto"] = {"floor_s": AUTO_FLOOR_S, "factor": AUTO_FACTOR, "cap_s": auto_cap(s.startup_timeout)}
    return watch


_STALL_DEFAULTS = (LaunchSpec.stall_timeout, LaunchSpec.startup_timeout, LaunchSpec.stall_on_silence)


def _off(seconds: float | str) -> str:
    if isinstance(seconds, str):
        return seconds  # auto
    return f"{seconds:g} s" if seconds else "off"


def resolve_notes(resolved: ResolvedSpec) -> None:
    """Tell what was filled in from the environment and what was tolerated."""
    for filled in resolved.filled:
        note(f"filled {filled}")
    for overridden in resolved.overridden:
        note(overridden)
    saved_workarounds(resolved.extra_env)
    for message in resolved.warnings:
        warn(message)


def saved_workarounds(env: Iterable[tuple[str, str]]) -> None:
    """Tell each saved workaround a launch applies, and how to skip them."""
    for name, value in env:
        note(f"applying saved workaround {name}={value} (--no_saved_workarounds to skip)")


def dry_run(cmd: Command, resolved: ResolvedSpec, *, as_json: bool) -> None:
    """Print what ``train`` would exec."""
    resolve_notes(resolved)
    s = resolved.spec
    if (s.stall_timeout, s.startup_timeout, s.stall_on_silence) != _STALL_DEFAULTS:
        silence = "; ranks that report nothing: no output for that long" if s.stall_on_silence else ""
        note(
            f"train would watch for stalls: --stall_timeout {_off(s.stall_timeout)}, "
            f"--startup_timeout {_off(s.startup_timeout)}{silence}"
        )
    if s.max_restarts:
        note(
            f"restarts: mgpu's own, up to {s.max_restarts} (torchrun gets none); each restart "
            "resumes from the run's newest checkpoint in the same run folder"
        )
    if as_json:
        out(json.dumps(command_json(cmd, resolved), indent=2))
    else:
        out(cmd.line)


class StderrProgress:
    """A command's progress on stderr: a transient Rich display of :attr:`COLUMNS` on a terminal."""

    #: The display's columns, each ``(rich.progress class name, *arguments)``.
    COLUMNS: tuple[tuple[str, ...], ...] = ()

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self._progress: Any = None

    def __enter__(self) -> Any:
        if self.console.is_terminal:
            import rich.progress

            columns = [getattr(rich.progress, name)(*args) for name, *args in self.COLUMNS]
            self._progress = rich.progress.Progress(*columns, console=self.console, transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def skills_problems(problems: list) -> int:
    """Print each skills/docs problem on its own line; return the exit code (0 when none)."""
    for problem in problems:
        sys.stderr.write(f"{printable(problem)}\n")
    if problems:
        error(f"{len(problems)} problem(s) in skills/ and docs/")
        return 1
    note("skills/ and docs/ are consistent with the CLI")
    return 0
