"""Help pages: the extra ``--help`` panel of the launch commands (the built-in worker's training
options), and :func:`without_markdown`, which keeps Typer's help formatter from importing a Markdown
parser mgpu's help never uses."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isaaclab_mgpu.rank.worker.args import OptionHelp

#: Set by the launcher itself (from its own options, or always): not listed as training options.
LAUNCHER_SET = frozenset({"--rl_library", "--ml_framework", "--device", "--distributed"})


def without_markdown() -> None:
    """Import ``typer.rich_utils`` with a stand-in for ``rich.markdown``, then drop the stand-in.

    ``typer.rich_utils`` (Typer 0.25) imports ``rich.markdown.Markdown`` at module level, and with it
    ``markdown_it`` (about 40 % of ``mgpu --help``'s time here), but builds a ``Markdown`` only for
    ``rich_markup_mode="markdown"``; mgpu's app uses ``"rich"``. The stand-in's ``Markdown`` says
    so if it is ever built; ``rich.markdown`` itself stays importable (the real one) for everyone else.
    """
    if "typer.rich_utils" in sys.modules or "rich.markdown" in sys.modules:
        return
    stand_in = types.ModuleType("rich.markdown")

    class Markdown:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("mgpu's help uses Rich markup; rich_markup_mode='markdown' is not supported")

    stand_in.Markdown = Markdown  # type: ignore[attr-defined]
    sys.modules["rich.markdown"] = stand_in
    try:
        import typer.rich_utils  # noqa: F401
    finally:
        del sys.modules["rich.markdown"]


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
