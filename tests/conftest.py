"""Shared fixtures: machines described as data, so resolve and build run without probing.

Every test starts from an environment without the caller's NCCL, PyTorch, CUDA, SLURM, Kubernetes, torchrun,
JAX-launcher and mgpu variables (:func:`_clean_environment`): a GPU container labels itself with
``NCCL_VERSION``/``CUDA_VERSION``, a SLURM allocation fills the rendezvous, and neither may change
what a test sees. A test that needs one sets it with ``monkeypatch``. ``tests/gpu/conftest.py``
keeps the GPU selection (``CUDA_VISIBLE_DEVICES``) that the GPU tests must respect.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from isaaclab_mgpu.launcher.resolve import Machine

#: Prefixes of the variables a test must not inherit from whoever runs pytest.
#: ``PET_`` and ``KUBERNETES_``: a PyTorchJob pod fills the rendezvous as SLURM does.
CALLER_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "CUDA_",
    "NV_",
    "NVIDIA_",
    "SLURM_",
    "TORCHELASTIC_",
    "JAX_",
    "MGPU_",
    "PET_",
    "KUBERNETES_",
)
#: Single variables of the same kind: torchrun's rank contract and thread counts.
CALLER_NAMES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "XLA_FLAGS",
)
#: Kept: what a test needs to run at all.
KEEP = frozenset()


def caller_variables(environ: dict[str, str] | os._Environ[str], keep: frozenset[str] = KEEP) -> list[str]:
    """Names in ``environ`` a test must not inherit."""
    return sorted(
        k for k in environ if (k.startswith(CALLER_PREFIXES) or k in CALLER_NAMES) and k not in keep
    )


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in caller_variables(os.environ):
        monkeypatch.delenv(name)


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


@pytest.fixture
def no_spawn(monkeypatch):
    """Fail the test if anything tries to start a process."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"spawned {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
