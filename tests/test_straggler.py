"""End to end: a slowed CPU rank is named as the straggler; a frozen rank under ``--stall_timeout auto``.

The slowed rank: once both ranks train, each rank's threads are pinned to a core of its own (rank
r to core r of the 2-core machine), and a busy process is pinned beside rank 1: it spins 40 ms and
sleeps 10 ms, in the real-time class (SCHED_FIFO), so rank 1 keeps at most a fifth of its core.
A plain busy process of the normal class does not slow rank 1 for sure on a machine that other
work loads too: the scheduler moves that work to rank 0's core, and both ranks slow alike
(measured: a plain or a nice -19 busy process left rank 1 at 0.6-1.4x rank 0's busy time; this
one, 1.6-2.3x). Without root (no real-time class) the test is skipped.

Measured on this 2-core machine under other work (1-minute load 4-6): healthy 2-rank runs kept
rank 1 / rank 0 busy time within 0.78-1.28x in windows of 10 iterations and 0.83-1.20x in windows
of 5; the watch's 1.5x over 3 windows of 5 iterations names nobody there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from training_helpers import start, summary

pytestmark = pytest.mark.slow

#: The straggler is named within this many iterations of the slowing (3 windows of 5, and margin).
NAMED_WITHIN = 40
#: A frozen rank of a ~0.1 s/iteration run is named within this many seconds under auto.
FROZEN_WITHIN_S = 60

HOG = """
import os, sys, time
parent = int(sys.argv[1])
deadline = time.monotonic() + 300  # never outlive a test that forgot it
while time.monotonic() < deadline and os.getppid() == parent:
    end = time.perf_counter() + 0.04
    while time.perf_counter() < end:
        pass
    time.sleep(0.01)
"""


def _rank(root: int, rank: int) -> psutil.Process:
    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if proc.environ().get("RANK") == str(rank) and "isaaclab_mgpu.worker" in " ".join(proc.cmdline()):
                found.append((proc.create_time(), proc))
        except psutil.Error:
            continue
    assert found, f"rank {rank} not found"
    return min(found, key=lambda f: f[0])[1]


def _pin(proc: psutil.Process, core: int) -> None:
    for thread in proc.threads():  # every thread: gloo's too
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(thread.id, {core})


def _hog(core: int) -> subprocess.Popen:
    def setup() -> None:
        os.sched_setaffinity(0, {core})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))

    return subprocess.Popen([sys.executable, "-c", HOG, str(os.getpid())], preexec_fn=setup)


def _can_use_realtime() -> bool:
    return hasattr(os, "SCHED_FIFO") and os.geteuid() == 0 and len(os.sched_getaffinity(0)) >= 2


@pytest.mark.skipif(not _can_use_realtime(), reason="needs root (real-time class) and 2 cores")
def test_a_rank_sharing_its_core_with_a_busy_process_is_named_the_straggler(tmp_path):
    # 60: named by 10 + NAMED_WITHIN = 50 at the latest, and the slowed rank's streak goes on past the
    # naming, so each later window of 5 would name it again if the watch forgot it: "named once" is
    # checked over 2 windows at the least.
    args = ("--num_envs", "128", "--max_iterations", "60", "--save_interval", "0", "--run_name", "slow")
    proc = start("rsl_rl", tmp_path, *args)
    assert proc.stdout is not None
    hog, slowed_at, named, lines = None, None, None, []
    try:
        for line in proc.stdout:
            lines.append(line)
            if slowed_at is None and "iteration 10/" in line:
                _pin(_rank(proc.pid, 0), 0)
                _pin(_rank(proc.pid, 1), 1)
                hog, slowed_at = _hog(1), 10
            if named is None and line.startswith("mgpu: straggler: "):
                named = line
        code = proc.wait(timeout=600)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines)
    assert code == 0, out[-3000:]
    assert named is not None and named.startswith("mgpu: straggler: rank 1 on "), out[-3000:]
    assert ", cpu works " in named and "x the other ranks'" in named, named
    s, _ = summary(tmp_path, "rsl_rl", "slow")
    (found,) = s["stragglers"]
    assert found["rank"] == 1 and found["device"] == "cpu" and found["slower"] >= 1.5, found
    _, last = found["iterations"]
    assert slowed_at < last <= slowed_at + NAMED_WITHIN, (slowed_at, found)
    assert out.count("mgpu: straggler: ") == 1, out  # named once


def test_auto_bound_names_a_frozen_rank_within_a_minute(tmp_path):
    # 64 envs per rank: about 0.1 s per iteration here; the auto bound is its floor, 30 s.
    args = ("--num_envs", "64", "--max_iterations", "100000", "--save_interval", "20")
    proc = start("rsl_rl", tmp_path, *args)
    assert proc.stdout is not None
    lines, stopped, verdict, bound = [], None, None, None
    try:
        for line in proc.stdout:
            lines.append(line)
            if bound is None and line.startswith("mgpu: stall bound: "):
                bound = line
            if stopped is None and bound is not None and "iteration 25/" in line:
                _rank(proc.pid, 1).send_signal(signal.SIGSTOP)
                stopped = time.monotonic()
            if stopped is not None and line.startswith("mgpu: hang: "):
                verdict = time.monotonic() - stopped
                break
            if stopped is not None and time.monotonic() - stopped > FROZEN_WITHIN_S + 30:
                break
        proc.stdout.read()
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.send_signal(signal.SIGCONT)
            proc.kill()
    out = "".join(lines)
    assert bound is not None and "steady iteration, floor 30 s)" in bound, out[-3000:]
    assert verdict is not None and verdict < FROZEN_WITHIN_S, (verdict, out[-3000:])
    assert code == 4, out[-3000:]
    assert "rank 1" in out and "its process is stopped" in out, out[-3000:]
    s = json.loads(next(tmp_path.glob("logs/rsl_rl/*/*/summary.json")).read_text())
    assert s["status"] == "hung"
