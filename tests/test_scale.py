"""``mgpu scale`` without training: bad input refused before anything starts, the plan's points and
their ``mgpu train`` lines, and the arithmetic of speedup, efficiency, the CPU ceiling and the time
to a reward."""

from __future__ import annotations

import pytest
from cli_helpers import run

from isaaclab_mgpu.cli import app
from isaaclab_mgpu.cli.validate import parse_command_line
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.summary import Steady, Summary
from isaaclab_mgpu.launcher import scale
from isaaclab_mgpu.launcher.scale import Point, PointResult
from isaaclab_mgpu.launcher.scale_options import ScaleOptions, parse_counts
from isaaclab_mgpu.launcher.spec import LaunchSpec

CPU = ("--device", "cpu")


def training_option(args: tuple[str, ...], name: str) -> str | None:
    """The last value a command line gives option ``--name`` (``--opt v`` or ``--opt=v``)."""
    value = None
    for i, arg in enumerate(args):
        flag, sep, rest = arg.partition("=")
        if flag == f"--{name}":
            value = rest if sep else (args[i + 1] if i + 1 < len(args) else "")
    return value


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--world_sizes", "1,x"), "--world_sizes '1,x'"),
        (("--world_sizes", "0,2"), "'0' is not a positive"),
        (("--world_sizes", "2,2"), "lists 2 twice"),
        (("--world_sizes", "1,,2"), "'' is not a positive"),
        (("--world_sizes", "１"), "is not a positive"),  # a full-width digit
        (("--num_envs", "-16"), "--num_envs '-16'"),
        (("--num_envs", "16,abc"), "'abc'"),
        (("--iterations", "2"), "--iterations 2"),
        (("--point_timeout", "-5"), "--point_timeout"),
        (("--num_gpus", "2"), "--world_sizes"),
        (("--max_iterations", "5"), "use --iterations"),
        (("--resume", "latest"), "starts afresh"),
        (("--script", "train.py"), "built-in worker"),
        (("--nnodes", "2", "--world_sizes", "1,2"), "cannot be split evenly over --nnodes 2"),
        (("--nnodes", "1:2"), "MIN:MAX"),
        (("--task", "cartpol"), "cartpol"),
        (("--num_envs", "16", "--seeed", "1"), "--seeed"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_starts(capsys, no_spawn, tmp_path, args, named):
    code, out, err = run(capsys, "scale", *CPU, "--out", str(tmp_path / "out"), *args)
    assert code == 2, (out, err)
    assert named in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_more_ranks_than_gpus_is_refused_before_anything_starts(capsys, no_spawn, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    code, _, err = run(capsys, "scale", "--world_sizes", "1,2", "--out", str(tmp_path / "out"))
    assert code == 2, err
    assert "--world_sizes 1,2: 2 rank(s) per node need as many GPUs, but 1 are visible" in err, err
    assert not (tmp_path / "out").exists()


def test_a_gpu_point_takes_the_first_of_the_gpu_ids(no_spawn, tmp_path):
    spec = LaunchSpec(gpu_ids=("2", "3"))
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    plan = scale.plan(spec, ScaleOptions(out=str(tmp_path)), environ=env)
    assert [p.point.world_size for p in plan.points] == [1, 2]  # the ids given, not all visible
    one = tuple(plan.points[0].argvs[0][4:])
    assert (training_option(one, "gpu_ids"), training_option(one, "num_gpus")) == ("2", "1")


def test_default_world_sizes_double_up_to_the_gpus_and_include_their_count():
    assert scale.default_world_sizes(1) == (1,)
    assert scale.default_world_sizes(4) == (1, 2, 4)
    assert scale.default_world_sizes(6) == (1, 2, 4, 6)
    assert scale.default_world_sizes(8, nnodes=2) == (2, 4, 8, 16)


def test_cpu_plan_runs_each_point_then_its_ceiling_as_valid_train_lines(tmp_path):
    args = ("--task", "cartpole", "--run_name", "mine", "--log_root", "elsewhere")
    spec = LaunchSpec(training_args=args, device="cpu")
    options = ScaleOptions(world_sizes=(1, 2), num_envs=(16, 32), iterations=5, out=str(tmp_path))
    plan = scale.plan(spec, options, environ={"PATH": "/usr/bin"})
    points = [p.point for p in plan.points]
    assert points == [
        Point(1, 16), Point(2, 16), Point(2, 16, ceiling=True),
        Point(1, 32), Point(2, 32), Point(2, 32, ceiling=True),
    ]  # fmt: skip
    assert dict(plan.env)["OMP_NUM_THREADS"] == "1"  # a lone rank does not take every core
    two, ceiling = plan.points[1], plan.points[2]
    (argv,) = two.argvs
    assert argv[1:4] == ("-m", "isaaclab_mgpu", "train")
    args = tuple(argv[4:])
    assert training_option(args, "num_gpus") == "2"
    assert (training_option(args, "num_envs"), training_option(args, "max_iterations")) == ("16", "5")
    assert training_option(args, "run_name") == "mine-w2-e16"
    assert training_option(args, "log_root") is None  # its run lives under the sweep's folder
    assert len(ceiling.argvs) == 2  # two independent one-rank trainings, each its own run name
    names = {training_option(tuple(a[4:]), "run_name") for a in ceiling.argvs}
    assert names == {"mine-w2-e16-ceiling-0", "mine-w2-e16-ceiling-1"}
    assert all(training_option(tuple(a[4:]), "num_gpus") == "1" for a in ceiling.argvs)
    for planned in plan.points:
        for a in planned.argvs:
            assert parse_command_line(app, list(a[3:])) is None, a  # what train itself accepts


def test_ceiling_runs_drop_the_rendezvous_and_no_ceiling_leaves_it_out(tmp_path):
    spec = LaunchSpec(device="cpu", master_port=29999)
    twin = scale.point_spec(spec, Point(2, None, ceiling=True), 5, copy=1)
    assert (twin.nproc_per_node, twin.master_port) == ("1", None)
    plan = scale.plan(spec, ScaleOptions(ceiling=False, out=str(tmp_path)), environ={})
    assert [p.point for p in plan.points] == [Point(1, None), Point(2, None)]  # CPU default 1,2


def _ok(k: int, rate: float, *, envs: int | None = 16, ceiling: bool = False) -> PointResult:
    return PointResult(Point(k, envs, ceiling), "ok", env_steps_per_s=rate)


def test_speedup_efficiency_and_the_ceiling():
    results = [
        _ok(1, 1000.0),
        _ok(2, 1700.0),
        _ok(2, 1900.0, ceiling=True),
        PointResult(Point(4, 16), "failed", reason="exit code 1"),
        _ok(2, 3000.0, envs=32),  # no one-rank point of 32 envs: no speedup
    ]
    rows = scale.compare(results)
    assert [r.result.point.world_size for r in rows] == [1, 2, 4, 2]
    one, two, four, other = rows
    assert (one.speedup, one.efficiency, one.vs_ceiling) == (1.0, 1.0, 1.0)
    assert two.speedup == pytest.approx(1.7) and two.efficiency == pytest.approx(0.85)
    assert two.ceiling_speedup == pytest.approx(1.9) and two.vs_ceiling == pytest.approx(1700 / 1900)
    assert four.speedup is None and four.efficiency is None
    assert other.speedup is None


def test_a_row_says_what_it_means_in_one_sentence():
    from isaaclab_mgpu.report.scale import sentence

    rows = scale.compare([_ok(1, 1000.0, envs=None), _ok(4, 3700.0, envs=None)])
    assert sentence(rows[0]) is None
    assert sentence(rows[1]) == "4 ranks: 3.7× the env-steps/s of one, 92 % efficient"


def test_the_verdict_names_the_fastest_world_size_that_pays_else_one_rank_and_why():
    from isaaclab_mgpu.report.scale import verdict_line

    results = [
        _ok(1, 1000.0),
        _ok(2, 1800.0),  # 90 %: pays
        _ok(4, 3000.0),  # 75 %: pays, and faster
        _ok(8, 4000.0),  # 50 %: faster still, but most of the added ranks buy nothing
        _ok(1, 1000.0, envs=32),
        _ok(2, 1100.0, envs=32),  # 55 %: does not pay
        _ok(2, 1150.0, envs=32, ceiling=True),  # ... and the box allows only 1.15×: its cores
    ]
    by_envs = {v.num_envs: v for v in scale.verdicts(scale.compare(results))}
    assert by_envs[16].ranks == 4 and by_envs[16].best.speedup == pytest.approx(3.0)
    assert not by_envs[16].cpu_bound
    assert by_envs[32].ranks == 1 and by_envs[32].best.result.point.world_size == 2
    assert by_envs[32].cpu_bound
    assert verdict_line(by_envs[16]) == "verdict: use 4 ranks at 16 envs/rank: 3.0× one rank, 75 % efficient"
    said = verdict_line(by_envs[32])
    assert said.startswith("verdict: 2 ranks: 1.1× one rank, 55 % efficient: not worth it at 32 envs/rank")
    assert "limit is the CPU" in said
    # Only one rank measured (or nothing distributed ran): no verdict to give.
    assert scale.verdicts(scale.compare([_ok(1, 1000.0)])) == []


def _summary(rate: float, rewards=(), started_at=None, iqr=(900.0, 1100.0), train_time_s=None) -> Summary:
    steady = Steady(
        warmup_iterations=1, warmup_s=2.0, s_per_iteration=0.5, env_steps_per_s=rate, env_steps_per_s_iqr=iqr
    )
    return Summary(
        steady=steady,
        num_envs_per_rank=16,
        mean_rewards=tuple(rewards),
        started_at=started_at,
        iterations=4,
        train_time_s=train_time_s,
        last_mean_reward=rewards[-1] if rewards else None,
    )


def test_a_point_reads_its_figures_from_its_summary_and_the_time_to_the_reward():
    base = PointResult(Point(2, 16), "ok")
    found = _summary(1000.0, rewards=(1.0, 2.0, 8.0, 9.0), started_at=104.0)
    r = scale.measure(base, [found], target=8.0, spawned=100.0)
    assert (r.env_steps_per_s, r.s_per_iteration, r.warmup_s) == (1000.0, 0.5, 2.0)
    assert r.env_steps_per_s_iqr == (900.0, 1100.0) and r.last_mean_reward == 9.0
    assert r.measured_iterations == 3  # the warm-up iteration left out
    # 4 s of start-up, the 2 s warm-up iteration, then 2 iterations at the steady 0.5 s
    assert (r.time_to_target_s, r.target_iteration, r.target_estimated) == (7.0, 3, True)
    never = scale.measure(base, [found], target=50.0, spawned=100.0)
    assert never.time_to_target_s is None
    spreadless = scale.measure(base, [_summary(1000.0, iqr=())], target=None)
    assert spreadless.env_steps_per_s_iqr is None  # one steady iteration: no spread


def test_the_ceiling_sums_the_steady_rates_and_counts_the_iterations_all_copies_ran_at_once():
    base = PointResult(Point(2, 16, ceiling=True), "ok")
    # the second copy began 1 s later; each trained 4 s (2 s warm-up, then 0.5 s iterations)
    a, b = (
        _summary(500.0, started_at=100.0, train_time_s=4.0),
        _summary(500.0, started_at=101.0, train_time_s=4.0),
    )
    r = scale.measure(base, [a, b], target=None)
    assert (r.env_steps_per_s, r.s_per_iteration, r.measured_iterations) == (1000.0, 0.5, 3)
    assert r.overlap_iterations == 2  # steady stretches 102-104 and 103-105 share one second
    unpaced = scale.measure(base, [a, _summary(0.0)], target=None)
    assert unpaced.status == "failed"


def test_scale_reference_and_help_name_every_option(capsys):
    code, out, _ = run(capsys, "scale", "--help")
    assert code == 0
    for option in ("--world_sizes", "--num_envs", "--iterations", "--target_reward", "--out", "--no_ceiling"):
        assert option in out


def test_parse_counts_reads_ascii_lists_only():
    assert parse_counts("1, 2,4", "--world_sizes") == (1, 2, 4)
    with pytest.raises(UsageError):
        parse_counts("1.5", "--num_envs")
