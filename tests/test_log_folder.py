"""The supervisor learns the attempt's log folder from its ranks' environment: real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from isaaclab_mgpu.contract import elastic, env
from isaaclab_mgpu.launcher.supervise import logs

# A "launcher" that starts one child with the environment given in CHILD_ERROR_FILE (or its own).
LAUNCHER = """
import os, subprocess, sys, time
child_env = dict(os.environ)
if os.environ.get("CHILD_ERROR_FILE"):
    child_env["TORCHELASTIC_ERROR_FILE"] = os.environ["CHILD_ERROR_FILE"]
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=child_env)
time.sleep(60)
"""


def _launch(own: str, child: str | None) -> subprocess.Popen:
    environ = {**os.environ, env.ERROR_FILE: own, "CHILD_ERROR_FILE": child or ""}
    return subprocess.Popen([sys.executable, "-c", LAUNCHER], env=environ)


def _wait_for_child(proc: subprocess.Popen) -> psutil.Process:
    launcher = psutil.Process(proc.pid)
    deadline = time.monotonic() + 30
    while not launcher.children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert launcher.children(), "the launcher started no child"
    return launcher


def _stop(proc: subprocess.Popen) -> None:
    for p in psutil.Process(proc.pid).children(recursive=True):
        p.kill()
    proc.kill()
    proc.wait()


def test_a_rank_error_file_names_the_run_folder_and_the_launchers_own_does_not(tmp_path):
    log_dir = tmp_path / "logs/cartpole/attempt_0"
    run_dir = log_dir
    own = str(elastic.launcher_error_file(log_dir, "vm.1"))
    rank_file = str(elastic.rank_dir(run_dir, 1) / elastic.ERROR_FILE)
    ranked = _launch(own, rank_file)
    # A child that still shows the launcher's environment (forked, not yet exec'd into a rank).
    unexeced = _launch(own, None)
    try:
        assert logs.from_ranks(_wait_for_child(ranked)) == str(run_dir)
        assert logs.from_ranks(_wait_for_child(unexeced)) is None
    finally:
        _stop(ranked)
        _stop(unexeced)
