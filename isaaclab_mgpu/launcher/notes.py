"""What the launcher side tells people as it works: the :class:`Note` and the one sink for notes.

Nothing on the launcher side prints (only the command layer calls the printing layer). The
supervisor, the attempts loop, the NCCL probe and the scale sweep each hand what happened to a
:data:`Tell` their caller gave: a callable taking one :class:`Note`, a frozen record of one thing to
say. Each kind is declared beside the code that gives it (:mod:`.supervise.notes` for a launch's,
:mod:`.attempts` for the restarts and the requeue signal, :mod:`.probe.run`, :mod:`.scale`), and the
report layer renders it (``report.supervise`` for a run's, ``report.probe`` and ``report.scale``
with their live displays); a caller with no console passes :func:`silent`. A new note is one class
and one renderer.

A note whose :attr:`Note.stopping` is true means the run is stopping: a live progress bar is taken
off the screen before it (``report.bar``), since the lines about stopping go to stderr.
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
