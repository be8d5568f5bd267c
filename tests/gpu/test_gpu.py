"""On a real GPU: memory freed after Ctrl-C and after SIGKILL of mgpu, one GPU rank per back-end,
probe-nccl on NCCL. Measured on one H200 (driver 580, CUDA 13): memory freed 1.2 s after Ctrl-C and
1.2 s after SIGKILL of mgpu (a SIGKILLed plain torchrun still held it 20 s later); the bound here
is the issue's 5 s.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal

import pytest

from .conftest import compute_pids, cuda_gpus, mgpu, wait_for

#: Seconds within which the GPU memory of a stopped run must be free again.
RELEASE_S = 5.0
#: Seconds a run may take to create its CUDA context (imports, rendezvous, first kernels).
START_S = 180.0
BACKENDS = {
    "rsl_rl": ("--rl_library", "rsl_rl"),
    "skrl_torch": ("--rl_library", "skrl", "--ml_framework", "torch"),
    "skrl_jax": ("--rl_library", "skrl", "--ml_framework", "jax"),
}
LIBRARIES = {"rsl_rl": ("rsl_rl", "tensordict"), "skrl_torch": ("skrl",), "skrl_jax": ("skrl", "jax", "flax")}


def _require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not installed: declared dependencies of isaaclab-mgpu; install them "
            "(uv sync) or carry their wheels (benchmarks/gpu.sh --fetch-wheels)",
            pytrace=False,
        )


def _long_run(tmp_path):
    """Start a long one-GPU rsl-rl run; return (mgpu process, its CUDA PIDs) once it holds memory."""
    _require(*LIBRARIES["rsl_rl"])
    before = compute_pids()
    args = ("train", "--nproc_per_node", "1", *BACKENDS["rsl_rl"], "--num_envs", "4096")
    proc = mgpu(*args, "--max_iterations", "100000", cwd=tmp_path)
    started = wait_for(lambda: bool(compute_pids() - before) or proc.poll() is not None, START_S, every=0.5)
    ours = compute_pids() - before
    if started is None or not ours:
        proc.kill()
        out = proc.communicate(timeout=60)[0]
        pytest.fail(f"the run never held GPU memory (exit {proc.returncode}):\n{out[-3000:]}")
    return proc, before, ours


@pytest.mark.parametrize("how", ["ctrl_c", "sigkill_mgpu"])
def test_gpu_memory_is_released_after_stopping_mgpu(tmp_path, how):
    proc, before, ours = _long_run(tmp_path)
    try:
        if how == "ctrl_c":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the foreground group
        else:
            os.kill(proc.pid, signal.SIGKILL)  # mgpu alone: its watchdog must stop the ranks
        freed = wait_for(lambda: not (compute_pids() - before), RELEASE_S + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=60)[0]
    assert freed is not None and freed <= RELEASE_S, (freed, ours, out[-3000:])
    if how == "ctrl_c":
        assert proc.returncode == 130, out[-3000:]


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_one_gpu_rank_trains(tmp_path, backend):
    _require(*LIBRARIES[backend])
    args = ("train", "--nproc_per_node", "1", *BACKENDS[backend], "--num_envs", "4096")
    proc = mgpu(*args, "--max_iterations", "5", "--run_name", "gpu", cwd=tmp_path)
    out = proc.communicate(timeout=420)[0]
    assert proc.returncode == 0, out[-3000:]
    found = sorted(tmp_path.glob("logs/*/*/*_gpu/summary.json"))
    assert found, out[-3000:]
    s = json.loads(found[-1].read_text())
    assert (s["device"], s["world_size"], s["iterations"], s["exit_status"]) == ("cuda", 1, 5, 0), s
    assert s["env_steps_per_s"]["total"] > 0 and s["checksums_equal"] is True


def test_probe_nccl_on_the_gpus(tmp_path):
    sizes = "1,2" if cuda_gpus() >= 2 else "1"
    args = ("probe-nccl", "--backend", "nccl", "--world-sizes", sizes, "--json", "--log_dir", str(tmp_path))
    proc = mgpu(*args, cwd=tmp_path, merged=False)
    out, err = proc.communicate(timeout=420)
    assert proc.returncode == 0, (out + err)[-3000:]
    report = json.loads(out)
    assert report["backend"] == "nccl" and report["device"] == "cuda"
    assert [(w["world_size"], w["status"]) for w in report["world_sizes"]] == [
        (int(n), "ok") for n in sizes.split(",")
    ]
