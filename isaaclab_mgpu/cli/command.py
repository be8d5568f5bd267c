"""The Click command class and context settings of the launch commands (train, dry-run, check-env).

- **One spelling in help, all accepted.** Options are declared once, in Isaac Lab's underscore
  spelling; the context's ``token_normalize_func`` reads ``--num-gpus`` as ``--num_gpus`` and a
  declared alias (torchrun's ``--nproc_per_node``) as its option (Click normalizes only the name part of an
  option, and passes unknown options on untouched), so the help lists each option once and its
  names stay readable at 80 columns.
- **Where ``--`` was.** Click drops ``--`` and appends what followed it to the extra arguments;
  :class:`LaunchCommand` records how many trailing extra arguments came after it, so the
  forwarded-argument check (:mod:`isaaclab_mgpu.launcher.forwarded`) can keep them verbatim.
- **The worker's options in ``--help``.** After Typer's panels, a "Training options" panel lists
  the built-in worker's options from its own parser.
"""

from __future__ import annotations

from typing import Any

import click
from typer.core import TyperCommand

from isaaclab_mgpu.launcher.options import declared, flag_of
from isaaclab_mgpu.launcher.spec import LaunchSpec

#: ``ctx.meta`` key: how many trailing extra arguments came after ``--``.
VERBATIM = "mgpu.verbatim"


#: Other names of a declared option (torchrun's), accepted but not listed separately in ``--help``.
ALIASES = {alias: flag_of(f, opt)[2:] for f, opt in declared(LaunchSpec) for alias in opt.aliases}


def normalize_option(name: str) -> str:
    """Read an option name's hyphens as underscores, and an alias as its option (no ``--`` given)."""
    under = name.replace("-", "_")
    return ALIASES.get(under, under)


#: Unknown options and positionals flow through to the worker, in order; hyphen spellings accepted.
PASSTHROUGH: dict[str, Any] = {
    "allow_extra_args": True,
    "ignore_unknown_options": True,
    "token_normalize_func": normalize_option,
}


def option_names(command: click.Command) -> set[str]:
    """Every option name ``command`` declares, negative flags included."""
    return {
        name for p in command.params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts)
    }


class LaunchCommand(TyperCommand):
    """A command that launches the built-in worker: remembers ``--`` and lists the worker's options."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[VERBATIM] = len(args) - args.index("--") - 1 if "--" in args else 0
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        from isaaclab_mgpu.contract.worker_args import ISAAC_TRAIN_OPTIONS, options_help
        from isaaclab_mgpu.report.help import training_options

        training_options(options_help(), ctx.info_name or "train", ISAAC_TRAIN_OPTIONS)
