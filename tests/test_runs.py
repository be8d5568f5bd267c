"""``mgpu runs`` and the run status kept in summary.json (worker and launcher)."""

from __future__ import annotations

import json
import time

import pytest
from training_helpers import run

from isaaclab_mgpu.cli import main
from isaaclab_mgpu.contract.files import write_json
from isaaclab_mgpu.contract.summary import Summary, settle
from isaaclab_mgpu.launcher.runs import find_runs, planned_folder, status_of


def make(root, lib, exp, name, **data):
    folder = root / lib / exp / name
    folder.mkdir(parents=True)
    write_json(folder / "summary.json", {"backend": lib, "task": exp, **data})
    return folder


def test_find_runs_newest_first_from_summaries_only(tmp_path):
    make(tmp_path, "rsl_rl", "cartpole", "2026-01-01_10-00-00", status="finished", world_size=2)
    make(tmp_path, "skrl", "pendulum", "2026-01-02_10-00-00_b", status="failed")
    newest = make(tmp_path, "skrl", "cartpole", "x", started_at=time.time(), status="running")
    (tmp_path / "rsl_rl" / "cartpole" / "2026-01-01_10-00-00" / "rank_1").mkdir()
    (tmp_path / "mgpu" / "abc" / "attempt_0" / "0").mkdir(parents=True)  # torchrun logs: no summary
    (tmp_path / "skrl" / "cartpole" / "broken").mkdir()
    (tmp_path / "skrl" / "cartpole" / "broken" / "summary.json").write_text("{not json")
    rows = find_runs(tmp_path)
    assert [r.status for r in rows] == ["running", "failed", "finished"]
    assert rows[0].folder == str(newest)
    assert [r.folder for r in find_runs(tmp_path / "skrl")] == [str(newest), rows[1].folder]


def test_status_of_older_summaries():
    assert status_of(Summary.from_json({"interrupted": True, "exit_status": 130})) == "interrupted"
    assert status_of(Summary.from_json({"interrupted": False, "exit_status": 0})) == "finished"
    assert status_of(Summary.from_json({"status": "hung"})) == "hung"


def test_settle_changes_only_a_running_summary(tmp_path):
    running = make(tmp_path, "rsl_rl", "cartpole", "a", status="running", iterations=7)
    done = make(tmp_path, "rsl_rl", "cartpole", "b", status="finished")
    bare = tmp_path / "rsl_rl" / "cartpole" / "c"
    bare.mkdir()
    identity = {"backend": "rsl_rl", "framework": "torch", "task": "cartpole", "world_size": 2}
    assert settle(running, "failed", 3, identity)
    data = json.loads((running / "summary.json").read_text())
    assert (data["status"], data["exit_status"], data["iterations"]) == ("failed", 3, 7)
    assert not settle(done, "failed", 3, identity)
    assert settle(bare, "hung", 124, identity)
    assert json.loads((bare / "summary.json").read_text())["world_size"] == 2
    assert not settle(tmp_path / "missing", "failed", 1, identity)


def test_planned_folder_follows_the_worker_options():
    args = ("--task", "pendulum", "--run_name=r1", "--log_root", "out")
    assert str(planned_folder(args, "skrl", "S")) == "out/skrl/pendulum/S_r1"
    assert str(planned_folder(("--experiment_name", "e"), "rsl_rl", "S")) == "logs/rsl_rl/e/S"


def test_runs_command(tmp_path, capsys):
    make(tmp_path, "rsl_rl", "cartpole", "2026-01-01_10-00-00", status="finished", world_size=2)
    newest = make(tmp_path, "skrl", "cartpole", "2026-01-03_10-00-00", status="interrupted")
    assert main(["runs", str(tmp_path), "--last"]) == 0
    assert capsys.readouterr().out == f"{newest}\n"
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "interrupted" in out and "finished" in out and "\x1b" not in out
    assert main(["runs", str(tmp_path / "none")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["runs", str(tmp_path / "empty"), "--last"]) == 1
    assert main(["runs", str(tmp_path / "empty"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_run_whose_rank_fails_is_listed_as_failed(tmp_path):
    # env.no_such_field fails in every rank after rank 0 wrote its running summary.
    code, out = run("rsl_rl", tmp_path, "--num_envs", "8", "--run_name", "bad", "env.no_such_field=1")
    assert code == 2, out[-3000:]
    rows = find_runs(tmp_path / "logs")
    assert [(r.status, r.library, r.task, r.world_size) for r in rows] == [
        ("failed", "rsl_rl", "cartpole", 2)
    ]
    assert json.loads((tmp_path / rows[0].folder / "summary.json").read_text())["exit_status"] == 2


@pytest.mark.parametrize(
    ("result", "status"),
    [
        ({"exit_code": 4, "stall": "verdict"}, "hung"),
        ({"exit_code": 130, "interrupted": True}, "interrupted"),
        ({"exit_code": 3}, "failed"),
    ],
)
def test_launcher_settles_the_status_from_the_run_result(tmp_path, monkeypatch, result, status):
    from conftest import machine

    from isaaclab_mgpu.launch import settle_run
    from isaaclab_mgpu.launcher.build import build
    from isaaclab_mgpu.launcher.resolve import resolve
    from isaaclab_mgpu.launcher.spec import LaunchSpec
    from isaaclab_mgpu.launcher.supervise import RunResult

    monkeypatch.chdir(tmp_path)
    spec = LaunchSpec.from_options(
        ("--task", "pendulum", "--run_name", "x"), device="cpu", nproc_per_node="2"
    )
    resolved = resolve(spec, machine(0), strict=True, free_port=lambda: 1234)
    folder = make(tmp_path / "logs", "rsl_rl", "pendulum", f"{resolved.run_stamp}_x", status="running")
    fields = {"interrupted": False, "killed_after_grace": False, "failure": None, "log_dir": None,
              "survivors": (), **result}  # fmt: skip
    settle_run(resolved, build(resolved), RunResult(**fields))
    data = json.loads((folder / "summary.json").read_text())
    assert (data["status"], data["exit_status"]) == (status, result["exit_code"])


def test_table_limit_reads_only_the_newest(tmp_path, capsys):
    for day in range(1, 6):
        make(tmp_path, "rsl_rl", "cartpole", f"2026-01-0{day}_10-00-00", status="finished")
    (tmp_path / "rsl_rl" / "cartpole" / "2026-01-01_10-00-00" / "summary.json").write_text("{broken")
    assert [r.folder[-19:] for r in find_runs(tmp_path, limit=2)] == [
        "2026-01-05_10-00-00",
        "2026-01-04_10-00-00",
    ]
    assert len(find_runs(tmp_path)) == 4  # the unreadable one is left out
    assert main(["runs", str(tmp_path), "--limit", "2"]) == 0
    out, err = capsys.readouterr()
    assert "2026-01-05_10-00-00" in out and "2026-01-03_10-00-00" not in out and "--limit 0" in err
    assert main(["runs", str(tmp_path), "--limit", "0"]) == 0
    assert "2026-01-02_10-00-00" in capsys.readouterr().out
