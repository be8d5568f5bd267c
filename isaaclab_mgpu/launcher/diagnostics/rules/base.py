"""What every rule module shares: :class:`Finding`, the statuses and the helpers that read facts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from isaaclab_mgpu.contract import space
from isaaclab_mgpu.contract.devices import identity
from isaaclab_mgpu.launcher.diagnostics.facts import UNLIMITED, Facts, Package
from isaaclab_mgpu.launcher.nvml import Gpu

PASS, WARN, FAIL = "pass", "warn", "fail"
STATUSES = (PASS, WARN, FAIL)
#: Report order of the areas.
AREAS = ("system", "gpu", "topology", "nccl", "launch", "libraries")

MIB = 2**20
GIB = 2**30


@dataclass(frozen=True)
class Finding:
    """One judged check: a row of the report and an entry of ``--json``'s ``checks``."""

    area: str
    """One of :data:`AREAS`."""

    name: str
    """Stable identifier within the area; per-item checks add ``:item`` (``gpu_in_use:0``)."""

    status: str
    """``pass``, ``warn`` or ``fail``."""

    observed: str
    """The value seen, in words."""

    fix: str | None = None
    """One line saying what to do; None when nothing is."""

    def line(self) -> str:
        """``preflight AREA/NAME: OBSERVED; fix: FIX``: how train and dry-run name a failing check."""
        return f"preflight {self.area}/{self.name}: {self.observed}; fix: {self.fix}"


def finding(area: str, name: str, status: str, observed: str, fix: str | None = None) -> Finding:
    """A :class:`Finding`; the fix is dropped when the check passed."""
    return Finding(area, name, status, observed, fix if status != PASS else None)


def size(n: int) -> str:
    """A byte count in words (``64 MiB``, ``unlimited``)."""
    return "unlimited" if n == UNLIMITED else space.size_text(n)


def package(facts: Facts, name: str) -> Package | None:
    """The installed distribution ``name``, or None."""
    return next((p for p in facts.packages if p.name == name and p.version is not None), None)


def major(version: str | None) -> int | None:
    """The major number of a version string, or None."""
    m = re.match(r"\s*(\d+)", version or "")
    return int(m.group(1)) if m else None


def uses_gpus(facts: Facts) -> bool:
    """True when the planned launch runs CUDA ranks."""
    return facts.plan.device == "cuda"


def used_gpus(facts: Facts) -> tuple[Gpu, ...]:
    """The NVML GPUs this node's ranks would run on (all of them when that cannot be told)."""
    gpus, entries = facts.gpu.gpus, facts.plan.visible_entries
    if not uses_gpus(facts):
        return ()
    if not entries and facts.cuda_visible_devices is not None and facts.plan.error is None:
        return ()  # CUDA_VISIBLE_DEVICES hides every GPU
    if entries:
        uuids = tuple(g.uuid for g in gpus)
        keys = dict.fromkeys(identity(e, uuids) for e in entries)
        gpus = tuple(g for key in keys for g in gpus if g.uuid == key)
    return gpus[: facts.plan.nproc]
