"""Help pages: the extra ``--help`` panel of the launch commands (the built-in worker's training
options), and :func:`lean_help`, which keeps Typer's help formatter from importing a Markdown
parser and a syntax highlighter mgpu's help never uses."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isaaclab_mgpu.contract.worker_args import OptionHelp

#: Set by the launcher itself (from its own options, or always): not listed as training options.
LAUNCHER_SET = frozenset({"--rl_library", "--ml_framework", "--device", "--distributed"})


#: Modules ``typer.rich_utils`` (Typer 0.25) imports for renderers mgpu's help never builds, and
#: the name it takes from each: ``Markdown`` (mgpu's markup mode is ``"rich"``) pulls in
#: ``markdown_it``, about 40 % of ``mgpu --help``; ``Traceback`` (pretty exceptions are off) pulls
#: in ``rich.syntax`` and Pygments, about a third of what is left.
UNUSED_BY_HELP = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def lean_help() -> None:
    """Import ``typer.rich_utils`` with stand-ins for :data:`UNUSED_BY_HELP`, then drop the stand-ins."""
    # The real modules stay importable: they are only absent from sys.modules during this import.
    if "typer.rich_utils" in sys.modules or any(name in sys.modules for name in UNUSED_BY_HELP):
        return
    for module, attr in UNUSED_BY_HELP.items():
        stand_in = types.ModuleType(module)
        setattr(stand_in, attr, _unavailable(module, attr))
        sys.modules[module] = stand_in
    try:
        import typer.rich_utils  # noqa: F401
    finally:
        for module in UNUSED_BY_HELP:
            del sys.modules[module]


def _unavailable(module: str, attr: str) -> type:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            f"mgpu's help was built without {module}.{attr}: it uses Rich markup and plain tracebacks"
        )

    return type(attr, (), {"__init__": refuse, "from_exception": staticmethod(refuse)})


def training_options(options: Iterable[OptionHelp], command: str, isaac: Iterable[str] = ()) -> None:
    """Print the worker's options as a panel like Typer's (its width rules: TERMINAL_WIDTH, else auto)."""
    from rich import box
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    width = os.environ.get("TERMINAL_WIDTH")
    console = Console(width=int(width) if width and width.isdigit() else None)
    table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False, expand=True)
    table.add_column(no_wrap=True, style="bold cyan")
    table.add_column(no_wrap=True, style="bold yellow")
    table.add_column(ratio=1)
    for o in options:
        if o.names[0] not in LAUNCHER_SET:
            table.add_row(o.names[0], o.metavar or "", Text(o.help))
    table.add_row("KEY=VALUE", "", Text("Overrides: env.<field>=v, agent.<field>=v; Isaac Lab: Hydra."))
    isaac = [o for o in isaac if o.startswith("--")]
    if isaac:
        shown = ", ".join(isaac[:4])
        table.add_row("ISAAC LAB", "", Text(f"Isaac-… tasks also take Isaac Lab train's {shown}, …"))
    note = Text(
        f"Forwarded to every rank of the built-in worker, in order, with --distributed appended; "
        f"mgpu {command} refuses an unknown one before starting anything. Items after -- are "
        "forwarded verbatim.",
        style="dim",
    )
    console.print(
        Panel(
            Group(table, note),
            border_style="dim",
            title="Training options (built-in worker)",
            title_align="left",
            box=box.ROUNDED,
        )
    )
