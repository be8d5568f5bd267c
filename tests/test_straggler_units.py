"""The busy/wait accounting, the straggler watch, the auto stall bound and their records, in process."""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import PROGRESS_DIR, STALL_TIMEOUT, STARTUP_TIMEOUT
from isaaclab_mgpu.contract.summary import Straggler, Summary
from isaaclab_mgpu.launcher import nvml, peers
from isaaclab_mgpu.launcher.supervise.stall import AutoBound, StallMonitor, StallOptions
from isaaclab_mgpu.launcher.supervise.straggler import RankTotals, StragglerWatch


def _reporter(tmp_path, rank=0):
    return progress.Reporter({PROGRESS_DIR: str(tmp_path), "RANK": str(rank)})


def _report(tmp_path, rank=0) -> dict:
    return json.loads(progress.progress_path(tmp_path, rank).read_text())


def test_the_report_carries_busy_and_wait_from_the_second_iteration_on(tmp_path):
    rep = _reporter(tmp_path)
    for it in range(1, 5):
        rep.beat("rollout", it)
        time.sleep(0.02)  # work
        rep.beat("update")
        rep.waited(0.01)  # as the timing patch adds a collective's seconds
        time.sleep(0.01)
        rep.beat("checkpoint")
        time.sleep(0.05)  # a save: neither busy nor waiting
    rep.beat("rollout", 5)
    data = _report(tmp_path)
    # Iteration 1 is start-up; 2, 3 and 4 are timed, each about 0.03 s without its save.
    assert data["timed"] == 3 and data["collectives"] == 3
    assert data["wait_s"] == pytest.approx(0.03, abs=1e-6)
    assert data["busy_s"] == pytest.approx(data["wall_s"] - data["wait_s"], abs=1e-5)
    assert 0.09 <= data["wall_s"] < 0.09 + 0.1, data  # the three saves (0.15 s) are not in it
    assert rep.totals()["timed"] == 3


def test_the_totals_move_only_when_an_iteration_begins(tmp_path):
    rep = _reporter(tmp_path)
    for it in (1, 2, 3):
        rep.beat("rollout", it)
    before = _report(tmp_path)
    rep.beat("update")
    rep.waited(5.0)  # within iteration 3: not in any report until iteration 4 begins
    assert {k: _report(tmp_path)[k] for k in ("timed", "wait_s")} == {
        k: before[k] for k in ("timed", "wait_s")
    }


def test_the_timing_patch_times_a_real_gloo_collective(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    from isaaclab_mgpu.rank.patches import timing

    rep = _reporter(tmp_path)
    monkeypatch.setattr(progress, "_reporter", rep)
    store = dist.HashStore()
    dist.init_process_group("gloo", rank=0, world_size=1, store=store)
    try:
        original = dist.all_reduce
        timing.install()
        timing.install()  # idempotent: one wrapper
        assert dist.all_reduce.__wrapped__ is original
        rep.beat("rollout", 1)
        for _ in range(4):
            dist.all_reduce(torch.ones(4))
            dist.broadcast(torch.ones(4), src=0)
        assert rep._calls_it == 8 and rep._wait_it > 0
        timing.uninstall()
        assert dist.all_reduce is original
    finally:
        dist.destroy_process_group()


def _totals(busy: dict[int, float], timed: int) -> dict[int, RankTotals]:
    return {r: RankTotals(r, timed, b * timed, iteration=timed + 1, host="h") for r, b in busy.items()}


def test_a_rank_slower_in_three_windows_in_a_row_is_named_once():
    watch = StragglerWatch(devices={0: "cpu", 1: "cpu"})
    found = []
    busy = {0: 0.0, 1: 0.0}
    for window in range(1, 12):
        # Healthy for three windows (1.2x: the noise measured here), then rank 1 at 2x.
        per = {0: 0.1, 1: 0.12} if window <= 3 else {0: 0.1, 1: 0.2}
        for _ in range(5):
            busy = {r: busy[r] + per[r] for r in busy}
        timed = window * 5
        got = watch.update({r: RankTotals(r, timed, busy[r], iteration=timed + 1, host="h") for r in busy})
        if got is not None:
            found.append((window, got))
    assert [w for w, _ in found] == [6]  # windows 4, 5, 6 were slow; named once
    s = found[0][1]
    assert (s.rank, s.device, s.slower) == (1, "cpu", pytest.approx(2.0, rel=1e-3))
    assert s.iterations == (26, 31) and s.others_busy_s == pytest.approx(0.1)
    assert watch.named == (s,)


def test_noise_or_one_slow_window_names_nobody():
    watch = StragglerWatch()
    busy = {0: 0.0, 1: 0.0}
    for window in range(1, 30):
        per = {0: 0.1, 1: 0.3 if window % 3 == 0 else 0.13}  # a slow window (a save) now and then
        busy = {r: busy[r] + 5 * per[r] for r in busy}
        assert watch.update({r: RankTotals(r, window * 5, busy[r]) for r in busy}) is None


def test_a_restarted_rank_begins_a_fresh_window():
    watch = StragglerWatch(windows=1)
    watch.update(_totals({0: 0.1, 1: 0.1}, 5))
    assert watch.update(_totals({0: 0.1, 1: 0.3}, 2)) is None  # counts went back: no comparison


def test_the_gpu_line_comes_from_nvml(monkeypatch):
    class Handle:
        pass

    fake = types.SimpleNamespace(
        NVMLError=RuntimeError,
        NVML_CLOCK_SM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: Handle() if i == 3 else None,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetClockInfo=lambda h, c: 1200,
        nvmlDeviceGetMaxClockInfo=lambda h, c: 1980,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x20 | 0x4,
        nvmlDeviceGetTemperature=lambda h, t: 87,
        nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 4,
        nvmlDeviceGetCurrPcieLinkWidth=lambda h: 8,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: 16,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    line = nvml.gpu_state("cuda:1", "2,3")  # the rank's cuda:1 is NVML's GPU 3
    assert line == (
        "NVIDIA H200, SM clock 1200/1980 MHz, throttle: software power cap, software thermal slowdown, "
        "87 °C, PCIe gen 4 x8 (max gen 5 x16)"
    )
    assert nvml.gpu_state("cpu", None) is None and nvml.gpu_state("cuda:5", "2,3") is None


def test_summary_keeps_timing_and_stragglers():
    timing = summaries.timing_of([(10, 2.0, 1.0), (10, 3.0, 0.0)])
    assert [r.busy_s for r in timing.per_rank] == [0.2, 0.3]
    assert timing.collective_share == pytest.approx((1 / 3 + 0) / 2, abs=1e-4)
    assert summaries.timing_of([(0, 0.0, 0.0), (0, 0.0, 0.0)]) is None
    s = Summary(timing=timing, stragglers=(Straggler(rank=1, host="h", slower=2.0, iterations=(3, 8)),))
    back = Summary.from_json(json.loads(json.dumps(s.to_json())))
    assert back.timing == timing and back.stragglers == s.stragglers and not back.invalid
    bad = Summary.from_json({"timing": {"per_rank": [{"rank": -1}]}, "stragglers": [{"rank": "x"}]})
    assert bad.timing is None and bad.stragglers == () and set(bad.invalid) == {"timing", "stragglers"}


def test_node_reports_carry_busy_totals_and_read_older_ones():
    rank = peers.PeerRank(3, "update", 9, 0.4, "running", timed=7, busy_s=1.25)
    report = peers.NodeReport(1, "node1", 5, (rank,))
    assert peers.NodeReport.loads(report.dumps()).ranks == (rank,)
    old = json.dumps({"node_rank": 1, "host": "n", "seq": 1, "ranks": [[3, "update", 9, 0.4, "running"]]})
    assert peers.NodeReport.loads(old).ranks[0].timed is None


def _steady_reports(tmp_path, seconds: float, iterations: int) -> list[progress.Reporter]:
    reporters = []
    for rank in (0, 1):
        rep = _reporter(tmp_path, rank)
        for it in range(1, iterations + 1):
            rep.beat("rollout", it)
            time.sleep(seconds)
        rep.beat("rollout", iterations + 1)
        reporters.append(rep)
    return reporters


def test_auto_bound_is_the_cap_until_steady_then_follows_the_iterations(tmp_path):
    monitor = StallMonitor(StallOptions(stall_timeout=900, auto=True), str(tmp_path), (0, 1))
    _steady_reports(tmp_path, 0.01, 2)  # one timed iteration each: not steady yet
    now = time.time()
    assert monitor.check(now=now + 100) is None and monitor.bound == 900 and monitor.bound_news() is None
    _steady_reports(tmp_path, 0.01, 5)
    assert monitor.check(now=time.time() + 10) is None
    assert monitor.bound == 30  # 20 x 0.01 s is under the floor
    news = monitor.bound_news()
    assert news is not None and news.startswith("30 s (20x the 0.01") and news.endswith("floor 30 s)")
    assert monitor.bound_news() is None  # said once
    stall = monitor.check(now=time.time() + 31)
    assert stall is not None and stall.timeout_s == 30


def test_auto_bound_holds_the_cap_while_a_rank_saves_and_counts_quiet_from_the_save(tmp_path):
    monitor = StallMonitor(StallOptions(stall_timeout=900, auto=True), str(tmp_path), (0, 1))
    rep0, _ = _steady_reports(tmp_path, 0.01, 5)
    rep0.beat("checkpoint")
    saving = time.time() + 200
    assert monitor.check(now=saving) is None  # a 200 s save: the cap holds
    rep0.beat("rollout", 7)  # the save ended (rank 0 reports again); rank 1 waited all along
    assert monitor.check(now=saving + 20) is None  # rank 1's quiet counts from the save's end
    assert monitor.check(now=saving + 31) is not None


def test_auto_cap_and_process_group_timeout():
    env = {STALL_TIMEOUT: "auto", STARTUP_TIMEOUT: "900"}
    assert progress.process_group_timeout(environ=env).total_seconds() == 960
    assert progress.process_group_timeout(environ={**env, STARTUP_TIMEOUT: "1800"}).total_seconds() == 1860
    assert progress.process_group_timeout(environ={**env, STARTUP_TIMEOUT: "0"}).total_seconds() == 960
    bound = AutoBound(cap=900)
    assert bound.bound() == 900 and "no steady iteration" in bound.describe()


def test_mgpu_runs_shows_the_collectives_share_and_the_stragglers(tmp_path):
    from isaaclab_mgpu.launcher import runs

    timing = summaries.timing_of([(10, 2.0, 1.0), (10, 2.0, 1.0)])
    s = Summary(status="finished", timing=timing, stragglers=(Straggler(rank=1),))
    r = runs.row(tmp_path, s)
    assert r.wait_share == pytest.approx(1 / 3, abs=1e-3) and r.stragglers == (1,)
    assert r.as_json()["wait_share"] == r.wait_share
