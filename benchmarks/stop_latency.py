"""Ctrl-C → last process gone, under ``mgpu train`` and under plain torchrun, on the same workers.

Usage: ``uv run python benchmarks/stop_latency.py [--repeat N] [--torchrun-limit S]``. For each
launcher and worker (tests/workers: sleeper = cooperative ranks, stubborn = rank 1 ignores
SIGTERM/SIGINT, family = grandchildren + setsid escapees) it starts 2 CPU ranks, waits until every
worker recorded its PID, sends SIGINT to the launcher, and polls the recorded PIDs until none is
alive (or the limit passes: what is still alive then is counted as survivors, and SIGKILLed).
mgpu runs with its defaults (grace 10 s, kill after 5 s). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
WORKERS = ROOT / "tests" / "workers"
READY = {"sleeper.py": 2, "stubborn.py": 2, "family.py": 6}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def measure(launcher: str, worker: str, limit: float) -> tuple[float, int]:
    """Seconds from SIGINT to the last recorded PID gone, and how many survived ``limit``."""
    with tempfile.TemporaryDirectory() as tmp:
        pids = Path(tmp) / "pids"
        pids.mkdir()
        script = str(WORKERS / worker)
        if launcher == "mgpu":
            argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu"]
            argv += ["--nproc_per_node", "2", "--log_dir", f"{tmp}/logs", "--script", script]
        else:
            argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
            argv += ["--tee", "3", "--local_ranks_filter", "0", "--log_dir", f"{tmp}/logs", script]
        env = {**os.environ, "MGPU_TEST_PIDS": str(pids)}
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        while len([p for p in pids.iterdir() if p.name.isdigit()]) < READY[worker]:
            time.sleep(0.02)
        time.sleep(0.3)
        recorded = [int(p.name) for p in pids.iterdir() if p.name.isdigit()]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        while time.monotonic() - t0 < limit and any(map(_alive, [*recorded, proc.pid])):
            time.sleep(0.02)
            proc.poll()
        seconds = time.monotonic() - t0
        survivors = [p for p in recorded if _alive(p)]
        for pid in [*survivors, proc.pid]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        return seconds, len(survivors)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--limit", type=float, default=45.0)
    a = ap.parse_args()
    print("| launcher | workers | Ctrl-C → last process gone (s) | survivors |")
    print("|---|---|---|---|")
    for worker in ("sleeper.py", "stubborn.py", "family.py"):
        for launcher in ("mgpu", "torchrun"):
            runs = [measure(launcher, worker, a.limit) for _ in range(a.repeat)]
            secs = statistics.median(s for s, _ in runs)
            surv = max(n for _, n in runs)
            shown = f">{a.limit:g} (limit)" if surv else f"{secs:.2f}"
            print(f"| {launcher} | {worker[:-3]} | {shown} | {surv} |", flush=True)


if __name__ == "__main__":
    main()
