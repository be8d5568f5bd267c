"""Helpers for the restart tests: start ``mgpu train`` on CPU ranks, act on a rank when the console
shows an iteration, read the run's curves the way TensorBoard does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from training_helpers import BACKENDS, child_env

#: A short run: 10 iterations of 16 cheap environments, a checkpoint every 2.
SHORT = ("--num_envs", "16", "--max_iterations", "10", "--save_interval", "2", "env.episode_length=16")


#: The mean-reward step axis of each back-end: rsl-rl counts iterations from 0, skrl environment
#: steps (16 per iteration here).
STEP = {"rsl_rl": (0, 1), "skrl_torch": (16, 16), "skrl_jax": (16, 16)}


class Run:
    """A running ``mgpu train``: its output collected line by line, its ranks findable."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env or child_env(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, text: str, timeout: float, start: int = 0) -> int:
        """Block until a line (from index ``start``) contains ``text``; return its index."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(start, len(self.lines)):
                    if text in self.lines[i]:
                        return i
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no line with {text!r} in {timeout} s:\n{self.output()[-4000:]}")
                self._cond.wait(min(left, 0.5))

    def finish(self, timeout: float) -> tuple[int, str]:
        """Wait for mgpu to exit; its code and the whole output."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"mgpu still running after {timeout} s:\n{self.output()[-4000:]}") from None
        self._reader.join(timeout=10)
        return code, self.output()

    def output(self) -> str:
        with self._cond:
            return "".join(self.lines)

    def rank(self, rank: int) -> psutil.Process:
        """The process of global rank ``rank`` among mgpu's descendants (torchrun's RANK or JAX_RANK)."""
        for p in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                env = p.environ()
            except psutil.Error:
                continue
            worker = "isaaclab_mgpu.worker" in " ".join(p.cmdline())
            if worker and env.get("RANK", env.get("JAX_RANK")) == str(rank):
                return p
        raise AssertionError(f"no rank {rank} among mgpu's processes")


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a localhost node 0's static rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train_argv(backend: str, *args: str, nproc: int = 2) -> list[str]:
    """``mgpu train`` with ``nproc`` CPU ranks of ``backend``."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", str(nproc)]
    return [*argv, *BACKENDS[backend], *args]


def run_folders(cwd: Path, backend: str) -> list[Path]:
    """Every run folder of ``backend``'s cartpole experiment."""
    lib = "rsl_rl" if backend == "rsl_rl" else "skrl"
    return sorted(p for p in (cwd / "logs" / lib / "cartpole").iterdir() if p.is_dir())


def summary_of(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def tensorboard_steps(folder: Path, tag: str) -> list[int]:
    """The steps of ``tag`` as TensorBoard shows the run: its directory loader over every event file
    in the folder, orphaned data of a restarted session purged (TensorBoard's default)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def act_at(run: Run, text: str, action: Callable[[], None], timeout: float = 180) -> None:
    """Do ``action`` as soon as the console shows ``text``."""
    run.wait_for(text, timeout)
    action()


def one_resumed_run(cwd: Path, backend: str, saved: int) -> dict:
    """The checks every recovered run shares: one folder, 10 iterations, one curve, equal checksums.

    ``saved`` is the newest checkpoint the console had shown when the failure was caused. The
    ranks may save more before the failure reaches them (a killed mgpu's watchdog stops its rank a
    moment later, and that rank's stop request makes every rank save first); how many depends on
    the machine's pace (CI once ran two more iterations, an interval save and the stop's save), so
    the upper bound is on what the failure cost, not on the console's lag."""
    folders = run_folders(cwd, backend)
    assert len(folders) == 1, folders
    s = summary_of(folders[0])
    assert (s["status"], s["iterations"], s["end_iteration"], s["start_iteration"]) == ("finished", 10, 10, 0)
    assert len(s["restarts"]) == 1, s["restarts"]
    restart = s["restarts"][0]
    # Resumed from the last checkpoint before the failure: at most one save interval (2) lost.
    resumed_from = restart["checkpoint"]
    assert restart["resumed_from"] == resumed_from and saved <= resumed_from, restart
    assert restart["lost"] == restart["reached"] - resumed_from <= 2, restart
    assert s["resumed_at"] == resumed_from and s["checksums_equal"] is True
    # Both attempts' stretches of training, and the run's time over both.
    spans = [(g["start_iteration"], g["end_iteration"]) for g in s["segments"]]
    assert len(spans) == 2 and spans[0][0] == 0 and spans[1] == (resumed_from, 10), spans
    assert s["whole"]["segments"] == 2 and s["whole"]["train_time_s"] > s["train_time_s"], s["whole"]
    assert len(s["mean_rewards"]) == 10
    first, step = STEP[backend]
    steps = tensorboard_steps(folders[0], "mgpu/mean_reward")
    assert steps == [first + i * step for i in range(10)], steps  # strictly increasing, none twice
    return s
