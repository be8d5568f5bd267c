"""Signals the supervisor sends and gets: never to a stranger; SIGUSR1 only recorded.

Nothing read from a file or left by the kernel makes the supervisor signal a stranger.
Real processes throughout: a launch whose launcher exits and leaves a straggler, with a stand-in
process that takes over the launcher's PID once it is reaped (``ns_last_pid``, where this machine
lets the test write it); a process of another user carrying the run's marker; malformed progress
files planted beside the ranks' own in a real 2-rank ``mgpu train`` run. Every ``os.kill`` and
``os.killpg`` the supervisor makes is recorded (psutil and subprocess signal through them).
SLURM's SIGUSR1 reaches mgpu itself, whose handlers write into the one signal recorder the
supervisor reads: mgpu must neither die of it nor stop the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from isaaclab_mgpu.contract.env import RUN_ID
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.supervise import SuperviseOptions, Supervisor
from isaaclab_mgpu.launcher.supervise.shutdown import Interrupts
from isaaclab_mgpu.launcher.supervise.watchdog import marked_processes

WORKERS = Path(__file__).parent / "workers"
ROOT = Path(__file__).parent.parent

# The launcher forks a straggler that ignores SIGTERM (so the shutdown lasts until its SIGKILL),
# in the launcher's own process group or, after setsid, in a session of its own; then it exits.
LAUNCHER = r"""
import os, signal, sys, time
folder, setsid = sys.argv[1], sys.argv[2] == "1"
if os.fork() == 0:
    if setsid:
        os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(folder, ".straggler"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(folder, ".straggler"), os.path.join(folder, "straggler"))
    time.sleep(60)
    os._exit(0)
while not os.path.exists(os.path.join(folder, "straggler")):
    time.sleep(0.01)
"""


def _command(tmp: Path, *argv: str) -> Command:
    """A one-process launch of ``argv``."""
    return Command(
        argv=argv,
        env={},
        world_size=1,
        rank_devices={0: "cpu"},
        launcher="launcher",
        log_dir=str(tmp / "logs"),
    )


def _take_pid(pid: int, tries: int = 20) -> subprocess.Popen | None:
    """A sleeping process with PID ``pid`` (via ns_last_pid), or None where that cannot be done."""
    for _ in range(tries):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "30"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


@pytest.mark.slow
@pytest.mark.parametrize("setsid", [False, True], ids=["straggler-in-launcher-group", "setsid-straggler"])
def test_after_its_launcher_is_reaped_the_supervisor_signals_only_the_tree(tmp_path, monkeypatch, setsid):
    calls: list[tuple[str, int, int]] = []
    real_kill, real_killpg = os.kill, os.killpg

    def kill(pid: int, sig: int) -> None:
        calls.append(("kill", pid, sig))
        real_kill(pid, sig)

    def killpg(pgid: int, sig: int) -> None:
        calls.append(("killpg", pgid, sig))
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "killpg", killpg)
    cmd = _command(tmp_path, sys.executable, "-c", LAUNCHER, str(tmp_path), "1" if setsid else "0")
    sup = Supervisor(cmd, SuperviseOptions(grace_period=1, kill_after=3, console=False))
    sup.start()
    launcher = sup.descendants()[0].pid
    results = []
    waiter = threading.Thread(target=lambda: results.append(sup.wait()))
    waiter.start()
    stand_in = None
    try:
        deadline = time.monotonic() + 60
        while psutil.pid_exists(launcher) and time.monotonic() < deadline:
            time.sleep(0.005)  # the supervisor reaps it within its 0.1 s poll
        assert not psutil.pid_exists(launcher), "the launcher was never reaped"
        straggler = int((tmp_path / "straggler").read_text())
        # In its own session the straggler no longer holds the launcher's number as its group:
        # the kernel may hand the PID to anyone, here to a stand-in.
        stand_in = _take_pid(launcher) if setsid else None
        waiter.join(timeout=60)
        assert results and results[0] is not None
        assert results[0].survivors == ()
        assert not psutil.pid_exists(straggler) or psutil.Process(straggler).status() == psutil.STATUS_ZOMBIE
        targets = {abs(target) for _, target, sig in calls if sig != 0}  # 0 only asks "does it exist"
        assert targets <= {straggler}, calls  # never the launcher's PID or group after it was reaped
        assert ("kill", straggler, signal.SIGKILL) in calls  # it ignored SIGTERM: the shutdown ran
        if setsid and stand_in is None:
            pytest.skip("no stand-in: this machine does not let the test choose the next PID")
        if stand_in is not None:
            assert stand_in.poll() is None, "the stand-in holding the reaped launcher's PID was signalled"
    finally:
        if stand_in is not None:
            stand_in.kill()
            stand_in.wait()
        waiter.join(timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a process as another user")
def test_a_marked_process_of_another_user_is_not_the_runs(tmp_path):
    since = time.time() - 1
    env = {**os.environ, RUN_ID: "planted"}
    mine = subprocess.Popen(["sleep", "30"], env=env)
    other = subprocess.Popen(["sleep", "30"], env=env, user=65534, group=65534, cwd="/")
    try:
        deadline = time.monotonic() + 30
        found: set[int] = set()
        while mine.pid not in found and time.monotonic() < deadline:
            found = {p.pid for p in marked_processes("planted", since)}
            time.sleep(0.05)
        assert mine.pid in found
        assert other.pid not in found and psutil.Process(other.pid).uids().real == 65534
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()


def test_the_marker_is_in_no_process_arguments(tmp_path):
    cmd = _command(tmp_path, sys.executable, "-c", "import time; time.sleep(30)")
    sup = Supervisor(cmd, SuperviseOptions(grace_period=1, kill_after=1, console=False))
    sup.start()
    try:
        assert sup.wait(timeout=0.5) is None
        seen = []
        for proc in psutil.process_iter(["cmdline"]):
            if any(sup.run_id in part for part in proc.info.get("cmdline") or []):
                seen.append((proc.pid, proc.info["cmdline"]))
        assert seen == []
        dog = [p for p in psutil.Process().children() if "watchdog.py" in " ".join(p.cmdline())]
        assert len(dog) == 1  # the watchdog runs, and was told the marker on its stdin
    finally:
        result = sup.stop("test over")
    assert result.survivors == ()


@pytest.mark.slow
def test_malformed_progress_files_are_ignored_once_and_the_run_ends_well(tmp_path):
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            "--script", str(WORKERS / "bad_progress.py"), "--stall_timeout", "60",
            "--log_dir", str(tmp_path / "logs")]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ignored = [line for line in out.stderr.splitlines() if "ignoring the progress file" in line]
    assert len(ignored) == 2, out.stderr[-3000:]  # one line per planted file, however often it was read
    assert any("progress.7.json" in line and "'local_rank' is \"y\"" in line for line in ignored), ignored
    assert any("progress.8.json" in line and "'time' is \"soon\"" in line for line in ignored), ignored
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_sigusr1_is_recorded_and_the_run_goes_on(tmp_path):
    cmd = _command(tmp_path, sys.executable, "-c", "import time; time.sleep(3)")
    signals = Interrupts()
    sup = Supervisor(cmd, SuperviseOptions(console=False), signals=signals)

    def send_twice() -> None:
        for _ in range(2):
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGUSR1)

    sender = threading.Thread(target=send_twice)
    with signals.installed() as installed:
        assert installed
        sup.start()
        sender.start()
        result = sup.wait()
    sender.join()
    assert result is not None
    assert (result.exit_code, result.interrupted) == (0, False)
    assert signals.checkpoint_at is not None and not signals.stop_asked
