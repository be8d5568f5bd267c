"""Strings from data shown as text: the one way report puts a value it did not write on a terminal.

Arguments, environment variables, ``summary.json`` fields, folder and host names, a rank's
heartbeat: any of them may hold Rich markup (``[bold]``, ``[/oops]``, ``[link=…]``) or control
characters (a raw ESC that recolours or retitles the terminal, a newline that forges a second
line). Everything report prints that it did not compose itself goes through this module:

- :func:`printable` (:mod:`isaaclab_mgpu.contract.text`'s): control, format and line-separator
  characters escaped the way Python writes them (ESC → ``\\x1b``, a newline → ``\\n``, U+202E →
  ``\\u202e``, a file name's byte that is not UTF-8 → ``\\xff``); everything else, non-ASCII
  letters included, is kept. Every ``mgpu:`` line on stderr passes through it.
- :func:`cell`: a Rich :class:`~rich.text.Text` of :func:`printable` (Rich never parses markup in
  a ``Text``), for table cells and anything else handed to Rich.
- :func:`markup`: :func:`printable` with Rich's markup escaped, for a value placed inside a
  markup string of mgpu's own (a progress column's template).

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
