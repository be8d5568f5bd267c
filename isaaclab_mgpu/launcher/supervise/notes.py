"""What the supervisor tells people while a run starts and stops: the :class:`Notes` protocol.

The supervisor never prints (only the command layer calls the printing layer): it hands each
event to the :class:`Notes` its caller gave (``report.supervise`` implements every method as a
function of that module). A run without a console gets :class:`Silent`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from isaaclab_mgpu.contract.summary import Drift, Straggler
    from isaaclab_mgpu.launcher.supervise.stall import Stall

__all__ = ["Notes", "Silent"]


class Notes(Protocol):
    """What the supervisor tells people while a run stops (``report.supervise`` implements it).

    Each method here does nothing, so a class that names :class:`Notes` as its base only writes
    the notes it wants to give.
    """

    def log_folder(self, path: str) -> None: ...

    def run_folder(self, path: str, host: str) -> None: ...

    def stopping(self, reason: str, launcher: str, grace: float, kill_after: float) -> None: ...

    def stopping_after_failure(self, launcher: str, grace: float, kill_after: float) -> None: ...

    def rank_died(
        self, rank: int, host: str | None, iteration: int | None, stage: str, peers: int, wait: float
    ) -> None: ...

    def forcing(self, count: int) -> None: ...

    def escalating(self, count: int, grace: float) -> None: ...

    def killing(self, count: int) -> None: ...

    def stragglers(self, count: int, launcher: str) -> None: ...

    def stall(self, stall: Stall) -> None: ...

    def straggler(self, straggler: Straggler) -> None: ...

    def drift(self, drift: Drift) -> None: ...

    def stall_bound(self, text: str) -> None: ...

    def ignored_report(self, path: str, reason: str) -> None: ...


class Silent(Notes):
    """The :class:`Notes` of a run without a console: says nothing (every method does nothing)."""
