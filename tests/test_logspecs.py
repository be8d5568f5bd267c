"""mgpu's per-rank log layout: torchrun's logs spec (``--logs_specs mgpu``) and a real run's folders.

``<log root>/<run name>/<launch>/attempt_<k>/rank_<global rank>/`` and nothing of torch's own
nesting (``<run_id>_<rand>/attempt_<restart>/<local rank>/``); the ledger and ``mgpu logs`` name it.
Each launch has its own ``<launch>`` folder, so two launches of one task never touch each other's.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from restart_helpers import Run, run_folders, summary_of, train_argv
from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, Std
from training_helpers import child_env

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.launcher import logspecs


def _envs(*ranks: int) -> dict[int, dict[str, str]]:
    """What torch's agent hands a logs spec: each local rank's environment (RANK: its global rank)."""
    return {
        local: {"RANK": str(rank), "TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_RESTART_COUNT": "0"}
        for local, rank in enumerate(ranks)
    }


def test_the_entry_point_torchrun_loads_is_mgpus():
    (found,) = entry_points(group="torchrun.logs_specs", name=logspecs.NAME)
    assert found.load() is logspecs.RankLogsSpecs


def test_each_rank_writes_in_its_global_ranks_folder_with_torchs_stream_choices(tmp_path):
    root = tmp_path / "rsl_rl_cartpole" / "2026-01-02_03-04-05" / "attempt_0"
    other_node = elastic.rank_dir(root, 0)
    other_node.mkdir(parents=True)
    (other_node / elastic.STDOUT).write_text("node 0's rank")
    ours_envs, torchs_envs = _envs(2, 3), _envs(2, 3)
    # The console filter (only local rank 0 shown) and tee (both streams) as mgpu passes them.
    ours = logspecs.RankLogsSpecs(log_dir=str(root), tee=Std.ALL, local_ranks_filter={0}).reify(ours_envs)
    torchs = DefaultLogsSpecs(log_dir=str(tmp_path / "torch"), tee=Std.ALL, local_ranks_filter={0})
    theirs = torchs.reify(torchs_envs)
    for local, rank in ((0, 2), (1, 3)):
        folder = root / f"rank_{rank}"
        assert ours.stdouts[local] == str(folder / "stdout.log")
        assert ours.stderrs[local] == str(folder / "stderr.log")
        assert (
            ours.error_files[local]
            == ours_envs[local]["TORCHELASTIC_ERROR_FILE"]
            == str(folder / "error.json")
        )
    # Which stream goes where is torch's: the same keys, files and console as DefaultLogsSpecs.
    assert ours.tee_stdouts.keys() == theirs.tee_stdouts.keys() == {0}
    assert ours.tee_stderrs.keys() == theirs.tee_stderrs.keys() == {0}
    assert sorted(p.name for p in root.iterdir()) == ["rank_0", "rank_2", "rank_3"]
    assert (other_node / elastic.STDOUT).read_text() == "node 0's rank"
    # torch's own nests the run id, a random suffix, its restart and the local rank.
    (nested,) = (tmp_path / "torch").iterdir()
    assert nested.name.startswith("job7_") and (nested / "attempt_0" / "1").is_dir()
    # Nothing redirected nor tee'd: the console, as torch's.
    plain = logspecs.RankLogsSpecs(log_dir=str(tmp_path / "plain")).reify(_envs(0))
    assert plain.stdouts == DefaultLogsSpecs(log_dir=str(tmp_path / "t2")).reify(_envs(0)).stdouts == {0: ""}


def test_two_launches_of_one_task_with_one_stamp_get_two_folders_and_keep_each_others_files(tmp_path):
    from conftest import machine

    from isaaclab_mgpu.launcher.build import build
    from isaaclab_mgpu.launcher.pipeline import own_log_folder
    from isaaclab_mgpu.launcher.resolve import resolve
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    # A seed sweep, scale's copies or a fixed --run_timestamp: one task, one stamp, same second.
    spec = LaunchSpec(nproc_per_node="2", log_dir=str(tmp_path / "logs"))
    resolved = resolve(spec, machine(4), strict=False, port_free=lambda p: True, free_port=lambda: 45678)
    planned = build(resolved)  # dry-run: the stamp's name, nothing made
    assert planned.log_dir == str(tmp_path / "logs" / "rsl_rl_cartpole" / resolved.run_stamp / "attempt_0")
    assert not (tmp_path / "logs").exists()
    (first, first_cmd), (second, second_cmd) = own_log_folder(resolved), own_log_folder(resolved)
    assert first_cmd.log_dir == planned.log_dir
    assert (first.log_launch, second.log_launch) == (resolved.run_stamp, f"{resolved.run_stamp}-2")
    folders = []
    for cmd in (first_cmd, second_cmd):
        dest = logspecs.RankLogsSpecs(log_dir=cmd.log_dir, tee=Std.ALL).reify(_envs(0, 1))
        for path in (*dest.stdouts.values(), *dest.stderrs.values()):
            Path(path).write_text(cmd.log_dir)  # the ranks' output, while the other launch starts
        folders.append(Path(cmd.log_dir))
    assert folders[0] != folders[1] and folders[0].parent.parent == folders[1].parent.parent
    for folder in folders:
        for rank in (0, 1):
            assert (elastic.rank_dir(folder, rank) / elastic.STDOUT).read_text() == str(folder)
    # A third launch in that second gets a third folder; neither earlier one is touched.
    assert own_log_folder(resolved)[0].log_launch == f"{resolved.run_stamp}-3"
    assert (elastic.rank_dir(folders[0], 1) / elastic.STDERR).read_text() == str(folders[0])


@pytest.mark.slow
def test_a_real_two_rank_run_leaves_one_folder_per_rank_that_the_ledger_and_mgpu_logs_name(tmp_path):
    tiny = ("--num_envs", "16", "--max_iterations", "2", "env.episode_length=16")
    code, out = Run(train_argv("rsl_rl", *tiny), tmp_path).finish(240)
    assert code == 0, out[-4000:]
    logs = tmp_path / "logs" / "mgpu"
    (launch,) = (logs / "rsl_rl_cartpole").iterdir()  # this launch's own folder: its run stamp
    attempt = launch / "attempt_0"
    folders = sorted(str(p.relative_to(launch)) for p in launch.rglob("*") if p.is_dir())
    assert folders == ["attempt_0", *(f"attempt_0/rank_{r}" for r in (0, 1))]
    for rank in (0, 1):
        files = {p.name for p in (attempt / f"rank_{rank}").iterdir()}
        assert {"stdout.log", "stderr.log"} <= files <= {"stdout.log", "stderr.log", "stack.txt"}, files
    assert "iteration 2/2" in (attempt / "rank_0" / "stdout.log").read_text()
    # The ledger and summary.json name the attempt's folder; the console said it once.
    (folder,) = run_folders(tmp_path, "rsl_rl")
    ledger = ev.read(folder)
    assert ledger is not None
    (started,) = [e for e in ledger.events if isinstance(e, ev.AttemptStarted)]
    (up,) = [e for e in ledger.events if isinstance(e, ev.RanksUp)]
    assert tmp_path / started.log_dir == tmp_path / up.logs == attempt
    assert [Path(a["logs"]) for a in summary_of(folder)["attempts"]] == [attempt]
    assert f"per-rank logs: {started.log_dir}" in out
    # mgpu logs prints rank 0's console from rank_0/stdout.log.
    shown = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "logs", str(folder)],
        cwd=tmp_path, env=child_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "iteration 2/2" in shown.stdout, shown.stdout[-2000:]
