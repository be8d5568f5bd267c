"""The rank side of the stall watch: progress files, the stack signal, SIGUSR1, process-group timeouts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from isaaclab_mgpu.contract import progress, stacks
from isaaclab_mgpu.contract.env import PROGRESS_DIR, RUN_ID, STALL_TIMEOUT, STARTUP_TIMEOUT


def test_reports_are_noops_outside_mgpu(tmp_path):
    reporter = progress.Reporter({})
    assert not reporter.enabled
    reporter.beat("rollout", 3)  # nothing to write to, nothing raised
    assert list(tmp_path.iterdir()) == []


def test_beat_replaces_one_file_per_rank_and_keeps_the_iteration(tmp_path):
    env = {PROGRESS_DIR: str(tmp_path), "RANK": "3", "LOCAL_RANK": "1"}
    reporter = progress.Reporter(env)
    before = time.time()
    reporter.iteration(7)
    reporter.beat("update")
    data = json.loads(progress.progress_path(tmp_path, 3).read_text())
    assert (data["rank"], data["local_rank"], data["pid"]) == (3, 1, os.getpid())
    assert (data["stage"], data["iteration"], data["warmup"]) == ("update", 7, True)
    reporter.iteration(8)
    assert json.loads(progress.progress_path(tmp_path, 3).read_text())["warmup"] is False
    assert data["time"] >= before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.3.json", "stack.3.txt"]


def test_how_a_rank_ended_is_in_its_reports_from_then_on(tmp_path):
    reporter = progress.Reporter({PROGRESS_DIR: str(tmp_path), "RANK": "1", "LOCAL_RANK": "0"})
    reporter.iteration(3)
    assert progress.read_report(progress.progress_path(tmp_path, 1)).ended is None
    reporter.ended("finished")
    reporter.beat("finish")
    reporter.beat(progress.DONE)
    report = progress.read_report(progress.progress_path(tmp_path, 1))
    assert (report.stage, report.iteration, report.ended) == (progress.DONE, 3, "finished")


def test_the_stack_signal_dumps_the_python_stack_and_sigusr1_is_only_recorded(tmp_path):
    rank_logs = tmp_path / "attempt_0" / "rank_0"
    rank_logs.mkdir(parents=True)
    code = (
        "import time\n"
        "from isaaclab_mgpu import progress\n"
        "def waiting_in_a_collective():\n"
        "    progress.beat('update', 4)\n"
        "    while not progress.stop_requested():\n"
        "        time.sleep(0.01)\n"
        "    print('stop requested', flush=True)\n"
        "    time.sleep(60)\n"
        "waiting_in_a_collective()\n"
    )
    env = {
        **os.environ,
        PROGRESS_DIR: str(tmp_path),
        RUN_ID: "test",
        "RANK": "0",
        "TORCHELASTIC_ERROR_FILE": str(rank_logs / "error.json"),
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        path = progress.progress_path(tmp_path, 0)
        deadline = time.monotonic() + 60
        while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the file exists a moment before its first record is written
        assert json.loads(path.read_text())["stack_file"] == str(rank_logs / "stack.txt")
        proc.send_signal(stacks.STACK_SIGNAL)
        stack = rank_logs / "stack.txt"
        while "waiting_in_a_collective" not in stack.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "waiting_in_a_collective" in stack.read_text()
        assert proc.poll() is None  # the dump does not end the rank
        # SLURM's time-limit warning: recorded for the rank to act on, never fatal.
        proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline() == "stop requested\n"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("under_mgpu", [True, False], ids=["under-mgpu-without-stall-watch", "outside-mgpu"])
def test_sigusr1_is_survived_under_mgpu_only(under_mgpu):
    code = (
        "import os, signal\n"
        "from isaaclab_mgpu import progress\n"
        "progress.beat('update', 1)\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "assert progress.stop_requested()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (RUN_ID, PROGRESS_DIR)}
    if under_mgpu:
        env[RUN_ID] = "test"  # the stall watch is off (no progress folder), the marker is there
    out = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert out.returncode == (0 if under_mgpu else -signal.SIGUSR1)  # outside mgpu: the default


def test_process_group_timeout_follows_the_bounds_plus_a_margin():
    env = {STALL_TIMEOUT: "20", STARTUP_TIMEOUT: "900"}
    assert progress.process_group_timeout(environ=env) == timedelta(seconds=20 + progress.MARGIN_S)
    assert progress.process_group_timeout(startup=True, environ=env) == timedelta(seconds=960)
    off = {STALL_TIMEOUT: "0", STARTUP_TIMEOUT: "0"}
    assert progress.process_group_timeout(environ=off) is None
    assert progress.process_group_timeout(startup=True, environ=off) is None
    assert progress.process_group_timeout(environ={}) is None


def test_a_real_gloo_group_gets_the_start_up_then_the_stall_timeout(tmp_path):
    code = (
        "import socket, torch, torch.distributed as dist\n"
        "from isaaclab_mgpu import progress\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=0, world_size=1,\n"
        "                        timeout=progress.process_group_timeout(startup=True))\n"
        "gloo = dist.distributed_c10d._get_default_group()._get_backend(torch.device('cpu'))\n"
        "print(gloo.options._timeout.total_seconds())\n"
        "progress.after_startup()\n"
        "print(gloo.options._timeout.total_seconds())\n"
        "dist.destroy_process_group()\n"
    )
    env = {**os.environ, STALL_TIMEOUT: "20", STARTUP_TIMEOUT: "900"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["960.0", "80.0"]
