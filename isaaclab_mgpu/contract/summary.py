"""``summary.json``: what a run is and how far it got, one typed record for every writer and reader.

Node 0's ``mgpu train`` writes it as the fold of the run's ledger (:func:`.events.summary_of`;
rank 0's account of each attempt is merged in by :func:`absorb`), and ``mgpu runs`` reads it: one
JSON object of :class:`Summary`'s fields, read and written by :mod:`.records` (a bad field reads
as ``None``, named in :attr:`Summary.invalid`; unknown keys are kept in :attr:`Summary.extra`).

Pace: ``train_time_s``, ``s_per_iteration`` and ``env_steps_per_s`` describe the latest segment,
warm-up included; :class:`Steady` the pace after the warm-up. A run continued in its folder
(resume, restart, requeue) keeps one :class:`Segment` per stretch, and :class:`Whole` sums them.

Statuses: ``running`` while rank 0 trains; ``finished``, ``interrupted``, ``stopped`` (saved on the
requeue signal) or ``drifted`` (``--on_drift stop``) as rank 0 ends; ``failed``, ``hung`` or
``interrupted`` when the launcher settles a run rank 0 could not end, ``requeued`` when it requeued
the job. ``attempts`` and ``restarts`` record each launch, ``launcher_*`` who keeps the run (so
``mgpu runs`` never shows a run as running once its launcher is gone); ``continues`` names the
folder a run continues in a new one (Isaac Lab's ``--checkpoint``: the chain).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from isaaclab_mgpu.contract import records
from isaaclab_mgpu.contract.files import read_json
from isaaclab_mgpu.contract.layout import SUMMARY
from isaaclab_mgpu.contract.records import Count, NonNegative, Older, OneOf, Range

STATUSES = ("running", "finished", "interrupted", "failed", "hung", "stopped", "requeued", "drifted")
#: Rank 0 refreshes its account when this many times its last refresh's cost has passed: every
#: iteration while it is small, never more than 1/50 of the training time once it is not.
REFRESH_BUDGET = 50
#: Iterations at the start of a run that count as warm-up (compilation, first allocations).
WARMUP_ITERATIONS = 1
#: Latest plausible epoch time (year 5138): later ``started_at`` values are corrupt.
_MAX_EPOCH = 1e11
#: NonNegative since the epoch, up to :data:`_MAX_EPOCH`.
Epoch = Annotated[float, Range(0, _MAX_EPOCH)]
#: A share, 0 to 1.
Share = Annotated[float, Range(0, 1)]


def _bare_total(value: Any) -> Any:
    """Older summaries wrote the total rate alone."""
    return {"total": value} if isinstance(value, int | float) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class Rates:
    """Environment steps per second of the whole run."""

    total: NonNegative | None = None
    """All ranks together."""

    per_rank: tuple[NonNegative, ...] = ()
    """Each rank's own rate, in rank order."""


@dataclass(frozen=True)
class Steady:
    """The run's pace once warmed up, and what the warm-up took."""

    warmup_iterations: Count = 0
    """Iterations counted as warm-up (the first :data:`WARMUP_ITERATIONS`)."""

    warmup_s: NonNegative | None = None
    """Seconds those iterations took."""

    s_per_iteration: NonNegative | None = None
    """Median seconds per iteration after the warm-up (rank 0's clock)."""

    env_steps_per_s: NonNegative | None = None
    """Environment steps per second of all ranks at that pace."""

    env_steps_per_s_iqr: tuple[NonNegative, ...] = ()
    """The lower and upper quartiles of those iterations' env-steps/s (the spread; two or more)."""


def steady_pace(seconds: Sequence[float], steps_per_iteration: int) -> Steady:
    """:class:`Steady` from each iteration's seconds and the steps all ranks take per iteration."""
    warm = min(WARMUP_ITERATIONS, len(seconds))
    rest = [s for s in seconds[warm:] if s > 0]
    per_it = statistics.median(rest) if rest else None
    rates = [steps_per_iteration / s for s in rest]
    q = statistics.quantiles(rates, n=4, method="inclusive") if len(rates) > 1 else ()
    return Steady(
        warmup_iterations=warm,
        warmup_s=round(sum(seconds[:warm]), 4) if warm else None,
        s_per_iteration=round(per_it, 5) if per_it else None,
        env_steps_per_s=steps_per_iteration / per_it if per_it else None,
        env_steps_per_s_iqr=(round(q[0], 1), round(q[2], 1)) if q else (),
    )


@dataclass(frozen=True)
class Segment:
    """One stretch of training in a run's folder: a launch, a restart, a requeued job or a resume."""

    started_at: Epoch
    """When this stretch began training (rank 0's clock, seconds since the epoch); names it."""

    start_iteration: Count
    """Completed iterations when it began."""

    end_iteration: Count
    """Completed iterations when it ended (or so far)."""

    train_time_s: NonNegative
    """Seconds it spent in the training loop."""

    steady_iterations: Count = 0
    """Its iterations after its own warm-up (the first :data:`WARMUP_ITERATIONS`)."""

    steady_s: NonNegative = 0.0
    """Seconds those iterations took."""

    steady_env_steps: Count = 0
    """Environment steps all ranks took in those iterations."""


def segment(
    started_at: float,
    start: int,
    end: int,
    train_time_s: float,
    seconds: Sequence[float],
    steps_per_iteration: int,
) -> Segment:
    """One stretch's :class:`Segment` from each of its iterations' seconds (its warm-up left out)."""
    steady = [s for s in seconds[WARMUP_ITERATIONS:] if s > 0]
    return Segment(
        started_at=started_at,
        start_iteration=start,
        end_iteration=end,
        train_time_s=round(train_time_s, 4),
        steady_iterations=len(steady),
        steady_s=round(sum(steady), 4),
        steady_env_steps=len(steady) * steps_per_iteration,
    )


@dataclass(frozen=True)
class Whole:
    """The whole run's figures, over every :class:`Segment` (the latest attempt's are beside them)."""

    segments: Count = 0
    """Stretches of training so far."""

    iterations_trained: Count = 0
    """Iterations trained over all segments (those a restart repeated count again)."""

    train_time_s: NonNegative = 0.0
    """Seconds in the training loop, summed over the segments."""

    steady_s_per_iteration: NonNegative | None = None
    """Steady seconds ÷ steady iterations over all segments (each one's warm-up left out)."""

    steady_env_steps_per_s: NonNegative | None = None
    """Steady environment steps ÷ steady seconds over all segments, all ranks together."""


def whole(segments: Sequence[Segment]) -> Whole:
    """:class:`Whole` from a run's segments."""
    its = sum(s.steady_iterations for s in segments)
    secs = sum(s.steady_s for s in segments)
    return Whole(
        segments=len(segments),
        iterations_trained=sum(max(s.end_iteration - s.start_iteration, 0) for s in segments),
        train_time_s=round(sum(s.train_time_s for s in segments), 4),
        steady_s_per_iteration=round(secs / its, 5) if its and secs > 0 else None,
        steady_env_steps_per_s=sum(s.steady_env_steps for s in segments) / secs if its and secs > 0 else None,
    )


def with_segment(summary: Summary, current: Segment) -> Summary:
    """``summary`` with ``current`` recorded (replacing its earlier record) and the whole-run figures."""
    kept = tuple(s for s in summary.segments if s.started_at != current.started_at)
    segments = (*kept, current)
    return summary.replace(segments=segments, whole=whole(segments))


@dataclass(frozen=True)
class Checksums:
    """Every rank's parameter checksum, in rank order."""

    start: tuple[str, ...] = ()
    """After the initial broadcast (equal on every rank when the ranks start alike)."""

    end: tuple[str, ...] = ()
    """After the last iteration (equal when the gradient reduction kept the ranks in step)."""


@dataclass(frozen=True)
class RankTiming:
    """Where one rank's steady iterations went (its progress reports' busy/wait split)."""

    rank: Count
    """Global rank."""

    iterations: Count = 0
    """Iterations timed (a process's first, and checkpoint saves, are left out)."""

    busy_s: NonNegative | None = None
    """Mean seconds per iteration the rank worked: env steps, acting, the update's arithmetic."""

    wait_s: NonNegative | None = None
    """Mean seconds per iteration it waited in collectives (for the slowest rank, and the transfer)."""

    @property
    def collective_share(self) -> float | None:
        """The collectives' share of its iteration (0 to 1)."""
        total = (self.busy_s or 0.0) + (self.wait_s or 0.0)
        return (self.wait_s or 0.0) / total if total > 0 and self.wait_s is not None else None


@dataclass(frozen=True)
class Timing:
    """Every rank's busy and wait time per steady iteration, and the collectives' share."""

    per_rank: tuple[RankTiming, ...] = ()
    """Each rank, in rank order."""

    collective_share: Share | None = None
    """The mean over the ranks of the collectives' share of an iteration (0 to 1)."""


def timing_of(rows: Sequence[Sequence[float]]) -> Timing | None:
    """:class:`Timing` from each rank's ``(timed iterations, busy s, wait s)`` totals, in rank order."""
    ranks = []
    for rank, (timed, busy, wait) in enumerate(rows):
        n = int(timed)
        per_busy, per_wait = (round(float(busy) / n, 6), round(float(wait) / n, 6)) if n > 0 else (None, None)
        ranks.append(RankTiming(rank=rank, iterations=n, busy_s=per_busy, wait_s=per_wait))
    if not ranks or all(r.iterations == 0 for r in ranks):
        return None
    shares = [r.collective_share for r in ranks if r.collective_share is not None]
    return Timing(
        per_rank=tuple(ranks), collective_share=round(statistics.fmean(shares), 4) if shares else None
    )


@dataclass(frozen=True)
class Straggler:
    """A rank named as the straggler during the run (``mgpu train``'s supervisor)."""

    rank: Count
    """Global rank."""

    host: str | None = None
    """Its host."""

    device: str | None = None
    """``cpu`` or ``cuda:N`` (N: the local index), and the GPU's name where NVML knows it."""

    busy_s: NonNegative | None = None
    """Its busy seconds per iteration over the window."""

    others_busy_s: NonNegative | None = None
    """The median of the other ranks' busy seconds per iteration over the same window."""

    slower: NonNegative | None = None
    """``busy_s / others_busy_s``."""

    iterations: tuple[Count, ...] = ()
    """The window: first and last iteration compared."""

    gpu: str | None = None
    """The GPU's state then, as NVML gave it (clocks, throttle reasons, temperature, PCIe link)."""


@dataclass(frozen=True)
class Drift:
    """The first divergence between the ranks, found by the worker's periodic check (``--drift_interval``)."""

    rank: Count
    """The rank whose state differs (from the majority of ranks; on a tie, from rank 0's)."""

    component: str
    """What differs first, in the order :data:`DRIFT_COMPONENTS` lists them."""

    since_iteration: Count
    """The last check that found every rank equal (the run's start when none did)."""

    found_at: Count
    """The iteration whose check found it."""

    components: tuple[str, ...] = ()
    """Every component that differed at that check."""

    def describe(self) -> str:
        """One phrase: ``rank 1's policy parameters differ (equal at iteration 0, different at 10)``."""
        what = DRIFT_COMPONENTS.get(self.component, self.component)
        others = [c for c in self.components if c != self.component]
        also = f" (and its {', '.join(DRIFT_COMPONENTS.get(c, c) for c in others)})" if others else ""
        return (
            f"rank {self.rank}'s {what}{also} differ from the other ranks': equal at iteration "
            f"{self.since_iteration}, different at iteration {self.found_at}"
        )


#: What the drift check hashes on every rank, in the order a divergence is named.
DRIFT_COMPONENTS = {
    "policy": "policy and value parameters",
    "optimizer": "optimizer state",
    "normalizer": "normalizer statistics",
}


@dataclass(frozen=True)
class Summary:
    """One run's ``summary.json``."""

    status: Annotated[str, OneOf(STATUSES)] | None = None
    """One of :data:`STATUSES`."""

    started_at: Epoch | None = None
    """When training started, seconds since the epoch."""

    world_size: Annotated[int, Range(1)] | None = None
    """Ranks in the run, all nodes together."""

    backend: str | None = None
    """The RL library: ``rsl_rl``, ``skrl`` or ``rl_games``."""

    framework: str | None = None
    """``torch`` or ``jax``."""

    device: str | None = None
    """``cpu`` or ``cuda``."""

    task: str | None = None
    """The task id (an embedded task or an Isaac Lab id)."""

    num_envs_per_rank: Annotated[int, Range(1)] | None = None
    """Vectorized environments on each rank."""

    seed: int | None = None
    """Rank 0's seed (rank ``r`` uses ``seed + r``)."""

    logger: str | None = None
    """Where curves go: ``tensorboard``, ``wandb`` or ``none``."""

    wandb_run_id: str | None = None
    """The Weights & Biases run rank 0 logs to (``--logger wandb``); a run going on here continues it."""

    start_iteration: Count | None = None
    """Completed iterations when this run (or its resume) started."""

    end_iteration: Count | None = None
    """Completed iterations so far."""

    iterations: Count | None = None
    """Iterations this run trained: ``end_iteration - start_iteration``."""

    train_time_s: NonNegative | None = None
    """Seconds spent in the training loop."""

    s_per_iteration: NonNegative | None = None
    """Mean seconds per iteration (whole run, warm-up included; see ``steady``)."""

    env_steps_per_s: Annotated[Rates, Older(_bare_total)] | None = None
    """Environment steps per second (whole run, warm-up included)."""

    steady: Steady | None = None
    """The pace after the warm-up, and the warm-up apart."""

    first_mean_reward: float | None = None
    """Mean episode reward of the first iteration that completed an episode."""

    last_mean_reward: float | None = None
    """Mean episode reward of the last such iteration."""

    mean_rewards: tuple[float | None, ...] = ()
    """Mean episode reward per iteration (None where no episode ended)."""

    checksums: Checksums | None = None
    """Parameter checksums of every rank."""

    checksums_equal: bool | None = None
    """Every rank held the same parameters at the start and at the end."""

    checkpoint: str | None = None
    """The last checkpoint written."""

    checkpoint_iteration: Count | None = None
    """Completed iterations at ``checkpoint``, where its name does not say (Isaac Lab's libraries)."""

    resumed_from: str | None = None
    """The checkpoint this run resumed from."""

    continues: str | None = None
    """The run folder this run continues in a new folder (Isaac Lab's ``--checkpoint``): the chain."""

    run_dir: str | None = None
    """The run folder."""

    interrupted: bool | None = None
    """Rank 0 stopped early on a signal."""

    exit_status: int | None = None
    """The run's exit code."""

    settled_by: str | None = None
    """``launcher`` when the launcher, not rank 0, wrote the final status."""

    total_iterations: Count | None = None
    """The run's ``--max_iterations``: the total it trains to, across restarts and resumes."""

    resumed_at: Count | None = None
    """The iteration the latest attempt resumed from (None: it started the run)."""

    rank_exit_code: int | None = None
    """The failed rank's own code where it was reserved (:func:`.errors.passed_through`)."""

    attempt: Count | None = None
    """The number of the attempt that rank 0 last ran in (0: the first launch)."""

    attempts: tuple[Mapping[str, Any], ...] = ()
    """Every attempt of this mgpu: outcome, exit code, failed rank, iterations, checkpoint, seconds."""

    restarts: tuple[Mapping[str, Any], ...] = ()
    """Each restart: the attempt that ended (as in ``attempts``) and ``resumed_from``."""

    segments: tuple[Segment, ...] = ()
    """Every stretch of training in this folder, in order (see :class:`Segment`)."""

    whole: Whole | None = None
    """The whole run's time and pace over ``segments`` (the fields above: the latest segment)."""

    slurm_job_id: str | None = None
    """The SLURM job that runs it: a requeued job continues the run that names its id."""

    launcher_pid: Annotated[int, Range(1)] | None = None
    """The ``mgpu train`` process that keeps this run."""

    launcher_host: str | None = None
    """Its host."""

    launcher_started: Epoch | None = None
    """Its start time (seconds since the epoch), so a reused PID is not taken for it."""

    timing: Timing | None = None
    """Every rank's busy and wait seconds per steady iteration, the collectives' share."""

    stragglers: tuple[Straggler, ...] = ()
    """Ranks the supervisor named as stragglers during the run (node 0's mgpu writes it)."""

    drift: Drift | None = None
    """The first divergence between the ranks' states (node 0's mgpu writes it); None: none found."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys this version does not know, kept as read."""

    invalid: tuple[str, ...] = ()
    """Fields that were present but of the wrong type or out of range (read as None). Not written."""

    @property
    def env_steps_rate(self) -> float | None:
        """Steady env-steps/s of all ranks, else the mean (``env_steps_per_s.total``), else None."""
        steady = self.steady.env_steps_per_s if self.steady is not None else None
        return steady or (self.env_steps_per_s.total if self.env_steps_per_s is not None else None)

    def replace(self, **changes: Any) -> Summary:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The summary as a strict-JSON-ready dict (non-finite numbers become None)."""
        return records.plain(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        """Read ``data`` without trusting it: bad fields become None and are listed in ``invalid``."""
        summary = records.read(cls, data).record
        assert summary is not None  # every field has a default
        return summary


def read(folder: str | Path) -> Summary | None:
    """The summary in run folder ``folder``, or None when it is missing or not a JSON object."""
    data = read_json(Path(folder) / SUMMARY, encoding="utf-8")
    return Summary.from_json(data) if isinstance(data, dict) else None


def absorb(found: Summary, account: Summary, given: Iterable[str], rewards_from: int) -> Summary:
    """``found`` with rank 0's ``account`` of one attempt (its fields ``given``) merged in."""
    # The account's start_iteration is the attempt's start, its mean_rewards those after
    # rewards_from (an earlier attempt's up to there are kept); iterations count from the run's start.
    start = account.start_iteration or 0
    known = {k: getattr(account, k) for k in given if k not in _MERGED and hasattr(account, k)}
    s = found.replace(**known)
    if not account.mean_rewards and (account.end_iteration or 0) <= start < (found.end_iteration or 0):
        # An attempt's first word, before it knows where it resumes (an Isaac Lab task's rank 0
        # reports its folder first): it trained nothing, so the run's iterations and rewards stand.
        return s
    first = (
        found.start_iteration
        if found.start_iteration is not None and found.start_iteration <= start
        else start
    )
    kept = max(rewards_from - first, 0)
    # Iterations no account reached (a launch lost before rank 0 gave one) keep their place as None.
    earlier = (*found.mean_rewards[:kept], *(None,) * (kept - len(found.mean_rewards)))
    rewards = (*earlier, *account.mean_rewards)
    measured = [r for r in rewards if r is not None]
    end = account.end_iteration if account.end_iteration is not None else found.end_iteration
    for current in account.segments:
        s = with_segment(s, current)
    return s.replace(
        start_iteration=first,
        resumed_at=start if start > first else found.resumed_at,
        end_iteration=end,
        iterations=end - first if end is not None else None,
        mean_rewards=rewards,
        first_mean_reward=measured[0] if measured else None,
        last_mean_reward=measured[-1] if measured else None,
    )


#: An account's fields :func:`absorb` merges rather than replaces.
_MERGED = ("start_iteration", "end_iteration", "iterations", "mean_rewards", "segments", "whole")
