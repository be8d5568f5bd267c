"""Isaac Lab tasks: the pure parts (train argv, option forwarding, version range, registry scan,
pre-spawn refusals) everywhere; the CLI refusals with real ``mgpu train`` processes.

The end-to-end runs of Isaac Lab's own training on 2 CPU ranks are in ``test_isaac_e2e.py``
(skipped where Isaac Lab is not importable).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from isaaclab_mgpu.contract import isaaclab_version
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.worker_args import ISAAC_TRAIN_OPTIONS, option_strings
from isaaclab_mgpu.launcher import isaac_preflight as preflight
from isaaclab_mgpu.rank.isaac_resume import Continuation
from isaaclab_mgpu.rank.worker.args import parse_args
from isaaclab_mgpu.rank.worker.rank import RankContext

ISAAC = ["--task", "Isaac-Cartpole-Direct", "--device", "cpu"]


def _ctx(world: int = 2, rank: int = 1) -> RankContext:
    return RankContext(rank=rank, local_rank=rank, world_size=world, device="cpu", seed=42 + rank)


def test_worker_keeps_isaac_lab_options_in_order_with_their_values():
    args = parse_args(
        [*ISAAC, "--video", "--video_length", "100", "--logger=wandb", "--track", "presets=newton_mjwarp",
         "--checkpoint", "best", "agent.seed=3"]
    )  # fmt: skip
    # --logger is read out (one reading of it: args.logger) and spelled per library by train_argv
    assert args.isaac_args == ("--video", "--video_length", "100", "--track", "--checkpoint", "best")
    assert args.logger == "wandb"
    assert args.overrides == (("presets", "newton_mjwarp"), ("agent.seed", "3"))


def test_worker_refuses_isaac_lab_options_for_embedded_tasks(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--task", "cartpole", "--video"])
    assert exc.value.code == 2
    assert "--video is an Isaac Lab option" in capsys.readouterr().err


def test_rl_games_is_for_isaac_lab_tasks_only(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--task", "cartpole", "--rl_library", "rl_games"])
    assert "trains Isaac Lab tasks only" in capsys.readouterr().err
    assert parse_args([*ISAAC, "--rl_library", "rl_games"]).rl_library == "rl_games"


def test_option_strings_include_every_forwarded_isaac_lab_option():
    assert set(ISAAC_TRAIN_OPTIONS) <= option_strings()
    assert "--num_envs" in option_strings()


def test_train_argv_is_isaac_lab_distributed_command_line():
    from isaaclab_mgpu.rank.isaac import train_argv

    args = parse_args([*ISAAC, "--num_envs", "64", "--max_iterations", "3", "--video",
                       "presets=newton_mjwarp", "--distributed"])  # fmt: skip
    assert train_argv(args, _ctx(), Continuation("2026-01-02_03-04-05")) == [
        "--rl_library", "rsl_rl", "--task", "Isaac-Cartpole-Direct", "--device", "cpu",
        "--num_envs", "64", "--max_iterations", "3", "--seed", "42", "--distributed",
        "--run_timestamp", "2026-01-02_03-04-05", "--video", "presets=newton_mjwarp",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("library", "logger", "options", "items"),
    [
        ("rsl_rl", "wandb", ["--logger", "wandb"], []),
        ("rsl_rl", "tensorboard", [], []),
        ("rl_games", "wandb", ["--track"], []),
        ("skrl", "wandb", [], ["+agent.agent.experiment.wandb=true"]),
        ("skrl", "none", [], ["agent.agent.experiment.write_interval=0"]),
    ],
)
def test_logger_is_forwarded_the_isaac_lab_way(library, logger, options, items):
    from isaaclab_mgpu.rank.isaac import logger_argv, train_argv

    assert logger_argv(library, logger) == [*options, *items]
    args = parse_args([*ISAAC, "--rl_library", library, "--logger", logger, "presets=x"])
    argv = train_argv(args, _ctx(), Continuation("s"))
    # Options with their values before the Hydra items, the logger's Hydra items last.
    assert argv[argv.index("--run_timestamp") + 2 :] == [*options, "presets=x", *items]


def test_logger_none_is_refused_where_isaac_lab_cannot_turn_it_off():
    from isaaclab_mgpu.rank.isaac import logger_argv

    with pytest.raises(UsageError, match="--logger none: Isaac Lab's rsl_rl back-end"):
        logger_argv("rsl_rl", "none")


def test_train_argv_single_rank_puts_the_agent_on_the_rank_device_unless_given():
    from isaaclab_mgpu.rank.isaac import train_argv

    one = _ctx(world=1, rank=0)
    rl_games = parse_args([*ISAAC, "--rl_library", "rl_games", "agent.params.config.device=cpu"])
    tail = train_argv(rl_games, one, Continuation("s"))[-2:]
    assert tail == ["agent.params.config.device=cpu", "agent.params.config.device_name=cpu"]
    skrl = parse_args([*ISAAC, "--rl_library", "skrl", "--ml_framework", "jax"])
    argv = train_argv(skrl, one, Continuation("s"))
    assert (
        argv[6:8] == ["--ml_framework", "jax"] and "--checkpoint" not in argv and "--distributed" not in argv
    )


def test_train_argv_continues_a_run_by_its_stamp_and_this_rank_copy_of_the_checkpoint():
    from isaaclab_mgpu.rank.isaac import train_argv

    cont = Continuation("2026-01-02_03-04-05", run_name="long", folder="/l/r", checkpoint="/l/r/model_4.pt",
                        local="/tmp/copy/model_4.pt")  # fmt: skip
    argv = train_argv(parse_args([*ISAAC, "--resume", "/l/r"]), _ctx(), cont)
    assert argv[argv.index("--run_name") + 1] == "long" and argv[argv.index("--checkpoint") + 1] == cont.local
    assert argv[argv.index("--run_timestamp") + 1] == "2026-01-02_03-04-05"
    assert "--experiment_name" not in argv  # not read back from the folder: as the run was started
    given = train_argv(parse_args([*ISAAC, "--run_name", "mine"]), _ctx(), cont)
    assert given[given.index("--run_name") + 1] == "mine"
    named = train_argv(parse_args(list(ISAAC)), _ctx(), Continuation("s", experiment="cartpole_direct"))
    assert named[named.index("--experiment_name") + 1] == "cartpole_direct"


def test_isaac_lab_version_range():
    assert isaaclab_version.version_supported("3.0.0") and isaaclab_version.version_supported("3.0.2rc1")
    assert not isaaclab_version.version_supported("2.3.0") and not isaaclab_version.version_supported("3.1.0")
    with pytest.raises(UsageError, match=r"Isaac Lab 3\.1\.0 is not supported .* isaaclab>=3\.0,<3\.1"):
        isaaclab_version.check_version("3.1.0")


REGISTRY = """
import gymnasium as gym
gym.register(id="Isaac-Cartpole-Direct", entry_point="x:y",
             kwargs={"env_cfg_entry_point": "a", "rsl_rl_cfg_entry_point": "b", "skrl_cfg_entry_point": "c"})
gym.register(id="Isaac-Lift-Cube", entry_point="x:y",
             kwargs={"env_cfg_entry_point": "a", "rsl_rl_cfg_entry_point": "b"})
gym.register(id=f"Isaac-{1}", entry_point="x:y")
"""


@pytest.fixture
def fake_isaac(tmp_path, monkeypatch):
    pkg = tmp_path / "isaaclab_tasks" / "core"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(REGISTRY)
    dirs = {"isaaclab": tmp_path, "isaaclab_rl": tmp_path, "isaaclab_tasks": tmp_path / "isaaclab_tasks"}
    monkeypatch.setattr(preflight, "_package_dir", lambda name: dirs.get(name))
    monkeypatch.setattr(isaaclab_version, "installed_version", lambda: "3.0.0")
    preflight.registry.cache_clear()
    yield
    preflight.registry.cache_clear()


def _check(args: list[str], library: str = "rsl_rl") -> None:
    request = preflight.request_from(args, library)
    assert request is not None
    preflight.check(request, python=(3, 12))


def test_registry_scan_finds_literal_registrations(fake_isaac):
    _check(["--task", "Isaac-Cartpole-Direct"])
    _check(["--task", "Isaac-Cartpole-Direct"], "skrl")
    assert preflight.request_from(["--task", "cartpole"], "rsl_rl") is None


def test_unknown_task_suggests_close_matches(fake_isaac):
    with pytest.raises(
        UsageError, match=r"Isaac-Cartpol is not an Isaac Lab task; did you mean Isaac-Cartpole-Direct"
    ):
        _check(["--task=Isaac-Cartpol"])
    _check(["--task", "Isaac-Mine", "--external_callback", "pkg.mod.fn"])  # it may register the task


def test_library_without_agent_config_is_refused(fake_isaac):
    with pytest.raises(
        UsageError, match=r"Isaac-Lift-Cube has no rl_games agent config .*--rl_library rsl_rl$"
    ):
        _check(["--task", "Isaac-Lift-Cube"], "rl_games")
    with pytest.raises(UsageError, match="skrl_sac_cfg_entry_point"):
        _check(["--task", "Isaac-Cartpole-Direct", "--algorithm", "SAC"], "skrl")
    _check(["--task", "Isaac-Lift-Cube", "--agent", "my.module:Cfg"], "rl_games")


def test_missing_isaac_lab_and_old_python_are_refused(fake_isaac, monkeypatch):
    request = preflight.request_from(["--task", "Isaac-Cartpole-Direct"], "rsl_rl")
    with pytest.raises(UsageError, match=r"needs Python 3\.12\+, and mgpu runs on 3\.11"):
        preflight.check(request, python=(3, 11))
    monkeypatch.setattr(preflight, "_package_dir", lambda name: None)
    with pytest.raises(UsageError, match=r"Isaac Lab is not installed \(isaaclab missing\); install it"):
        preflight.check(request, python=(3, 12))


def _mgpu(*args: str, cwd: Path, command: str = "train") -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", command, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    return proc, time.monotonic() - t0


COMMON = ["--device", "cpu", "--nproc_per_node", "2", "--num_envs", "64", "--max_iterations", "3",
          "presets=newton_mjwarp"]  # fmt: skip


def _torch_import_s() -> float:
    """Seconds a fresh interpreter takes to import torch here and now (what a spawned rank does first)."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=300)
    return time.monotonic() - t0


def _refused(proc: subprocess.CompletedProcess[str], seconds: float, cwd: Path, text: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and text in lines[0], proc.stderr
    assert not (cwd / "logs").exists()  # torchrun never started: it would create logs/mgpu
    # Refused before anything heavy: sooner than a fresh interpreter imports torch, measured now.
    baseline = _torch_import_s()
    assert seconds < baseline + 1, (seconds, baseline)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this interpreter is new enough for Isaac Lab")
def test_cli_refuses_isaac_task_on_old_python_before_spawning(tmp_path):
    proc, seconds = _mgpu(*COMMON, "--task", "Isaac-Cartpole-Direct", cwd=tmp_path)
    _refused(proc, seconds, tmp_path, "Isaac Lab needs Python 3.12+")
    proc, seconds = _mgpu(*COMMON, "--task", "Isaac-Cartpole-Direct", cwd=tmp_path, command="check-env")
    _refused(proc, seconds, tmp_path, "Isaac Lab needs Python 3.12+")


def test_cli_refuses_rl_games_without_an_isaac_task(tmp_path):
    proc, seconds = _mgpu(*COMMON, "--rl_library", "rl_games", "--task", "cartpole", cwd=tmp_path)
    _refused(proc, seconds, tmp_path, "rl_games trains Isaac Lab tasks only")


def _isaac_lab_here() -> bool:
    return sys.version_info >= (3, 12) and all(
        preflight._package_dir(m) for m in ("isaaclab", "isaaclab_tasks")
    )


needs_isaac = pytest.mark.skipif(not _isaac_lab_here(), reason="Isaac Lab is not installed here")


@needs_isaac
def test_cli_refuses_unknown_isaac_task_before_spawning(tmp_path):
    for command in ("train", "check-env"):
        proc, seconds = _mgpu(*COMMON, "--task", "Isaac-Cartpol-Direct", cwd=tmp_path, command=command)
        _refused(proc, seconds, tmp_path, "did you mean Isaac-Cartpole-Direct")


@needs_isaac
def test_cli_refuses_library_without_agent_config_before_spawning(tmp_path):
    roots = tuple(str(p) for p in (preflight._package_dir(n) for n in preflight.TASK_PACKAGES) if p)
    tasks = preflight.registry(roots)
    task = next(
        t
        for t, keys in sorted(tasks.items())
        if t.startswith("Isaac-") and "rl_games_cfg_entry_point" not in keys
    )
    proc, seconds = _mgpu(*COMMON, "--task", task, "--rl_library", "rl_games", cwd=tmp_path)
    _refused(proc, seconds, tmp_path, "has no rl_games agent config")
