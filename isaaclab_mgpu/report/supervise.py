"""Console messages of the supervisor: shutdown progress, the run's log folder, the root cause.

The module itself is the supervisor's :class:`~isaaclab_mgpu.launcher.supervise.Notes`: each
function below is one of its methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED
from isaaclab_mgpu.report import note, warn

if TYPE_CHECKING:
    from isaaclab_mgpu.contract.summary import Drift, Straggler
    from isaaclab_mgpu.launcher.attempts import Attempt
    from isaaclab_mgpu.launcher.supervise import RankFailure, RunResult, Stall


def log_folder(path: str) -> None:
    """Say where every rank's full output is written."""
    note(f"per-rank logs: {path}")


def starting(ranks: int | str, world_size: int | None, launcher: str, run_dir: str | None) -> None:
    """Before the launcher's imports (seconds of silence): how many ranks start here, and where the
    run is recorded (the run folder, when this node's mgpu knows it before the ranks start)."""
    world = f" of {world_size}" if world_size is not None and world_size != ranks else ""
    where = f"; run folder {run_dir}" if run_dir else ""
    note(f"starting {ranks} rank(s){world} on this node with {launcher}{where}")


def run_folder(path: str, host: str) -> None:
    """Multi-node: say on every node which run folder the run writes and who keeps its record."""
    note(f"run folder: {path} (node 0 on {host}, which runs global rank 0, keeps its record)")


def stopping(reason: str, launcher: str, grace: float, kill_after: float) -> None:
    """The one message after the first Ctrl-C/SIGTERM: what happens now and how to force it."""
    note(
        f"{reason}: asking {launcher} to stop the ranks; every remaining process gets "
        f"SIGTERM in {grace:g} s and SIGKILL {kill_after:g} s later. Press Ctrl-C again to kill now."
    )


def stopping_after_failure(launcher: str, grace: float, kill_after: float) -> None:
    """A rank failed: its peers can save nothing, so they are stopped at once."""
    note(
        f"a rank failed; its peers cannot finish a collective without it: {launcher} stops them, "
        f"SIGTERM to what is left in {grace:g} s, SIGKILL {kill_after:g} s later"
    )


def rank_died(
    rank: int, host: str | None, iteration: int | None, stage: str, peers: int, wait: float
) -> None:
    """A rank died mid-run: its local peers, which can save nothing, are SIGKILLed (after W&B's write)."""
    where = f" during iteration {iteration}" if iteration is not None else ""
    if not peers:  # the others had already ended: nobody waits for it
        note(f"rank {rank}{f' on {host}' if host else ''} ended{where} (stage {stage}) before finishing")
        return
    when = f"in {wait:g} s, once W&B's service has written its offline log" if wait else "now"
    note(
        f"rank {rank}{f' on {host}' if host else ''} died{where} (stage {stage}); the others wait for it "
        f"in a collective that cannot finish and can save nothing: SIGKILL to {peers} process(es) of "
        f"this node's other ranks {when}"
    )


def forcing(count: int) -> None:
    """Second interrupt: the tree is being killed."""
    note(f"second interrupt: killing {count} process(es) now")


def escalating(count: int, grace: float) -> None:
    """The grace period is over and processes are still alive."""
    note(f"{count} process(es) still running {grace:g} s after the stop request; sending SIGTERM")


def killing(count: int) -> None:
    """SIGTERM did not suffice."""
    note(f"{count} process(es) ignored SIGTERM; sending SIGKILL")


def stragglers(count: int, launcher: str) -> None:
    """Processes outlived the launcher (orphaned grandchildren, setsid escapees)."""
    note(f"{count} process(es) outlived {launcher}; stopping them")


def ignored_report(path: str, reason: str) -> None:
    """A rank's progress file did not hold a progress report: said once per file, then ignored."""
    warn(f"ignoring the progress file {path}: {reason}")


def failure(f: RankFailure) -> None:
    """Name the first failed rank with the tail of its traceback or stderr."""
    what = f"signal {f.signal}" if f.signal else f"exit code {f.exit_code}"
    rank = "rank ?" if f.rank is None else f"rank {f.rank}"
    local = "" if f.local_rank is None else f" (local rank {f.local_rank})"
    host = f" on {f.host}" if f.host else ""
    if f.exit_code == EXIT_INTERRUPTED:
        # The rank stopped cleanly on a request this mgpu did not send (another node, a signal).
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


def stall(s: Stall) -> None:
    """The stall watch's verdict, as soon as it is found: who, where, their stacks, who still moves."""
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
    """Closing lines: the failure, the log folder (again, after a run that did not end well: it was
    said at the start), and any process that could not be killed."""
    if r.failure is not None and not r.interrupted and r.stall is None:
        failure(r.failure)
    if r.log_dir and (r.exit_code != 0 or r.failure is not None):
        log_folder(r.log_dir)
    if r.survivors:
        warn(f"could not kill process(es) {', '.join(map(str, r.survivors))}; stop them by hand")


def restarting(ended: Attempt, number: int, max_restarts: int, from_checkpoint: bool) -> None:
    """An attempt failed or hung and mgpu starts the next one: the failure's class and reason line,
    and what really resumes (the checkpoint and the iterations lost, or the program's beginning)."""
    if not from_checkpoint:
        where = "from the beginning: this program writes no checkpoint mgpu knows"
    elif ended.checkpoint is not None:
        lost = f", {ended.lost} iteration(s) lost" if ended.lost is not None else ""
        where = f"resuming at iteration {ended.checkpoint}{lost}"
    else:
        where = "rank 0 resumes from the run's newest checkpoint"
    v = ended.verdict
    judged = f" ({v.kind}: {v.reason})" if v is not None else ""
    note(f"{ended.describe()}{judged}; restart {number} of {max_restarts}: {where}")


def checkpoint_requested(signal_name: str, window: float) -> None:
    """The requeue signal arrived: the ranks save at the next iteration boundary and stop."""
    note(
        f"{signal_name} received: the ranks save a checkpoint at the next iteration and stop "
        f"(stopped as on SIGTERM if not done in {window:g} s)"
    )


def straggler(s: Straggler) -> None:
    """The straggler watch named a rank: who, where, how much slower, and its GPU's state."""
    device = f", {s.device}" if s.device else ""
    window = f" over iterations {s.iterations[0]}-{s.iterations[1]}" if len(s.iterations) == 2 else ""
    note(
        f"straggler: rank {s.rank}{f' on {s.host}' if s.host else ''}{device} works "
        f"{s.busy_s or 0:.3f} s per iteration, {s.slower or 0:.2f}x the other ranks' "
        f"{s.others_busy_s or 0:.3f} s{window}: they wait for it in every collective"
    )
    if s.gpu:
        note(f"  its GPU: {s.gpu}")


def drift(d: Drift) -> None:
    """The ranks' drift check found them apart (rank 0's progress report): who, what, since when."""
    warn(f"drift: {d.describe()}; they now train different policies (docs/supervision.md#drift)")


def stall_bound(text: str) -> None:
    """The auto stall bound, once the run's steady iterations gave it."""
    note(f"stall bound: {text}")
