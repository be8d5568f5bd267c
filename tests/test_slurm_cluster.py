"""The job file ``mgpu dry-run --emit sbatch`` prints, submitted to a real SLURM cluster of two nodes.

:mod:`slurm_cluster` starts munge, slurmctld and two slurmd "nodes" (``node9``, ``node10``: network,
UTS and mount namespaces of their own, this machine's file system shared as a cluster's storage).
Each case submits the emitted file unchanged with ``sbatch`` and reads back what a user would:
the job's state (``scontrol``), ``summary.json`` and ``mgpu runs --json``.

Cases that share a setup share a job (one test each), to keep the file's minutes down. Every
job runs on both nodes; ``mgpu submit``'s first job runs two CPU ranks on each (world size 4), to
check where global ranks land, and so does the time-limit case (its stop must come well before
its total, wherever slurmctld's 30-s check falls); the others one (world size 2): what they check
is between nodes, and on this machine's 2 cores fewer rank processes start and train faster.

- ``mgpu submit`` (one job): the same options as ``dry-run --emit sbatch``; it writes the job file
  to ``logs/mgpu/jobs/<name>.sbatch``, records the submission beside it, submits it, prints the job
  id and the command that follows it; that 2-node x 2-CPU-rank job trains to its total with equal
  checksums. SLURM's node 0 is node9, though "node10" sorts first (where c10d's rendezvous would
  put global rank 0): global rank 0 runs on node9, whose mgpu keeps the run's one
  ``summary.json``; node10 writes no run folder.
- The time limit: SLURM's USR1 (the file's ``--signal=USR1@90``) stops the ranks at a checkpoint,
  node 0's mgpu runs ``scontrol requeue``, and the requeued job continues the same run to its
  total; the record keeps both jobs' attempts.
- ``scancel``, then a lost node, then the end of the run (one run, three jobs of one emitted file):
  on ``scancel`` mid-run every node's mgpu stops its ranks at a checkpoint, node 0 prints the
  command that submits the job again (``sbatch --chdir DIR FILE``), and that file submitted again
  (its train line ends ``--resume auto``) continues the run in the same folder. Mid-run in that
  second job node10's slurmd and every process on it are SIGKILLed: node9's mgpu names the node
  and exits 1 (a failed rank whose peer node is gone), and the job ends (NODE_FAIL); once node10
  is back the same file is submitted a third time and continues the run to its total.
- From the login node through mgpu alone (``submit``, ``runs --json``, ``logs -f``, ``cancel``; mgpu
  by its path, not on ``PATH``): a job submitted while both nodes are drained shows ``queued`` with
  SLURM's reason, then ``running`` with a rising iteration; ``mgpu logs -f`` prints rank 0's
  iteration lines as they come; ``mgpu cancel`` stops every node at a checkpoint newer than the
  last periodic one and the job ends (CANCELLED); the same ``mgpu submit`` continues the run to its
  total in the same folder (both jobs in its record); a third job whose every process dies with
  both nodes (nothing records) shows ``lost`` from the login node once SLURM ends it (NODE_FAIL).
- ``mgpu probe-nccl --nnodes 2 --emit sbatch``: the probe job runs world sizes 2 and 4 (1 and 2
  gloo ranks on each node) across both nodes; each node reports both, in its own output file; with
  ``--pairs`` a step per pair of nodes follows (here the one pair), its status in the job's output.

What the tests change of SLURM, as an administrator may: the time-limit case submits with a
10-minute limit and, once rank 0 trains, brings the limit near (``scontrol update TimeLimit``) so
that USR1 comes at slurmctld's next time-limit check (every 30 s), mid-run, rather than at a fixed
time after a start whose length varies. A requeued job is held (``BeginTime``) for about two
minutes before it may run again; that case releases it at once with ``scontrol update
StartTime=now`` and gives it a longer limit so that it ends by finishing, not by a second
time-limit stop. Nothing else of SLURM is changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import NODES, Cluster, unavailable
from training_helpers import child_env

from isaaclab_mgpu.contract.layout import CANCEL

pytestmark = pytest.mark.slow

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")
#: Most cases: two nodes, one CPU rank each (world size 2). What they check is across nodes (SLURM's
#: signals, requeue, a lost node, the login node's view), not the ranks within one; each rank is a
#: process importing torch on this machine's 2 cores, so fewer ranks start and train faster.
LAUNCH = ("--device", "cpu", "--nnodes", "2", "--nproc_per_node", "1")
#: Two nodes, two CPU ranks each (world size 4): where the case checks how global ranks map onto
#: SLURM's nodes (``mgpu submit``'s job) or how a survivor's ranks take over (a shrink).
LAUNCH_2X2 = ("--device", "cpu", "--nnodes", "2", "--nproc_per_node", "2")
#: The time-limit case's total: more than the first job trains in the up to 30 s before its USR1. It
#: runs two ranks a node (LAUNCH_2X2), whose pace leaves a wide margin: 27 iterations by the stop on
#: 2 loaded cores, CI 2 a second. One rank a node trains about 6 a second: up to some 200 by the
#: stop (139 measured at 22.5 s after the limit came near), too near any total the second job could
#: finish in less time than the 2x2 job takes.
TIME_LIMIT_TOTAL = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = unavailable()
    if why is not None:
        pytest.skip(f"no SLURM cluster: {why}")
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    # A run stopped with SIGTERM (a CI time limit) tears its cluster down as Ctrl-C does; one
    # SIGKILLed leaves it to the next run's start (Cluster.start cleans leftovers first).
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _job_env(tmp: Path) -> dict[str, str]:
    """What the job sees (sbatch exports the submitter's environment): lean threads, and no ``mgpu``
    on PATH, as for a user of the README's ``uv`` environment: the job file names the interpreter."""
    env = child_env(tmp)
    ours = os.path.dirname(os.path.abspath(sys.executable))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    assert shutil.which("mgpu", path=env["PATH"]) is None, env["PATH"]
    return env


def _emit(tmp: Path, name: str, *args: str, launch: tuple[str, ...] = LAUNCH) -> Path:
    """The job file ``mgpu dry-run … --emit sbatch`` prints for ``launch`` (nodes and ranks) and
    ``args``, saved as ``tmp/<name>.sbatch``."""
    argv = [sys.executable, "-m", "isaaclab_mgpu", "dry-run", *launch, *args]
    argv += ["--emit", "sbatch", "--job_name", name]
    out = subprocess.run(argv, cwd=tmp, env=_job_env(tmp), capture_output=True, text=True, check=True)
    path = tmp / f"{name}.sbatch"
    path.write_text(out.stdout)
    return path


def _output(tmp: Path, name: str, job: str) -> str:
    path = tmp / f"{name}-{job}.out"
    return path.read_text(errors="replace") if path.exists() else ""


def _runs(tmp: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "runs", "--json"], cwd=tmp, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _the_run(tmp: Path) -> tuple[Path, dict]:
    """The one run folder under the shared log root and its summary (there must be exactly one)."""
    found = sorted((tmp / "logs").glob("*/*/*/summary.json"))
    assert len(found) == 1, found
    return found[0].parent, json.loads(found[0].read_text())


def _run_seconds(value: str) -> int:
    """``scontrol``'s ``RunTime`` (``[D-]HH:MM:SS``) in seconds."""
    days, _, clock = value.rpartition("-")
    h, m, sec = (int(x) for x in clock.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec


def _wait(what: str, check, timeout: float, tail=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s\n{tail()[-4000:]}")
        time.sleep(0.5)


def _summaries(tmp: Path) -> list[dict]:
    """Every run's summary.json under the shared log root that reads whole (one being replaced is
    left out this time)."""
    found = []
    for path in sorted((tmp / "logs").glob("*/*/*/summary.json")):
        with contextlib.suppress(ValueError, OSError):
            found.append(json.loads(path.read_text()))
    return found


def _reached(tmp: Path) -> int:
    """Iterations rank 0's running summary has recorded so far (0 before it has one)."""
    found = _summaries(tmp)
    return int(found[0].get("iterations") or 0) if found else 0


def _reached_running(tmp: Path) -> int:
    """The most iterations a run still running has recorded in its summary (0 when none runs).

    Read from the files, it costs nothing: the waits on ``mgpu runs --json`` (a Python process
    each, on the 2 cores the ranks train on) ask it only once this says the row can be there."""
    running = [int(s.get("iterations") or 0) for s in _summaries(tmp) if s.get("status") == "running"]
    return max(running, default=0)


def test_mgpu_submit_trains_two_nodes_to_their_total_with_rank_0_on_slurms_node_0(cluster, tmp_path):
    # One job for both: what mgpu submit writes and reports, and where that job's ranks run.
    hosts = cluster.scontrol("show", "hostnames", "node[9-10]").split()
    assert hosts == [n for n, _ in NODES] and sorted(hosts)[0] == "node10"  # SLURM's order is not sorted
    argv = [sys.executable, "-m", "isaaclab_mgpu", "submit", *LAUNCH_2X2, "--max_iterations", "8"]
    argv += ["--save_interval", "4", "--job_time", "00:10:00", "--job_name", "sub"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=cluster.env(_job_env(tmp_path)), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    job_file = tmp_path / "logs" / "mgpu" / "jobs" / "sub.sbatch"
    assert job.isdigit() and f"submitted SLURM job {job}: logs/mgpu/jobs/sub.sbatch" in done.stderr
    assert "the run will live under logs/rsl_rl/cartpole/" in done.stderr
    assert "follow it: " in done.stderr and " logs -f sub" in done.stderr, done.stderr
    record = json.loads((tmp_path / "logs" / "mgpu" / "jobs" / f"sub-{job}.json").read_text())
    assert (record["job_id"], record["job_file"]) == (job, str(job_file)), record
    assert job_file.read_text().rstrip().endswith("--resume auto")
    fields = cluster.wait_job(job, ENDED, timeout=300)
    out = _output(tmp_path, "sub", job)
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), out[-4000:]
    folder, s = _the_run(tmp_path)
    assert (s["status"], s["iterations"], s["world_size"], s["checksums_equal"]) == ("finished", 8, 4, True)
    assert len(s["checksums"]["end"]) == 4 and len(set(s["checksums"]["end"])) == 1
    assert s["slurm_job_id"] == job
    # rank 0 trained on node9 (its TensorBoard file names its host); node10's ranks 2 and 3 keep no folder.
    events = [p.name for p in folder.glob("events.out.tfevents.*")]
    assert len(events) == 1 and ".node9." in events[0], events
    assert sorted(p.name for p in folder.glob("rank_*")) == ["rank_1"]
    # Both nodes met on the static rendezvous at node9, SLURM's node 0, and both name the run folder.
    assert out.count("mgpu: filled --master_addr node9 from SLURM_JOB_NODELIST") == 2, out[-4000:]
    named = f"mgpu: run folder: {folder.relative_to(tmp_path)} (node 0 on node9, which runs global rank 0"
    assert out.count(named) == 2, out[-4000:]
    rows = _runs(tmp_path)
    assert [(r["status"], r["iterations"], r["world_size"]) for r in rows] == [("finished", 8, 4)]


def test_the_time_limit_checkpoints_requeues_and_the_requeued_job_finishes_the_run(cluster, tmp_path):
    total = TIME_LIMIT_TOTAL
    args = ("--max_iterations", str(total), "--save_interval", "10", "--requeue", "--job_time", "00:10:00")
    job_file = _emit(tmp_path, "limit", *args, launch=LAUNCH_2X2)
    text = job_file.read_text()
    assert "#SBATCH --requeue" in text and " --requeue" in text.split("\nsrun ")[-1], text
    assert "#SBATCH --signal=USR1@90" in text, text
    job = cluster.sbatch(job_file, tmp_path, _job_env(tmp_path))
    out = lambda: _output(tmp_path, "limit", job)  # noqa: E731
    # Once it trains, the limit is brought near (as an administrator may): USR1@90 comes when the
    # time left is under 90 s plus slurmctld's 30-s check period (measured: at 28 s of a 1-minute
    # job with @15, @30 or @45), so at its next check, mid-run; the limit itself is 60 to 120 s
    # away, at least one check (30 s) after the signal, room for the stop and the requeue.
    _wait("rank 0 at iteration 2", lambda: _reached(tmp_path) >= 2, 300, out)
    minutes = _run_seconds(cluster.job(job)["RunTime"]) // 60 + 2
    cluster.scontrol("update", f"JobId={job}", f"TimeLimit={minutes}")
    near = time.monotonic()
    _wait("the job requeued", lambda: cluster.requeued(job), 120, out)
    print(f"requeued {time.monotonic() - near:.1f} s after the limit came near")
    _wait("the requeued job held", lambda: cluster.job(job)["JobState"] == "PENDING", 60, out)
    _wait("both nodes idle", lambda: all(cluster.node(n).get("State") == "IDLE" for n, _ in NODES), 60)
    first = out()
    assert f"requeueing SLURM job {job}: the requeued job continues this run" in first, first[-4000:]
    # SLURM's lines on the requeue come after mgpu said they are expected.
    said = "expected next, not failures: srun's 'Exited with exit code 75'"
    assert said in first and "Exited with exit code 75" not in first.split(said)[0], first[-4000:]
    _, stopped = _the_run(tmp_path)
    assert stopped["status"] == "requeued" and 2 <= stopped["iterations"] < total, stopped
    print(f"first job stopped at iteration {stopped['iterations']} of {total}")
    # Released now (not in two minutes), with room to finish rather than meet the limit again. Not in
    # the second the nodes went idle, though: each slurmd revoked the job's credential as it ended
    # the first instance, and refuses a credential made in the same second (whole seconds) as that
    # revocation ("Job credential revoked": the requeued job FAILED, seen once with one rank a node,
    # whose stop and requeue took under a second).
    idle = time.time()
    time.sleep(max(0.0, int(idle) + 1.05 - idle))
    cluster.scontrol("update", f"JobId={job}", "StartTime=now", "TimeLimit=00:15:00")
    fields = cluster.wait_job(job, ENDED, timeout=480)
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), out()[-4000:]
    assert f"SLURM requeued job {job} (restart 1): continuing" in out()
    _, s = _the_run(tmp_path)
    assert (s["status"], s["iterations"], s["checksums_equal"]) == ("finished", total, True)
    # One run, one record: the first job's stopped attempt, then the requeued job's.
    launches = [(a["launch"], a["outcome"]) for a in s["attempts"]]
    assert launches == [(0, "stopped"), (1, "finished")], s["attempts"]
    assert s["attempts"][1]["started_at"] == s["attempts"][0]["checkpoint"] == stopped["iterations"]
    assert [g["end_iteration"] for g in s["segments"]] == [stopped["iterations"], total], s["segments"]
    assert s["whole"]["segments"] == 2 and s["whole"]["train_time_s"] > s["train_time_s"], s["whole"]
    assert [(r["status"], r["iterations"]) for r in _runs(tmp_path)] == [("finished", total)]


def test_scancel_saves_a_lost_node_is_named_and_the_same_job_file_continues_the_run(cluster, tmp_path):
    # One run, three jobs of the same file: scancel'ed, then losing node10, then finishing the run.
    # Enough iterations that neither stop lands on the total: one rank a node trains about 6
    # iterations a second here (0.17 s each), and the stops come 1 to 3 s after they are asked for.
    total = 80
    # No --resume given: the emitted file continues the newest unfinished run by itself.
    args = ("--max_iterations", str(total), "--save_interval", "5", "--job_time", "00:10:00")
    job_file = _emit(tmp_path, "again", *args)
    assert job_file.read_text().rstrip().endswith("--resume auto")
    job = cluster.sbatch(job_file, tmp_path, _job_env(tmp_path))
    out = lambda: _output(tmp_path, "again", job)  # noqa: E731
    _wait("rank 0 at iteration 6", lambda: _reached(tmp_path) >= 6, 300, out)
    cluster.scancel(job)
    cluster.wait_job(job, ENDED, timeout=120)
    # Every node's mgpu heard the stop, the ranks saved, and node 0 said how to go on: the job's
    # own file submitted again, not a single-node line with this job's --master_port.
    hint = f"to continue: sbatch --chdir {tmp_path} {job_file}"
    _wait("node 0's hint to resubmit", lambda: hint in out(), 30, out)
    assert "--master_port" not in next(line for line in out().splitlines() if hint in line)
    folder, stopped = _the_run(tmp_path)
    cut = stopped["iterations"]
    assert stopped["status"] == "interrupted" and 6 <= cut < total, stopped
    assert (folder / f"model_{cut}.pt").is_file()
    # The same file submitted again continues the run. --no-requeue: the job ends with the node
    # lost below (SLURM would requeue it under the same job and step ids, and a step of the lost
    # instance was seen signalling the requeued one); the user resubmits the same file.
    job = cluster.sbatch(job_file, tmp_path, _job_env(tmp_path), "--no-requeue")
    _wait("rank 0 at iteration 11", lambda: _reached(tmp_path) >= max(11, cut + 1), 300, out)
    assert "--resume auto: the newest unfinished run: continuing" in out(), out()[-4000:]
    killed = time.monotonic()
    cluster.kill_node("node10")
    error = _wait("node9's mgpu names the lost node", lambda: _error_line(out()), 120, out)
    named = time.monotonic() - killed
    assert "node10" in error and "gone" in error, error
    # Bound: the store client's 3 failed answers, the ranks' broken connection and torchrun's stop.
    assert named < 60, f"named {named:.1f} s after the kill"
    print(f"node10 lost: named by node9's mgpu {named:.1f} s after the kill")
    exited = "srun: error: node9: task 0: Exited with exit code 1"
    _wait("srun sees node9's mgpu exit 1", lambda: exited in out(), 60, out)
    fields = cluster.wait_job(job, ENDED, timeout=120)
    assert fields["JobState"] in ("NODE_FAIL", "FAILED"), fields
    _wait("node9 holds nothing of the run", lambda: not _run_processes("node9"), 30)
    same, failed = _the_run(tmp_path)
    assert same == folder, (same, folder)
    assert failed["status"] == "failed" and failed["attempts"][1]["outcome"] == "failed", failed
    assert failed["attempts"][1]["started_at"] == cut, failed["attempts"]
    # The machine comes back (minutes later on a real cluster) and the same file is submitted again.
    _wait("node10 DOWN", lambda: cluster.node("node10").get("State", "").startswith("DOWN"), 60)
    cluster.start_node("node10")
    _wait("both nodes idle", lambda: all(cluster.node(n).get("State") == "IDLE" for n, _ in NODES), 90)
    s = _resubmit_and_finish(cluster, tmp_path, job_file, "again", total, folder)
    outcomes = [(a["launch"], a["outcome"]) for a in s["attempts"]]
    assert outcomes == [(0, stopped["attempts"][0]["outcome"]), (1, "failed"), (2, "finished")], s["attempts"]
    assert s["attempts"][2]["started_at"] == s["attempts"][1]["checkpoint"] >= 10


def _resubmit_and_finish(cluster, tmp: Path, job_file: Path, name: str, total: int, folder: Path) -> dict:
    """Submit ``job_file`` again: its job (``--resume auto``) continues the run in ``folder`` to
    ``total`` with equal checksums, the one run ``mgpu runs`` lists; the run's summary then."""
    again = cluster.sbatch(job_file, tmp, _job_env(tmp))
    fields = cluster.wait_job(again, ENDED, timeout=420)
    rerun = _output(tmp, name, again)
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), rerun[-4000:]
    assert "--resume auto: the newest unfinished run: continuing" in rerun, rerun[-4000:]
    same, s = _the_run(tmp)
    assert same == folder, (same, folder)
    assert (s["status"], s["iterations"], s["checksums_equal"]) == ("finished", total, True), s
    assert [(r["status"], r["iterations"]) for r in _runs(tmp)] == [("finished", total)]
    return s


def test_the_probe_job_runs_world_sizes_2_and_4_across_both_nodes(cluster, tmp_path):
    # mgpu probe-nccl --nnodes 2 --emit sbatch: every node's probe meets with the train job's
    # rendezvous; gloo's default CPU sweep is 1 and 2 ranks per node: world sizes 2 and 4.
    argv = [sys.executable, "-m", "isaaclab_mgpu", "probe-nccl", "--device", "cpu", "--nnodes", "2"]
    argv += ["--sizes", "8,4K", "--iters", "3", "--warmup", "1", "--timeout", "120", "--json"]
    argv += ["--pairs", "--emit", "sbatch", "--job_name", "probe", "--job_time", "00:10:00"]
    env = _job_env(tmp_path)
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    (tmp_path / "probe.sbatch").write_text(out.stdout)
    job = cluster.sbatch(tmp_path / "probe.sbatch", tmp_path, env)
    fields = cluster.wait_job(job, ENDED, timeout=300)
    reports = {node: _output(tmp_path, "probe", f"{job}-{node}") for node, _ in NODES}
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), reports
    for node, text in reports.items():  # each node reports its own ranks, in a file of its own
        doc = json.loads(text[text.index("\n{") + 1 :])  # after the progress lines (stderr)
        assert doc["exit_code"] == 0, text[-4000:]
        assert [(w["world_size"], w["status"]) for w in doc["world_sizes"]] == [(2, "ok"), (4, "ok")]
        assert all(
            len(w["sizes"]) == 2 and w["sizes"][-1]["in_place"]["busbw"] > 0 for w in doc["world_sizes"]
        )
        assert doc["folder"].endswith(f"-{node}"), doc["folder"]  # the nodes' files apart
    # --pairs across nodes: a step per pair of nodes (here the one pair), its status in the job's
    # output and each node's report of it in a file of its own.
    assert "node pair node9 node10: ok" in _output(tmp_path, "probe", job)
    for node, _ in NODES:
        text = _output(tmp_path, "probe", f"{job}-pair-node9-node10-{node}")
        doc = json.loads(text[text.index("\n{") + 1 :])
        assert [(w["world_size"], w["status"]) for w in doc["world_sizes"]] == [(2, "ok")], text[-4000:]


def _error_line(text: str) -> str | None:
    return next((line for line in text.splitlines() if line.startswith("mgpu: error:")), None)


def _run_processes(node: str) -> list[str]:
    """Command lines of the run's processes (mgpu, torchrun, ranks) left in ``node``'s namespace."""
    listed = subprocess.run(["ip", "netns", "pids", f"mgpu-{node}"], capture_output=True, text=True)
    pids = listed.stdout.split()
    found = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "isaaclab_mgpu" in cmdline or "torch.distributed" in cmdline or "mgpu train" in cmdline:
            found.append(cmdline)
    return found


def _mgpu(cluster, tmp: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``mgpu ARGS`` from the login node (this host), as a user of the README's ``uv`` environment
    runs it: its own ``mgpu`` by path, not on ``PATH``."""
    exe = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "mgpu")
    env = cluster.env(_job_env(tmp))
    return subprocess.run([exe, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)


def _rows(cluster, tmp: Path) -> list[dict]:
    done = _mgpu(cluster, tmp, "runs", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _row_of(cluster, tmp: Path, job: str) -> dict | None:
    """``mgpu runs --json``'s row of the run (or queued job) SLURM job ``job`` belongs to."""
    return next((r for r in _rows(cluster, tmp) if job in r["jobs"]), None)


def _running_row(cluster, tmp: Path, job: str, reached) -> dict | None:
    """``mgpu runs --json``'s row of job ``job`` once its run is running at an iteration that
    ``reached`` accepts, else None. ``mgpu runs`` is asked only once a running summary's iteration
    is accepted (:func:`_reached_running`): each asking is a Python process on the 2 cores the
    ranks train on."""
    if not reached(_reached_running(tmp)):
        return None
    r = _row_of(cluster, tmp, job)
    return r if r and r["status"] == "running" and reached(r["reached"] or 0) else None


class _Lines:
    """A process's stdout lines as they come, each with the time it came (read by a thread)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import threading

        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))


def test_submit_follow_cancel_continue_and_a_lost_job_through_mgpu_from_the_login_node(cluster, tmp_path):
    # The cancel must land between two periodic checkpoints. One rank a node trains about 6
    # iterations a second here (measured), summary.json (what mgpu runs and the wait read) follows
    # every 2 s, some 12 iterations, and the stop lands some 14 after mgpu cancel is asked: asked at
    # most 30 past a checkpoint, it lands at most some 60 past it, before the next at 80.
    total, every = 160, 80
    submit = ("submit", *LAUNCH, "--max_iterations", str(total), "--save_interval", str(every))
    submit += ("--job_time", "00:10:00", "--job_name", "first")
    # Setup: both nodes drained, so the job waits in the queue.
    cluster.scontrol("update", "NodeName=node[9-10]", "State=DRAIN", "Reason=mgpu-test")
    try:
        done = _mgpu(cluster, tmp_path, *submit)
        assert done.returncode == 0, done.stderr
        job = done.stdout.strip()
        assert job.isdigit() and "logs -f first" in done.stderr, done.stderr
        queued = _row_of(cluster, tmp_path, job)
        assert queued is not None and (queued["status"], queued["job_state"]) == ("queued", "PENDING"), queued
        assert queued["job_reason"] and queued["folder"] == "logs/rsl_rl/cartpole", queued
        exe = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "mgpu")
        follow = subprocess.Popen(
            [exe, "logs", "-f", "first"], cwd=tmp_path, env=cluster.env(_job_env(tmp_path)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        lines = _Lines(follow)
    finally:
        cluster.scontrol("update", "NodeName=node[9-10]", "State=RESUME")
    out = lambda: _output(tmp_path, "first", job)  # noqa: E731
    first = _wait("running", lambda: _running_row(cluster, tmp_path, job, lambda n: n >= 2), 300, out)
    assert first["nodes"] == 2 and first["world_size"] == 2 and first["job_state"] == "RUNNING", first
    # The stop lands between two periodic checkpoints: its own checkpoint is newer.
    between = lambda n: n >= every + 2 and 2 <= n % every <= 30  # noqa: E731
    rising = lambda: _running_row(cluster, tmp_path, job, between)  # noqa: E731
    later = _wait("a rising iteration between two checkpoints", rising, 300, out)
    assert later["reached"] > first["reached"]
    cancelled_at = time.monotonic()
    stop = _mgpu(cluster, tmp_path, "cancel", "first")
    assert stop.returncode == 0, stop.stderr + out()[-3000:]
    assert cluster.job(job)["JobState"] == "CANCELLED"
    folder, s = _the_run(tmp_path)
    cut = s["iterations"]
    assert s["status"] == "stopped" and later["reached"] <= cut < total and cut % every, s
    saved = sorted(p.name for p in folder.glob("model_*.pt"))
    assert f"model_{cut}.pt" in saved and f"model_{cut // every * every}.pt" in saved, (saved, stop.stderr)
    hint = next(line for line in stop.stderr.splitlines() if "to continue:" in line)
    assert hint.split("to continue: ")[1].endswith(shlex.join(submit)), hint  # the same mgpu submit
    row = _row_of(cluster, tmp_path, job)
    assert (row["status"], row["job_state"]) == ("stopped", "CANCELLED"), row
    assert (folder / CANCEL).is_file()  # what told node 0's mgpu the stop was mgpu cancel's
    # mgpu logs -f printed rank 0's iteration lines as they came, and ended with the run (exit 1).
    assert follow.wait(60) == 1, follow.stderr.read()
    lines.thread.join(10)
    iters = [(t, line) for t, line in lines.lines if line.startswith("[mgpu] iteration ")]
    assert len(iters) >= 12 and iters[0][0] < cancelled_at, lines.lines[-20:]
    # The same mgpu submit continues the run to its total, in the same folder, as a second job.
    again = _mgpu(cluster, tmp_path, *submit)
    assert again.returncode == 0, again.stderr
    job2 = again.stdout.strip()
    fields = cluster.wait_job(job2, ENDED, timeout=420)
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), _output(tmp_path, "first", job2)
    same, s = _the_run(tmp_path)
    assert same == folder, (same, folder)
    assert (s["status"], s["iterations"], s["checksums_equal"]) == ("finished", total, True), s
    assert [a["launch"] for a in s["attempts"]] == [0, 1] and s["attempts"][1]["started_at"] == cut
    assert not (folder / CANCEL).exists()  # the continuing launch took the cancel's note away
    row = _row_of(cluster, tmp_path, job2)
    assert (row["status"], row["jobs"], row["job_state"]) == ("finished", [job, job2], "COMPLETED"), row
    # A job whose every process dies with both nodes (nothing records) is lost, seen from here.
    done = _mgpu(cluster, tmp_path, "submit", *LAUNCH, "--max_iterations", "400", "--job_name", "lost")
    assert done.returncode == 0, done.stderr
    job3 = done.stdout.strip()
    cluster.scontrol("update", f"JobId={job3}", "Requeue=0")  # setup: SLURM would requeue it on NODE_FAIL
    _wait("the third run trains", lambda: _running_row(cluster, tmp_path, job3, lambda n: n >= 2),
          300, lambda: _output(tmp_path, "lost", job3))  # fmt: skip
    for name, _ in NODES:
        cluster.kill_node(name)
    try:
        _wait("SLURM ends the job", lambda: cluster.job(job3)["JobState"] in ENDED, 180)
        over = time.monotonic()
        lost = _wait("mgpu runs says lost", lambda: (r := _row_of(cluster, tmp_path, job3))
                     and r["status"] == "lost" and r, 60)  # fmt: skip
        print(f"lost seen {time.monotonic() - over:.1f} s after SLURM ended the job ({lost['job_state']})")
        told = _mgpu(cluster, tmp_path, "runs", lost["folder"], "--json")
        assert json.loads(told.stdout)["status"] == "lost", told.stdout[-2000:]
    finally:
        for name, _ in NODES:
            cluster.start_node(name)
        _wait("both nodes idle", lambda: all(cluster.node(n).get("State") == "IDLE" for n, _ in NODES), 120)
