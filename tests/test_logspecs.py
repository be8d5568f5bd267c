"""mgpu's per-rank log layout: torchrun's logs spec (``--logs_specs mgpu``) and a real run's folders.

``<log root>/<run name>/attempt_<k>/rank_<global rank>/`` and nothing of torch's own nesting
(``<run_id>_<rand>/attempt_<restart>/<local rank>/``); the ledger and ``mgpu logs`` name it.
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
    root = tmp_path / "rsl_rl_cartpole" / "attempt_0"
    stale = elastic.rank_dir(root, 3)
    stale.mkdir(parents=True)
    (stale / elastic.ERROR_FILE).write_text(
        "{}"
    )  # an earlier launch's, which no reader may take for this one's
    other_node = elastic.rank_dir(root, 0)
    other_node.mkdir()
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
    assert list(stale.iterdir()) == [] and (other_node / elastic.STDOUT).read_text() == "node 0's rank"
    # torch's own nests the run id, a random suffix, its restart and the local rank.
    (nested,) = (tmp_path / "torch").iterdir()
    assert nested.name.startswith("job7_") and (nested / "attempt_0" / "1").is_dir()
    # Nothing redirected nor tee'd: the console, as torch's.
    plain = logspecs.RankLogsSpecs(log_dir=str(tmp_path / "plain")).reify(_envs(0))
    assert plain.stdouts == DefaultLogsSpecs(log_dir=str(tmp_path / "t2")).reify(_envs(0)).stdouts == {0: ""}


@pytest.mark.slow
def test_a_real_two_rank_run_leaves_one_folder_per_rank_that_the_ledger_and_mgpu_logs_name(tmp_path):
    tiny = ("--num_envs", "16", "--max_iterations", "2", "env.episode_length=16")
    code, out = Run(train_argv("rsl_rl", *tiny), tmp_path).finish(240)
    assert code == 0, out[-4000:]
    logs = tmp_path / "logs" / "mgpu"
    attempt = logs / "rsl_rl_cartpole" / "attempt_0"
    folders = sorted(str(p.relative_to(logs)) for p in logs.rglob("*") if p.is_dir())
    assert folders == [
        "rsl_rl_cartpole",
        "rsl_rl_cartpole/attempt_0",
        *(f"rsl_rl_cartpole/attempt_0/rank_{r}" for r in (0, 1)),
    ]
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
