"""The stall watch on real process trees: 2 CPU ranks of real training, a rank SIGSTOPped for real.

Timing margins (measured on the shared 2-core box with a 1-min load of 10-13, see the comments at
each bound): the watch polls every 0.5 s, dumping the stacks takes well under a second, and the
hang teardown is at most 3 s grace + 2 s before SIGKILL. With ``--stall_timeout 20`` a stop was
reported and the tree gone 25-26 s after the SIGSTOP; the issue's bound is 35 s. The stop tests use
``--stall_timeout 10`` (STALL): the same watch 10 s sooner, the 35 s bound kept (11-12 s measured),
and a steady iteration of these 16 environments (64 take about 0.1 s here, tests/test_straggler.py)
stays far under it, so no healthy rank is named. The slowed-rank test keeps 20 s (SLOWED_STALL):
its 8 s pause must stay well under it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from training_helpers import child_env, start

from isaaclab_mgpu.contract.errors import EXIT_HANG

pytestmark = pytest.mark.slow

STALL = 10
#: The bound of the slowed-rank test: 12 s above its 8 s pause.
SLOWED_STALL = 20
#: The issue's bound from SIGSTOP to mgpu's exit.
REPORT_WITHIN = 35.0
#: Start-up of 2 ranks (imports, environments) takes 15-90 s on the loaded box.
START_WITHIN = 400.0
WORKERS = Path(__file__).parent / "workers"


def _wait_for(proc: subprocess.Popen, needle: str, seen: list[str]) -> None:
    deadline = time.monotonic() + START_WITHIN
    for line in proc.stdout:
        seen.append(line)
        if needle in line:
            return
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise AssertionError(f"never saw {needle!r}:\n{''.join(seen[-40:])}")


def _rank_process(root: int, rank: int) -> psutil.Process:
    """The oldest process of the tree with ``RANK=rank``: the rank itself (its helpers inherit RANK)."""
    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if proc.environ().get("RANK") == str(rank):
                found.append((proc.create_time(), proc.pid, proc))
        except psutil.Error:
            continue
    assert found, f"rank {rank} not found under {root}"
    return min(found)[2]


def _tree(root: int) -> list[psutil.Process]:
    return psutil.Process(root).children(recursive=True)


def _gone(procs: list[psutil.Process]) -> list[int]:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except psutil.Error:
            pass
    return alive


def _finish(proc: subprocess.Popen, seen: list[str], timeout: float) -> tuple[int, str, float]:
    start = time.monotonic()
    rest, _ = proc.communicate(timeout=timeout)
    return proc.returncode, "".join(seen) + rest, time.monotonic() - start


# The two launch paths: torchrun's tree (rsl-rl) and mgpu's JAX launcher's (skrl JAX). skrl torch
# runs under torchrun too, with the progress reports of the worker loop every back-end shares.
@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_jax"])
def test_a_stopped_rank_is_named_with_its_stack_and_the_tree_is_gone_within_35_s(backend, tmp_path):
    args = ("--num_envs", "16", "--max_iterations", "500", "--stall_timeout", str(STALL))
    proc = start(backend, tmp_path, *args)
    seen: list[str] = []
    _wait_for(proc, "iteration 3/", seen)
    tree = _tree(proc.pid)
    rank1 = _rank_process(proc.pid, 1)
    rank1.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    code, out, _ = _finish(proc, seen, timeout=120)
    took = time.monotonic() - stopped_at
    print(f"{backend}: SIGSTOP to exit {code} in {took:.1f} s")
    assert code == EXIT_HANG, out[-4000:]
    assert took <= REPORT_WITHIN, out[-4000:]  # measured 11-12 s (STALL 10): 3x margin
    verdict = next(line for line in out.splitlines() if line.startswith("mgpu: hang: "))
    assert "rank 1 (local rank 1)" in verdict and "stopped" in verdict, verdict
    assert "iteration" in verdict
    assert "rank 1 (local rank 1) on" in out and "Python stack, innermost call first:" in out
    assert 'File "' in out.split("Python stack, innermost call first:")[1]
    assert "rank 0 (local rank 0)" in out  # the other rank is accounted for
    assert "mgpu probe-nccl --device cpu --world-size 2" in out
    assert _gone([*tree, rank1]) == [], "processes of the run survived"


def test_a_rank_slowed_below_the_timeout_completes_normally(tmp_path):
    proc = start(
        "rsl_rl", tmp_path, "--num_envs", "16", "--max_iterations", "6", "--stall_timeout", str(SLOWED_STALL)
    )
    seen: list[str] = []
    _wait_for(proc, "iteration 2/", seen)
    rank1 = _rank_process(proc.pid, 1)
    rank1.send_signal(signal.SIGSTOP)  # one iteration of rank 1 takes 8 s longer: 12 s under the bound
    time.sleep(8)
    rank1.send_signal(signal.SIGCONT)
    code, out, _ = _finish(proc, seen, timeout=300)
    assert code == 0, out[-4000:]
    assert "hang" not in out and "finished: 6 iterations" in out


def _node(tmp: Path, node_rank: int, port: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "1",
            "--nnodes", "2", "--node_rank", str(node_rank), "--master_addr", "127.0.0.1",
            "--master_port", str(port), "--num_envs", "16", "--max_iterations", "500",
            "--stall_timeout", str(STALL), "--log_dir", str(tmp / f"node{node_rank}")]  # fmt: skip
    return subprocess.Popen(argv, cwd=tmp, env=child_env(tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_a_frozen_rank_on_node_1_is_a_peer_stall_on_node_0(tmp_path):
    port = _free_port()
    node0 = _node(tmp_path, 0, port)
    node1 = _node(tmp_path, 1, port)
    try:
        seen0: list[str] = []
        _wait_for(node0, "iteration 3/", seen0)
        tree = _tree(node0.pid) + _tree(node1.pid)
        rank1 = _rank_process(node1.pid, 1)
        rank1.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        code0, out0, _ = _finish(node0, seen0, timeout=120)
        took = time.monotonic() - stopped_at
        code1, out1, _ = _finish(node1, [], timeout=120)
    finally:
        for proc in (node0, node1):
            if proc.poll() is None:
                proc.kill()
    print(f"node 0: SIGSTOP on node 1 to exit {code0} in {took:.1f} s")
    print("\n".join(line for line in (out0 + out1).splitlines() if line.startswith("mgpu: hang:")))
    assert code0 == EXIT_HANG, out0[-4000:]
    assert took <= REPORT_WITHIN, out0[-4000:]  # measured 12 s (STALL 10; 21-26 s with 20)
    assert "a peer on another node stopped reporting" in out0, out0[-4000:]
    assert "rank 0" in out0 and "rank 1 (local rank" not in out0  # no local rank is blamed
    assert code1 == EXIT_HANG, out1[-4000:]
    assert "rank 1 (local rank 0)" in out1 and "stopped" in out1, out1[-4000:]
    assert _gone([*tree, rank1]) == []


def _script(tmp: Path, name: str, *args: str, env: dict | None = None) -> tuple[int, str, float]:
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            "--script", str(WORKERS / name), *args]  # fmt: skip
    started = time.monotonic()
    out = subprocess.run(argv, cwd=tmp, env={**child_env(tmp), **(env or {})}, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    return out.returncode, out.stdout + out.stderr, time.monotonic() - started


def test_a_user_script_calling_the_helper_is_watched(tmp_path):
    code, out, _ = _script(tmp_path, "progress_loop.py", "--stall_timeout", "5")
    assert code == EXIT_HANG, out[-3000:]
    assert "rank 1 (local rank 1)" in out and "stopped" in out and "iteration 5" in out, out[-3000:]
    assert "in train_step" in out  # its stack


def test_the_output_fallback_is_opt_in_and_says_so(tmp_path):
    code, out, _ = _script(tmp_path, "quiet_rank.py", "--stall_timeout", "5", "--stall_on_silence")
    assert code == EXIT_HANG, out[-3000:]
    assert "no output from rank 1 (local rank 1)" in out and "--stall_on_silence" in out, out[-3000:]


def test_a_node_that_never_joins_is_a_start_up_hang(tmp_path):
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "1",
            "--nnodes", "2", "--node_rank", "0", "--master_addr", "127.0.0.1", "--master_port",
            str(_free_port()), "--startup_timeout", "10"]  # fmt: skip
    # mgpu's own start-up here and now: the same command as a dry-run (same interpreter, same imports).
    started = time.monotonic()
    dry = subprocess.run([*argv[:3], "dry-run", *argv[4:]], cwd=tmp_path, env=child_env(tmp_path),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    own_start = time.monotonic() - started
    assert dry.returncode == 0, dry.stderr
    started = time.monotonic()
    out = subprocess.run(argv, cwd=tmp_path, env=child_env(tmp_path), capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    took = time.monotonic() - started
    text = out.stdout + out.stderr
    assert out.returncode == EXIT_HANG, text[-3000:]
    assert "rendezvous" in text and "a node never joined" in text, text[-3000:]
    # mgpu's start-up, the 10 s start-up bound, then a hang's teardown (3 s grace, 2 s to SIGKILL),
    # with the start-up's slowness allowed three times over.
    assert took < 10 + 5 + 5 + 3 * own_start, (took, own_start)
    assert os.path.isdir(tmp_path)


def test_the_progress_folder_goes_with_the_run_even_when_mgpu_is_sigkilled(tmp_path):
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            "--script", str(WORKERS / "sleeper.py")]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=tmp_path, env=child_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        folder = None
        deadline = time.monotonic() + START_WITHIN
        while folder is None and time.monotonic() < deadline and proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    folder = child.environ().get("MGPU_PROGRESS_DIR") or folder
            time.sleep(0.2)
        assert folder is not None and os.path.isdir(folder)
        proc.kill()  # mgpu dies without cleaning up: its watchdog kills the tree and removes the folder
        proc.wait()
        deadline = time.monotonic() + 30  # the watchdog gives the tree up to 10 s, then removes it
        while os.path.isdir(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not os.path.isdir(folder)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
