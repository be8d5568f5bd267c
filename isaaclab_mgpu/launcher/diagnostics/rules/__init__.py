"""Pure rules: :class:`~..facts.Facts` in, :class:`Finding` tuples out, a module per area.

Launcher side: runs in the ``mgpu`` process. Every rule is a function of the facts alone (no
I/O, no environment, no clock), so tests describe any machine — eight GPUs without NVLink, a 64 MB
``/dev/shm``, a GPU held by a stale run — and assert what ``check-env`` says about it.

What ``fail`` and ``warn`` mean, and the table of checks: ``docs/check-env.md``.

The areas, in report order, each a module with its ``RULES``: :mod:`.system`, :mod:`.gpu`,
:mod:`.topology`, :mod:`.nccl`, :mod:`.launch`, :mod:`.libraries`; :mod:`.base` holds
:class:`Finding` and the helpers they share. A new rule goes into its area's ``RULES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from isaaclab_mgpu.launcher.diagnostics.facts import Facts
from isaaclab_mgpu.launcher.diagnostics.rules import gpu, launch, libraries, nccl, system, topology
from isaaclab_mgpu.launcher.diagnostics.rules.base import AREAS, FAIL, PASS, STATUSES, WARN, Finding

__all__ = ["AREAS", "FAIL", "PASS", "RULES", "STATUSES", "WARN", "Finding", "evaluate", "failures"]

#: Every rule, area by area in :data:`AREAS` order (each module's rules judge its own area).
RULES: tuple[Callable[[Facts], list[Finding]], ...] = (
    *system.RULES,
    *gpu.RULES,
    *topology.RULES,
    *nccl.RULES,
    *launch.RULES,
    *libraries.RULES,
)


def evaluate(facts: Facts) -> tuple[Finding, ...]:
    """Judge ``facts`` with every rule; findings ordered by area, then rule order."""
    return tuple(finding for rule in RULES for finding in rule(facts))


def failures(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The failing findings."""
    return tuple(f for f in findings if f.status == FAIL)
