"""Shared fixtures: machines described as data, so resolve and build run without probing."""

from __future__ import annotations

import pytest

from isaaclab_mgpu.resolve import Machine


def machine(gpus: int = 4, **environ: str) -> Machine:
    """A machine with ``gpus`` NVML devices and the given environment."""
    return Machine(
        environ=environ,
        python="python3",
        hostname="node01",
        nvml_gpu_count=gpus,
        cpu_count=8,
        run_stamp="2026-01-02_03-04-05",
    )


@pytest.fixture
def four_gpus() -> Machine:
    return machine(4)


@pytest.fixture
def no_gpu() -> Machine:
    return Machine(environ={}, python="python3", nvml_gpu_count=None, cpu_count=2, run_stamp="s")
