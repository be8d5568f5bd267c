"""Parse an ``mgpu`` command line against the real Typer app without running it.

Used by ``mgpu skills check`` so that every command quoted in ``skills/`` and ``docs/`` stays
valid: options must exist, values must pass the same validation as a real launch, and the
training arguments a launch passes through must be flags the worker knows (checked by the
worker's own parser, as a launch does; for a user ``--script``/``-m``, flags of the worker or of
Isaac Lab's ``train.py``). Arguments after ``--`` are the user's own and are not judged.
"""

from __future__ import annotations

from typing import Any

import click
import typer

from isaaclab_mgpu.cli.command import LaunchCommand
from isaaclab_mgpu.cli.options import spec_for
from isaaclab_mgpu.contract.errors import MgpuError
from isaaclab_mgpu.contract.worker_args import option_strings
from isaaclab_mgpu.launcher.options import declared
from isaaclab_mgpu.launcher.spec import LaunchSpec

#: Flags of Isaac Lab's own ``train.py`` that docs may quote and the worker's parser does not know.
ISAACLAB_TRAIN_FLAGS = frozenset({"--enable_cameras", "--load_run"})


def parse_command_line(app: typer.Typer, argv: list[str]) -> str | None:
    """Return None when ``mgpu argv`` parses, else a one-line reason."""
    command: Any = typer.main.get_command(app)
    words = list(argv)
    try:
        group_ctx, name = typer.Context(command, info_name="mgpu"), "mgpu"
        while hasattr(command, "get_command") and words and not words[0].startswith("-"):
            sub = command.get_command(group_ctx, words[0])
            if sub is None:
                return f"no such command {words[0]!r}"
            if hasattr(sub, "get_command"):
                group_ctx = typer.Context(sub, info_name=words[0], parent=group_ctx)
            command, name, words = sub, words[0], words[1:]
        if any(w in ("--help", "--version") for w in words):
            return None
        if hasattr(command, "get_command"):
            return "a command name is missing" if not words else f"unexpected {words[0]!r}"
        before = words[: words.index("--")] if "--" in words else words
        ctx = command.make_context(name, before, parent=group_ctx)
        checked = False
        if all(f.name in ctx.params for f, _ in declared(LaunchSpec)):
            # A launch command's training arguments for the built-in worker are checked by the
            # worker's own parser, exactly as a real launch does it.
            spec = spec_for(ctx, ctx.params)
            checked = isinstance(command, LaunchCommand) and spec.builtin_worker
        if not checked:
            unknown = [a.split("=")[0] for a in ctx.args if a.startswith("--")]
            strangers = [f for f in unknown if f not in ISAACLAB_TRAIN_FLAGS | option_strings()]
            if strangers:
                return f"unknown option {strangers[0]} (not an mgpu option nor a known training flag)"
    except MgpuError as exc:
        return str(exc)
    except click.ClickException as exc:
        return exc.format_message()
    return None
