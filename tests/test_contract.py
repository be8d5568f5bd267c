"""The contract both sides share: the typed summary, the atomic file write, the run layout."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from isaaclab_mgpu.contract import files, layout, resume, summary
from isaaclab_mgpu.contract.summary import Checksums, Rates, Summary
from isaaclab_mgpu.launcher.ledger import write_summary


def test_summary_round_trips_through_json(tmp_path):
    s = Summary(
        status="finished",
        world_size=2,
        backend="rsl_rl",
        mean_rewards=(1.0, None, 2.5),
        env_steps_per_s=Rates(total=10.0, per_rank=(4.0, 6.0)),
        checksums=Checksums(start=("a", "a"), end=("b", "b")),
        checksums_equal=True,
        extra={"written_by_a_newer_mgpu": [1, 2]},
    )
    path = write_summary(tmp_path, s)
    assert path == tmp_path / layout.SUMMARY
    data = json.loads(path.read_text())
    assert data["env_steps_per_s"] == {"total": 10.0, "per_rank": [4.0, 6.0]}
    assert data["written_by_a_newer_mgpu"] == [1, 2]
    assert "invalid" not in data and "extra" not in data
    assert summary.read(tmp_path) == s


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("iterations", "5"),
        ("iterations", True),
        ("iterations", -1),
        ("started_at", 1e300),
        ("started_at", "yesterday"),
        ("backend", ["a"]),
        ("checksums_equal", "false"),
        ("status", "exploded"),
        ("world_size", 0),
        ("env_steps_per_s", {"total": "fast"}),
        ("checksums", {"start": [1, 2]}),
        ("mean_rewards", "many"),
    ],
)
def test_a_field_of_the_wrong_type_reads_as_unknown(key, value):
    s = Summary.from_json({"backend": "skrl", key: value} if key != "backend" else {key: value})
    assert getattr(s, key) == getattr(Summary(), key)  # unknown: the field's default
    assert s.invalid == (key,)


def test_non_finite_numbers_are_unknown_and_never_written(tmp_path):
    s = Summary.from_json({"started_at": math.nan, "s_per_iteration": math.inf})
    assert (s.started_at, s.s_per_iteration) == (None, None)
    write_summary(tmp_path, Summary(s_per_iteration=math.nan, mean_rewards=(math.inf, 1.0)))
    text = (tmp_path / layout.SUMMARY).read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["mean_rewards"] == [None, 1.0]


def test_older_summaries_with_a_bare_rate_still_read():
    assert Summary.from_json({"env_steps_per_s": 123.0}).env_steps_per_s == Rates(total=123.0)


def test_whole_run_figures_sum_every_segment_and_leave_each_warmup_out(tmp_path):
    # Two stretches of one run: 0..4 (a 2 s compile, then 0.5 s iterations) and 4..8 after a restart.
    first = summary.segment(1000.0, 0, 4, 3.6, [2.0, 0.5, 0.5, 0.5], 100)
    second = summary.segment(2000.0, 4, 8, 3.2, [2.0, 0.4, 0.4, 0.4], 100)
    assert (first.steady_iterations, first.steady_s, first.steady_env_steps) == (3, 1.5, 300)
    s = summary.with_segment(summary.with_segment(Summary(), first), second)
    # A refresh of the same stretch replaces its record rather than adding one.
    again = summary.segment(2000.0, 4, 9, 3.6, [2.0, 0.4, 0.4, 0.4, 0.4], 100)
    s = summary.with_segment(s, again)
    assert [seg.started_at for seg in s.segments] == [1000.0, 2000.0]
    w = s.whole
    assert (w.segments, w.iterations_trained, w.train_time_s) == (2, 9, 7.2)
    # Steady time over steady iterations of both stretches, not a mean of their means.
    assert w.steady_s_per_iteration == pytest.approx(3.1 / 7, abs=1e-5)
    assert w.steady_env_steps_per_s == pytest.approx(700 / 3.1)
    write_summary(tmp_path, s)
    back = summary.read(tmp_path)
    assert back.segments == s.segments and back.whole == s.whole and not back.invalid


def test_atomic_write_never_follows_a_planted_name_and_leaves_nothing_behind(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    # The old code wrote to fixed names such as .summary.json.tmp<pid>: plant those.
    for name in (f".summary.json.tmp{os.getpid()}", "summary.tmp", f".summary.json.{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(victim)
    files.write_json(tmp_path / "summary.json", {"a": 1})
    assert victim.read_text() == "keep"
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": 1}
    with pytest.raises(ValueError), files.atomic_open(tmp_path / "summary.json") as f:
        f.write("half")
        raise ValueError("writer failed")
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": 1}
    left = sorted(p.name for p in tmp_path.iterdir() if not p.is_symlink())
    assert left == ["summary.json", "victim"]


def test_layout_names():
    assert str(layout.run_folder("logs", "skrl", "cartpole", "S", "r1")) == "logs/skrl/cartpole/S_r1"
    assert layout.rank_folder(layout.run_folder("l", "a", "b", "S", None), 3).name == "rank_3"
    assert resume.iteration_of(resume.checkpoint_path(Path("run"), 12)) == 12
    assert resume.iteration_of(Path("model_x.pt")) is None
