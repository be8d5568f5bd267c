"""resolve(): visible devices, rank counts, SLURM fills, rendezvous and ports."""

from __future__ import annotations

import socket

import pytest
from conftest import machine

from isaaclab_mgpu.contract.errors import EnvironmentProblem, UsageError
from isaaclab_mgpu.launcher.cluster import first_slurm_host
from isaaclab_mgpu.launcher.resolve import (
    CPU_RANKS_PER_CORE,
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


def test_slurm_fills_a_static_rendezvous_on_slurms_first_node():
    # The static rendezvous numbers nodes by --node_rank: SLURM's node 0 (the first host) hosts rank 0.
    r = res(LaunchSpec(nproc_per_node="4"), machine(4, **SLURM))
    rendezvous = (r.nnodes, r.node_rank, r.spec.rdzv_backend, r.rdzv_endpoint, r.spec.rdzv_id)
    assert rendezvous == ("2", 1, None, None, "4242")
    assert (r.spec.master_addr, r.spec.master_port) == ("gpu07", 29500)
    assert not r.standalone and len(r.filled) == 5 and r.world_size == 8
    cmd = argv(LaunchSpec(nproc_per_node="4"), machine(4, **SLURM))
    assert cmd[cmd.index("--master_addr") + 1] == "gpu07" and "--rdzv_endpoint" not in cmd
    assert cmd[cmd.index("--node_rank") + 1] == "1"


def test_slurm_node_order_not_host_name_order_keeps_slurms_node_0():
    # node[9-10]: SLURM's node 0 is node9, though "node10" sorts first (where c10d would put rank 0).
    r = res(LaunchSpec(nproc_per_node="2"), machine(4, **{**SLURM, "SLURM_JOB_NODELIST": "node[9-10]"}))
    assert r.spec.master_addr == "node9" and r.spec.rdzv_backend is None


@pytest.mark.parametrize(
    "spec",
    [LaunchSpec(nproc_per_node="4", nnodes="1:2"), LaunchSpec(nproc_per_node="4", rdzv_backend="c10d")],
    ids=["elastic", "c10d"],
)
def test_slurm_elastic_or_c10d_asked_keeps_the_c10d_endpoint(spec):
    r = res(spec, machine(4, **SLURM))
    assert (r.spec.rdzv_backend, r.rdzv_endpoint, r.spec.master_addr) == ("c10d", "gpu07:29500", None)


def test_explicit_options_beat_slurm():
    spec = LaunchSpec(nproc_per_node="4", nnodes="2", node_rank=0, rdzv_endpoint="head:1234", rdzv_id="mine")
    r = res(spec, machine(4, **SLURM))
    assert (r.nnodes, r.node_rank, r.rdzv_endpoint, r.spec.rdzv_id) == ("2", 0, "head:1234", "mine")
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


def test_a_port_whose_connections_linger_in_time_wait_is_free_for_the_store():
    # The store's side closes first (a requeued job's first instance ending): TIME_WAIT on its port.
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()
    client.close()
    assert port_is_free(port)  # torchrun's TCPStore (SO_REUSEADDR) binds it; refusing it failed the job


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


# A PyTorchJob pod as the training operator starts it: elastic (torchrun's PET_* variables) and
# without an elastic policy (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; newer operators add PET_*).
PET = {
    "PET_NNODES": "2",
    "PET_NODE_RANK": "1",
    "PET_NPROC_PER_NODE": "4",
    "PET_RDZV_ENDPOINT": "job-worker-0:23456",
    "PET_RDZV_BACKEND": "c10d",
    "PET_RDZV_ID": "job",
    "PET_MAX_RESTARTS": "3",
}
NON_ELASTIC = {
    "MASTER_ADDR": "job-master-0",
    "MASTER_PORT": "23456",
    "WORLD_SIZE": "2",
    "RANK": "1",
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",  # in every pod
}
NON_ELASTIC_NEW = {
    **NON_ELASTIC,
    "WORLD_SIZE": "8",  # newer operators: pods x nprocPerNode, beside PET_NNODES
    "PET_NNODES": "2",
    "PET_NODE_RANK": "1",
    "PET_NPROC_PER_NODE": "4",
    "PET_MASTER_ADDR": "job-master-0",
    "PET_MASTER_PORT": "23456",
}


def argv(spec, m):
    from isaaclab_mgpu.launcher.build import build

    return build(res(spec, m, strict=False)).argv


def test_kubernetes_fixed_size_endpoint_becomes_the_static_rendezvous():
    # c10d would number the pods by sorted host names; the static rendezvous by PET_NODE_RANK.
    explicit = LaunchSpec(
        nnodes="2", node_rank=1, nproc_per_node="4", master_addr="job-worker-0", master_port=23456,
        rdzv_backend="static", rdzv_id="job", max_restarts=3,
    )  # fmt: skip
    filled = res(LaunchSpec(), machine(4, **PET))
    assert argv(LaunchSpec(), machine(4, **PET)) == argv(explicit, machine(4, **PET))
    assert (filled.nnodes, filled.node_rank, filled.nproc, filled.world_size) == ("2", 1, 4, 8)
    assert filled.spec.max_restarts == 3 and not filled.standalone
    assert "--master_addr job-worker-0 from PET_RDZV_ENDPOINT" in filled.filled
    assert any(f.startswith("--rdzv_backend static for a fixed-size job") for f in filled.filled)
    assert len(filled.filled) == len(PET) + 1 and filled.overridden == ()


def test_kubernetes_elastic_fill_gives_the_explicit_command():
    elastic = {**PET, "PET_NNODES": "1:2"}
    explicit = LaunchSpec(
        nnodes="1:2", node_rank=1, nproc_per_node="4", rdzv_endpoint="job-worker-0:23456",
        rdzv_backend="c10d", rdzv_id="job", max_restarts=3,
    )  # fmt: skip
    filled = res(LaunchSpec(), machine(4, **elastic))
    assert argv(LaunchSpec(), machine(4, **elastic)) == argv(explicit, machine(4))
    assert "--rdzv_endpoint job-worker-0:23456 from PET_RDZV_ENDPOINT" in filled.filled
    assert len(filled.filled) == len(PET) and filled.overridden == ()


@pytest.mark.parametrize("env", [NON_ELASTIC, NON_ELASTIC_NEW], ids=["operator", "newer-operator"])
def test_kubernetes_non_elastic_fill_gives_the_explicit_command(env):
    explicit = LaunchSpec(
        nnodes="2", node_rank=1, nproc_per_node="4", master_addr="job-master-0", master_port=23456
    )
    assert argv(LaunchSpec(nproc_per_node="4"), machine(4, **env)) == argv(explicit, machine(4))
    r = res(LaunchSpec(nproc_per_node="4"), machine(4, **env))
    assert (r.nnodes, r.node_rank, r.spec.master_addr, r.spec.master_port) == ("2", 1, "job-master-0", 23456)
    source = "PET_NNODES" if "PET_NNODES" in env else "WORLD_SIZE"
    assert f"--nnodes 2 from {source}" in r.filled


def test_explicit_options_beat_kubernetes_and_are_named():
    spec = LaunchSpec(nnodes="2", node_rank=0, nproc_per_node="2", rdzv_endpoint="head:1234")
    r = res(spec, machine(4, **PET))
    assert (r.node_rank, r.nproc, r.rdzv_endpoint, r.spec.rdzv_id) == (0, 2, "head:1234", "job")
    assert r.overridden == (
        "--node_rank 0 (given) overrides PET_NODE_RANK=1",
        "--nproc_per_node 2 (given) overrides PET_NPROC_PER_NODE=4",
        "--rdzv_endpoint head:1234 (given) overrides PET_RDZV_ENDPOINT=job-worker-0:23456",
    )


def test_one_node_given_under_pet_nnodes_states_it_to_torchrun():
    # torchrun would read PET_NNODES=2 itself and wait, inside --standalone, for a node that never comes.
    r = res(LaunchSpec(nnodes="1", nproc_per_node="2"), machine(4, **PET))
    cmd = argv(LaunchSpec(nnodes="1", nproc_per_node="2"), machine(4, **PET))
    assert r.standalone and cmd[3:8] == ("--nproc_per_node", "2", "--standalone", "--nnodes", "1")
    assert "--nnodes 1 (given) overrides PET_NNODES=2" in r.overridden
    assert "--node_rank" not in cmd and "--rdzv_endpoint" not in cmd


def test_a_single_pod_is_standalone_with_every_torchrun_variable_stated():
    env = {"PET_NNODES": "1", "PET_RDZV_ENDPOINT": "job-worker-0:23456", "PET_RDZV_BACKEND": "c10d"}
    cmd = argv(
        LaunchSpec(nproc_per_node="2", log_all_ranks=True), machine(4, **env, PET_LOCAL_RANKS_FILTER="1")
    )
    assert cmd[3:8] == ("--nproc_per_node", "2", "--standalone", "--nnodes", "1")
    assert cmd[cmd.index("--local_ranks_filter") + 1] == ""


def test_console_variables_torchrun_would_read_are_stated():
    cmd = argv(LaunchSpec(nproc_per_node="2", redirects="3"), machine(4, PET_TEE="3", PET_REDIRECTS="1"))
    assert (cmd[cmd.index("--tee") + 1], cmd[cmd.index("--redirects") + 1]) == ("0", "3")
    assert cmd.count("--tee") == 1 and cmd.count("--redirects") == 1


def test_master_addr_given_pins_torchrun_to_the_static_rendezvous():
    spec = LaunchSpec(nproc_per_node="4", master_addr="head", master_port=29511)
    r = res(spec, machine(4, **PET))
    cmd = argv(spec, machine(4, **PET))
    assert (cmd[cmd.index("--rdzv_backend") + 1], cmd[cmd.index("--rdzv_endpoint") + 1]) == ("static", "")
    assert "PET_RDZV_ENDPOINT=job-worker-0:23456 not used: --master_addr given" in r.overridden


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({**PET, "PET_STANDALONE": "1"}, "PET_STANDALONE=1 makes torchrun use --standalone"),
        ({"PET_STANDALONE": ""}, "PET_STANDALONE='': torchrun reads it as its --standalone flag"),
        ({"PET_MODULE": "1"}, "unset PET_MODULE"),
        (
            {**PET, "PET_NODE_RANK": "x"},
            "--node_rank 'x' is not an integer.*filled --nnodes 2 from PET_NNODES",
        ),
        ({**PET, "PET_NODE_RANK": "2"}, "--node_rank 2 is not below --nnodes 2"),
    ],
)
def test_environment_torchrun_cannot_follow_is_refused(env, fragment):
    with pytest.raises(UsageError, match=fragment):
        res(LaunchSpec(nproc_per_node="2"), machine(4, **env))


def test_standalone_variable_on_one_node_is_what_mgpu_does_anyway():
    assert res(LaunchSpec(nproc_per_node="2"), machine(4, PET_STANDALONE="1")).standalone


def test_kubernetes_jax_coordinator_from_the_rendezvous_address():
    spec = LaunchSpec(rl_library="skrl", ml_framework="jax", nproc_per_node="2")
    assert res(spec, machine(4, **PET)).coordinator == ("job-worker-0", 23456)
    r = res(spec, machine(4, **NON_ELASTIC))
    assert (r.coordinator, r.node_rank, r.nnodes) == (("job-master-0", 23456), 1, "2")
    assert "--coordinator_address job-master-0:23456 from MASTER_ADDR:MASTER_PORT" in r.filled


@pytest.mark.parametrize(
    "env",
    [
        {k: v for k, v in NON_ELASTIC.items() if k != "KUBERNETES_SERVICE_HOST"},  # not in a pod
        {**NON_ELASTIC, "SLURM_JOB_ID": "7", "SLURM_NNODES": "1", "RANK": "3", "WORLD_SIZE": "8"},  # exported
    ],
    ids=["outside-a-pod", "one-node-slurm-job"],
)
def test_master_addr_and_rank_exported_by_hand_are_not_the_operators(env):
    r = res(LaunchSpec(nproc_per_node="2"), machine(4, **env))
    assert r.standalone and r.filled == () and r.nnodes is None


def test_slurm_wins_over_stray_kubernetes_variables():
    r = res(LaunchSpec(nproc_per_node="4"), machine(4, **SLURM, **NON_ELASTIC))
    assert (r.rdzv_endpoint, r.node_rank, r.spec.master_addr, r.spec.master_port) == (None, 1, "gpu07", 29500)


def test_gpu_ids_set_the_rank_count_over_pet_nproc_per_node():
    r = res(LaunchSpec(gpu_ids=("0", "2")), machine(4, **PET))
    assert r.nproc == 2 and "--nproc_per_node 2 (given) overrides PET_NPROC_PER_NODE=4" in r.overridden


def test_a_one_node_slurm_job_on_a_fixed_port_names_its_logs_by_the_job_not_none():
    # The emitted script passes --master_port; torchrun's default id would be "none".
    env = {**SLURM, "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "gpu07"}
    cmd = argv(LaunchSpec(nproc_per_node="2", master_port=20042), machine(4, **env))
    assert cmd[cmd.index("--rdzv_id") + 1] == "4242" and "--standalone" not in cmd
    alone = argv(LaunchSpec(nproc_per_node="2", master_port=20042), machine(4))
    assert alone[alone.index("--rdzv_id") + 1] == "mgpu_127.0.0.1_20042"
