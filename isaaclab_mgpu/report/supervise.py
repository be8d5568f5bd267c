"""Console messages of the supervisor: shutdown progress, the run's log folder, the root cause.

:func:`tell` is the run's sink for the launcher's notes (:mod:`isaaclab_mgpu.launcher.notes`): one
renderer registered per kind the supervisor and the attempts loop give.
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED
from isaaclab_mgpu.launcher.attempts import CheckpointRequested, Restarting
from isaaclab_mgpu.launcher.notes import Note
from isaaclab_mgpu.launcher.supervise import notes as said
from isaaclab_mgpu.report import note, warn

if TYPE_CHECKING:
    from isaaclab_mgpu.launcher.supervise import RankFailure, RunResult


@singledispatch
def tell(n: Note) -> None:
    """Print one of the launcher's notes about a run."""
    raise TypeError(f"no console line for the note {type(n).__name__}")


@tell.register
def log_folder(n: said.LogFolder) -> None:
    """Say where every rank's full output is written."""
    note(f"per-rank logs: {n.path}")


def starting(ranks: int | str, world_size: int | None, launcher: str, run_dir: str | None) -> None:
    """Before the launcher's imports (seconds of silence): how many ranks start here, and the run folder."""
    world = f" of {world_size}" if world_size is not None and world_size != ranks else ""
    where = f"; run folder {run_dir}" if run_dir else ""
    note(f"starting {ranks} rank(s){world} on this node with {launcher}{where}")


@tell.register
def run_folder(n: said.RunFolder) -> None:
    """Multi-node: say on every node which run folder the run writes and who keeps its record."""
    note(f"run folder: {n.path} (node 0 on {n.host}, which runs global rank 0, keeps its record)")


@tell.register
def stopping(n: said.Stopping) -> None:
    """The one message after the first Ctrl-C/SIGTERM: what happens now and how to force it."""
    note(
        f"{n.reason}: asking {n.launcher} to stop the ranks; every remaining process gets "
        f"SIGTERM in {n.grace:g} s and SIGKILL {n.kill_after:g} s later. Press Ctrl-C again to kill now."
    )


@tell.register
def stopping_after_failure(n: said.StoppingAfterFailure) -> None:
    """A rank failed: its peers can save nothing, so they are stopped at once."""
    note(
        f"a rank failed; its peers cannot finish a collective without it: {n.launcher} stops them, "
        f"SIGTERM to what is left in {n.grace:g} s, SIGKILL {n.kill_after:g} s later"
    )


@tell.register
def rank_died(n: said.RankDied) -> None:
    """A rank died mid-run: its local peers, which can save nothing, are SIGKILLed (after W&B's write)."""
    where = f" during iteration {n.iteration}" if n.iteration is not None else ""
    who = f"rank {n.rank}{f' on {n.host}' if n.host else ''}"
    if not n.peers:  # the others had already ended: nobody waits for it
        note(f"{who} ended{where} (stage {n.stage}) before finishing")
        return
    when = f"in {n.wait:g} s, once W&B's service has written its offline log" if n.wait else "now"
    note(
        f"{who} died{where} (stage {n.stage}); the others wait for it in a collective that cannot "
        f"finish and can save nothing: SIGKILL to {n.peers} process(es) of this node's other ranks {when}"
    )


@tell.register
def forcing(n: said.Forcing) -> None:
    """Second interrupt: the tree is being killed."""
    note(f"second interrupt: killing {n.count} process(es) now")


@tell.register
def escalating(n: said.Escalating) -> None:
    """The grace period is over and processes are still alive."""
    note(f"{n.count} process(es) still running {n.grace:g} s after the stop request; sending SIGTERM")


@tell.register
def killing(n: said.Killing) -> None:
    """SIGTERM did not suffice."""
    note(f"{n.count} process(es) ignored SIGTERM; sending SIGKILL")


@tell.register
def outlived(n: said.Outlived) -> None:
    """Processes outlived the launcher (orphaned grandchildren, setsid escapees)."""
    note(f"{n.count} process(es) outlived {n.launcher}; stopping them")


@tell.register
def ignored_report(n: said.IgnoredReport) -> None:
    """A rank's progress file did not hold a progress report: said once per file, then ignored."""
    warn(f"ignoring the progress file {n.path}: {n.reason}")


def failure(f: RankFailure) -> None:
    """Name the first failed rank with the tail of its traceback or stderr."""
    what = f"signal {f.signal}" if f.signal else f"exit code {f.exit_code}"
    rank = "rank ?" if f.rank is None else f"rank {f.rank}"
    local = "" if f.local_rank is None else f" (local rank {f.local_rank})"
    host = f" on {f.host}" if f.host else ""
    if f.exit_code == EXIT_INTERRUPTED:
        note(f"root cause: {rank}{local}{host} ended on a stop request this mgpu did not send ({what})")
    else:
        note(f"root cause: {rank}{local}{host} failed with {what}")
    body = f.traceback or f.stderr_tail
    if body:
        source = "traceback" if f.traceback else "last lines of its stderr"
        note(f"{source}:")
        for line in body.splitlines():
            note(f"  {line}")
    if f.log_path:
        note(f"its full output: {f.log_path}")


@tell.register
def stall(n: said.StallFound) -> None:
    """The stall watch's verdict, as soon as it is found: who, where, their stacks, who still moves."""
    s = n.stall
    note(f"hang: {s.headline()}")
    for r in s.blamed() or [r for r in s.ranks if r.stalled]:
        if r.stack:
            note(f"{r.name()}: Python stack, innermost call first:")
            for line in r.stack.splitlines()[1:]:
                note(f"  {line.strip()}")
    others = [r for r in s.ranks if r.rank not in s.culprits]
    moving = {r.rank for r in s.progressing()}
    for r in others:
        how = "still progressing" if r.rank in moving else f"quiet for {r.quiet_s:.0f} s"
        state = f", process {r.process}" if r.process not in ("running", "sleeping", "unknown") else ""
        note(f"{r.name()}: {how}, last at {r.where()}{state}")
    dumped = [r.stack_file for r in s.ranks if r.stack_file and r.stack]
    if dumped:
        note(f"every local rank's Python stack (all threads): {', '.join(dumped)}")
    note("stopping every process of the run")


def result(r: RunResult) -> None:
    """Closing lines: the failure, the log folder again (a run that ended badly), any process left."""
    if r.failure is not None and not r.interrupted and r.stall is None:
        failure(r.failure)
    if r.log_dir and (r.exit_code != 0 or r.failure is not None):
        log_folder(said.LogFolder(r.log_dir))
    if r.survivors:
        warn(f"could not kill process(es) {', '.join(map(str, r.survivors))}; stop them by hand")


@tell.register
def restarting(n: Restarting) -> None:
    """An attempt failed or hung and the next starts: the failure's class and reason, and what resumes."""
    ended = n.ended
    if not n.from_checkpoint:
        where = "from the beginning: this program writes no checkpoint mgpu knows"
    elif ended.checkpoint is not None:
        lost = f", {ended.lost} iteration(s) lost" if ended.lost is not None else ""
        where = f"resuming at iteration {ended.checkpoint}{lost}"
    else:
        where = "rank 0 resumes from the run's newest checkpoint"
    v = ended.verdict
    judged = f" ({v.kind}: {v.reason})" if v is not None else ""
    note(f"{ended.describe()}{judged}; restart {n.number} of {n.max_restarts}: {where}")


@tell.register
def checkpoint_requested(n: CheckpointRequested) -> None:
    """The requeue signal arrived: the ranks save at the next iteration boundary and stop."""
    note(
        f"{n.signal_name} received: the ranks save a checkpoint at the next iteration and stop "
        f"(stopped as on SIGTERM if not done in {n.window:g} s)"
    )


@tell.register
def straggler(n: said.StragglerFound) -> None:
    """The straggler watch named a rank: who, where, how much slower, and its GPU's state."""
    s = n.straggler
    device = f", {s.device}" if s.device else ""
    window = f" over iterations {s.iterations[0]}-{s.iterations[1]}" if len(s.iterations) == 2 else ""
    note(
        f"straggler: rank {s.rank}{f' on {s.host}' if s.host else ''}{device} works "
        f"{s.busy_s or 0:.3f} s per iteration, {s.slower or 0:.2f}x the other ranks' "
        f"{s.others_busy_s or 0:.3f} s{window}: they wait for it in every collective"
    )
    if s.gpu:
        note(f"  its GPU: {s.gpu}")


@tell.register
def drift(n: said.DriftFound) -> None:
    """The ranks' drift check found them apart (rank 0's progress report): who, what, since when."""
    warn(f"drift: {n.drift.describe()}; they now train different policies (docs/supervision.md#drift)")


@tell.register
def stall_bound(n: said.StallBound) -> None:
    """The auto stall bound, once the run's steady iterations gave it."""
    note(f"stall bound: {n.text}")
