"""Real 2-rank CPU training under ``mgpu train`` for every back-end: learning, sync, summary, resume.

Each back-end's learning run is also its curves' test: the TensorBoard event file in its run folder
(read back with TensorBoard's own reader) and ``mgpu runs``' row of it; its pendulum run logs with
``--logger wandb`` offline (no network: W&B's files under ``tmp/wandb/``, read back with W&B's own
reader, ``wandb leet inspect --json``): only rank 0 opens a W&B run (skrl upstream opens one on every
rank; see ``rank/patches/skrl.py``), its id is the one ``summary.json`` records, and it holds the same
curves as the event file (the library's own and mgpu's ``mgpu/*`` scalars), on the same steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from training_helpers import (
    LIBRARY_TAGS,
    MGPU_TAGS,
    PACE_TAGS,
    SUMMARY_KEYS,
    child_env,
    offline_wandb_env,
    run,
    same_curves,
    scalars,
    start,
    summary,
    wandb_records,
)

pytestmark = pytest.mark.slow

# Per back-end: iterations that learn cartpole within seconds on 2 CPU ranks of 64 environments.
LEARN_ITERATIONS = {"rsl_rl": 8, "skrl_torch": 8, "skrl_jax": 8}
#: The run's seed, given explicitly (rank r uses SEED + r); threads and hash seed: training_helpers.
SEED = 42
#: Cartpole's mean episode reward must grow by this factor over LEARN_ITERATIONS. A run is
#: deterministic for a seed here (skrl torch, seed 42: equal rewards to the last digit twice, and
#: with PYTHONHASHSEED 1 or 2, OMP_NUM_THREADS 2), but another machine or library build acts like a
#: new seed, so the bound comes from the spread over seeds. Measured once on the 2-core box under
#: load, 2 ranks x 64 envs, 8 iterations, last/first mean reward (first 9.7-19.6):
#:   rsl_rl      seeds 1-5: 3.56 3.45 4.56 5.22 4.24, seed 42: 3.84   (min 3.45)
#:   skrl_torch  seeds 1-5: 2.79 3.59 2.90 3.77 3.76, seed 42: 3.75   (min 2.79)
#:   skrl_jax    seeds 1-5: 3.28 3.15 2.49 2.10 2.58, seed 42: 2.94   (min 2.10)
#: 1.5 leaves 1.4x under the worst seed of the slowest learner (the former 1.8 left 1.17x).
LEARN_FACTOR = 1.5
#: W&B's step axis for each library: rsl-rl logs ``step=iteration``; skrl's curves come through W&B's
#: TensorBoard sync, which keeps the event file's step (skrl's environment steps) as ``global_step``.
STEP_KEY = {"rsl_rl": "_step", "skrl_torch": "global_step", "skrl_jax": "global_step"}


def _check_run(s: dict, run_dir, backend: str, task: str, iterations: int, saved=None) -> None:
    assert set(s) >= SUMMARY_KEYS, SUMMARY_KEYS - set(s)
    assert s["world_size"] == 2
    assert s["backend"] == ("rsl_rl" if backend == "rsl_rl" else "skrl")
    assert s["framework"] == ("jax" if backend == "skrl_jax" else "torch")
    assert (s["device"], s["task"], s["iterations"], s["exit_status"]) == ("cpu", task, iterations, 0)
    assert len(s["env_steps_per_s"]["per_rank"]) == 2 and s["env_steps_per_s"]["total"] > 0
    start_sums, end_sums = s["checksums"]["start"], s["checksums"]["end"]
    assert len(start_sums) == 2 and len(set(start_sums)) == 1, start_sums
    assert len(set(end_sums)) == 1 and end_sums != start_sums, end_sums
    assert s["checksums_equal"] is True
    assert s.get("drift") is None, s["drift"]  # healthy ranks: the periodic drift check found none
    # Healthy ranks: no straggler named; each rank's busy/wait split once steady iterations ran.
    assert not s.get("stragglers"), s.get("stragglers")
    if iterations >= 4:
        ranks = s["timing"]["per_rank"]
        assert [r["rank"] for r in ranks] == [0, 1] and all(r["busy_s"] > 0 for r in ranks), s["timing"]
        assert 0 < s["timing"]["collective_share"] < 1, s["timing"]
    # Rank 0 owns the run folder; rank 1 writes only inside rank_1/.
    names = {p.name for p in run_dir.iterdir()}
    # Each checkpoint has its metadata beside it (model_<N>.json: what --resume checks before spawning).
    models = {f"model_{i}.{ext}" for i in (saved or [iterations]) for ext in ("pt", "json")}
    curves = {n for n in names if n.startswith("events.out.tfevents.")}
    assert len(curves) == 1, names  # TensorBoard, through the library's own writer
    # rsl-rl's logger also stores the git state of the code it runs, as it does under Isaac Lab.
    # The run's ledger (events.jsonl) is node 0's mgpu's, beside rank 0's summary.
    assert names - curves - {"git"} == {"summary.json", "events.jsonl", "rank_1", *models}, names
    assert s["status"] == "finished"


@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch", "skrl_jax"])
def test_two_ranks_learn_cartpole_and_run_pendulum(backend, tmp_path):
    n = LEARN_ITERATIONS[backend]
    args = ("--num_envs", "64", "--max_iterations", str(n), "--seed", str(SEED), "--run_name", "learn",
            "--drift_interval", "2")  # every back-end's healthy ranks are compared 4 times  # fmt: skip
    code, out = run(backend, tmp_path, *args)
    assert code == 0, out[-3000:]
    s, run_dir = summary(tmp_path, backend, "learn")
    _check_run(s, run_dir, backend, "cartpole", n)
    first, last = s["first_mean_reward"], s["last_mean_reward"]
    print(f"{backend}: cartpole reward {first:.2f} -> {last:.2f}, {s['s_per_iteration']:.3f} s/it")
    assert last > LEARN_FACTOR * first, s["mean_rewards"]
    assert "parameters synchronised" in out and "env-steps/s" in out
    assert s["logger"] == "tensorboard"
    _check_curves(s, run_dir, backend, n)
    _check_listing(s, run_dir, tmp_path)

    # Episodes truncated at 16 steps (one rollout): every iteration ends episodes, so each has a reward.
    pendulum = ("--task", "pendulum", "--num_envs", "32", "--max_iterations", "2", "--save_interval", "1",
                "env.episode_length=16", "--logger", "wandb")  # fmt: skip
    code, out = run(backend, tmp_path, *pendulum, "--run_name", "pend", env=offline_wandb_env(tmp_path))
    assert code == 0, out[-3000:]
    s, run_dir = summary(tmp_path, backend, "pend")
    _check_run(s, run_dir, backend, "pendulum", 2, saved=[1, 2])
    assert s["logger"] == "wandb"
    _check_wandb(s, run_dir, backend, 2, tmp_path)


def _check_curves(s: dict, run_dir, backend: str, n: int) -> None:
    """The event file holds the library's curves and mgpu's, ``n`` points each on the library's
    step axis, the first iteration's pace under ``mgpu/warmup/``; rank 1 writes none."""
    assert not list((run_dir / "rank_1").rglob("events.out.tfevents.*")), "only rank 0 writes curves"
    curves = scalars(run_dir)
    reward_tag, *others = LIBRARY_TAGS[backend]
    assert len(curves[reward_tag]) == n, curves.get(reward_tag)
    for tag in (*others, *MGPU_TAGS):
        assert len(curves.get(tag, ())) == n, (tag, sorted(curves))
    # The library's step axis (rsl-rl: iterations from 0; skrl: environment steps) carries ours too.
    steps = [st for st, _ in curves[reward_tag]]
    assert [st for st, _ in curves["mgpu/mean_reward"]] == steps
    for tag in PACE_TAGS:
        assert [st for st, _ in curves[f"mgpu/warmup/{tag}"]] == steps[:1], tag
        assert [st for st, _ in curves[f"mgpu/{tag}"]] == steps[1:], tag
    steady = s["steady"]
    assert steady["warmup_iterations"] == 1 and steady["warmup_s"] > 0
    assert steady["s_per_iteration"] > 0 and steady["env_steps_per_s"] > 0
    assert [v for _, v in curves["mgpu/checksums_equal"]] == [1.0] * n
    assert [round(v, 3) for _, v in curves["mgpu/mean_reward"]] == [round(r, 3) for r in s["mean_rewards"]]


def _mgpu(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", *args], cwd=cwd, env=child_env(cwd),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _check_listing(s: dict, run_dir, cwd) -> None:
    """``mgpu runs --json`` lists the one run with its summary's figures; ``--last`` names its folder."""
    listed = _mgpu(cwd, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["folder"] == str(run_dir.relative_to(cwd))
    assert (row["library"], row["framework"], row["task"]) == (s["backend"], s["framework"], s["task"])
    ended = (row["world_size"], row["iterations"], row["status"], row["checksums_equal"])
    assert ended == (2, s["iterations"], "finished", True), ended
    steady = s["steady"]
    pace = (steady["s_per_iteration"], steady["env_steps_per_s"], steady["warmup_s"])
    assert (row["s_per_iteration"], row["env_steps_per_s"], row["warmup_s"]) == pace
    assert (row["reward_first"], row["reward_last"]) == (s["first_mean_reward"], s["last_mean_reward"])
    last = _mgpu(cwd, "runs", "--last")
    assert last.returncode == 0 and last.stdout == f"{row['folder']}\n"


def _check_wandb(s: dict, run_dir, backend: str, n: int, cwd) -> None:
    """One offline W&B run, rank 0's, of the id summary.json records, ended with exit code 0, whose
    history holds the event file's curves on the same steps."""
    run_files = sorted(cwd.rglob("*.wandb"))
    assert [p.name for p in run_files] == [f"run-{s['wandb_run_id']}.wandb"], "one W&B run: rank 0's"
    assert run_files[0].parent.parent == cwd / "wandb"
    found = wandb_records(run_files[0].parent)
    kinds = [r["type"] for r in found]
    assert "run" in kinds and kinds[-1] == "exit" and found[-1]["exit"].get("exit_code", 0) == 0
    assert next(r for r in found if r["type"] == "run")["run"]["run_id"] == s["wandb_run_id"]
    history = [r["history"]["item"] for r in found if r["type"] == "history"]
    tensorboard = scalars(run_dir)
    tags = (*LIBRARY_TAGS[backend], *MGPU_TAGS)
    assert all(len(tensorboard[tag]) == n for tag in tags), {tag: tensorboard[tag] for tag in tags}
    same_curves(history, tensorboard, tags, STEP_KEY[backend])
    reward = [h["mgpu/mean_reward"] for h in history if "mgpu/mean_reward" in h]
    assert [round(v, 3) for v in reward] == [round(r, 3) for r in s["mean_rewards"]]
    assert os.environ.get("WANDB_RUN_ID") is None or os.environ["WANDB_RUN_ID"] != s["wandb_run_id"]


@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch", "skrl_jax"])
def test_interrupt_saves_checkpoint_and_resume_continues(backend, tmp_path):
    proc = start(backend, tmp_path, "--num_envs", "32", "--max_iterations", "500", "--run_name", "stop")
    out_lines = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:  # wait until training is really under way
        out_lines.append(line)
        if "iteration 2/" in line or time.monotonic() > deadline:
            break
    # Each rank is named in ps: which rank of which run, in which attempt.
    titled = [
        p
        for p in psutil.Process(proc.pid).children(recursive=True)
        if p.cmdline()[0].startswith("mgpu rank ")
    ]
    titles = sorted(" ".join(p.cmdline()).strip() for p in titled)
    # Renamed, each keeps its environment readable: mgpu finds its ranks by their MGPU_RUN_ID there.
    assert sorted(p.environ().get("RANK") for p in titled) == ["0", "1"], titles
    assert [t.split(" | ")[0] for t in titles] == ["mgpu rank 0/2", "mgpu rank 1/2"], titles
    named = all("isaaclab_mgpu.worker" in t and "run " in t and t.endswith("attempt 0") for t in titles)
    assert named, titles
    proc.send_signal(signal.SIGINT)  # Ctrl-C to mgpu, as a user would
    rest, _ = proc.communicate(timeout=240)
    out = "".join(out_lines) + rest
    s, run_dir = summary(tmp_path, backend, "stop")
    assert s["interrupted"] is True and s["exit_status"] == 130, out[-3000:]
    assert s["status"] == "interrupted"
    stopped = s["end_iteration"]
    assert 2 <= stopped < 500
    assert (run_dir / f"model_{stopped}.pt").is_file()
    assert not list(run_dir.glob(".*tmp*")), "temporary checkpoint left behind"
    assert len(set(s["checksums"]["end"])) == 1
    assert proc.returncode == 130, out[-3000:]
    # The last line says how to go on: the same command, continuing this run's folder.
    last = [ln for ln in out.splitlines() if ln.strip()][-1]
    assert "to continue: mgpu train" in last and f"--resume {run_dir.relative_to(tmp_path)}" in last, out[
        -1500:
    ]

    # --max_iterations is the total; --resume continues the newest unfinished run in its folder.
    total = str(stopped + 2)
    code, out = run(backend, tmp_path, "--num_envs", "32", "--max_iterations", total, "--resume")
    assert code == 0, out[-3000:]
    assert f"resuming at iteration {stopped} of {total}" in out
    s2, again = summary(tmp_path, backend, "stop")
    assert again == run_dir
    assert (s2["start_iteration"], s2["end_iteration"], s2["iterations"]) == (0, stopped + 2, stopped + 2)
    assert s2["resumed_at"] == stopped and s2["status"] == "finished"
    assert s2["resumed_from"].endswith(f"model_{stopped}.pt")
    assert len(set(s2["checksums"]["start"])) == 1 and len(set(s2["checksums"]["end"])) == 1
    # One run, one record: both launches' attempts, and the whole run's time over both segments.
    assert [(a.get("launch", 0), a["outcome"]) for a in s2["attempts"]] == [
        (0, "interrupted"),
        (1, "finished"),
    ]
    segments = s2["segments"]
    assert [(g["start_iteration"], g["end_iteration"]) for g in segments] == [
        (0, stopped),
        (stopped, stopped + 2),
    ]
    whole = s2["whole"]
    assert whole["segments"] == 2 and whole["iterations_trained"] == stopped + 2
    assert whole["train_time_s"] == pytest.approx(s["train_time_s"] + s2["train_time_s"], abs=0.01)
    assert whole["train_time_s"] > s2["train_time_s"]
    assert whole["steady_s_per_iteration"] > 0 and whole["steady_env_steps_per_s"] > 0
    assert f"{stopped + 2} iterations in" in out and "over 2 segments" in out, out[-2000:]
