"""Isaac Lab end to end: ``mgpu train`` with 2 CPU ranks on Isaac Lab's own training code path.

For each library Isaac Lab's multi-GPU launcher drives (rsl_rl, skrl torch, skrl JAX, rl_games):
``Isaac-Cartpole-Direct``, kitless Newton physics (``presets=newton_mjwarp``), 64 environments per
rank. Each finished run must exit 0 and leave Isaac Lab's run folder with a TensorBoard event
file, a checkpoint and mgpu's ``summary.json`` (world size 2, equal parameter checksums, and no drift:
every run's ranks compare their parameters, optimizer state and normalizer statistics after every
iteration, ``--drift_interval 1``). A skrl run whose rank 1 is put out of step
(``--simulate_fault drift@3``) is named within two checks and stops with exit 65 (``--on_drift
stop``).

skrl JAX and rl_games train 3 iterations. rsl_rl and skrl torch (CI time: one test each) are killed
and resumed: rank 1 is SIGKILLed once rank 0 recorded the second checkpoint; mgpu's own restart
(rsl_rl, ``--max_restarts 1``) or ``mgpu train --resume RUN_FOLDER`` with the same options (skrl)
then continues that run through Isaac Lab's own resume code: the same folder, the iteration
counter going on from the newest checkpoint up to ``--max_iterations`` in all, and one TensorBoard
curve (read back with TensorBoard's directory loader: every step once, in order, up to the total).
The run's ``summary.json`` records it as the built-in worker's does (every attempt, the restart:
which rank failed and how, the iteration reached, resumed from, lost; the killed launch of the
skrl case as failed), and ``mgpu runs --json`` lists one run. The requeue signal (SIGUSR1) stops
an rsl_rl and an skrl run at a checkpoint through the library's own save (exit 75, ``stopped``),
and the same command with ``--resume auto`` finishes it in its folder.

W&B through Isaac Lab (rsl_rl, Isaac Lab's own ``--logger wandb``: rsl-rl's ``WandbLogWriter`` on
rank 0), offline: the launch leaves exactly one offline W&B run, read back with W&B's own reader of
its run file, whose history has every training iteration with the same curves as the TensorBoard
event file beside it.

Runs only where Isaac Lab is importable (Python 3.12 with ``.[isaaclab]``; ``.ci/run`` builds that
environment); skipped elsewhere. The robot and ground-plane files come from
``python -m isaaclab_mgpu.tools.isaac_assets`` unless ``ISAACSIM_ASSET_ROOT`` is already set. The first
run on a machine compiles Warp's kernels (minutes on CPU); later runs load them from Warp's cache.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from training_helpers import child_env, offline_wandb_env, same_curves, scalars, wandb_records

from isaaclab_mgpu.launcher import isaac_preflight as preflight

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12) or preflight._package_dir("isaaclab_rl") is None,
    reason="Isaac Lab is not installed here (Python 3.12 with .[isaaclab]; see README)",
)

LIBRARIES = {
    "rsl_rl": ["--rl_library", "rsl_rl"],
    "skrl": ["--rl_library", "skrl"],
    "skrl_jax": ["--rl_library", "skrl", "--ml_framework", "jax"],
    "rl_games": ["--rl_library", "rl_games", "agent.params.config.minibatch_size=2048"],
}
#: ``--drift_interval 1``: every run's ranks compare their state after every iteration (and must agree).
COMMAND = ["--device", "cpu", "--nproc_per_node", "2", "--task", "Isaac-Cartpole-Direct", "--num_envs", "64",
           "--max_iterations", "3", "--drift_interval", "1", "presets=newton_mjwarp"]  # fmt: skip
#: One run takes 1-2 minutes on a quiet 2-core machine once Warp's kernels are cached; the first
#: compiles them (several minutes), and CI machines are shared.
TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def asset_root(tmp_path_factory) -> str:
    """A local Isaac asset root with the cartpole robot and ground plane."""
    given = os.environ.get("ISAACSIM_ASSET_ROOT")
    if given:
        return given
    root = tmp_path_factory.mktemp("isaac_assets")
    build = [sys.executable, "-m", "isaaclab_mgpu.tools.isaac_assets", str(root)]
    subprocess.run(build, check=True, timeout=300)
    return str(root)


def check_run_folder(run_dir: Path, s: dict, library: str) -> None:
    """What every finished 2-rank Isaac Lab run leaves in its folder, summary.json included."""
    assert run_dir.parts[-3] == library.split("_jax")[0]  # logs/<library>/<experiment>/<run>
    assert s["world_size"] == 2 and s["checksums_equal"] is True, s
    # the ranks' parameters, optimizer state and normalizer statistics matched at every check
    assert s.get("drift") is None, s["drift"]
    assert s["exit_status"] == 0 and s["run_dir"] == str(run_dir)
    assert len(set(s["checksums"]["start"])) == 1 and s["checksums"]["start"] != s["checksums"]["end"]
    assert s["env_steps_per_s"]["total"] > 0 and len(s["env_steps_per_s"]["per_rank"]) == 2
    assert (run_dir / "run.json").is_file() and (run_dir / "params" / "agent.yaml").is_file()
    assert (run_dir / "rank_1" / "params" / "env.yaml").is_file()
    assert list(run_dir.rglob("events.out.tfevents.*")), sorted(run_dir.rglob("*"))
    assert s["checkpoint"] and Path(s["checkpoint"]).is_file() and run_dir in Path(s["checkpoint"]).parents


#: rsl_rl and skrl torch run in :func:`test_isaac_run_resumes_in_its_folder_after_a_rank_died`.
@pytest.mark.slow
@pytest.mark.parametrize("library", ["skrl_jax", "rl_games"])
def test_isaac_cartpole_on_two_cpu_ranks(library, asset_root, tmp_path):
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *COMMAND, *LIBRARIES[library]]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    summaries = sorted((tmp_path / "logs").glob("*/*/*/summary.json"))
    assert len(summaries) == 1, out[-3000:]
    run_dir = summaries[0].parent
    s = json.loads(summaries[0].read_text())
    check_run_folder(run_dir, s, library)
    assert s["iterations"] == 3 and s["start_iteration"] == 0, s
    rate = s["env_steps_per_s"]["total"]
    print(f"{library}: {wall:.0f} s wall, {s['s_per_iteration']} s/it, {rate:.0f} env-steps/s")


@pytest.mark.slow
def test_isaac_rsl_rl_logs_its_curves_to_one_offline_wandb_run(asset_root, tmp_path):
    env = offline_wandb_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *COMMAND, *LIBRARIES["rsl_rl"]]
    argv += ["--logger", "wandb"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    (found,) = (tmp_path / "logs").glob("rsl_rl/*/*/summary.json")
    run_dir, s = found.parent, json.loads(found.read_text())
    check_run_folder(run_dir, s, "rsl_rl")
    assert s["iterations"] == 3, s

    # One W&B run for the launch: rank 0's (rsl-rl logs on rank 0 alone), under WANDB_DIR.
    run_files = sorted(tmp_path.rglob("*.wandb"))
    assert len(run_files) == 1 and run_files[0].parent.parent == tmp_path / "wandb", run_files
    assert run_files[0].parent.name.startswith("offline-run-"), run_files
    found = wandb_records(run_files[0].parent)
    run_id = next(r for r in found if r["type"] == "run")["run"]["run_id"]
    assert run_files[0].name == f"run-{run_id}.wandb"
    assert found[-1]["type"] == "exit" and found[-1]["exit"].get("exit_code", 0) == 0, found[-1]
    history = [r["history"]["item"] for r in found if r["type"] == "history"]
    # rsl-rl logs iteration ``it`` at W&B step ``it``: every training iteration once, in order.
    assert [int(h["_step"]) for h in history] == [0, 1, 2], history
    tensorboard = scalars(run_dir)
    wanted = {"Train/mean_reward", "Loss/surrogate", "Loss/learning_rate", "Policy/mean_std"}
    assert wanted <= set(tensorboard), sorted(tensorboard)
    same_curves(history, tensorboard, tensorboard, "_step")  # the event file's, beside them
    print(f"rsl_rl W&B run {run_id}: steps {[h['_step'] for h in history]}, {len(tensorboard)} curves")


#: Resume: 64 environments, 6 iterations in all, a checkpoint after every iteration.
RESUME = {
    "rsl_rl": (["--rl_library", "rsl_rl", "agent.save_interval=1"], "", "model_*.pt", "Loss/learning_rate"),
    "skrl": (["--rl_library", "skrl", "agent.agent.experiment.checkpoint_interval=32"], "checkpoints",
             "agent_*.pt", "Loss / Policy loss"),
}  # fmt: skip
RESUME_TOTAL = 6


def _rank_pid(mgpu: subprocess.Popen, rank: str) -> int | None:
    import psutil

    for child in psutil.Process(mgpu.pid).children(recursive=True):
        try:
            if child.environ().get("RANK") == rank and "isaaclab_mgpu" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def _kill_rank_1_after(mgpu: subprocess.Popen, cwd: Path, library: str, iterations: int) -> str:
    """SIGKILL rank 1 once the library has saved the checkpoint of ``iterations`` in the run folder
    (its file seen within 0.1 s); return mgpu's output once it has ended.

    Rank 0 cannot save again before it notices rank 1 is gone: every iteration's update and mgpu's
    per-iteration agreement are collectives, and they come before the library's next save. The
    running summary.json would say it later: it is the ledger's fold, written every few seconds by
    mgpu, by which time a 6-iteration run may have ended (seen once: the restart resumed at the end
    and trained nothing)."""
    _, sub, pattern, _ = RESUME[library]
    files = "/".join(part for part in ("*", "*", sub, pattern) if part)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and mgpu.poll() is None:
        saved = max((_saved_iteration(library, p) for p in (cwd / "logs" / library).glob(files)), default=0)
        pid = _rank_pid(mgpu, "1") if saved >= iterations else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    out, _ = mgpu.communicate(timeout=TIMEOUT_S)
    return out


def _saved_iteration(library: str, checkpoint: Path) -> int:
    """The iterations done when ``checkpoint`` was saved: rsl-rl names it by the last one's index,
    skrl by its timestep (32 a rollout here)."""
    counter = int(checkpoint.stem.split("_")[-1])
    return counter + 1 if library == "rsl_rl" else counter // 32


def last_of(library: str) -> str:
    """The checkpoint a resumed run of :data:`RESUME_TOTAL` iterations ends with (the library's name)."""
    return f"model_{RESUME_TOTAL - 1}.pt" if library == "rsl_rl" else f"agent_{RESUME_TOTAL * 32}.pt"


def _runs_json(cwd: Path, env: dict[str, str]) -> list[dict]:
    """``mgpu runs --json`` of the runs under ``cwd/logs``."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "runs", "logs", "--json"]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


#: rsl_rl through mgpu's own restart (``--max_restarts 1``: one command), skrl through ``--resume
#: RUN_FOLDER`` by hand after the killed run ended: both paths of :mod:`isaaclab_mgpu.rank.isaac_resume`.
RESUME_MODES = {"rsl_rl": "restart", "skrl": "resume"}


@pytest.mark.slow
@pytest.mark.parametrize("library", list(RESUME))
def test_isaac_run_resumes_in_its_folder_after_a_rank_died(library, asset_root, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    extra, sub, pattern, tag = RESUME[library]
    mode = RESUME_MODES[library]
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    command = [*COMMAND, *extra]
    command[command.index("--max_iterations") + 1] = str(RESUME_TOTAL)
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *command]
    first = subprocess.Popen(
        [*argv, *(["--max_restarts", "1"] if mode == "restart" else [])],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    out = _kill_rank_1_after(first, tmp_path, library, 2)  # the run's second checkpoint
    runs = [p for p in (tmp_path / "logs" / library).glob("*/*") if p.is_dir()]
    assert len(runs) == 1, (runs, out[-3000:])
    run_dir = runs[0]
    if mode == "restart":
        assert first.returncode == 0, out[-4000:]
        # The restart line: who failed, its class and reason (mgpu's verdict), what resumes.
        said = re.search(
            r"rank 1 on \S+ failed with signal SIGKILL after iteration (\d+)(?: \(.*?\))?; "
            r"restart 1 of 1: resuming at iteration (\d+), (\d+) iteration\(s\) lost",
            out,
        )
        assert said, out[-3000:]
    else:
        assert first.returncode not in (0, None), out[-3000:]
        # the killed run is recorded in the folder Isaac Lab named: failed, which rank and how
        killed = json.loads((run_dir / "summary.json").read_text())
        (attempt,) = killed["attempts"]
        assert (killed["status"], attempt["outcome"], attempt["rank"], attempt["how"]) == (
            "failed", "failed", 1, "signal SIGKILL"), killed  # fmt: skip
        assert attempt["reached"] >= attempt["checkpoint"] >= 2 and killed["restarts"] == [], killed
        assert attempt["lost"] == attempt["reached"] - attempt["checkpoint"], killed
        assert _runs_json(tmp_path, env)[0]["status"] == "failed"
        proc = subprocess.run([*argv, "--resume", str(run_dir)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)  # fmt: skip
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
    # rank 0 named where it goes on: the newest whole checkpoint (a kill can cut one short)
    found = re.search(rf"resuming at iteration (\d+) of {RESUME_TOTAL} from (\S+)", out)
    assert found, out[-3000:]
    resumed_at, source = int(found.group(1)), Path(found.group(2))
    assert source.parent == run_dir / sub and source.match(pattern) and zipfile.is_zipfile(source)
    assert resumed_at == _saved_iteration(library, source) >= 2  # rsl-rl: last index done
    assert [p for p in (tmp_path / "logs" / library).glob("*/*") if p.is_dir()] == [run_dir]
    # rank 1 loaded rank 0's file as handed over through torchrun's store (no shared file system
    # needed), from a private copy removed when training ended
    logs = (tmp_path / "logs" / "mgpu").glob("*/*/attempt_*/rank_1/stdout.log")
    rank_1 = "".join(p.read_text() for p in logs)
    copies = re.findall(r"Loading model checkpoint from: (\S*mgpu-resume-\S*)", rank_1)
    assert len(copies) == 1 and Path(copies[0]).name == source.name, rank_1[-2000:]
    assert not Path(copies[0]).exists()
    s = json.loads((run_dir / "summary.json").read_text())
    check_run_folder(run_dir, s, library)
    # one run across the failure: counted from its first start, resumed at the checkpoint
    assert (s["status"], s["start_iteration"], s["resumed_at"], s["end_iteration"]) == (
        "finished", 0, resumed_at, RESUME_TOTAL), s  # fmt: skip
    assert s["iterations"] == RESUME_TOTAL and len(s["mean_rewards"]) == RESUME_TOTAL, s
    assert s["resumed_from"] == str(source) and s["continues"] is None, s
    assert s["checkpoint_iteration"] == RESUME_TOTAL and Path(s["checkpoint"]).name == last_of(library), s
    outcomes = [a["outcome"] for a in s["attempts"]]
    if mode == "restart":  # mgpu's own restart, recorded the embedded worker's way
        (restart,) = s["restarts"]
        assert outcomes == ["failed", "finished"], s["attempts"]
        assert (restart["rank"], restart["how"], restart["resumed_from"]) == (1, "signal SIGKILL", resumed_at)
        assert (restart["reached"], restart["checkpoint"], restart["lost"]) == tuple(
            int(v) for v in (said.group(1), said.group(2), said.group(3))), restart  # fmt: skip
        assert restart["lost"] == restart["reached"] - resumed_at >= 0, restart
        assert s["attempts"][1]["started_at"] == resumed_at, s["attempts"]
    else:  # the killed launch's attempt first (another mgpu: launch 0), then this one's; no restart
        assert outcomes == ["failed", "finished"] and s["restarts"] == [], s
        assert [a["launch"] for a in s["attempts"]] == [0, 1], s["attempts"]
    (row,) = _runs_json(tmp_path, env)
    assert Path(tmp_path, row["folder"]).resolve() == run_dir.resolve(), row
    assert (row["status"], row["restarts"], row["iterations"], row["chain"]) == (
        "finished", 1 if mode == "restart" else 0, RESUME_TOTAL, []), row  # fmt: skip
    last = last_of(library)
    assert (run_dir / sub / last).is_file(), sorted((run_dir / sub).iterdir())

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [e.step for e in acc.Scalars(tag)]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # one per attempt, one curve
    assert steps == sorted(set(steps)), steps  # every step once, in order
    resumed = set(range(resumed_at, RESUME_TOTAL)) if library == "rsl_rl" else {
        32 * (k + 1) for k in range(resumed_at, RESUME_TOTAL)}  # fmt: skip
    assert resumed <= set(steps) and steps[-1] == max(resumed), steps
    print(f"{library} ({mode}): resumed at iteration {resumed_at} of {RESUME_TOTAL}; {tag!r} steps {steps}")


def _with(command: list[str], option: str, value: str) -> list[str]:
    """``command`` with ``option``'s value replaced."""
    out = list(command)
    out[out.index(option) + 1] = value
    return out


@pytest.mark.slow
def test_a_drifting_isaac_lab_rank_is_named_and_on_drift_stop_ends_the_run_with_65(asset_root, tmp_path):
    """skrl torch on Isaac Lab's path (the cartpole config standardises states and values with
    skrl's running scaler, kept equal on every rank by mgpu's patch): rank 1's scaler is nudged
    before iteration 3 (``--simulate_fault drift@3``), the ranks compare every 2 iterations: the
    drift is named once within 2·K iterations (rank, component, since when), every rank stops
    there after skrl saved, and mgpu exits 65 with the run ``drifted``, never restarted."""
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    command = _with(_with(COMMAND, "--max_iterations", "8"), "--drift_interval", "2")
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *command, *LIBRARIES["skrl"],
            "--simulate_fault", "drift@3", "--on_drift", "stop", "--max_restarts", "1"]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 65, out[-4000:]
    assert out.count("mgpu: warning: drift: rank 1") == 1, out[-4000:]  # named once, by mgpu
    (run_dir,) = [p for p in (tmp_path / "logs" / "skrl").glob("*/*") if p.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    d = s["drift"]
    assert (d["rank"], d["component"]) == (1, "normalizer"), d
    assert 3 <= d["found_at"] <= 3 + 2 * 2 and d["since_iteration"] < 3, d
    at = d["found_at"]
    assert (s["status"], s["exit_status"], s["end_iteration"]) == ("drifted", 65, at), s
    assert [a["outcome"] for a in s["attempts"]] == ["drifted"], s["attempts"]  # no restart
    assert (run_dir / "checkpoints" / f"agent_{32 * at}.pt").is_file()  # rank 0's state, saved by skrl
    (row,) = _runs_json(tmp_path, env)
    assert row["drift"] == f"rank 1 normalizer @{at}", row


def _isaac_train_parser(library: str):
    """Isaac Lab's own ``train`` parser for ``library``, caught just before it parses."""
    import argparse
    import importlib

    module = importlib.import_module(f"isaaclab_rl.entrypoints.backends.train_{library}")
    caught = []
    original = argparse.ArgumentParser.parse_known_args

    def catch(self, args=None, namespace=None):
        if len(self._actions) < 10:  # a helper parser (rsl-rl's callback pre-parse), not train's own
            return original(self, args, namespace)
        caught.append(self)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_known_args = catch
    try:
        module._parse_args(["--task", "Isaac-Cartpole-Direct"])
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_known_args = original
    assert caught, f"Isaac Lab's train_{library} built no parser"
    return caught[0]


@pytest.mark.parametrize("library", ["rsl_rl", "skrl", "rl_games"])
def test_every_option_of_isaac_lab_train_is_accepted(library):
    from isaaclab_mgpu.contract.worker_args import option_strings

    theirs = {s for a in _isaac_train_parser(library)._actions for s in a.option_strings} - {"-h", "--help"}
    assert theirs - option_strings() == set()


@pytest.mark.slow
def test_an_interrupted_isaac_lab_rank_exits_like_an_embedded_one(asset_root, tmp_path):
    """Ctrl-C during Isaac Lab's training: Isaac Lab ends ``learn`` quietly on the KeyboardInterrupt,
    and the run still exits 130 (the embedded worker's code), not 1."""
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    command = [a if a != "3" else "100000" for a in COMMAND]  # --max_iterations: until stopped
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *command, *LIBRARIES["rsl_rl"]]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:  # until Isaac Lab's training is under way
        lines.append(line)
        if "Learning iteration 2/" in line or "[mgpu] iteration 2/" in line:
            break
    assert proc.poll() is None, "".join(lines)[-3000:]
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=TIMEOUT_S)
    out = "".join(lines) + rest
    assert proc.returncode == 130, out[-4000:]


#: The checkpoint a run stopped after ``n`` iterations saved (rsl-rl names the last index done).
STOP_CHECKPOINT = {
    "rsl_rl": lambda n: f"model_{n - 1}.pt",
    "skrl": lambda n: f"checkpoints/agent_{32 * n}.pt",
}


@pytest.mark.slow
@pytest.mark.parametrize("library", ["rsl_rl", "skrl"])
def test_the_requeue_signal_checkpoints_an_isaac_lab_run_and_resume_auto_finishes_it(
    library, asset_root, tmp_path
):
    """SIGUSR1 (SLURM's warning) to ``mgpu train`` of an Isaac Lab run: every rank stops at the
    next iteration boundary after the library saved through its own code (rsl-rl
    ``OnPolicyRunner.save``, then out of ``learn``; skrl ``write_checkpoint``, and Isaac Lab's final
    ``agent_<total>`` save skipped), mgpu exits 75 with the run ``stopped``; the same command with
    ``--resume auto`` then continues that run in its folder up to the total."""
    total = 16
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    command = [a if a != "3" else str(total) for a in COMMAND]
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", *command, *RESUME[library][0], "--resume", "auto"]
    first = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)  # fmt: skip
    # The signal goes once the library saved after 2 iterations (it saves after each one here):
    # summary.json is no clock for it, the ledger folds progress only every few seconds (0 to 7
    # iterations at once measured on a quiet machine, 10 of 10 on CI's).
    second = STOP_CHECKPOINT[library](2)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and first.poll() is None:
        if any((tmp_path / "logs" / library).glob(f"*/*/{second}")):
            first.send_signal(signal.SIGUSR1)
            break
        time.sleep(0.1)
    out, _ = first.communicate(timeout=TIMEOUT_S)
    assert first.returncode == 75, out[-4000:]
    assert "checkpoint requested: saving at iteration" in out, out[-3000:]
    (run_dir,) = [p for p in (tmp_path / "logs" / library).glob("*/*") if p.is_dir()]
    s = json.loads((run_dir / "summary.json").read_text())
    stopped_at = s["end_iteration"]
    assert (s["status"], s["exit_status"], s["checkpoint_iteration"]) == ("stopped", 75, stopped_at), s
    assert 2 <= stopped_at < total and [a["outcome"] for a in s["attempts"]] == ["stopped"], s
    sub, pattern = RESUME[library][1:3]
    newest = max((run_dir / sub).glob(pattern), key=lambda p: int(p.stem.split("_")[-1]))
    # the stop's own checkpoint is the newest: none claims iterations never trained
    assert newest == run_dir / STOP_CHECKPOINT[library](stopped_at) and s["checkpoint"] == str(newest), s

    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "--resume auto: the newest unfinished run: continuing" in out, out[-3000:]
    assert f"resuming at iteration {stopped_at} of {total}" in out, out[-3000:]
    assert [p for p in (tmp_path / "logs" / library).glob("*/*") if p.is_dir()] == [run_dir]
    s = json.loads((run_dir / "summary.json").read_text())
    check_run_folder(run_dir, s, library)
    assert (s["status"], s["start_iteration"], s["resumed_at"], s["end_iteration"]) == (
        "finished", 0, stopped_at, total), s  # fmt: skip


@pytest.mark.slow
def test_mgpu_scale_sweeps_an_isaac_lab_task_over_one_and_two_ranks(asset_root, tmp_path):
    env = child_env(tmp_path)
    env["ISAACSIM_ASSET_ROOT"] = asset_root
    argv = [sys.executable, "-m", "isaaclab_mgpu", "scale", "--device", "cpu", "--world_sizes", "1,2",
            "--task", "Isaac-Cartpole-Direct", "--num_envs", "64", "--iterations", "3", "--no_ceiling",
            "--out", str(tmp_path / "out"), *LIBRARIES["rsl_rl"], "presets=newton_mjwarp"]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "2 ranks × 64 envs: " in proc.stdout and "% efficient" in proc.stdout, out[-3000:]
    doc = json.loads((tmp_path / "out" / "scale.json").read_text())
    assert doc["complete"] is True and doc["world_sizes"] == [1, 2]
    assert [p["point"]["world_size"] for p in doc["points"]] == [1, 2]
    for p in doc["points"]:
        assert p["status"] == "ok" and p["env_steps_per_s"] > 0 and p["num_envs_per_rank"] == 64, p
        summary = json.loads(Path(p["run_dirs"][0], "summary.json").read_text())
        assert (
            summary["task"].startswith("Isaac-Cartpole-Direct")
            and summary["world_size"] == p["point"]["world_size"]
        )
    assert (tmp_path / "out" / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
