"""The run ledger (``events.jsonl``): its schema, reader and writer, and the events real runs leave."""

from __future__ import annotations

import json
import os

from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract.layout import EVENTS


def _write(folder, *events):
    appender = ev.Appender(folder / EVENTS)
    for e in events:
        assert appender.append(e)
    appender.close()


def test_every_event_reads_back_as_written(tmp_path):
    written = [
        ev.Launched(time=1.0, host="n0", argv=("mgpu", "train"), essentials={"total": 6}, job_id="42"),
        ev.AttemptStarted(time=2.0, host="n0", attempt=0, world_size=2, local_ranks=(0, 1), resumes_at=0),
        ev.RanksUp(time=2.5, host="n0", attempt=0, pids={"0": 11, "1": 12}, logs="/l"),
        ev.Progress(
            time=3.0,
            host="n0",
            attempt=0,
            iteration=3,
            s_per_iteration=0.5,
            ranks=(ev.RankPace(0, 0.4, 0.1), ev.RankPace(1, 0.3, 0.2)),
        ),
        ev.Checkpoint(time=3.1, host="n0", attempt=0, iteration=2, path="/r/model_2.pt", bytes=100),
        ev.StragglerNamed(time=3.2, host="n0", attempt=0, rank=1, slower=1.8),
        ev.Fault(
            time=4.0,
            host="n0",
            attempt=0,
            rank=1,
            signal="SIGKILL",
            reason="signal SIGKILL",
            iteration=4,
            checkpoint=2,
            lost=2,
        ),
        ev.Restart(time=4.1, host="n0", attempt=1, from_iteration=2, lost=2, restarts_left=0),
        ev.Finished(time=9.0, host="n0", attempt=1, iteration=6, seconds=8.0),
    ]
    _write(tmp_path, *written)
    ledger = ev.read(tmp_path)
    assert ledger is not None and ledger.skipped == 0
    assert list(ledger.events) == written
    first = json.loads((tmp_path / EVENTS).read_text().splitlines()[0])
    assert (first["v"], first["kind"]) == (ev.VERSION, "launched")


def test_torn_last_line_unknown_kinds_and_newer_versions_are_skipped(tmp_path):
    _write(tmp_path, ev.Launched(time=1.0, essentials={"total": 6}))
    with open(tmp_path / EVENTS, "a") as f:
        f.write(json.dumps({"v": 1, "kind": "teleported", "time": 2.0}) + "\n")  # a kind we do not know
        f.write(json.dumps({"v": ev.VERSION + 1, "kind": "finished", "time": 3.0}) + "\n")  # newer schema
        f.write(json.dumps({"v": 1, "kind": "finished", "time": "soon"}) + "\n")  # a field that does not read
        f.write(json.dumps({"v": 1, "kind": "progress", "time": 4.0, "iteration": 2, "new": 1}) + "\n")
        f.write('{"v": 1, "kind": "finished", "ti')  # the writer killed mid-line
    ledger = ev.read(tmp_path)
    assert ledger is not None
    assert [e.kind for e in ledger.events] == ["launched", "progress"]
    assert ledger.skipped == 4
    assert ev.fold(ledger.events).status == "running"  # the torn "finished" did not count


def test_no_ledger_reads_as_none(tmp_path):
    assert ev.read(tmp_path) is None


def test_one_write_per_event_on_an_append_fd(tmp_path, monkeypatch):
    writes = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real(fd, data))
    _write(tmp_path, ev.Finished(time=1.0, iteration=3), ev.Failed(time=2.0, exit_code=1, reason="x"))
    assert [w.count(b"\n") for w in writes] == [1, 1] and all(w.endswith(b"\n") for w in writes)
    # Appending: a second writer object (a requeued job's mgpu) adds after the first's lines.
    _write(tmp_path, ev.Launched(time=3.0))
    assert [e.kind for e in ev.read(tmp_path).events] == ["finished", "failed", "launched"]


def test_fold_counts_restarts_requeues_and_the_end():
    t = iter(range(100))
    story = [
        ev.Launched(time=next(t), essentials={"total": 150, "world_size": 2}),
        ev.AttemptStarted(time=next(t), attempt=0, world_size=2),
        ev.Progress(time=next(t), attempt=0, iteration=20),
        ev.Fault(time=next(t), attempt=0, rank=1, reason="SIGKILL", iteration=22, checkpoint=20, lost=2),
        ev.Restart(time=next(t), attempt=1, from_iteration=20, lost=2),
        ev.AttemptStarted(time=next(t), attempt=1, world_size=2),
        ev.Requeue(time=next(t), attempt=1, iteration=34, requeued=True, job_id="7"),
    ]
    f = ev.fold(story)
    assert (f.status, f.iteration, f.total, f.restarts, f.requeues, f.lost) == ("requeued", 34, 150, 1, 1, 2)
    story += [
        ev.Launched(time=next(t), essentials={"total": 150}, job_id="7", continued_from=34),
        ev.AttemptStarted(time=next(t), attempt=0),
        ev.Stall(time=next(t), attempt=0, verdict="rank 0 stalled", ranks=(0,)),
        ev.Fault(time=next(t), attempt=0, outcome="hung", rank=0, iteration=40),
        ev.Failed(time=next(t), exit_code=4, reason="hang", iteration=40),
    ]
    f = ev.fold(story)
    assert (f.status, f.exit_code, f.launches, f.attempts, len(f.faults)) == ("hung", 4, 2, 3, 2)
    f = ev.fold([*story, ev.Launched(time=99), ev.Finished(time=100, iteration=150)])
    assert (f.status, f.iteration, f.exit_code, f.requeues, f.restarts) == ("finished", 150, 0, 1, 1)
