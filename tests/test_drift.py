"""The drift check: ranks whose parameters, optimizer state or normalizer statistics stop matching
are named while it happens (``--drift_interval``, ``--on_drift``, ``--simulate_fault drift@IT``).

Fast: the hashing and the comparison on made-up rows, the check's bookkeeping, real torch modules
and rsl-rl's own empirical normalizer, the progress report that carries a drift, the summary and
``mgpu runs``, the options. Slow: real 2-rank CPU runs under ``mgpu train`` in which rank 1 is
put out of step at iteration 10 (rsl-rl warns, skrl torch stops with exit 65, skrl JAX warns), and
one whose skrl running standard scalers stay equal on every rank (mgpu's patch combines the ranks'
batches).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from cli_helpers import run as cli
from restart_helpers import Run, run_folders, summary_of, train_argv
from training_helpers import child_env

from isaaclab_mgpu.contract import faults, progress
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import PROGRESS_DIR
from isaaclab_mgpu.contract.errors import EXIT_DRIFT, RESERVED
from isaaclab_mgpu.contract.summary import Drift, Summary
from isaaclab_mgpu.contract.worker_args import WorkerArgsError, parse
from isaaclab_mgpu.launcher import runs
from isaaclab_mgpu.launcher.ledger import write_summary
from isaaclab_mgpu.rank import drift

A = {"policy": [np.arange(6.0)], "optimizer": [np.ones(3), np.array([1e-3])], "normalizer": [np.zeros(4)]}


def _rows(*states: dict) -> np.ndarray:
    return np.stack([drift.words(drift.hashes(s)) for s in states])


def _nudged(state: dict, component: str) -> dict:
    out = {k: [a.copy() for a in v] for k, v in state.items()}
    out[component][0][0] += 1e-3
    return out


def test_equal_ranks_agree_and_a_row_without_a_check_compares_nothing():
    assert drift.compare(_rows(A, A, A), since=0, at=10) is None
    skipped = np.stack([drift.words(None), drift.words(drift.hashes(_nudged(A, "policy")))])
    assert drift.compare(skipped, since=0, at=10) is None  # only check iterations carry hashes


@pytest.mark.parametrize("component", drift.COMPONENTS)
def test_the_rank_that_differs_is_named_with_its_component(component):
    found = drift.compare(_rows(A, _nudged(A, component)), since=10, at=20)
    expected = Drift(rank=1, component=component, since_iteration=10, found_at=20, components=(component,))
    assert found == expected
    # Three ranks: the one apart from the majority, rank 0 included.
    found = drift.compare(_rows(_nudged(A, component), A, A), since=0, at=10)
    assert (found.rank, found.component) == (0, component)


def test_every_differing_component_is_listed_and_the_first_named():
    both = _nudged(_nudged(A, "normalizer"), "optimizer")
    found = drift.compare(_rows(A, both), since=0, at=5)
    assert (found.component, found.components) == ("optimizer", ("optimizer", "normalizer"))


def test_the_hash_sees_dtype_shape_and_order():
    x = np.arange(4.0)
    assert drift.digest([x]) == drift.digest([x.copy()])
    assert drift.digest([x]) != drift.digest([x.astype(np.float32)])
    assert drift.digest([x]) != drift.digest([x.reshape(2, 2)])
    assert drift.digest([x, x + 1]) != drift.digest([x + 1, x])
    # A row survives JAX's float32 all-gather: its words are 16-bit.
    row = drift.words(drift.hashes(A))
    assert (row.astype(np.float32).astype(np.float64) == row).all()


def test_the_check_runs_every_interval_remembers_the_last_agreement_and_names_once():
    check = drift.Check(10, agreed=0)
    assert [n for n in range(1, 31) if check.due(n, 2)] == [10, 20, 30]
    assert not check.due(10, 1) and not drift.Check(0).due(10, 2)  # one rank, or --drift_interval 0
    assert check.judge(_rows(A, A), 10) is None and check.agreed == 10
    found = check.judge(_rows(A, _nudged(A, "normalizer")), 20)
    assert (found.since_iteration, found.found_at, found.rank) == (10, 20, 1)
    assert check.judge(_rows(A, _nudged(A, "policy")), 30) is None  # named once
    assert not check.due(30, 2)  # and no more hashing after it


def _model(with_buffer: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ELU(), torch.nn.Linear(4, 1))
    if with_buffer:
        m.register_buffer("running_mean", torch.zeros(3))
    return m


def _opt_after_a_step(model: torch.nn.Module) -> torch.optim.Optimizer:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(2, 3)).sum().backward()
    opt.step()
    return opt


@pytest.mark.parametrize(("with_buffer", "nudged"), [(True, "normalizer"), (False, "policy")])
def test_a_nudged_torch_rank_differs_in_the_component_nudged(with_buffer, nudged):
    ranks = [_model(with_buffer) for _ in range(2)]
    opts = [_opt_after_a_step(m) for m in ranks]
    rows = [drift.torch_components([m], o) for m, o in zip(ranks, opts, strict=True)]
    assert drift.compare(_rows(*rows), 0, 10) is None
    assert drift.perturb_torch([ranks[1]]) == nudged
    rows = [drift.torch_components([m], o) for m, o in zip(ranks, opts, strict=True)]
    assert drift.compare(_rows(*rows), 0, 10).component == nudged


def test_rsl_rl_normalizer_statistics_are_the_normalizer_component():
    from rsl_rl.modules import EmpiricalNormalization

    def rank() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        m = _model(False)
        m.norm = EmpiricalNormalization(3)
        m.norm.train()
        m.norm.update(torch.arange(6.0).reshape(2, 3))
        return m, _opt_after_a_step(m)

    (m0, o0), (m1, o1) = rank(), rank()
    m1.norm.update(torch.ones(2, 3))  # rank 1 alone sees more observations: its statistics move
    found = drift.compare(_rows(drift.torch_components([m0], o0), drift.torch_components([m1], o1)), 0, 10)
    assert (found.rank, found.components) == (1, ("normalizer",))


class _Peer:
    """Rank 0 of a 2-rank all-gather, frozen at the state it was given (rank 1 is the test's)."""

    kind = "torch"

    def __init__(self, source: drift.Source) -> None:
        self.row = drift.words(drift.hashes(source.components()))

    def gather(self, mine: np.ndarray) -> np.ndarray:
        return np.stack([self.row, mine])


def test_isaac_lab_ranks_compare_at_the_interval_and_a_simulated_drift_is_named_and_stops_them():
    """Isaac Lab's path (:mod:`isaaclab_mgpu.rank.isaac_drift`): rank 1 checks every 2 iterations;
    ``drift@3`` nudges it at the end of iteration 2 (after that check agreed); the check at 4 names
    it (since 2) and, under ``--on_drift stop``, says stop; then never again."""
    from isaaclab_mgpu.contract.env import RUN_ID, SIMULATE_FAULT
    from isaaclab_mgpu.rank.isaac_drift import Watch
    from isaaclab_mgpu.rank.worker.rank import RankContext

    model = _model(True)
    opt = _opt_after_a_step(model)
    source = drift.Source(lambda: drift.torch_components([model], opt), lambda: drift.perturb_torch([model]))
    args = parse(["--task", "Isaac-Cartpole-Direct", "--drift_interval", "2", "--on_drift", "stop"])
    environ = {RUN_ID: "r", SIMULATE_FAULT: "drift@3", "RANK": "1", "WORLD_SIZE": "2"}
    watch = Watch(
        RankContext(rank=1, local_rank=1, world_size=2, device="cpu", seed=0), "torch", args, environ
    )
    watch.source = source
    watch.comm = _Peer(source)  # type: ignore[assignment]
    assert [watch.after(done) for done in (1, 2, 3)] == [False, False, False]
    assert watch.check.agreed == 2 and watch.fault is None  # agreed at 2, nudged right after
    assert watch.after(4) is True and watch.stopped
    found = watch.check.found
    assert (found.rank, found.component, found.since_iteration, found.found_at) == (1, "normalizer", 2, 4)
    assert watch.after(6) is False  # named once


def _pooled(store: str, rank: int, out) -> None:
    """One of 2 gloo ranks: its own samples' moments combined (skrl's patch) and its running
    statistics pooled (rl-games'); what it got, sent back."""
    import torch.distributed as dist

    from isaaclab_mgpu.rank.patches.base import all_moments, pool_statistics

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    x = torch.arange(12.0, dtype=torch.float64).reshape(6, 2) * (rank + 1)
    moments = all_moments(x.mean(0), x.var(0, unbiased=False), 6)
    mean, var = x.mean(0).clone(), x.var(0, unbiased=False).clone()
    pool_statistics(mean, var)
    dist.destroy_process_group()
    out.put((rank, [t.numpy() if hasattr(t, "numpy") else t for t in moments], mean.numpy(), var.numpy()))


def test_running_statistics_combined_over_real_gloo_ranks_are_those_of_all_samples(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_pooled, args=(str(tmp_path / "store"), r, out)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict((r, rest) for r, *rest in (out.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    every = torch.cat([torch.arange(12.0, dtype=torch.float64).reshape(6, 2) * (r + 1) for r in range(2)])
    want_mean, want_var = every.mean(0).numpy(), every.var(0, unbiased=False).numpy()
    for r in range(2):
        (m, v, n), mean, var = got[r]
        assert n == 12 and np.allclose(m, want_mean) and np.allclose(v, want_var), got[r]
        assert np.allclose(mean, want_mean) and np.allclose(var, want_var), got[r]
    assert got[0][1].tobytes() == got[1][1].tobytes() and got[0][2].tobytes() == got[1][2].tobytes()


def test_a_running_normalizer_without_a_process_group_updates_from_its_own_batch():
    from isaaclab_mgpu.rank.patches.base import all_moments

    mean, var = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.25])
    assert all_moments(mean, var, 8) == (mean, var, 8)


def test_a_drift_rides_in_every_report_from_then_on(tmp_path):
    reporter = progress.Reporter({PROGRESS_DIR: str(tmp_path), "RANK": "0"})
    reporter.iteration(9)
    assert progress.read_report(progress.progress_path(tmp_path, 0)).drift is None
    found = Drift(rank=1, component="normalizer", since_iteration=0, found_at=10, components=("normalizer",))
    reporter.drift(found)
    reporter.iteration(10)
    reporter.beat("sync")
    assert progress.read_report(progress.progress_path(tmp_path, 0)).drift == found


def test_the_summary_keeps_the_drift_and_mgpu_runs_shows_it(tmp_path):
    found = Drift(rank=1, component="policy", since_iteration=10, found_at=20, components=("policy",))
    write_summary(tmp_path, Summary(status="drifted", checksums_equal=False, drift=found))
    s = summaries.read(tmp_path)
    assert s.drift == found and not s.invalid
    row = runs.row(tmp_path, s)
    assert row.drift == "rank 1 policy @20" and row.as_json()["drift"] == "rank 1 policy @20"
    assert "drifted" in runs.UNFINISHED  # --resume auto continues it from rank 0's state
    assert runs.row(tmp_path, Summary(status="finished", checksums_equal=True)).drift is None
    bad = Summary.from_json({"status": "finished", "drift": {"rank": -1, "component": "policy"}})
    assert bad.drift is None and "drift" in bad.invalid


def test_the_options_and_the_simulated_fault():
    args = parse(["--drift_interval", "5", "--on_drift", "stop"])
    assert (args.drift_interval, args.on_drift) == (5, "stop")
    assert (parse([]).drift_interval, parse([]).on_drift) == (10, "warn")
    for bad in (["--drift_interval", "-1"], ["--on_drift", "panic"]):
        with pytest.raises(WorkerArgsError):
            parse(bad)
    fault = faults.parse("drift@10")
    assert (fault.kind, fault.iteration) == ("drift", 10)
    assert (fault.target(2), fault.target(4), fault.target(1)) == (1, 1, 0)
    assert faults.parse("drift@3,rank=0").target(2) == 0
    assert "rank 1 nudges" in faults.describe(fault, 2)
    assert EXIT_DRIFT == 65 and EXIT_DRIFT in RESERVED


def test_obs_normalization_is_a_boolean_setting():
    from isaaclab_mgpu.contract.settings import PPOSettings, settings_with

    assert settings_with(PPOSettings(), {"obs_normalization": "true"}).obs_normalization is True
    assert settings_with(PPOSettings(), {"obs_normalization": "0"}).obs_normalization is False
    with pytest.raises(ValueError, match="must be bool"):
        settings_with(PPOSettings(), {"obs_normalization": "maybe"})
    assert parse(["agent.obs_normalization=yes"]).overrides == (("agent.obs_normalization", "yes"),)


def test_a_skrl_checkpoint_keeps_the_running_standard_scaler(tmp_path):
    from isaaclab_mgpu.contract.settings import PPOSettings
    from isaaclab_mgpu.rank import backends, tasks
    from isaaclab_mgpu.rank.worker.rank import RankContext

    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=1)
    ppo = PPOSettings(obs_normalization=True)

    def trainer():
        env = tasks.make("cartpole", 8, "cpu", 1, {})
        return backends.create("skrl", "torch", env, ppo, ctx, str(tmp_path))

    first, second = trainer(), trainer()
    first.iterate()
    stats = drift.digest(first.drift_source().components()["normalizer"])
    assert stats != drift.digest(
        second.drift_source().components()["normalizer"]
    )  # it learned from observations
    second.load_state_dict(first.state_dict())
    assert drift.digest(second.drift_source().components()["normalizer"]) == stats
    first.close()
    second.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--drift_interval", "0", "--simulate_fault", "drift@3"], "--drift_interval 0"),
        (["--on_drift", "maybe"], "--on_drift"),
    ],
)
def test_refused_before_anything_starts(capsys, no_spawn, argv, message):
    code, _, err = cli(capsys, "train", "--device", "cpu", "--nproc_per_node", "2", *argv)
    assert code == 2 and message in err, err


#: A run long enough for two checks after the fault at 10 (K = 5: named within 2K iterations).
DRIFT_RUN = ("--num_envs", "16", "--max_iterations", "20", "--save_interval", "0", "env.episode_length=16",
             "--drift_interval", "5", "--simulate_fault", "drift@10")  # fmt: skip
#: Seconds a run may take (skrl JAX compiles for tens of seconds on this 2-core box).
LIMIT = {"rsl_rl": 240, "skrl_torch": 240, "skrl_jax": 480}


def _drift_of(folder, component: str = "policy") -> dict:
    s = summary_of(folder)
    d = s["drift"]
    assert (d["rank"], d["component"]) == (1, component), d
    assert 10 <= d["found_at"] <= 10 + 2 * 5 and d["since_iteration"] < 10 <= d["found_at"], d
    return s


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "extra", "component"),
    [
        # rsl-rl's empirical normalizer (synchronised by rsl-rl): the fault nudges its statistics.
        ("rsl_rl", ("agent.obs_normalization=true",), "normalizer"),
        ("skrl_jax", (), "policy"),  # no normalizer: the fault nudges a parameter
    ],
)
def test_a_drifting_rank_is_named_and_the_run_goes_on(backend, extra, component, tmp_path):
    code, out = Run(train_argv(backend, *DRIFT_RUN, *extra), tmp_path).finish(LIMIT[backend])
    assert code == 0, out[-4000:]
    (folder,) = run_folders(tmp_path, backend)
    s = _drift_of(folder, component)
    assert (s["status"], s["end_iteration"], s["checksums_equal"]) == ("finished", 20, False), s
    assert out.count("mgpu: warning: drift: rank 1") == 1, out[-4000:]  # named once, by mgpu
    listed = json.loads(cli_json(tmp_path))
    assert listed[0]["drift"] == f"rank 1 {component} @{s['drift']['found_at']}", listed


@pytest.mark.slow
def test_skrl_running_standard_scaler_stays_equal_on_every_rank(tmp_path):
    """skrl updates its scaler from each rank's own environments (rank-local: named at the first
    check before mgpu's patch, ``rank/patches/skrl.py`` fix 11); with every rank's batch combined
    first, the ranks' scalers stay equal at every check."""
    argv = train_argv("skrl_torch", "--num_envs", "16", "--max_iterations", "4", "env.episode_length=16",
                      "--drift_interval", "1", "agent.obs_normalization=true")  # fmt: skip
    code, out = Run(argv, tmp_path).finish(LIMIT["skrl_torch"])
    assert code == 0, out[-4000:]
    (folder,) = run_folders(tmp_path, "skrl_torch")
    s = summary_of(folder)
    assert s["checksums_equal"] is True and s["end_iteration"] == 4, s
    assert s.get("drift") is None, s["drift"]
    assert "warning: drift" not in out, out[-4000:]


def cli_json(cwd) -> str:
    """``mgpu runs --json`` in ``cwd``."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "runs", "--json"]
    done = subprocess.run(argv, cwd=cwd, env=child_env(cwd), capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.slow
def test_on_drift_stop_saves_stops_every_rank_and_exits_65_without_a_restart(tmp_path):
    argv = train_argv("skrl_torch", *DRIFT_RUN, "--on_drift", "stop", "--max_restarts", "1")
    code, out = Run(argv, tmp_path).finish(LIMIT["skrl_torch"])
    assert code == EXIT_DRIFT, out[-4000:]
    (folder,) = run_folders(tmp_path, "skrl_torch")
    s = _drift_of(folder)
    at = s["drift"]["found_at"]
    assert (s["status"], s["exit_status"], s["end_iteration"]) == ("drifted", EXIT_DRIFT, at), s
    assert (folder / f"model_{at}.pt").is_file()  # rank 0's state, for --resume auto
    assert [a["outcome"] for a in s["attempts"]] == ["drifted"], s["attempts"]  # no restart
    # Going on loads rank 0's state on every rank: equal again, to the end, the drift still on record.
    again = [a for a in DRIFT_RUN if a not in ("--simulate_fault", "drift@10")]
    resumed = Run(train_argv("skrl_torch", *again, "--resume", "auto"), tmp_path)
    code, out = resumed.finish(LIMIT["skrl_torch"])
    assert code == 0, out[-4000:]
    s = summary_of(folder)
    assert (s["status"], s["end_iteration"], s["checksums_equal"]) == ("finished", 20, True), s
    assert s["drift"]["found_at"] == at, s["drift"]
