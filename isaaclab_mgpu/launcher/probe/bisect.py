"""Find which documented NCCL variable fixes a failing launch, and confirm it both ways.

The engine knows nothing about launches: it is handed ``run(env) -> status`` (one launch with
``env`` added, returning ``ok``, ``hang``, ``error`` or ``wrong-result``) and the candidates, and
it decides which runs to make:

1. the baseline, ``run({})``: if it passes, the failure did not reproduce and nothing is tried;
2. each candidate alone, ``run({VAR: VALUE})`` — never two at once, so a fix is attributable;
3. for each candidate that passed, ``run({})`` again: only when the failure returns without it is
   the fix *confirmed* (a flaky failure that merely went away is not a fix).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from isaaclab_mgpu.launcher.probe.results import OK
from isaaclab_mgpu.launcher.workarounds import Candidate

Run = Callable[[Mapping[str, str]], str]


@dataclass(frozen=True)
class Trial:
    """One candidate's outcome."""

    candidate: Candidate
    """The variable tried."""

    status: str
    """Status of the launch with the variable set."""

    without: str | None = None
    """Status of the launch rerun without it (only when it passed with it)."""

    @property
    def fixes(self) -> bool:
        """The launch passed with the variable."""
        return self.status == OK

    @property
    def confirmed(self) -> bool:
        """It passed with the variable and failed again without it."""
        return self.fixes and self.without is not None and self.without != OK


@dataclass(frozen=True)
class Search:
    """Everything the engine ran and concluded."""

    baseline: str
    """Status without any candidate."""

    trials: tuple[Trial, ...]
    """One per candidate tried, in order."""

    @property
    def reproduced(self) -> bool:
        """The baseline failed, so candidates were tried."""
        return self.baseline != OK

    @property
    def confirmed(self) -> tuple[Candidate, ...]:
        """Candidates confirmed both ways, in the order tried."""
        return tuple(t.candidate for t in self.trials if t.confirmed)


def find_workarounds(
    run: Run,
    candidates: Sequence[Candidate],
    *,
    on_trial: Callable[[Trial], None] | None = None,
) -> Search:
    """Try each candidate alone against a failing ``run`` and confirm every fix both ways."""
    baseline = run({})
    if baseline == OK:
        return Search(baseline, ())
    trials = []
    for candidate in candidates:
        status = run({candidate.name: candidate.value})
        trial = Trial(candidate, status, run({}) if status == OK else None)
        if on_trial is not None:
            on_trial(trial)
        trials.append(trial)
    return Search(baseline, tuple(trials))
