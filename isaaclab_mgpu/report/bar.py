"""The live progress bar of ``mgpu train`` on a terminal, drawn by the launcher, never by a rank.

When and what it shows: ``docs/training.md``, "Progress bar" (only when ``mgpu train``'s own
stdout is a terminal, which only the launcher can tell; otherwise nothing here runs). The
supervisor hands every line it prints to :class:`LiveProgress`: iteration lines of the shown rank
(read with :mod:`isaaclab_mgpu.contract.lines`, which writes them) become a Rich bar with a rank's
bar columns, every other line is printed above it. Once the run starts to stop, the bar is cleared
before the first note (:meth:`LiveProgress.telling`): notes go to stderr and would tear a live bar
still drawn on stdout.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from isaaclab_mgpu.contract.lines import BAR_COLUMNS, FINAL, ITERATION
from isaaclab_mgpu.launcher.notes import Note, Tell
from isaaclab_mgpu.report.text import markup


class LiveProgress:
    """Turns the launcher's stdout lines into a progress bar with the other lines above it."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(file=sys.stdout)
        self._progress: Any = None
        self._task: Any = None
        self._closed = False

    def feed(self, raw: bytes) -> None:
        """Handle one line from the launcher's stdout (called from the supervisor's reader thread)."""
        line = raw.decode(errors="replace").rstrip("\r\n")
        m = ITERATION.match(line)
        if m is not None and not self._closed:
            self._update(m)
            return
        if FINAL.match(line):
            self._stop()
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            sys.stdout.buffer.write(raw if raw.endswith(b"\n") else raw + b"\n")
            sys.stdout.flush()

    def close(self) -> None:
        """End the live display (the last bar stays on screen)."""
        self._stop()
        self._closed = True

    def clear(self) -> None:
        """End the live display and take the bar off the screen; later lines print plainly."""
        if self._progress is not None:
            self._progress.live.transient = True  # Rich erases a transient display when it stops
        self.close()

    def telling(self, tell: Tell) -> Tell:
        """``tell`` (the run's sink for notes), clearing the bar before the first about stopping."""

        def told(n: Note) -> None:
            if n.stopping:
                self.clear()
            tell(n)

        return told

    def _update(self, m: re.Match[str]) -> None:
        it, total = int(m["it"]), int(m["total"])
        # The bar's info column is a markup template; the line is whatever a rank printed.
        info = markup(f"reward {m['reward']}{m['last'] or ''} | {m['rate']} env-steps/s | {m['spi']} s/it")
        if self._progress is None:
            import rich.progress

            columns = [getattr(rich.progress, name)(*args) for name, *args in BAR_COLUMNS]
            self._progress = rich.progress.Progress(
                *columns, console=self.console, redirect_stdout=False, redirect_stderr=False
            )
            self._task = self._progress.add_task("train", total=total, completed=it - 1, info=info)
            self._progress.start()
        self._progress.update(self._task, total=total, completed=it, info=info)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
