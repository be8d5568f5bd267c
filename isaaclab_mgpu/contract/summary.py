"""``summary.json``: what a run is and how far it got, one typed record for every writer and reader.

Rank 0 writes it (the built-in worker and the Isaac Lab path alike), the launcher settles it when
rank 0 could not (:func:`settle`), and ``mgpu runs`` reads it. The file is one JSON object whose
keys are :class:`Summary`'s field names; :meth:`Summary.to_json` writes strict JSON (a non-finite
number becomes ``null``) and :meth:`Summary.from_json` reads any object without trusting it: a
field of the wrong type or out of range reads as ``None`` ("unknown") and is named in
:attr:`Summary.invalid`, keys this version does not know are kept in :attr:`Summary.extra` and
written back unchanged. Files are replaced atomically (:mod:`.files`), so a reader never sees
half of one.

Pace: ``train_time_s``, ``s_per_iteration`` and ``env_steps_per_s`` describe the latest segment
(this launch, restart or resumed job), warm-up included; a segment's first iteration holds
just-in-time compilation (skrl JAX: seconds) and first allocations, so :class:`Steady` (``steady``,
from :func:`steady_pace`) gives the pace after it, the median of the later iterations, with the
warm-up's own seconds apart. A run continued in its folder (resume, restart, requeue) keeps one
:class:`Segment` per stretch in ``segments``, and ``whole`` (:class:`Whole`) sums them: train time
over all segments, steady seconds per iteration = steady time ÷ steady iterations (each segment's
warm-up left out), env-steps/s from those. :class:`Timing` (``timing``,
rank 0 at the end) gives each rank's busy and wait seconds per steady iteration and the
collectives' share; ``stragglers`` (:class:`Straggler`, written by node 0's ``mgpu train``) the
ranks named as holding the others back.

Statuses: ``running`` while rank 0 trains; ``finished``, ``interrupted`` or ``stopped`` (saved and
stopped on the requeue signal, to be continued) when rank 0 ends; the launcher settles a summary
still ``running`` once every process is gone: ``failed``, ``hung`` or ``interrupted``, and marks a
requeued one ``requeued``. One run keeps one summary across mgpu's restarts and SLURM's requeues:
``attempts`` and ``restarts`` record each launch, ``launcher_*`` who keeps the file (so ``mgpu runs``
never shows a run as running once its launcher is gone). The built-in worker and an Isaac Lab rank
0 write the same record; where Isaac Lab puts a continued run into a new folder, ``continues``
names the folder it continues (the chain).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files
from isaaclab_mgpu.contract.layout import SUMMARY

STATUSES = ("running", "finished", "interrupted", "failed", "hung", "stopped", "requeued")
#: Seconds between rank 0's refreshes of a running summary.
REFRESH_S = 30.0
#: Rank 0 refreshes the running summary when this many times its last refresh's cost has passed:
#: every iteration while the file is small (its cost is well under a millisecond), and never more
#: than 1/50 of the training time once a long run's reward list makes it slower. The built-in
#: worker and the Isaac Lab path alike.
REFRESH_BUDGET = 50
#: Iterations at the start of a run that count as warm-up (compilation, first allocations).
WARMUP_ITERATIONS = 1
#: Latest plausible epoch time (year 5138): later ``started_at`` values are corrupt.
_MAX_EPOCH = 1e11


@dataclass(frozen=True)
class Rates:
    """Environment steps per second of the whole run."""

    total: float | None = None
    """All ranks together."""

    per_rank: tuple[float, ...] = ()
    """Each rank's own rate, in rank order."""


@dataclass(frozen=True)
class Steady:
    """The run's pace once warmed up, and what the warm-up took."""

    warmup_iterations: int = 0
    """Iterations counted as warm-up (the first :data:`WARMUP_ITERATIONS`)."""

    warmup_s: float | None = None
    """Seconds those iterations took."""

    s_per_iteration: float | None = None
    """Median seconds per iteration after the warm-up (rank 0's clock); None without such an iteration."""

    env_steps_per_s: float | None = None
    """Environment steps per second of all ranks at that pace."""


def steady_pace(seconds: Sequence[float], steps_per_iteration: int) -> Steady:
    """:class:`Steady` from each iteration's seconds and the steps all ranks take per iteration."""
    warm = min(WARMUP_ITERATIONS, len(seconds))
    rest = [s for s in seconds[warm:] if s > 0]
    per_it = statistics.median(rest) if rest else None
    return Steady(
        warmup_iterations=warm,
        warmup_s=round(sum(seconds[:warm]), 4) if warm else None,
        s_per_iteration=round(per_it, 5) if per_it else None,
        env_steps_per_s=steps_per_iteration / per_it if per_it else None,
    )


@dataclass(frozen=True)
class Segment:
    """One stretch of training in a run's folder: a launch, a restart, a requeued job or a resume."""

    started_at: float
    """When this stretch began training (rank 0's clock, seconds since the epoch); names it."""

    start_iteration: int
    """Completed iterations when it began."""

    end_iteration: int
    """Completed iterations when it ended (or so far)."""

    train_time_s: float
    """Seconds it spent in the training loop."""

    steady_iterations: int = 0
    """Its iterations after its own warm-up (the first :data:`WARMUP_ITERATIONS`)."""

    steady_s: float = 0.0
    """Seconds those iterations took."""

    steady_env_steps: int = 0
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

    segments: int = 0
    """Stretches of training so far."""

    iterations_trained: int = 0
    """Iterations trained over all segments (those a restart repeated count again)."""

    train_time_s: float = 0.0
    """Seconds in the training loop, summed over the segments."""

    steady_s_per_iteration: float | None = None
    """Steady seconds ÷ steady iterations over all segments (each one's warm-up left out)."""

    steady_env_steps_per_s: float | None = None
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

    rank: int
    """Global rank."""

    iterations: int = 0
    """Iterations timed (a process's first, and checkpoint saves, are left out)."""

    busy_s: float | None = None
    """Mean seconds per iteration the rank worked: env steps, acting, the update's arithmetic."""

    wait_s: float | None = None
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

    collective_share: float | None = None
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

    rank: int
    """Global rank."""

    host: str | None = None
    """Its host."""

    device: str | None = None
    """``cpu`` or ``cuda:N`` (N: the local index), and the GPU's name where NVML knows it."""

    busy_s: float | None = None
    """Its busy seconds per iteration over the window."""

    others_busy_s: float | None = None
    """The median of the other ranks' busy seconds per iteration over the same window."""

    slower: float | None = None
    """``busy_s / others_busy_s``."""

    iterations: tuple[int, ...] = ()
    """The window: first and last iteration compared."""

    gpu: str | None = None
    """The GPU's state then, as NVML gave it (clocks, throttle reasons, temperature, PCIe link)."""


@dataclass(frozen=True)
class Summary:
    """One run's ``summary.json``."""

    status: str | None = None
    """One of :data:`STATUSES`."""

    started_at: float | None = None
    """When training started, seconds since the epoch."""

    world_size: int | None = None
    """Ranks in the run, all nodes together."""

    backend: str | None = None
    """The RL library: ``rsl_rl``, ``skrl`` or ``rl_games``."""

    framework: str | None = None
    """``torch`` or ``jax``."""

    device: str | None = None
    """``cpu`` or ``cuda``."""

    task: str | None = None
    """The task id (an embedded task or an Isaac Lab id)."""

    num_envs_per_rank: int | None = None
    """Vectorized environments on each rank."""

    seed: int | None = None
    """Rank 0's seed (rank ``r`` uses ``seed + r``)."""

    logger: str | None = None
    """Where curves go: ``tensorboard``, ``wandb`` or ``none``."""

    wandb_run_id: str | None = None
    """The Weights & Biases run rank 0 logs to (``--logger wandb``). A run that goes on in this folder
    (a restart, a requeue, ``--resume``) continues it: rank 0 reads it back and sets W&B's own
    ``WANDB_RUN_ID`` = this id and ``WANDB_RESUME=allow``."""

    start_iteration: int | None = None
    """Completed iterations when this run (or its resume) started."""

    end_iteration: int | None = None
    """Completed iterations so far."""

    iterations: int | None = None
    """Iterations this run trained: ``end_iteration - start_iteration``."""

    train_time_s: float | None = None
    """Seconds spent in the training loop."""

    s_per_iteration: float | None = None
    """Mean seconds per iteration (whole run, warm-up included; see ``steady``)."""

    env_steps_per_s: Rates | None = None
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

    checkpoint_iteration: int | None = None
    """Completed iterations at ``checkpoint`` (where a restart resumes). Written by a rank 0 whose
    checkpoints are not mgpu's ``model_<N>.pt`` with metadata (Isaac Lab's libraries name theirs)."""

    resumed_from: str | None = None
    """The checkpoint this run resumed from."""

    continues: str | None = None
    """The run folder this run continues in a folder of its own (a checkpoint of another run
    loaded into a new Isaac Lab folder, e.g. Isaac Lab's ``--checkpoint``): one link of the chain
    ``mgpu runs`` shows. None when it started afresh or goes on in its own folder."""

    run_dir: str | None = None
    """The run folder."""

    interrupted: bool | None = None
    """Rank 0 stopped early on a signal."""

    exit_status: int | None = None
    """The run's exit code."""

    settled_by: str | None = None
    """``launcher`` when the launcher, not rank 0, wrote the final status."""

    total_iterations: int | None = None
    """The run's ``--max_iterations``: the total it trains to, across restarts and resumes."""

    resumed_at: int | None = None
    """The iteration the latest attempt resumed from (None: it started the run)."""

    rank_exit_code: int | None = None
    """The failed rank's own code when it collided with one of mgpu's reserved codes (then
    ``exit_status`` is 1; see :func:`isaaclab_mgpu.contract.errors.passed_through`)."""

    attempt: int | None = None
    """The number of the attempt that rank 0 last ran in (0: the first launch)."""

    attempts: tuple[Mapping[str, Any], ...] = ()
    """Every attempt of this mgpu: number, outcome, exit code, failed rank and how, the iteration it
    started at, the iteration reached, the newest checkpoint, iterations lost, seconds."""

    restarts: tuple[Mapping[str, Any], ...] = ()
    """Each restart: the attempt that ended (as in ``attempts``) and ``resumed_from``, the
    iteration the next attempt resumed from."""

    segments: tuple[Segment, ...] = ()
    """Every stretch of training in this folder, in order (see :class:`Segment`)."""

    whole: Whole | None = None
    """The whole run's time and pace over ``segments``; ``train_time_s``, ``s_per_iteration``,
    ``env_steps_per_s`` and ``steady`` describe the latest segment alone."""

    slurm_job_id: str | None = None
    """The SLURM job that runs it: a requeued job continues the run that names its id."""

    launcher_pid: int | None = None
    """The ``mgpu train`` process that keeps this run."""

    launcher_host: str | None = None
    """Its host."""

    launcher_started: float | None = None
    """Its start time (seconds since the epoch), so a reused PID is not taken for it."""

    timing: Timing | None = None
    """Every rank's busy and wait seconds per steady iteration, the collectives' share (rank 0 writes
    it at the end from every rank's progress-report totals)."""

    stragglers: tuple[Straggler, ...] = ()
    """Ranks the supervisor named as stragglers during the run (node 0's mgpu writes it)."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys this version does not know, kept as read."""

    invalid: tuple[str, ...] = ()
    """Fields that were present but of the wrong type or out of range (read as None). Not written."""

    def replace(self, **changes: Any) -> Summary:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The summary as a strict-JSON-ready dict (non-finite numbers become None)."""
        out: dict[str, Any] = dict(self.extra)
        for f in dataclasses.fields(self):
            if f.name in ("extra", "invalid"):
                continue
            out[f.name] = _plain(getattr(self, f.name))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        """Read ``data`` without trusting it: bad fields become None and are listed in ``invalid``."""
        values: dict[str, Any] = {}
        invalid: list[str] = []
        for name, check in _FIELDS.items():
            if name not in data or data[name] is None:
                continue
            value = check(data[name])
            if value is _BAD:
                invalid.append(name)
            else:
                values[name] = value
        extra = {k: v for k, v in data.items() if k not in _FIELDS and k not in ("extra", "invalid")}
        return cls(**values, extra=extra, invalid=tuple(invalid))


def read(folder: str | Path) -> Summary | None:
    """The summary in run folder ``folder``, or None when it is missing or not a JSON object."""
    try:
        data = json.loads((Path(folder) / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Summary.from_json(data) if isinstance(data, dict) else None


def write(folder: str | Path, summary: Summary) -> Path:
    """Replace ``folder``'s summary.json with ``summary`` atomically; return its path."""
    path = Path(folder) / SUMMARY
    files.write_json(path, summary.to_json())
    return path


def update(folder: str | Path, **changes: Any) -> Summary:
    """Merge ``changes`` into the folder's summary (an empty one when there is none) and write it."""
    summary = (read(folder) or Summary()).replace(**changes)
    write(folder, summary)
    return summary


def settle(folder: str | Path, status: str, exit_status: int, identity: Mapping[str, Any]) -> bool:
    """Record how a run ended when its rank 0 could not: only a summary still ``running`` (or none)
    changes. ``identity`` (fields such as backend, task, world size) fills a summary that never was.
    Returns True when the file was written."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    found = read(folder)
    if found is not None and (found.status or "running") != "running":
        return False
    base = found or Summary(**identity)
    fill = {k: v for k, v in identity.items() if getattr(base, k) is None}
    summary = base.replace(
        **fill,
        run_dir=base.run_dir or str(folder),
        status=status,
        exit_status=exit_status,
        settled_by="launcher",
    )
    try:
        write(folder, summary)
    except OSError:
        return False
    return True


class _Bad:
    """Marks a value that failed its check."""


_BAD: Any = _Bad()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _int(lo: int | None = None) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo):
            return _BAD
        return v

    return check


def _float(lo: float | None = None, hi: float | None = None) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return _BAD
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return _BAD
        return float(v)

    return check


def _str(v: Any) -> Any:
    return v if isinstance(v, str) else _BAD


def _bool(v: Any) -> Any:
    return v if isinstance(v, bool) else _BAD


def _status(v: Any) -> Any:
    return v if v in STATUSES else _BAD


def _rewards(v: Any) -> Any:
    if not isinstance(v, list):
        return _BAD
    out = []
    for x in v:
        checked = None if x is None else _float()(x)
        out.append(None if checked is _BAD else checked)
    return tuple(out)


def _records(v: Any) -> Any:
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        return _BAD
    return tuple(v)


def _rates(v: Any) -> Any:
    # Older summaries wrote the total alone.
    if not isinstance(v, dict):
        total = _float(0)(v)
        return _BAD if total is _BAD else Rates(total=total)
    total = _float(0)(v.get("total")) if v.get("total") is not None else None
    per_rank = v.get("per_rank", [])
    ranks = [_float(0)(x) for x in per_rank] if isinstance(per_rank, list) else [_BAD]
    if total is _BAD or _BAD in ranks:
        return _BAD
    return Rates(total=total, per_rank=tuple(ranks))


def _steady(v: Any) -> Any:
    if not isinstance(v, dict):
        return _BAD
    floats = ("warmup_s", "s_per_iteration", "env_steps_per_s")
    checked = {k: _float(0)(v[k]) for k in floats if v.get(k) is not None}
    checked["warmup_iterations"] = _int(0)(v.get("warmup_iterations", 0))
    return _BAD if _BAD in checked.values() else Steady(**checked)


def _segments(v: Any) -> Any:
    if not isinstance(v, list):
        return _BAD
    out = []
    for x in v:
        if not isinstance(x, dict):
            return _BAD
        checked = {
            "started_at": _float(0, _MAX_EPOCH)(x.get("started_at")),
            "start_iteration": _int(0)(x.get("start_iteration")),
            "end_iteration": _int(0)(x.get("end_iteration")),
            "train_time_s": _float(0)(x.get("train_time_s")),
            "steady_iterations": _int(0)(x.get("steady_iterations", 0)),
            "steady_s": _float(0)(x.get("steady_s", 0.0)),
            "steady_env_steps": _int(0)(x.get("steady_env_steps", 0)),
        }
        if _BAD in checked.values():
            return _BAD
        out.append(Segment(**checked))
    return tuple(out)


def _whole(v: Any) -> Any:
    if not isinstance(v, dict):
        return _BAD
    checked = {
        "segments": _int(0)(v.get("segments", 0)),
        "iterations_trained": _int(0)(v.get("iterations_trained", 0)),
        "train_time_s": _float(0)(v.get("train_time_s", 0.0)),
    }
    for k in ("steady_s_per_iteration", "steady_env_steps_per_s"):
        if v.get(k) is not None:
            checked[k] = _float(0)(v[k])
    return _BAD if _BAD in checked.values() else Whole(**checked)


def _checksums(v: Any) -> Any:
    if not isinstance(v, dict):
        return _BAD
    lists = [v.get("start", []), v.get("end", [])]
    if not all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in lists):
        return _BAD
    return Checksums(start=tuple(lists[0]), end=tuple(lists[1]))


def _timing(v: Any) -> Any:
    if not isinstance(v, dict) or not isinstance(v.get("per_rank", []), list):
        return _BAD
    ranks = []
    for r in v.get("per_rank", []):
        if not isinstance(r, dict) or _int(0)(r.get("rank")) is _BAD:
            return _BAD
        floats = {k: _float(0)(r[k]) for k in ("busy_s", "wait_s") if r.get(k) is not None}
        count = _int(0)(r.get("iterations", 0))
        if _BAD in floats.values() or count is _BAD:
            return _BAD
        ranks.append(RankTiming(rank=r["rank"], iterations=count, **floats))
    share = _float(0, 1)(v["collective_share"]) if v.get("collective_share") is not None else None
    return _BAD if share is _BAD else Timing(per_rank=tuple(ranks), collective_share=share)


def _stragglers(v: Any) -> Any:
    if not isinstance(v, list):
        return _BAD
    out = []
    for r in v:
        if not isinstance(r, dict) or _int(0)(r.get("rank")) is _BAD:
            return _BAD
        texts = {k: r[k] for k in ("host", "device", "gpu") if isinstance(r.get(k), str)}
        floats = {k: _float(0)(r[k]) for k in ("busy_s", "others_busy_s", "slower") if r.get(k) is not None}
        window = r.get("iterations", [])
        if _BAD in floats.values() or not isinstance(window, list) or _BAD in [_int(0)(i) for i in window]:
            return _BAD
        out.append(Straggler(rank=r["rank"], iterations=tuple(window), **texts, **floats))
    return tuple(out)


_FIELDS: dict[str, Callable[[Any], Any]] = {
    "status": _status,
    "started_at": _float(0, _MAX_EPOCH),
    "world_size": _int(1),
    "backend": _str,
    "framework": _str,
    "device": _str,
    "task": _str,
    "num_envs_per_rank": _int(1),
    "seed": _int(),
    "logger": _str,
    "wandb_run_id": _str,
    "start_iteration": _int(0),
    "end_iteration": _int(0),
    "iterations": _int(0),
    "train_time_s": _float(0),
    "s_per_iteration": _float(0),
    "env_steps_per_s": _rates,
    "steady": _steady,
    "first_mean_reward": _float(),
    "last_mean_reward": _float(),
    "mean_rewards": _rewards,
    "checksums": _checksums,
    "checksums_equal": _bool,
    "checkpoint": _str,
    "checkpoint_iteration": _int(0),
    "resumed_from": _str,
    "continues": _str,
    "run_dir": _str,
    "interrupted": _bool,
    "exit_status": _int(),
    "settled_by": _str,
    "total_iterations": _int(0),
    "resumed_at": _int(0),
    "rank_exit_code": _int(),
    "attempt": _int(0),
    "attempts": _records,
    "restarts": _records,
    "segments": _segments,
    "whole": _whole,
    "slurm_job_id": _str,
    "launcher_pid": _int(1),
    "launcher_host": _str,
    "launcher_started": _float(0, _MAX_EPOCH),
    "timing": _timing,
    "stragglers": _stragglers,
}
assert set(_FIELDS) == {f.name for f in dataclasses.fields(Summary)} - {"extra", "invalid"}
