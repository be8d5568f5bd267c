"""Shrink instead of stop, the pure parts: the options, the plan of the smaller world and its
command, the lost nodes the peers' reports show, the job file, the ledger's ``shrink`` event."""

from __future__ import annotations

import pytest
from conftest import machine

from isaaclab_mgpu.contract import events
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.launcher import jobfiles, shrink
from isaaclab_mgpu.launcher.build import build
from isaaclab_mgpu.launcher.peers import GONE_S, STORE_TIMEOUT_S, NodeReport, PeerRank, Peers
from isaaclab_mgpu.launcher.resolve import resolve
from isaaclab_mgpu.launcher.spec import LaunchSpec
from isaaclab_mgpu.report.runs import _event_line


def _resolved(**kw):
    kw.setdefault("training_args", ("--rl_library", "rsl_rl", "--num_envs", "16"))
    spec = LaunchSpec(device="cpu", nproc_per_node="2", master_addr="node0", master_port=29500, **kw)
    return resolve(spec, machine(0), strict=False, port_free=lambda p: True, free_port=lambda: 45678)


def test_min_nodes_and_the_min_max_spelling_agree_or_are_refused():
    assert LaunchSpec(nnodes="2", min_nodes=1).node_floor == 1
    assert LaunchSpec(nnodes="1:2").node_floor == 1
    assert LaunchSpec(nnodes="1:2", min_nodes=1).node_floor == 1
    assert LaunchSpec(nnodes="2").node_floor is None
    assert LaunchSpec(nnodes="2", min_nodes=2).node_floor is None  # nothing to shrink to
    with pytest.raises(UsageError, match="disagree"):
        LaunchSpec(nnodes="1:3", min_nodes=2)
    with pytest.raises(UsageError, match="from 1 to"):
        LaunchSpec(nnodes="2", min_nodes=3)
    with pytest.raises(UsageError, match="shrink_keep"):
        LaunchSpec(nnodes="2", min_nodes=1, shrink_keep="some")


def test_losing_node_1_of_2_keeps_node_0_alone_with_the_run_s_environments():
    r = _resolved(nnodes="2", node_rank=0, min_nodes=1)
    plan = shrink.plan(r, (1,), {1: "node1"}, "node0")
    assert plan is not None
    assert (plan.nodes_after, plan.node_rank, plan.master, plan.ranks_after) == (1, 0, "127.0.0.1", 2)
    assert (plan.envs_before, plan.envs_after) == (16, 32)
    cmd = build(shrink.reshaped(r, plan))
    argv = list(cmd.argv)
    assert argv[argv.index("--nnodes") + 1] == "1" and argv[argv.index("--master_addr") + 1] == "127.0.0.1"
    tail = argv[argv.index("isaaclab_mgpu.worker") :]
    assert tail.count("--num_envs") == 1 and tail[tail.index("--num_envs") + 1] == "32"
    assert cmd.world_size == 2
    per_rank = shrink.plan(
        _resolved(nnodes="2", node_rank=0, min_nodes=1, shrink_keep="per_rank"), (1,), {}, "h"
    )
    assert per_rank is not None and per_rank.envs_after == 16


def test_losing_node_0_makes_the_next_survivor_node_0_with_its_host_as_the_store():
    r = _resolved(nnodes="3", node_rank=2, min_nodes=1)
    plan = shrink.plan(r, (0,), {0: "node0", 1: "node1"}, "node2")
    assert plan is not None
    assert (plan.nodes_after, plan.node_rank, plan.master) == (2, 1, "node1")
    assert plan.envs_after == 24  # 16 x 6 ranks / 4
    new = shrink.reshaped(r, plan)
    assert (new.nnodes, new.node_rank, new.spec.master_addr, new.spec.node_floor) == ("2", 1, "node1", 1)
    # The survivor first in order becomes node 0 and serves the store on its own host.
    first = shrink.plan(_resolved(nnodes="3", node_rank=1, min_nodes=1), (0,), {2: "node2"}, "node1")
    assert first is not None and (first.node_rank, first.master) == (0, "node1")


@pytest.mark.parametrize(
    ("endpoint", "master"),
    [("[fd00::1]", "fd00::1"), ("[fd00::1]:29400", "fd00::1"), ("node0", "node0"), ("node0:29400", "node0")],
)
def test_node_0_keeps_the_store_on_the_rendezvous_host_written_as_an_address(endpoint, master):
    spec = LaunchSpec(
        device="cpu",
        nproc_per_node="2",
        rdzv_backend="c10d",
        rdzv_endpoint=endpoint,
        rdzv_id="x",
        nnodes="3",
        node_rank=0,
        min_nodes=1,
        training_args=("--rl_library", "rsl_rl"),
    )
    r = resolve(spec, machine(0), strict=False, port_free=lambda p: True, free_port=lambda: 45678)
    plan = shrink.plan(r, (2,), {1: "node1", 2: "node2"}, "node0")
    # --master_addr takes an address: an IPv6 one without its brackets, with or without a port given.
    assert plan is not None and plan.master == master


def test_no_shrink_without_a_floor_below_it_or_for_a_lost_node_itself():
    assert shrink.plan(_resolved(nnodes="2", node_rank=0), (1,), {}, "h") is None
    assert shrink.plan(_resolved(nnodes="3", node_rank=0, min_nodes=2), (1, 2), {}, "h") is None
    assert shrink.plan(_resolved(nnodes="2", node_rank=0, min_nodes=1), (), {}, "h") is None
    assert shrink.plan(_resolved(nnodes="2", node_rank=1, min_nodes=1), (1,), {}, "h") is None


def _report(node, seq, process="sleeping", ended=False):
    ranks = (PeerRank(rank=node, stage="update", iteration=4, quiet_s=0.5, process=process),)
    return NodeReport(
        node_rank=node, host=f"node{node}", seq=seq, ranks=ranks, ended=ended, alive_port=7000 + node
    )


def test_lost_node_candidates_are_the_silent_ones_and_each_mgpu_answers_for_itself():
    peers = Peers(0, 3, "node0:29500", serves_store=True)
    peers.update({1: _report(1, 1), 2: _report(2, 1)}, now=0.0)
    peers.update({1: _report(1, 1), 2: _report(2, 9)}, now=GONE_S)
    assert peers.lost_nodes(GONE_S) == (1,)
    assert peers.hosts() == {1: ("node1", 7001), 2: ("node2", 7002)}
    # A node that ended on purpose is not lost.
    done = Peers(0, 2, "node0:29500")
    done.update({1: _report(1, 1, ended=True)}, now=0.0)
    assert done.lost_nodes(60.0) == ()
    # A candidate's mgpu alive answers on its liveness port; once it is gone, the port refuses.
    alive = shrink.Liveness()
    try:
        assert shrink.answers("127.0.0.1", alive.port)
        assert shrink.answers("127.0.0.1", alive.port)  # taken and closed, every time
    finally:
        alive.close()
    assert not shrink.answers("127.0.0.1", alive.port)


def test_a_silent_store_loses_its_node_unless_its_last_report_showed_its_own_rank_failing():
    gone = Peers(1, 2, "node0:29500")
    gone.update({0: _report(0, 1)}, now=0.0)
    gone.update(None, now=1.0)
    assert gone.lost_nodes(1.0) == ()  # not yet: one failed answer
    assert gone.lost_nodes(1.0 + STORE_TIMEOUT_S) == (0,)
    alive = Peers(1, 2, "node0:29500")
    alive.update({0: _report(0, 1, process="gone")}, now=0.0)
    alive.update(None, now=1.0)
    assert alive.lost_nodes(1.0 + STORE_TIMEOUT_S) == ()


def test_the_sbatch_keeps_the_allocation_when_a_floor_is_given():
    options = jobfiles.JobOptions(kind="sbatch", job_name="j")
    text = jobfiles.emit(LaunchSpec(device="cpu", nproc_per_node="2", nnodes="2", min_nodes=1), options)
    assert "#SBATCH --no-kill" in text and "srun --no-kill --kill-on-bad-exit=0" in text
    assert "--min_nodes 1" in text.splitlines()[-1]
    plain = jobfiles.emit(LaunchSpec(device="cpu", nproc_per_node="2", nnodes="2"), options)
    assert "--no-kill" not in plain and "srun --kill-on-bad-exit=1" in plain


def test_the_shrink_event_round_trips_folds_and_reads_in_the_timeline():
    sizes = {"nodes_before": 2, "nodes_after": 1, "ranks_before": 4, "ranks_after": 2}
    envs = {"num_envs_before": 256, "num_envs_after": 512}
    e = events.Shrink(time=1.0, host="node1", attempt=0, lost_nodes=(0,), lost_hosts=("node0",), **sizes,
                      **envs, from_iteration=10, keeper_before=1)  # fmt: skip
    assert events.parse(events.line(e).decode()) == e
    assert events.fold([e]).shrinks == 1 and events.fold([e]).world_size == 2
    label, text = _event_line(e)
    assert label == "shrink" and "node 0 (node0) lost: 2 → 1 nodes" in text and "256 → 512" in text


@pytest.mark.parametrize("kind", ["pytorchjob", "trainjob"])
def test_kubernetes_job_files_refuse_a_floor(kind):
    options = jobfiles.JobOptions(kind=kind, job_name="j")
    with pytest.raises(UsageError, match="operator replaces a lost pod"):
        jobfiles.emit(LaunchSpec(device="cpu", nproc_per_node="2", nnodes="2", min_nodes=1), options)
