"""The logger choice (``--logger``) as each library's configuration receives it, and refused before a
spawn when unknown. Each back-end's real event file and ``mgpu runs`` row are checked on its learning
run (tests/test_training.py, which held this file's former per-back-end run), its W&B run there too."""

from __future__ import annotations

import subprocess

import pytest

from isaaclab_mgpu.rank.backends.base import PPOSettings, skrl_ppo_cfg


def test_logger_choice_reaches_skrl_writer():
    ppo = PPOSettings(rollout=8)
    on = skrl_ppo_cfg(ppo, object, "logs/skrl/cartpole/run", "tensorboard")["experiment"]
    assert (on["directory"], on["experiment_name"], on["write_interval"]) == ("logs/skrl/cartpole", "run", 8)
    assert skrl_ppo_cfg(ppo, object, "logs/x/run", "none")["experiment"]["write_interval"] == 0
    assert skrl_ppo_cfg(ppo, object, "logs/x/run", "wandb")["experiment"]["wandb"] is True


def test_rsl_rl_logger_cfg():
    from isaaclab_mgpu.rank.backends.rsl_rl import logger_cfg

    assert logger_cfg("tensorboard") == "tensorboard"
    assert logger_cfg("wandb") == {"class_name": "WandbLogWriter", "project_name": "isaaclab-mgpu"}


@pytest.mark.parametrize(
    ("logger", "message"),
    [("wandb", "--logger wandb: wandb is not installed"), ("mlflow", "--logger 'mlflow' is unknown")],
)
def test_bad_logger_refused_before_spawn(capsys, monkeypatch, logger, message):
    from isaaclab_mgpu.cli import main
    from isaaclab_mgpu.launcher import resolve

    def refuse(*args, **kwargs):
        raise AssertionError(f"spawned {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(resolve, "module_installed", lambda name: False)
    code = main(["train", "--device", "cpu", "--num_gpus", "2", "--logger", logger])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert main(["dry-run", "--device", "cpu", f"--logger={logger}"]) == 2


def test_worker_logger_option(capsys):
    from isaaclab_mgpu.rank.worker.args import parse_args

    assert parse_args([]).logger == "tensorboard"
    assert parse_args(["--logger", "none"]).logger == "none"
    isaac = parse_args(["--task", "Isaac-Cartpole-Direct", "--logger=wandb", "--video"])
    # Isaac Lab's own --logger: the worker's one reading of it, handed on the library's way
    assert (isaac.logger, isaac.isaac_args) == ("wandb", ("--video",))
    with pytest.raises(SystemExit):
        parse_args(["--logger", "mlflow"])
    assert "--logger 'mlflow' is unknown" in capsys.readouterr().err
