"""``python -m isaaclab_mgpu.jaxrun`` on its own, stopped for real: mgpu's shutdown and exit codes.

Each case starts jaxrun in its own session with 2 fake JAX ranks from ``tests/workers`` (they
record their PIDs, and those of their grandchildren and setsid escapees), waits for every PID,
sends the signal, and checks the exit code, the time to exit and that no recorded PID is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, EXIT_KILLED_AFTER_GRACE

pytestmark = pytest.mark.slow

WORKERS = Path(__file__).parent / "workers"


def _recorded(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _stop(
    tmp: Path, worker: str, ready: int, sig: int, *options: str, before: int | None = None
) -> tuple[int, float, list[int], str]:
    pids = tmp / "pids"
    pids.mkdir()
    argv = [sys.executable, "-m", "isaaclab_mgpu.jaxrun", "--nproc_per_node", "2",
            "--coordinator_address", "127.0.0.1:0", "--log_dir", str(tmp / "logs"), *options,
            str(WORKERS / worker)]  # fmt: skip
    env = {**os.environ, "MGPU_TEST_PIDS": str(pids)}
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while len(_recorded(pids)) < ready and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_recorded(pids)) >= ready, proc.stderr.read().decode() if proc.poll() is not None else ""
        time.sleep(0.3)  # the ranks' signal handlers are in place
        if before is not None:
            proc.send_signal(before)
            time.sleep(1.0)
            assert proc.poll() is None, f"jaxrun died of signal {before}"
        sent = time.monotonic()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recorded = _recorded(pids)
    alive = [pid for pid in recorded if _alive(pid)]
    for pid in alive:  # never leave the machine dirty, even when the test fails
        os.kill(pid, signal.SIGKILL)
    return rc, took, alive, proc.stderr.read().decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_ends_ranks_grandchildren_and_escapees_with_130(tmp_path, sig):
    # Each rank forks a grandchild and a setsid escapee that ignores SIGINT: 6 processes.
    rc, took, alive, err = _stop(tmp_path, "family.py", 6, sig)
    assert rc == EXIT_INTERRUPTED, err
    assert alive == [], err
    # Cooperative ranks end at once and the escapees get SIGTERM right after, well within the
    # default 10 s grace period (measured 0.2-0.3 s at load 15; the old loop never killed the escapees).
    assert took < 8, err


def test_a_rank_ignoring_the_signal_is_killed_after_grace_with_124(tmp_path):
    rc, took, alive, err = _stop(
        tmp_path, "stubborn.py", 2, signal.SIGINT, "--grace_period", "1", "--kill_after", "1"
    )
    assert rc == EXIT_KILLED_AFTER_GRACE, err
    assert alive == [], err
    assert 2 <= took < 15, err  # grace 1 s + kill_after 1 s, then SIGKILL


def test_sigusr1_is_survived(tmp_path):
    # SLURM's time-limit warning reaches the launcher too: recorded and ignored, the stop still works.
    rc, _, alive, err = _stop(tmp_path, "sleeper.py", 2, signal.SIGINT, before=signal.SIGUSR1)
    assert rc == EXIT_INTERRUPTED, err
    assert alive == [], err
