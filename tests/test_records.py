"""The one typed-record reader and writer (contract/records.py), and every record that goes through it."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest

from isaaclab_mgpu.contract import probe_channel, progress, records, resume
from isaaclab_mgpu.contract.env import PROGRESS_DIR
from isaaclab_mgpu.contract.records import ROW, Count, Older, OneOf, Range
from isaaclab_mgpu.launcher.peers import NodeReport, PeerRank


@dataclass(frozen=True)
class Point:
    x: Count
    y: float = 0.0


def _old_point(value: Any) -> Any:
    return {"x": value} if isinstance(value, int) else value


@dataclass(frozen=True)
class Shape:
    name: str
    kind: Annotated[str, OneOf(("square", "circle"))] | None = None
    sides: Annotated[int, Range(0, 12)] | None = None
    ratio: float | None = None
    closed: bool = False
    centre: Annotated[Point, Older(_old_point)] | None = None
    corners: tuple[Annotated[Point, ROW], ...] = ()
    weights: tuple[float | None, ...] = ()
    tags: tuple[str, ...] = ()
    notes: Mapping[str, Any] = field(default_factory=dict)
    owner: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    invalid: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("sides", "5", "not an integer"),
        ("sides", True, "not an integer"),  # true is no number
        ("sides", 13, "above 12"),
        ("sides", -1, "below 0"),
        ("ratio", math.nan, "not a finite number"),
        ("ratio", math.inf, "not a finite number"),
        ("ratio", "1.5", "not a number"),
        ("closed", "false", "not true or false"),
        ("kind", "triangle", "not one of square, circle"),
        ("kind", 3, "not a string"),
        ("tags", "a,b", "not a list"),
        ("tags", ["a", 1], "not a string"),
        ("notes", [1], "not an object"),
        ("centre", {"x": -1}, "below 0"),
        ("centre", {"y": 1.0}, "'centre.x' is missing"),
        ("corners", [{"x": 1}, [2, "y"]], "'corners[1].y' is \"y\", not a number"),
    ],
)
def test_a_bad_field_reads_as_its_default_and_is_named_with_why(key, value, why):
    reading = records.read(Shape, {"name": "s", key: value})
    shape = reading.record
    assert getattr(shape, key) == getattr(Shape("s"), key)
    assert shape.invalid == reading.invalid == (key,)
    assert len(reading.problems) == 1 and why in reading.problems[0], reading.problems
    assert reading.whole() is None


def test_good_values_read_with_their_types_and_older_shapes_are_upgraded():
    data = {
        "name": "s",
        "kind": "square",
        "sides": 4,
        "ratio": 2,  # an integer reads as a float
        "closed": True,
        "centre": 3,  # an older writer's bare x
        "corners": [[0, 0.5], [1], {"x": 2, "y": 1}],  # rows, an older shorter row, an object
        "weights": [1.0, "x", None, math.nan],  # one bad weight keeps the others
        "tags": ["a"],
        "notes": {"k": [1]},
        "owner": None,
    }
    shape = records.read(Shape, data).whole()
    assert shape == Shape(
        name="s",
        kind="square",
        sides=4,
        ratio=2.0,
        closed=True,
        centre=Point(3),
        corners=(Point(0, 0.5), Point(1), Point(2, 1.0)),
        weights=(1.0, None, None, None),
        tags=("a",),
        notes={"k": [1]},
    )
    assert isinstance(shape.ratio, float)


def test_null_and_missing_fields_take_their_defaults_and_a_required_one_leaves_no_record():
    assert records.read(Shape, {"name": "s", "sides": None, "closed": None}).whole() == Shape("s")
    for data in ({}, {"name": None}, {"name": 5}, [1, 2], "text"):
        reading = records.read(Shape, data)
        assert reading.record is None and reading.problems, data
    with pytest.raises(records.RecordError, match="'name' is missing"):
        records.strict(Shape, {"sides": 3})
    with pytest.raises(records.RecordError, match="'sides' is 99, above 12"):
        records.strict(Shape, {"name": "s", "sides": 99})


@dataclass(frozen=True)
class Pin:
    label: str | None  # no default: absent or bad, it reads as None


def test_a_field_that_may_be_none_needs_no_default():
    assert records.read(Pin, {}).whole() == Pin(None)
    reading = records.read(Pin, {"label": 5})
    assert reading.record == Pin(None) and reading.invalid == ("label",)


def test_unknown_keys_are_kept_and_written_back_and_invalid_is_never_written():
    text = '{"name": "s", "sides": "x", "newer": {"a": [1, 2]}, "corners": [[1, 2.0, "later column"]]}'
    shape = records.read(Shape, json.loads(text)).record
    assert shape.extra == {"newer": {"a": [1, 2]}} and shape.invalid == ("sides",)
    assert shape.corners == (Point(1, 2.0),)  # a column a newer writer added is ignored
    out = records.plain(shape)
    assert out["newer"] == {"a": [1, 2]} and "invalid" not in out and "extra" not in out
    assert out["corners"] == [[1, 2.0]] and out["centre"] is None
    assert next(iter(out)) == "newer"  # kept keys first, then the fields in order


def test_non_finite_numbers_are_written_as_null():
    shape = Shape("s", ratio=math.inf, weights=(math.nan, 1.0), notes={"n": math.nan})
    text = json.dumps(records.plain(shape), allow_nan=False)  # strict JSON, or this raises
    back = records.read(Shape, json.loads(text)).whole()
    assert (back.ratio, back.weights, back.notes) == (None, (None, 1.0), {"n": None})


def test_an_annotation_the_reader_does_not_know_fails_loudly():
    @dataclass
    class Odd:
        pair: tuple[int, str]

    with pytest.raises(TypeError, match="tuple"):
        records.read(Odd, {"pair": [1, "a"]})


# --- the records of the contract --------------------------------------------------------------


def test_a_progress_report_written_by_the_reporter_reads_whole_with_nothing_unknown(tmp_path):
    reporter = progress.Reporter({PROGRESS_DIR: str(tmp_path), "RANK": "2", "LOCAL_RANK": "0"})
    for it in range(1, 6):
        reporter.iteration(it)
        reporter.waited(0.001)
        reporter.beat("update")
    data = json.loads(progress.progress_path(tmp_path, 2).read_text())
    reading = records.read(progress.Report, data)
    assert reading.whole() is not None and not reading.extra, reading  # the hand-built text is Report's
    rep = reading.record
    assert (rep.rank, rep.pid, rep.stage, rep.iteration, rep.warmup) == (2, os.getpid(), "update", 5, False)
    assert rep.timed == 3 and rep.collectives == 3 and rep.wait_s > 0 and rep.busy_s >= 0


def test_a_probe_rank_reports_through_the_same_channel(tmp_path):
    channel = progress.Channel(progress.progress_path(tmp_path, 1))
    assert channel.open()
    channel.identify(1, 1, str(tmp_path / "stack.1.txt"))
    channel.report("collective", index=3, size=64, mode="in-place", phase="timed")
    reports = progress.Reports(tmp_path)
    beat = reports.read()[1]
    assert (beat.pid, beat.stack_file) == (os.getpid(), str(tmp_path / "stack.1.txt"))
    assert probe_channel.describe(beat) == "collective 3 at 64 B (in-place, timed)"
    channel.report("done")  # a shorter record over a longer one: the padding keeps it one object
    assert reports.read()[1].stage == "done" and reports.read()[1].index is None
    assert probe_channel.order(reports.last[1]) > probe_channel.order(beat)


def test_a_malformed_progress_file_is_named_once_and_a_torn_one_keeps_the_last_report(tmp_path):
    channel = progress.Channel(progress.progress_path(tmp_path, 0))
    channel.open()
    channel.identify(0, 0, None)
    channel.report("update", iteration=4)
    (tmp_path / "progress.5.json").write_text('{"rank": 5, "pid": "x", "stage": "update", "time": 1.0}')
    reports = progress.Reports(tmp_path)
    assert set(reports.read()) == {0}
    ((path, why),) = reports.rejected()
    assert path.endswith("progress.5.json") and why == "'pid' is \"x\", not an integer"
    progress.progress_path(tmp_path, 0).write_text('{"rank": 0, "stage": "upd')  # caught mid-write
    assert reports.read()[0].iteration == 4 and reports.rejected() == []


def test_checkpoint_metadata_with_one_bad_field_is_not_trusted(tmp_path):
    checkpoint = tmp_path / "model_3.pt"
    meta = resume.CheckpointMeta(3, "rsl_rl", "torch", "cartpole", 2, 10)
    resume.write_meta(checkpoint, meta)
    assert json.loads(resume.meta_path(checkpoint).read_text()) == {
        "iteration": 3, "library": "rsl_rl", "framework": "torch", "task": "cartpole",
        "world_size": 2, "total": 10, "format": resume.FORMAT,
    }  # fmt: skip
    assert resume.read_meta(checkpoint) == meta
    for bad in (
        {"iteration": "3"},
        {"world_size": 0},
        {"total": True},
        {"task": None},
        {"format": "other/1"},
    ):
        data = {**records.plain(meta), **bad}
        resume.meta_path(checkpoint).write_text(json.dumps(data))
        assert resume.read_meta(checkpoint) is None, bad


def test_node_reports_are_compact_rows_and_a_bad_row_is_no_report():
    r = NodeReport(0, "node0", 3, (PeerRank(1, "update", 4, 2.5, "running", 7, 0.5),), ended=True)
    text = r.dumps()
    assert text == (
        '{"node_rank":0,"host":"node0","seq":3,"ranks":[[1,"update",4,2.5,"running",7,0.5]],'
        '"verdict":null,"ended":true,"run_dir":null,"alive_port":null}'
    )  # the earlier writer's bytes, then the field added since (last: an older reader skips a key
    # it does not know), so older mgpus on other nodes read it
    assert NodeReport.loads(text) == r
    assert NodeReport.loads(text.replace(',"alive_port":null', "")) == r  # and an older node's row here
    assert NodeReport.loads(text.replace('"update"', "5")) is None  # a rank's stage is text or null
    assert NodeReport.loads(text.replace('"verdict":null', '"verdict":7')).verdict is None
