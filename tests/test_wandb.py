"""``--logger wandb`` for real: every back-end's 2-rank CPU run logs to one W&B run, offline.

``WANDB_MODE=offline`` needs no network: W&B writes its records to ``./wandb/offline-run-<time>-<id>/
run-<id>.wandb``, read back here with W&B's own reader of that file (``wandb leet inspect --json``).
Only rank 0 opens a W&B run (skrl upstream opens one on every rank; see ``rank/patches/skrl.py``), its
id is the one ``summary.json`` records, and it holds the same curves as the TensorBoard event file in
the run folder (the library's own and mgpu's ``mgpu/*`` scalars), on the same steps.

A run that goes on (``--resume RUN_FOLDER``, or mgpu's own restart after a rank died) continues the
same W&B run: each launch or attempt leaves one offline folder, all of the id ``summary.json``
records, and their steps follow on from each other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from restart_helpers import SHORT, Run, run_folders, summary_of, train_argv
from training_helpers import (
    BACKENDS,
    CHEAP,
    LIBRARY_TAGS,
    MGPU_TAGS,
    offline_wandb_env,
    scalars,
    summary,
    wandb_records,
)

#: W&B's step axis for each library: rsl-rl logs ``step=iteration``; skrl's curves come through W&B's
#: TensorBoard sync, which keeps the event file's step (skrl's environment steps) as ``global_step``.
STEP_KEY = {"rsl_rl": "_step", "skrl_torch": "global_step", "skrl_jax": "global_step"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch", "skrl_jax"])
def test_offline_wandb_run_has_the_curves_of_rank_0(backend, tmp_path):
    env = offline_wandb_env(tmp_path)
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2"]
    argv += [*BACKENDS[backend], *CHEAP, "--logger", "wandb", "--run_name", "wb"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    s, run_dir = summary(tmp_path, backend, "wb")
    assert s["status"] == "finished" and s["logger"] == "wandb"

    run_files = sorted(tmp_path.rglob("*.wandb"))
    assert [p.name for p in run_files] == [f"run-{s['wandb_run_id']}.wandb"], "one W&B run: rank 0's"
    assert run_files[0].parent.parent == tmp_path / "wandb"
    found = wandb_records(run_files[0].parent)
    kinds = [r["type"] for r in found]
    assert "run" in kinds and kinds[-1] == "exit" and found[-1]["exit"].get("exit_code", 0) == 0
    assert next(r for r in found if r["type"] == "run")["run"]["run_id"] == s["wandb_run_id"]

    history = [r["history"]["item"] for r in found if r["type"] == "history"]
    tensorboard = scalars(run_dir)
    step = STEP_KEY[backend]
    for tag in (*LIBRARY_TAGS[backend], *MGPU_TAGS):
        logged = [(int(h[step]), h[tag]) for h in history if tag in h]
        assert [st for st, _ in logged] == [st for st, _ in tensorboard[tag]], (tag, logged)
        assert len(logged) == 3
        # TensorBoard keeps float32: equal to its precision.
        assert [v for _, v in logged] == pytest.approx([v for _, v in tensorboard[tag]], rel=1e-6), tag
    reward = [h["mgpu/mean_reward"] for h in history if "mgpu/mean_reward" in h]
    assert [round(v, 3) for v in reward] == [round(r, 3) for r in s["mean_rewards"]]
    assert os.environ.get("WANDB_RUN_ID") is None or os.environ["WANDB_RUN_ID"] != s["wandb_run_id"]


def _segments(tmp_path, run_id: str) -> list[list[int]]:
    """The W&B steps of each offline folder of run ``run_id``, in the order they ran, each checked to
    hold rsl-rl's and mgpu's curves."""
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))  # W&B names them by start time
    assert all([p.name for p in f.glob("*.wandb")] == [f"run-{run_id}.wandb"] for f in folders), folders
    steps = []
    for folder in folders:
        found = wandb_records(folder)
        assert next(r for r in found if r["type"] == "run")["run"]["run_id"] == run_id
        history = [r["history"]["item"] for r in found if r["type"] == "history"]
        assert all("mgpu/mean_reward" in h and "Loss/surrogate" in h for h in history), history
        steps.append([int(h["_step"]) for h in history])
    return steps


@pytest.mark.slow
def test_a_restarted_and_then_resumed_run_goes_on_in_the_same_wandb_run(tmp_path):
    """One run met by both ways of going on: rank 1 SIGKILLed at iteration 5 (mgpu's restart), then,
    finished at 10, continued by ``--resume RUN_FOLDER`` to 14. Each attempt and launch is a segment
    of the same W&B run (the former ``test_a_resumed_run_goes_on_in_the_same_wandb_run``'s checks are
    the resume's here, on the third segment)."""
    env = offline_wandb_env(tmp_path)
    argv = train_argv("rsl_rl", "--max_restarts", "1", "--logger", "wandb", "--run_name", "wb", *SHORT)
    run = Run(argv, tmp_path, env)
    run.wait_for("iteration 5/10", 120)
    run.rank(1).send_signal(signal.SIGKILL)
    code, out = run.finish(240)
    assert code == 0, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    s = summary_of(folder)
    assert (s["status"], s["end_iteration"], len(s["restarts"])) == ("finished", 10, 1), s
    restart = s["restarts"][0]
    run_id = s["wandb_run_id"]
    first, second = _segments(tmp_path, run_id)
    # Each attempt's W&B segment holds every iteration it finished (the killed one's last included);
    # the second starts where the run resumed and goes to the end.
    assert first == list(range(restart["reached"])) and second == list(range(restart["resumed_from"], 10))
    # The iterations lost to the restart are in both segments; W&B keeps a run's steps increasing and
    # ignores a resumed segment's rows at steps it already has: the run shows every iteration once.
    assert first + [step for step in second if step > first[-1]] == list(range(10)), (first, second)
    print(f"restart: {restart}; W&B steps {first} then {second}")

    # --resume of the finished run with a higher total: the same W&B run goes on from 10.
    more = list(argv)
    more[more.index("--max_iterations") + 1] = "14"
    code, out = Run([*more, "--resume", str(folder)], tmp_path, env).finish(240)
    assert code == 0, out[-4000:]
    s = summary_of(folder)
    assert (s["status"], s["resumed_at"], s["end_iteration"]) == ("finished", 10, 14), s
    assert s["wandb_run_id"] == run_id
    assert _segments(tmp_path, run_id) == [first, second, list(range(10, 14))]  # every iteration once
