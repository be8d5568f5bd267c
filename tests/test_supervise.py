"""Supervision on real process trees: real torchrun, real jaxrun, real signals, PIDs checked.

Every scenario runs ``python -m isaaclab_mgpu train --device cpu --nproc_per_node 2 --script
tests/workers/X.py`` in its own session. The workers write their PIDs (ranks, grandchildren,
setsid escapees) to a folder; the test waits for them, sends the signal for real, then checks the
exit code, the console and that no recorded PID is alive. A torchrun start costs seconds here, so
the scenarios are launched together from a module fixture and each test asserts on its own one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, EXIT_KILLED_AFTER_GRACE, UsageError
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.supervise import SuperviseOptions, Supervisor

WORKERS = Path(__file__).parent / "workers"
ROOT = Path(__file__).parent.parent


@dataclass(frozen=True)
class Scenario:
    """One launch: worker, expected PIDs before signalling, signals to send, extra options."""

    worker: str
    ready: int = 0
    signals: tuple[int, ...] = ()
    extra: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    grace: str = "1"
    nproc: str = "2"
    jax: bool = False
    gap: float = 1.5
    """Seconds between signals: a human's second Ctrl-C, unless testing one Ctrl-C seen twice."""


@dataclass
class Outcome:
    """What a scenario left behind."""

    rc: int
    out: str
    err: str
    pids: list[int]
    alive: list[int]
    seconds: float
    folder: Path


SCENARIOS = {
    "hello": Scenario("hello.py", extra=("--log_all_ranks",)),
    "sigint": Scenario("sleeper.py", ready=2, signals=(signal.SIGINT,)),
    "sigterm_stubborn": Scenario("stubborn.py", ready=2, signals=(signal.SIGTERM,)),
    "double_sigint": Scenario("stubborn.py", ready=2, signals=(signal.SIGINT, signal.SIGINT), grace="60"),
    "sigint_twice_at_once": Scenario(
        "stubborn.py", ready=2, signals=(signal.SIGINT, signal.SIGINT), gap=0.05, grace="2"
    ),
    "family_sigint": Scenario("family.py", ready=6, signals=(signal.SIGINT,)),
    "sigkill_mgpu": Scenario("family.py", ready=6, signals=(signal.SIGKILL,), grace="60"),
    "no_killpg": Scenario(
        "family.py",
        ready=6,
        signals=(signal.SIGINT,),
        env=(("MGPU_NO_KILLPG", "1"), ("FAMILY_STUBBORN", "1")),
    ),
    "stopped": Scenario("stopped.py", ready=2, signals=(signal.SIGINT,)),
    "exit3": Scenario("exit3.py", grace="60"),
    "exit3_alone": Scenario("exit3.py", nproc="1"),
    "segfault": Scenario("segfault.py"),
    "raises": Scenario("raises.py"),
    "jax_ok": Scenario("jax_contract.py", jax=True),
    "jax_fail": Scenario("jax_contract.py", jax=True, extra=("--fail_rank", "1")),
    "jax_sigint": Scenario(
        "jax_contract.py", ready=2, jax=True, signals=(signal.SIGINT,), extra=("--sleep",)
    ),
}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _recorded(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def run_scenario(name: str, s: Scenario, base: Path) -> Outcome:
    """Launch, wait for the tree, signal it, wait for the end, and collect what is left alive."""
    folder = base / name
    pids = folder / "pids"
    pids.mkdir(parents=True)
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", s.nproc]
    if s.jax:
        argv += ["--rl_library", "skrl", "--ml_framework", "jax"]
    argv += ["--script", str(WORKERS / s.worker), "--grace_period", s.grace, "--kill_after", "1"]
    argv += ["--log_dir", str(folder / "logs"), *s.extra]
    env = {**os.environ, "MGPU_TEST_PIDS": str(pids), **dict(s.env)}
    env.pop("MGPU_RUN_ID", None)
    with open(folder / "out", "wb") as out, open(folder / "err", "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=ROOT, start_new_session=True)
    end = time.monotonic() + 90
    while len(_recorded(pids)) < s.ready and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.3 if s.ready else 0)  # let the signal handlers of every rank be in place
    t0 = time.monotonic()
    for i, sig in enumerate(s.signals):
        if i:
            time.sleep(s.gap)
        proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    recorded = _recorded(pids)
    # After SIGKILL of mgpu the watchdog does the killing: give it a few seconds.
    deadline = time.monotonic() + (10 if signal.SIGKILL in s.signals else 0)
    while any(map(_alive, recorded)) and time.monotonic() < deadline:
        time.sleep(0.1)
    seconds = time.monotonic() - t0
    alive = [p for p in recorded if _alive(p)]
    for pid in alive:  # never leave the machine dirty, even when the test fails
        os.kill(pid, signal.SIGKILL)
    return Outcome(
        rc,
        (folder / "out").read_text(errors="replace"),
        (folder / "err").read_text(errors="replace"),
        recorded,
        alive,
        seconds,
        folder,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    base = tmp_path_factory.mktemp("supervise")
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = {name: pool.submit(run_scenario, name, s, base) for name, s in SCENARIOS.items()}
        return {name: f.result() for name, f in futures.items()}


def _gone(o: Outcome, at_least: int) -> None:
    assert len(o.pids) >= at_least, f"workers did not record their PIDs: {o.err}"
    assert o.alive == [], f"PIDs still alive: {o.alive}\n{o.err}"


@pytest.mark.slow
def test_success_shows_every_rank_with_a_prefix_and_keeps_logs(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["hello"]
    assert o.rc == 0, o.err
    assert "[default0]:hello from rank 0" in o.out and "[default1]:hello from rank 1" in o.out
    logs = [line for line in o.err.splitlines() if "per-rank logs:" in line]
    run_dir = Path(logs[-1].split("per-rank logs:")[1].strip())
    # <log_dir>/<program>/<launch>/attempt_<k>/rank_<global rank>: named by what runs, this launch,
    # mgpu's attempt and the rank.
    name, _launch, attempt = run_dir.relative_to(o.folder / "logs").parts
    assert name == "hello" and attempt == "attempt_0", run_dir
    assert "hello from rank 1" in (run_dir / "rank_1" / "stdout.log").read_text()
    assert "note from rank 1" in (run_dir / "rank_1" / "stderr.log").read_text()
    _gone(o, 2)


@pytest.mark.slow
def test_sigint_stops_cooperative_ranks_with_130(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["sigint"]
    assert o.rc == EXIT_INTERRUPTED, o.err
    assert "SIGINT received" in o.err and "Press Ctrl-C again to kill now" in o.err
    assert o.err.count("Press Ctrl-C again") == 1
    # A deliberate stop is reported as one, not as an error.
    assert o.err.splitlines()[-1] == "mgpu: stopped as asked; every process ended", o.err
    assert "error" not in o.err
    _gone(o, 2)


@pytest.mark.slow
def test_sigterm_with_a_rank_ignoring_it_is_killed_after_grace(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["sigterm_stubborn"]
    assert o.rc == EXIT_KILLED_AFTER_GRACE, o.err
    assert "sending SIGKILL" in o.err
    # torch elastic's own traceback chain on the second signal is not echoed
    assert "SignalException" not in o.err and "During handling" not in o.err
    _gone(o, 2)


@pytest.mark.slow
def test_second_sigint_kills_at_once(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["double_sigint"]
    assert o.rc == EXIT_INTERRUPTED, o.err
    assert "second interrupt" in o.err
    assert o.seconds < 30, "a second Ctrl-C must not wait for the 60 s grace period"
    _gone(o, 2)


@pytest.mark.slow
def test_one_ctrl_c_delivered_twice_is_not_a_second_ctrl_c(outcomes: dict[str, Outcome]) -> None:
    # `uv run mgpu`: the terminal's SIGINT reaches mgpu, and uv forwards it once more.
    o = outcomes["sigint_twice_at_once"]
    assert "second interrupt" not in o.err
    assert o.rc == EXIT_KILLED_AFTER_GRACE, o.err  # the stubborn rank went the graceful way: SIGKILL
    _gone(o, 2)


@pytest.mark.slow
def test_grandchildren_and_setsid_escapees_die(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["family_sigint"]
    assert o.rc == EXIT_INTERRUPTED, o.err
    _gone(o, 6)


@pytest.mark.slow
def test_sigkill_of_mgpu_still_kills_the_tree(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["sigkill_mgpu"]
    assert o.rc == -signal.SIGKILL
    _gone(o, 6)


@pytest.mark.slow
def test_portable_path_without_killpg_or_subreaper(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["no_killpg"]
    # The escapees ignore SIGTERM here, so they need the SIGKILL after the grace period.
    assert o.rc == EXIT_KILLED_AFTER_GRACE, o.err
    _gone(o, 6)


@pytest.mark.slow
def test_stopped_rank_is_continued_and_killed(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["stopped"]
    assert o.rc in (EXIT_INTERRUPTED, EXIT_KILLED_AFTER_GRACE), o.err
    _gone(o, 2)


@pytest.mark.slow
def test_rank_exit_code_is_mgpus_exit_code(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["exit3"]
    assert o.rc == 3, o.err
    assert "root cause: rank 1 (local rank 1)" in o.err and "exit code 3" in o.err
    # rank 1's console output is filtered; its stderr tail still names the cause
    assert "rank 1 giving up with exit code 3" in o.err
    assert "error: rank 1" in o.err.splitlines()[-1]
    _gone(o, 2)


@pytest.mark.slow
def test_a_lone_failing_rank_has_no_others_to_stop(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["exit3_alone"]
    assert o.rc == 3, o.err
    assert "root cause: rank 0" in o.err and "exit code 3" in o.err
    # Neither stop note for peers (report.supervise.stopping_after_failure, rank_died's SIGKILL of
    # "this node's other ranks") may appear: there are none. (It used to check a phrase mgpu never
    # printed, so it could not fail.)
    assert "its peers cannot finish a collective" not in o.err and "this node's other ranks" not in o.err
    _gone(o, 1)


@pytest.mark.slow
def test_segfault_is_128_plus_signal(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["segfault"]
    assert o.rc == 128 + signal.SIGSEGV, o.err
    assert "root cause: rank 1" in o.err and "SIGSEGV" in o.err
    _gone(o, 2)


@pytest.mark.slow
def test_traceback_of_a_filtered_rank_comes_from_its_error_file(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["raises"]
    assert o.rc == 1, o.err
    assert "[default1]" not in o.out + o.err
    assert "ValueError: boom from rank 1" in o.err
    assert "its full output:" in o.err and "attempt_0/rank_1" in o.err
    # torch elastic's own traceback (ChildFailedError) is not repeated on the console
    assert "ChildFailedError" not in o.err
    _gone(o, 2)


@pytest.mark.slow
def test_jax_ranks_get_skrls_environment_contract(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["jax_ok"]
    assert o.rc == 0, o.err
    envs = [json.loads((o.folder / "pids" / f"env_{r}.json").read_text()) for r in (0, 1)]
    for r, seen in enumerate(envs):
        e = seen["env"]
        assert (e["JAX_RANK"], e["RANK"], e["JAX_LOCAL_RANK"], e["LOCAL_RANK"]) == (str(r),) * 4
        assert e["JAX_WORLD_SIZE"] == e["WORLD_SIZE"] == e["LOCAL_WORLD_SIZE"] == "2"
        assert e["JAX_COORDINATOR_ADDR"] == "127.0.0.1" and int(e["JAX_COORDINATOR_PORT"]) > 0
        assert Path(e["TORCHELASTIC_ERROR_FILE"]).parent.name == f"rank_{r}"
        assert Path(e["TORCHELASTIC_ERROR_FILE"]).parent.parent.name == "attempt_0"
        assert seen["argv"][-4:] == ["--rl_library", "skrl", "--ml_framework", "jax"]
    assert envs[0]["env"]["MGPU_RUN_STAMP"] == envs[1]["env"]["MGPU_RUN_STAMP"]
    assert "[default0]:jax rank 0 ok" in o.out and "jax rank 1 ok" not in o.out
    _gone(o, 2)


@pytest.mark.slow
def test_jax_failing_rank_stops_its_sibling(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["jax_fail"]
    assert o.rc == 5, o.err
    assert "root cause: rank 1" in o.err and "rank 1 failing on purpose" in o.err
    _gone(o, 2)


@pytest.mark.slow
def test_jax_sigint(outcomes: dict[str, Outcome]) -> None:
    o = outcomes["jax_sigint"]
    assert o.rc == EXIT_INTERRUPTED, o.err
    _gone(o, 2)


@pytest.mark.slow
def test_supervisor_api_in_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    cmd = Command(
        argv=(
            sys.executable,
            "-m",
            "isaaclab_mgpu.jaxrun",
            "--nproc_per_node",
            "2",
            "--coordinator_address",
            "127.0.0.1:0",
            "--log_dir",
            str(tmp_path / "logs"),
            str(WORKERS / "jax_contract.py"),
            "--sleep",
        ),
        env={"MGPU_TEST_PIDS": str(pids), "MGPU_RUN_STAMP": "x"},
        world_size=2,
        rank_devices={0: "cpu", 1: "cpu"},
        launcher="jaxrun",
        log_dir=str(tmp_path / "logs"),
    )
    sup = Supervisor(cmd, SuperviseOptions(grace_period=1, kill_after=1, console=False))
    sup.start()
    end = time.monotonic() + 60
    while len(_recorded(pids)) < 2 and time.monotonic() < end:
        assert sup.wait(timeout=0.1) is None
    tree = {p.pid for p in sup.descendants()}
    assert set(_recorded(pids)) < tree  # the ranks and jaxrun itself
    result = sup.stop("test over")
    assert (result.exit_code, result.interrupted, result.survivors) == (EXIT_INTERRUPTED, True, ())
    assert result.log_dir is not None and Path(result.log_dir) == tmp_path / "logs"
    assert not any(map(_alive, tree))


def test_options_reject_negative_times() -> None:
    with pytest.raises(UsageError, match="--grace_period"):
        SuperviseOptions(grace_period=-1)


def test_cli_rejects_negative_grace_before_spawning(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "isaaclab_mgpu",
            "train",
            "--device",
            "cpu",
            "--nproc_per_node",
            "2",
            "--script",
            str(WORKERS / "hello.py"),
            "--kill-after",
            "-3",
            "--log_dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "--kill_after" in r.stderr
    assert list(tmp_path.iterdir()) == []


# torchrun's failure summary, as torch 2.x prints it (captured from a real run of segfault.py).
SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
seg.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-29_17:19:43
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 5762)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 5762
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_17:19:43
  host      : node7
  rank      : 3 (local_rank: 1)
  exitcode  : -11 (pid: 5763)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 5763
============================================================"""


def test_root_cause_is_the_first_observed_failure_not_the_sigtermed_sibling() -> None:
    p = elastic.parse_root_cause(SUMMARY.splitlines())
    assert p is not None
    assert (p.rank, p.local_rank, p.host, p.exitcode, p.pid, p.error_file) == (3, 1, "node7", -11, 5763, None)
    assert elastic.split_exitcode(p.exitcode) == (None, "SIGSEGV")
    assert elastic.exit_status_code(None, "SIGSEGV") == 139
    assert elastic.exit_status_code(3, None) == 3


@pytest.mark.parametrize("debug", [False, True])
def test_torchruns_failure_summary_stays_out_of_the_console_unless_debug(debug, capfdbinary) -> None:
    import io

    from isaaclab_mgpu.launcher.supervise.output import LauncherOutput

    rule = "=" * 60
    text = f"before\n{SUMMARY}\n{rule}\na rule that opens no summary\nafter\n"
    output = LauncherOutput(True, None, failure_summary=debug)
    output._read_stderr(io.BytesIO(text.encode()))
    err = capfdbinary.readouterr().err.decode()
    assert ("Root Cause" in err) == debug and ("seg.py FAILED" in err) == debug, err
    assert "before" in err and "after" in err and f"{rule}\na rule that opens no summary" in err, err
    # Read for the root cause either way.
    assert elastic.parse_root_cause(output.lines).rank == 3


def test_failed_line_ignores_rank_output() -> None:
    line = "E1129 17:19:43.806000 5738 api.py:986] failed (exitcode: -11) local_rank: 1 (pid: 5763) of binary"
    assert elastic.failed_line(line) == (-11, 1, 5763)
    assert elastic.failed_line("[default0]:" + line) is None
