"""resolve(): visible devices, rank counts, SLURM fills, rendezvous and ports."""

from __future__ import annotations

import socket

import pytest
from conftest import machine

from isaaclab_mgpu.contract.errors import EnvironmentProblem, UsageError
from isaaclab_mgpu.launcher.resolve import (
    CPU_RANKS_PER_CORE,
    first_slurm_host,
    port_is_free,
    resolve,
    visible_devices,
)
from isaaclab_mgpu.launcher.spec import LaunchSpec


def res(spec, m=None, strict=True, **kw):
    kw.setdefault("port_free", lambda p: True)
    kw.setdefault("free_port", lambda: 45678)
    return resolve(spec, m or machine(4), strict=strict, **kw)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("0,0", "twice"),
        ("1,01", "twice"),
        ("0,abc", "neither"),
        ("0,,1", "neither"),
        ("4", "out of range"),
        ("0,\uff11", "neither"),
        ("\u0661", "neither"),
    ],  # full-width 1, Arabic-Indic 1: not for CUDA
)
def test_a_cuda_visible_devices_that_cuda_would_cut_short_is_refused(value, fragment):
    with pytest.raises(UsageError, match=f"CUDA_VISIBLE_DEVICES='{value}': .*{fragment}"):
        visible_devices(machine(4, CUDA_VISIBLE_DEVICES=value))


def test_minus_one_ends_cuda_visible_devices_as_cuda_does():
    assert visible_devices(machine(4, CUDA_VISIBLE_DEVICES="0,-1,1")).entries == ("0",)
    assert visible_devices(machine(4, CUDA_VISIBLE_DEVICES="-1")).count == 0
    assert visible_devices(machine(4, CUDA_VISIBLE_DEVICES="")).count == 0


def test_visible_devices_prefers_cuda_visible_devices():
    assert visible_devices(machine(8, CUDA_VISIBLE_DEVICES="2,5")).count == 2
    assert visible_devices(machine(8)).count == 8
    no_nvml = machine(0)
    assert visible_devices(type(no_nvml)(environ={}, nvml_gpu_count=None)).count == 0


def test_more_ranks_than_gpus_fails_train_and_warns_dry_run():
    spec = LaunchSpec(nproc_per_node="8")
    with pytest.raises(EnvironmentProblem, match="--num_gpus 8 is more than the 4"):
        res(spec)
    lenient = res(spec, strict=False)
    assert lenient.nproc == 8 and "more than the 4" in lenient.warnings[0]


def test_no_gpu_suggests_cpu(no_gpu):
    with pytest.raises(EnvironmentProblem, match="--device cpu"):
        res(LaunchSpec(), no_gpu)
    planned = res(LaunchSpec(), no_gpu, strict=False)
    assert planned.nproc == "gpu" and planned.world_size is None


def test_num_gpus_cpu_is_one_cuda_rank_per_core(no_gpu):
    # torchrun's meaning: os.cpu_count() ranks, each on cuda:LOCAL_RANK unless --device cpu.
    with pytest.raises(EnvironmentProblem, match="one CUDA rank per CPU core, 2 here, but no GPU"):
        res(LaunchSpec(nproc_per_node="cpu"), no_gpu)
    planned = res(LaunchSpec(nproc_per_node="cpu"), no_gpu, strict=False)
    assert planned.nproc == 2 and "--device cpu --num_gpus 2" in planned.warnings[0]
    with pytest.raises(EnvironmentProblem, match="8 here, more than the 4 GPU"):
        res(LaunchSpec(nproc_per_node="cpu"))  # 8 cores, 4 GPUs
    assert res(LaunchSpec(nproc_per_node="cpu"), machine(8)).nproc == 8


def test_cpu_ranks_ignore_gpus(no_gpu):
    assert res(LaunchSpec(device="cpu"), no_gpu).nproc == 1
    assert res(LaunchSpec(device="cpu", nproc_per_node="3"), no_gpu).nproc == 3
    assert res(LaunchSpec(device="cpu", nproc_per_node="auto"), no_gpu).nproc == 2
    # A broken CUDA_VISIBLE_DEVICES does not matter to CPU ranks.
    assert res(LaunchSpec(device="cpu"), machine(0, CUDA_VISIBLE_DEVICES="0,0")).nproc == 1


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("node01", "node01"),
        ("gpu[03-05,9],login1", "gpu03"),
        ("a[1-2]b[07,9]", "a1b07"),
        ("x1,x2", "x1"),
        ("rack[2-3]-n[10-11]", "rack2-n10"),
    ],
)
def test_first_slurm_host(nodelist, first):
    assert first_slurm_host(nodelist) == first


SLURM = {
    "SLURM_JOB_ID": "4242",
    "SLURM_NNODES": "2",
    "SLURM_NODEID": "1",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
}


def test_slurm_fills_missing_rendezvous():
    r = res(LaunchSpec(nproc_per_node="4"), machine(4, **SLURM))
    assert (r.nnodes, r.node_rank, r.rdzv_backend, r.rdzv_endpoint, r.rdzv_id) == (
        "2",
        1,
        "c10d",
        "gpu07:29500",
        "4242",
    )
    assert not r.standalone and len(r.filled) == 5 and r.world_size == 8


def test_explicit_options_beat_slurm():
    spec = LaunchSpec(nproc_per_node="4", nnodes="2", node_rank=0, rdzv_endpoint="head:1234", rdzv_id="mine")
    r = res(spec, machine(4, **SLURM))
    assert (r.nnodes, r.node_rank, r.rdzv_endpoint, r.rdzv_id) == ("2", 0, "head:1234", "mine")
    assert r.filled == ("--rdzv_backend c10d for the SLURM rendezvous",)


def test_slurm_single_node_is_standalone():
    r = res(LaunchSpec(nproc_per_node="2"), machine(4, **{**SLURM, "SLURM_NNODES": "1"}))
    assert r.standalone and r.filled == ()


def test_slurm_jax_coordinator_from_first_host():
    spec = LaunchSpec(rl_library="skrl", ml_framework="jax", nproc_per_node="2")
    r = res(spec, machine(4, **SLURM))
    assert r.coordinator == ("gpu07", 5000)


def test_multinode_needs_an_address():
    with pytest.raises(UsageError, match="needs a rendezvous address"):
        res(LaunchSpec(nproc_per_node="2", nnodes="2"))
    with pytest.raises(UsageError, match="--coordinator_address"):
        res(LaunchSpec(rl_library="skrl", ml_framework="jax", nproc_per_node="2", nnodes="2"))


def test_busy_master_port():
    spec = LaunchSpec(nproc_per_node="2", master_port=29511)
    with pytest.raises(EnvironmentProblem, match="29511 is already in use"):
        res(spec, port_free=lambda p: False)
    assert "already in use" in res(spec, strict=False, port_free=lambda p: False).warnings[0]
    # Only the rank-0 node hosts the store.
    res(LaunchSpec(nproc_per_node="2", nnodes="2", node_rank=1, master_addr="h", master_port=29511),
        port_free=lambda p: False)  # fmt: skip


def test_port_is_free_sees_a_listener():
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        assert not port_is_free(sock.getsockname()[1])


def test_missing_script(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        res(LaunchSpec(nproc_per_node="2", script=str(tmp_path / "nope.py")))
    with pytest.raises(UsageError, match="is a folder; give the path of a Python file"):
        res(LaunchSpec(nproc_per_node="2", script=str(tmp_path)))


def test_cpu_ranks_beyond_the_multiple_of_cores_fail_train_and_warn_dry_run(no_gpu):
    most = CPU_RANKS_PER_CORE * no_gpu.cpu_count
    assert res(LaunchSpec(device="cpu", nproc_per_node=str(most)), no_gpu).nproc == most
    too_many = LaunchSpec(device="cpu", nproc_per_node=str(most + 1))
    with pytest.raises(EnvironmentProblem, match=f"more than {CPU_RANKS_PER_CORE} ranks per CPU"):
        res(too_many, no_gpu)
    planned = res(too_many, no_gpu, strict=False)
    assert planned.nproc == most + 1 and "--oversubscribe_cpu" in planned.warnings[0]
    meant = LaunchSpec(device="cpu", nproc_per_node=str(most + 1), oversubscribe_cpu=True)
    assert res(meant, no_gpu).nproc == most + 1 and not res(meant, no_gpu, strict=False).warnings


def test_a_slurm_count_in_other_digits_fills_nothing():
    env = {"SLURM_JOB_ID": "9", "SLURM_NNODES": "\uff12", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert res(LaunchSpec(nproc_per_node="2"), machine(4, **env)).nnodes is None
