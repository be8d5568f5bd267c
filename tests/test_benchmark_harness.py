"""The benchmark harness refuses what may not be published (fake figures; nothing is timed)."""

from __future__ import annotations

import json

import pytest

from benchmarks import common
from benchmarks.common import Figure, Refused


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("MGPU_BENCH_RESULTS", str(tmp_path))
    return tmp_path


def _scaling(two_ranks: list[float], one_rank: list[float]) -> Figure:
    name = "fake, 2 ranks: env-steps/s"
    return Figure(name, "steps/s", two_ranks, "fake, 1 rank", one_rank, bounds=(None, 2.0))


def test_a_figure_beyond_its_physical_bound_is_refused_not_published(results):
    over = _scaling([243.0, 240.0, 250.0], [100.0, 99.0, 101.0])  # 2.43x from 2 ranks
    assert over.problems() == ["ratio 2.43x above its physical bound 2x"]
    with pytest.raises(Refused, match="above its physical bound 2x"):
        common.save("fake", [over])
    assert not (results / "fake.json").exists()
    kept = json.loads((results / "fake.rejected.json").read_text())
    assert kept["refused"] == ["fake, 2 ranks: env-steps/s: ratio 2.43x above its physical bound 2x"]
    assert "fake" not in common.write_markdown().read_text()


def test_too_few_samples_and_a_ratio_under_its_floor_are_refused():
    one = Figure("s/it", "s", [0.5], "alone", [0.6, 0.6, 0.6], bounds=(1.0, None))
    assert one.problems() == ["1 sample(s), fewer than 3", "ratio 0.833x below its physical bound 1x"]
    few_base = Figure("s/it", "s", [1.0, 1.1, 1.2], "alone", [1.0])
    assert few_base.problems() == ["1 baseline sample(s), fewer than 3"]
    timeout = Figure("verdict", "s", [10.1, 10.3, 10.2], "--stall_timeout", [10.0], reference=True)
    assert timeout.problems() == []


def test_a_figure_within_its_bounds_is_published_with_the_load_before_and_after(results):
    common.begin()
    (results / "fake.rejected.json").write_text("{}")  # from an earlier, refused run
    path = common.save("fake", [_scaling([180.0, 175.0, 190.0], [100.0, 98.0, 103.0])])
    data = json.loads(path.read_text())
    assert data["figures"][0]["ratio"] == pytest.approx(1.8)
    assert {"load_1min_at_start", "load_1min_at_end"} <= set(data["machine"])
    assert not (results / "fake.rejected.json").exists()
    assert "| fake, 2 ranks: env-steps/s |" in common.write_markdown().read_text()
