"""The worker process: Warp's flag before any Warp-capable import, argument errors, task physics."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from training_helpers import child_env

# Records, at the first import of each watched module, Warp's enable_backward (None: warp absent).
PROBE = r"""
import json, runpy, sys
WATCH = {"isaaclab_mgpu.rank.tasks", "isaaclab_mgpu.rank.backends", "rsl_rl", "skrl", "isaaclab",
         "tensordict"}
seen = {}
def hook(event, args):
    if event == "import" and args[0] in WATCH and args[0] not in seen:
        warp = sys.modules.get("warp")
        seen[args[0]] = None if warp is None else bool(warp.config.enable_backward)
sys.addaudithook(hook)
sys.argv = ["worker", *json.loads(sys.argv[1])]
code = 0
try:
    if sys.argv[1:] == ["--import-only"]:
        import isaaclab_mgpu.rank.tasks
    else:
        runpy.run_module("isaaclab_mgpu.worker", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print("SEEN " + json.dumps(seen), code)
"""


def _require_warp() -> None:
    """Fail with the reason, not a KeyError, where warp-lang is missing (e.g. a bare GPU image)."""
    if importlib.util.find_spec("warp") is None:
        pytest.fail(
            "warp-lang is not installed, but it is a declared dependency of isaaclab-mgpu "
            "(pyproject.toml) and this test checks the flag the worker sets on it: "
            "install the project's dependencies (uv sync, or carry the warp-lang wheel)",
            pytrace=False,
        )


def _probe(tmp_path, args: list[str]) -> tuple[dict, int, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=tmp_path,
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SEEN "))
    seen_json, code = line[5:].rsplit(" ", 1)
    return json.loads(seen_json), int(code), proc.stdout + proc.stderr


@pytest.mark.slow
def test_warp_backward_is_disabled_before_tasks_and_backends_are_imported(tmp_path):
    _require_warp()
    args = ["--device", "cpu", "--num_envs", "8", "--max_iterations", "1", "agent.rollout=4"]
    seen, code, out = _probe(tmp_path, args)
    assert code == 0, out[-3000:]
    for module in ("isaaclab_mgpu.rank.tasks", "isaaclab_mgpu.rank.backends", "rsl_rl", "tensordict"):
        assert seen.get(module) is False, (module, seen)
    # The probe can tell the difference: importing a task module directly sees no flag set.
    seen, _, _ = _probe(tmp_path, ["--import-only"])
    assert seen["isaaclab_mgpu.rank.tasks"] is None


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--bogus"], "'--bogus'"),
        (["--num_envs", "0"], "--num_envs 0"),
        (["--rl_library", "rsl_rl", "--ml_framework", "jax"], "skrl only"),
        (["--device", "tpu"], "--device 'tpu'"),
    ],
)
def test_bad_worker_arguments_exit_2_with_one_line(argv, needle, capsys):
    from isaaclab_mgpu.rank.worker.args import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err


def test_unknown_argument_exits_2_from_the_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu.worker", "--bogus", "--distributed"],
        cwd=tmp_path,
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'--bogus'" in lines[0], proc.stderr


def test_overrides_are_parsed_in_order():
    from isaaclab_mgpu.rank.worker.args import parse_args

    args = parse_args(["--task", "pendulum", "env.dt=0.02", "agent.rollout=8", "env.dt=0.03"])
    assert args.overrides_for("env") == {"dt": "0.03"}
    assert args.overrides_for("agent") == {"rollout": "8"}
    assert args.overrides[0] == ("env.dt", "0.02")
    isaac = parse_args(["--task", "Isaac-Cartpole-Direct-v0", "presets=newton_mjwarp", "env.sim.dt=0.01"])
    assert isaac.overrides == (("presets", "newton_mjwarp"), ("env.sim.dt", "0.01"))


def test_cartpole_fails_by_falling_and_resets_itself():
    import torch

    from isaaclab_mgpu.rank.tasks import make

    task = make("cartpole", 16, "cpu", seed=0)
    for _ in range(200):  # full push one way: the pole falls well within 200 steps
        obs, reward, _terminated, _truncated, _info = task.step(torch.ones(16, 1))
        assert obs.shape == (16, 4) and reward.shape == (16,)
    stats = task.pop_stats()
    assert stats.episodes >= 16
    assert (task.episode_length_buf < 200).all()


def test_pendulum_only_times_out():
    import torch

    from isaaclab_mgpu.rank.tasks import make

    task = make("pendulum", 8, "cpu", seed=0, overrides={"episode_length": "10"})
    for _step in range(10):
        _, reward, terminated, truncated, _ = task.step(torch.zeros(8, 1))
        assert not terminated.any() and (reward <= 0).all()
    assert truncated.all() and task.pop_stats().episodes == 8
    with pytest.raises(ValueError, match="not a setting"):
        make("pendulum", 8, "cpu", seed=0, overrides={"mass": "2"})


def test_package_import_stays_light_and_train_in_process_is_lazy():
    _require_warp()
    probe = (
        "import sys, isaaclab_mgpu\n"
        "top = {m.split('.')[0] for m in sys.modules}\n"
        "heavy = sorted(top & {'torch', 'jax', 'warp', 'rsl_rl', 'skrl'})\n"
        "assert not heavy, heavy\n"
        "assert callable(isaaclab_mgpu.train_in_process)\n"
        "assert sys.modules['warp'].config.enable_backward is False\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_isaaclab_task_without_isaaclab_is_a_usage_error(tmp_path, capsys):
    from isaaclab_mgpu.contract.isaaclab_version import installed_version

    if installed_version() is not None:
        pytest.skip("Isaac Lab is installed here")
    import isaaclab_mgpu

    argv = ["--device", "cpu", "--task", "Isaac-Cartpole-Direct", "--log_root", str(tmp_path)]
    assert isaaclab_mgpu.train_in_process(argv) == 2
    assert "Isaac Lab is not installed" in capsys.readouterr().err


def test_console_plain_lines_off_a_terminal_and_rich_progress_on_one(capsys):
    from isaaclab_mgpu.contract.lines import ITERATION
    from isaaclab_mgpu.rank.console import TrainingConsole

    plain = TrainingConsole(0, tty=False)
    plain.start("rsl_rl/torch on cartpole", 0, 2)
    plain.iteration(1, 2, 12.5, 1000.0, 0.5)
    plain.iteration(2, 2, None, 1000.0, 0.5)
    out = capsys.readouterr().out
    assert "[mgpu] iteration 1/2 | reward 12.50 | 1,000 steps/s | 0.50 s/it" in out
    assert "iteration 2/2 | reward 12.50 (last) |" in out  # no episode ended: the last known mean
    first = TrainingConsole(0, tty=False)
    first.start("x", 0, 2)
    first.iteration(1, 2, None, 1.0, 1.0)
    assert "iteration 1/2 | reward n/a |" in capsys.readouterr().out  # none known yet
    resumed = TrainingConsole(0, tty=False)
    resumed.start("x", 34, 150, last_reward=480.5)  # a resumed run: its record's last mean
    resumed.iteration(35, 150, None, 1.0, 1.0)
    line = capsys.readouterr().out.splitlines()[-1]
    m = ITERATION.match(line)
    assert m is not None and (m["reward"], m["last"]) == ("480.50", " (last)"), line

    other = TrainingConsole(1, tty=False)
    other.start("x", 0, 2)
    other.iteration(1, 2, 1.0, 1.0, 1.0)
    other.synced("at the end", "00ff")
    assert capsys.readouterr().out == "[mgpu rank 1] parameters synchronised (at the end): checksum 00ff\n"

    rich = TrainingConsole(0, tty=True)
    rich.start("x", 0, 2)
    rich.iteration(1, 2, 3.0, 10.0, 0.1)
    assert rich._progress is not None
    rich.stop()
    assert "[mgpu] iteration" not in capsys.readouterr().out


@pytest.mark.parametrize(("status", "end"), [("stopped", 34), ("interrupted", 34), ("finished", 150)])
def test_the_final_line_tells_the_records_status_and_the_total(capsys, status, end):
    """A requeue stop at 34 of 150 is told as stopped, never as finished (issue 33)."""
    from isaaclab_mgpu.contract.lines import FINAL
    from isaaclab_mgpu.contract.summary import Rates, Summary
    from isaaclab_mgpu.rank.console import TrainingConsole

    record = Summary(
        status=status, interrupted=status == "interrupted", iterations=end, end_iteration=end,
        total_iterations=150, train_time_s=3.4, s_per_iteration=0.1, world_size=2,
        env_steps_per_s=Rates(total=100.0, per_rank=(50.0, 50.0)),
    ).to_json()  # fmt: skip
    TrainingConsole(0, tty=False).summary(record, "summary.json")
    (final,) = [m for m in map(FINAL.match, capsys.readouterr().out.splitlines()) if m]
    assert final.group(1) == status
    assert (f"to {end} of 150)" in final.string) == (end < 150)
