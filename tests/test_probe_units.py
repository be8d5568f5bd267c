"""probe-nccl's pure parts: sizes, world sizes, bandwidth arithmetic, planning, the workaround
search engine, verdicts, the saved-workaround store and the CLI's refusals (nothing spawned)."""

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from isaaclab_mgpu import cli
from isaaclab_mgpu.contract.errors import EXIT_PROBE_ERROR, EXIT_PROBE_HANG, EXIT_PROBE_WRONG, UsageError
from isaaclab_mgpu.launcher import workarounds
from isaaclab_mgpu.launcher.build import build
from isaaclab_mgpu.launcher.options import from_text
from isaaclab_mgpu.launcher.probe.bisect import find_workarounds
from isaaclab_mgpu.launcher.probe.config import (
    ProbeOptions,
    default_world_sizes,
    parse_sizes,
    parse_world_sizes,
)
from isaaclab_mgpu.launcher.probe.results import (
    HungRank,
    WorldResult,
    aggregate,
    bandwidths,
    bus_factor,
    exit_code,
)
from isaaclab_mgpu.launcher.probe.run import Launch, ProbeSummary, launch_spec, plan_probe
from isaaclab_mgpu.launcher.resolve import Machine, resolve
from isaaclab_mgpu.launcher.spec import LaunchSpec
from isaaclab_mgpu.launcher.workarounds import CANDIDATES, Candidate
from isaaclab_mgpu.report.probe import verdict

# --- sizes and world sizes -------------------------------------------------------------------


def test_size_range_doubles_like_nccl_tests():
    sizes = parse_sizes("8:64M")
    assert sizes[0] == 8 and sizes[-1] == 64 << 20
    assert len(sizes) == 24
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


def test_size_lists_units_and_factor():
    assert parse_sizes("1K,64,1K") == (64, 1024)
    assert parse_sizes("8:1K:4") == (8, 32, 128, 512)
    assert parse_sizes("4:10") == (4, 8)
    assert parse_sizes("1MiB") == (1 << 20,)


@pytest.mark.parametrize("bad", ["3", "1M:8", "8:1K:1", "abc", "8:16:32:64", "16T", ""])
def test_bad_sizes_are_usage_errors(bad):
    with pytest.raises(UsageError, match="--sizes"):
        parse_sizes(bad)


def test_sizes_round_to_whole_float32_elements():
    opts = ProbeOptions(sizes=parse_sizes("10,20,21"))
    assert opts.sizes_for("cpu") == (8, 20)


def test_default_sizes_per_device():
    opts = ProbeOptions()
    assert opts.sizes_for("cuda")[-1] == 64 << 20
    assert opts.sizes_for("cpu")[-1] == 1 << 20


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(1, (1,)), (2, (1, 2)), (3, (1, 2, 3)), (6, (1, 2, 4, 6)), (8, (1, 2, 4, 8))],
)
def test_default_world_sizes(gpus, expected):
    assert default_world_sizes(gpus, cpu=False) == expected


def test_default_world_sizes_on_cpu():
    assert default_world_sizes(0, cpu=True) == (1, 2)


def test_world_size_options():
    assert parse_world_sizes("1, 2,4,2") == (1, 2, 4)
    assert from_text(ProbeOptions, world_size="2").world_sizes == (2,)
    with pytest.raises(UsageError, match="both"):
        from_text(ProbeOptions, world_size="2", world_sizes="1,2")
    assert from_text(ProbeOptions, save_workaround=True).try_workarounds
    with pytest.raises(UsageError, match="positive"):
        parse_world_sizes("1,0")


def test_backend_defaults_and_nccl_on_cpu():
    assert ProbeOptions().backend_for("cuda") == "nccl"
    assert ProbeOptions().backend_for("cpu") == "gloo"
    with pytest.raises(UsageError, match="nccl needs GPUs"):
        ProbeOptions(backend="nccl").backend_for("cpu")


# --- bandwidth arithmetic (nccl-tests' formulas) -----------------------------------------------


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_factor_is_two_n_minus_one_over_n(n, factor):
    assert bus_factor(n) == pytest.approx(factor)


def test_bandwidths():
    algbw, busbw = bandwidths(64 << 20, 0.01, 4)
    assert algbw == pytest.approx((64 << 20) / 0.01 / 1e9)
    assert busbw == pytest.approx(algbw * 1.5)
    assert bandwidths(8, 0.0, 2) == (0.0, 0.0)


def _rank(rank, times, wrong=0):
    row = lambda t: {  # noqa: E731
        "bytes": 1024,
        "count": 256,
        "type": "float32",
        "out-of-place": {"time_s": t, "wrong": wrong},
        "in-place": {"time_s": t / 2, "wrong": 0},
    }
    return {"rank": rank, "init_s": 0.1 * (rank + 1), "sizes": [row(t) for t in times]}


def test_aggregate_takes_the_slowest_rank_and_sums_wrong():
    rows = aggregate({0: _rank(0, [1e-3, 1e-3]), 1: _rank(1, [2e-3], wrong=2)}, 2)
    assert len(rows) == 1  # only the sizes every rank finished
    (row,) = rows
    assert row.out_of_place.time_s == 2e-3
    assert row.out_of_place.wrong == 2
    assert row.out_of_place.algbw == pytest.approx(1024 / 2e-3 / 1e9)
    assert row.out_of_place.busbw == pytest.approx(row.out_of_place.algbw)
    assert row.in_place.time_s == 1e-3


def test_exit_code_is_the_worst_status():
    assert exit_code(["ok", "ok"]) == 0
    assert exit_code(["ok", "error"]) == EXIT_PROBE_ERROR
    assert exit_code(["error", "wrong-result"]) == EXIT_PROBE_WRONG
    assert exit_code(["wrong-result", "hang", "ok"]) == EXIT_PROBE_HANG


# --- the workaround search engine -------------------------------------------------------------

A = Candidate("NCCL_P2P_DISABLE", "1", "a")
B = Candidate("NCCL_SHM_DISABLE", "1", "b")
C = Candidate("NCCL_ALGO", "Ring", "c")


class StandIn:
    """A machine that hangs unless one variable is set; records every run's environment."""

    def __init__(self, fix=None, baseline="hang", flaky_after=None):
        self.fix, self.baseline, self.flaky_after, self.calls = fix, baseline, flaky_after, []

    def __call__(self, env):
        self.calls.append(dict(env))
        if self.flaky_after is not None and len(self.calls) > self.flaky_after:
            return "ok"
        if self.fix is not None and env.get(self.fix.name) == self.fix.value:
            return "ok"
        return self.baseline


def test_search_finds_the_fix_and_confirms_it_both_ways():
    run = StandIn(fix=B)
    search = find_workarounds(run, [A, B, C])
    assert search.reproduced
    assert search.confirmed == (B,)
    # baseline; A (fails); B (passes) then without B (fails again); C (fails)
    assert run.calls == [{}, {A.name: "1"}, {B.name: "1"}, {}, {C.name: "Ring"}]
    trial_b = search.trials[1]
    assert (trial_b.status, trial_b.without, trial_b.confirmed) == ("ok", "hang", True)
    assert [t.confirmed for t in search.trials] == [False, True, False]


def test_search_never_sets_two_candidates_at_once():
    run = StandIn(fix=C)
    find_workarounds(run, list(CANDIDATES))
    assert all(len(env) <= 1 for env in run.calls)


def test_a_failure_that_went_away_is_not_a_confirmed_fix():
    run = StandIn(baseline="hang", flaky_after=2)  # baseline and A fail, then everything passes
    search = find_workarounds(run, [A, B])
    assert search.trials[1].fixes and not search.trials[1].confirmed
    assert search.confirmed == ()


def test_nothing_is_tried_when_the_failure_does_not_reproduce():
    run = StandIn(baseline="ok")
    search = find_workarounds(run, [A, B])
    assert not search.reproduced and search.trials == () and run.calls == [{}]


def test_search_reports_each_trial():
    seen = []
    find_workarounds(StandIn(fix=A), [A, B], on_trial=seen.append)
    assert [t.candidate for t in seen] == [A, B]


# --- verdicts ------------------------------------------------------------------------------


def _world(ws, status, **kw):
    return WorldResult(f"world size {ws}", ws, status, 1.0, f"/tmp/ws{ws}", **kw)


def test_verdict_ok():
    s = ProbeSummary("gloo", "cpu", "/tmp", (_world(1, "ok"), _world(2, "ok")))
    assert verdict(s) == ("communication OK at world sizes 1,2 — a hang in training is in the task or launch")
    one = ProbeSummary("gloo", "cpu", "/tmp", (_world(3, "ok"),))
    assert verdict(one).startswith("communication OK at world size 3 — ")


def test_verdict_hang_on_nccl_suggests_the_search():
    hung = (HungRank(1, "collective 0 at 8 B (out-of-place, timed)", "sleeping"),)
    s = ProbeSummary("nccl", "cuda", "/tmp", (_world(1, "ok"), _world(2, "hang", hung=hung)))
    text = verdict(s)
    assert text.startswith("hang at world size 2 — communication problem: try ")
    assert "--try-workarounds" in text and "NCCL_P2P_DISABLE=1" in text


def test_verdict_points_at_a_stopped_rank():
    hung = (
        HungRank(0, "collective 0 at 8 B (in-place, timed)", "sleeping"),
        HungRank(1, "collective 0 at 8 B (in-place, timed)", "stopped"),
    )
    s = ProbeSummary("gloo", "cpu", "/tmp", (_world(2, "hang", hung=hung),))
    assert verdict(s).startswith(
        "hang at world size 2 — communication problem: rank 1 was stopped (SIGSTOP or a debugger)"
    )


def test_verdict_names_a_confirmed_fix():
    search = find_workarounds(StandIn(fix=B), [A, B])
    s = ProbeSummary("nccl", "cuda", "/tmp", (_world(2, "hang"),), search_label="world size 2", search=search)
    assert "NCCL_SHM_DISABLE=1 fixes it, confirmed both ways" in verdict(s)


def test_verdict_on_gloo_does_not_suggest_nccl_variables():
    s = ProbeSummary("gloo", "cpu", "/tmp", (_world(2, "wrong-result"),))
    assert verdict(s).startswith("wrong all-reduce results at world size 2")
    assert "NCCL_" not in verdict(s)


# --- planning --------------------------------------------------------------------------------

GPU4 = Machine(environ={}, python="py", hostname="box", nvml_gpu_count=4, cpu_count=8, run_stamp="s")


def test_plan_default_sweep_and_pairs_on_four_gpus():
    plan = plan_probe(LaunchSpec(), ProbeOptions(pairs=True), GPU4)
    assert plan.backend == "nccl"
    assert [launch.world_size for launch in plan.world] == [1, 2, 4]
    assert len(plan.pairs) == 6
    assert plan.pairs[0] == Launch("pair 0,1", 2, 2, {"CUDA_VISIBLE_DEVICES": "0,1"})


def test_pairs_follow_cuda_visible_devices():
    machine = Machine(environ={"CUDA_VISIBLE_DEVICES": "3,1,2"}, nvml_gpu_count=None, run_stamp="s")
    plan = plan_probe(LaunchSpec(), ProbeOptions(pairs=True), machine)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plan.pairs] == ["3,1", "3,2", "1,2"]


def test_plan_multi_node_world_sizes_are_totals():
    spec = LaunchSpec(device="cpu", nnodes="2", node_rank=1, master_addr="node0", master_port=29555)
    plan = plan_probe(spec, ProbeOptions(), Machine(run_stamp="s"))
    assert [(x.world_size, x.nproc) for x in plan.world] == [(2, 1), (4, 2)]
    with pytest.raises(UsageError, match="does not split"):
        plan_probe(spec, ProbeOptions(world_sizes=(3,)), Machine())


@pytest.mark.parametrize(
    ("spec", "opts", "message"),
    [
        (LaunchSpec(device="cpu"), ProbeOptions(pairs=True), "--pairs"),
        (LaunchSpec(device="cpu"), ProbeOptions(try_workarounds=True), "--try-workarounds"),
        (LaunchSpec(device="cpu", module="x"), ProbeOptions(), "--module"),
        (LaunchSpec(device="cpu", nproc_per_node="2"), ProbeOptions(), "--world-size"),
        (LaunchSpec(device="cpu", training_args=("--foo",)), ProbeOptions(), "--foo"),
        (LaunchSpec(), ProbeOptions(world_sizes=(8,)), "needs 8 GPU"),
        (LaunchSpec(), ProbeOptions(), None),
    ],
)
def test_plan_refuses(spec, opts, message):
    machine = GPU4
    if message is None:  # cuda without any GPU
        machine = Machine(run_stamp="s")
        message = "no GPU is visible"
    with pytest.raises(UsageError, match=message):
        plan_probe(spec, opts, machine)


def test_probe_launch_goes_through_the_train_builder(tmp_path):
    spec = LaunchSpec(device="cpu", nnodes="2", node_rank=0, master_addr="node0", master_port=29555)
    opts = ProbeOptions(iters=3, warmup=1)
    plan = plan_probe(spec, opts, Machine(run_stamp="s"))
    launch = plan.world[1]
    run_spec = launch_spec(spec, launch, plan, opts, tmp_path / "ws4")
    machine = Machine(environ={}, python="PY", cpu_count=2, run_stamp="s")
    cmd = build(resolve(run_spec, machine, strict=True, port_free=lambda _: True))
    argv = list(cmd.argv)
    assert argv[:3] == ["PY", "-m", "torch.distributed.run"]
    assert argv[argv.index("--nproc_per_node") + 1] == "2"
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--master_addr") + 1] == "node0"
    tail = argv[argv.index("-m", 3) :]
    assert tail[:2] == ["-m", "isaaclab_mgpu.rank.probe_worker"]
    assert tail[tail.index("--results") + 1] == str((tmp_path / "ws4").resolve())
    assert tail[tail.index("--backend") + 1] == "gloo"
    assert tail[tail.index("--sizes") + 1] == ",".join(map(str, plan.sizes))
    assert "--distributed" not in tail and "--rl_library" not in tail
    assert cmd.log_dir == str(
        tmp_path / "ws4" / "logs" / "probe_worker" / "s" / "attempt_0"
    )  # the launch's own folder
    assert argv[argv.index("--log_dir") + 1] == cmd.log_dir
    assert sorted(cmd.rank_devices) == [0, 1]


# --- saved workarounds -------------------------------------------------------------------------


def test_store_round_trip_and_user_environment_wins(tmp_path):
    path = workarounds.store_path({"XDG_CONFIG_HOME": str(tmp_path)})
    assert path == tmp_path / "isaaclab-mgpu" / "workarounds.json"
    workarounds.save(path, "hostA|2x|H200,H200", "NCCL_P2P_DISABLE", "1")
    workarounds.save(path, "hostA|2x|H200,H200", "NCCL_ALGO", "Ring")
    workarounds.save(path, "hostB|0x|no-gpu", "NCCL_SHM_DISABLE", "1")
    saved = workarounds.saved_for(path, "hostA|2x|H200,H200")
    assert saved == workarounds.Saved({"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Ring"})
    assert workarounds.to_apply(saved.variables, {"NCCL_ALGO": "Tree"}) == {"NCCL_P2P_DISABLE": "1"}
    assert workarounds.saved_for(path, "hostC|0x|no-gpu") == workarounds.Saved({})


def test_a_corrupt_store_reads_as_empty(tmp_path):
    path = tmp_path / "w.json"
    path.write_text("[1, 2")
    assert workarounds.load(path) == {}


def _save_here(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("NCCL_P2P_DISABLE", raising=False)
    path = workarounds.store_path({"XDG_CONFIG_HOME": str(tmp_path)})
    workarounds.save(path, workarounds.this_machine(), "NCCL_P2P_DISABLE", "1")


def test_saved_workarounds_apply_to_gpu_launches_only(tmp_path, monkeypatch):
    _save_here(tmp_path, monkeypatch)
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert workarounds.for_launch(env, device="cuda", enabled=True).variables == {"NCCL_P2P_DISABLE": "1"}
    assert workarounds.for_launch(env, device="cuda", enabled=False).variables == {}
    assert workarounds.for_launch(env, device="cpu", enabled=True).variables == {}


def test_train_dry_run_applies_saved_workarounds_with_a_notice(tmp_path, monkeypatch, capsys):
    _save_here(tmp_path, monkeypatch)
    assert cli.main(["train", "--dry_run", "--json", "--num_gpus", "2"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["env"]["NCCL_P2P_DISABLE"] == "1"
    assert "applying saved workaround NCCL_P2P_DISABLE=1" in captured.err

    assert cli.main(["train", "--dry_run", "--json", "--num_gpus", "2", "--no_saved_workarounds"]) == 0
    captured = capsys.readouterr()
    assert "NCCL_P2P_DISABLE" not in json.loads(captured.out)["env"]
    assert "saved workaround" not in captured.err

    assert cli.main(["dry-run", "--json", "--num-gpus", "2", "--no-saved-workarounds"]) == 0
    assert "NCCL_P2P_DISABLE" not in json.loads(capsys.readouterr().out)["env"]


# --- the command line refuses bad input before spawning anything ----------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cpu", "--backend", "nccl"], "nccl needs GPUs"),
        (["--device", "cpu", "--world-size", "2", "--world-sizes", "1,2"], "both given"),
        (["--device", "cpu", "--sizes", "3"], "--sizes"),
        (["--device", "cpu", "--num_gpus", "2"], "--world-size N"),
        (["--device", "cpu", "--pairs"], "--pairs"),
        (["--device", "cpu", "--bogus"], "--bogus"),
        (["--device", "cpu", "--timeout", "0"], "--timeout"),
        ([], "no GPU is visible"),
    ],
)
def test_probe_cli_refuses(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = cli.main(["probe-nccl", "--log_dir", str(tmp_path), *args])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(Path(tmp_path).iterdir()) == []  # nothing spawned, nothing written


# --- the probe across nodes, as a job ----------------------------------------------------------


def test_each_launch_across_nodes_meets_at_a_port_of_its_own(tmp_path):
    # A node that starts the next launch first must not join the store of the last one on node 0.
    spec = LaunchSpec(device="cpu", nnodes="2", master_port=29555)
    opts = ProbeOptions()
    plan = plan_probe(spec, opts, Machine(run_stamp="s"))
    ports = [launch_spec(spec, x, plan, opts, tmp_path).master_port for x in plan.world]
    assert ports == [29555, 29556]
    one_node = LaunchSpec(device="cpu", master_port=29555)
    plan = plan_probe(one_node, opts, Machine(run_stamp="s"))
    assert {launch_spec(one_node, x, plan, opts, tmp_path).master_port for x in plan.world} == {29555}


def test_probe_options_read_back_from_their_argv():
    opts = ProbeOptions(world_sizes=(4, 8), backend="gloo", sizes=(8, 4096), iters=3, warmup=1, timeout=90.0)
    argv = opts.argv()
    assert argv[::2] == ["--world_sizes", "--backend", "--sizes", "--iters", "--warmup", "--timeout"]
    values = dict(zip(argv[::2], argv[1::2], strict=True))
    assert from_text(ProbeOptions, **{k.removeprefix("--"): v for k, v in values.items()}) == opts
    assert ProbeOptions(world_size=2).argv() == ["--world_sizes", "2"]  # one spelling, never both
    assert ProbeOptions(save_workaround=True).argv() == ["--save_workaround"]  # it implies --try_workarounds
    assert ProbeOptions().argv() == [] and ProbeOptions(saved_workarounds=False).argv() == [
        "--no_saved_workarounds"
    ]


def test_probe_nccl_emit_sbatch_runs_the_probe_on_every_node(capsys):
    args = ["probe-nccl", "--device", "cpu", "--nnodes", "2", "--sizes", "8,4K", "--iters", "3"]
    assert cli.main([*args, "--emit", "sbatch", "--job_name", "probe", "--json"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --nodes=2" in script and "#SBATCH --cpus-per-task=2" in script  # 2 ranks at most
    step = script.rstrip().splitlines()[-1]
    # Each node's report in its own file; no --kill-on-bad-exit: one node's failed launch must not
    # end the others before they report. The train job's port and fill.
    assert step.startswith("srun --cpus-per-task=2 --output=probe-%j-%N.out ")
    assert step.endswith(
        'probe-nccl --master_port "$MGPU_PORT" --device cpu --nnodes 2 --sizes 8,4096 --iters 3 --json'
    )
    assert "--resume" not in script and "dry-run" not in script
    # GPUs: the job books the GPUs the largest world size puts on a node.
    assert cli.main(["probe-nccl", "--nnodes", "2", "--world-sizes", "8,16", "--emit", "sbatch"]) == 0
    assert "#SBATCH --gpus-per-node=8" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nnodes", "2"], "give the world sizes to probe"),
        (["--device", "cpu", "--nnodes", "2", "--world-sizes", "3"], "does not split"),
        (["--device", "cpu", "--nnodes", "2", "--node_rank", "1"], "--node_rank differs per node"),
        (["--device", "cpu", "--nnodes", "2", "--emit", "trainjob"], "only --emit sbatch"),
    ],
)
def test_probe_nccl_emit_refuses(args, message, capsys):
    emit = [] if "--emit" in args else ["--emit", "sbatch"]
    assert cli.main(["probe-nccl", *args, *emit]) == 2
    assert message in capsys.readouterr().err


def test_probe_nccl_emit_pairs_across_nodes_adds_a_step_per_pair(capsys, tmp_path):
    args = [
        "probe-nccl",
        "--device",
        "cpu",
        "--nnodes",
        "3",
        "--pairs",
        "--emit",
        "sbatch",
        "--job_name",
        "p",
    ]
    assert cli.main(args) == 0
    script = capsys.readouterr().out
    (tmp_path / "p.sbatch").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "p.sbatch")]).returncode == 0
    sweep = next(line for line in script.splitlines() if line.startswith("srun --cpus-per-task"))
    assert "--pairs" not in sweep and sweep.endswith("--nnodes 3 || status=$?")
    pair = next(line.strip() for line in script.splitlines() if line.strip().startswith("srun --nodes=2"))
    assert '--nodelist="${NODES[i]},${NODES[j]}"' in pair
    assert pair.endswith("--device cpu --nnodes 2 --world_sizes 2 || code=$?")
    assert '--master_addr "${NODES[i]}" --master_port "$(($MGPU_PORT + 100 + k))"' in pair
    assert script.rstrip().endswith('exit "$status"')
