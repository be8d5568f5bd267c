"""Pure rules: :class:`~..facts.Facts` in, :class:`Finding` tuples out, a module per area.

Launcher side: runs in the ``mgpu`` process. Every rule is a function of the facts alone (no
I/O, no environment, no clock), so tests describe any machine — eight GPUs without NVLink, a 64 MB
``/dev/shm``, a GPU held by a stale run — and assert what ``check-env`` says about it.

``fail`` means the launch as planned will not work (``check-env`` exits 1, ``train`` refuses to
start); ``warn`` means it may work but is a known trap or leaves performance on the table.
See ``docs/check-env.md`` for the table of checks.

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

#: Every rule, area by area.
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
    found = [finding for rule in RULES for finding in rule(facts)]
    order = {a: i for i, a in enumerate(AREAS)}
    return tuple(sorted(found, key=lambda x: order[x.area]))


def failures(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """The failing findings."""
    return tuple(f for f in findings if f.status == FAIL)
