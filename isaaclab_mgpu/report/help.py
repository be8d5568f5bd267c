"""The extra ``--help`` panel of the launch commands: the built-in worker's training options."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isaaclab_mgpu.rank.worker.args import OptionHelp

#: Set by the launcher itself (from its own options, or always): not listed as training options.
LAUNCHER_SET = frozenset({"--rl_library", "--ml_framework", "--device", "--distributed"})


def training_options(options: Iterable[OptionHelp], command: str, isaac: Iterable[str] = ()) -> None:
    """Print the worker's options as a panel like Typer's (its width rules: TERMINAL_WIDTH, else auto)."""
    from rich import box
    from rich.console import Console
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
        if o.names[0] in LAUNCHER_SET:
            continue
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
    from rich.console import Group

    console.print(
        Panel(
            Group(table, note),
            border_style="dim",
            title="Training options (built-in worker)",
            title_align="left",
            box=box.ROUNDED,
        )
    )
