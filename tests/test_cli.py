"""CLI tests: parsing, spellings, passthrough, errors and exit codes; nothing spawned on bad input."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run

from isaaclab_mgpu import __version__

ISAAC = [
    "--task=Isaac-Dexsuite-Kuka-Allegro-Reorient-v0",
    "--num_envs=4096",
    "--max_iterations=100",
    "--run_name=gpu4_vis",
    "presets=newton_mjwarp",
]


@pytest.fixture(autouse=True)
def four_gpus(monkeypatch):
    """Four visible GPUs, as the environment says; no SLURM; no preflight verdicts about this box."""
    import isaaclab_mgpu.launcher.diagnostics as diagnostics

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    # dry-run adds the preflight's failures (test_forwarded.py tests that); here they would depend
    # on this machine's driver and packages.
    monkeypatch.setattr(diagnostics, "refusals", lambda spec, resolved: ())
    # Likewise whether this machine can run Isaac Lab tasks (tests/test_isaac.py covers that check).
    monkeypatch.setattr("isaaclab_mgpu.launch.check_isaac_task", lambda spec: None)
    for name in ("SLURM_JOB_ID", "SLURM_NNODES", "MGPU_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def test_isaaclab_example_dry_run(capsys):
    code, out, err = run(capsys, "dry-run", "--num_gpus", "4", "--master_port", "29504", *ISAAC)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 1
    argv = shlex.split(lines[0])
    assert argv[0] == sys.executable
    assert argv[argv.index("--nproc_per_node") + 1] == "4"
    assert argv[argv.index("--master_port") + 1] == "29504"
    worker = argv.index("isaaclab_mgpu.worker")
    assert argv[worker + 3 :] == [*ISAAC, "--distributed"]


def test_train_dry_run_prints_the_same(capsys):
    _, plan, _ = run(capsys, "dry-run", "--num_gpus", "2", *ISAAC)
    code, same, _ = run(capsys, "train", "--dry_run", "--num_gpus", "2", *ISAAC)
    assert code == 0 and same == plan
    _, hyphen, _ = run(capsys, "train", "--dry-run", "--num-gpus", "2", *ISAAC)
    assert hyphen == plan


@pytest.mark.parametrize(
    ("under", "hyphen"),
    [
        (["--nproc_per_node", "2"], ["--nproc-per-node", "2"]),
        (["--num_gpus=2", "--log_all_ranks"], ["--num-gpus=2", "--log-all-ranks"]),
        (["--num_gpus", "2", "--rl_library", "skrl"], ["--num-gpus", "2", "--rl-library", "skrl"]),
        (["--num_gpus", "2", "--local_ranks_filter", "1"], ["--num-gpus", "2", "--local-ranks-filter", "1"]),
        (["--dry_run", "--inject_distributed", "-m", "x"], ["--dry-run", "--inject-distributed", "-m", "x"]),
        (["--no_inject_distributed", "--device", "cpu"], ["--no-inject-distributed", "--device", "cpu"]),
        (
            [
                "--num_gpus",
                "2",
                "--nnodes",
                "2",
                "--node_rank",
                "1",
                "--master_addr",
                "h",
                "--master_port",
                "2",
            ],
            [
                "--num-gpus",
                "2",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
                "--master-addr",
                "h",
                "--master-port",
                "2",
            ],
        ),
    ],
)
def test_underscore_and_hyphen_spellings_mean_the_same(capsys, under, hyphen):
    code, out, err = run(capsys, "train", "--dry_run", *under)
    assert code == 0 and out, err
    assert run(capsys, "train", "--dry_run", *hyphen)[1] == out


def test_training_args_and_double_dash_pass_through_in_order(capsys):
    _, out, _ = run(capsys, "dry-run", "--num_gpus", "2", "--headless", "--seed", "7",
                    "agent.learning_rate=3e-4", "--", "--run_name", "x", "--distributed")  # fmt: skip
    argv = shlex.split(out)
    tail = argv[argv.index("isaaclab_mgpu.worker") + 3 :]
    assert tail == [
        "--headless",
        "--seed",
        "7",
        "agent.learning_rate=3e-4",
        "--run_name",
        "x",
        "--distributed",
    ]


def test_a_user_script_gets_every_argument_unchecked(capsys):
    script = str(Path(__file__).parent / "workers" / "hello.py")
    _, out, err = run(capsys, "dry-run", "--num_gpus", "2", "--script", script, "--num_gpu", "3",
                      "cartpol", "--", "--num_gpus", "9")  # fmt: skip
    assert err == ""
    argv = shlex.split(out)
    assert argv[argv.index(script) + 1 :] == ["--num_gpu", "3", "cartpol", "--num_gpus", "9"]


def test_json_output(capsys):
    code, out, _ = run(capsys, "dry-run", "--num_gpus", "2", "--device", "cuda", "--json", "--seed=1")
    data = json.loads(out)
    assert code == 0
    assert data["world_size"] == 2
    assert data["rank_devices"] == {"0": "cuda:0", "1": "cuda:1"}
    assert data["argv"][-2:] == ["--seed=1", "--distributed"]
    assert data["command"] == shlex.join(data["argv"])
    omp = set() if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS"}  # torchrun's choice, stated
    assert set(data["env"]) == {"MGPU_RUN_STAMP", "MGPU_STALL_TIMEOUT", "MGPU_STARTUP_TIMEOUT", *omp}
    assert data["stall_watch"]["stall_timeout_s"] == "auto" and data["env"]["MGPU_STALL_TIMEOUT"] == "auto"
    assert data["stall_watch"]["auto"] == {"floor_s": 30, "factor": 20, "cap_s": 900}
    # Under auto a collective may wait as long as the bound can grow (its cap), plus the margin.
    assert data["stall_watch"]["process_group_timeout_s"] == {"startup": 960, "training": 960}


def test_a_number_keeps_its_meaning_and_auto_is_accepted(capsys):
    code, out, err = run(capsys, "dry-run", "--device", "cpu", "--stall_timeout", "300", "--json")
    assert code == 0, err
    data = json.loads(out)["stall_watch"]
    assert data["stall_timeout_s"] == 300 and data["process_group_timeout_s"]["training"] == 360
    assert "auto" not in data
    code, out, err = run(capsys, "dry-run", "--device", "cpu", "--stall_timeout", "AUTO", "--json")
    assert code == 0 and json.loads(out)["env"]["MGPU_STALL_TIMEOUT"] == "auto", err
    code, _, err = run(capsys, "dry-run", "--device", "cpu", "--stall_timeout", "autox")
    assert code == 2 and "--stall_timeout" in err and "auto" in err, err


def test_stall_options_in_both_spellings_reach_the_ranks(capsys):
    code, out, err = run(
        capsys, "dry-run", "--device", "cpu", "--stall-timeout", "20", "--startup_timeout", "0", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["env"]["MGPU_STALL_TIMEOUT"] == "20" and data["env"]["MGPU_STARTUP_TIMEOUT"] == "0"
    assert "--stall_timeout 20 s, --startup_timeout off" in err
    for bad in ("-1", "inf"):
        code, _, err = run(capsys, "dry-run", "--device", "cpu", "--stall_timeout", bad)
        assert code == 2 and "--stall_timeout" in err, err
    code, _, err = run(capsys, "dry-run", "--device", "cpu", "--stall_timeout", "0", "--stall_on_silence")
    assert code == 2 and "--stall_on_silence needs" in err


def test_dry_run_warns_but_prints_above_visible(capsys):
    code, out, err = run(capsys, "dry-run", "--num_gpus", "8")
    assert code == 0 and "--nproc_per_node 8" in out
    assert err.startswith("mgpu: warning: --num_gpus 8 is more than the 4 GPU(s)")


def test_dry_run_shows_slurm_fills(capsys, monkeypatch):
    for k, v in {
        "SLURM_JOB_ID": "9",
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "n[1-2]",
    }.items():
        monkeypatch.setenv(k, v)
    _, out, err = run(capsys, "dry-run", "--num_gpus", "4")
    assert "--node_rank 0 --master_addr n1 --master_port 29500 --rdzv_id 9" in out
    assert "mgpu: filled --nnodes 2 from SLURM_NNODES" in err


def test_dry_run_names_kubernetes_fills_and_the_variables_options_overrode(capsys, monkeypatch):
    pod = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "4"}
    pod |= {"PET_RDZV_ENDPOINT": "job-worker-0:23456", "PET_RDZV_BACKEND": "c10d"}
    for k, v in pod.items():
        monkeypatch.setenv(k, v)
    code, out, err = run(capsys, "dry-run", "--num_gpus", "2", "--nnodes", "2")
    static = "--nnodes 2 --node_rank 1 --master_addr job-worker-0 --master_port 23456 --rdzv_backend static"
    assert code == 0 and static in out
    assert "mgpu: filled --node_rank 1 from PET_NODE_RANK" in err.splitlines()
    assert "mgpu: --nproc_per_node 2 (given) overrides PET_NPROC_PER_NODE=4" in err.splitlines()
    # One node asked for where the pod says two: torchrun is told, it would read PET_NNODES itself.
    code, out, err = run(capsys, "dry-run", "--num_gpus", "2", "--nnodes", "1", "--json")
    plan = json.loads(out)
    assert plan["argv"][3:8] == ["--nproc_per_node", "2", "--standalone", "--nnodes", "1"]
    assert plan["overridden"] == [
        "--nnodes 1 (given) overrides PET_NNODES=2",
        "--nproc_per_node 2 (given) overrides PET_NPROC_PER_NODE=4",
    ]


BAD = [
    (["--num_gpus", "0"], "--num_gpus '0' must be at least 1"),
    (["--num_gpus", "-2"], "--num_gpus '-2' must be at least 1"),
    (["--num_gpus", "four"], "'four' is not a rank count"),
    (["--num_gpus", "8"], "more than the 4 GPU(s) visible"),
    (["--nnodes", "0"], "--nnodes '0' must be a positive integer"),
    (["--nnodes", "2", "--node_rank", "2", "--master_addr", "h"], "--node_rank 2 is not below --nnodes 2"),
    (["--rl_library", "rl_zoo"], "--rl_library 'rl_zoo' is unknown"),
    (["--rl_library", "rl_games"], "rl_games trains Isaac Lab tasks only"),
    (["--rl_library", "skrl", "--ml_framework", "tf"], "--ml_framework 'tf' is unknown"),
    (["--rl_library", "skrl", "--ml_framework", "jax", "--num_gpus", "gpu"], "needs an integer rank count"),
    (["--coordinator_address", "h:5000"], "applies to skrl JAX only"),
    (["--rl_library", "skrl", "--ml_framework", "jax", "--num_gpus", "2", "--master_port", "1234"],
     "--master_port is a torchrun option"),
    (["--master_port", "70000"], "--master_port 70000 is not a port"),
    (["--master_port", "0"], "--master_port 0 is not a port"),
    (["--master_port", "http"], "--master_port http is not a port"),
    (["--nnodes", "2", "--node_rank", "one", "--master_addr", "h"], "--node_rank 'one' is not an integer"),
    (["--tee", "5"], "--tee '5' is not a stream spec"),
    (["--redirects", "x"], "--redirects 'x' is not a stream spec"),
    (["--local_ranks_filter", "a,b"], "is not a list of local ranks"),
    (["--num_gpus", "2", "--local_ranks_filter", "3"], "names local rank 3"),
    (["--rdzv_endpoint", "a:b:c"], "--rdzv_endpoint 'a:b:c' is malformed"),
    (["--rdzv_backend", "bad backend"], "is not a backend name"),
    (["--rdzv_endpoint", "host:99999"], "is not a port"),
    (["--script", "/no/such/train.py"], "does not exist"),
    (["--device", "tpu"], "--device 'tpu' is unknown"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_exits_2_with_one_line(capsys, no_spawn, args, message):
    code, out, err = run(capsys, "train", *args, "--max_iterations", "5")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("mgpu: error: ")
    assert message in err


def test_no_gpu_train_suggests_cpu(capsys, no_spawn, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, _, err = run(capsys, "train")
    assert code == 2 and "--device cpu" in err


def test_debug_shows_traceback(capsys, no_spawn):
    code, _, err = run(capsys, "train", "--num_gpus", "0", "--debug")
    assert code == 2 and "Traceback" in err and err.strip().endswith("must be at least 1")


def test_inject_distributed_flags(capsys):
    _, out, _ = run(capsys, "dry-run", "--device", "cpu", "--no_inject_distributed")
    assert "--distributed" not in shlex.split(out)
    _, out, _ = run(capsys, "dry-run", "--device", "cpu", "-m", "mod", "--inject_distributed")
    assert shlex.split(out)[-1] == "--distributed"
    code, _, err = run(capsys, "dry-run", "--inject_distributed", "--no_inject_distributed")
    assert code == 2 and "both given" in err


def test_a_mistyped_command_is_suggested_once(capsys):
    code, out, err = run(capsys, "trian")
    assert code == 2 and out == ""
    assert err == "mgpu: error: No such command 'trian'. Did you mean 'train'?\n"


def test_a_deliberate_stop_is_not_an_error(capsys, monkeypatch):
    from isaaclab_mgpu import launch
    from isaaclab_mgpu.contract.errors import Interrupted

    def stopped(*args, **kwargs):
        raise Interrupted("stopped as asked; every process ended", exit_code=130)

    monkeypatch.setattr(launch, "train", stopped)
    expected = (130, "", "mgpu: stopped as asked; every process ended\n")
    assert run(capsys, "train", "--device", "cpu") == expected

    def killed(*args, **kwargs):
        raise Interrupted("stopped as asked; processes ... were SIGKILLed", exit_code=124)

    monkeypatch.setattr(launch, "train", killed)
    code, _, err = run(capsys, "train", "--device", "cpu")
    assert code == 124 and err.startswith("mgpu: warning: stopped as asked")

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "train", ctrl_c)
    assert run(capsys, "train", "--device", "cpu") == (130, "", "mgpu: stopped by Ctrl-C\n")


def test_version_and_help(capsys):
    assert run(capsys, "--version")[:2] == (0, f"mgpu {__version__}\n")
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "train" in out and "dry-run" in out


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "dry-run", "--device", "cpu", "--num_gpus", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--device cpu --distributed" in proc.stdout


SCRIPT = str(Path(__file__).parent / "workers" / "hello.py")


@pytest.mark.parametrize(
    ("typed", "forwarded"),
    [
        # the option after the module's own sub-command stays there
        (
            ["-m", "isaaclab", "train", "--rl_library", "rsl_rl", "--task", "T", "x=1"],
            ["-m", "isaaclab", "train", "--rl_library", "rsl_rl", "--task", "T", "x=1"],
        ),
        # before the sub-command, also kept; mgpu's own options in between are taken out
        (
            ["--script", SCRIPT, "--rl-library=skrl", "--num_gpus", "2", "fit", "--ml_framework", "torch"],
            [SCRIPT, "--rl-library=skrl", "fit", "--ml_framework", "torch"],
        ),
        # written before the program: right after it, as Isaac Lab's launcher does; `--` stays verbatim
        (
            ["--rl_library", "skrl", "-m", "pkg.run", "go", "--", "--num_gpus", "3"],
            ["-m", "pkg.run", "--rl_library", "skrl", "go", "--num_gpus", "3"],
        ),
    ],
)
def test_user_program_gets_the_users_tokens_in_the_users_order(capsys, typed, forwarded):
    code, out, err = run(capsys, "dry-run", "--device", "cpu", *typed)
    assert code == 0, err
    argv = shlex.split(out.splitlines()[-1])
    start = argv.index(forwarded[0], argv.index("--local_ranks_filter") + 2)
    assert argv[start:] == forwarded
