"""Everything the built-in worker would refuse from its argv is refused before anything is spawned.

train, dry-run and check-env all refuse it the same way (exit 2, one stderr line, "did you mean"
where a spelling is close), dry-run warns about everything train would refuse, and the help lists
the worker's options, readable at 80 columns.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_helpers import run

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.worker_args import EMBEDDED_TASKS, WorkerArgsError, check_task, parse
from isaaclab_mgpu.launcher.forwarded import check_training_args, suggest, worker_argv
from isaaclab_mgpu.launcher.spec import LaunchSpec

COMMANDS = ("train", "dry-run", "check-env")

#: The three typos of the issue, each with the suggestion it must get.
TYPOS = [
    (["--devcie", "cpu"], "did you mean --device (an option of mgpu {cmd})?"),
    (["--num_gpu", "2"], "did you mean --num_gpus (an option of mgpu {cmd})?"),
    (["--task", "cartpol"], "did you mean cartpole?"),
]

REFUSED = [
    *TYPOS,
    (["--num-gpu=2"], "did you mean --num_gpus"),
    (["--max_iteration", "5"], "did you mean --max_iterations (an option of the training worker)?"),
    (["--num-env", "8"], "did you mean --num_envs"),
    (["--task", "Cartpole"], "did you mean cartpole?"),
    (["--task", "humanoid"], "--task 'humanoid' is not a task"),
    (["--task", "no-such-task"], "--task 'no-such-task' is not a task (embedded tasks: cartpole, pendulum;"),
    (["--task", "Humanoid-v4"], "--task 'Humanoid-v4' is not a task (embedded tasks"),
    (["--task", "isaac-Cartpole-Direct-v0"], "did you mean Isaac-Cartpole-Direct-v0?"),
    (
        ["agent.learning_rat=0.001"],
        "agent.learning_rat is not a PPO setting; did you mean agent.learning_rate?",
    ),
    (["env.no_such_field=1"], "env.no_such_field is not a setting of this task; known: cart_mass, dt,"),
    (["--task", "pendulum", "env.max_torqe=1"], "did you mean env.max_torque?"),
    (["agent.learning_rate=fast"], "agent.learning_rate=fast: the value must be float"),
    (["env.episode_length=2.5"], "env.episode_length=2.5: the value must be int"),
    (["agent.hidden=64,x"], "agent.hidden=64,x: give layer sizes like 64,64"),
    (
        ["agnt.gamma=0.9"],
        "agnt.gamma=0.9 is not an override of the embedded tasks (they take env.<field>=value",
    ),
    (["presets=newton_mjwarp"], "presets=newton_mjwarp is not an override of the embedded tasks"),
    (["--run_timestamp", "../elsewhere"], "'../elsewhere' is not a stamp like 2026-01-02_03-04-05"),
    (["--num_envs", "0"], "--num_envs 0 must be at least 1"),
    (["--seed", "seven"], "--seed: invalid int value: 'seven'"),
    (["--bogus"], "--bogus is not an option of mgpu {cmd} nor of the training worker; the worker's"),
    (["cartpole"], "'cartpole' is neither an option nor a key=value override"),
    (["--", "--num_gpus", "2"], "--num_gpus is an option of mgpu {cmd}, not of the training worker: put it"),
    (["--", "--sed", "2"], "--sed (after --) is not an option of the training worker; did you mean --seed?"),
]


@pytest.fixture(autouse=True)
def empty_folder(monkeypatch, tmp_path):
    """Run from an empty folder, with no SLURM."""
    monkeypatch.chdir(tmp_path)
    for name in ("SLURM_JOB_ID", "SLURM_NNODES", "MGPU_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("args", "message"), REFUSED)
def test_refused_before_spawn_with_one_line(capsys, no_spawn, tmp_path, command, args, message):
    code, out, err = run(capsys, command, "--device", "cpu", *args)
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("mgpu: error: "), err
    assert message.format(cmd=command) in err
    assert list(tmp_path.iterdir()) == []  # no run folder, no log folder


@pytest.mark.parametrize(("args", "_"), TYPOS)
def test_dry_run_and_check_env_report_what_train_refuses(capsys, no_spawn, args, _):
    lines = {c: run(capsys, c, "--device", "cpu", *args)[2] for c in COMMANDS}
    lines = {c: line.replace(f"mgpu {c}", "mgpu CMD") for c, line in lines.items()}
    assert lines["train"] == lines["dry-run"] == lines["check-env"]


def test_key_value_items_isaac_tasks_and_isaac_lab_options_pass(capsys, no_spawn, monkeypatch):
    from isaaclab_mgpu import launch

    # Whether this machine can run Isaac Lab is i11's pre-spawn check (isaac/preflight.py), not this one.
    monkeypatch.setattr(launch, "check_isaac_task", lambda spec: None)
    for args in (
        ["--task", "pendulum", "env.dt=0.02", "agent.rollout=8", "--num-envs", "8"],
        ["--task=Isaac-Cartpole-Direct-v0", "presets=newton_mjwarp", "--headless"],
        [
            "--task",
            "Isaac-Cartpole-Direct-v0",
            "agent.anything.goes=1",
            "--video",
            "--track",
        ],  # Hydra's to judge
        ["--task", "cartpole", "--run_timestamp=2026-01-02_03-04-05"],
        ["--resume", "--seed", "3", "--", "--run_name", "x"],
    ):
        code, out, err = run(capsys, "dry-run", "--device", "cpu", *args)
        # With no run to continue here, dry-run says train would refuse the bare --resume.
        said = "train would refuse: --resume: no unfinished" if "--resume" in args else None
        assert code == 0 and (err == "" if said is None else said in err), (args, err)
        assert out.rstrip().endswith(" ".join(a for a in args if a != "--") + " --distributed")


def test_the_worker_refuses_a_task_name_before_making_its_run_folder(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu.worker", "--device", "cpu", "--task", "cartpol"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "did you mean cartpole?" in proc.stderr and proc.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_check_unit_parts():
    assert suggest("--num-gpu", {"--num_gpus", "--num_envs"}) == "--num_gpus"
    assert suggest("--zzz", {"--num_gpus"}) is None
    assert suggest("--bogus", {"--gpus", "--seed"}) is None  # short names are not alike for "--"
    spec = LaunchSpec(rl_library="skrl", device="cpu", training_args=("--seed", "1"))
    assert worker_argv(spec) == [
        "--rl_library", "skrl", "--ml_framework", "torch", "--device", "cpu", "--seed", "1", "--distributed",
    ]  # fmt: skip
    check_training_args(LaunchSpec(script=__file__, training_args=("--anything", "goes")))
    for good in (*EMBEDDED_TASKS, "Isaac-Velocity-Flat-Anymal-D-v0"):
        check_task(good)
    for bad in ("cartpol", "CartPole-v1", "pendulm", "ant", "Template-X-v0", "Humanoid-v4"):
        with pytest.raises(WorkerArgsError, match="is not a task"):
            check_task(bad)
    with pytest.raises(WorkerArgsError) as info:
        parse(["--num_gpu", "2"])
    assert info.value.unknown == "--num_gpu"


@pytest.mark.parametrize("task", ["Isaac-Cartpole-Direct-v0", "cartpole"])
@pytest.mark.parametrize("after", [[], ["--logger"], ["--logger=x"], ["--video"], ["--seed", "3"]])
def test_an_isaac_lab_option_with_no_value_is_refused(task, after):
    with pytest.raises(WorkerArgsError, match=r"^--checkpoint needs a value$"):
        parse(["--task", task, "--checkpoint", *after])


def test_an_isaac_lab_option_value_may_look_like_a_number_or_hold_options():
    args = parse(["--task", "Isaac-X-v0", "--sigma", "-.5", "--kit_args", "--a --b", "--logger", "wandb"])
    assert args.isaac_args == ("--sigma", "-.5", "--kit_args", "--a --b") and args.logger == "wandb"


def test_embedded_task_names_match_the_task_registry():
    from isaaclab_mgpu.contract.settings import TASK_CONFIGS
    from isaaclab_mgpu.rank.tasks import TASKS

    assert tuple(TASKS) == EMBEDDED_TASKS
    assert {name: task.cfg_class for name, task in TASKS.items()} == TASK_CONFIGS


@pytest.mark.parametrize("spelling", ["--run_timestamp", "--run-timestamp"])
def test_a_given_run_timestamp_is_the_stamp_of_every_rank(capsys, no_spawn, spelling):
    import json

    stamp = "2026-01-02_03-04-05"
    code, out, err = run(
        capsys, "dry-run", "--device", "cpu", "--nproc_per_node", "2", spelling, stamp, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["env"]["MGPU_RUN_STAMP"] == stamp
    assert parse([spelling, stamp]).run_timestamp == stamp
    _, out, _ = run(capsys, "dry-run", "--device", "cpu", "--json")
    assert json.loads(out)["env"]["MGPU_RUN_STAMP"] != stamp


# -- dry-run warns about what train refuses ------------------------------------------------------


def test_num_gpus_cpu_without_gpus_is_one_cuda_rank_per_core(capsys, no_spawn, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, out, err = run(capsys, "dry-run", "--num_gpus", "cpu")
    assert code == 0 and "--nproc_per_node" in out
    assert "--num_gpus cpu means one CUDA rank per CPU core" in err and "--device cpu" in err
    code, _, err_train = run(capsys, "train", "--num_gpus", "cpu", "--no_preflight")
    assert code == 2 and "--num_gpus cpu means one CUDA rank per CPU core" in err_train


def test_num_gpus_cpu_with_fewer_gpus_than_cores(capsys, no_spawn, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr("isaaclab_mgpu.launcher.diagnostics.refusals", lambda spec, resolved: ())
    code, out, err = run(capsys, "dry-run", "--num_gpus", "cpu")
    assert code == 0 and "--nproc_per_node 4" in out
    assert "more than the 1 GPU(s) visible" in err and "--num_gpus gpu" in err


def test_dry_run_warns_about_every_preflight_refusal(capsys, no_spawn, monkeypatch):
    """A machine whose driver is missing: train refuses in its preflight, dry-run says so."""
    from isaaclab_mgpu.launcher.diagnostics import facts

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(facts, "gpu_facts", lambda: facts.GpuFacts(nvml=False, error="no libnvidia-ml"))
    code, out, err = run(capsys, "dry-run", "--num_gpus", "2")
    assert code == 0 and "--nproc_per_node 2" in out
    assert "mgpu: warning: train would refuse: preflight gpu/driver: no NVIDIA driver" in err
    code, _, refused = run(capsys, "train", "--num_gpus", "2")
    assert code == 2 and "preflight gpu/driver: no NVIDIA driver" in refused
    _, _, skipped = run(capsys, "train", "--dry_run", "--no_preflight", "--num_gpus", "2")
    assert "preflight" not in skipped


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_training_options_with_whole_names_at_80_columns(command):
    import click
    import typer

    from isaaclab_mgpu.cli import app

    env = {k: v for k, v in os.environ.items() if k not in ("TERMINAL_WIDTH", "FORCE_COLOR")}
    proc = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", command, "--help"],
        env={**env, "COLUMNS": "80", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    ctx = typer.main.get_command(app).make_context("mgpu", [command, "--help"], resilient_parsing=True)
    declared = typer.main.get_command(app).get_command(ctx, command)
    # Hidden options (the refused --job_requeue, which only names its replacement) are not listed.
    shown = [p for p in declared.params if isinstance(p, click.Option) and not p.hidden]
    names = {n for p in shown for n in (*p.opts, *p.secondary_opts)}
    words = set(proc.stdout.replace(",", " ").split())
    assert names <= words, sorted(names - words)
    panel = proc.stdout[proc.stdout.index("Training options") :]
    for option in ("--task", "--num_envs", "--max_iterations", "--seed", "--resume", "KEY=VALUE"):
        assert option in panel.split(), option


def test_dry_run_warns_about_an_isaac_task_train_would_refuse(capsys, no_spawn, monkeypatch):
    from isaaclab_mgpu import launch

    def refuse(spec):
        raise UsageError("--task Isaac-Nope-v0 is not an Isaac Lab task")

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(launch, "check_isaac_task", refuse)
    monkeypatch.setattr("isaaclab_mgpu.launcher.diagnostics.refusals", lambda spec, resolved: ())
    code, out, err = run(capsys, "dry-run", "--device", "cpu", "--task", "Isaac-Nope-v0")
    assert code == 0 and "--task Isaac-Nope-v0" in out
    assert err == "mgpu: warning: train would refuse: --task Isaac-Nope-v0 is not an Isaac Lab task\n"
    code, _, err = run(capsys, "train", "--device", "cpu", "--task", "Isaac-Nope-v0")
    assert code == 2 and err == "mgpu: error: --task Isaac-Nope-v0 is not an Isaac Lab task\n"


def test_probe_nccl_suggests_its_own_options(capsys, no_spawn):
    code, out, err = run(capsys, "probe-nccl", "--device", "cpu", "--world_sizs", "1,2")
    assert (code, out) == (2, "")
    assert err.endswith(": --world_sizs is not an option of mgpu probe-nccl; did you mean --world_sizes?\n")
    code, _, err = run(capsys, "probe-nccl", "--device", "cpu", "--zzz")
    assert code == 2 and "unexpected arguments" in err  # nothing close: probe-nccl's own refusal
