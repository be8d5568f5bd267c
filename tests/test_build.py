"""Golden argv/env tests of the pure builders (DESIGN.md §3–§4)."""

from __future__ import annotations

import dataclasses
import shlex

import pytest
from conftest import machine

from isaaclab_mgpu.launcher.build import build
from isaaclab_mgpu.launcher.resolve import resolve
from isaaclab_mgpu.launcher.spec import LaunchSpec

ISAAC_ARGS = (
    "--task=Isaac-Dexsuite-Kuka-Allegro-Reorient-v0",
    "--num_envs=4096",
    "--max_iterations=100",
    "--run_name=gpu4_vis",
    "presets=newton_mjwarp",
)


def cmd_for(spec: LaunchSpec, m=None, **kw):
    resolved = resolve(
        spec, m or machine(4), strict=False, port_free=lambda p: True, free_port=lambda: 45678, **kw
    )
    return build(resolved)


def test_isaaclab_documented_example():
    spec = LaunchSpec(nproc_per_node="4", master_port=29504, training_args=ISAAC_ARGS)
    cmd = cmd_for(spec)
    assert cmd.argv == (
        "python3", "-m", "torch.distributed.run", "--nproc_per_node", "4",
        "--master_port", "29504", "--rdzv_id", "mgpu_127.0.0.1_29504", "--tee", "3",
        "--log_dir",
        "logs/mgpu/rsl_rl_Isaac-Dexsuite-Kuka-Allegro-Reorient-v0_gpu4_vis/2026-01-02_03-04-05/attempt_0",
        "--logs_specs", "mgpu", "--local_ranks_filter", "0",
        "-m", "isaaclab_mgpu.worker", "--rl_library", "rsl_rl",
        *ISAAC_ARGS, "--distributed",
    )  # fmt: skip
    assert shlex.split(shlex.join(cmd.argv)) == list(cmd.argv)
    assert cmd.world_size == 4
    assert cmd.rank_devices == {0: "cuda:0", 1: "cuda:1", 2: "cuda:2", 3: "cuda:3"}
    assert cmd.env == {
        "MGPU_RUN_STAMP": "2026-01-02_03-04-05",
        "MGPU_STALL_TIMEOUT": "auto",
        "MGPU_STARTUP_TIMEOUT": "900",
        "OMP_NUM_THREADS": "1",  # torchrun's own choice for several ranks, stated (no banner then)
    }
    assert cmd.launcher == "torchrun"


def test_omp_num_threads_is_set_only_where_torchrun_would_set_it():
    def omp(spec, environ=None):
        m = machine(4) if environ is None else dataclasses.replace(machine(4), environ=environ)
        return cmd_for(spec, m).env.get("OMP_NUM_THREADS")

    assert omp(LaunchSpec(nproc_per_node="2")) == "1"
    assert omp(LaunchSpec(nproc_per_node="1")) is None  # one rank: torchrun leaves it alone too
    assert omp(LaunchSpec(nproc_per_node="2"), {"OMP_NUM_THREADS": "4"}) is None  # the user's value stays
    jax = LaunchSpec(nproc_per_node="2", rl_library="skrl", ml_framework="jax")
    assert omp(jax) is None  # jaxrun sets it itself


def test_distributed_not_duplicated_and_stays_in_place():
    cmd = cmd_for(LaunchSpec(nproc_per_node="2", training_args=("--distributed", "--seed", "3")))
    assert cmd.argv[-3:] == ("--distributed", "--seed", "3")
    assert cmd.argv.count("--distributed") == 1


def test_single_node_without_address_is_standalone():
    cmd = cmd_for(LaunchSpec(nproc_per_node="2"))
    assert cmd.argv[3:7] == ("--nproc_per_node", "2", "--standalone", "--tee")


def test_multinode_c10d_example():
    spec = LaunchSpec(
        nproc_per_node="8",
        nnodes="2",
        node_rank=1,
        rdzv_backend="c10d",
        rdzv_endpoint="node01:29400",
        rdzv_id="job42",
        training_args=("--task=Isaac-Velocity-Rough-Anymal-C-v0", "--headless"),
    )
    argv = cmd_for(spec, machine(8)).argv
    head = argv[: argv.index("-m", 3)]
    assert head == (
        "python3", "-m", "torch.distributed.run", "--nproc_per_node", "8", "--nnodes", "2",
        "--node_rank", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "node01:29400",
        "--rdzv_id", "job42", "--tee", "3",
        "--log_dir", "logs/mgpu/rsl_rl_Isaac-Velocity-Rough-Anymal-C-v0/2026-01-02_03-04-05/attempt_0",
        "--logs_specs", "mgpu", "--local_ranks_filter", "0",
    )  # fmt: skip
    cmd = cmd_for(spec, machine(8))
    assert cmd.world_size == 16
    assert cmd.rank_devices[8] == "cuda:0" and cmd.rank_devices[15] == "cuda:7"


@pytest.mark.parametrize("node_rank", [0, 1])
def test_static_multinode_gets_a_rendezvous_id_every_node_shares(node_rank):
    # torchrun would tell the ranks TORCHELASTIC_RUN_ID=none; the static store prefixes keys with the id.
    spec = LaunchSpec(
        nproc_per_node="2", nnodes="2", node_rank=node_rank, master_addr="node01", master_port=29500
    )
    argv = cmd_for(spec).argv
    head = argv[: argv.index("--tee")]
    assert head[-6:] == (
        "--master_addr",
        "node01",
        "--master_port",
        "29500",
        "--rdzv_id",
        "mgpu_node01_29500",
    )
    endpoint = LaunchSpec(
        nproc_per_node="2", nnodes="2", rdzv_backend="c10d", rdzv_endpoint="[fe80::1]:29400"
    )
    argv = cmd_for(endpoint).argv
    assert argv[argv.index("--rdzv_id") + 1] == "mgpu_fe80-1_29400"
    # One node on a fixed port is named by its address too (never "none"); --standalone by torchrun's
    # own uuid; an id given is kept.
    argv = cmd_for(LaunchSpec(nproc_per_node="2", master_port=29500)).argv
    assert argv[argv.index("--rdzv_id") + 1] == "mgpu_127.0.0.1_29500"
    assert "--rdzv_id" not in cmd_for(LaunchSpec(nproc_per_node="2")).argv
    given = LaunchSpec(nproc_per_node="2", nnodes="2", master_addr="node01", rdzv_id="job42")
    argv = cmd_for(given).argv
    assert argv[argv.index("--rdzv_id") + 1] == "job42" and argv.count("--rdzv_id") == 1


def test_every_torchrun_option_in_isaaclab_order():
    spec = LaunchSpec(
        nproc_per_node="2",
        nnodes="1:2",
        node_rank=0,
        master_addr="10.0.0.1",
        master_port=29501,
        rdzv_backend="static",
        rdzv_endpoint="10.0.0.1:29501",
        rdzv_id="abc",
        max_restarts=2,
        monitor_interval=0.5,
        start_method="spawn",
        role="trainer",
        tee="1",
        redirects="2",
        local_ranks_filter="0,1",
        log_dir="/tmp/x",
        virtual_local_rank=True,
    )
    argv = cmd_for(spec).argv
    flags = [a for a in argv[: argv.index("isaaclab_mgpu.worker")] if a.startswith("--")]
    assert flags == [
        "--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port",
        "--rdzv_backend", "--rdzv_endpoint", "--rdzv_id", "--monitor_interval",
        "--start_method", "--role", "--tee", "--redirects", "--local_ranks_filter", "--log_dir",
        "--logs_specs", "--virtual_local_rank",
    ]  # fmt: skip
    # Restarts are mgpu's own (each resumes); torchrun would relaunch from iteration 0.
    assert "--max_restarts" not in argv


def test_default_filter_comes_after_forwarded_options_as_in_isaaclab():
    argv = cmd_for(LaunchSpec(nproc_per_node="2", monitor_interval=5.0, virtual_local_rank=True)).argv
    worker = argv.index("-m", 3)
    assert argv[worker - 3 : worker] == ("--local_ranks_filter", "0", "--virtual_local_rank")
    assert argv[argv.index("--monitor_interval") + 1] == "5"


def test_custom_rendezvous_backend_passes_through():
    argv = cmd_for(
        LaunchSpec(nproc_per_node="2", nnodes="2", rdzv_backend="my-plugin", rdzv_endpoint="h:1")
    ).argv
    assert argv[argv.index("--rdzv_backend") + 1] == "my-plugin"


def test_log_all_ranks_drops_default_filter():
    argv = cmd_for(LaunchSpec(nproc_per_node="2", log_all_ranks=True)).argv
    assert "--local_ranks_filter" not in argv


def test_redirects_replace_default_tee():
    argv = cmd_for(LaunchSpec(nproc_per_node="2", redirects="3")).argv
    assert "--tee" not in argv and argv[argv.index("--redirects") + 1] == "3"


def test_cpu_ranks_forward_device_to_worker():
    cmd = cmd_for(LaunchSpec(device="cpu", nproc_per_node="2"), machine(0))
    tail = cmd.argv[cmd.argv.index("isaaclab_mgpu.worker") :]
    assert tail == ("isaaclab_mgpu.worker", "--rl_library", "rsl_rl", "--device", "cpu", "--distributed")
    assert cmd.rank_devices == {0: "cpu", 1: "cpu"}


def test_skrl_torch_names_framework():
    cmd = cmd_for(LaunchSpec(rl_library="skrl", nproc_per_node="2"))
    assert cmd.argv[-6:] == (
        "isaaclab_mgpu.worker",
        "--rl_library",
        "skrl",
        "--ml_framework",
        "torch",
        "--distributed",
    )


def test_skrl_jax_uses_jaxrun_with_free_coordinator_port():
    spec = LaunchSpec(rl_library="skrl", ml_framework="jax", nproc_per_node="2", training_args=("--seed=1",))
    cmd = cmd_for(spec)
    assert cmd.launcher == "jaxrun"
    assert cmd.argv == (
        "python3", "-m", "isaaclab_mgpu.jaxrun", "--nproc_per_node", "2",
        "--coordinator_address", "127.0.0.1:45678", "--tee", "3",
        "--log_dir", "logs/mgpu/skrl_cartpole/2026-01-02_03-04-05/attempt_0",
        "--local_ranks_filter", "0", "-m", "isaaclab_mgpu.worker", "--rl_library", "skrl",
        "--ml_framework", "jax", "--seed=1", "--distributed",
    )  # fmt: skip


def test_skrl_jax_multinode_keeps_coordinator():
    spec = LaunchSpec(
        rl_library="skrl", ml_framework="jax", nproc_per_node="4", nnodes="2", node_rank=1,
        coordinator_address="head:5000",
    )  # fmt: skip
    argv = cmd_for(spec).argv
    assert argv[3:11] == (
        "--nproc_per_node", "4", "--nnodes", "2", "--node_rank", "1", "--coordinator_address", "head:5000",
    )  # fmt: skip


def test_user_script_gets_no_injection_unless_asked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    plain = cmd_for(LaunchSpec(nproc_per_node="2", script=str(script), training_args=("--x", "1")))
    assert plain.argv[-3:] == (str(script), "--x", "1")
    asked = cmd_for(LaunchSpec(nproc_per_node="2", script=str(script), inject_distributed=True))
    assert asked.argv[-2:] == (str(script), "--distributed")
    module = cmd_for(LaunchSpec(nproc_per_node="2", module="my.train"))
    assert module.argv[-2:] == ("-m", "my.train")


def test_saved_workarounds_reach_env():
    cmd = cmd_for(LaunchSpec(nproc_per_node="2"), extra_env={"NCCL_P2P_DISABLE": "1"})
    assert cmd.env["NCCL_P2P_DISABLE"] == "1"


@pytest.mark.parametrize("nproc", ["gpu", "auto", None])
def test_gpu_tokens_resolve_to_visible_count(nproc):
    cmd = cmd_for(LaunchSpec(nproc_per_node=nproc), machine(3))
    assert cmd.argv[4] == "3"


def test_builder_is_deterministic():
    spec = LaunchSpec(nproc_per_node="4", master_port=29504, training_args=ISAAC_ARGS)
    assert cmd_for(spec) == cmd_for(spec)


def test_the_rendezvous_store_of_a_multi_node_launch():
    from isaaclab_mgpu.launcher.build import Rendezvous

    static = cmd_for(
        LaunchSpec(nproc_per_node="2", nnodes="2", node_rank=1, master_addr="n0", master_port=29511)
    )
    assert static.rendezvous == Rendezvous("n0", 29511, "mgpu_n0_29511", 1, 2, True)
    c10d = cmd_for(LaunchSpec(nproc_per_node="2", nnodes="1:3", rdzv_endpoint="head", rdzv_backend="c10d"))
    assert c10d.rendezvous == Rendezvous("head", 29400, "mgpu_head_29500", None, 3, False)
    assert cmd_for(LaunchSpec(nproc_per_node="2")).rendezvous is None


def test_each_attempt_logs_into_a_folder_named_by_the_run_the_launch_and_the_attempt():
    from isaaclab_mgpu.launcher.build import for_attempt

    cmd = cmd_for(
        LaunchSpec(nproc_per_node="2", log_dir="/var/log/runs", training_args=("--run_name", "a b;c"))
    )
    # one folder, whatever the name; the launch's own folder under it (the run stamp, in a dry-run)
    assert cmd.log_dir == "/var/log/runs/rsl_rl_cartpole_a-b-c/2026-01-02_03-04-05/attempt_0"
    second = for_attempt(cmd, 2)
    assert second.log_dir == "/var/log/runs/rsl_rl_cartpole_a-b-c/2026-01-02_03-04-05/attempt_2"
    i = cmd.argv.index("--log_dir") + 1
    assert second.argv[i] == second.log_dir
    assert second.argv[:i] + second.argv[i + 1 :] == cmd.argv[:i] + cmd.argv[i + 1 :]  # nothing else changes
    assert for_attempt(cmd, 0) == cmd
    jax = cmd_for(LaunchSpec(nproc_per_node="2", rl_library="skrl", ml_framework="jax"))
    assert for_attempt(jax, 1).log_dir == "logs/mgpu/skrl_cartpole/2026-01-02_03-04-05/attempt_1"
    # No clock read by the builder: the resolved stamp (or the folder train made) names the launch.
    import dataclasses

    later = dataclasses.replace(machine(4), run_stamp="2030-05-06_07-08-09")
    assert cmd_for(LaunchSpec(nproc_per_node="2"), later).log_dir.endswith("/2030-05-06_07-08-09/attempt_0")
    assert cmd_for(LaunchSpec(nproc_per_node="2")).argv == cmd_for(LaunchSpec(nproc_per_node="2")).argv
