"""The Isaac Lab task adapter's pure logic, and the worker's handling of Isaac Lab task arguments.

The end-to-end run of an Isaac Lab task is `test_isaaclab_cartpole_on_two_cpu_ranks` in
`test_training_worker.py` (skipped where Isaac Lab is not installed); these tests run everywhere.
"""

from __future__ import annotations

import pytest

from isaaclab_mgpu.errors import UsageError
from isaaclab_mgpu.tasks import isaaclab


def test_hydra_overrides_pass_isaac_lab_keys_verbatim_and_in_order():
    items = [
        ("presets", "newton_mjwarp,inference"),
        ("env.scene.num_envs", "64"),
        ("agent.algorithm.learning_rate", "5e-4"),
        ("physics", "newton_mjwarp"),
        ("+env.extra", "1"),
        ("hydra.verbose", "true"),
    ]
    assert isaaclab.hydra_overrides(items) == [
        "presets=newton_mjwarp,inference",
        "env.scene.num_envs=64",
        "agent.algorithm.learning_rate=5e-4",
        "physics=newton_mjwarp",
        "+env.extra=1",
        "hydra.verbose=true",
    ]


@pytest.mark.parametrize("key", ["foo", "environment.x", "seed", "agents.lr"])
def test_hydra_overrides_reject_keys_isaac_lab_cannot_take(key):
    with pytest.raises(UsageError, match=rf"^{key}=1: Isaac Lab tasks take env\."):
        isaaclab.hydra_overrides([(key, "1")])


def test_hydra_argv_sends_hydra_output_to_the_rank_folder():
    argv = isaaclab.hydra_argv("worker", [("presets", "newton_mjwarp")], "/runs/r/rank_1/hydra")
    assert argv == [
        "worker",
        "presets=newton_mjwarp",
        "hydra.run.dir=/runs/r/rank_1/hydra",
        "hydra.output_subdir=null",
    ]


def test_launcher_argv_is_headless_on_the_rank_device():
    assert isaaclab.launcher_argv("cuda:3") == ["--headless", "--device", "cuda:3"]
    assert isaaclab.launcher_argv("cpu")[-2:] == ["--device", "cpu"]


def test_runner_cfg_sets_device_and_seed_on_a_copy():
    agent = {"class_name": "OnPolicyRunner", "device": "cuda:0", "seed": 42, "num_steps_per_env": 16}
    cfg = isaaclab.runner_cfg(agent, "cpu", 43)
    assert cfg == {"class_name": "OnPolicyRunner", "device": "cpu", "seed": 43, "num_steps_per_env": 16}
    assert agent["device"] == "cuda:0" and agent["seed"] == 42


def test_runner_cfg_refuses_a_distillation_runner():
    with pytest.raises(UsageError, match="DistillationRunner"):
        isaaclab.runner_cfg({"class_name": "DistillationRunner"}, "cpu", 1)


def _needs_no_isaaclab():
    if isaaclab.available():
        pytest.skip("Isaac Lab is installed here")


def test_agent_overrides_of_an_isaac_lab_task_are_not_checked_against_our_ppo_settings(tmp_path, capsys):
    _needs_no_isaaclab()
    import isaaclab_mgpu

    argv = ["--device", "cpu", "--task", "Isaac-Cartpole-Direct-v0", "--log_root", str(tmp_path)]
    assert isaaclab_mgpu.train_in_process([*argv, "agent.algorithm.learning_rate=5e-4"]) == 2
    err = capsys.readouterr().err
    assert "Isaac Lab is not installed" in err
    assert "not a PPO setting" not in err


def test_a_foreign_override_of_an_isaac_lab_task_is_named_before_anything_loads(tmp_path, capsys):
    import isaaclab_mgpu

    argv = ["--device", "cpu", "--task", "Isaac-Cartpole-Direct-v0", "--log_root", str(tmp_path)]
    assert isaaclab_mgpu.train_in_process([*argv, "lr=0.1"]) == 2
    assert "lr=0.1: Isaac Lab tasks take env.<path>=v" in capsys.readouterr().err
