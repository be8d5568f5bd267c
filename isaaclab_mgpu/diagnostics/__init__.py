"""``mgpu check-env`` and the ``train`` preflight: say what will break a launch before it happens.

Three parts with one direction of flow:

- :mod:`.facts` — :func:`~.facts.collect` gathers facts (package metadata, NVML, limits,
  environment, the planned launch) into frozen dataclasses; the only impure part.
- :mod:`.deep` — facts that need torch or jax, from subprocesses with a deadline (``--deep``).
- :mod:`.rules` — pure functions from facts to :class:`~.rules.Finding` (pass / warn / fail, the
  observed value, a one-line fix).

Printing is :mod:`isaaclab_mgpu.report.checkenv`'s job. ``check-env`` exits 0 without failures
and 1 (:data:`~isaaclab_mgpu.errors.EXIT_FAILED_CHECK`) with any; ``train`` runs the same fast
checks (never ``--deep``) through :func:`preflight` and refuses to start on a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import EXIT_FAILED_CHECK, EXIT_OK, EnvironmentProblem
from ..spec import LaunchSpec
from .facts import Facts, collect
from .rules import FAIL, Finding, evaluate, failures

__all__ = ["CheckResult", "Facts", "Finding", "check", "check_env", "collect", "evaluate", "preflight"]


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


def check(
    spec: LaunchSpec,
    *,
    deep: bool = False,
    environ: Mapping[str, str] | None = None,
    resolved: object | None = None,
) -> CheckResult:
    """Collect the facts for launching ``spec`` here and judge them."""
    facts = collect(spec, environ, deep=deep, resolved=resolved)
    return CheckResult(facts, evaluate(facts))


def check_env(spec: LaunchSpec, *, as_json: bool, deep: bool) -> int:
    """Run ``check-env``: check, print the table (or JSON) and the command, return the exit code."""
    from ..report import checkenv as report
    from ..resolve import probe_machine, selected_devices

    if spec.gpu_ids is not None and spec.device == "cuda":
        # Ids naming no GPU here are bad input (exit 2, as for train), not a failed check.
        selected_devices(spec, probe_machine(gpu_uuids=True))
    result = check(spec, deep=deep)
    if as_json:
        report.json_report(result)
    else:
        report.table(result)
    return result.exit_code


def preflight(spec: LaunchSpec, resolved: object) -> None:
    """The fast checks before ``train`` spawns anything; raise on a failing one."""
    from ..report import checkenv as report

    result = check(spec, resolved=resolved)
    failed = failures(result.findings)
    if not failed:
        return
    report.preflight_failures(failed[1:])
    first = failed[0]
    more = f" ({len(failed) - 1} more above)" if len(failed) > 1 else ""
    raise EnvironmentProblem(
        f"preflight {first.area}/{first.name}: {first.observed}; fix: {first.fix}{more} "
        "[mgpu check-env shows every check; --no_preflight skips them]"
    )
