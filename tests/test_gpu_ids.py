"""--gpu_ids / --gpus: GPU selection checked against NVML's GPUs (mocked: no GPU exists here)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess

import pytest
from cli_helpers import run
from conftest import machine

from isaaclab_mgpu.contract.errors import EnvironmentProblem, UsageError
from isaaclab_mgpu.launcher import nvml as nvml_mod
from isaaclab_mgpu.launcher.build import build
from isaaclab_mgpu.launcher.resolve import resolve
from isaaclab_mgpu.launcher.spec import LaunchSpec

UUIDS = tuple(f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4))
FOUR = tuple((f"NVIDIA H200 #{i}", u) for i, u in enumerate(UUIDS))


def nvml4(**environ: str):
    return dataclasses.replace(machine(4, **environ), nvml_gpu_uuids=UUIDS)


def res(spec, m=None, strict=True):
    return resolve(spec, m or nvml4(), strict=strict, port_free=lambda p: True, free_port=lambda: 4567)


def spec(ids: str, **kw) -> LaunchSpec:
    return LaunchSpec.from_options((), gpu_ids=ids, **kw)


def test_ids_select_gpus_and_set_the_rank_count():
    r = res(spec("1,3"))
    cmd = build(r)
    assert (r.nproc, cmd.world_size, cmd.env["CUDA_VISIBLE_DEVICES"]) == (2, 2, "1,3")
    assert cmd.rank_devices == {0: "cuda:0", 1: "cuda:1"}  # CUDA renumbers the selected GPUs
    assert r.visible.source == "--gpu_ids 1,3"


def test_ids_count_within_an_existing_cuda_visible_devices():
    r = res(spec("1,3"), _eight("4,5,6,7"))
    assert r.cuda_visible_devices == "5,7" and r.nproc == 2


def _eight(cvd: str):
    uuids = tuple(f"GPU-1111111{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(8))
    return dataclasses.replace(machine(8, CUDA_VISIBLE_DEVICES=cvd), nvml_gpu_uuids=uuids, nvml_gpu_count=8)


def test_uuid_ids_are_kept_and_matched_by_prefix():
    r = res(spec(f"{UUIDS[2]},0"))
    assert r.cuda_visible_devices == f"{UUIDS[2]},0"
    assert res(spec("GPU-00000002")).cuda_visible_devices == "GPU-00000002"


@pytest.mark.parametrize(
    ("ids", "fragment"),
    [
        ("4", r"index 4 is out of range; 4 GPU\(s\) are visible"),
        ("0,1,2,3,4", "names 5 GPUs, but only 4 are visible"),
        (f"1,{UUIDS[1]}", "names a GPU already listed"),
        ("GPU-99999999-0000", "is not a GPU of this machine"),
    ],
)
def test_bad_ids_are_usage_errors(ids, fragment):
    with pytest.raises(UsageError, match=fragment):
        res(spec(ids))
    with pytest.raises(UsageError, match=fragment):  # dry-run refuses them as well
        res(spec(ids), strict=False)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"gpu_ids": "0,0"}, "listed twice"),
        ({"gpu_ids": "0,x"}, "neither a GPU index nor"),
        ({"gpu_ids": ""}, "neither a GPU index nor"),
        ({"gpu_ids": "0,1", "nproc_per_node": "3"}, "--num_gpus 3 but --gpu_ids 0,1 names 2"),
        ({"gpu_ids": "0", "device": "cpu"}, "--device cpu runs CPU ranks"),
    ],
)
def test_static_checks_in_the_spec(kw, fragment):
    with pytest.raises(UsageError, match=fragment):
        LaunchSpec.from_options((), **kw)


def test_uuid_hidden_by_cuda_visible_devices():
    m = dataclasses.replace(nvml4(CUDA_VISIBLE_DEVICES="0,1"), nvml_gpu_count=4)
    with pytest.raises(UsageError, match="hidden by CUDA_VISIBLE_DEVICES"):
        res(spec(UUIDS[3]), m)


def test_no_driver_train_refuses_dry_run_warns():
    none = dataclasses.replace(machine(0), nvml_gpu_count=None)
    with pytest.raises(EnvironmentProblem, match="cannot be checked"):
        res(spec("0,1"), none)
    r = res(spec("0,1"), none, strict=False)
    assert r.cuda_visible_devices == "0,1" and r.nproc == 2 and r.warnings


# -- the command line, with NVML mocked -------------------------------------------------------------


@pytest.fixture
def nvml(monkeypatch):
    """Four GPUs as NVML would list them; no CUDA_VISIBLE_DEVICES, no SLURM."""
    import isaaclab_mgpu.launcher.diagnostics as diagnostics

    monkeypatch.setattr(nvml_mod, "list_gpus", lambda: FOUR)
    # dry-run also warns about failing preflight checks, which would judge this box's real driver.
    monkeypatch.setattr(diagnostics, "refusals", lambda spec, resolved: ())
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_NNODES", "MGPU_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("flag", ["--gpu_ids", "--gpu-ids", "--gpus"])
def test_dry_run_json_shows_cuda_visible_devices_and_two_ranks(capsys, nvml, flag):
    code, out, err = run(capsys, "dry-run", flag, "1,3", "--json")
    data = json.loads(out)
    assert code == 0 and err == ""
    assert data["env"]["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert data["world_size"] == 2 and data["nproc_per_node"] == 2
    assert data["command"].startswith("CUDA_VISIBLE_DEVICES=1,3 ")
    assert shlex.split(data["command"])[1:] == data["argv"]


def test_dry_run_line_shows_the_selection(capsys, nvml):
    code, out, _ = run(capsys, "dry-run", "--gpus", "2")
    argv = shlex.split(out)
    assert code == 0 and argv[0] == "CUDA_VISIBLE_DEVICES=2"
    assert argv[argv.index("--nproc_per_node") + 1] == "1"


@pytest.mark.parametrize("command", ["train", "dry-run", "check-env", "probe-nccl"])
@pytest.mark.parametrize("ids", ["1,7", "1,1", "0,1,2,3,0", "GPU-deadbeef"])
def test_bad_ids_exit_2_with_one_line_for_every_command(capsys, nvml, monkeypatch, command, ids):
    def refuse(*args, **kwargs):
        raise AssertionError(f"spawned {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    code, out, err = run(capsys, command, "--gpu_ids", ids)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("mgpu: error: ") and "--gpu_ids" in err


def test_probe_uses_the_selected_gpus(nvml):
    from isaaclab_mgpu.launcher.probe.config import ProbeOptions
    from isaaclab_mgpu.launcher.probe.run import launch_spec, plan_probe

    opts = ProbeOptions(iters=2, warmup=1, timeout=5.0, pairs=True, saved_workarounds=False)
    s = LaunchSpec.from_options((), gpu_ids="3,1,2")
    plan = plan_probe(s, opts, nvml4())
    assert [w.nproc for w in plan.world] == [1, 2, 3]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plan.pairs] == ["3,1", "3,2", "1,2"]
    from pathlib import Path

    one = launch_spec(s, plan.world[0], plan, opts, Path("/tmp/x"))
    assert one.gpu_ids == ("3",)
    assert launch_spec(s, plan.pairs[0], plan, opts, Path("/tmp/x")).gpu_ids is None
