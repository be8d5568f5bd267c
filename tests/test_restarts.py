"""mgpu's own restarts, resume and requeue, with real processes: 2 CPU ranks under real torchrun (or
mgpu's JAX launcher), real rsl-rl/skrl training, real signals; SLURM's ``scontrol`` is a stand-in
script on PATH that records its arguments. Each run is 10 short iterations with a checkpoint every
2, so a restart loses at most one iteration and a test takes tens of seconds (skrl JAX: minutes).

The simulated kill and the simulated requeue (``--simulate_fault kill@5,rank=1``, ``requeue@3``) are
checked in tests/test_ledger.py, on the same run as the ledger's story of each. The killed-rank
restart runs on both launch paths (torchrun: rsl-rl; mgpu's JAX launcher: skrl JAX); hang restarts,
requeues and the rest are the launcher's and run on rsl-rl (the stall watch: tests/test_stall.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest
from restart_helpers import (
    SHORT,
    Run,
    free_port,
    one_resumed_run,
    run_folders,
    summary_of,
    tensorboard_steps,
    train_argv,
)
from training_helpers import child_env

from isaaclab_mgpu.contract import events
from isaaclab_mgpu.contract.errors import EXIT_NOT_RESTARTABLE

#: Seconds a whole test run may take: two launches of 10 iterations (skrl JAX compiles for tens of
#: seconds per launch on this 2-core box; measured 100 s for the pair, rsl-rl 50 s).
LIMIT = {"rsl_rl": 240, "skrl_torch": 240, "skrl_jax": 480}
#: Seconds from a rank's SIGKILL to the restart line: generous for a loaded box (about 4 s here),
#: and below torchrun's own 30 s wait for the survivors.
RESTART_WITHIN_S = 20


def _checkpoint_before(run: Run) -> int:
    """The iteration of the newest checkpoint the console announced so far."""
    saved = [int(line.rsplit("model_", 1)[1].split(".")[0]) for line in run.lines if "checkpoint " in line]
    return max(saved, default=0)


@pytest.mark.slow
# The two launch paths (torchrun, mgpu's JAX launcher). skrl torch's rank continues from mgpu's
# MGPU_RESUME as on --resume: tests/test_training.py's interrupt-and-resume test, per back-end.
@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_jax"])
def test_killed_rank_resumes_in_the_same_run(backend, tmp_path):
    run = Run(train_argv(backend, "--max_restarts", "1", *SHORT), tmp_path)
    run.wait_for("iteration 5/10", LIMIT[backend] / 2)
    saved = _checkpoint_before(run)
    run.rank(1).send_signal(signal.SIGKILL)
    killed = time.monotonic()
    # The survivor waits in a collective with a dead rank and can save nothing: the attempt is
    # stopped in seconds (2 s grace, SIGKILL 1 s later), not torchrun's 30 s (measured before: 32 s).
    run.wait_for("restart 1 of 1: resuming at iteration", RESTART_WITHIN_S)
    assert time.monotonic() - killed < RESTART_WITHIN_S
    code, out = run.finish(LIMIT[backend])
    assert code == 0, out[-4000:]
    s = one_resumed_run(tmp_path, backend, saved)
    assert f"resuming at iteration {s['resumed_at']} of 10" in out
    # The cause is torchrun's first observed failure: rank 1's SIGKILL, or (on a loaded machine)
    # the SIGTERM torchrun sent rank 0 while stopping the group, if that is seen first.
    assert s["restarts"][0]["outcome"] == "failed", s["restarts"]
    assert s["restarts"][0]["how"] in ("signal SIGKILL", "signal SIGTERM"), s["restarts"]


@pytest.mark.slow
def test_stalled_rank_is_restarted_after_its_stacks(tmp_path):
    run = Run(train_argv("rsl_rl", "--max_restarts", "1", "--stall_timeout", "8", *SHORT), tmp_path)
    run.wait_for("iteration 5/10", 120)
    saved = _checkpoint_before(run)
    run.rank(1).send_signal(signal.SIGSTOP)
    code, out = run.finish(240)
    assert code == 0, out[-4000:]
    assert "hang:" in out and "Python stack" in out, out[-4000:]  # the stacks came first
    s = one_resumed_run(tmp_path, "rsl_rl", saved)
    assert s["restarts"][0]["outcome"] == "hung"


@pytest.mark.slow
def test_restarts_used_up_exit_with_the_last_failure_naming_both(tmp_path):
    run = Run(train_argv("rsl_rl", "--max_restarts", "1", *SHORT), tmp_path)
    run.wait_for("iteration 3/10", 120)
    run.rank(1).send_signal(signal.SIGKILL)
    resumed = run.wait_for("resuming at iteration", 120)
    run.wait_for("iteration 5/10", 120, start=resumed)
    run.rank(1).send_signal(signal.SIGSEGV)
    code, out = run.finish(120)
    assert code == 128 + signal.SIGSEGV, out[-4000:]  # the last failure's own code
    last = out.strip().splitlines()[-1]
    assert "restarts used up (1 of 1)" in last, last
    assert "attempt 0: rank 1 on" in last and "signal SIGKILL" in last, last
    assert "attempt 1: rank 1 on" in last and "signal SIGSEGV" in last, last
    assert last.index("attempt 0") < last.index("attempt 1")
    (folder,) = run_folders(tmp_path, "rsl_rl")
    s = summary_of(folder)
    assert (s["status"], s["exit_status"]) == ("failed", 139), s
    assert [a["outcome"] for a in s["attempts"]] == ["failed", "failed"]


@pytest.mark.slow
def test_a_rank_code_equal_to_a_reserved_one_exits_1(tmp_path):
    script = tmp_path / "four.py"
    script.write_text("import os, sys\nsys.exit(4 if os.environ['RANK'] == '1' else 0)\n")
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            "--script", str(script)]  # fmt: skip
    code, out = Run(argv, tmp_path).finish(120)
    assert code == 1, out[-3000:]
    assert "rank 1" in out and "exit code 4" in out.strip().splitlines()[-1], out[-3000:]


def _node(rank: int, port: int, cwd: Path, nnodes: str = "2") -> Run:
    argv = train_argv(
        "rsl_rl", "--nnodes", nnodes, "--node_rank", str(rank), "--master_addr", "127.0.0.1",
        "--master_port", str(port), "--max_restarts", "1", "--log_dir", f"logs/mgpu{rank}", *SHORT, nproc=1,
    )  # fmt: skip
    return Run(argv, cwd)


@pytest.mark.slow
def test_two_nodes_resume_after_a_lost_rank_and_a_lost_node(tmp_path):
    # A rank's death is not its node's: with shrinking allowed (--nnodes 1:2) node 1's mgpu lives
    # and restarts its torchrun, so node 0 must not go on alone (tests/test_shrink.py kills node 0's
    # rank the same way, and a whole node for the shrink).
    port = free_port()
    node0, node1 = _node(0, port, tmp_path, "1:2"), _node(1, port, tmp_path, "1:2")
    node0.wait_for("iteration 5/10", 180)
    saved = _checkpoint_before(node0)
    node1.rank(1).send_signal(signal.SIGKILL)  # node 1's rank
    for node in (node0, node1):
        code, out = node.finish(240)
        assert code == 0, out[-4000:]
        assert "shrinking" not in out, out[-4000:]
    s = one_resumed_run(tmp_path, "rsl_rl", saved)
    assert (s["world_size"], s["num_envs_per_rank"]) == (2, 16), s
    ledger = events.read(run_folders(tmp_path, "rsl_rl")[0])
    assert ledger is not None and not [e for e in ledger.events if isinstance(e, events.Shrink)]

    # Node 1's mgpu itself is killed; started again with the same command it joins node 0's restart.
    other = tmp_path / "second"
    other.mkdir()
    port = free_port()
    node0, node1 = _node(0, port, other), _node(1, port, other)
    node0.wait_for("iteration 5/10", 180)
    saved = _checkpoint_before(node0)
    os.killpg(node1.proc.pid, signal.SIGKILL)  # mgpu and its process group: its watchdog stops the rank
    node1.finish(30)
    node1 = _node(1, port, other)
    for node in (node0, node1):
        code, out = node.finish(240)
        assert code == 0, out[-4000:]
    one_resumed_run(other, "rsl_rl", saved)


def _slurm_env(cwd: Path, restart_count: int = 0) -> dict[str, str]:
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {cwd / "scontrol.calls"}\n')
    scontrol.chmod(0o755)
    env = child_env(cwd)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SLURM_JOB_ID="4242", SLURM_NNODES="1")
    if restart_count:
        env["SLURM_RESTART_COUNT"] = str(restart_count)
    return env


@pytest.mark.slow
def test_slurm_warning_signal_checkpoints_requeues_and_the_requeued_job_finishes(tmp_path):
    argv = train_argv("rsl_rl", "--requeue", *SHORT)
    run = Run(argv, tmp_path, _slurm_env(tmp_path))
    run.wait_for("iteration 3/10", 120)
    tree = [psutil.Process(run.proc.pid), *psutil.Process(run.proc.pid).children(recursive=True)]
    for proc in tree:  # as SLURM may: to every process of the job step
        proc.send_signal(signal.SIGUSR1)
    code, out = run.finish(120)
    assert code == 75, out[-4000:]
    assert (tmp_path / "scontrol.calls").read_text().split() == ["requeue", "4242"]
    assert "requeued SLURM job 4242" in out and "Traceback" not in out, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    s = summary_of(folder)
    stopped = s["end_iteration"]
    assert s["status"] == "requeued" and s["slurm_job_id"] == "4242" and 3 <= stopped < 10, s
    assert (folder / f"model_{stopped}.pt").is_file()
    assert s["attempts"][-1]["outcome"] == "stopped"  # every rank ended by itself, none failed

    # The requeued job runs the same command again: it continues that run to the total.
    again = Run(argv, tmp_path, _slurm_env(tmp_path, restart_count=1))
    code, out = again.finish(180)
    assert code == 0, out[-4000:]
    assert f"resuming at iteration {stopped} of 10" in out
    assert run_folders(tmp_path, "rsl_rl") == [folder]
    s = summary_of(folder)
    assert (s["status"], s["iterations"], s["end_iteration"]) == ("finished", 10, 10), s
    steps = tensorboard_steps(folder, "mgpu/mean_reward")
    assert steps == list(range(10)), steps


def _node_options(rank: int, port: int) -> tuple[str, ...]:
    """Node ``rank`` of two on this host, logging apart."""
    return ("--nnodes", "2", "--node_rank", str(rank), "--master_addr", "127.0.0.1",
            "--master_port", str(port), "--log_dir", f"logs/mgpu{rank}")  # fmt: skip


#: Three iterations of about 2 s each (a 1000-step rollout) under --requeue.
LAST_ITERATION = ("--requeue", "--num_envs", "16", "--max_iterations", "3", "env.episode_length=16",
                  "agent.rollout=1000")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [1, 2])
def test_the_warning_signal_during_the_last_iteration_lets_the_run_finish_unrequeued(nodes, tmp_path):
    """SLURM's warning landing in the run's last iteration: the ranks save at its end as always,
    and the run is finished (exit 0, no ``scontrol requeue``), not stopped for a requeue that
    would only find it done. The signal, sent as iteration 2 of 3 is shown, has the whole of
    iteration 3 to reach every rank. On two nodes (one rank each), node 1's mgpu has no summary to
    read: its ranks' reports say they finished, and it exits 0 with node 0 (it said 75 before)."""
    env, port = _slurm_env(tmp_path), free_port()
    if nodes == 1:
        runs = [Run(train_argv("rsl_rl", *LAST_ITERATION), tmp_path, env)]
    else:
        runs = [
            Run(train_argv("rsl_rl", *LAST_ITERATION, *_node_options(rank, port), nproc=1), tmp_path, env)
            for rank in (0, 1)
        ]
    runs[0].wait_for("iteration 2/3", 180)
    for run in runs:
        root = psutil.Process(run.proc.pid)
        for proc in [root, *root.children(recursive=True)]:
            proc.send_signal(signal.SIGUSR1)
    for run in runs:
        code, out = run.finish(180)
        assert code == 0, out[-4000:]
    calls = tmp_path / "scontrol.calls"
    assert not calls.exists() or "requeue" not in calls.read_text().split(), calls.read_text()
    (folder,) = run_folders(tmp_path, "rsl_rl")
    s = summary_of(folder)
    assert (s["status"], s["end_iteration"], s["exit_status"]) == ("finished", 3, 0), s
    assert [a["outcome"] for a in s["attempts"]] == ["finished"] and (folder / "model_3.pt").is_file(), s


@pytest.mark.slow
def test_sigterm_in_slurm_never_requeues(tmp_path):
    run = Run(train_argv("rsl_rl", "--requeue", *SHORT), tmp_path, _slurm_env(tmp_path))
    run.wait_for("iteration 3/10", 120)
    run.proc.send_signal(signal.SIGTERM)
    code, out = run.finish(120)
    assert code == 130, out[-4000:]
    calls = tmp_path / "scontrol.calls"  # asked, at most, what the job was submitted with (the hint)
    assert not calls.exists() or "requeue" not in calls.read_text().split(), calls.read_text()
    (folder,) = run_folders(tmp_path, "rsl_rl")
    assert summary_of(folder)["status"] == "interrupted"


def _crafted_checkpoint(folder: Path, planted: Path) -> Path:
    """``model_4.pt`` (with a plausible model_4.json) whose unpickling would create ``planted``."""
    import torch

    class Plant:
        def __reduce__(self):
            return (open, (str(planted), "w"))

    folder.mkdir(parents=True)
    path = folder / "model_4.pt"
    torch.save({"format": "isaaclab-mgpu/1", "iteration": 4, "state": Plant()}, path)
    meta = {"format": "isaaclab-mgpu/1", "iteration": 4, "library": "rsl_rl", "framework": "torch",
            "task": "cartpole", "world_size": 2, "total": 10}  # fmt: skip
    (folder / "model_4.json").write_text(json.dumps(meta))
    return path


@pytest.mark.slow
def test_crafted_checkpoint_is_refused_and_nothing_in_it_runs(tmp_path):
    planted = tmp_path / "planted"
    path = _crafted_checkpoint(tmp_path / "logs" / "rsl_rl" / "cartpole" / "old", planted)
    run = Run(train_argv("rsl_rl", "--resume", str(path), *SHORT), tmp_path)
    code, out = run.finish(120)
    assert not planted.exists()
    assert code == EXIT_NOT_RESTARTABLE, out[-3000:]  # rank 0's bad input: no restart can mend it
    assert f"checkpoint {path} refused" in out and "nothing in it was run" in out, out[-3000:]
    assert "restart 1 of" not in out  # bad input is not retried
    # The reason is the last line; torchrun's own failure summary stays out of the console.
    last = [ln for ln in out.splitlines() if ln.strip()][-1]
    assert last.startswith("mgpu: error: rank 0 on ") and f"checkpoint {path} refused" in last, out[-3000:]
    assert "Root Cause" not in out, out[-3000:]


def test_safe_loader_refuses_in_process(tmp_path):
    from isaaclab_mgpu.contract.errors import UsageError
    from isaaclab_mgpu.rank.worker import checkpoint

    planted = tmp_path / "planted"
    path = _crafted_checkpoint(tmp_path / "run", planted)
    with pytest.raises(UsageError, match="refused"):
        checkpoint.load(path)
    assert not planted.exists()


def test_resume_of_another_library_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    from cli_helpers import run as mgpu

    path = _crafted_checkpoint(tmp_path / "logs" / "rsl_rl" / "cartpole" / "old", tmp_path / "x")
    (path.with_suffix(".json")).write_text(json.dumps({
        "format": "isaaclab-mgpu/1", "iteration": 4, "library": "skrl", "framework": "jax",
        "task": "cartpole", "world_size": 2}))  # fmt: skip
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, _, err = mgpu(
            capsys, "train", "--device", "cpu", "--nproc_per_node", "2", "--resume", f"{path}"
        )
    finally:
        os.chdir(cwd)
    assert code == 2, err
    assert "written by skrl/jax on cartpole, not rsl_rl/torch on cartpole" in err
    assert len(err.strip().splitlines()) == 1


def test_requeue_outside_slurm_is_bad_input(capsys):
    from cli_helpers import run as mgpu

    code, _, err = mgpu(capsys, "train", "--device", "cpu", "--requeue", "--max_iterations", "2")
    assert code == 2 and "--requeue needs a SLURM job" in err, err


def test_exit_code_rule():
    from isaaclab_mgpu.contract.errors import RESERVED, passed_through

    assert RESERVED == (2, 4, 65, 75, 93, 124, 130)
    codes = (1, 2, 3, 4, 65, 75, 93, 124, 130, 137, 139)
    assert [passed_through(c) for c in codes] == [1, 1, 3, 1, 1, 1, 1, 1, 1, 137, 139]


def test_two_runs_in_the_same_second_get_two_folders(tmp_path):
    from isaaclab_mgpu.launcher.runs import create_run_folder

    a = create_run_folder(tmp_path, "2026-12-01_08-00-00", "x")
    b = create_run_folder(tmp_path, "2026-12-01_08-00-00", "x")
    assert a != b and a.is_dir() and b.is_dir() and b.name == "2026-12-01_08-00-00-2_x"


def test_resume_auto_picks_only_own_real_folders_inside_the_log_root(tmp_path):
    from isaaclab_mgpu.contract import resume

    exp = tmp_path / "logs" / "rsl_rl" / "cartpole"
    (exp / "2026-01-01_00-00-00").mkdir(parents=True)
    outside = tmp_path / "elsewhere" / "2099-01-01_00-00-00"
    outside.mkdir(parents=True)
    (exp / "2099-01-01_00-00-00").symlink_to(outside)
    found = resume.own_run_folders(exp, tmp_path / "logs")
    assert found == [exp / "2026-01-01_00-00-00"]
    assert resume.own_run_folders(tmp_path / "elsewhere", tmp_path / "logs") == []


def test_dry_run_shows_attempt_zero_and_says_restarts_are_mgpus(capsys):
    from cli_helpers import run as mgpu

    code, out, err = mgpu(capsys, "dry-run", "--device", "cpu", "--nproc_per_node", "2", "--max_restarts=3")
    assert code == 0, err
    assert "--max_restarts" not in out and "MGPU_ATTEMPT" not in out
    assert "restarts: mgpu's own, up to 3" in err, err


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-x", "-q"]))


def _running_in(folder: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.cwd() == str(folder):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_killed_mgpu_run_is_continued_by_resume_auto(tmp_path):
    run = Run(train_argv("rsl_rl", "--resume", "auto", *SHORT), tmp_path)
    run.wait_for("iteration 5/10", 120)
    run.proc.send_signal(signal.SIGKILL)  # mgpu alone: its watchdog stops the ranks
    run.finish(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _running_in(tmp_path):
        time.sleep(0.2)  # the watchdog stops the ranks and torchrun
    assert not _running_in(tmp_path)
    (folder,) = run_folders(tmp_path, "rsl_rl")
    from isaaclab_mgpu.launcher.runs import find_runs

    # Nobody is left to write the end: the ledger says running, its launcher is gone, the run is lost.
    assert [(r.folder, r.status) for r in find_runs(tmp_path / "logs")] == [(str(folder), "lost")]
    saved = [int(p.stem.split("_")[1]) for p in folder.glob("model_*.pt")]
    assert saved and max(saved) >= 5, saved  # the watchdog's SIGTERM: the ranks saved where they stood

    code, out = Run(train_argv("rsl_rl", "--resume", "auto", *SHORT), tmp_path).finish(180)
    assert code == 0, out[-4000:]
    assert f"--resume auto: the newest unfinished run: continuing {folder.relative_to(tmp_path)}" in out
    assert run_folders(tmp_path, "rsl_rl") == [folder]
    s = summary_of(folder)
    assert (s["status"], s["iterations"], s["end_iteration"]) == ("finished", 10, 10), s

    # Resumed once more with nothing left to train: one line, nothing started, not a byte changed.
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, out = Run(train_argv("rsl_rl", "--resume", str(folder), *SHORT), tmp_path).finish(120)
    assert code == 0 and out.strip().splitlines()[-1].endswith(
        "nothing to train, nothing started; raise --max_iterations to train on"
    ), out
    assert len(out.strip().splitlines()) == 1, out
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before

    # A finished run is not continued: --resume auto starts a new one (2 iterations are enough to say so).
    two = train_argv("rsl_rl", "--resume", "auto", *SHORT[:3], "2", *SHORT[4:])
    code, out = Run(two, tmp_path).finish(180)
    assert code == 0, out[-4000:]
    assert "no unfinished run" in out and len(run_folders(tmp_path, "rsl_rl")) == 2


def test_a_running_summary_whose_launcher_is_gone_is_listed_as_lost(tmp_path):
    from isaaclab_mgpu.contract import summary
    from isaaclab_mgpu.launcher.ledger import write_summary
    from isaaclab_mgpu.launcher.runs import find_runs

    gone = psutil.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = psutil.Process()
    for name, pid, started in (("a", gone.pid, time.time()), ("b", alive.pid, alive.create_time())):
        folder = tmp_path / "rsl_rl" / "cartpole" / f"2026-01-01_00-00-0{len(name)}{name}"
        folder.mkdir(parents=True)
        host = socket.gethostname()
        record = summary.Summary(
            status="running", launcher_pid=pid, launcher_host=host, launcher_started=started
        )
        write_summary(folder, record)
    assert sorted((Path(r.folder).name[-1], r.status) for r in find_runs(tmp_path)) == [
        ("a", "lost"),
        ("b", "running"),
    ]


@pytest.mark.slow
def test_a_simulated_hang_is_named_by_the_stall_watch_and_restarted(tmp_path):
    fault = ("--simulate_fault", "hang@4", "--stall_timeout", "8")
    run = Run(train_argv("rsl_rl", "--max_restarts", "1", *fault, *SHORT), tmp_path)
    code, out = run.finish(LIMIT["rsl_rl"])
    assert code == 0, out[-4000:]
    s = one_resumed_run(tmp_path, "rsl_rl", 2)
    assert s["restarts"][0]["outcome"] == "hung", s["restarts"]
    assert "rank 1" in out.split("hang:", 1)[1].splitlines()[0], out[-4000:]


def _finished_and_stopped_runs(logs: Path) -> tuple[Path, Path]:
    """Two rsl_rl cartpole runs of 10 iterations with mgpu's checkpoints: a finished newer one and
    an older one stopped at iteration 4."""
    made = []
    for name, status, at in (("2026-01-01_00-00-00", "stopped", 4), ("2026-01-02_00-00-00", "finished", 10)):
        folder = logs / "rsl_rl" / "cartpole" / name
        folder.mkdir(parents=True)
        meta = {"format": "isaaclab-mgpu/1", "iteration": at, "library": "rsl_rl", "framework": "torch",
                "task": "cartpole", "world_size": 2, "total": 10}  # fmt: skip
        with zipfile.ZipFile(folder / f"model_{at}.pt", "w") as z:  # whole, as far as a resume checks
            z.writestr("data.pkl", b"")
        (folder / f"model_{at}.json").write_text(json.dumps(meta))
        summary = {"status": status, "backend": "rsl_rl", "framework": "torch", "task": "cartpole"}
        (folder / "summary.json").write_text(json.dumps(summary))
        made.append(folder)
    return made[0], made[1]


def test_bare_resume_and_resume_auto_take_the_newest_unfinished_run_and_dry_run_says_which(
    tmp_path, capsys, monkeypatch
):
    from cli_helpers import run as mgpu

    from isaaclab_mgpu.launcher.diagnostics.facts import disk_facts
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    stopped, _finished = _finished_and_stopped_runs(tmp_path / "logs")
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    base = ("dry-run", "--device", "cpu", "--nproc_per_node", "2", "--max_iterations", "10")
    for resume_args in (("--resume",), ("--resume", "auto")):
        code, _out, err = mgpu(capsys, *base, *resume_args)
        assert code == 0, err
        said = [line for line in err.splitlines() if "train would resume" in line]
        rel = stopped.relative_to(tmp_path)
        assert len(said) == 1 and f"{rel} at iteration 4 of 10, from {rel}/model_4.pt" in said[0], err
        # check-env's disk facts size the same checkpoint (not the newer finished run's)
        spec = LaunchSpec(device="cpu", nproc_per_node="2", training_args=resume_args)
        assert disk_facts(spec).resume_checkpoint == str(rel / "model_4.pt")
    # Reading only: not a folder or a file was created or changed.
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_bare_resume_without_an_unfinished_run_is_refused_and_auto_starts_afresh(
    tmp_path, capsys, monkeypatch
):
    from cli_helpers import run as mgpu

    stopped, _ = _finished_and_stopped_runs(tmp_path / "logs")
    summary = json.loads((stopped / "summary.json").read_text())
    (stopped / "summary.json").write_text(json.dumps({**summary, "status": "finished"}))
    monkeypatch.chdir(tmp_path)
    code, out, err = mgpu(capsys, "train", "--device", "cpu", "--nproc_per_node", "2", "--resume")
    assert code == 2 and out == "", err
    assert (
        err.startswith("mgpu: error: --resume: no unfinished rsl_rl/torch run of cartpole")
        and "--resume auto" in err
    )
    code, _, err = mgpu(capsys, "dry-run", "--device", "cpu", "--nproc_per_node", "2", "--resume", "auto")
    assert code == 0 and "train would start a new run" in err, err
