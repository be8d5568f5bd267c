"""Restarts: how soon a run whose rank died trains again, and how much work the death costs.

``mgpu train --max_restarts 1`` with ``ranks()`` ranks of rsl-rl on the embedded cartpole (64 envs
per rank, a checkpoint every ``SAVE`` iterations) runs until rank 0 prints iteration ``KILL_AT``;
then the last rank is SIGKILLed (an OOM kill, a kernel fault). mgpu stops the attempt, starts the
next one and rank 0 resumes from the newest checkpoint.

- Restart latency: seconds from the SIGKILL to the first iteration line of the resumed attempt,
  as a ratio to the same run's fresh launch: seconds from starting ``mgpu train`` to its first
  iteration line. Both include interpreter start, imports, rendezvous, environments, trainer
  and the first iteration; the restart adds stopping the failed attempt. Goal: ratio ≤ 1.2.
- Iterations lost: what the summary records for the restart (iterations done after the newest
  checkpoint). Goal: ≤ the save interval.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil

from .common import MGPU, Figure, device, ranks, save

SAVE = 4
KILL_AT = 6
ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _rank(root: int, rank: int) -> psutil.Process:
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if proc.environ().get("RANK") == str(rank) and "isaaclab_mgpu.worker" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    raise RuntimeError(f"rank {rank} not found")


def one_restart() -> tuple[float, float, int]:
    """(fresh launch to first iteration, SIGKILL to first resumed iteration, iterations lost)."""
    n = ranks()
    argv = [MGPU, "train", "--device", device(), "--nproc_per_node", str(n), "--num_envs", "64"]
    argv += ["--max_iterations", str(KILL_AT + 4), "--save_interval", str(SAVE), "--max_restarts", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=tmp, env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        killer = threading.Timer(600, proc.kill)
        killer.start()
        assert proc.stdout is not None
        tail: list[str] = []
        first = killed = resumed = None
        resuming = False
        try:
            for line in proc.stdout:
                tail = [*tail[-40:], line]
                now = time.perf_counter()
                if first is None and "] iteration 1/" in line:
                    first = now - started
                if killed is None and f"] iteration {KILL_AT}/" in line:
                    _rank(proc.pid, n - 1).send_signal(signal.SIGKILL)
                    killed = time.perf_counter()
                elif killed is not None and "resuming at iteration" in line:
                    resuming = True
                elif resuming and resumed is None and "] iteration " in line:
                    resumed = now - killed
            code = proc.wait()
        finally:
            killer.cancel()
        if code != 0 or first is None or resumed is None:
            raise RuntimeError(f"mgpu exited {code}:\n{''.join(tail)}")
        (summary,) = Path(tmp).glob("logs/rsl_rl/cartpole/*/summary.json")
        lost = json.loads(summary.read_text())["restarts"][0]["lost"]
    return first, resumed, lost


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the restart figures."""
    runs = [one_restart() for _ in range(repeats)]
    fresh, resumed, lost = ([r[i] for r in runs] for i in range(3))
    figures = [
        Figure(
            f"rank SIGKILLed to the first resumed iteration ({ranks()} {device()} ranks, rsl-rl)", "s",
            resumed, "fresh launch to its first iteration, same run", fresh, goal="ratio ≤ 1.2",
        ),
        Figure(
            f"iterations lost to the restart (--save_interval {SAVE}, killed after iteration {KILL_AT})",
            "iterations", [float(v) for v in lost], goal=f"≤ {SAVE}",
        ),
    ]  # fmt: skip
    save("restart", figures)
    return figures


if __name__ == "__main__":
    subprocess.run([MGPU, "--version"], check=True)
    for figure in run(int(os.environ.get("REPEATS", "3"))):
        print(figure.name, figure.samples, figure.baseline_samples, figure.ratio())
