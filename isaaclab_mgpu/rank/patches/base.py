"""What the patch modules share: the observer they report to and a scoped attribute swap."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Observer:
    """What the observation patches report to (implemented by the rank's Bookkeeper)."""

    def run_folder(self, rank_dir: str) -> None:
        """Isaac Lab named this rank's folder."""

    def synced(self, modules: list[Any]) -> None:
        """Parameters were broadcast from rank 0; ``modules`` hold them."""

    def resumed(self, iteration: int, checkpoint: str) -> None:
        """The library loaded ``checkpoint``; training goes on at completed iteration ``iteration``."""

    def iteration(self, steps: int, reward: float | None) -> None:
        """One iteration ended: this rank's env steps in it and its mean episode reward."""

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
