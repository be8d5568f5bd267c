"""``--logger wandb`` for real, offline (``WANDB_MODE=offline``: W&B writes its records to
``./wandb/offline-run-<time>-<id>/run-<id>.wandb``, read back with W&B's own reader of that file).
Each back-end's single W&B run (rank 0's, of the id ``summary.json`` records, the event file's curves
on the same steps) is checked on its pendulum run in tests/test_training.py, which holds this file's
former per-back-end run.

A run that goes on (``--resume RUN_FOLDER``, or mgpu's own restart after a rank died) continues the
same W&B run: each launch or attempt leaves one offline folder, all of the id ``summary.json``
records, and their steps follow on from each other.
"""

from __future__ import annotations

import signal

import pytest
from restart_helpers import SHORT, Run, run_folders, summary_of, train_argv
from training_helpers import offline_wandb_env, wandb_records


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
