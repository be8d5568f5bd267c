"""GPU tests: real CUDA ranks, NCCL and NVML. Skipped (each test, cleanly) where no CUDA GPU is usable.

Run them on a GPU machine with ``python -m pytest tests/gpu`` (``benchmarks/gpu.sh`` runs them
first). "Usable" means NVML lists a GPU *and* torch was built with CUDA and sees it; torch is
imported only after NVML has found one, so collecting these tests elsewhere costs nothing.

The suite-wide fixture that clears the caller's ``CUDA_*``/``NVIDIA_*`` variables is overridden
here to keep the GPU selection (``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``): on a shared GPU
machine it says which GPUs these tests may use.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

#: Kept from the caller's environment for GPU tests.
GPU_SELECTION = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"})


@functools.cache
def cuda_gpus() -> int:
    """How many GPUs NVML lists and torch can use here (0 without CUDA)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library, no device: no GPU for these tests
        return 0
    if count == 0:
        return 0
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        return int(out.stdout.strip() or 0)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    from conftest import caller_variables

    for name in caller_variables(os.environ, keep=GPU_SELECTION):
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _needs_cuda():
    if cuda_gpus() == 0:
        pytest.skip("no usable CUDA GPU here (NVML and a CUDA build of torch are both needed)")


def compute_pids() -> set[int]:
    """PIDs NVML reports with a CUDA context on any GPU (in NVML's PID namespace)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        pids: set[int] = set()
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            pids |= {int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        return pids
    finally:
        pynvml.nvmlShutdown()


def wait_for(predicate: Callable[[], bool], timeout: float, every: float = 0.1) -> float | None:
    """Seconds until ``predicate()`` held, or None when ``timeout`` passed first."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(every)
    return None


def mgpu(*args: str, cwd: Path, merged: bool = True) -> subprocess.Popen[str]:
    """Start ``mgpu ARGS`` in its own session (a terminal's foreground group); stderr on stdout if merged."""
    return subprocess.Popen(
        [sys.executable, "-m", "isaaclab_mgpu", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
