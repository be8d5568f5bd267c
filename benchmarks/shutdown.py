"""Shutdown: Ctrl-C to last process gone, ``mgpu train`` vs plain torchrun, on the same workers.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group, so each launcher runs in
a process group of its own and the benchmark signals that group, as the terminal would. The
workers are the test suite's (``tests/workers``): ``sleeper`` (cooperative ranks), ``stubborn``
(rank 1 ignores SIGINT and SIGTERM) and ``family`` (each rank forks a grandchild and a setsid
escapee). They record their PIDs; the figure is the time until the launcher and every recorded
process are gone. Survivors are counted at ``DEADLINE`` seconds, then SIGKILLed. mgpu runs with
its default grace period (10 s) and kill delay (5 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from .common import MGPU, PYTHON, ROOT, Figure, save

WORKERS = ROOT / "tests" / "workers"
#: Processes each worker script leaves recorded once it runs (2 ranks).
READY = {"sleeper": 2, "stubborn": 2, "family": 6}
DEADLINE = 45.0


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def one_shutdown(launcher: str, worker: str) -> tuple[float, int]:
    """Start 2 ranks of ``worker``, Ctrl-C the group; return (seconds until all gone, survivors)."""
    with tempfile.TemporaryDirectory() as tmp:
        pids = Path(tmp, "pids")
        pids.mkdir()
        script = str(WORKERS / f"{worker}.py")
        logs = ["--tee", "3", "--local_ranks_filter", "0", "--log_dir", f"{tmp}/logs"]
        if launcher == "mgpu":
            argv = [
                MGPU,
                "train",
                "--device",
                "cpu",
                "--nproc_per_node",
                "2",
                "--script",
                script,
            ]
        else:
            argv = [
                PYTHON,
                "-m",
                "torch.distributed.run",
                "--nproc_per_node",
                "2",
                "--standalone",
                *logs,
                script,
            ]
        proc = subprocess.Popen(
            argv, env={**os.environ, "MGPU_TEST_PIDS": str(pids)}, cwd=tmp, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        ready_by = time.monotonic() + 120
        while len([p for p in pids.iterdir() if p.name.isdigit()]) < READY[worker]:
            if time.monotonic() > ready_by or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{launcher} never started {worker}")
            time.sleep(0.02)
        recorded = [proc.pid, *(int(p.name) for p in pids.iterdir() if p.name.isdigit())]
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        while any(map(_alive, recorded)) and time.monotonic() - start < DEADLINE:
            proc.poll()
            time.sleep(0.02)
        took = time.monotonic() - start
        survivors = [p for p in recorded if _alive(p)]
        for pid in survivors:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        return took, len(survivors)


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the shutdown figures."""
    figures, survivors = [], {}
    for worker, label in (("sleeper", "cooperative"), ("stubborn", "a rank ignores SIGTERM"),
                          ("family", "grandchildren + setsid escapees")):  # fmt: skip
        ours = [one_shutdown("mgpu", worker) for _ in range(repeats)]
        theirs = [one_shutdown("torchrun", worker) for _ in range(repeats)]
        survivors[worker] = {"mgpu": [n for _, n in ours], "torchrun": [n for _, n in theirs]}
        figures.append(
            Figure(
                f"Ctrl-C to last process gone, {label}", "s", [t for t, _ in ours], "plain torchrun",
                [t for t, _ in theirs], goal="no survivor; bounded by our grace period",
                note=f"survivors at {DEADLINE:.0f} s: mgpu {sum(survivors[worker]['mgpu'])}, "
                f"torchrun {sum(survivors[worker]['torchrun'])} (over {repeats} runs each)",
            )
        )  # fmt: skip
    save("shutdown", figures, {"survivors": survivors})
    return figures
