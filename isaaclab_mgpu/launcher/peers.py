"""Every node's ranks named on every node, through the rendezvous store the nodes already share.

Each node's mgpu watches only its own ranks (:mod:`.supervise.stall`). What the nodes of a torchrun
launch share is the rendezvous store torchrun hosts (``--master_addr:--master_port``, or c10d's
``--rdzv_endpoint``). :class:`Board` is one more client of that store, in each node's mgpu:

- :meth:`Board.publish` writes this node's :class:`NodeReport` under
  ``mgpu/<rendezvous id>/node/<node rank>``, with a sequence number that moves on every publish (a
  frozen rank cannot report; its mgpu still can); each rank's busy-time totals feed every node's
  straggler watch (:mod:`.supervise.straggler`);
- :meth:`Board.read` takes the other nodes' latest reports, without waiting for a missing key;
  None when the store does not answer.

:class:`Peers` remembers, on this node's clock (the nodes' clocks are never compared), when each
other node's sequence last moved, and :meth:`Peers.elsewhere` turns that into the sentence that
names the culprit on another node: a stopped or silent rank, a node whose mgpu stopped publishing,
or the store's host itself when the store stopped answering. With ``--min_nodes``,
:meth:`Peers.lost_nodes` gives the nodes that look gone: the candidates a shrink (:mod:`.shrink`)
asks on the port each report carries before leaving them out.

Keys live under ``mgpu/``, apart from torchrun's own. The store client is
``torch.distributed.TCPStore``, imported only when a board first connects (``mgpu train`` of a
multi-node launch), never on the path of ``--help``, ``dry-run`` or ``check-env``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from isaaclab_mgpu.contract import records
from isaaclab_mgpu.contract.records import ROW, Count, NonNegative

#: A node whose sequence did not move for this long (while ours did) has lost its mgpu.
GONE_S = 5.0
#: How long one store operation may take before the store counts as not answering.
STORE_TIMEOUT_S = 3.0
#: Failed store operations in a row after which the store counts as gone.
LOST_AFTER = 3


class Store(Protocol):
    """The part of a torch.distributed store a board uses."""

    def set(self, key: str, value: str | bytes) -> None: ...

    def check(self, keys: list[str]) -> bool: ...

    def get(self, key: str) -> bytes: ...


@dataclass(frozen=True)
class PeerRank:
    """One rank as its node's mgpu last saw it."""

    rank: Count
    """Global rank."""

    stage: str | None
    """Last stage it reported; None when it never reported."""

    iteration: int | None
    """Iteration of that stage, once training began."""

    quiet_s: float
    """Seconds since its last progress report, on its node's clock."""

    process: str
    """``running``, ``sleeping``, ``stopped``, ``gone``, ... or ``unknown``."""

    timed: Count | None = None
    """Steady iterations its busy total covers (its progress report's), for the straggler watch."""

    busy_s: NonNegative | None = None
    """Their busy seconds."""

    def where(self) -> str:
        """``iteration 4, stage update`` or ``stage init``."""
        if self.stage is None:
            return "before its first report"
        at = f"iteration {self.iteration}, " if self.iteration is not None else ""
        return f"{at}stage {self.stage}"


@dataclass(frozen=True)
class NodeReport:
    """What one node's mgpu publishes about its ranks."""

    node_rank: Count
    """The node's rank in the launch."""

    host: str
    """The node's host name."""

    seq: Count
    """Moves on every publish: a node whose sequence stands still has lost its mgpu."""

    ranks: tuple[Annotated[PeerRank, ROW], ...]
    """The node's ranks, each one row (an older mgpu's rows lack the busy totals)."""

    verdict: str | None = None
    """The node's own stall verdict (its headline), once it has one."""

    ended: bool = False
    """The node's mgpu is stopping on purpose (its run ended): silence after this is not a loss."""

    run_dir: str | None = None
    """The run folder, from node 0 (whose mgpu chose it and keeps its record); None elsewhere."""

    alive_port: int | None = None
    """The port the node's mgpu listens on for its whole life (``--min_nodes``: :mod:`.shrink`)."""

    def dumps(self) -> str:
        """The report as the JSON text stored."""
        return json.dumps(records.plain(self), separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | bytes) -> NodeReport | None:
        """A report from its JSON text; None when it is not one (another program's key, a torn value)."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        # One of the optional fields (verdict, run folder) of the wrong type reads as unknown.
        return records.read(cls, data).record


def key(job: str, node_rank: int) -> str:
    """The store key of one node's report."""
    return f"mgpu/{job}/node/{node_rank}"


def store_client() -> type:
    """torch's ``TCPStore`` class, imported on first use (seconds on a loaded machine)."""
    if "torch" not in sys.modules:
        # c10d logs every failed connect with a C++ stack to our stderr; a store that stopped
        # answering is said once, in our words. Read once, when torch loads (the launcher's
        # environment was copied before the thread that imports it ran).
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    from torch.distributed import TCPStore

    return TCPStore


def tcp_store(host: str, port: int) -> Store:
    """A client of the TCPStore at ``host:port``."""
    timeout = datetime.timedelta(seconds=STORE_TIMEOUT_S)
    return store_client()(host, port, is_master=False, timeout=timeout, wait_for_workers=False)


class Board:
    """This node's client of the rendezvous store: publish our report, read the others'."""

    def __init__(
        self,
        address: tuple[str, int],
        job: str,
        node_rank: int,
        nnodes: int,
        connect: Callable[[str, int], Store] = tcp_store,
    ) -> None:
        self.address = address
        self.job = job
        self.node_rank = node_rank
        self.nnodes = nnodes
        self._connect = connect
        self._store: Store | None = None
        self.failures = 0
        """Store operations that failed in a row, up to now."""
        self.lost = False
        """The store failed :data:`LOST_AFTER` times in a row: not asked again (torchrun's is gone then)."""

    def prepare(self) -> None:
        """Import the store's client now, while the ranks start, rather than once they report."""
        if self._connect is tcp_store:
            store_client()

    def _client(self) -> Store:
        if self.lost:
            raise ConnectionError("the store stopped answering")
        if self._store is None:
            self._store = self._connect(*self.address)
        return self._store

    def publish(self, report: NodeReport) -> bool:
        """Write this node's report; False when the store did not answer."""
        try:
            self._client().set(key(self.job, self.node_rank), report.dumps())
        except Exception:  # torch raises RuntimeError, DistStoreError or TimeoutError alike
            self._failed()
            return False
        self.failures = 0
        return True

    def read(self) -> dict[int, NodeReport] | None:
        """The other nodes' latest reports (a node that never published is absent); None: no answer."""
        out: dict[int, NodeReport] = {}
        try:
            store = self._client()
            for node in range(self.nnodes):
                name = key(self.job, node)
                if node == self.node_rank or not store.check([name]):
                    continue
                report = NodeReport.loads(store.get(name))
                if report is not None and report.node_rank == node:
                    out[node] = report
        except Exception:  # as in publish
            self._failed()
            return None
        self.failures = 0
        return out

    def _failed(self) -> None:
        # One slow answer or connect (a loaded machine) is not the store's end: ask again, through a
        # new connection, up to LOST_AFTER times in a row.
        self.failures += 1
        self._store = None
        self.lost = self.failures >= LOST_AFTER


@dataclass
class _Seen:
    report: NodeReport
    moved: float  # our clock, when its sequence last moved


@dataclass
class Peers:
    """What this node knows of the others, on its own clock."""

    node_rank: int
    """This node's rank."""

    nnodes: int
    """Nodes in the launch."""

    store: str
    """The store's address, as messages name it (``node01:29500``)."""

    store_node: int | None = 0
    """The node whose torchrun serves the store (static rendezvous: node 0), when known."""

    serves_store: bool = False
    """This node's torchrun may serve the store: its silence after our own launcher ended is no news."""

    _seen: dict[int, _Seen] = field(default_factory=dict)
    _since: float | None = None
    _silent_since: float | None = None

    def update(self, reports: dict[int, NodeReport] | None, now: float) -> None:
        """Take one :meth:`Board.read` (None: the store did not answer) at ``now`` (our clock)."""
        if self._since is None:
            self._since = now
        if reports is None:
            if self._silent_since is None:
                self._silent_since = now
            return
        self._silent_since = None
        for node, report in reports.items():
            if node == self.node_rank:  # never our own: what follows reads only the others
                continue
            seen = self._seen.get(node)
            if seen is None or report.seq != seen.report.seq:
                self._seen[node] = _Seen(report, now)
            else:
                seen.report = report

    def _store_silent(self, now: float) -> float | None:
        """Seconds the store has not answered, once past STORE_TIMEOUT_S (never when we may serve it)."""
        if self._silent_since is None or self.serves_store or now - self._silent_since < STORE_TIMEOUT_S:
            return None
        return now - self._silent_since

    def elsewhere(self, now: float, bound: float) -> str | None:
        """The culprit on another node, as one sentence; None when the others look well."""
        if (silent := self._store_silent(now)) is not None:
            host = f"node {self.store_node}" if self.store_node is not None else "its host"
            return (
                f"the rendezvous store at {self.store} stopped answering {silent:.0f} s "
                f"ago: {host}, which serves it, is gone (its torchrun or its machine)"
            )
        found: list[str] = []
        for node in range(self.nnodes):
            if node == self.node_rank:
                continue
            seen = self._seen.get(node)
            if seen is None:
                waited = now - (self._since if self._since is not None else now)
                if waited >= GONE_S and self._silent_since is None:  # not when we cannot read either
                    found.append(
                        f"node {node}'s mgpu never published (it did not start, or cannot reach {self.store})"
                    )
                continue
            report = seen.report
            # A rank its node last showed stopped or gone comes first: when our own torchrun served
            # the store and ended, no sequence can be seen moving any more, and that says nothing.
            named = [_name(r, report) for r in _culprits(report, bound)]
            if named:
                found += named
                continue
            quiet = now - seen.moved
            if quiet >= GONE_S and not report.ended:
                found.append(
                    f"node {node}'s mgpu on {report.host} stopped publishing {quiet:.0f} s ago: it is gone "
                    "(killed, or its machine is down)"
                )
        return "; ".join(found) or None

    def lost_nodes(self, now: float) -> tuple[int, ...]:
        """The other nodes that look gone (their mgpu silent, or the silent store's host): for a shrink."""
        if self._store_silent(now) is not None:
            host = self._seen.get(self.store_node) if self.store_node is not None else None
            # Its last report showed its mgpu alive and its own rank failed: not lost.
            alive = host is not None and (host.report.ended or any(
                r.process in ("gone", "stopped") for r in host.report.ranks))  # fmt: skip
            return (self.store_node,) if self.store_node is not None and not alive else ()
        # A candidate only: our own store may have ended with our torchrun and left that node's
        # sequence standing; the shrink asks each candidate's mgpu itself (its liveness port).
        return tuple(
            node
            for node, seen in sorted(self._seen.items())
            if not seen.report.ended and now - seen.moved >= GONE_S
        )

    def hosts(self) -> dict[int, tuple[str, int | None]]:
        """Each node's host and liveness port as it last published them (this node's excluded)."""
        return {node: (seen.report.host, seen.report.alive_port) for node, seen in self._seen.items()}

    def ranks_elsewhere(self) -> list[tuple[PeerRank, str]]:
        """Every other node's ranks as last published, each with its node's host."""
        return [(r, seen.report.host) for _, seen in sorted(self._seen.items()) for r in seen.report.ranks]

    def run_folder(self) -> tuple[str, str] | None:
        """The run folder node 0 published and node 0's host, once seen (None before, and on node 0)."""
        seen = self._seen.get(0)  # never ours: on node 0, None
        if seen is None or seen.report.run_dir is None:
            return None
        return seen.report.run_dir, seen.report.host

    def hung_elsewhere(self) -> bool:
        """True when another node's last report carries its own hang verdict or a stopped rank."""
        return any(
            seen.report.verdict is not None or any(r.process == "stopped" for r in seen.report.ranks)
            for seen in self._seen.values()
        )


def _culprits(report: NodeReport, bound: float) -> list[PeerRank]:
    for state in ("stopped", "gone"):
        if found := [r for r in report.ranks if r.process == state]:
            return found
    return [r for r in report.ranks if r.quiet_s >= bound]


def _name(r: PeerRank, report: NodeReport) -> str:
    if r.process == "stopped":
        why = "its process is stopped (SIGSTOP, a debugger, or a frozen machine)"
    elif r.process == "gone":
        why = "its process is gone"
    else:
        why = f"no progress for {r.quiet_s:.0f} s"
    return f"rank {r.rank} (node rank {report.node_rank} on {report.host}) at {r.where()}: {why}"


def states_from(ranks: Any) -> tuple[PeerRank, ...]:
    """PeerRanks from the stall watch's rank states (:class:`~.supervise.stall.RankState`)."""
    return tuple(
        PeerRank(s.rank, s.stage, s.iteration, round(s.quiet_s, 1), s.process, s.timed, s.busy_s)
        for s in ranks
    )


#: How often a node publishes its report and reads the others'.
PUBLISH_S = 0.5


class Sharer:
    """Publishes this node's report and reads the others' every :data:`PUBLISH_S`, in its own thread."""

    def __init__(
        self,
        board: Board,
        host: str,
        states: Callable[[], tuple[PeerRank, ...]],
        peers: Peers,
        run_dir: str | None = None,
        alive_port: int | None = None,
    ) -> None:
        self.board = board
        self.host = host
        self.run_dir = run_dir
        self.alive_port = alive_port
        self._states = states
        self._peers = peers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._seq = 0
        self._verdict: str | None = None
        self._thread = threading.Thread(target=self._run, name="mgpu-peers", daemon=True)

    def start(self) -> None:
        """Begin publishing."""
        self._thread.start()

    def verdict(self, text: str) -> None:
        """This node's own verdict, published from now on."""
        self._verdict = text

    @contextlib.contextmanager
    def view(self) -> Iterator[Peers]:
        """The other nodes' reports as last read, held still (under the lock) while the block runs."""
        with self._lock:
            yield self._peers

    def stop(self) -> None:
        """Publish that this node ends on purpose, and stop the thread."""
        self._stop.set()
        if self._thread.is_alive():
            # Until its store call returns (at most STORE_TIMEOUT_S, more on a loaded machine): a
            # thread still inside the store's C++ client when the interpreter exits aborts it.
            self._thread.join(timeout=STORE_TIMEOUT_S * 4)
        if self.board.failures == 0 and not self._thread.is_alive():  # a failing store holds us up
            self._publish(ended=True)

    def _safe_states(self) -> tuple[PeerRank, ...]:
        try:
            return self._states()
        except Exception:  # a rank's process vanishing mid-read: no ranks this time
            return ()

    def _publish(self, ended: bool = False) -> None:
        if self.board.lost or (ended and self._seq == 0):
            return
        self._seq += 1
        report = NodeReport(self.board.node_rank, self.host, self._seq, self._safe_states(), self._verdict,
                            ended, self.run_dir, self.alive_port)  # fmt: skip
        self.board.publish(report)

    def _run(self) -> None:
        # Importing torch takes seconds (ten and more on a loaded machine): waiting for it only once
        # the ranks train left the first seconds of training unseen by the other nodes.
        with contextlib.suppress(Exception):
            self.board.prepare()
        # Once a local rank reported, it passed the rendezvous: the store exists (asking earlier
        # would count the store as lost before torchrun started it).
        while not self._stop.is_set() and not any(r.stage is not None for r in self._safe_states()):
            self._stop.wait(PUBLISH_S)
        while not self._stop.is_set():
            self._publish()
            if self._stop.is_set():  # every store call may block for STORE_TIMEOUT_S: none after stop
                break
            reports = self.board.read()
            with self._lock:
                self._peers.update(reports, time.monotonic())
            self._stop.wait(PUBLISH_S)
