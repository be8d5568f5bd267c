"""What the patch modules share: the observer they report to, a scoped attribute swap, and the
exception that leaves a library's training loop at an iteration boundary (mgpu's checkpoint
request: the library has saved, the rank ends cleanly)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class StopTraining(Exception):
    """Raised inside a library's training loop once it saved on mgpu's checkpoint request; the
    patch that wraps the loop's entry point catches it and ends training as a return would."""


class Observer:
    """What the observation patches report to (implemented by the rank's Bookkeeper)."""

    def run_folder(self, rank_dir: str) -> None:
        """Isaac Lab named this rank's folder."""

    def synced(self, modules: list[Any]) -> None:
        """Parameters were broadcast from rank 0; ``modules`` hold them."""

    def resumed(self, iteration: int, checkpoint: str) -> None:
        """The library loaded ``checkpoint``; training goes on at completed iteration ``iteration``."""

    def iteration(self, steps: int, reward: float | None) -> bool:
        """One iteration ended: this rank's env steps in it and its mean episode reward.

        True (the same on every rank) when the run is asked to checkpoint and stop here: the patch
        then has the library save through its own code and leave its loop."""
        return False

    def saved(self, iteration: int) -> None:
        """The library wrote a checkpoint after ``iteration`` completed iterations (rank 0)."""

    def finished(self) -> None:
        """Training returned normally (the process group still exists)."""


@contextlib.contextmanager
def replaced(target: Any, name: str, value: Any) -> Iterator[None]:
    """``target.name`` is ``value`` inside the block and what it was before after it."""
    saved = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, saved)
