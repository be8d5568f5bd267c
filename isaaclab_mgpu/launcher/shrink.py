"""Shrink instead of stop: a lost node costs the run that node, not the run (``--min_nodes``).

torchrun's own elastic shrink (``--nnodes MIN:MAX``) leaves the survivors waiting in a collective
that cannot finish (pytorch issue 111646). So when an attempt of a multi-node run fails because
another node is gone (:meth:`~isaaclab_mgpu.launcher.peers.Peers.lost_nodes`), restarts remain, and
at least :attr:`~isaaclab_mgpu.launcher.spec.LaunchSpec.node_floor` nodes survive, each surviving
node's mgpu restarts its torchrun itself with the new world (:func:`plan`, :func:`reshaped`). Who
becomes node 0 and hosts the store, and each rank's ``--num_envs`` after (``--shrink_keep``):
docs/supervision.md, "Shrink instead of stop: a lost node".

A node's own rank failing ends its torchrun (and node 0's, the store) just as a lost machine does,
so the peers' reports only give candidates: each node's mgpu of a ``--min_nodes`` run listens on a
port of its own for its whole life (:class:`Liveness`, published in its report) and a survivor asks
each candidate there (:func:`answers`). A connection taken is a live mgpu, and the run restarts
whole; refused or unanswered, the node is lost. Every survivor decides alone from the same reports;
the nodes never vote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from isaaclab_mgpu.contract.settings import DEFAULTS, FALLBACK
from isaaclab_mgpu.contract.worker_args import is_isaac_task
from isaaclab_mgpu.launcher.resolve import ResolvedSpec
from isaaclab_mgpu.launcher.scale import without_option
from isaaclab_mgpu.launcher.spec import split_endpoint

#: The store's host when one node is left: its own torchrun serves it.
ALONE = "127.0.0.1"


@dataclass(frozen=True)
class Shrink:
    """One shrink, as this node plans it."""

    lost: tuple[int, ...]
    """The node ranks (of the world before) that are gone."""

    lost_hosts: tuple[str, ...]
    """Their hosts, as they last published them (``?`` when never seen)."""

    nodes_before: int
    """Nodes before the shrink."""

    nodes_after: int
    """Nodes after it."""

    node_rank_before: int
    """This node's rank before."""

    node_rank: int
    """This node's rank after (0: it keeps the run's record)."""

    master: str
    """The rendezvous store's host after the shrink."""

    ranks_before: int
    """World size before."""

    ranks_after: int
    """World size after."""

    envs_before: int | None
    """Environments per rank before; None when mgpu does not know (an Isaac Lab task's default)."""

    envs_after: int | None
    """Environments per rank after (the ``--num_envs`` the ranks get); None: unchanged."""

    def event(self, from_iteration: int | None) -> dict[str, object]:
        """The fields of the ledger's ``shrink`` event, resuming from checkpoint ``from_iteration``."""
        return {
            "lost_nodes": self.lost, "lost_hosts": self.lost_hosts,
            "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
            "ranks_before": self.ranks_before, "ranks_after": self.ranks_after,
            "num_envs_before": self.envs_before, "num_envs_after": self.envs_after,
            "from_iteration": from_iteration,
            "keeper_before": self.node_rank_before if self.node_rank == 0 else None,
        }  # fmt: skip

    def describe(self) -> str:
        """One line for the console and the record."""
        hosts = ", ".join(f"node {n} ({h})" for n, h in zip(self.lost, self.lost_hosts, strict=True))
        envs = ""
        if self.envs_before is not None and self.envs_after is not None:
            envs = (
                f"; --num_envs {self.envs_before} → {self.envs_after} per rank "
                f"({self.envs_before * self.ranks_before} → {self.envs_after * self.ranks_after} in all)"
            )
        elif self.envs_before is not None:
            envs = f"; {self.envs_before} environments per rank, as before"
        if self.node_rank == self.node_rank_before:
            me = f"this node stays node {self.node_rank}"
        else:
            keeps = ", which keeps the run's record" if self.node_rank == 0 else ""
            me = f"this node is node {self.node_rank} now (was {self.node_rank_before}){keeps}"
        return (
            f"{hosts} lost: shrinking {self.nodes_before} → {self.nodes_after} nodes "
            f"({self.ranks_before} → {self.ranks_after} ranks), {me}{envs}"
        )


def envs_per_rank(r: ResolvedSpec) -> int | None:
    """Each rank's environment count: ``--num_envs``, else the built-in task's default; None: unknown."""
    w = r.spec.worker
    if w is None or not r.spec.builtin_worker:
        return None
    if w.num_envs is not None:
        return w.num_envs
    return None if is_isaac_task(w.task) else DEFAULTS.get(w.task, FALLBACK).num_envs


def plan(r: ResolvedSpec, lost: tuple[int, ...], hosts: Mapping[int, str], host: str) -> Shrink | None:
    """The shrink after losing nodes ``lost`` (``host``: ours); None when no shrink applies."""
    floor, nodes, me = r.spec.node_floor, r.nnodes_max, r.node_rank or 0
    gone = tuple(sorted(n for n in set(lost) if 0 <= n < nodes))
    if floor is None or not gone or me in gone or not isinstance(r.nproc, int):
        return None
    survivors = [n for n in range(nodes) if n not in gone]
    if len(survivors) < floor:
        return None
    first = survivors[0]
    after = len(survivors)
    if after == 1:
        master = ALONE
    elif first == 0:
        endpoint_host = split_endpoint(r.rdzv_endpoint or "")[0].strip("[]")  # an address: no brackets
        master = r.spec.master_addr or endpoint_host or ALONE
    else:
        master = host if first == me else hosts.get(first, "")
        if not master:
            return None  # the new node 0's host was never seen: no world to meet in
    before_ranks, after_ranks = r.nproc * nodes, r.nproc * after
    envs = envs_per_rank(r)
    new = envs
    if envs is not None and r.spec.shrink_keep == "total":
        new = max(1, round(envs * before_ranks / after_ranks))
    return Shrink(
        lost=gone,
        lost_hosts=tuple(hosts.get(n, "?") for n in gone),
        nodes_before=nodes,
        nodes_after=after,
        node_rank_before=me,
        node_rank=survivors.index(me),
        master=master,
        ranks_before=before_ranks,
        ranks_after=after_ranks,
        envs_before=envs,
        envs_after=new,
    )


def reshaped(r: ResolvedSpec, s: Shrink) -> ResolvedSpec:
    """``r`` on the world after shrink ``s``, the floor kept so that a later loss may shrink again."""
    spec = r.spec
    changes: dict[str, object] = {"nnodes": str(s.nodes_after), "min_nodes": spec.node_floor}
    if spec.node_rank is not None:
        changes["node_rank"] = s.node_rank
    if spec.master_addr is not None or r.rdzv_endpoint is None:
        changes["master_addr"] = s.master
    if s.envs_after is not None and s.envs_after != s.envs_before:
        changes["training_args"] = (*without_option(spec.training_args, "num_envs"), "--num_envs",
                                    str(s.envs_after))  # fmt: skip
    endpoint = r.rdzv_endpoint
    if endpoint is not None:
        port = split_endpoint(endpoint)[1]
        endpoint = f"{s.master}:{port}" if port else s.master
    return dataclasses.replace(
        r,
        spec=dataclasses.replace(spec, **changes),
        nnodes=str(s.nodes_after),
        node_rank=s.node_rank,
        rdzv_endpoint=endpoint,
    )


class Liveness:
    """A listening socket for the life of this mgpu, so a peer can tell it alive from this node lost."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("", 0))
        self.port: int = self._sock.getsockname()[1]
        """The port, published to the other nodes."""
        threading.Thread(target=self._serve, name="mgpu-liveness", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            conn.close()

    def close(self) -> None:
        """Stop listening (this mgpu is ending)."""
        # close() alone leaves the port listening while _serve is blocked in accept() (the kernel
        # keeps the socket until that call returns); shutdown() ends the listening and wakes it.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()


def answers(host: str, port: int, tries: int = 2, timeout: float = 1.0) -> bool:
    """True when ``host:port`` takes a connection (a live mgpu's :class:`Liveness`)."""
    for attempt in range(tries):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True
        except ConnectionRefusedError:
            return False  # the host is up and nothing listens there: that mgpu is gone
        except OSError:
            if attempt + 1 < tries:
                time.sleep(0.2)
    return False
