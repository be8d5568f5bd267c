"""The run ledger (``events.jsonl``): its schema, reader and writer, and the events real runs leave."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from restart_helpers import SHORT, Run, one_resumed_run, run_folders, summary_of, train_argv
from training_helpers import child_env

from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract.layout import EVENTS


def _write(folder, *events):
    appender = ev.Appender(folder / EVENTS)
    for e in events:
        assert appender.append(e)
    appender.close()


def test_every_event_reads_back_as_written(tmp_path):
    written = [
        ev.Launched(time=1.0, host="n0", argv=("mgpu", "train"), essentials={"total": 6}, job_id="42"),
        ev.AttemptStarted(time=2.0, host="n0", attempt=0, world_size=2, local_ranks=(0, 1), resumes_at=0),
        ev.RanksUp(time=2.5, host="n0", attempt=0, pids={"0": 11, "1": 12}, logs="/l"),
        ev.Progress(
            time=3.0,
            host="n0",
            attempt=0,
            iteration=3,
            s_per_iteration=0.5,
            ranks=(ev.RankPace(0, 0.4, 0.1), ev.RankPace(1, 0.3, 0.2)),
        ),
        ev.Checkpoint(time=3.1, host="n0", attempt=0, iteration=2, path="/r/model_2.pt", bytes=100),
        ev.StragglerNamed(time=3.2, host="n0", attempt=0, rank=1, slower=1.8),
        ev.Fault(
            time=4.0,
            host="n0",
            attempt=0,
            rank=1,
            signal="SIGKILL",
            reason="signal SIGKILL",
            iteration=4,
            checkpoint=2,
            lost=2,
        ),
        ev.Restart(time=4.1, host="n0", attempt=1, from_iteration=2, lost=2, restarts_left=0),
        ev.Finished(time=9.0, host="n0", attempt=1, iteration=6, seconds=8.0),
    ]
    _write(tmp_path, *written)
    ledger = ev.read(tmp_path)
    assert ledger is not None and ledger.skipped == 0
    assert list(ledger.events) == written
    first = json.loads((tmp_path / EVENTS).read_text().splitlines()[0])
    assert (first["v"], first["kind"]) == (ev.VERSION, "launched")


def test_torn_last_line_unknown_kinds_and_newer_versions_are_skipped(tmp_path):
    _write(tmp_path, ev.Launched(time=1.0, essentials={"total": 6}))
    with open(tmp_path / EVENTS, "a") as f:
        f.write(json.dumps({"v": 1, "kind": "teleported", "time": 2.0}) + "\n")  # a kind we do not know
        f.write(json.dumps({"v": ev.VERSION + 1, "kind": "finished", "time": 3.0}) + "\n")  # newer schema
        f.write(json.dumps({"v": 1, "kind": "finished", "time": "soon"}) + "\n")  # a field that does not read
        f.write(json.dumps({"v": 1, "kind": "progress", "time": 4.0, "iteration": 2, "new": 1}) + "\n")
        f.write('{"v": 1, "kind": "finished", "ti')  # the writer killed mid-line
    ledger = ev.read(tmp_path)
    assert ledger is not None
    assert [e.kind for e in ledger.events] == ["launched", "progress"]
    assert ledger.skipped == 4
    assert ev.fold(ledger.events).status == "running"  # the torn "finished" did not count


def test_no_ledger_reads_as_none(tmp_path):
    assert ev.read(tmp_path) is None


def test_one_write_per_event_on_an_append_fd(tmp_path, monkeypatch):
    writes = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real(fd, data))
    _write(tmp_path, ev.Finished(time=1.0, iteration=3), ev.Failed(time=2.0, exit_code=1, reason="x"))
    assert [w.count(b"\n") for w in writes] == [1, 1] and all(w.endswith(b"\n") for w in writes)
    # Appending: a second writer object (a requeued job's mgpu) adds after the first's lines.
    _write(tmp_path, ev.Launched(time=3.0))
    assert [e.kind for e in ev.read(tmp_path).events] == ["finished", "failed", "launched"]


def test_fold_counts_restarts_requeues_and_the_end():
    t = iter(range(100))
    story = [
        ev.Launched(time=next(t), essentials={"total": 150, "world_size": 2}),
        ev.AttemptStarted(time=next(t), attempt=0, world_size=2),
        ev.Progress(time=next(t), attempt=0, iteration=20),
        ev.Fault(time=next(t), attempt=0, rank=1, reason="SIGKILL", iteration=22, checkpoint=20, lost=2),
        ev.Restart(time=next(t), attempt=1, from_iteration=20, lost=2),
        ev.AttemptStarted(time=next(t), attempt=1, world_size=2),
        ev.Requeue(time=next(t), attempt=1, iteration=34, requeued=True, job_id="7"),
    ]
    f = ev.fold(story)
    assert (f.status, f.iteration, f.total, f.restarts, f.requeues, f.lost) == ("requeued", 34, 150, 1, 1, 2)
    story += [
        ev.Launched(time=next(t), essentials={"total": 150}, job_id="7", continued_from=34),
        ev.AttemptStarted(time=next(t), attempt=0),
        ev.Stall(time=next(t), attempt=0, verdict="rank 0 stalled", ranks=(0,)),
        ev.Fault(time=next(t), attempt=0, outcome="hung", rank=0, iteration=40),
        ev.Failed(time=next(t), exit_code=4, reason="hang", iteration=40),
    ]
    f = ev.fold(story)
    assert (f.status, f.exit_code, f.launches, f.attempts, len(f.faults)) == ("hung", 4, 2, 3, 2)
    f = ev.fold([*story, ev.Launched(time=99), ev.Finished(time=100, iteration=150)])
    assert (f.status, f.iteration, f.exit_code, f.requeues, f.restarts) == ("finished", 150, 0, 1, 1)


def test_a_drift_warned_of_lets_the_run_finish_and_a_drift_stop_ends_it_drifted():
    fault = ev.Fault(time=2, attempt=0, rank=1, reason="CUDA out of memory", failure_class="cuda_oom",
                     restartable=False, fix="lower --num_envs")  # fmt: skip
    assert ev.parse(ev.line(fault).decode()) == fault  # the verdict's fields travel too
    warned = ev.DriftNamed(time=3, rank=1, component="normalizer", since_iteration=10, found_at=20)
    f = ev.fold([ev.Launched(time=1), warned, ev.Finished(time=4, iteration=30)])
    assert f.status == "finished"
    stopped = ev.DriftNamed(time=3, rank=1, component="policy", since_iteration=0, found_at=10, stopped=True)
    f = ev.fold([ev.Launched(time=1), stopped])
    assert (f.status, f.exit_code) == ("drifted", 65)


def test_a_stop_asked_by_mgpu_cancel_is_stopped_and_the_next_launch_takes_the_request_away(tmp_path):
    from isaaclab_mgpu.contract.layout import CANCEL
    from isaaclab_mgpu.launcher.ledger import RunLedger

    asked = ev.Interrupted(time=3, iteration=14, exit_code=143, cancelled=True)
    assert ev.parse(ev.line(asked).decode()) == asked
    f = ev.fold([ev.Launched(time=1), asked])
    assert (f.status, f.exit_code, f.iteration) == ("stopped", 143, 14)  # saved, to be continued
    plain = ev.Interrupted(time=3, iteration=14, exit_code=130)
    assert ev.fold([ev.Launched(time=1), plain]).status == "interrupted"  # Ctrl-C stays an interruption
    (tmp_path / CANCEL).write_text("SLURM job 7\n")
    record = RunLedger(tmp_path)  # the next launch of the run opens its ledger
    record.close()
    assert not (tmp_path / CANCEL).exists()


def test_a_launchs_first_account_before_it_knows_where_it_resumes_keeps_the_runs_rewards():
    from isaaclab_mgpu.contract.summary import Summary, absorb

    run = Summary(start_iteration=0, end_iteration=3, iterations=3, mean_rewards=(None, -2.1, -1.8))
    # An Isaac Lab task's rank 0 reports its folder before it resumes: nothing trained yet.
    early = Summary(start_iteration=0, end_iteration=0, mean_rewards=())
    kept = absorb(run, early, ("start_iteration", "end_iteration", "mean_rewards"), 0)
    assert (kept.end_iteration, kept.mean_rewards) == (3, (None, -2.1, -1.8))
    # Then it resumes at 3 and trains: the earlier rewards stay first.
    later = Summary(start_iteration=3, end_iteration=5, mean_rewards=(None, -1.2))
    merged = absorb(kept, later, ("start_iteration", "end_iteration", "mean_rewards"), 3)
    assert (merged.start_iteration, merged.resumed_at, merged.iterations) == (0, 3, 5)
    assert merged.mean_rewards == (None, -2.1, -1.8, None, -1.2)
    # An attempt that starts over at 0 and trains replaces them (its first iteration's account).
    over = absorb(
        kept, Summary(start_iteration=0, end_iteration=1, mean_rewards=(-3.0,)), ("mean_rewards",), 0
    )
    assert over.mean_rewards == (-3.0,)


def test_a_launch_lost_before_its_first_account_still_counts_when_the_next_launch_finishes():
    fields = {"start_iteration": 6, "end_iteration": 10, "mean_rewards": [1.0, 2.0, 3.0, 4.0]}
    story = [
        ev.Launched(time=0, essentials={"total": 10}),
        ev.AttemptStarted(time=1, attempt=0, resumes_at=0),
        # mgpu SIGKILLed at iteration 5: no account, no end; the next launch resumes model_6.pt.
        ev.Launched(time=2, essentials={"total": 10}),
        ev.AttemptStarted(time=3, attempt=0, resumes_at=6),
        ev.Account(time=4, attempt=0, fields=fields, rewards_from=6),
    ]
    s = ev.summary_of(story)
    assert (s.start_iteration, s.resumed_at, s.end_iteration, s.iterations) == (0, 6, 10, 10)
    assert s.mean_rewards == (None,) * 6 + (1.0, 2.0, 3.0, 4.0)


# -- real runs: 2 CPU ranks, a few iterations -----------------------------------------------------

#: A short run: 6 iterations of 16 cheap environments, a checkpoint every 2.
TINY = ("--num_envs", "16", "--max_iterations", "6", "--save_interval", "2", "env.episode_length=16")


def _ledger_of(folder: Path) -> list[ev.Event]:
    ledger = ev.read(folder)
    assert ledger is not None, f"no {EVENTS} in {folder}"
    assert ledger.skipped == 0
    return list(ledger.events)


def _kinds(events: list[ev.Event]) -> list[str]:
    """The kinds in order, each stretch of progress, checkpoint and rank 0's account events (their
    number depends on the machine's pace) as one ``trained``; the launcher's summary notes left out."""
    out: list[str] = []
    for e in events:
        if e.kind == "summary":
            continue
        kind = "trained" if e.kind in ("progress", "checkpoint", "account") else e.kind
        if not (kind == "trained" and out and out[-1] == "trained"):
            out.append(kind)
    return out


def _agrees_with_summary(folder: Path, events: list[ev.Event]) -> ev.Fold:
    """summary.json is the fold of the ledger beside it, and what the story says (status, iterations
    reached, restarts) is what the summary says."""
    f = ev.fold(events)
    s = summary_of(folder)
    assert ev.summary_of(events).to_json() == s
    assert (f.status, f.iteration, f.restarts) == (s["status"], s["end_iteration"], len(s["restarts"])), (
        f,
        s,
    )
    assert f.total == s["total_iterations"], (f.total, s)
    return f


def _runs_json(cwd: Path, *args: str) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "runs", *args, "--json"],
        cwd=cwd, env=child_env(cwd), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ended_run(tmp_path: Path, *args: str, code: int = 0, limit: float = 240) -> tuple[Path, list[ev.Event]]:
    """A TINY rsl_rl run with ``args`` to its end: its exit code is ``code``; its folder and ledger."""
    got, out = Run(train_argv("rsl_rl", *args, *TINY), tmp_path).finish(limit)
    assert got == code, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    return folder, _ledger_of(folder)


@pytest.mark.slow
def test_with_the_stall_watch_off_the_ranks_still_report_to_the_record(tmp_path):
    folder, events = _ended_run(tmp_path, "--stall_timeout", "0", "--startup_timeout", "0")
    assert any(isinstance(e, ev.Account) for e in events), _kinds(events)
    _agrees_with_summary(folder, events)
    s = summary_of(folder)
    assert (s["end_iteration"], len(s["mean_rewards"])) == (6, 6), s


@pytest.mark.slow
def test_a_finished_run_leaves_its_story(tmp_path):
    folder, events = _ended_run(tmp_path)
    assert _kinds(events) == ["launched", "attempt_started", "ranks_up", "trained", "finished"], _kinds(
        events
    )
    launched, started, up = events[0], events[1], events[2]
    assert isinstance(launched, ev.Launched) and launched.essentials["total"] == 6
    assert launched.essentials["world_size"] == 2 and launched.run_dir == str(folder.relative_to(tmp_path))
    assert isinstance(started, ev.AttemptStarted) and (started.world_size, started.local_ranks) == (2, (0, 1))
    assert isinstance(up, ev.RanksUp) and sorted(up.pids) == ["0", "1"] and up.logs
    progress = [e for e in events if isinstance(e, ev.Progress)]
    assert progress[-1].iteration == 6 and progress[-1].reward is not None, progress
    # A rank's busy/wait totals grow as its next iteration begins, so the event at the last
    # iteration may find none new since the one before (seen under load): the paces are in an earlier one.
    paced = [e for e in progress if e.ranks]
    assert paced and [r.rank for r in paced[-1].ranks] == [0, 1], progress
    saved = [e for e in events if isinstance(e, ev.Checkpoint)]
    assert saved and saved[-1].iteration == 6 and saved[-1].bytes and Path(tmp_path, saved[-1].path).is_file()
    assert {e.attempt for e in events[1:]} == {0} and {e.host for e in events} == {socket.gethostname()}
    f = _agrees_with_summary(folder, events)
    assert (f.status, f.iteration, f.exit_code) == ("finished", 6, 0)
    # mgpu runs <folder> --json holds every event; the table's row knows the run has a ledger.
    told = _runs_json(tmp_path, str(folder))
    assert [e["kind"] for e in told["events"]] == [e.kind for e in events] and told["status"] == "finished"
    (row,) = _runs_json(tmp_path, "logs")
    assert (row["ledger"], row["reached"], row["total"], row["requeues"]) == (True, 6, 6, 0), row


@pytest.mark.slow
def test_a_killed_rank_is_a_fault_then_a_restart_then_the_end(tmp_path):
    """A simulated kill (rank 1 SIGKILLs itself at iteration 5) is met once and the restart finishes
    the run (its summary, its per-attempt log folders); the ledger tells it as a fault, a restart and
    the end, and ``mgpu runs`` says so. One run for what test_restarts'
    ``test_a_simulated_kill_is_met_once_and_the_restart_finishes_the_run`` checked and the ledger's
    story of it."""
    fault = ("--simulate_fault", "kill@5,rank=1", "--max_restarts", "1")
    code, out = Run(train_argv("rsl_rl", *fault, *SHORT), tmp_path).finish(300)
    assert code == 0, out[-4000:]
    assert "rank 1 SIGKILLs itself at iteration 5 of the first attempt" in out, out[-4000:]
    s = one_resumed_run(tmp_path, "rsl_rl", 4)  # one restart: met once, the restart goes past it
    assert s["restarts"][0]["how"] in ("signal SIGKILL", "signal SIGTERM"), s["restarts"]
    assert s["restarts"][0]["reached"] == 4, s["restarts"]
    # A killed rank is a transient fault: judged one a restart can mend (the survivor's broken
    # connection, when it is seen first, is a transport failure).
    verdict = s["restarts"][0]["verdict"]
    assert verdict["restart"] is True and verdict["kind"] in ("other", "transport"), verdict
    # Each attempt logs into a folder named by what the run trains, the launch and the attempt,
    # and summary.json points to both.
    logs = [Path(a["logs"]) for a in s["attempts"]]
    assert len(logs) == 2 and all(p.is_absolute() for p in logs), s["attempts"]
    for k, ranks in enumerate(logs):
        top = ranks.relative_to(tmp_path / "logs" / "mgpu").parts
        assert top == ("rsl_rl_cartpole", logs[0].parent.name, f"attempt_{k}"), ranks  # one launch
        assert "iteration" in (ranks / "rank_0" / "stdout.log").read_text(), ranks
    killed = "".join((logs[0] / "rank_1" / name).read_text() for name in ("stdout.log", "stderr.log"))
    assert "simulated fault" in killed, killed[-2000:]
    named = tmp_path / "logs" / "mgpu" / "rsl_rl_cartpole"
    assert sorted(p.name for p in named.iterdir()) == [logs[0].parent.name]
    assert sorted(p.name for p in logs[0].parent.iterdir()) == ["attempt_0", "attempt_1"]

    (folder,) = run_folders(tmp_path, "rsl_rl")
    events = _ledger_of(folder)
    kinds = [k for k in _kinds(events) if k != "straggler"]  # a loaded machine may name one
    assert kinds == [
        "launched", "attempt_started", "ranks_up", "trained", "fault",
        "restart", "attempt_started", "ranks_up", "trained", "finished",
    ], kinds  # fmt: skip
    (fault_event,) = [e for e in events if isinstance(e, ev.Fault)]
    (restart,) = [e for e in events if isinstance(e, ev.Restart)]
    assert (fault_event.attempt, fault_event.outcome) == (0, "failed"), fault_event
    # The cause is torchrun's first observed failure: rank 1's SIGKILL, or (loaded) its peer's SIGTERM.
    assert fault_event.signal in ("SIGKILL", "SIGTERM") and fault_event.reason, fault_event
    assert fault_event.iteration == 4 and fault_event.lost == 4 - fault_event.checkpoint, fault_event
    assert (restart.attempt, restart.from_iteration, restart.lost) == (
        1,
        fault_event.checkpoint,
        fault_event.lost,
    )
    second = [e for e in events if isinstance(e, ev.AttemptStarted)][1]
    assert (second.attempt, second.resumes_at) == (1, fault_event.checkpoint), second
    f = _agrees_with_summary(folder, events)
    assert (f.status, f.iteration, f.restarts, f.attempts, len(f.faults)) == ("finished", 10, 1, 2, 1), f
    summary_restart = summary_of(folder)["restarts"][0]
    assert (summary_restart["reached"], summary_restart["lost"]) == (fault_event.iteration, fault_event.lost)
    # The people's view: the fault's reason and its cost on one line, the restart on the next.
    shown = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "runs", str(folder)],
        cwd=tmp_path, env=child_env(tmp_path), capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    head, *lines = shown.splitlines()
    assert head.startswith(f"{folder}: finished 10 (1 restart"), shown
    (said,) = [line for line in lines if line.split()[1:2] == ["fault"]]
    assert "rank 1" in said and fault_event.reason in said
    assert f"after iteration {fault_event.iteration}" in said


@pytest.mark.slow
def test_a_requeue_stop_and_the_resume_that_finishes_are_one_story(tmp_path):
    """A simulated requeue outside SLURM saves, stops with 75 and ``--resume auto`` finishes the run
    (what test_restarts' ``test_a_simulated_requeue_outside_slurm_saves_stops_75_and_resume_auto_finishes``
    checked), told by one ledger across both launches and by ``mgpu runs``."""
    # 40 short iterations (about 0.06 s each): the signal reaches mgpu, whose poll then asks the
    # ranks, several iterations after the fault's 3rd (5 on CI), and must land before the last.
    fault, total = ("--simulate_fault", "requeue@3"), 40
    run = (*SHORT[:3], str(total), *SHORT[4:])
    code, out = Run(train_argv("rsl_rl", *fault, *run), tmp_path).finish(240)
    assert code == 75, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    events = _ledger_of(folder)
    s = summary_of(folder)
    assert s["status"] == "stopped" and 3 <= s["end_iteration"] < total, s
    assert (folder / f"model_{s['end_iteration']}.pt").is_file()
    assert _kinds(events)[-1] == "requeue", _kinds(events)
    stop = [e for e in events if e.kind != "summary"][-1]
    assert isinstance(stop, ev.Requeue) and not stop.requeued and stop.signal == "SIGUSR1", stop
    stopped_at = s["end_iteration"]
    assert stop.iteration == stopped_at, (stop, stopped_at)
    (row,) = _runs_json(tmp_path, "logs")
    told = (row["status"], row["reached"], row["total"], row["requeues"])
    assert told == ("stopped", stopped_at, total, 1), row
    again = train_argv("rsl_rl", *fault, "--resume", "auto", *run)
    code, out = Run(again, tmp_path).finish(240)
    assert code == 0, out[-4000:]
    events = _ledger_of(folder)  # the same folder's ledger goes on
    kinds = _kinds(events)
    assert kinds.count("launched") == 2 and kinds[-1] == "finished", kinds
    second = [e for e in events if isinstance(e, ev.Launched)][1]
    assert second.continued_from == stopped_at, second
    f = _agrees_with_summary(folder, events)
    assert (f.status, f.iteration, f.launches, f.requeues, f.restarts) == ("finished", total, 2, 1, 0), f
    (row,) = _runs_json(tmp_path, "logs")
    assert (row["status"], row["reached"], row["requeues"], row["restarts"]) == ("finished", total, 1, 0), row
    s = summary_of(folder)
    assert (s["status"], s["end_iteration"]) == ("finished", total), s
    assert [a.get("launch", 0) for a in s["attempts"]] == [0, 1], s["attempts"]


@pytest.mark.slow
def test_a_killed_rank_a_requeue_and_a_resume_leave_a_ledger_whose_fold_is_the_summary(tmp_path):
    """One run meets all three: rank 1 SIGKILLed at iteration 3 (a restart from the checkpoint at 2),
    the requeue signal on mgpu (saved and stopped, exit 75), then ``--resume auto`` to the end;
    after each launch summary.json is the fold of events.jsonl, one run across all of it."""
    long = ("--num_envs", "16", "--max_iterations", "400", "--save_interval", "2", "env.episode_length=16")
    kill = ("--simulate_fault", "kill@3,rank=1", "--max_restarts", "1")
    first = Run(train_argv("rsl_rl", *kill, *long), tmp_path)
    first.wait_for("iteration 6/400", 240)  # only the restarted attempt gets there
    first.proc.send_signal(signal.SIGUSR1)  # SLURM's time-limit warning, as mgpu's requeue signal
    code, out = first.finish(240)
    assert code == 75, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    f = _agrees_with_summary(folder, _ledger_of(folder))
    assert (f.status, f.restarts, f.requeues, len(f.faults)) == ("stopped", 1, 1, 1), f
    reached = f.iteration
    assert reached is not None and reached >= 6, f
    end = str(reached + 2)
    again = Run(train_argv("rsl_rl", "--resume", "auto", *long[:3], end, *long[4:]), tmp_path)
    code, out = again.finish(240)
    assert code == 0, out[-4000:]
    f = _agrees_with_summary(folder, _ledger_of(folder))
    assert (f.status, f.iteration, f.launches, f.restarts, f.requeues) == (
        "finished",
        reached + 2,
        2,
        1,
        1,
    ), f
    s = summary_of(folder)
    assert (s["start_iteration"], s["end_iteration"], s["iterations"]) == (0, reached + 2, reached + 2), s
    assert len(s["mean_rewards"]) == reached + 2 and s["checksums_equal"] is True, s
    assert s["whole"]["segments"] == len(s["segments"]) == 3, s["segments"]  # two attempts, one resume
    assert [a["outcome"] for a in s["attempts"]] == ["failed", "stopped", "finished"], s["attempts"]


@pytest.mark.slow
def test_mgpu_stacks_finds_a_resumed_run_by_its_folder_through_the_ledger(tmp_path):
    """The form docs/commands.md gives, on a run whose ranks carry the resuming launch's stamp."""
    # 40 iterations, not TINY's 6: the requeue lands a few iterations after the fault's 2nd, and a
    # request read in the last iteration stops nothing (the run would finish, exit 0).
    first = train_argv("rsl_rl", "--simulate_fault", "requeue@2", *TINY[:3], "40", *TINY[4:])
    code, out = Run(first, tmp_path).finish(240)
    assert code == 75, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    resumed = Run(train_argv("rsl_rl", "--resume", "auto", *TINY[:3], "400", *TINY[4:]), tmp_path)
    # Its first iteration, whichever: the requeue lands a few iterations after the fault's 2nd.
    resumed.wait_for("/400 | ", 180)
    env = child_env(tmp_path)
    mgpu = [sys.executable, "-m", "isaaclab_mgpu"]
    last = subprocess.run([*mgpu, "runs", "--last"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert last.stdout.strip() == str(folder.relative_to(tmp_path)), last
    stacks = subprocess.run(
        [*mgpu, "stacks", last.stdout.strip()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    resumed.proc.send_signal(signal.SIGINT)
    code, out = resumed.finish(120)
    assert stacks.returncode == 0, stacks.stderr
    assert "== rank 0" in stacks.stdout and "== rank 1" in stacks.stdout, stacks.stdout[-2000:]
    assert code == 130 and [e.kind for e in _ledger_of(folder)].count("launched") == 2, out[-2000:]


_SCRIPT = """
import time
from isaaclab_mgpu import progress

for it in range(1, 9):
    progress.iteration(it)
    time.sleep(0.3)
"""


@pytest.mark.slow
def test_a_script_run_keeps_a_ledger_beside_its_logs_that_mgpu_runs_lists(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(_SCRIPT)
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2"]
    code, out = Run([*argv, "--script", str(script)], tmp_path).finish(120)
    assert code == 0, out[-4000:]
    (folder,) = (tmp_path / "logs" / "mgpu" / "loop").glob("20*")  # the launch's own folder
    assert (folder / "attempt_0" / "rank_0").is_dir()  # holding its per-rank logs
    events = _ledger_of(folder)
    kinds = _kinds(events)
    assert kinds[:3] == ["launched", "attempt_started", "ranks_up"] and kinds[-1] == "finished", kinds
    assert "trained" in kinds, kinds  # the ranks' progress reports, as the stall watch read them
    assert events[0].essentials["script"] == str(script) and events[0].essentials["total"] is None
    assert max(e.iteration for e in events if isinstance(e, ev.Progress)) >= 6, events
    assert not (folder / "summary.json").exists()  # no rank 0 of mgpu's to give an account: the ledger alone
    (row,) = _runs_json(tmp_path, "logs")
    assert (row["folder"], row["status"], row["world_size"], row["task"]) == (
        str(Path("logs") / folder.relative_to(tmp_path / "logs")), "finished", 2, "loop.py",
    ), row  # fmt: skip


@pytest.mark.slow
def test_an_interrupted_run_ends_its_ledger_interrupted(tmp_path):
    run = Run(train_argv("rsl_rl", *TINY[:3], "100", *TINY[4:]), tmp_path)
    run.wait_for("iteration 3/100", 180)
    run.proc.send_signal(signal.SIGINT)
    code, out = run.finish(120)
    assert code == 130, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    events = _ledger_of(folder)
    assert _kinds(events)[-1] == "interrupted", _kinds(events)
    assert events[-1].exit_code == 130 and events[-1].iteration is not None, events[-1]
    f = _agrees_with_summary(folder, events)
    assert (f.status, f.exit_code, f.restarts) == ("interrupted", 130, 0), f


def test_a_sigterm_after_mgpu_cancels_request_ends_the_run_stopped(tmp_path):
    # What node 0's mgpu meets in a job mgpu cancel stops: the request in the run folder, then SIGTERM.
    from isaaclab_mgpu.contract.layout import CANCEL

    run = Run(train_argv("rsl_rl", *TINY[:3], "100", *TINY[4:]), tmp_path)
    run.wait_for("iteration 3/100", 180)
    (folder,) = run_folders(tmp_path, "rsl_rl")
    (folder / CANCEL).write_text("SLURM job 7\n")
    run.proc.send_signal(signal.SIGTERM)
    code, out = run.finish(120)
    assert code == 130, out[-4000:]
    events = _ledger_of(folder)
    end = next(e for e in reversed(events) if isinstance(e, ev.Interrupted))
    assert end.cancelled and end.iteration is not None, end
    f = _agrees_with_summary(folder, events)
    assert (f.status, f.exit_code) == ("stopped", 130), f


def test_stacks_finds_a_continued_run_through_its_ledger(tmp_path):
    """A resumed or requeued run's ranks carry the later launch's stamp, not the folder's: the
    folder's ledger names the mgpu now keeping it, and its ranks carry that mgpu's pid."""
    import time

    from isaaclab_mgpu.contract.errors import UsageError
    from isaaclab_mgpu.launcher import livestacks

    folder = tmp_path / "2026-01-01_00-00-00"
    folder.mkdir()
    later = livestacks.LiveRun(
        run_id="b", stamp="2026-01-02_00-00-00", started=time.time(), ranks=(), launcher_pid=4242
    )
    other = livestacks.LiveRun(
        run_id="c", stamp="2026-01-03_00-00-00", started=time.time(), ranks=(), launcher_pid=7
    )
    with pytest.raises(UsageError, match="no running rank on this machine writes this run"):
        livestacks.pick([later, other], str(folder))  # no ledger: nothing to go by
    _write(folder, ev.Launched(time=1.0, host=socket.gethostname(), pid=99))  # the first launch
    _write(
        folder, ev.Launched(time=2.0, host=socket.gethostname(), pid=4242, continued_from=34)
    )  # the requeued job
    assert livestacks.pick([other, later], str(folder)) is later
    _write(folder, ev.Launched(time=3.0, host="another-node", pid=7))  # kept from another host now
    with pytest.raises(UsageError):
        livestacks.pick([other, later], str(folder))


def _requeued_run(folder: Path, status: str, reached: int, requeues: int, restarts: int) -> None:
    """A run folder as mgpu leaves it: rank 0's summary and node 0's ledger."""
    from isaaclab_mgpu.contract import summary
    from isaaclab_mgpu.launcher.ledger import write_summary

    folder.mkdir(parents=True)
    record = {"status": status, "backend": "rsl_rl", "task": "cartpole", "end_iteration": reached,
              "total_iterations": 150, "restarts": [{"number": 0}] * restarts}  # fmt: skip
    write_summary(folder, summary.Summary.from_json(record))
    story = [ev.Launched(time=1.0, host="n", essentials={"total": 150, "world_size": 2})]
    for k in range(requeues):
        story += [ev.Requeue(time=2.0 + k, iteration=34 * (k + 1), requeued=True), ev.Launched(time=2.5 + k)]
    story += [ev.Restart(time=9.0, attempt=1)] * restarts
    if status == "requeued":
        story.append(ev.Requeue(time=10.0, iteration=reached, requeued=True))
    elif status == "finished":
        story.append(ev.Finished(time=10.0, iteration=reached))
    _write(folder, *story)


def test_the_runs_table_shows_requeues_restarts_and_how_far_against_the_total(tmp_path, capsys, monkeypatch):
    from isaaclab_mgpu.cli import main

    monkeypatch.setenv("COLUMNS", "160")
    _requeued_run(tmp_path / "rsl_rl" / "cartpole" / "2026-01-01_00-00-00", "requeued", 34, 0, 0)
    _requeued_run(tmp_path / "rsl_rl" / "cartpole" / "2026-01-02_00-00-00", "finished", 150, 3, 1)
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "requeued 34/150" in out and "finished 150 (3 requeues, 1 restart)" in out, out
    assert main(["runs", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["reached"], r["total"], r["requeues"], r["restarts"]) for r in rows] == [
        ("finished", 150, 150, 3, 1),
        ("requeued", 34, 150, 1, 0),
    ]


def test_a_ledger_whose_mgpu_is_gone_is_lost_and_one_whose_mgpu_runs_is_running(tmp_path):
    import psutil

    from isaaclab_mgpu.launcher.runs import find_runs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = psutil.Process()
    here = socket.gethostname()
    for name, pid, started in (
        ("2026-01-01_00-00-00", gone.pid, 1.0),
        ("2026-01-02_00-00-00", me.pid, me.create_time()),
    ):
        folder = tmp_path / "mgpu" / "loop" / name
        folder.mkdir(parents=True)
        _write(
            folder,
            ev.Launched(time=1.0, host=here, pid=pid, pid_started=started, essentials={"script": "loop.py"}),
        )
    assert [(Path(r.folder).name[:10], r.status, r.task) for r in find_runs(tmp_path)] == [
        ("2026-01-02", "running", "loop.py"),
        ("2026-01-01", "lost", "loop.py"),
    ]


_WRITERS = {"write_json", "write_text", "write_bytes", "atomic_open", "open", "dump", "rename", "symlink_to"}


def _writes_a_file(fn) -> bool:
    import ast

    for c in ast.walk(fn):
        if isinstance(c, ast.Call):
            f = c.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if name in _WRITERS or (name == "replace" and base == "os"):
                return True
    return False


def _summary_writers(root: Path) -> set[str]:
    """Modules that write summary.json: a function naming it (``SUMMARY`` or the literal) that writes
    a file, or a call of such a function from another module (as imported: ``summaries.write``)."""
    import ast

    trees = {
        p.relative_to(root).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in root.rglob("*.py")
    }
    direct: dict[str, set[str]] = {}
    for mod, tree in trees.items():
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
            names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
            literal = any(
                isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("summary.json")
                for n in ast.walk(fn)
            )
            if ("SUMMARY" in names or literal) and _writes_a_file(fn):
                direct.setdefault(mod, set()).add(fn.name)
    for mod, fns in direct.items():  # and the functions of that module that call them
        defs = [n for n in ast.walk(trees[mod]) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for _ in range(len(defs)):
            for fn in defs:
                called = {getattr(c.func, "id", None) for c in ast.walk(fn) if isinstance(c, ast.Call)}
                if called & fns:
                    fns.add(fn.name)
    found = set(direct)
    for mod, tree in trees.items():  # callers of those functions, by what each module imported
        aliases: dict[str, str] = {}  # local name -> module of the writer, or "module:function"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("isaaclab_mgpu"):
                base = node.module.removeprefix("isaaclab_mgpu").strip(".").replace(".", "/")
                for a in node.names:
                    local = a.asname or a.name
                    sub = f"{base}/{a.name}.py".lstrip("/")
                    aliases[local] = sub if sub in direct else f"{base}.py:{a.name}"
        for c in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
            f = c.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                target = aliases.get(f.value.id)
                if target in direct and f.attr in direct[target]:
                    found.add(mod)
            elif isinstance(f, ast.Name) and ":" in aliases.get(f.id, ""):
                target, name = aliases[f.id].split(":")
                if name in direct.get(target, ()):
                    found.add(mod)
    return found


def test_summary_json_is_written_by_the_ledger_alone_and_never_on_the_rank_side():
    """One writer of summary.json in the package (the ledger's fold, node 0's mgpu); none under rank/."""
    import isaaclab_mgpu

    writers = _summary_writers(Path(isaaclab_mgpu.__file__).parent)
    assert writers == {"launcher/ledger.py"}, writers
    assert not any(w.startswith("rank/") for w in writers)
