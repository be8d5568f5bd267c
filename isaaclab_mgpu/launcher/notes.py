"""What the launcher side tells people as it works: the :class:`Note` and the one sink for notes.

Nothing on the launcher side prints (only the command layer calls the printing layer). The
supervisor, the attempts loop, the NCCL probe and the scale sweep each hand what happened to a
:data:`Tell` their caller gave. Each kind of note is declared beside the code that gives it and
rendered by the report layer (``report.supervise``, ``report.probe``, ``report.scale``): a new note
is one class and one renderer. A :attr:`Note.stopping` note takes a live progress bar off the screen
before it (``report.bar``), since the lines about stopping go to stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Note:
    """One thing the launcher side tells people (each subclass is one kind)."""

    stopping: ClassVar[bool] = False
    """True for the notes that mean the run is stopping."""


#: Where notes go: the command layer's renderer, or :func:`silent`.
Tell = Callable[[Note], None]


def silent(note: Note) -> None:
    """The sink of a caller without a console: says nothing."""
