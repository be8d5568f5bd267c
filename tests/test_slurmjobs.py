"""A SLURM run seen from the login node, without a cluster: what a run's ledger and the recorded
submissions say, told what SLURM says (:func:`~isaaclab_mgpu.launcher.slurmjobs.with_jobs` is pure;
the states are what ``squeue`` would answer). The real thing, on a two-node SLURM:
``test_slurm_cluster.py::test_submit_follow_cancel_continue_and_a_lost_job_through_mgpu_from_the_login_node``."""

from __future__ import annotations

import pytest

from isaaclab_mgpu.cli import main
from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.files import write_json
from isaaclab_mgpu.launcher import slurmjobs
from isaaclab_mgpu.launcher.runs import find_runs
from isaaclab_mgpu.launcher.slurmjobs import JobState, Submission


def _run(root, name, *events: ev.Event, status="running"):
    folder = root / "rsl_rl" / "cartpole" / name
    (folder / "logs").mkdir(parents=True)
    write_json(folder / "summary.json", {"backend": "rsl_rl", "task": "cartpole", "status": status})
    out = ev.Appender(folder / "events.jsonl")
    for e in events:
        out.append(e)
    out.close()
    return folder


def _launched(job, run_dir, t=1.0):
    return ev.Launched(time=t, host="node9", job_id=job, run_dir=run_dir, essentials={"nnodes": "2"})


def _submitted(root, name, job, t):
    sub = Submission(job, name, f"/x/{name}.sbatch", "/x", "logs/rsl_rl/cartpole", t, ("mgpu", "submit"))
    slurmjobs.record(root, sub)
    return sub


def test_queued_jobs_get_a_row_and_a_run_whose_job_is_over_is_lost(tmp_path):
    done = _run(tmp_path, "2026-01-01_10-00-00", _launched("11", "logs/rsl_rl/cartpole/a"), status="finished")
    live = _run(tmp_path, "2026-01-02_10-00-00", _launched("12", "x"), _launched("13", "x"))
    _submitted(tmp_path, "first", "13", 1.0)
    _submitted(tmp_path, "next", "14", 2.0)  # queued: no run names it
    _submitted(tmp_path, "gone", "15", 3.0)  # ended before it started: not a row
    rows = find_runs(tmp_path)
    assert [r.jobs for r in rows] == [("12", "13"), ("11",)] and rows[0].nodes == 2
    states = {
        "11": JobState("11", "COMPLETED"),
        "13": JobState("13", "RUNNING"),
        "14": JobState("14", "PENDING", "ReqNodeNotAvail"),
        "15": JobState("15", "CANCELLED"),
    }
    told = slurmjobs.with_jobs(rows, slurmjobs.submissions(tmp_path), states)
    assert [(r.status, r.job_state, r.job_reason) for r in told] == [
        ("queued", "PENDING", "ReqNodeNotAvail"),
        ("running", "RUNNING", ""),
        ("finished", "COMPLETED", ""),
    ]
    assert told[0].job_name == "next" and told[0].folder == "logs/rsl_rl/cartpole"
    # The newest job over (NODE_FAIL), or unknown to SLURM: the run that says running is lost.
    for state in ("NODE_FAIL", ""):
        over = slurmjobs.with_jobs(rows, [], {**states, "13": JobState("13", state)})
        assert [r.status for r in over] == ["lost", "finished"]
    # Completing (its processes still saving) is alive; no SLURM answer changes nothing.
    assert slurmjobs.with_jobs(rows, [], {"13": JobState("13", "COMPLETING")})[0].status == "running"
    assert slurmjobs.with_jobs(rows, [], None) == rows
    assert str(live) == rows[0].folder and str(done) == rows[1].folder


def test_an_unreadable_submission_record_is_skipped(tmp_path):
    _submitted(tmp_path, "first", "13", 1.0)
    for i, text in enumerate(("[1, 2]", '"text"', "3", "{", '{"job_id": "9"}')):
        (slurmjobs.jobs_dir(tmp_path) / f"stray{i}.json").write_text(text)
    assert [s.job_id for s in slurmjobs.submissions(tmp_path)] == ["13"]


def test_a_run_is_named_by_folder_job_name_or_folder_name(tmp_path):
    folder = _run(tmp_path, "2026-01-02_10-00-00_mine", _launched("13", "x"))
    _submitted(tmp_path, "first", "13", 1.0)
    _submitted(tmp_path, "later", "14", 2.0)
    by_name = slurmjobs.find_target("first", tmp_path)
    assert (by_name.folder, by_name.jobs, by_name.submission.job_id) == (folder, ("13",), "13")
    assert slurmjobs.find_target(str(folder), tmp_path).folder == folder
    assert slurmjobs.find_target("mine", tmp_path).folder == folder
    queued = slurmjobs.find_target("later", tmp_path)
    assert (queued.folder, queued.jobs) == (None, ("14",))
    with pytest.raises(UsageError):
        slurmjobs.find_target("nosuch", tmp_path)


def test_rank_0_console_is_followed_across_attempts_and_jobs(tmp_path):
    job_dir = tmp_path / "shared"
    run_dir = "logs/rsl_rl/cartpole/2026-01-02_10-00-00"
    folder = job_dir / run_dir
    folder.mkdir(parents=True)
    first = job_dir / "logs/mgpu/a/attempt_0/rank_0"
    second = job_dir / "logs/mgpu/a/attempt_1/rank_0"
    for d in (first, second):
        d.mkdir(parents=True)
    (first / "stdout.log").write_text("[mgpu] iteration 1/4\n[mgpu] iteration 2/4\n[mgpu] itera")
    out = ev.Appender(folder / "events.jsonl")
    out.append(_launched("1", run_dir))
    out.append(ev.RanksUp(time=2.0, logs="logs/mgpu/a/attempt_0"))
    follower = slurmjobs.Follower(folder)
    lines, fold, _ = follower.read()
    assert lines == ["[mgpu] iteration 1/4", "[mgpu] iteration 2/4"] and fold.status == "running"
    with open(first / "stdout.log", "a") as fh:
        fh.write("tion 3/4\n")
    (second / "stdout.log").write_text("[mgpu] iteration 4/4\n")
    out.append(ev.Interrupted(time=3.0, iteration=3, exit_code=130))
    out.append(_launched("2", run_dir))
    out.append(ev.RanksUp(time=4.0, logs="logs/mgpu/a/attempt_1"))
    out.append(ev.Finished(time=5.0, iteration=4))
    out.close()
    lines, fold, _ = follower.read()
    assert lines == ["[mgpu] iteration 3/4", "[mgpu] iteration 4/4"] and fold.status == "finished"


def test_logs_and_cancel_refuse_an_unknown_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    assert main(["logs", "nosuch"]) == 2
    assert main(["cancel", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("no run or submitted job named 'nosuch' under logs") == 2, err
