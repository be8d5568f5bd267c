"""The rendezvous-store board: each node's mgpu publishes its ranks, the others name what they see."""

from __future__ import annotations

import datetime
import socket

from isaaclab_mgpu.launcher.peers import (
    GONE_S,
    LOST_AFTER,
    STORE_TIMEOUT_S,
    Board,
    NodeReport,
    PeerRank,
    Peers,
    tcp_store,
)


class DictStore:
    def __init__(self):
        self.data: dict[str, bytes] = {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def check(self, keys):
        return all(k in self.data for k in keys)

    def get(self, key):
        return self.data[key]


def report(seq=1, process="sleeping", quiet=1.0, node=1, **kw):
    ranks = (PeerRank(rank=2 * node, stage="update", iteration=4, quiet_s=quiet, process=process),)
    return NodeReport(node_rank=node, host=f"node{node}", seq=seq, ranks=ranks, **kw)


def test_report_round_trip_and_junk():
    r = report(verdict="rank 2: no progress", ended=True)
    assert NodeReport.loads(r.dumps()) == r
    for junk in (b"", b"[]", b'{"node_rank": 1}', b"\xff"):
        assert NodeReport.loads(junk) is None


def test_node_0s_run_folder_reaches_the_other_nodes_only():
    r = report(node=0, run_dir="logs/rsl_rl/cartpole/2026-12-01_20-41-33")
    assert NodeReport.loads(r.dumps()) == r
    node1, node0 = Peers(node_rank=1, nnodes=2, store="h:1"), Peers(node_rank=0, nnodes=2, store="h:1")
    assert node1.run_folder() is None  # nothing seen yet
    node1.update({0: r}, now=1.0)
    node0.update({1: report(node=1, run_dir="elsewhere")}, now=1.0)
    assert node1.run_folder() == ("logs/rsl_rl/cartpole/2026-12-01_20-41-33", "node0")
    assert node0.run_folder() is None  # node 0 names its own; another node's claim is not the run's
    assert NodeReport.loads(r.dumps().replace('"run_dir":"logs', '"run_dir":7,"x":"')).run_dir is None


def test_boards_share_reports_through_one_store():
    store = DictStore()
    boards = [Board(("h", 1), "job", n, 3, connect=lambda h, p: store) for n in range(3)]
    assert boards[0].read() == {}  # nobody published yet: no waiting on a missing key
    boards[1].publish(report(node=1))
    boards[2].publish(report(node=2, seq=5))
    assert {n: r.seq for n, r in boards[0].read().items()} == {1: 1, 2: 5}
    assert set(boards[1].read()) == {2}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_tcp_store_and_its_loss():
    from torch.distributed import TCPStore

    port = _free_port()
    server = TCPStore(
        "127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=5)
    )
    node0 = Board(("127.0.0.1", port), "job", 0, 2)
    node1 = Board(("127.0.0.1", port), "job", 1, 2)
    assert node1.publish(report(node=1))
    assert node0.read()[1] == report(node=1)
    del server  # the node serving the store is gone
    assert node0.read() is None
    peers = Peers(1, 2, f"127.0.0.1:{port}")
    peers.update(None, now=100.0)
    assert peers.elsewhere(100.0 + STORE_TIMEOUT_S, bound=10) == (
        f"the rendezvous store at 127.0.0.1:{port} stopped answering 3 s ago: node 0, which serves it, "
        "is gone (its torchrun or its machine)"
    )
    # The node serving the store knows when its own torchrun ended: no news there.
    own = Peers(0, 2, f"127.0.0.1:{port}", serves_store=True)
    own.update(None, now=100.0)
    assert own.elsewhere(100.0 + STORE_TIMEOUT_S, bound=10) is None


def test_a_stopped_rank_elsewhere_is_named_with_its_node_host_and_iteration():
    peers = Peers(0, 2, "n0:29500")
    peers.update({1: report(seq=1, process="stopped", quiet=12)}, now=10.0)
    peers.update({1: report(seq=2, process="stopped", quiet=13)}, now=11.0)
    assert peers.elsewhere(11.5, bound=10) == (
        "rank 2 (node rank 1 on node1) at iteration 4, stage update: its process is stopped "
        "(SIGSTOP, a debugger, or a frozen machine)"
    )


def test_a_silent_rank_elsewhere_and_nothing_while_all_progress():
    peers = Peers(0, 2, "n0:29500")
    peers.update({1: report(seq=1, quiet=2)}, now=10.0)
    assert peers.elsewhere(10.5, bound=10) is None
    peers.update({1: report(seq=2, quiet=11)}, now=11.0)
    assert (
        "rank 2 (node rank 1 on node1) at iteration 4, stage update: no progress for 11 s"
        in peers.elsewhere(11, 10)
    )


def test_a_node_whose_mgpu_stopped_publishing_is_gone():
    peers = Peers(0, 3, "n0:29500")
    peers.update({1: report(seq=7), 2: report(seq=3, node=2)}, now=10.0)
    peers.update({1: report(seq=7), 2: report(seq=4, node=2)}, now=10.0 + GONE_S)
    assert peers.elsewhere(10.0 + GONE_S, bound=100) == (
        "node 1's mgpu on node1 stopped publishing 5 s ago: it is gone (killed, or its machine is down)"
    )
    # A node that said it was ending is not lost when it goes quiet.
    done = Peers(0, 2, "n0:29500")
    done.update({1: report(seq=7, ended=True)}, now=0.0)
    assert done.elsewhere(60.0, bound=100) is None


def test_the_store_server_judges_by_what_it_saw_before_its_own_store_ended():
    # Node 0's torchrun served the store and ended after its rank failed: node 1's sequence stops
    # moving for node 0 then, which says nothing about node 1; its last report still does.
    own = Peers(0, 2, "n0:29500", serves_store=True)
    own.update({1: report(seq=1, process="stopped", quiet=9)}, now=10.0)
    own.update({1: report(seq=2, process="stopped", quiet=10)}, now=10.5)
    own.update(None, now=11.0)
    assert own.elsewhere(11.0 + 2 * GONE_S, bound=float("inf")) == (
        "rank 2 (node rank 1 on node1) at iteration 4, stage update: its process is stopped "
        "(SIGSTOP, a debugger, or a frozen machine)"
    )
    # Had node 1 stopped publishing while the store still answered, it is gone.
    own.update({1: report(seq=2)}, now=10.5 + GONE_S)
    assert "node 1's mgpu on node1 stopped publishing" in own.elsewhere(11.0 + GONE_S, bound=100)


def test_a_node_that_never_published():
    peers = Peers(1, 2, "n0:29500")
    peers.update({}, now=0.0)
    assert peers.elsewhere(1.0, bound=10) is None
    assert (
        peers.elsewhere(GONE_S, bound=10)
        == "node 0's mgpu never published (it did not start, or cannot reach n0:29500)"
    )
    # While our own reads fail, a report we never saw is no news of that node.
    blind = Peers(0, 2, "n0:29500", serves_store=True)
    blind.update({}, now=0.0)
    blind.update(None, now=1.0)
    assert blind.elsewhere(2 * GONE_S, bound=10) is None


def test_tcp_store_is_imported_lazily():
    import subprocess
    import sys

    code = "import sys, isaaclab_mgpu.launcher.peers; print('torch' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )
    assert callable(tcp_store)


def test_a_hang_is_known_elsewhere_by_a_verdict_or_a_stopped_rank_not_by_a_crash():
    crashed = Peers(0, 2, "n0:29500")
    crashed.update({1: report(process="gone")}, now=1.0)
    assert not crashed.hung_elsewhere()  # a rank that died is a failure there, not a hang
    stopped = Peers(0, 2, "n0:29500")
    stopped.update({1: report(process="stopped")}, now=1.0)
    assert stopped.hung_elsewhere()
    judged = Peers(0, 2, "n0:29500")
    judged.update({1: report(process="gone", verdict="rank 2 (local rank 0) on node1: no progress")}, now=1.0)
    assert judged.hung_elsewhere()


def test_one_slow_answer_is_not_the_store_s_end():
    class Flaky(DictStore):
        fail = 0

        def check(self, keys):
            if self.fail:
                self.fail -= 1
                raise TimeoutError("slow")
            return super().check(keys)

    store = Flaky()
    connects = []
    board = Board(("h", 1), "job", 0, 2, connect=lambda h, p: connects.append(1) or store)
    Board(("h", 1), "job", 1, 2, connect=lambda h, p: store).publish(report(node=1))
    assert board.read() == {1: report(node=1)}
    store.fail = LOST_AFTER - 1
    assert [board.read() for _ in range(LOST_AFTER - 1)] == [None] * (LOST_AFTER - 1)
    assert not board.lost and set(board.read()) == {1}  # connected again, and answered
    assert len(connects) == LOST_AFTER
    store.fail = LOST_AFTER
    assert [board.read() for _ in range(LOST_AFTER)] == [None] * LOST_AFTER
    assert board.lost and board.read() is None and not board.publish(report(node=0))
