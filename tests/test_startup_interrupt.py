"""Ctrl-C while a run is still starting ends quietly: no ``KeyboardInterrupt`` traceback from the
middle of ``import torch``, in torchrun's own start-up or a rank's, and the interrupted exit code.

Real ``mgpu train`` processes with 2 CPU ranks; the Ctrl-C (SIGINT to mgpu, as a terminal sends it)
is timed by what the process tree shows, not by seconds: as soon as torchrun exists (it is then
importing torch), or as soon as both ranks have reported their first progress stage (``start``:
arguments parsed, torch not imported yet).
"""

from __future__ import annotations

import json
import signal
import time

import psutil
import pytest
from training_helpers import start

pytestmark = pytest.mark.slow


def _ranks(tree: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in tree if "isaaclab_mgpu.worker" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _started(ranks: list[psutil.Process]) -> bool:
    """Both ranks have written their first progress report (stage ``start``)."""
    from pathlib import Path

    for rank in ranks:
        try:
            folder = rank.environ().get("MGPU_PROGRESS_DIR")
        except psutil.Error:
            return False
        if not folder:
            return False
        reports = list(Path(folder).glob("progress.*.json"))
        if len(reports) < 2:
            return False
        try:
            return all(json.loads(p.read_text() or "{}").get("stage") for p in reports)
        except ValueError:
            return False
    return len(ranks) == 2


@pytest.mark.parametrize("stage", ["torchrun", "ranks"])
def test_ctrl_c_during_start_up_is_quiet(stage, tmp_path):
    proc = start("rsl_rl", tmp_path, "--num_envs", "8", "--max_iterations", "50")
    mgpu = psutil.Process(proc.pid)
    deadline = time.monotonic() + 300  # a safety net only: the moment is read from the tree
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            tree = mgpu.children(recursive=True)
        except psutil.Error:
            tree = []
        if stage == "torchrun" and any("torch.distributed.run" in _cmdline(p) for p in tree):
            break
        if stage == "ranks" and _started(_ranks(tree)):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before the moment to interrupt it came"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=240)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert proc.returncode == 130, out[-3000:]
    assert "stopped" in out, out[-3000:]
