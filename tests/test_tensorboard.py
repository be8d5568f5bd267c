"""Training curves: every back-end's 2-rank CPU run leaves a TensorBoard event file in its run folder,
read back with TensorBoard's own reader; ``mgpu runs`` lists the runs from their summary.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from training_helpers import CHEAP, LIBRARY_TAGS, MGPU_TAGS, PACE_TAGS, child_env, run, scalars, summary

from isaaclab_mgpu.rank.backends.base import PPOSettings, skrl_ppo_cfg


def mgpu(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", *args], cwd=cwd, env=child_env(cwd),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch", "skrl_jax"])
def test_event_file_and_runs_listing(backend, tmp_path):
    code, out = run(backend, tmp_path, *CHEAP, "--run_name", "tb")
    assert code == 0, out[-3000:]
    s, run_dir = summary(tmp_path, backend, "tb")
    assert s["status"] == "finished" and s["logger"] == "tensorboard"

    events = list(run_dir.glob("events.out.tfevents.*"))
    assert len(events) == 1, sorted(p.name for p in run_dir.iterdir())
    assert not list((run_dir / "rank_1").rglob("events.out.tfevents.*")), "only rank 0 writes curves"
    curves = scalars(run_dir)
    reward_tag, *others = LIBRARY_TAGS[backend]
    assert len(curves[reward_tag]) == 3, curves.get(reward_tag)
    for tag in (*others, *MGPU_TAGS):
        assert len(curves.get(tag, ())) == 3, (tag, sorted(curves))
    # The library's step axis (rsl-rl: iterations from 0; skrl: environment steps) carries ours too.
    steps = [st for st, _ in curves[reward_tag]]
    assert [st for st, _ in curves["mgpu/mean_reward"]] == steps
    for tag in PACE_TAGS:
        assert [st for st, _ in curves[f"mgpu/warmup/{tag}"]] == steps[:1], tag
        assert [st for st, _ in curves[f"mgpu/{tag}"]] == steps[1:], tag
    steady = s["steady"]
    assert steady["warmup_iterations"] == 1 and steady["warmup_s"] > 0
    assert steady["s_per_iteration"] > 0 and steady["env_steps_per_s"] > 0
    assert [v for _, v in curves["mgpu/checksums_equal"]] == [1.0, 1.0, 1.0]
    assert [round(v, 3) for _, v in curves["mgpu/mean_reward"]] == [round(r, 3) for r in s["mean_rewards"]]

    listed = mgpu(tmp_path, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == 1
    row = rows[0]
    assert row["folder"] == str(run_dir.relative_to(tmp_path))
    assert (row["library"], row["framework"], row["task"]) == (s["backend"], s["framework"], "cartpole")
    assert (row["world_size"], row["iterations"], row["status"], row["checksums_equal"]) == (
        2,
        3,
        "finished",
        True,
    )
    assert (row["s_per_iteration"], row["env_steps_per_s"], row["warmup_s"]) == (
        steady["s_per_iteration"],
        steady["env_steps_per_s"],
        steady["warmup_s"],
    )
    assert (row["reward_first"], row["reward_last"]) == (s["first_mean_reward"], s["last_mean_reward"])
    last = mgpu(tmp_path, "runs", "--last")
    assert last.returncode == 0 and last.stdout == f"{row['folder']}\n"


def test_logger_choice_reaches_skrl_writer():
    ppo = PPOSettings(rollout=8)
    on = skrl_ppo_cfg(ppo, object, "logs/skrl/cartpole/run", "tensorboard")["experiment"]
    assert (on["directory"], on["experiment_name"], on["write_interval"]) == ("logs/skrl/cartpole", "run", 8)
    assert skrl_ppo_cfg(ppo, object, "logs/x/run", "none")["experiment"]["write_interval"] == 0
    assert skrl_ppo_cfg(ppo, object, "logs/x/run", "wandb")["experiment"]["wandb"] is True


def test_rsl_rl_logger_cfg():
    from isaaclab_mgpu.rank.backends.rsl_rl import logger_cfg

    assert logger_cfg("tensorboard", {}) == "tensorboard"
    assert logger_cfg("wandb", {"experiment_name": "cartpole"}) == {
        "class_name": "WandbLogWriter",
        "project_name": "cartpole",
    }


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
