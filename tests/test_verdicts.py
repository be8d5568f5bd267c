"""Every failure classified, restarts spent only where a restart can help (:mod:`.launcher.verdicts`).

The classifier is pure and judged case by case here; then real runs: a 2-rank ``--script`` whose
rank 1 raises the same CUDA out-of-memory error every launch stops after the second (2 launches
under ``--max_restarts 3``, exit 93); a built-in worker run that fails the same way before its first
iteration twice records both verdicts in ``summary.json``; the emitted sbatch file's rule for 93 runs
under bash with stand-in ``srun`` and ``scontrol``; an override that makes no sense is refused with
exit 2 before anything is spawned. A rank SIGKILLed once is still restarted and the run finishes:
``tests/test_ledger.py`` (``test_a_killed_rank_is_a_fault_then_a_restart_then_the_end``) checks its
verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run as mgpu
from restart_helpers import Run, run_folders, summary_of, train_argv
from training_helpers import child_env

from isaaclab_mgpu.contract.errors import (
    EXIT_NO_SPACE,
    EXIT_NOT_RESTARTABLE,
    RESERVED,
    failed_run_code,
)
from isaaclab_mgpu.launcher import verdicts
from isaaclab_mgpu.launcher.attempts import Attempt
from isaaclab_mgpu.launcher.verdicts import Failure, classify, exception_line, oom_kills, signature

WORKERS = Path(__file__).parent / "workers"
OOM = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.19 GiB total capacity)"
OOM_AGAIN = "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 39.39 GiB total capacity)"


def failed(exception: str | None = None, *, reached=None, started_at=None, **kw) -> Failure:
    """A failure of rank 1 with ``exception`` as its traceback's last line."""
    return Failure(rank=1, exit_code=kw.pop("exit_code", 1), exception=exception, reached=reached,
                   started_at=started_at, **kw)  # fmt: skip


# -- the pure parts ------------------------------------------------------------------------------


def test_signature_masks_numbers_addresses_and_sizes_only():
    assert signature(OOM) == signature(OOM_AGAIN)
    a = signature("ValueError: bad pointer 0x7f3a2c001000 in buffer 12")
    assert (
        a
        == signature("ValueError: bad pointer 0xdeadbeef in buffer 3")
        == "ValueError: bad pointer <addr> in buffer #"
    )
    assert signature("KeyError: 'a'") != signature("KeyError: 'b'")
    assert signature(None) is None and signature("  ") is None


def test_exception_line_comes_from_the_traceback_else_the_stderr_tail():
    tb = 'Traceback (most recent call last):\n  File "x.py", line 3, in main\n' + OOM
    assert exception_line(tb) == OOM
    tail = (
        "some output\nomegaconf.errors.ConfigAttributeError: Key 'episode_lenght' is not in struct\n[1]: done"
    )
    assert exception_line(None, tail).startswith("omegaconf.errors.ConfigAttributeError: Key")
    assert exception_line(None, "no exception here\nat all") is None


def test_a_first_cuda_oom_is_restarted_and_the_second_is_not():
    first = classify(failed(OOM, gpu_holders=("4242 python (30000 MiB, GPU 1)",)))
    assert (first.kind, first.restart, first.repeats) == ("cuda_oom", True, None)
    assert "4242 python (30000 MiB, GPU 1)" in first.cause and "--num_envs" in (first.fix or "")
    second = classify(failed(OOM_AGAIN), first, 0)
    assert (second.kind, second.restart, second.repeats) == ("cuda_oom", False, 0)
    assert "not restarted" in second.text() and "ran out of memory too" in second.text()
    # torch's own exception type says the same
    assert classify(failed("torch.OutOfMemoryError: CUDA out of memory.")).kind == "cuda_oom"


def test_a_host_oom_kill_needs_the_cgroups_record():
    killed = Failure(rank=0, signal="SIGKILL", oom_kills=1)
    first = classify(killed)
    assert (first.kind, first.restart) == ("host_oom", True) and "--nproc_per_node" in (first.fix or "")
    assert (classify(killed, first, 0).kind, classify(killed, first, 0).restart) == ("host_oom", False)
    # A SIGKILL with no OOM kill recorded (a person, a lost node, a simulated fault): restarted, and
    # never judged deterministic, as nothing says it would repeat.
    plain = classify(Failure(rank=0, signal="SIGKILL"))
    assert (plain.kind, plain.restart) == ("other", True)
    assert classify(Failure(rank=0, signal="SIGKILL"), plain, 0).restart


def test_disk_full_and_bad_input_are_never_restarted():
    full = classify(failed(exit_code=EXIT_NO_SPACE))
    assert (full.kind, full.restart) == ("disk_full", False)
    bad = classify(Failure(rank=0, exit_code=2, reason="checkpoint /x refused: not ours"))
    assert (bad.kind, bad.restart, bad.reason) == ("config", False, "checkpoint /x refused: not ours")


def test_a_configuration_error_before_the_first_iteration_is_not_restarted():
    early = classify(failed("KeyError: 'num_envs'", reached=0, started_at=0))
    assert (early.kind, early.restart) == ("config", False)
    late = classify(failed("KeyError: 'num_envs'", reached=7, started_at=4))
    assert (late.kind, late.restart) == ("other", True)  # it trained: not the configuration
    unknown = classify(failed("ValueError: x"))  # a --script: its iterations are unknown
    assert (unknown.kind, unknown.restart) == ("other", True)


def test_transport_errors_are_restarted_even_when_they_repeat():
    text = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    first = classify(failed(text, reached=5, started_at=4))
    again = classify(failed(text, reached=5, started_at=4), first, 0)
    assert (first.kind, first.restart, again.kind, again.restart) == ("transport", True, "transport", True)


def test_the_same_error_at_the_same_iteration_is_deterministic():
    first = classify(failed("ZeroDivisionError: division by zero at 0x7f00", reached=5, started_at=4))
    assert (first.kind, first.restart) == ("other", True)
    same = classify(
        failed("ZeroDivisionError: division by zero at 0x7f88", reached=5, started_at=4), first, 0
    )
    assert (same.kind, same.restart, same.repeats) == ("deterministic", False, 0)
    assert "at the same iteration (5)" in same.text()
    moved = classify(
        failed("ZeroDivisionError: division by zero at 0x7f88", reached=6, started_at=4), first, 0
    )
    assert (moved.kind, moved.restart) == ("other", True)  # it got further: a restart helped
    other = classify(failed("ZeroDivisionError: float division", reached=5, started_at=4), first, 0)
    assert other.restart


def test_before_the_first_iteration_twice_is_deterministic_whatever_the_checkpoint():
    first = classify(failed("ZeroDivisionError: division by zero", reached=0, started_at=0))
    second = classify(failed("ZeroDivisionError: division by zero", reached=4, started_at=4), first, 0)
    assert (second.kind, second.restart) == ("deterministic", False)
    assert "before its first iteration" in second.text()


def test_a_script_failing_the_same_way_twice_is_deterministic():
    first = classify(failed("ValueError: no such file data_17.bin"))
    second = classify(failed("ValueError: no such file data_17.bin"), first, 0)
    assert (second.kind, second.restart) == ("deterministic", False)
    assert "reports no iterations" in second.text()


def test_the_exit_code_of_a_failure_no_restart_can_mend():
    assert EXIT_NOT_RESTARTABLE == 93 and EXIT_NOT_RESTARTABLE in RESERVED
    assert failed_run_code(1, mendable=False) == 93
    assert failed_run_code(137, mendable=False) == 93
    assert failed_run_code(EXIT_NO_SPACE, mendable=False) == EXIT_NO_SPACE  # a full disk keeps 74
    assert failed_run_code(1, mendable=True) == 1
    assert failed_run_code(93, mendable=True) == 1  # a rank's own 93 is not mgpu's verdict


def test_the_attempt_record_carries_the_verdict():
    verdict = classify(failed(OOM))
    attempt = Attempt(number=0, outcome="failed", exit_code=1, rank=1, how="exit code 1", verdict=verdict)
    record = attempt.as_json()
    assert record["verdict"]["kind"] == "cuda_oom" and record["verdict"]["restart"] is True
    assert record["verdict"]["reason"] == OOM


def test_oom_kills_reads_cgroup_v2_and_v1(tmp_path):
    v2 = tmp_path / "v2"
    (v2 / "job" / "step").mkdir(parents=True)
    (v2 / "job" / "step" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    (tmp_path / "proc_v2").write_text("0::/job/step\n")
    assert oom_kills(tmp_path / "proc_v2", v2) == 2
    v1 = tmp_path / "v1"
    (v1 / "memory" / "slurm" / "job_7").mkdir(parents=True)
    (v1 / "memory" / "slurm" / "job_7" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"
    )
    (tmp_path / "proc_v1").write_text("9:pids:/slurm\n4:memory:/slurm/job_7\n0::/\n")
    assert oom_kills(tmp_path / "proc_v1", v1) == 5
    assert oom_kills(tmp_path / "nothing", v1) == 0
    assert oom_kills() >= 0  # this machine's own, whatever it holds


def test_gpu_holders_is_empty_without_a_gpu():
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("a GPU machine: its holders are whatever runs there")
    assert verdicts.gpu_holders() == ()


# -- refused before anything is spawned --------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("env.episode_length=-1", "env.episode_length=-1: the value must be at least 1"),
        ("env.episode_length=0", "must be at least 1"),
        ("env.dt=nan", "must be a finite number"),
        ("agent.gamma=1.5", "at most 1"),
        ("agent.learning_rate=0", "must be above 0"),
    ],
)
def test_nonsense_overrides_are_refused_before_spawn(capsys, no_spawn, override, words):
    code, out, err = mgpu(capsys, "train", "--device", "cpu", "--nproc_per_node", "2", override)
    assert code == 2, (out, err)
    assert words in err and len(err.strip().splitlines()) == 1, err


# -- the job file's rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "told"), [(93, True), (1, False), (0, False)])
def test_the_sbatch_file_makes_the_job_not_requeueable_on_93_only(capsys, tmp_path, status, told):
    code, out, err = mgpu(capsys, "dry-run", "--device", "cpu", "--nproc_per_node", "2", "--requeue",
                          "--emit", "sbatch")  # fmt: skip
    assert code == 0, err
    job = tmp_path / "job.sbatch"
    job.write_text(out)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/sh\nexit {status}\n")
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.args"}\n')
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "4711"}
    done = subprocess.run(
        ["bash", str(job)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == status, done.stderr  # the script's status is srun's, trap or not
    said = (tmp_path / "scontrol.args").read_text() if (tmp_path / "scontrol.args").exists() else ""
    assert (said == "update JobId=4711 Requeue=0\n") == told, said


# -- real runs ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_cuda_oom_at_the_same_step_stops_after_the_second_launch(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            "--max_restarts", "3", "--script", str(WORKERS / "cuda_oom.py")]  # fmt: skip
    code, out = Run(argv, tmp_path, env={**child_env(tmp_path), "MGPU_TEST_PIDS": str(pids)}).finish(300)
    assert code == EXIT_NOT_RESTARTABLE, out[-4000:]
    logs = tmp_path / "logs" / "mgpu" / "cuda_oom"
    attempts = sorted(p.name for p in logs.glob("*/attempt_*"))  # <launch>/attempt_<k>
    assert attempts == ["attempt_0", "attempt_1"], attempts  # 2 launches, not 4
    # The script run's ledger (beside its per-rank logs) tells the same: two faults, both judged.
    from isaaclab_mgpu.contract import events as ev

    (ledger,) = [ev.read(p.parent) for p in logs.glob("*/events.jsonl")]
    faults = [e for e in ledger.events if isinstance(e, ev.Fault)]
    assert [(e.failure_class, e.restartable) for e in faults] == [("cuda_oom", True), ("cuda_oom", False)]
    assert ev.fold(ledger.events).exit_code == EXIT_NOT_RESTARTABLE
    restart = next(line for line in out.splitlines() if "restart 1 of 3" in line)
    assert "(cuda_oom: RuntimeError: CUDA out of memory." in restart, restart
    assert restart.endswith("from the beginning: this program writes no checkpoint mgpu knows"), restart
    assert "restart 2 of 3" not in out, out[-4000:]
    last = out.strip().splitlines()[-1]
    assert "cuda_oom: rank 1 ran out of GPU memory; fix: lower --num_envs" in last, last
    assert "not restarted: attempt 0 ran out of memory too" in last and "1 of 3 restarts used" in last, last


@pytest.mark.slow
def test_a_built_in_run_failing_before_its_first_iteration_twice_records_both_verdicts(tmp_path):
    # rsl-rl divides by mini_batches in its first update: every launch fails there, before iteration 1.
    args = ("--max_restarts", "3", "--num_envs", "8", "--max_iterations", "3", "agent.mini_batches=0")
    code, out = Run(train_argv("rsl_rl", *args), tmp_path).finish(400)
    assert code == EXIT_NOT_RESTARTABLE, out[-4000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    s = summary_of(folder)
    assert (s["status"], s["exit_status"]) == ("failed", EXIT_NOT_RESTARTABLE), s
    kinds = [(a["verdict"]["kind"], a["verdict"]["restart"]) for a in s["attempts"]]
    assert kinds == [("other", True), ("deterministic", False)], s["attempts"]
    second = s["attempts"][1]["verdict"]
    assert second["repeats"] == 0 and second["reason"].startswith("ZeroDivisionError"), second
    assert [r["verdict"]["kind"] for r in s["restarts"]] == ["other"], s["restarts"]
    last = out.strip().splitlines()[-1]
    assert "deterministic:" in last and "before its first iteration" in last, last


def test_the_restart_line_says_the_class_and_what_really_resumes(capsys):
    from isaaclab_mgpu.launcher.attempts import Restarting
    from isaaclab_mgpu.report.supervise import tell

    verdict = classify(failed(OOM))
    ended = Attempt(number=0, outcome="failed", exit_code=1, rank=1, how="exit code 1", verdict=verdict)
    tell(Restarting(ended, 1, 3, from_checkpoint=False))
    line = capsys.readouterr().err.strip()
    assert line.startswith(
        "mgpu: attempt 0: rank 1 failed with exit code 1 (cuda_oom: RuntimeError: CUDA out"
    ), line
    assert line.endswith(
        "restart 1 of 3: from the beginning: this program writes no checkpoint mgpu knows"
    ), line
    saved = Attempt(number=0, outcome="failed", exit_code=1, rank=1, reached=7, checkpoint=6, verdict=verdict)
    tell(Restarting(saved, 1, 3, from_checkpoint=True))
    line = capsys.readouterr().err.strip()
    assert line.endswith("restart 1 of 3: resuming at iteration 6, 1 iteration(s) lost"), line
