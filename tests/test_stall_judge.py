"""The stall watch's verdicts on described progress reports (the real-process tests are in test_stall.py)."""

from __future__ import annotations

import json

from isaaclab_mgpu.launcher.supervise.stall import Report, StallMonitor, StallOptions, judge, stack_tail

T0 = 1_000_000.0


def rep(rank, stage, iteration=None, at=T0, pid=None, warmup=False):
    pid = pid if pid is not None else 100 + rank
    return Report(rank, rank, pid, "node7", stage, iteration, at, warmup=warmup)


def running(_pid):
    return "sleeping"


def verdict(options, reports, now, ranks=(0, 1), process=running, clocks=None, started=T0 - 100):
    reports = {r.rank: r for r in reports}
    clocks = clocks or {r: x.time for r, x in reports.items()}
    return judge(options, ranks, reports, clocks, now, started, process, "node7")


def test_a_slow_but_progressing_rank_is_never_reported():
    opts = StallOptions(stall_timeout=20)
    # Rank 1's iteration takes 19 s; rank 0 waits for it in the all-reduce just as long.
    beats = [rep(0, "update", 4, at=T0), rep(1, "rollout", 4, at=T0 + 0.5)]
    assert verdict(opts, beats, T0 + 19.9) is None
    stall = verdict(opts, beats, T0 + 20.1)
    assert stall is not None and stall.phase == "training"


def test_a_stopped_rank_is_blamed_before_the_one_waiting_for_it():
    opts = StallOptions(stall_timeout=20)
    beats = [rep(0, "update", 4, at=T0 + 1), rep(1, "rollout", 4, at=T0)]
    stall = verdict(opts, beats, T0 + 21, process=lambda pid: "stopped" if pid == 101 else "sleeping")
    assert (stall.cause, stall.culprits) == ("stopped", (1,))
    assert "rank 1 (local rank 1) on node7" in stall.headline() and "stopped" in stall.headline()
    assert "iteration 4, rollout" in stall.headline()


def test_the_rank_behind_is_blamed_when_nothing_is_stopped():
    opts = StallOptions(stall_timeout=20)
    beats = [rep(0, "update", 4, at=T0 + 1), rep(1, "rollout", 4, at=T0)]
    stall = verdict(opts, beats, T0 + 22)
    assert (stall.cause, stall.culprits) == ("behind", (1,))


def test_local_ranks_waiting_together_point_at_another_node_on_a_multi_node_run():
    beats = [rep(2, "update", 4, at=T0), rep(3, "update", 4, at=T0)]
    multi = verdict(StallOptions(stall_timeout=20, multi_node=True), beats, T0 + 21, ranks=(2, 3))
    assert (multi.cause, multi.culprits) == ("peer", ())
    assert "peer on another node" in multi.headline()
    single = verdict(StallOptions(stall_timeout=20), beats, T0 + 21, ranks=(2, 3))
    assert single.cause == "same-place" and "communication hang" in single.headline()


def test_start_up_is_bounded_by_the_newest_report_of_any_local_rank():
    opts = StallOptions(stall_timeout=20, startup_timeout=60)
    # Rank 0 waits in the first broadcast while rank 1 keeps reporting start-up stages.
    beats = [rep(0, "broadcast", at=T0), rep(1, "environment", at=T0 + 50)]
    assert verdict(opts, beats, T0 + 100) is None
    stall = verdict(opts, beats, T0 + 111)
    assert stall.phase == "startup" and stall.cause == "behind" and stall.culprits == (1,)
    assert "creating the environments" in stall.headline()


def test_a_rank_that_never_reported_is_named_and_no_report_at_all_is_the_rendezvous():
    opts = StallOptions(startup_timeout=60)
    stall = verdict(opts, [rep(0, "init", at=T0)], T0 + 61)
    assert stall.culprits == (1,) and "s (bound 60 s), never reported" in stall.headline()
    peers = verdict(
        StallOptions(startup_timeout=60, multi_node=True), [rep(0, "init", at=T0)], T0 + 61, ranks=(0,)
    )
    assert peers.cause == "peer" and peers.headline().startswith("the ranks of another node never arrived")
    assert "init_process_group" in peers.headline()
    rendezvous = verdict(opts, [], T0 + 61, started=T0)
    assert rendezvous.phase == "rendezvous" and "rendezvous" in rendezvous.headline()
    assert verdict(opts, [], T0 + 59, started=T0) is None


def test_the_first_iteration_of_a_process_counts_as_start_up():
    # skrl JAX compiles its update in the first iteration: tens of seconds of no reports.
    opts = StallOptions(stall_timeout=20, startup_timeout=60)
    beats = [rep(0, "update", 1, at=T0, warmup=True), rep(1, "update", 1, at=T0, warmup=True)]
    assert verdict(opts, beats, T0 + 59) is None
    stall = verdict(opts, beats, T0 + 61)
    assert stall.phase == "startup" and "iteration 1 (its first: start-up)" in stall.headline()
    after = [rep(0, "update", 2, at=T0), rep(1, "update", 2, at=T0)]
    assert verdict(opts, after, T0 + 21).phase == "training"


def test_bounds_of_zero_turn_the_watch_off():
    beats = [rep(0, "update", 4, at=T0), rep(1, "rollout", 4, at=T0)]
    assert verdict(StallOptions(stall_timeout=0), beats, T0 + 10_000) is None
    assert verdict(StallOptions(startup_timeout=0), [], T0 + 10_000) is None


def test_a_user_script_is_watched_only_when_it_reports_or_with_the_output_fallback():
    script = StallOptions(stall_timeout=20, reports_expected=False)
    assert verdict(script, [], T0 + 10_000) is None
    silent = StallOptions(stall_timeout=20, reports_expected=False, on_silence=True)
    stall = verdict(silent, [], T0 + 100, clocks={0: T0 + 90, 1: T0 + 50})
    assert (stall.cause, stall.culprits) == ("silent", (1,))
    assert stall.headline().startswith("no output from rank 1") and "--stall_on_silence" in stall.headline()


def test_finished_ranks_are_not_stalled():
    opts = StallOptions(stall_timeout=20)
    assert verdict(opts, [rep(0, "done", 9, at=T0), rep(1, "done", 9, at=T0)], T0 + 100) is None


def test_a_long_checkpoint_write_counts_as_progress(tmp_path):
    # The monitor asks the real process (this one) how much it has written.
    import os

    path = tmp_path / "progress.0.json"
    path.write_text(json.dumps({"rank": 0, "local_rank": 0, "pid": os.getpid(), "host": "h",
                                "stage": "checkpoint", "iteration": 5, "time": T0}))  # fmt: skip
    monitor = StallMonitor(StallOptions(stall_timeout=20), str(tmp_path), (0,), started=T0 - 10)
    assert monitor.check(now=T0 + 10) is None
    (tmp_path / "blob").write_bytes(b"x" * 100_000)  # the "checkpoint" grows
    assert monitor.check(now=T0 + 30) is None  # written since the last look: progressing
    assert monitor.check(now=T0 + 45) is None
    stall = monitor.check(now=T0 + 51)  # nothing written for 21 s
    assert stall is not None and stall.culprits == (0,)


def test_stack_tail_takes_the_main_threads_innermost_frames():
    dump = (
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "threading.py", line 320 in wait\n\n'
        "Current thread 0x00007f00 (most recent call first):\n"
        '  File "ppo.py", line 129 in act\n'
        '  File "train.py", line 196 in _train\n'
    )
    tail = stack_tail(dump, lines=1)
    assert tail.splitlines() == [
        "Current thread 0x00007f00 (most recent call first):",
        '  File "ppo.py", line 129 in act',
    ]
    assert stack_tail("no dump here") is None


def _command(world_size, local_ranks):
    from isaaclab_mgpu.launcher.build import Command

    return Command(("python",), {}, world_size, {r: "cpu" for r in local_ranks}, "torchrun", "logs/mgpu")


def _result(**kw):
    from isaaclab_mgpu.launcher.supervise import RunResult

    base = dict(exit_code=130, interrupted=False, killed_after_grace=False, failure=None, log_dir=None,
                survivors=())  # fmt: skip
    return RunResult(**{**base, **kw})


def test_a_stop_from_another_node_is_not_called_a_failure_of_the_local_rank():
    import pytest

    from isaaclab_mgpu.contract.errors import WorkerFailure
    from isaaclab_mgpu.launch import exit_code
    from isaaclab_mgpu.launcher.spec import LaunchSpec
    from isaaclab_mgpu.launcher.supervise import RankFailure

    spec = LaunchSpec(device="cpu", nnodes="2")
    failure = RankFailure(0, 0, "node0", 130, None, None)
    with pytest.raises(WorkerFailure) as multi:
        exit_code(_result(failure=failure), _command(2, [0]), spec)
    assert multi.value.exit_code == 130 and "stopped on another node" in str(multi.value)
    with pytest.raises(WorkerFailure) as single:
        exit_code(_result(failure=failure), _command(2, [0, 1]), spec)
    assert "rank 0 on node0 failed with exit code 130" in str(single.value)
    reset = RankFailure(
        0, 0, "node0", 1, None, "RuntimeError: [pair.cc:538] Read error: Connection reset by peer"
    )
    with pytest.raises(WorkerFailure) as broke:
        exit_code(_result(failure=reset, exit_code=1), _command(2, [0]), spec)
    assert "connection to a rank on another node broke" in str(broke.value)


def test_a_hang_exits_4_and_suggests_probe_nccl_with_the_same_launch_options():
    import pytest

    from isaaclab_mgpu.contract.errors import Hang
    from isaaclab_mgpu.launch import exit_code
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    stall = verdict(StallOptions(startup_timeout=60), [], T0 + 61, started=T0)
    spec = LaunchSpec(device="cpu", nnodes="2", node_rank=0, master_addr="10.0.0.1", master_port=29511)
    with pytest.raises(Hang) as hang:
        exit_code(_result(exit_code=4, interrupted=True, stall=stall), _command(2, [0]), spec)
    text = str(hang.value)
    assert hang.value.exit_code == 4 and "rendezvous" in text and "--nnodes 2 at 10.0.0.1:29511" in text
    assert text.endswith(
        "mgpu probe-nccl --device cpu --world-size 2 --nnodes 2 --node_rank 0 --master_addr 10.0.0.1 "
        "--master_port 29511"
    )


def test_a_collective_that_fails_after_a_long_wait_on_a_multi_node_run_is_a_peer_stall(tmp_path):
    def write(stage, at, warmup=False):
        record = {"rank": 0, "local_rank": 0, "pid": 1, "host": "node0", "stage": stage, "iteration": 4,
                  "time": at, "warmup": warmup}  # fmt: skip
        (tmp_path / "progress.0.json").write_text(json.dumps(record) + " " * 40)

    multi = StallOptions(stall_timeout=20, multi_node=True)
    write("update", T0)
    stall = StallMonitor(multi, str(tmp_path), (0,)).after_failure(0, now=T0 + 15)
    assert stall is not None and stall.cause == "peer" and stall.failed_after_wait
    assert "then its collective failed" in stall.headline()
    # A quick failure is the rank's own; so is one outside a collective, or on one node.
    assert StallMonitor(multi, str(tmp_path), (0,)).after_failure(0, now=T0 + 5) is None
    single = StallOptions(stall_timeout=20)
    assert StallMonitor(single, str(tmp_path), (0,)).after_failure(0, now=T0 + 15) is None
    write("rollout", T0)
    assert StallMonitor(multi, str(tmp_path), (0,)).after_failure(0, now=T0 + 15) is None
    write("update", T0, warmup=True)
    assert StallMonitor(multi, str(tmp_path), (0,)).after_failure(0, now=T0 + 15) is None
    # Another node said it found a hang: a failure however soon is that hang's.
    write("update", T0)
    assert StallMonitor(multi, str(tmp_path), (0,)).after_failure(0, now=T0 + 1, min_wait_s=0.0) is not None


def test_a_rank_whose_process_ended_without_its_done_report_died(tmp_path):
    import os
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # a real process that is gone (its pid free, not reused within the test)

    def write(rank, pid, stage):
        record = {"rank": rank, "local_rank": rank, "pid": pid, "host": "h", "stage": stage, "iteration": 6,
                  "time": T0}  # fmt: skip
        (tmp_path / f"progress.{rank}.json").write_text(json.dumps(record) + " " * 40)

    write(0, os.getpid(), "update")  # alive, in a collective
    write(1, ended.pid, "rollout")  # gone mid-iteration: died
    worker = StallMonitor(StallOptions(stall_timeout=20), str(tmp_path), (0, 1))
    worker.check(now=T0 + 1)
    assert [r.rank for r in worker.dead()] == [1]
    write(1, ended.pid, "done")  # it reported done before it ended: a normal end
    assert worker.dead() == ()
    write(1, ended.pid, "rollout")
    script = StallMonitor(StallOptions(stall_timeout=20, reports_expected=False), str(tmp_path), (0, 1))
    script.check(now=T0 + 1)
    assert script.dead() == ()  # a user script need not report done: never judged dead
