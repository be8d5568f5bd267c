"""Shutdown: Ctrl-C to last process gone, ``mgpu train`` vs plain torchrun, on the same workers.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group, so each launcher runs in
a process group of its own and the benchmark signals that group, as the terminal would. Workers
record their PIDs; the figure is the time until the launcher and every recorded worker are gone.
Survivors are counted at a deadline (``DEADLINE`` seconds) and then killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from .common import BIN, PYTHON, ROOT, Figure, save

WORKER = str(ROOT / "benchmarks" / "workers" / "sleeper.py")
DEADLINE = 60.0


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def one_shutdown(argv: list[str], ranks: int = 2) -> tuple[float, int]:
    """Start ``argv``, Ctrl-C it once every rank runs; return (seconds until all gone, survivors)."""
    with tempfile.TemporaryDirectory() as pid_dir:
        env = {**os.environ, "BENCH_PID_DIR": pid_dir}
        proc = subprocess.Popen(argv, env=env, start_new_session=True, cwd=pid_dir,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(list(Path(pid_dir).glob("*.pid"))) < ranks:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{argv[:3]} never started {ranks} ranks")
            time.sleep(0.05)
        pids = [proc.pid, *(int(p.stem) for p in Path(pid_dir).glob("*.pid"))]
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        while any(_alive(p) for p in pids) and time.monotonic() - start < DEADLINE:
            proc.poll()
            time.sleep(0.02)
        took = time.monotonic() - start
        survivors = [p for p in pids if _alive(p)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        proc.wait()
        return took, len(survivors)


def run(repeats: int = 3) -> list[Figure]:
    """Measure and save the shutdown figures."""
    mgpu = [str(BIN / "mgpu"), "train", "--device", "cpu", "--nproc_per_node", "2", "--no_preflight",
            "--script", WORKER]  # fmt: skip
    torchrun = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone", WORKER]
    figures, extra = [], {}
    for case, args in (("cooperative", []), ("ignores SIGINT/SIGTERM", ["--stubborn"])):
        ours = [one_shutdown([*mgpu, "--", *args]) for _ in range(repeats)]
        theirs = [one_shutdown([*torchrun, *args]) for _ in range(repeats)]
        extra[case] = {"mgpu_survivors": [s for _, s in ours], "torchrun_survivors": [s for _, s in theirs]}
        figures.append(
            Figure(f"Ctrl-C to last process gone, {case}", "s", [t for t, _ in ours], "plain torchrun",
                   [t for t, _ in theirs],
                   goal="no survivor; bounded by our grace period",
                   note=f"survivors mgpu {sum(s for _, s in ours)}, torchrun {sum(s for _, s in theirs)} "
                   f"(counted at {DEADLINE:.0f} s)")
        )  # fmt: skip
    save("shutdown", figures, {"survivors": extra})
    return figures
