"""mgpu's own restarts and requeue: one :class:`~.supervise.Supervisor` per attempt, one run throughout.

torchrun's ``--max_restarts`` relaunches the same command line, so its workers start again from
iteration 0; mgpu's JAX launcher has no restarts at all. So ``mgpu train`` gives the launcher no
restarts and runs the attempts itself (:func:`run_attempts`), the same way for torchrun and
jaxrun:

- Every attempt runs the same command with :mod:`isaaclab_mgpu.contract.resume`'s variables:
  the run folder (created once by node 0's launcher; restarts and requeues reuse it), the attempt
  number, what rank 0 continues from (attempt 0: ``--resume``'s choice; later attempts: the run
  folder's newest checkpoint) and the file that asks for a checkpoint.
- An attempt ends in one of :data:`AttemptEnd`: ``failed`` (a rank failed) and ``hung`` (the stall
  watch's verdict) restart while restarts are left, except a failure :mod:`.verdicts` judges no
  restart can mend; ``interrupted`` (Ctrl-C, SIGTERM, SIGHUP) is never restarted nor requeued;
  ``stopped``: the ranks saved a checkpoint and stopped on the requeue signal.
- Each attempt's launcher logs into its own folder (:func:`~isaaclab_mgpu.launcher.build.for_attempt`),
  with its own error file there.
- Before a restart the loop asks ``reshape`` (``--min_nodes``, :mod:`.shrink`) whether a node was
  lost: then the restart and every later attempt run the smaller world's command (:class:`Reshape`),
  and a node that became node 0 takes over the run folder and its record.
- Each attempt is recorded (:class:`Attempt`) and its life goes into the run's ledger (:mod:`.ledger`).
- An Isaac Lab run's folder is named by its rank 0 (:attr:`RunPlace.named_by_rank`), which reports it
  (:func:`isaaclab_mgpu.contract.resume.report_run_dir`); from the end of the attempt that named it
  the loop treats the folder as its own. Its checkpoints are the library's, so the newest one's
  iteration is what rank 0's account gave (``checkpoint_iteration``).

The requeue signal (``--requeue_signal``) and the stop signals are only recorded, by one
:class:`~.supervise.shutdown.Interrupts` for all the attempts; each attempt's supervisor acts on the
stop signals, so one between two attempts ends the run all the same. What the requeue signal does
(the checkpoint request, :data:`STOP_WINDOW`, the launcher started with it ignored): docs/supervision.md,
"Restarts and the requeue signal".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from isaaclab_mgpu.contract import elastic, events, resume
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import (
    ATTEMPT,
    CHECKPOINT_REQUEST,
    ERROR_FILE,
    RESUME,
    RUN_DIR,
    RUN_DIR_REPORT,
)
from isaaclab_mgpu.launcher import verdicts
from isaaclab_mgpu.launcher.build import Command, for_attempt
from isaaclab_mgpu.launcher.ledger import RunLedger, newest_checkpoint
from isaaclab_mgpu.launcher.notes import Note, Tell
from isaaclab_mgpu.launcher.supervise import RunResult, SuperviseOptions, Supervisor
from isaaclab_mgpu.launcher.supervise.shutdown import Interrupts, ignored

#: Seconds the ranks get to reach an iteration boundary, save and stop after the requeue signal
#: (SLURM's warning comes ``--signal=USR1@<seconds>`` before the time limit: give it 90 or more).
STOP_WINDOW = 60.0
_POLL = 0.25
#: How an attempt ended.
AttemptEnd = Literal["finished", "failed", "hung", "interrupted", "stopped", "drifted"]


@dataclass(frozen=True)
class Attempt:
    """One launch of the run's command, as it ended."""

    number: int
    """0 for the first launch, 1 for the first restart, ..."""

    outcome: AttemptEnd
    """How it ended (:data:`AttemptEnd`)."""

    exit_code: int
    """The attempt's code as the supervisor judged it (a rank's own code, 4, 124, 130 or 0)."""

    rank: int | None = None
    """The failed rank (the stalled one for ``hung``), when known."""

    how: str | None = None
    """How it failed: ``exit code N``, ``signal SIGKILL``, ``stalled in update``."""

    host: str | None = None
    """Where the failed rank ran."""

    started_at: int | None = None
    """The iteration this attempt resumed from (0: from scratch); None when unknown (node > 0)."""

    reached: int | None = None
    """Iterations the run had completed when the attempt ended."""

    checkpoint: int | None = None
    """The newest checkpoint's iteration when the attempt ended."""

    seconds: float = 0.0
    """Wall time of the attempt."""

    logs: str | None = None
    """The attempt's folder of per-rank log folders (``rank_<global rank>/``); None when none was made."""

    verdict: verdicts.Verdict | None = None
    """A failed attempt's class, reason and whether a restart can mend it; None for other outcomes."""

    @property
    def lost(self) -> int | None:
        """Iterations done after the newest checkpoint: work a restart repeats."""
        if self.reached is None:
            return None
        return max(0, self.reached - (self.checkpoint or 0))

    def describe(self) -> str:
        """One phrase: ``attempt 0: rank 1 failed with signal SIGKILL after iteration 4``."""
        where = f" on {self.host}" if self.host else ""
        who = f"rank {self.rank}{where}" if self.rank is not None else "a rank"
        at = f" at iteration {self.reached}" if self.reached is not None else ""
        if self.outcome in ("failed", "hung"):
            at = events.after_iteration(self.reached)
        if self.outcome == "hung":
            what = f"{who} stalled{f' ({self.how})' if self.how else ''}"
        elif self.outcome == "failed":
            what = f"{who} failed with {self.how or f'exit code {self.exit_code}'}"
        else:
            what = self.outcome
        return f"attempt {self.number}: {what}{at}"

    def as_json(self) -> dict[str, Any]:
        """The attempt as summary.json records it."""
        return {**dataclasses.asdict(self), "lost": self.lost}


@dataclass(frozen=True)
class RestartOptions:
    """How many restarts, and what the requeue signal does."""

    max_restarts: int = 0
    """Restarts after a failed or hung attempt (``--max_restarts``)."""

    requeue_signal: int = int(signal.SIGUSR1)
    """The signal that asks for a checkpoint and a clean stop (``--requeue_signal``)."""

    checkpoints: bool = True
    """The program writes checkpoints mgpu knows; False: a ``--script``, restarted from its beginning."""


@dataclass(frozen=True)
class RunPlace:
    """Where the run lives and what its first attempt continues from (node 0; None elsewhere)."""

    run_dir: Path | None = None
    """The run folder, created by node 0's launcher."""

    resume: str | None = None
    """What the first attempt's rank 0 continues from (a checkpoint or a run folder)."""

    named_by_rank: bool = False
    """The ranks name the run folder (Isaac Lab's): :attr:`run_dir` is learned from rank 0's report."""


@dataclass(frozen=True)
class Outcome:
    """How the run's attempts ended."""

    attempts: tuple[Attempt, ...]
    """Every attempt, in order."""

    result: RunResult
    """The last attempt's supervisor result."""

    run_dir: Path | None = None
    """The run folder (node 0 of a built-in worker run), else None."""

    @property
    def last(self) -> Attempt:
        """The last attempt."""
        return self.attempts[-1]

    @property
    def restarts(self) -> int:
        """How many restarts were used."""
        return len(self.attempts) - 1

    @property
    def failures(self) -> tuple[Attempt, ...]:
        """The attempts that failed or hung, in order."""
        return tuple(a for a in self.attempts if a.outcome in ("failed", "hung"))


@dataclass(frozen=True)
class Reshape:
    """The world the next attempt runs in after a shrink (``--min_nodes``, :mod:`.shrink`)."""

    cmd: Command
    """The command on the smaller world."""

    place: RunPlace
    """Where the run lives (a node that became node 0 learnt the folder from node 0's reports)."""

    options: SuperviseOptions
    """The supervision options on the smaller world (one node left: no peers to watch)."""

    record: dict[str, object]
    """The fields of the ledger's ``shrink`` event, written after the attempt's fault."""


#: What the loop asks before a restart: the smaller world when a node was lost, else None.
Reshaper = Callable[[Attempt, RunResult, RunPlace, SuperviseOptions], Reshape | None]


@dataclass(frozen=True)
class Restarting(Note):
    """Attempt ``ended`` failed or hung; restart ``number`` of ``max_restarts`` starts."""

    ended: Attempt
    number: int
    max_restarts: int
    from_checkpoint: bool


@dataclass(frozen=True)
class CheckpointRequested(Note):
    """The requeue signal arrived: the ranks save and stop, or are stopped after ``window`` seconds."""

    signal_name: str
    window: float


def attempt_env(
    cmd: Command, place: RunPlace, number: int, request_file: str, report_file: str
) -> dict[str, str]:
    """The variables attempt ``number`` adds to ``cmd``'s environment, its launcher's error file included."""
    env = {ATTEMPT: str(number), CHECKPOINT_REQUEST: request_file}
    # The attempt folder is named by what the run trains, not by the clock: two runs of one task
    # share it, so the launcher's own file is named by this mgpu (torchrun's folders are unique).
    owner = f"{socket.gethostname()}.{os.getpid()}"
    env[ERROR_FILE] = str(elastic.launcher_error_file(cmd.log_dir, owner))
    if place.named_by_rank:
        env[RUN_DIR_REPORT] = report_file
    if place.run_dir is not None:
        env[RUN_DIR] = str(place.run_dir)
    source = place.resume if number == 0 else (str(place.run_dir) if place.run_dir is not None else None)
    if source:
        env[RESUME] = source
    return env


def run_attempts(
    cmd: Command,
    place: RunPlace,
    restart: RestartOptions,
    options: SuperviseOptions,
    notes: Tell,
    ledger: RunLedger,
    reshape: Reshaper | None = None,
) -> Outcome:
    """Run ``cmd`` until it finishes, is stopped, or has failed ``max_restarts + 1`` times."""
    requests = Interrupts(checkpoint_signal=restart.requeue_signal)  # what the signal handlers record
    request_dir = tempfile.mkdtemp(prefix="mgpu-requests-")
    request_file = str(Path(request_dir) / "checkpoint")
    report_file = str(Path(request_dir) / "run_dir")
    attempts: list[Attempt] = []
    try:
        with requests.installed() as installed:
            number = 0
            while True:
                this = for_attempt(cmd, number)
                env = {**cmd.env, **attempt_env(this, place, number, request_file, report_file)}
                started = _checkpoint_now(place)
                kills = verdicts.oom_kills()
                t0 = time.monotonic()
                this = dataclasses.replace(this, env=env)
                watch = ledger.watcher(number, this, started, place.run_dir, place.named_by_rank)
                result, sup = _one(this, options, notes, requests, restart, installed, request_file, watch)
                named = place.named_by_rank and place.run_dir is None
                if named:  # the watcher reads the same report: the ledger is open in that folder
                    place = dataclasses.replace(place, run_dir=resume.reported_run_dir(report_file))
                watch(sup, False, final=True)  # the last progress, with the folder an Isaac Lab run named
                if named:  # where rank 0's account (folded just now) says it started
                    started = _started_here(place, number) if place.run_dir is not None else None
                attempt = _judge(number, result, place, started, time.monotonic() - t0, requests)
                attempt = _classified(attempt, result, attempts[-1] if attempts else None, kills)
                mendable = attempt.verdict is None or attempt.verdict.restart
                again = attempt.outcome in ("failed", "hung") and mendable
                asked = requests.stop_asked or requests.checkpoint_at is not None
                again = again and number < restart.max_restarts and not asked
                new = reshape(attempt, result, place, options) if again and reshape is not None else None
                if new is not None:  # every later attempt runs on the smaller world
                    if place.run_dir is None and new.place.run_dir is not None:
                        # This node became node 0: the run's figures are in the folder it took over.
                        attempt = dataclasses.replace(attempt, reached=_reached(new.place),
                                                      checkpoint=_checkpoint_now(new.place))  # fmt: skip
                    cmd, place, options = new.cmd, new.place, new.options
                attempts.append(attempt)
                _tell(ledger, attempt, result)
                if new is not None:
                    ledger.write(events.Shrink, **new.record)
                if place.run_dir is not None:  # once the run folder is known (node 0)
                    ledger.record_attempts(tuple(attempts), again)
                if not again:
                    return Outcome(tuple(attempts), result, place.run_dir)
                number += 1
                ledger.restart(number, from_iteration=attempt.checkpoint, lost=attempt.lost,
                               left=restart.max_restarts - number)  # fmt: skip
                notes(Restarting(attempt, number, restart.max_restarts, restart.checkpoints))
    finally:
        shutil.rmtree(request_dir, ignore_errors=True)


def _one(
    cmd: Command,
    options: SuperviseOptions,
    notes: Tell,
    requests: Interrupts,
    restart: RestartOptions,
    installed: bool,
    request_file: str,
    watch: Callable[..., None],
) -> tuple[RunResult, Supervisor]:
    """One attempt under its own supervisor, ``watch`` a :meth:`~.ledger.RunLedger.watcher`."""
    sup = Supervisor(cmd, options, notes, signals=requests)
    # The launcher and its helpers inherit SIG_IGN, so a requeue signal SLURM sends to every process
    # of the step does not kill them (one arriving during the fork is lost; a stop signal is not).
    with ignored(restart.requeue_signal) if installed else contextlib.nullcontext():
        sup.start()  # raises when the launcher cannot start: nothing to stop then
    result = None
    try:
        watch(sup, True)
        asked_at = None
        while (result := sup.wait(timeout=_POLL)) is None:
            watch(sup, False)
            if requests.checkpoint_at is not None and asked_at is None:
                Path(request_file).touch()
                asked_at = time.monotonic()
                notes(CheckpointRequested(signal.Signals(restart.requeue_signal).name, STOP_WINDOW))
            if asked_at is not None and time.monotonic() - asked_at > STOP_WINDOW:
                sup.interrupt(signal.SIGTERM)  # the one shutdown path: the ranks save on SIGTERM too
                asked_at = float("inf")
    finally:
        if result is None:
            result = sup.kill()  # an error inside mgpu itself: the tree must not outlive it
    return result, sup


def _tell(ledger: RunLedger, attempt: Attempt, result: RunResult) -> None:
    """The attempt's end in the ledger: its stall verdict, and its fault when it failed or hung."""
    failed = attempt.outcome == "failed"
    f = result.failure if failed else None
    code = f.exit_code if f is not None else (attempt.exit_code if failed else None)
    sig = f.signal if f is not None else None
    v = attempt.verdict  # every failed attempt's (_classified): its reason is the fault's
    fault = {"outcome": attempt.outcome, "rank": attempt.rank, "rank_host": attempt.host, "exit_code": code,
             "signal": sig, "reason": v.reason if v else attempt.how, "iteration": attempt.reached,
             "checkpoint": attempt.checkpoint, "lost": attempt.lost}  # fmt: skip
    if v is not None:
        fault.update(failure_class=v.kind, restartable=v.restart, fix=v.fix)
    ledger.attempt_ended(result.stall, fault if attempt.outcome in ("failed", "hung") else None)


def _judge(
    number: int, result: RunResult, place: RunPlace, started: int | None, seconds: float, requests: Interrupts
) -> Attempt:
    reached, saved = _reached(place), _checkpoint_now(place)
    if reached is not None and saved is not None:
        # The summary is refreshed on a time budget, so it can lag the newest checkpoint: the run
        # got at least as far as what it saved.
        reached = max(reached, saved)
    logs = str(Path(result.log_dir).absolute()) if result.log_dir is not None else None  # read from anywhere
    common = {"number": number, "exit_code": result.exit_code, "started_at": started, "reached": reached,
              "checkpoint": saved, "seconds": round(seconds, 3), "logs": logs}  # fmt: skip
    if result.stall is not None:
        culprit = next(iter(result.stall.culprits), None) if result.stall.culprits else None
        return Attempt(outcome="hung", rank=culprit, how=result.stall.headline(), **common)
    if result.interrupted:
        return Attempt(outcome="interrupted", **common)
    if result.exit_code != 0:
        f = result.failure
        if f is None:
            return Attempt(outcome="failed", how=f"launcher exit code {result.exit_code}", **common)
        how = f"signal {f.signal}" if f.signal else f"exit code {f.exit_code}"
        return Attempt(outcome="failed", rank=f.rank, how=how, host=f.host, **common)
    summary = summaries.read(place.run_dir) if place.run_dir is not None else None
    # Another node has no summary: its ranks' reports say how they ended (a request read in the
    # last iteration stops nothing); a program that does not say stopped because this mgpu asked.
    status = summary.status if summary is not None else result.ended
    if status == "drifted":  # --on_drift stop: saved, never restarted
        return Attempt(outcome="drifted", **common)
    stopped = status == "stopped" if status is not None else requests.checkpoint_at is not None
    return Attempt(outcome="stopped" if stopped else "finished", **common)


def _classified(attempt: Attempt, result: RunResult, before: Attempt | None, kills: int) -> Attempt:
    """``attempt`` with its verdict when it failed (``kills``: the cgroup's OOM kills before it)."""
    if attempt.outcome != "failed":
        return attempt
    f = result.failure
    exception = verdicts.exception_line(f.traceback, f.stderr_tail) if f is not None else None
    text = "\n".join(filter(None, (f.traceback, f.stderr_tail))) if f is not None else ""
    oom = verdicts.is_cuda_oom(" ".join(filter(None, (f.reason if f else None, text))))
    failure = verdicts.Failure(
        rank=attempt.rank,
        exit_code=f.exit_code if f is not None else attempt.exit_code,
        signal=f.signal if f is not None else None,
        reason=f.reason if f is not None else None,
        exception=exception,
        text=text,
        started_at=attempt.started_at,
        reached=attempt.reached,
        oom_kills=max(0, verdicts.oom_kills() - kills),
        gpu_holders=verdicts.gpu_holders() if oom else (),  # NVML is asked only about a CUDA OOM
    )
    previous = before.verdict if before is not None and before.outcome == "failed" else None
    verdict = verdicts.classify(failure, previous, before.number if previous is not None else None)
    return dataclasses.replace(attempt, verdict=verdict)


def _reached(place: RunPlace) -> int | None:
    """Iterations the run has completed, as the run's summary says (rank 0's account folded)."""
    found = summaries.read(place.run_dir) if place.run_dir is not None else None
    return found.end_iteration if found is not None else None


def _checkpoint_now(place: RunPlace) -> int | None:
    """The newest checkpoint's iteration in the run folder (0: none yet); None off node 0."""
    return newest_checkpoint(place.run_dir, place.named_by_rank)[0]  # what a restart resumes from


def _started_here(place: RunPlace, number: int) -> int | None:
    """Where attempt ``number`` started, as its rank 0 recorded it (the attempt that named the folder)."""
    found = summaries.read(place.run_dir) if place.run_dir is not None else None
    if found is None or found.attempt != number:
        return None
    return found.resumed_at if found.resumed_at is not None else found.start_iteration


def requeue(job_id: str, timeout: float = 30.0) -> tuple[bool, str]:
    """Run ``scontrol requeue <job_id>``; (True, "") when it worked, else (False, what it said)."""
    try:
        done = subprocess.run(
            ["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return done.returncode == 0, (done.stderr or done.stdout).strip()
