"""``mgpu runs`` and the run status kept in summary.json (worker and launcher)."""

from __future__ import annotations

import json
import time

import pytest
from training_helpers import run

from isaaclab_mgpu.cli import main
from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract.files import write_json
from isaaclab_mgpu.contract.summary import Summary
from isaaclab_mgpu.launcher.ledger import RunLedger
from isaaclab_mgpu.launcher.runs import find_runs, status_of


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
    (tmp_path / "mgpu" / "abc" / "attempt_0" / "rank_0").mkdir(parents=True)  # per-rank logs: no summary
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
    """The ledger's settle (a summary written before the ledger is its first event, kept whole)."""
    running = make(tmp_path, "rsl_rl", "cartpole", "a", status="running", iterations=7)
    done = make(tmp_path, "rsl_rl", "cartpole", "b", status="finished")
    RunLedger(running).settle("failed", 3)
    data = json.loads((running / "summary.json").read_text())
    assert (data["status"], data["exit_status"], data["iterations"], data["settled_by"]) == (
        "failed", 3, 7, "launcher")  # fmt: skip
    RunLedger(done).settle("failed", 3)
    assert json.loads((done / "summary.json").read_text())["status"] == "finished"
    for folder in (running, done):  # the file is the fold of the ledger beside it
        assert ev.summary_of(ev.read(folder).events).to_json() == json.loads(
            (folder / "summary.json").read_text()
        )


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


@pytest.mark.slow
def test_a_run_whose_rank_fails_is_listed_as_failed(tmp_path):
    # Only a rank can find this out: zero mini-batches is an int, as the setting wants, but rsl-rl's
    # update divides by it. Every rank fails after rank 0 wrote its running summary; the launcher
    # then settles that summary, in the folder the given --run_timestamp names on both sides.
    args = ("--num_envs", "8", "--run_name", "bad", "--run_timestamp", "2026-01-02_03-04-05")
    code, out = run("rsl_rl", tmp_path, *args, "agent.mini_batches=0")
    assert code == 1, out[-3000:]
    rows = find_runs(tmp_path / "logs")
    assert [(r.status, r.library, r.task, r.world_size) for r in rows] == [
        ("failed", "rsl_rl", "cartpole", 2)
    ]
    assert rows[0].folder == str(tmp_path / "logs" / "rsl_rl" / "cartpole" / "2026-01-02_03-04-05_bad")
    data = json.loads((tmp_path / rows[0].folder / "summary.json").read_text())
    assert data["exit_status"] == 1 and data.get("rank_exit_code") is None


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
    from isaaclab_mgpu.launcher.attempts import Attempt, Outcome
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
    ended = Attempt(number=0, outcome=status, exit_code=result["exit_code"])
    settle_run(Outcome((ended,), RunResult(**fields), folder), RunLedger(folder))
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


#: Twenty summaries nobody should trust: wrong types, impossible values, markup, escape codes. Each
#: holds a raw JSON text (NaN and Infinity are what Python's json writes by default) and the row
#: fields that must read as unknown.
MALFORMED = [
    ('{"iterations": "5"}', {"iterations"}),
    ('{"started_at": 1e300}', {"started"}),
    ('{"started_at": NaN}', {"started"}),
    ('{"started_at": -5}', {"started"}),
    ('{"backend": ["a"]}', {"library"}),
    ('{"checksums_equal": "false"}', {"checksums_equal"}),
    ('{"world_size": -1}', {"world_size"}),
    ('{"world_size": true}', {"world_size"}),
    ('{"env_steps_per_s": {"total": "fast"}}', {"env_steps_per_s"}),
    ('{"env_steps_per_s": "fast"}', {"env_steps_per_s"}),
    ('{"first_mean_reward": Infinity, "last_mean_reward": -Infinity}', {"reward_first", "reward_last"}),
    ('{"s_per_iteration": NaN, "framework": 7}', {"s_per_iteration", "framework"}),
    ('{"status": "[/oops]"}', {"status"}),
    ('{"status": ["finished"], "exit_status": "0", "interrupted": "yes"}', {"status"}),
    ('{"task": "[/oops]"}', set()),
    ('{"task": "[bold]big[/bold] [link=https://example.com]click[/link]"}', set()),
    ('{"task": "\\u001b[31mred\\u001b]0;title\\u0007"}', set()),
    ('{"task": {"name": "x"}, "iterations": 1e400}', {"task", "iterations"}),
    ('{"mean_rewards": "x", "checksums": [1], "seed": "s", "num_envs_per_rank": 0}', set()),
    ("{}", set()),
]


def test_runs_over_twenty_malformed_summaries_prints_a_table(tmp_path, capsys, monkeypatch):
    assert len(MALFORMED) == 20
    monkeypatch.setenv("COLUMNS", "400")  # every column shown: the task column holds the markup
    for i, (text, _) in enumerate(MALFORMED):
        folder = tmp_path / "rsl_rl" / "x" / f"2026-01-01_10-00-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(text)
    # Not runs at all, and none may stop the table: a list, broken JSON, bytes that are not UTF-8.
    for name, raw in (("list", b"[1, 2]"), ("broken", b'{"task": '), ("latin1", b'{"task": "caf\xe9"}')):
        (tmp_path / "rsl_rl" / "junk" / name).mkdir(parents=True)
        (tmp_path / "rsl_rl" / "junk" / name / "summary.json").write_bytes(raw)

    rows = {r.folder[-2:]: r for r in find_runs(tmp_path)}
    assert len(rows) == 20
    for i, (_, invalid) in enumerate(MALFORMED):
        assert set(rows[f"{i:02d}"].invalid) == invalid, MALFORMED[i]
    assert rows["12"].status == rows["13"].status == "unknown"
    assert rows["05"].checksums_equal is None  # "false" is not false, and never "ok"

    assert main(["runs", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "\x1b" not in out + err
    lines = [line for line in out.splitlines() if "2026-01-01_10-00-" in line]
    assert len(lines) == 20  # one line per run
    assert "[/oops]" in out and "[bold]big[/bold] [link=https://example.com]click[/link]" in out
    assert "\\x1b[31mred\\x1b]0;title\\x07" in out
    assert "ok" not in lines[MALFORMED.index(('{"checksums_equal": "false"}', {"checksums_equal"}))]

    assert main(["runs", str(tmp_path), "--json"]) == 0
    text = capsys.readouterr().out

    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    listed = json.loads(text, parse_constant=refuse)
    assert len(listed) == 20 and all(isinstance(r["invalid"], list) for r in listed)


def test_last_refuses_a_folder_name_that_would_break_a_substitution(tmp_path, capsys):
    make(tmp_path, "rsl_rl", "cartpole", "2026-01-01_10-00-00", status="finished")
    newest = make(tmp_path, "rsl_rl", "cartpole", "2026-01-02_10-00-00_a\nb", status="finished")
    assert main(["runs", str(tmp_path), "--last"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "control character" in err and "a\\nb" in err
    newest.rename(newest.with_name("2026-01-02_10-00-00_\x1b[2J"))
    assert main(["runs", str(tmp_path), "--last"]) == 1
    assert "\x1b" not in capsys.readouterr().err


def test_last_gives_back_a_name_that_is_not_utf8_as_its_bytes(tmp_path):
    import os
    import subprocess
    import sys

    folder = os.fsdecode(bytes(tmp_path) + b"/rsl_rl/cartpole/2026-01-02_10-00-00_\xff")
    os.makedirs(folder)
    write_json(os.path.join(folder, "summary.json"), {"status": "finished"})
    code = "import sys; from isaaclab_mgpu.cli import main; sys.exit(main(sys.argv[1:]))"
    # A strict stdout (a UTF-8 locale without Python's UTF-8 mode) could not encode the name.
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "PYTHONUTF8": "0"}

    def mgpu(*args):
        argv = [sys.executable, "-c", code, *args]
        return subprocess.run(argv, capture_output=True, env=env, timeout=60)

    proc = mgpu("runs", str(tmp_path), "--last")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == os.fsencode(folder) + b"\n"
    proc = mgpu("runs", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert b"2026-01-02_10-00-00_\\xff" in proc.stdout


def test_folder_names_are_shown_as_text(tmp_path, capsys, monkeypatch):
    # A folder name cannot hold "/": "[/oops]" is the task (above); here markup that needs none.
    make(tmp_path, "rsl_rl", "[bold]exp", "2026-01-01_10-00-00_[link=https:evil]x", status="finished")
    link = "\x1b]8;;https:evil\x1b\\x"  # a terminal hyperlink escape
    make(tmp_path, "rsl_rl", "cartpole", f"2026-01-02_10-00-00_{link}", status="failed")
    monkeypatch.chdir(tmp_path)  # short folder names: each fits its table cell on one line
    assert main(["runs", "."]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "\x1b" not in out + err
    assert "[bold]exp/2026-01-01_10-00-00_[link=https:evil]x" in out
    assert "2026-01-02_10-00-00_\\x1b]8;;https:evil\\x1b\\x" in out


@pytest.mark.parametrize("width", [80, 100, 120, None])
def test_runs_table_fits_the_width_with_every_folder_whole(tmp_path, capsys, monkeypatch, width):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "logs"
    for i, (lib, exp, status) in enumerate(
        [
            ("rsl_rl", "cartpole", "finished"),
            ("skrl", "pendulum", "interrupted"),
            ("skrl", "cartpole", "hung"),
        ]
    ):
        make(root, lib, exp, f"2026-01-0{i + 1}_10-00-00", status=status, world_size=2, iterations=50,
             first_mean_reward=10.25, last_mean_reward=180.5, checksums_equal=True)  # fmt: skip
    make(root, "rsl_rl", "cartpole", "2026-01-04_10-00-00_a_rather_long_run_name", status="failed")
    if width is None:  # piped with no COLUMNS: not 230 wide
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(width))
    assert main(["runs", "logs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= (width or 120), lines
    body = lines[2:]
    assert len(body) == 4  # one line per run: nothing folded
    folders = sorted(str(p.parent.relative_to(tmp_path)) for p in root.rglob("summary.json"))
    assert sorted(line.split()[0] for line in body) == folders
    assert {line.split()[1] for line in body} == {"finished", "interrupted", "hung", "failed"}
    header = lines[0].split()
    assert header[:2] == ["folder", "status"]
    if width is None or width >= 120:
        assert "iterations" in header and "reward" in header

    monkeypatch.setenv("COLUMNS", "40")  # narrower than a folder: the folder still comes whole
    assert main(["runs", "logs", "--last"]) == 0
    newest = capsys.readouterr().out.strip()
    assert main(["runs", "logs"]) == 0
    assert any(line.split()[:2] == [newest, "failed"] for line in capsys.readouterr().out.splitlines())


def test_an_isaac_run_continued_in_new_folders_is_listed_with_its_chain(tmp_path, capsys, monkeypatch):
    # Isaac Lab's own --checkpoint loads another run's checkpoint into a new folder; each later
    # folder's summary names the one it continues, and mgpu runs reads them as one run.
    monkeypatch.setenv("COLUMNS", "300")
    exp = tmp_path / "logs" / "rsl_rl" / "cartpole_direct"
    restart = {"number": 0, "outcome": "failed", "exit_code": -9, "rank": 1, "how": "signal SIGKILL",
               "started_at": 0, "reached": 5, "checkpoint": 4, "lost": 1, "resumed_from": 4}  # fmt: skip
    first = make(exp.parent.parent, "rsl_rl", "cartpole_direct", "2026-01-01_00-00-00", status="failed",
                 restarts=[restart], attempts=[restart, {**restart, "number": 1}])  # fmt: skip
    second = make(exp.parent.parent, "rsl_rl", "cartpole_direct", "2026-01-02_00-00-00", status="interrupted",
                  continues=str(first.resolve()))  # fmt: skip
    third = make(exp.parent.parent, "rsl_rl", "cartpole_direct", "2026-01-03_00-00-00", status="finished",
                 continues=str(second.resolve()), start_iteration=8, end_iteration=12)  # fmt: skip
    rows = {r.folder: r for r in find_runs(tmp_path / "logs")}
    assert rows[str(third)].chain == (str(first.resolve()), str(second.resolve()))
    assert rows[str(third)].continues == str(second.resolve()) and rows[str(third)].continued_in is None
    assert rows[str(second)].chain == (str(first.resolve()),) and rows[str(second)].continued_in == str(third)
    assert (rows[str(first)].chain, rows[str(first)].continued_in, rows[str(first)].restarts) == (
        (), str(second), 1)  # fmt: skip
    # only the newest listed: its chain still goes back to the first folder
    assert find_runs(tmp_path / "logs", limit=1)[0].chain == rows[str(third)].chain
    assert main(["runs", str(tmp_path / "logs")]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if "logs" in line}
    assert "finished (continues 2026-01-02_00-00-00)" in lines[str(third)]
    assert "(continues 2026-01-01_00-00-00; continued in 2026-01-03_00-00-00)" in lines[str(second)]
    assert "failed (1 restart; continued in 2026-01-02_00-00-00)" in lines[str(first)]
    assert main(["runs", str(tmp_path / "logs"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    newest = shown[0]  # newest first
    assert (newest["continues"], newest["chain"]) == (str(second.resolve()), list(rows[str(third)].chain))


def test_a_chain_that_loops_or_leaves_the_disk_ends(tmp_path):
    a = make(tmp_path, "skrl", "x", "2026-01-01_00-00-00", status="finished")
    b = make(tmp_path, "skrl", "x", "2026-01-02_00-00-00", status="finished", continues=str(a.resolve()))
    write_json(a / "summary.json", {"status": "finished", "continues": str(b.resolve())})  # a loop
    gone = make(tmp_path, "skrl", "x", "2026-01-03_00-00-00", continues=str(tmp_path / "deleted"))
    rows = {r.folder: r for r in find_runs(tmp_path)}
    assert rows[str(b)].chain == (str(b.resolve()), str(a.resolve()))  # each folder once, then it stops
    assert rows[str(gone)].chain == (str(tmp_path / "deleted"),)
