"""Strings from data shown as text: the one way report puts a value it did not write on a terminal.

Arguments, environment variables, ``summary.json`` fields, folder and host names, a rank's
heartbeat: any of them may hold Rich markup (``[bold]``, ``[link=…]``) or control characters (a
raw ESC that recolours the terminal, a newline that forges a second line). Everything report prints
that it did not compose itself goes through :func:`printable` (:mod:`isaaclab_mgpu.contract.text`'s;
every ``mgpu:`` line on stderr), :func:`cell` (table cells, anything handed to Rich) or
:func:`markup` (a value inside a markup string of mgpu's own, such as a progress column's template).

A rank's own output (its training log, a user script's coloured lines) is not data in this sense:
``train`` passes it through byte for byte, as torchrun does.
"""

from __future__ import annotations

from typing import Any

from isaaclab_mgpu.contract.text import printable

__all__ = ["cell", "markup", "printable"]


def cell(value: object, style: str = "") -> Any:
    """``value`` as a Rich ``Text`` (no markup parsed, control characters escaped)."""
    from rich.text import Text

    return Text(printable(value), style=style)


def markup(value: object) -> str:
    """``value`` safe inside a Rich markup string: printable, with ``[`` escaped."""
    from rich.markup import escape

    return escape(printable(value))
