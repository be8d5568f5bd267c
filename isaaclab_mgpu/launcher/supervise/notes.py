"""The notes a launch's supervisor gives (:mod:`..notes`), rendered by ``report.supervise``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from isaaclab_mgpu.launcher.notes import Note

if TYPE_CHECKING:
    from isaaclab_mgpu.contract.summary import Drift, Straggler
    from isaaclab_mgpu.launcher.supervise.stall import Stall


@dataclass(frozen=True)
class LogFolder(Note):
    """Every rank's full output is written under ``path``, the attempt's per-rank log folder."""

    path: str


@dataclass(frozen=True)
class RunFolder(Note):
    """Multi-node: the run writes the run folder ``path``; node 0, on ``host``, keeps its record."""

    path: str
    host: str


class StoppingNote(Note):
    """A note that means the run is stopping (:attr:`Note.stopping`)."""

    stopping: ClassVar[bool] = True


@dataclass(frozen=True)
class Stopping(StoppingNote):
    """The first stop request (``reason``): ``launcher`` stops the ranks, then SIGTERM and SIGKILL follow."""

    reason: str
    launcher: str
    grace: float
    kill_after: float


@dataclass(frozen=True)
class StoppingAfterFailure(StoppingNote):
    """A rank failed: its peers can save nothing, so ``launcher`` stops them at once."""

    launcher: str
    grace: float
    kill_after: float


@dataclass(frozen=True)
class RankDied(StoppingNote):
    """A local rank died mid-run: this node's ``peers`` other ranks get SIGKILL in ``wait`` seconds."""

    rank: int
    host: str | None
    iteration: int | None
    stage: str
    peers: int
    wait: float


@dataclass(frozen=True)
class Forcing(StoppingNote):
    """A second interrupt: the tree's ``count`` processes are killed now."""

    count: int


@dataclass(frozen=True)
class Escalating(StoppingNote):
    """``count`` processes outlived the ``grace`` period: SIGTERM."""

    count: int
    grace: float


@dataclass(frozen=True)
class Killing(StoppingNote):
    """``count`` processes ignored SIGTERM: SIGKILL."""

    count: int


@dataclass(frozen=True)
class Outlived(StoppingNote):
    """``count`` processes outlived ``launcher`` (orphaned grandchildren, setsid escapees): stopped."""

    count: int
    launcher: str


@dataclass(frozen=True)
class StallFound(StoppingNote):
    """The stall watch's verdict, as soon as it is found: who, where, their stacks, who still moves."""

    stall: Stall


@dataclass(frozen=True)
class StragglerFound(Note):
    """The straggler watch named a rank: who, where, how much slower, its GPU's state."""

    straggler: Straggler


@dataclass(frozen=True)
class DriftFound(Note):
    """The ranks' drift check found their parameters apart (rank 0's progress report)."""

    drift: Drift


@dataclass(frozen=True)
class StallBound(Note):
    """The automatic stall bound (``text``: the bound and where it came from), once known."""

    text: str


@dataclass(frozen=True)
class IgnoredReport(Note):
    """The progress file ``path`` did not hold a progress report (``reason``): said once, then ignored."""

    path: str
    reason: str
