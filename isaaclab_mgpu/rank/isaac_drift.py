"""The drift check on Isaac Lab's training path: the built-in worker's check (:mod:`.drift`), run
at the end of the library's own iterations.

Each library's observation patch (:mod:`.patches`) hands the rank's Bookkeeper a
:class:`~.drift.Source` (rsl-rl's ``PPO``, skrl's agent, rl-games' agent) and calls it once per
iteration on every rank; :meth:`Watch.after` then does what the worker's loop does, except that the
hashes go in an all-gather of their own, only on a check's iteration (this path has no
per-iteration all-gather to ride). ``--on_drift stop`` stops every rank the way mgpu's checkpoint
request does; ``--simulate_fault drift@IT`` nudges the target rank's state at the end of iteration
IT - 1, i.e. before IT trains. Isaac Lab's sb3 back-end trains one process: nothing to compare.
"""

from __future__ import annotations

from collections.abc import Mapping

from isaaclab_mgpu.contract import faults
from isaaclab_mgpu.contract.env import RUN_ID
from isaaclab_mgpu.contract.summary import Drift
from isaaclab_mgpu.contract.worker_args import WorkerArgs
from isaaclab_mgpu.rank import drift
from isaaclab_mgpu.rank.console import TrainingConsole
from isaaclab_mgpu.rank.worker.rank import Comm, RankContext, gather_floats


class Watch:
    """One rank's drift check through an Isaac Lab run."""

    def __init__(self, ctx: RankContext, comm_kind: str, args: WorkerArgs | None, environ: Mapping[str, str]):
        self.ctx = ctx
        self.comm = Comm(ctx, comm_kind)
        self.check = drift.Check(args.drift_interval if args is not None else 0)
        self.stop_on_drift = args is not None and args.on_drift == "stop"
        fault = faults.for_this_rank(environ) if RUN_ID in environ else None
        self.fault = fault if fault is not None and fault.kind == "drift" else None
        self.environ = environ
        self.source: drift.Source | None = None
        """The library's state, once its observation patch handed it over."""
        self.stopped = False
        """Every rank stopped on the drift (``--on_drift stop``)."""

    def started(self, iteration: int) -> None:
        """Training (re)starts after ``iteration`` completed iterations: no check agreed since."""
        self.check.agreed = iteration

    def after(self, done: int) -> bool:
        """Iteration ``done`` ended: the check when due, then a simulated drift; True: stop here."""
        found = (
            self._compare(done)
            if self.source is not None and self.check.due(done, self.ctx.world_size)
            else None
        )
        if self.fault is not None and self.source is not None and done + 1 >= self.fault.iteration:
            faults.fire(self.fault, self.environ)  # --simulate_fault drift@IT: before IT trains
            self.source.perturb()
            self.fault = None
        if found is None:
            return False
        if self.ctx.rank == 0:
            drift.tell(found, TrainingConsole(0).note)
        self.stopped = self.stop_on_drift
        return self.stopped

    def _compare(self, done: int) -> Drift | None:
        row = drift.words(drift.hashes(self.source.components()))  # type: ignore[union-attr]
        return self.check.judge(gather_floats(self.comm, row), done)  # 16-bit words: exact in float32
