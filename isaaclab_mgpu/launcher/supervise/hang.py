"""The stall watch inside a supervised run: when to look, and the stacks that go with a verdict.

:class:`HangWatch` owns the run's progress folder (``MGPU_PROGRESS_DIR``, handed to the launcher),
its :class:`~.stall.StallMonitor` and, multi-node, what the other nodes publish
(:mod:`isaaclab_mgpu.launcher.peers`). For a verdict, every local rank that reported a stack file
*and* is a live process of the supervised tree dumps its Python stack (:func:`.stacks.of_ranks`); a
PID read from a progress file is only a key into the tree, never signalled as such. The same
reports feed the straggler watch (:mod:`.straggler`) and name the drift the worker's check found.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import psutil

from isaaclab_mgpu.contract.env import RUN_DIR
from isaaclab_mgpu.contract.summary import Drift, Straggler
from isaaclab_mgpu.launcher import nvml, peers
from isaaclab_mgpu.launcher.build import CUDA_VISIBLE_DEVICES, Command, Rendezvous
from isaaclab_mgpu.launcher.supervise import stacks
from isaaclab_mgpu.launcher.supervise.stall import (
    SAVE_STAGES,
    Report,
    Stall,
    StallMonitor,
    StallOptions,
    progress_folder,
    stack_tail,
)
from isaaclab_mgpu.launcher.supervise.straggler import RankTotals, StragglerWatch
from isaaclab_mgpu.launcher.supervise.tree import children

__all__ = ["POLL_S", "HangWatch"]

#: How often the stall watch reads the progress reports.
POLL_S = 0.5


class HangWatch:
    """The stall watch of one run on this node (and, multi-node, what the other nodes publish)."""

    def __init__(self, options: StallOptions, cmd: Command, alive_port: int | None) -> None:
        host = socket.gethostname()
        self.monitor = StallMonitor(options, progress_folder(), tuple(sorted(cmd.rank_devices)), host=host)
        visible = cmd.env.get(CUDA_VISIBLE_DEVICES, os.environ.get(CUDA_VISIBLE_DEVICES))
        gpu_state = functools.partial(nvml.gpu_state, visible=visible)
        self.stragglers = StragglerWatch(dict(cmd.rank_devices), gpu_state)
        self._next = 0.0
        self.drift_found: Drift | None = None
        """The first drift a report carried (:meth:`drift`)."""
        self.sharer: peers.Sharer | None = None
        rendezvous = cmd.rendezvous
        if rendezvous is not None and rendezvous.node_rank is not None and options.multi_node:
            run_dir = cmd.env.get(RUN_DIR)  # node 0's, published to the other nodes
            self.sharer = _sharer(self.monitor, rendezvous, host or "localhost", run_dir, alive_port)
            self.sharer.start()
            sharer = self.sharer

            def saving_elsewhere() -> bool:
                with sharer.view() as view:
                    return any(r.stage in SAVE_STAGES for r, _ in view.ranks_elsewhere())

            self.monitor.saving_elsewhere = saving_elsewhere

    def due(self, now: float) -> bool:
        """True when it is time to look again (every :data:`POLL_S` seconds)."""
        if now < self._next:
            return False
        self._next = now + POLL_S
        return True

    def check(
        self, tree: Callable[[], list[psutil.Process]], output_times: Mapping[int, float] | None
    ) -> Stall | None:
        """The verdict with the hung ranks' stacks, or None while the run progresses."""
        # tree() is called only for a verdict: walking it reads every process's /proc entries,
        # most of what supervising a healthy run costs.
        stall = self._elsewhere(self.monitor.check(output_times=output_times))
        if stall is None:
            return None
        dumped = stacks.of_ranks(tree(), (r for r in stall.ranks if r.process != "gone"))
        tails = {rank: stack_tail(text) for rank, text in dumped.items()}
        return replace(stall, ranks=tuple(replace(r, stack=tails.get(r.rank)) for r in stall.ranks))

    @staticmethod
    def hung(stall: Stall, tree: list[psutil.Process]) -> list[psutil.Process]:
        """The tree's processes of the ranks in ``stall``, with their children."""
        pids = {r.pid for r in stall.ranks if r.pid is not None}
        ranks = [p for p in tree if p.pid in pids]
        return [*ranks, *(child for p in ranks for child in children(p, recursive=True))]

    def after_failure(self, local_rank: int) -> Stall | None:
        """:meth:`StallMonitor.after_failure`, with what the other nodes published."""
        return self._elsewhere(self.monitor.after_failure(local_rank))

    def explain_failure(self) -> str | None:
        """After a rank failed on a multi-node run: what the other nodes show, waiting a little for it."""
        # A killed mgpu stops publishing; telling that from a slow publish takes peers.GONE_S.
        if self.sharer is None:
            return None
        end = time.monotonic() + peers.GONE_S + 2 * peers.PUBLISH_S
        while True:
            with self.sharer.view() as view:
                found = view.elsewhere(time.monotonic(), bound=float("inf"))
            if found is not None or time.monotonic() >= end:
                return found
            time.sleep(peers.PUBLISH_S / 2)

    def hang_elsewhere(self, local_rank: int | None, elsewhere: str | None) -> Stall | None:
        """The peer stall of a local rank whose connection broke because another node found a hang."""
        # That node's mgpu published its verdict before it stopped its ranks, which broke ours at
        # once, however long ours had waited.
        if self.sharer is None or local_rank is None:
            return None
        with self.sharer.view() as view:
            if not view.hung_elsewhere():
                return None
        stall = self.monitor.after_failure(local_rank, min_wait_s=0.0)
        return None if stall is None else replace(stall, elsewhere=elsewhere or stall.elsewhere)

    def _elsewhere(self, stall: Stall | None) -> Stall | None:
        if stall is None or self.sharer is None:
            return stall
        if stall.cause == "peer":
            with self.sharer.view() as view:
                stall = replace(stall, elsewhere=view.elsewhere(time.monotonic(), stall.timeout_s))
        self.sharer.verdict(stall.headline())
        return stall

    def straggler(self) -> Straggler | None:
        """A rank first named as the straggler, from the last reports and the other nodes'; else None."""
        seen: list[tuple[Report | peers.PeerRank, str | None]] = [
            (r, r.host) for r in self.monitor.files.last.values()
        ]
        if self.sharer is not None:
            with self.sharer.view() as view:
                seen += view.ranks_elsewhere()
        totals: dict[int, RankTotals] = {}
        for r, host in seen:
            if r.timed is not None and r.busy_s is not None and r.rank not in totals:
                totals[r.rank] = RankTotals(r.rank, r.timed, r.busy_s, r.iteration, host)
        return self.stragglers.update(totals)

    def drift(self) -> Drift | None:
        """The drift a local rank's last read report carries, the first time it is seen."""
        if self.drift_found is not None:
            return None
        reports = self.monitor.files.last
        found = next((r.drift for _, r in sorted(reports.items()) if r.drift is not None), None)
        self.drift_found = found
        return found

    def ended(self) -> str | None:
        """How this node's ranks said their training ended (the lowest rank that said), as last read."""
        reports = self.monitor.files.last
        return next((r.ended for _, r in sorted(reports.items()) if r.ended is not None), None)

    def died(self, tree: Callable[[], list[psutil.Process]]) -> tuple[Report, list[psutil.Process]] | None:
        """A local rank that died, and the tree's processes of the other local ranks; None while none died."""
        dead = self.monitor.dead()
        if not dead:
            return None
        members = {p.pid: p for p in tree()}
        gone = {r.pid for r in dead}
        peers = [
            members[r.pid]
            for r in self.monitor.files.read().values()
            if r.pid in members and r.pid not in gone
        ]
        # The ranks alone: a child of theirs (W&B's service writing the run's offline file) is not
        # stuck, and ends by itself or with the rest of the tree once the launcher is gone.
        return dead[0], peers

    def peer_loss(self) -> tuple[tuple[int, ...], tuple[tuple[int, str, int | None], ...]]:
        """Multi-node: the other nodes counted as gone, and each other node's host and liveness port."""
        if self.sharer is None:
            return (), ()
        with self.sharer.view() as view:
            return view.lost_nodes(time.monotonic()), tuple(
                sorted((n, h, p) for n, (h, p) in view.hosts().items())
            )

    def run_folder(self) -> tuple[str, str] | None:
        """Multi-node: the run folder and the host of node 0, which keeps its record, once known."""
        if self.sharer is None:
            return None
        if self.sharer.board.node_rank == 0:
            return (self.sharer.run_dir, self.sharer.host) if self.sharer.run_dir else None
        with self.sharer.view() as view:
            return view.run_folder()

    def remove(self) -> None:
        """Stop publishing (saying this node ends on purpose) and delete the progress folder."""
        if self.sharer is not None:
            self.sharer.stop()
            self.sharer = None
        self.monitor.remove()


def _sharer(
    monitor: StallMonitor, rendezvous: Rendezvous, host: str, run_dir: str | None, alive_port: int | None
) -> peers.Sharer:
    board = peers.Board(
        (rendezvous.host, rendezvous.port), rendezvous.id, rendezvous.node_rank or 0, rendezvous.nnodes
    )
    here = {host, socket.getfqdn(), "localhost", "127.0.0.1", "::1"}
    view = peers.Peers(
        board.node_rank,
        rendezvous.nnodes,
        f"{rendezvous.host}:{rendezvous.port}",
        store_node=0 if rendezvous.static else None,
        serves_store=board.node_rank == 0 if rendezvous.static else rendezvous.host in here,
    )
    states = lambda: peers.states_from(monitor.states())  # noqa: E731
    return peers.Sharer(board, host, states, view, run_dir=run_dir, alive_port=alive_port)
