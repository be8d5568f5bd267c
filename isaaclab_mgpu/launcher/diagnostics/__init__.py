"""``mgpu check-env`` and the ``train`` preflight: say what will break a launch before it happens.

Launcher side: runs in the ``mgpu`` process (torch and jax only in ``--deep``'s subprocesses).
Facts flow one way: :mod:`.facts` and :mod:`.deep` gather them, :mod:`.rules` judge them.

This package returns data and never prints: the command layer (:mod:`isaaclab_mgpu.launch`) hands
a :class:`CheckResult` to :mod:`isaaclab_mgpu.report.checkenv`. ``check-env`` exits 0 without
failures and 1 (:data:`~isaaclab_mgpu.contract.errors.EXIT_FAILED_CHECK`) with any; ``train`` runs
the same fast checks (never ``--deep``) through :func:`check` and refuses to start on a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from isaaclab_mgpu.contract.errors import EXIT_FAILED_CHECK, EXIT_OK, EnvironmentProblem
from isaaclab_mgpu.launcher.diagnostics.facts import Facts, collect
from isaaclab_mgpu.launcher.diagnostics.rules import FAIL, WARN, Finding, evaluate, failures
from isaaclab_mgpu.launcher.spec import LaunchSpec

__all__ = [
    "CheckResult",
    "Facts",
    "Finding",
    "check",
    "collect",
    "evaluate",
    "failures",
    "preflight_error",
    "refusals",
    "train_warnings",
]


@dataclass(frozen=True)
class CheckResult:
    """The facts gathered and the findings judged from them."""

    facts: Facts
    """What was observed."""

    findings: tuple[Finding, ...]
    """What the rules made of it, ordered by area."""

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not any(f.status == FAIL for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 without failures, 1 with any."""
        return EXIT_OK if self.ok else EXIT_FAILED_CHECK


def check(spec: LaunchSpec, *, deep: bool = False, resolved: object | None = None) -> CheckResult:
    """Collect the facts for launching ``spec`` here and judge them."""
    facts = collect(spec, deep=deep, resolved=resolved)
    return CheckResult(facts, evaluate(facts))


#: Warnings ``train``'s preflight says (it refuses only on failures): the ones a run meets later.
TRAIN_WARNINGS = ("disk_space",)


def train_warnings(findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """The findings among ``findings`` that ``train`` shows as warning lines before it starts."""
    return tuple(f for f in findings if f.status == WARN and f.name in TRAIN_WARNINGS)


def refusals(spec: LaunchSpec, resolved: object) -> tuple[Finding, ...]:
    """The failing preflight checks beyond resolve's own warnings: what ``dry-run`` adds as warnings."""
    # launch/plan restates resolve's warnings, port:master a busy --master_port resolve reports too.
    warned = getattr(resolved, "warnings", ())
    port_warned = any("--master_port" in w for w in warned)
    return tuple(
        f
        for f in failures(check(spec, resolved=resolved).findings)
        if f.name != "plan" and not (f.name == "port:master" and port_warned)
    )


def preflight_error(failed: tuple[Finding, ...]) -> EnvironmentProblem:
    """The error ``train`` raises for failing preflight checks (the first one named, the rest counted)."""
    first = failed[0]
    more = f" ({len(failed) - 1} more above)" if len(failed) > 1 else ""
    return EnvironmentProblem(
        f"{first.line()}{more} [mgpu check-env shows every check; --no_preflight skips them]"
    )
