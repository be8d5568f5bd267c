"""``mgpu stacks``: a running 2-rank run's live stacks, with the stall watch off, and the run goes on."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from training_helpers import child_env

from isaaclab_mgpu.launcher import livestacks

MGPU = [sys.executable, "-m", "isaaclab_mgpu"]


@pytest.mark.slow
def test_stacks_of_a_running_run_leave_it_running(tmp_path):
    options = ["--nproc_per_node", "2", "--stall_timeout", "0", "--num_envs", "16", "--max_iterations", "60"]
    train = subprocess.Popen(
        [*MGPU, "train", "--device", "cpu", *options, "--log_root", "logs"],
        cwd=tmp_path,
        env=child_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        for line in train.stdout:  # training has begun once rank 0 prints iteration 2
            seen.append(line)
            if "iteration 2/60" in line:
                break
        folders = list((tmp_path / "logs" / "rsl_rl" / "cartpole").iterdir())
        stacks = subprocess.run(
            [*MGPU, "stacks", str(folders[0])],
            cwd=tmp_path,
            env=child_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        rest, _ = train.communicate(timeout=600)
    finally:
        if train.poll() is None:
            train.kill()
    assert stacks.returncode == 0, stacks.stdout + stacks.stderr
    sections = stacks.stdout.split("== rank ")[1:]
    assert [s.split(" ", 1)[0] for s in sections] == ["0", "1"], stacks.stdout
    for s in sections:
        assert "most recent call first" in s and "isaaclab_mgpu/rank/" in s, s
    # <library>_<task>/<launch>/attempt_0 (mgpu's attempt) / rank_<global rank>/stack.txt
    saved = list((tmp_path / "logs" / "mgpu").glob("*/*/attempt_0/rank_*/stack.txt"))
    assert len(saved) == 2 and all(p.stat().st_size > 0 for p in saved)
    assert train.returncode == 0, "".join(seen) + rest
    assert "iteration 60/60" in rest


def test_no_running_run_is_exit_1_not_bad_input():
    try:
        livestacks.pick([], None)
    except livestacks.MgpuError as exc:
        assert exc.exit_code == 1 and "no running mgpu run" in str(exc)
    else:
        raise AssertionError("no run, yet one was picked")


def test_a_folder_no_running_rank_writes_is_refused(tmp_path):
    run = livestacks.LiveRun(run_id="x", stamp="2026-01-01_00-00-00", started=time.time(), ranks=())
    assert livestacks.pick([run], "logs/rsl_rl/cartpole/2026-01-01_00-00-00_r1") is run
    try:
        livestacks.pick([run], "logs/rsl_rl/cartpole/2025-01-01_00-00-00")
    except livestacks.UsageError as exc:
        assert "no running rank" in str(exc)
    else:
        raise AssertionError("a folder of no running run was accepted")


def test_without_a_folder_only_runs_started_here_count(tmp_path):
    def run(stamp, cwd):
        return livestacks.LiveRun(run_id=stamp, stamp=stamp, started=time.time(), ranks=(), cwd=str(cwd))

    here, there = tmp_path / "here", tmp_path / "isaaclab-mgpu"
    here.mkdir(), there.mkdir()
    other, mine, second = run("2026-01-01_00-00-00", there), run("2026-01-02_00-00-00", here), run("x", here)
    assert livestacks.pick([other, mine], None, here=str(here)) is mine
    try:
        livestacks.pick([other], None, here=str(here))
    except livestacks.MgpuError as exc:
        assert exc.exit_code == 1 and "(1 elsewhere: name its run folder)" in str(exc), exc
    else:
        raise AssertionError("another directory's run was picked")
    try:
        livestacks.pick([mine, second], None, here=str(here))
    except livestacks.UsageError as exc:
        assert "2 running runs started here: 2026-01-02_00-00-00 (0 ranks), x (0 ranks)" in str(exc), exc
    else:
        raise AssertionError("one of two runs was picked without being named")


def test_stacks_from_another_folder_signal_nothing(tmp_path):
    # A rank as torchrun starts it under mgpu: run marker, rank numbers, error file, the stack handler.
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    (run_dir / "logs").mkdir(parents=True)
    elsewhere.mkdir()
    stack = run_dir / "logs" / "stack.txt"
    code = (
        "import faulthandler, sys, time\n"
        "from isaaclab_mgpu.contract.stacks import STACK_SIGNAL\n"
        f"faulthandler.register(STACK_SIGNAL, open({str(stack)!r}, 'w'), all_threads=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**child_env(tmp_path), "MGPU_RUN_ID": "feedfacecafe", "RANK": "0", "LOCAL_RANK": "0"}
    env["TORCHELASTIC_ERROR_FILE"] = str(run_dir / "logs" / "error.json")
    rank = subprocess.Popen(
        [sys.executable, "-c", code], cwd=run_dir, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert rank.stdout.readline().strip() == "ready"
        away = subprocess.run([*MGPU, "stacks"], cwd=elsewhere, capture_output=True, text=True, timeout=60)
        time.sleep(0.5)
        assert away.returncode == 1 and "no running mgpu run started from" in away.stderr, away.stderr
        assert not stack.exists() or stack.stat().st_size == 0  # nothing was signalled
        home = subprocess.run([*MGPU, "stacks"], cwd=run_dir, capture_output=True, text=True, timeout=60)
        assert home.returncode == 0 and "== rank 0" in home.stdout, home.stdout + home.stderr
        # The rank writes in its signal handler once it is scheduled: on a loaded box (seen under a
        # load of 11 on 2 cores) that may come after mgpu stacks' own wait ended.
        deadline = time.monotonic() + 10
        while stack.stat().st_size == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stack.stat().st_size > 0
    finally:
        rank.kill()
        rank.wait()
