"""probe-nccl end to end on CPU ranks with gloo: real torchrun launches, real process groups,
real signals. Small sizes, few iterations, short timeouts."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from isaaclab_mgpu import cli
from isaaclab_mgpu.contract import probe_channel as channel
from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.launcher.probe import run as notes
from isaaclab_mgpu.launcher.probe.bisect import find_workarounds
from isaaclab_mgpu.launcher.probe.config import ProbeOptions, parse_sizes
from isaaclab_mgpu.launcher.probe.results import bus_factor
from isaaclab_mgpu.launcher.probe.run import Prober, plan_probe, probe_nccl
from isaaclab_mgpu.launcher.resolve import probe_machine
from isaaclab_mgpu.launcher.spec import LaunchSpec
from isaaclab_mgpu.launcher.workarounds import Candidate

pytestmark = pytest.mark.slow

STANDINS = str(Path(__file__).parent / "probe_standins")


class Recorder:
    """A sink for the probe's notes that remembers what it was told."""

    def __init__(self):
        self.events = []

    def __call__(self, n):
        match n:
            case notes.LaunchBegun():
                self.events.append(("begin", n.label))
            case notes.LaunchAt():
                self.events.append(("update", n.label, n.text))
            case notes.LaunchEnded():
                self.events.append(("end", n.result.label, n.result.status))
            case notes.TrialDone():
                t = n.trial
                self.events.append(("trial", t.candidate.assignment, t.status, t.without))
            case notes.WorkaroundsApplied():
                self.events.append(("applied", dict(n.env)))


def _standin_env():
    return {"PYTHONPATH": os.pathsep.join(filter(None, [STANDINS, os.environ.get("PYTHONPATH")]))}


def test_world_sizes_1_and_2_pass_and_busbw_follows_the_formula(tmp_path, capsys):
    args = ["probe-nccl", "--device", "cpu", "--sizes", "8:4K", "--iters", "3", "--warmup", "1"]
    code = cli.main([*args, "--timeout", "120", "--json", "--log_dir", str(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["verdict"] == (
        "communication OK at world sizes 1,2 — a hang in training is in the task or launch"
    )
    assert [w["world_size"] for w in report["world_sizes"]] == [1, 2]
    for world in report["world_sizes"]:
        n = world["world_size"]
        assert world["status"] == "ok" and world["survivors"] == []
        assert world["init_s"] is not None and world["init_s"] >= 0
        assert [row["bytes"] for row in world["sizes"]] == list(parse_sizes("8:4K"))
        per_rank = channel.read_results(Path(world["folder"]))
        assert sorted(per_rank) == list(range(n))
        for i, row in enumerate(world["sizes"]):
            assert row["count"] == row["bytes"] // 4 and row["type"] == "float32"
            for mode, key in (("out-of-place", "out_of_place"), ("in-place", "in_place")):
                m = row[key]
                assert m["wrong"] == 0
                assert m["time_s"] == max(r["sizes"][i][mode]["time_s"] for r in per_rank.values())
                assert m["algbw"] == pytest.approx(row["bytes"] / m["time_s"] / 1e9)
                assert m["busbw"] == pytest.approx(m["algbw"] * bus_factor(n))
                assert m["busbw"] == pytest.approx(m["algbw"] * 2 * (n - 1) / n)
        if n == 2:
            assert all(row["out_of_place"]["busbw"] > 0 for row in world["sizes"])


def test_a_wrong_result_is_detected(tmp_path):
    spec = LaunchSpec(device="cpu", log_dir=str(tmp_path))
    opts = ProbeOptions(world_sizes=(2,), sizes=parse_sizes("4:64"), iters=2, warmup=1, timeout=120)
    summary = probe_nccl(spec, opts, Recorder(), module="faulty_probe_worker", extra_env=_standin_env())
    (world,) = summary.world
    assert world.status == "wrong-result"
    assert summary.exit_code == 3
    wrong = {row.bytes: (row.out_of_place.wrong, row.in_place.wrong) for row in world.sizes}
    # The stand-in corrupts element 3 on rank 1 of every message of at least 4 elements.
    assert wrong == {4: (0, 0), 8: (0, 0), 16: (1, 1), 32: (1, 1), 64: (1, 1)}


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory) -> float:
    """Seconds a 2-rank probe launch takes here and now, start to finish, with one tiny message:
    torchrun's and the ranks' start-up (imports, rendezvous) and teardown. The hang tests' timeouts
    and bounds are measured against it, not fixed: under load `import torch` alone can take 15 s."""
    spec = LaunchSpec(device="cpu", log_dir=str(tmp_path_factory.mktemp("startup")))
    opts = ProbeOptions(world_sizes=(2,), sizes=parse_sizes("8"), iters=1, warmup=0, timeout=600)
    (world,) = probe_nccl(spec, opts, Recorder()).world
    assert world.status == "ok", world
    return world.elapsed_s


def _hang_run(tmp_path, timeout, act, grace=60):
    """Run probe-nccl on 2 CPU ranks with a long message loop; call ``act(beat)`` once rank 1 is
    in its timed loop. Returns (returncode, stdout, stderr, seconds from act to exit, every PID seen,
    seconds from launch to act)."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "probe-nccl", "--device", "cpu", "--world-size", "2"]
    argv += ["--sizes", "256K", "--iters", "1000000", "--warmup", "0", "--timeout", str(timeout)]
    argv += ["--json", "--log_dir", str(tmp_path)]
    launched_at = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, psutil.Process] = {}
    acted_at = None
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + timeout + grace
        while proc.poll() is None and time.monotonic() < deadline:
            for p in parent.children(recursive=True):
                seen.setdefault(p.pid, p)
            if acted_at is None:
                beats = {}
                for folder in tmp_path.glob("probe-*/ws2"):
                    beats = progress.Reports(folder).read()
                beat = beats.get(1)
                if beat is not None and beat.stage == "collective" and beat.phase == "timed":
                    act(proc, beat)
                    acted_at = time.monotonic()
            time.sleep(0.05)
        out, err = proc.communicate(timeout=30)
        after = time.monotonic() - acted_at if acted_at else None
    finally:
        if proc.poll() is None:
            proc.kill()
    assert acted_at is not None, f"rank 1 never reached the timed loop:\n{err}"
    return proc.returncode, out, err, after, seen, acted_at - launched_at


def test_a_stopped_rank_is_reported_as_a_hang_and_nothing_survives(tmp_path, startup_s):
    # --timeout counts from the launch: the ranks must get through their start-up first, three
    # times as slow as just measured, and still have time to run.
    timeout = round(10 + 3 * startup_s)
    stopped = []

    def stop_rank(_proc, beat):
        os.kill(beat.pid, signal.SIGSTOP)
        stopped.append(beat.pid)

    code, out, err, reported_after, seen, acted_s = _hang_run(tmp_path, timeout, stop_rank)
    report = json.loads(out)
    (world,) = report["world_sizes"]
    assert code == 4 and world["status"] == "hang", err
    assert report["verdict"].startswith("hang at world size 2 — communication problem")
    hung = {h["rank"]: h for h in world["hung"]}
    assert hung[1]["pid"] == stopped[0]
    assert hung[1]["state"] == "stopped"
    assert hung[1]["stage"].startswith("collective 0 at 256 KiB")
    assert hung[1]["stack"] and "measure" in hung[1]["stack"]  # faulthandler's dump of the rank
    # Reported once the timeout ran out (counted from the launch), plus the stacks' wait and a
    # teardown, which take as long as a launch's own start-up and teardown here, at most.
    assert reported_after >= timeout - acted_s - 1
    assert reported_after <= timeout - acted_s + 10 + startup_s
    assert stopped[0] in seen
    assert [p.pid for p in seen.values() if _alive(p)] == [] and world["survivors"] == []


def test_ctrl_c_stops_the_probe_with_130_and_nothing_survives(tmp_path, startup_s):
    code, out, err, after, seen, _ = _hang_run(
        tmp_path, round(60 + 3 * startup_s), lambda proc, _beat: proc.send_signal(signal.SIGINT)
    )
    assert code == 130, err
    assert "probe-nccl interrupted" in err and out == ""
    assert after < 10 + startup_s  # a teardown, not the timeout
    assert [p.pid for p in seen.values() if _alive(p)] == []


def _alive(p):
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_workaround_search_runs_real_launches(tmp_path):
    """A stand-in worker that only works with NCCL_SHM_DISABLE=1, searched end to end on gloo."""
    spec = LaunchSpec(device="cpu", log_dir=str(tmp_path))
    opts = ProbeOptions(world_sizes=(1,), sizes=(8,), iters=1, warmup=0, timeout=120)
    plan = plan_probe(spec, opts, probe_machine())
    rec = Recorder()
    prober = Prober(
        spec, opts, plan, tmp_path / "probe", rec, base_env=_standin_env(), module="picky_probe_worker"
    )
    candidates = [Candidate("NCCL_P2P_DISABLE", "1", "x"), Candidate("NCCL_SHM_DISABLE", "1", "y")]
    search = find_workarounds(lambda env: prober.run(plan.world[0], env).status, candidates)
    assert search.baseline == "error"
    assert [(t.status, t.without) for t in search.trials] == [("error", None), ("ok", "error")]
    assert search.confirmed == (candidates[1],)
    runs = sorted(p.name for p in (tmp_path / "probe").iterdir())
    assert runs == ["ws1", "ws1-2", "ws1-3", "ws1-4"]  # every run kept its own files
