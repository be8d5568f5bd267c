"""Rules of check-env judged over fact fixtures (machines this box cannot show)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from checkenv_fixtures import facts, gpu_machine, gpus, held, plan

from isaaclab_mgpu.launcher.diagnostics.deep import DeepFacts, ProbeResult
from isaaclab_mgpu.launcher.diagnostics.facts import Endpoint, NetFacts, Package
from isaaclab_mgpu.launcher.diagnostics.rules import AREAS, FAIL, PASS, STATUSES, WARN, evaluate, failures
from isaaclab_mgpu.launcher.nvml import GpuLink, GpuProcess, parse_topo_matrix

MIB = 2**20


def find(f, name):
    hits = [x for x in evaluate(f) if x.name == name]
    assert len(hits) == 1, f"{name}: {hits}"
    return hits[0]


def test_healthy_machine_passes_everything():
    found = evaluate(facts(8))
    assert {f.status for f in found} == {PASS}, [f for f in found if f.status != PASS]
    assert all(f.fix is None for f in found)
    assert [f.area for f in found] == sorted((f.area for f in found), key=AREAS.index)


def test_every_finding_is_well_formed():
    for f in evaluate(facts(2, nvlink=False, nccl_env=(("NCCL_P2P_DISABLE", "1"),))):
        assert f.area in AREAS and f.status in STATUSES and f.observed
        assert (f.fix is None) == (f.status == PASS)


# -- topology ---------------------------------------------------------------------------------


def test_eight_gpus_without_nvlink_warn_pcie_only():
    f = find(facts(8, nvlink=False), "gpu_links")
    assert f.status == WARN
    assert "PCIe only" in f.observed and "8 GPUs" in f.observed
    assert "probe-nccl" in f.fix
    assert "world size 2" not in f.observed


def test_pcie_across_sockets_hints_numa_workaround():
    base = facts(4)
    f = find(replace(base, gpu=gpu_machine(4, nvlink=False, path="SYS")), "gpu_links")
    assert f.status == WARN and "SYS" in f.observed and "NCCL_CUMEM_HOST_ENABLE=0" in f.fix


def test_world_size_two_over_pcie_is_the_known_hang():
    f = find(facts(2, nvlink=False), "gpu_links")
    assert f.status == WARN
    assert "world size 2" in f.observed
    assert "NCCL_P2P_DISABLE=1" in f.fix and "--save-workaround" in f.fix


def test_world_size_two_over_pcie_passes_with_saved_workaround():
    f = find(facts(2, nvlink=False, saved_workarounds=(("NCCL_P2P_DISABLE", "1"),)), "gpu_links")
    assert f.status == PASS and "NCCL_P2P_DISABLE" in f.observed


def test_two_of_eight_gpus_over_pcie_is_judged_on_the_gpus_used():
    # 8 GPUs, but the launch uses 2 of them (--num_gpus 2): that pair is what matters.
    f = find(facts(8, nvlink=False, nproc=2), "gpu_links")
    assert "world size 2" in f.observed


def test_partial_nvlink_warns():
    base = facts(4)
    ls = tuple(
        GpuLink(a, b, (a, b) in ((0, 1), (2, 3)), "NV4" if (a, b) in ((0, 1), (2, 3)) else "SYS")
        for a in range(4)
        for b in range(a + 1, 4)
    )
    f = find(replace(base, gpu=replace(base.gpu, links=ls)), "gpu_links")
    assert f.status == WARN and "0-1" in f.observed and "2-3" in f.observed


def test_unknown_topology_warns():
    base = facts(2)
    f = find(replace(base, gpu=replace(base.gpu, links=(), topology_source="none")), "gpu_links")
    assert f.status == WARN and "unknown" in f.observed


def test_nvidia_smi_topology_matrix_is_parsed():
    text = (
        "\x1b[4mGPU0\tGPU1\tGPU2\tCPU Affinity\x1b[0m\n"
        "GPU0\t X \tNV12\tSYS\t0-15\n"
        "GPU1\tNV12\t X \tPHB\t0-15\n"
        "GPU2\tSYS\tPHB\t X \t16-31\n\nLegend:\n  X    = Self\n"
    )
    assert parse_topo_matrix(text) == (
        GpuLink(0, 1, True, "NV12"),
        GpuLink(0, 2, False, "SYS"),
        GpuLink(1, 2, False, "PHB"),
    )


# -- /dev/shm and limits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "device", "status"),
    [
        (64 * MIB, "cuda", FAIL),  # Docker's default
        (64 * MIB, "cpu", WARN),
        (768 * MIB, "cuda", WARN),
        (8 * 2**30, "cuda", PASS),
    ],
)
def test_dev_shm(size, device, status):
    base = facts(2)
    f = find(replace(base, limits=replace(base.limits, shm_bytes=size), plan=plan(2, device)), "dev_shm")
    assert f.status == status
    if status != PASS:
        assert "--shm-size" in f.fix
    if size == 64 * MIB:
        assert "64 MiB" in f.observed


def test_dev_shm_missing_warns():
    base = facts(2)
    assert find(replace(base, limits=replace(base.limits, shm_bytes=None)), "dev_shm").status == WARN


def test_memlock_matters_across_nodes():
    base = facts(8)
    lim = replace(base.limits, memlock_soft=64 * 1024, memlock_hard=64 * 1024)
    assert find(replace(base, limits=lim), "memlock").status == PASS
    f = find(replace(base, limits=lim, plan=plan(8, nnodes=2)), "memlock")
    assert f.status == WARN and "64 KiB" in f.observed and "unlimited" in f.fix


def test_open_files_limit():
    base = facts(2)
    f = find(replace(base, limits=replace(base.limits, nofile_soft=1024, nofile_hard=1048576)), "open_files")
    assert f.status == WARN and f.fix == "ulimit -n 65536"


def test_omp_oversubscription():
    base = facts(8)
    f = find(replace(base, limits=replace(base.limits, cpu_count=16, omp_num_threads="8")), "omp_num_threads")
    assert f.status == WARN and "64 threads on 16 CPUs" in f.observed and "OMP_NUM_THREADS=2" in f.fix


def test_more_cpu_ranks_than_cpus():
    base = facts(0)
    f = find(replace(base, limits=replace(base.limits, cpu_count=2), plan=plan(4, "cpu")), "cpu_ranks")
    assert f.status == WARN


# -- NCCL variables ---------------------------------------------------------------------------------


def test_stale_p2p_disable_warns_and_names_nvlink():
    f = find(facts(8, nccl_env=(("NCCL_P2P_DISABLE", "1"),)), "nccl_env:NCCL_P2P_DISABLE")
    assert f.status == WARN and "left set" in f.observed and "NVLink" in f.observed
    assert "unset NCCL_P2P_DISABLE" in f.fix


def test_p2p_disable_matching_saved_workaround_passes():
    f = facts(
        2, nvlink=False, nccl_env=(("NCCL_P2P_DISABLE", "1"),), saved_workarounds=(("NCCL_P2P_DISABLE", "1"),)
    )
    assert find(f, "nccl_env:NCCL_P2P_DISABLE").status == PASS
    assert find(f, "saved_workarounds").status == PASS


def test_env_contradicting_saved_workaround_warns():
    f = facts(2, nccl_env=(("NCCL_P2P_DISABLE", "0"),), saved_workarounds=(("NCCL_P2P_DISABLE", "1"),))
    assert find(f, "saved_workarounds").status == WARN


@pytest.mark.parametrize(
    ("var", "value", "status"),
    [
        ("NCCL_DEBUG", "INFO", WARN),
        ("NCCL_DEBUG", "WARN", PASS),
        ("NCCL_SOCKET_IFNAME", "eth0", PASS),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", WARN),
        ("NCCL_SHM_DISABLE", "1", WARN),
    ],
)
def test_nccl_variables(var, value, status):
    assert find(facts(2, nccl_env=((var, value),)), f"nccl_env:{var}").status == status


def test_two_nccl_wheels_warn():
    f = facts(2, packages=(*facts(2).packages, Package("nvidia-nccl-cu13", "2.28.9", "13")))
    assert find(f, "nccl_version").status == WARN


# -- GPUs in use --------------------------------------------------------------------------------


def test_gpu_held_by_another_process_warns():
    base = facts(2)
    gs = (held(base.gpu.gpus[0], GpuProcess(4242, 3000, "python", "python other.py")), base.gpu.gpus[1])
    f = replace(base, gpu=replace(base.gpu, gpus=gs))
    one = find(f, "gpu_in_use:0")
    assert one.status == WARN and "PID 4242" in one.observed and "in use by an unknown user" in one.fix
    assert find(f, "gpu_in_use:1").status == PASS
    assert not failures(evaluate(f))


def test_gpu_held_by_a_leftover_of_my_own_mgpu_run_fails_with_the_kill_command():
    base = facts(2)
    stale = GpuProcess(
        777,
        20000,
        "python",
        "python -m isaaclab_mgpu.worker --rl_library rsl_rl --distributed",
        user="me",
        mine=True,
        run_id="0123456789abcdef",
        orphan=True,
    )
    f = replace(base, gpu=replace(base.gpu, gpus=(held(base.gpu.gpus[0], stale), base.gpu.gpus[1])))
    one = find(f, "gpu_in_use:0")
    assert one.status == FAIL and "kill 777" in one.fix
    assert "(you, mgpu run 01234567)" in one.observed


def _used_by(proc: GpuProcess, used: int | None = None):
    base = facts(2)
    gpus = (held(base.gpu.gpus[0], proc, used=used), base.gpu.gpus[1])
    return find(replace(base, gpu=replace(base.gpu, gpus=gpus)), "gpu_in_use:0")


def test_a_colleagues_live_torchrun_is_named_with_its_owner_and_never_killed():
    colleague = GpuProcess(
        4243,
        30000,
        "python",
        "python -m torch.distributed.run --nproc_per_node 8 train.py",
        user="alice",
        mine=False,
    )
    one = _used_by(colleague)
    assert one.status == WARN and "alice" in one.observed and "in use by alice" in one.fix
    assert "kill" not in one.fix and "4243" not in one.fix
    full = _used_by(colleague, used=80000)
    assert full.status == FAIL and "alice" in full.fix and "kill" not in full.fix


def test_my_own_running_mgpu_run_is_not_a_leftover():
    running = GpuProcess(
        900,
        9000,
        "python",
        "python -m isaaclab_mgpu.worker --distributed",
        user="me",
        mine=True,
        run_id="r",
        orphan=False,
    )
    one = _used_by(running)
    assert one.status == WARN and "kill" not in one.fix and "in use by you" in one.fix


def test_a_process_whose_owner_is_not_visible_is_never_killed():
    unknown = GpuProcess(5, 100, None, "python -m isaaclab_mgpu.worker", orphan=True)
    one = _used_by(unknown)
    assert "kill" not in one.fix and "an unknown user" in one.fix


def test_owner_marker_and_orphan_are_read_from_a_real_process():
    import getpass
    import os
    import subprocess
    import sys

    from isaaclab_mgpu.launcher import nvml

    env = {**os.environ, "MGPU_RUN_ID": "feedfacecafe"}
    # The child says when it runs: right after a vfork'd exec its argv and environment read as empty
    # until the kernel has set them up (measured: 155 of 200 probes under load).
    ready = "import time; print('up', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", ready], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "up\n"
        seen = nvml._process(child.pid, 12)
    finally:
        child.kill()
        child.communicate()
    assert (seen.pid, seen.used_mib, seen.mine, seen.run_id) == (child.pid, 12, True, "feedfacecafe")
    assert seen.user == getpass.getuser()
    assert seen.orphan  # pytest is no launcher: nothing above it would stop it


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["/home/u/isaaclab-mgpu/.venv/bin/python", "/home/u/isaaclab-mgpu/.venv/bin/mgpu", "train"], True),
        (["/usr/bin/python3", "-X", "importtime", "-m", "torch.distributed.run", "--nnodes", "2"], True),
        (["python", "-m", "isaaclab_mgpu.jaxrun", "--nproc_per_node", "2"], True),
        (["python", "-misaaclab_mgpu", "train"], True),
        (["torchrun", "--standalone", "x.py"], True),
        (["/opt/isaaclab-mgpu/uv", "run", "python", "train.py"], False),
        (["tmux", "new", "-s", "mgpu"], False),
        (["python", "/home/u/isaaclab-mgpu/scripts/train.py", "mgpu"], False),
        (["python", "-c", "import isaaclab_mgpu"], False),
        ([], False),
    ],
)
def test_launchers_above_a_rank_are_told_by_program_or_module_not_a_substring(argv, launcher):
    from isaaclab_mgpu.launcher.nvml import is_launcher

    assert is_launcher(argv) is launcher


def test_a_rank_under_paths_named_mgpu_is_left_over_and_under_mgpu_is_not(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from isaaclab_mgpu.launcher import nvml

    # Every ancestor's command line holds "mgpu" in a path (a checkout named isaaclab-mgpu).
    home = tmp_path / "isaaclab-mgpu"
    home.mkdir()
    spawn = home / "spawn.py"
    spawn.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "print(child.pid, flush=True)\n"
        "child.wait()\n"
    )
    (home / "mgpu").write_text(spawn.read_text())  # a program named mgpu: a launcher
    for script, orphan in ((spawn, True), (home / "mgpu", False)):
        parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=home)
        try:
            pid = int(parent.stdout.readline())
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "-c" not in nvml._process(pid, 1).cmdline:
                time.sleep(0.05)
            seen = nvml._process(pid, 1)
        finally:
            os.kill(pid, 9)
            parent.wait()
        assert seen.orphan is orphan, (script, seen)


def test_full_gpu_fails():
    base = facts(2)
    g = held(base.gpu.gpus[1], GpuProcess(5, None), used=80000)
    f = find(replace(base, gpu=replace(base.gpu, gpus=(base.gpu.gpus[0], g))), "gpu_in_use:1")
    assert f.status == FAIL


def test_gpu_outside_the_launch_is_not_judged():
    base = facts(4, cuda_visible_devices="0,1", nproc=2)
    gs = list(base.gpu.gpus)
    gs[3] = held(gs[3], GpuProcess(9, 1000, "x", "x"))
    f = replace(base, gpu=replace(base.gpu, gpus=tuple(gs)))
    assert not [x for x in evaluate(f) if x.name == "gpu_in_use:3"]


def test_no_driver_fails_for_cuda_and_passes_for_cpu():
    from isaaclab_mgpu.launcher.nvml import GpuFacts

    none = GpuFacts(nvml=False, error="NVML: NVML Shared Library Not Found")
    assert find(facts(0, gpu=none), "driver").status == FAIL
    assert find(facts(0, gpu=none, plan=plan(2, "cpu")), "driver").status == PASS


def test_mixed_models_want_pci_bus_order():
    base = facts(2)
    gs = (base.gpu.gpus[0], replace(base.gpu.gpus[1], name="NVIDIA RTX A6000"))
    f = replace(base, gpu=replace(base.gpu, gpus=gs))
    order = find(f, "cuda_device_order")
    assert order.status == WARN and order.fix == "export CUDA_DEVICE_ORDER=PCI_BUS_ID"
    assert find(replace(f, cuda_device_order="PCI_BUS_ID"), "cuda_device_order").status == PASS


# -- CUDA_VISIBLE_DEVICES ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "status", "words"),
    [
        ("0,1", PASS, "2 visible"),
        ("1,1", FAIL, "listed twice"),
        ("-1", FAIL, "hides every GPU"),
        ("", FAIL, "hides every GPU"),
        ("0,-1,1", WARN, "hides the entries after it"),
        ("GPU-deadbeef-0000", FAIL, "not a GPU of this machine"),
        ("GPU-00000001", PASS, "1 visible"),  # a unique UUID prefix, as CUDA accepts
        ("GPU-0000000", FAIL, "matches several GPUs"),
        ("0,GPU-00000000", FAIL, "listed twice"),  # same GPU by index and UUID
        ("7", FAIL, "out of range"),
        ("zero", FAIL, "neither a GPU index"),
        ("0,zero,1", FAIL, "CUDA reads no further (1)"),  # CUDA stops at the first invalid entry
        ("MIG-4b5c6d7e-1111-2222-3333-444455556666", PASS, "1 visible"),
    ],
)
def test_cuda_visible_devices(value, status, words):
    f = find(facts(2, cuda_visible_devices=value), "cuda_visible_devices")
    assert f.status == status, f
    assert words in f.observed


def test_cuda_visible_devices_unset_says_how_many_gpus_that_is():
    from isaaclab_mgpu.launcher.nvml import GpuFacts as _GpuFacts

    assert find(facts(2), "cuda_visible_devices").observed == "unset (all 2 GPU(s) visible)"
    assert find(facts(0), "cuda_visible_devices").observed == "unset (no GPU found)"
    no_driver = facts(0, gpu=_GpuFacts(nvml=False, error="NVML Shared Library Not Found"))
    assert find(no_driver, "cuda_visible_devices").observed == "unset (no GPU visible: no NVIDIA driver)"


def test_cuda_visible_devices_hiding_all_is_only_a_warning_for_cpu_ranks():
    f = find(facts(2, cuda_visible_devices="-1", plan=plan(2, "cpu")), "cuda_visible_devices")
    assert f.status == WARN


# -- libraries ------------------------------------------------------------------------------------


def _with(f, *pkgs):
    names = {p.name for p in pkgs}
    return replace(f, packages=tuple(p for p in f.packages if p.name not in names) + pkgs)


def jax_facts(driver_cuda: str, *plugins: Package):
    base = facts(2, plan=plan(2, launcher="jaxrun", library="skrl", framework="jax"))
    return _with(replace(base, gpu=replace(base.gpu, cuda_driver_version=driver_cuda)), *plugins)


def test_jax_cuda_plugin_newer_than_the_driver_fails():
    f = find(jax_facts("12.4", Package("jax-cuda13-plugin", "0.4.35", "13")), "jax")
    assert f.status == FAIL and "needs CUDA 13" in f.observed and "jax[cuda12]" in f.fix


@pytest.mark.parametrize(
    ("torch_cuda", "driver", "plugin"), [("13.0", "13.0", 13), ("12.8", "13.0", 12), ("13.0", "12.4", 12)]
)
def test_missing_jax_plugin_advice_follows_the_installed_torch_within_the_driver(torch_cuda, driver, plugin):
    f = find(_with(jax_facts(driver), Package("torch", "2.13.0", torch_cuda)), "jax")
    assert f.status == FAIL and "no jax CUDA plugin" in f.observed
    assert f.fix == f"uv pip install 'jax[cuda{plugin}]'"


def test_jax_cuda_plugin_on_a_newer_driver_passes():
    assert find(jax_facts("13.0", Package("jax-cuda12-plugin", "0.4.35", "12")), "jax").status == PASS


def test_jax_plugin_version_must_match_jaxlib():
    f = find(jax_facts("12.4", Package("jax-cuda12-plugin", "0.4.30", "12")), "jax")
    assert f.status == FAIL and "does not match jaxlib 0.4.35" in f.observed


def test_jax_on_gpus_without_plugin_fails_and_is_ignored_for_torch_launches():
    assert find(jax_facts("12.4"), "jax").status == FAIL
    f = _with(facts(2), Package("jax-cuda13-plugin", "0.4.35", "13"))
    assert find(f, "jax").status == WARN  # wrong, but this launch does not use jax


def test_torch_cpu_build_cannot_use_gpus():
    f = find(_with(facts(2), Package("torch", "2.5.1+cpu", "none")), "torch")
    assert f.status == FAIL and "CPU build" in f.observed


def test_torch_cuda_build_newer_than_the_driver_fails():
    f = find(_with(facts(2), Package("torch", "2.11.0", "13.0")), "torch")
    assert f.status == FAIL and "12.4" in f.observed


def test_missing_rl_library_fails_only_when_used():
    f = replace(facts(2), packages=tuple(p for p in facts(2).packages if p.name != "skrl"))
    assert find(f, "skrl").status == PASS
    assert find(replace(f, plan=plan(2, library="skrl")), "skrl").status == FAIL


def test_deep_torch_timeout_fails():
    deep = DeepFacts(torch=ProbeResult(True, "timed out after 60 s"), jax=ProbeResult(False, "not installed"))
    f = find(facts(2, deep=deep), "torch_runtime")
    assert f.status == FAIL and "timed out" in f.observed


def test_deep_torch_without_cuda_on_a_gpu_machine_fails():
    values = {"version": "2.5.1", "cuda_build": "12.4", "cuda_available": False, "device_count": 0}
    deep = DeepFacts(torch=ProbeResult(True, None, values, 3.0), jax=ProbeResult(False, "not installed"))
    assert find(facts(2, deep=deep), "torch_runtime").status == FAIL


# -- launch ---------------------------------------------------------------------------------------


def _net(*endpoints, address="10.0.0.1"):
    return NetFacts("node01", address, None, tuple(endpoints))


def test_busy_master_port_fails():
    f = facts(2, net=_net(Endpoint("master", "127.0.0.1", 29500, True, port_free=False)))
    one = find(f, "port:master")
    assert one.status == FAIL and "29500" in one.observed and "--master_port" in one.fix
    assert failures(evaluate(f)) == (one,)


@pytest.mark.parametrize(
    ("endpoint", "status"),
    [
        (Endpoint("master", "node00", 29500, False, resolves=False), FAIL),
        (Endpoint("master", "node00", 29500, False, resolves=True, reachable="timeout"), WARN),
        (Endpoint("master", "node00", 29500, False, resolves=True, reachable="unreachable"), FAIL),
        (Endpoint("master", "node00", 29500, False, resolves=True, reachable="refused"), PASS),
        (Endpoint("master", "node00", 29500, False, resolves=True, reachable="open"), PASS),
    ],
)
def test_master_address_from_another_node(endpoint, status):
    f = facts(2, net=_net(endpoint), plan=plan(2, nnodes=2, node_rank=1))
    assert find(f, "address:master").status == status


def test_loopback_hostname_on_node_zero_of_several_warns():
    f = facts(2, net=_net(address="127.0.1.1"), plan=plan(2, nnodes=2))
    assert find(f, "hostname").status == WARN
    assert find(facts(2, net=_net(address="127.0.1.1")), "hostname").status == PASS


def test_plan_error_fails_with_its_fix():
    p = plan(2, command=None, argv=(), error="--nnodes 2 needs a rendezvous address: --master_addr HOST")
    assert find(facts(2, plan=p), "plan").status == FAIL


def test_slurm_with_several_tasks_per_node_warns():
    slurm = (("SLURM_JOB_ID", "42"), ("SLURM_NNODES", "2"), ("SLURM_NODEID", "0"), ("SLURM_NTASKS", "16"))
    f = find(facts(8, slurm=slurm, plan=plan(8, nnodes=2, filled=("--nnodes 2 from SLURM_NNODES",))), "slurm")
    assert f.status == WARN and "--ntasks-per-node=1" in f.fix and "SLURM_NNODES" in f.observed


def test_image_labels_are_not_nccl_settings():
    from isaaclab_mgpu.launcher.diagnostics.facts import nccl_env

    settings, labels = nccl_env({"NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "WARN", "CUDA_VERSION": "13.0.0"})
    assert settings == (("NCCL_DEBUG", "WARN"),) and labels == (("NCCL_VERSION", "2.28.3-1"),)
    f = find(facts(2, env_labels=labels), "nccl_env")
    assert f.status == PASS and "NCCL_VERSION=2.28.3-1" in f.observed and "label" in f.observed


def test_rules_are_pure(monkeypatch):
    # The environment of this process must not leak into a judgement of the facts.
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    f = facts(2)
    assert evaluate(f) == evaluate(f)
    assert find(f, "nccl_env").status == PASS
    assert os.environ["NCCL_P2P_DISABLE"] == "1"


def test_gpus_fixture_uuids_are_unique():
    assert len({g.uuid for g in gpus(8)}) == 8


# -- the NVML collector against a stand-in driver (no GPU here) -------------------------------------


class FakeNvml:
    """The slice of pynvml that facts.py calls, describing 2 PCIe GPUs, one held by a process."""

    class NVMLError(Exception):
        pass

    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0

    class _Mem:
        total, used = 80 * 2**30, 2 * 2**30

    class _Proc:
        pid, usedGpuMemory = 999999, 2 * 2**30

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._Mem()

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [self._Proc()] if h == 0 else []

    def nvmlDeviceGetName(self, h):
        return "NVIDIA L40S"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return 30  # host bridge

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        return 1  # not supported: no NVLink


def test_nvml_facts_from_the_driver_interface():
    from isaaclab_mgpu.launcher.nvml import _nvml_facts

    g = _nvml_facts(FakeNvml())
    assert g.nvml and g.driver_version == "550.54.15" and g.cuda_driver_version == "12.4"
    assert [x.name for x in g.gpus] == ["NVIDIA L40S"] * 2
    assert g.gpus[0].processes[0].pid == 999999 and g.gpus[0].processes[0].used_mib == 2048
    assert g.gpus[0].memory_used_mib == 2048 and not g.gpus[1].processes
    assert g.links == (GpuLink(0, 1, False, "PHB"),) and g.topology_source == "nvml"
    f = find(facts(2, gpu=g), "gpu_links")
    assert f.status == WARN and "world size 2" in f.observed and "PHB" in f.observed


def test_hostname_that_does_not_resolve_only_warns():
    f = facts(2, net=NetFacts("node01", None, "no answer within 1 s", ()), plan=plan(2, nnodes=2))
    assert find(f, "hostname").status == WARN
