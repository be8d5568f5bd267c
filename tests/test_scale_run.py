"""``mgpu scale`` for real on CPU ranks: each point a real ``mgpu train``; the table, the JSON and
the picture read back; a point that cannot measure is a row; Ctrl-C keeps what was measured."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from training_helpers import BACKENDS, child_env

from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.launcher import runs, scale

pytestmark = pytest.mark.slow

#: Tiny points: 16 envs, episodes cut at one rollout (every iteration ends some), 4 iterations.
TINY = ("--num_envs", "16", "--iterations", "4", "env.episode_length=16")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _scale(tmp: Path, backend: str, *args: str, out: bool = True) -> subprocess.CompletedProcess:
    """``mgpu scale`` in ``tmp``, into ``tmp/out`` (``out`` False: its default, under ``tmp/logs``)."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "scale", "--device", "cpu", *BACKENDS[backend]]
    argv += [*(["--out", str(tmp / "out")] if out else []), *args]
    return subprocess.run(argv, cwd=tmp, env=child_env(tmp), capture_output=True, text=True, timeout=400)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, data[:8]
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize(("backend", "ceiling"), [("rsl_rl", True), ("skrl_jax", False)])
def test_a_two_point_sweep_prints_the_table_and_writes_json_and_png(tmp_path, backend, ceiling):
    """The sweep is mgpu's: its points are runs read through their ledgers, whatever the library. Two
    back-ends cover its launch paths: rsl-rl under torchrun (with the ceiling points), skrl JAX under
    mgpu's JAX launcher (without). skrl torch launches as rsl-rl does (torchrun), and its rank's
    figures in summary.json are checked by tests/test_training.py, so it runs no sweep of its own."""
    extra = () if ceiling else ("--no_ceiling",)
    done = _scale(
        tmp_path, backend, "--world_sizes", "1,2", *TINY, "--target_reward", "-1000", *extra, out=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "env-steps/s" in done.stdout and "speedup" in done.stdout
    assert "2 ranks × 16 envs: " in done.stdout and "% efficient" in done.stdout
    (out,) = (tmp_path / "logs" / "scale").iterdir()  # the default output folder, <log root>/scale/<stamp>
    doc = json.loads((out / "scale.json").read_text())
    assert doc["complete"] is True and doc["device"] == "cpu" and doc["world_sizes"] == [1, 2]
    assert doc["ceiling"] is ceiling and doc["machine"]["cpus"] >= 1
    kinds = [(p["point"]["world_size"], p["point"]["ceiling"]) for p in doc["points"]]
    assert kinds == [(1, False), (2, False), *([(2, True)] if ceiling else [])]
    for p in doc["points"]:
        assert p["status"] == "ok", p
        assert p["env_steps_per_s"] > 0 and p["s_per_iteration"] > 0, p
        assert p["num_envs_per_rank"] == 16 and p["measured_iterations"] >= 2, p
        assert len(p["run_dirs"]) == (2 if p["point"]["ceiling"] else 1)
        assert all(Path(f).parent.parent.parent == out / "logs" for f in p["run_dirs"]), p  # under the sweep
        if not p["point"]["ceiling"]:
            # The point's figures are its own mgpu train's record, the fold of its ledger.
            (folder,) = p["run_dirs"]
            s = json.loads(Path(folder, "summary.json").read_text())
            assert s == ev.summary_of(ev.read(Path(folder)).events).to_json()
            steady = s["steady"]
            assert (p["env_steps_per_s"], p["s_per_iteration"]) == (
                steady["env_steps_per_s"],
                steady["s_per_iteration"],
            )
            assert (
                p["env_steps_per_s_iqr"] == steady["env_steps_per_s_iqr"]
                and p["warmup_s"] == steady["warmup_s"]
            )
            assert p["measured_iterations"] == s["iterations"] - steady["warmup_iterations"]
            lo, hi = p["env_steps_per_s_iqr"]
            assert 0 < lo <= hi
            assert p["time_to_target_s"] > 0 and p["target_iteration"] >= 1  # any reward passes -1000
    # The points are the sweep's, not runs of the log root's table; the sweep's folder lists them.
    assert runs.find_runs(tmp_path / "logs") == []
    listed = {r.folder for r in runs.find_runs(out / "logs")}
    assert listed == {f for p in doc["points"] for f in p["run_dirs"]}
    one, two = doc["rows"]
    assert one["speedup"] == 1.0 and one["efficiency"] == 1.0
    assert two["speedup"] > 0 and two["efficiency"] == pytest.approx(two["speedup"] / 2)
    (verdict,) = doc["verdicts"]  # one environment count: one answer, as data and as the last line
    assert verdict["num_envs"] == 16 and verdict["world_size_judged"] == 2
    assert verdict["ranks"] == (2 if two["efficiency"] >= scale.WORTH_IT and two["speedup"] > 1 else 1)
    assert done.stdout.count("verdict: ") == 1
    if ceiling:
        assert two["ceiling_speedup"] > 0 and two["vs_ceiling"] > 0
        assert "ceiling" in done.stdout
    else:
        assert two["vs_ceiling"] is None
    width, height = _png_size(out / "scale.png")
    assert width >= 600 and height >= 300
    assert (out / "scale.png").stat().st_size > 10_000
    assert str(out / "scale.json") in done.stdout


def test_a_point_that_cannot_finish_is_a_row_and_the_sweep_goes_on(tmp_path):
    # 1 s per point: each is stopped during its start-up, as a point that hangs would be.
    done = _scale(tmp_path, "rsl_rl", "--world_sizes", "1,2", *TINY, "--no_ceiling", "--point_timeout", "1")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "2 of 2 scale point(s) did not measure" in done.stderr
    doc = json.loads((tmp_path / "out" / "scale.json").read_text())
    assert [p["status"] for p in doc["points"]] == ["timed out", "timed out"]  # both were tried
    assert doc["complete"] is True and not (tmp_path / "out" / "scale.png").exists()


def test_ctrl_c_keeps_the_measured_points_and_exits_130(tmp_path):
    argv = [sys.executable, "-m", "isaaclab_mgpu", "scale", "--device", "cpu", *BACKENDS["rsl_rl"]]
    argv += ["--out", str(tmp_path / "out"), "--world_sizes", "1,2", *TINY]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=child_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "scale point 2/3:" in line:  # the first point is measured, the second has started
            break
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + err
    doc = json.loads((tmp_path / "out" / "scale.json").read_text())
    assert doc["complete"] is False
    statuses = [p["status"] for p in doc["points"]]
    assert statuses[0] == "ok" and doc["points"][0]["env_steps_per_s"] > 0
    assert statuses[1:] == ["interrupted", "not run"], statuses
    assert (tmp_path / "out" / "scale.png").read_bytes()[:8] == PNG_SIGNATURE  # the one measured point
    assert "env-steps/s" in out
