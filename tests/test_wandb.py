"""``--logger wandb`` for real: every back-end's 2-rank CPU run logs to one W&B run, offline.

``WANDB_MODE=offline`` needs no network: W&B writes its records to ``./wandb/offline-run-<time>-<id>/
run-<id>.wandb``, read back here with W&B's own reader of that file (``wandb leet inspect --json``).
Only rank 0 opens a W&B run (skrl upstream opens one on every rank; see ``rank/patches/skrl.py``), its
id is the one ``summary.json`` records, and it holds the same curves as the TensorBoard event file in
the run folder (the library's own and mgpu's ``mgpu/*`` scalars), on the same steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from training_helpers import BACKENDS, CHEAP, LIBRARY_TAGS, MGPU_TAGS, child_env, scalars, summary

#: W&B's step axis for each library: rsl-rl logs ``step=iteration``; skrl's curves come through W&B's
#: TensorBoard sync, which keeps the event file's step (skrl's environment steps) as ``global_step``.
STEP_KEY = {"rsl_rl": "_step", "skrl_torch": "global_step", "skrl_jax": "global_step"}


def records(path) -> list[dict]:
    """Every record of the offline W&B run at ``path``, as W&B's own reader prints them."""
    cmd = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch", "skrl_jax"])
def test_offline_wandb_run_has_the_curves_of_rank_0(backend, tmp_path):
    env = {k: v for k, v in child_env(tmp_path).items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2"]
    argv += [*BACKENDS[backend], *CHEAP, "--logger", "wandb", "--run_name", "wb"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    s, run_dir = summary(tmp_path, backend, "wb")
    assert s["status"] == "finished" and s["logger"] == "wandb"

    run_files = sorted(tmp_path.rglob("*.wandb"))
    assert [p.name for p in run_files] == [f"run-{s['wandb_run_id']}.wandb"], "one W&B run: rank 0's"
    assert run_files[0].parent.parent == tmp_path / "wandb"
    found = records(run_files[0].parent)
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
