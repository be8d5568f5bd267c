"""``dry-run --emit``: the SLURM batch script and the PyTorchJob manifest, and what each node then runs
(the TrainJob, the CRD schemas and a pod rerun after SIGTERM: ``test_kubernetes_jobs.py``).

Each node of a job runs the job file's ``mgpu train`` line; here that line is dry-run under the
variables the scheduler would set on each node (a 2-node allocation, the operator's pods), and the
torchrun command it gives is compared with the one the explicit options give.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
import yaml
from cli_helpers import run, torchrun_line

ARGS = [
    "--num_gpus",
    "4",
    "--nnodes",
    "2",
    "--max_iterations",
    "5",
    "--seed",
    "3",
    "agent.learning_rate=0.0003",
]


#: How the emitted job starts mgpu: this interpreter, the one dry-run ran in (not ``mgpu`` from PATH).
PROGRAM = shlex.join([sys.executable, "-m", "isaaclab_mgpu"])


@pytest.fixture(autouse=True)
def four_gpus(monkeypatch):
    """Four visible GPUs; no scheduler variables; no preflight verdicts about this box."""
    import isaaclab_mgpu.launcher.diagnostics as diagnostics

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(diagnostics, "refusals", lambda spec, resolved: ())
    monkeypatch.setattr("isaaclab_mgpu.launch.check_isaac_task", lambda spec: None)
    for name in [n for n in os.environ if n.startswith(("PET_", "SLURM_"))] + ["MGPU_DEBUG"]:
        monkeypatch.delenv(name, raising=False)


def emitted(capsys, *argv: str) -> str:
    code, out, err = run(capsys, "dry-run", *argv)
    assert code == 0, err
    return out


def test_sbatch_holds_the_allocation_and_passes_bash_n(capsys, tmp_path):
    script = emitted(capsys, *ARGS, "--emit", "sbatch", "--job_name", "cart", "--partition", "gpu")
    path = tmp_path / "cart.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for line in (
        "--nodes=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=16",  # 4 ranks x 4 CPUs
        "--gpus-per-node=4",
        "--signal=USR1@90",
        "--partition=gpu",
    ):
        assert f"#SBATCH {line}" in lines
    assert "#SBATCH --requeue" not in lines
    srun = [line for line in lines if line.startswith("srun ")]
    prefix = "srun --kill-on-bad-exit=1 --cpus-per-task=16"
    # The job runs the mgpu that wrote it and continues the newest unfinished run when resubmitted.
    line = f'{prefix} {PROGRAM} train --master_port "$MGPU_PORT" {shlex.join(ARGS)} --resume auto'
    assert srun == [line]
    assert "# Submitting it again continues the newest unfinished run (--resume auto)." in lines
    assert (
        "# Shared by every node (and by the nodes of a requeued job, which may be other ones): this" in lines
    )


def test_sbatch_requeue_writes_the_header_and_keeps_the_train_lines_requeue(capsys):
    script = emitted(
        capsys, *ARGS, "--emit", "sbatch", "--requeue", "--job_time", "00:30:00", "--rdzv-port", "31000"
    )
    lines = script.splitlines()
    assert {
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --time=00:30:00",
        "MGPU_PORT=31000",
    } <= set(lines)
    (srun,) = [line for line in lines if line.startswith("srun ")]
    # Without --requeue on the train line node 0's mgpu never requeues, and SLURM never requeues a
    # time-out by itself: the header alone would end the run at the time limit.
    assert "--requeue" in shlex.split(srun)[srun.split().index("train") :]


@pytest.mark.parametrize(
    ("argv", "cpus"),
    [
        (["--device", "cpu"], 1),  # one CPU rank by default, one CPU each
        (["--device", "cpu", "--num_gpus", "2"], 2),
        (["--num_gpus", "2", "--cpus_per_rank", "6"], 12),
        (["--gpus", "0,1,2"], 12),
    ],
)
def test_sbatch_asks_for_the_cpus_of_its_ranks(capsys, argv, cpus):
    lines = emitted(capsys, *argv, "--emit", "sbatch").splitlines()
    assert f"#SBATCH --cpus-per-task={cpus}" in lines
    (srun,) = [line for line in lines if line.startswith("srun ")]
    assert srun.startswith(f"srun --kill-on-bad-exit=1 --cpus-per-task={cpus} {PROGRAM} train ")
    assert ("#SBATCH --gpus-per-node" in " ".join(lines)) == ("cpu" not in argv)


def test_each_node_of_a_2_node_allocation_dry_runs_the_srun_line_into_its_command(
    capsys, monkeypatch, tmp_path
):
    path = tmp_path / "job.sbatch"
    path.write_text(emitted(capsys, *ARGS, "--emit", "sbatch"))
    # SLURM runs the script on node 0 and srun starts the line on every node: a stand-in srun
    # records the line as bash expanded it (the port), and each node's dry-run then reads it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # srun's own options (--kill-on-bad-exit=1 ...) come before the command; the stand-in drops them.
    stand_in = '#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nprintf "%s\\n" "$@" > "$SRUN_ARGS"\n'
    (bin_dir / "srun").write_text(stand_in)
    (bin_dir / "srun").chmod(0o755)
    allocation = {"SLURM_JOB_ID": "4242", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    env = {**os.environ, **allocation, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env["SRUN_ARGS"] = str(tmp_path / "srun.args")
    subprocess.run(["bash", str(path)], env=env, check=True)
    line = (tmp_path / "srun.args").read_text().splitlines()
    port = str(20000 + 4242 % 10000)
    assert line[:6] == [sys.executable, "-m", "isaaclab_mgpu", "train", "--master_port", port]
    assert line[-2:] == ["--resume", "auto"]
    for node in (0, 1):
        got = torchrun_line(capsys, monkeypatch, {**allocation, "SLURM_NODEID": str(node)}, line[4:])
        explicit = [
            *ARGS, "--resume", "auto", "--node_rank", str(node), "--master_port", port,
            "--master_addr", "gpu07", "--rdzv_id", "4242",
        ]  # fmt: skip
        assert got == torchrun_line(capsys, monkeypatch, {}, explicit)
        assert got[got.index("--node_rank") + 1] == str(node)
        assert got[got.index("--master_addr") + 1] == "gpu07"


def test_pytorchjob_manifest_and_each_pods_command(capsys, monkeypatch):
    manifest = yaml.safe_load(
        emitted(capsys, *ARGS, "--emit", "pytorchjob", "--job_name", "cart", "--image", "img:1")
    )
    assert (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]) == (
        "kubeflow.org/v1", "PyTorchJob", "cart",
    )  # fmt: skip
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert manifest["spec"]["nprocPerNode"] == "4"
    assert {kind: r["replicas"] for kind, r in replicas.items()} == {"Master": 1, "Worker": 1}
    assert manifest["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "Running"}
    pods = []
    for kind, r in replicas.items():
        (container,) = r["template"]["spec"]["containers"]
        assert (container["name"], container["image"]) == ("pytorch", "img:1")
        # The pod's grace for the ranks: terminationGracePeriodSeconds (60) less mgpu's reserve.
        assert container["command"] == ["mgpu", "train", "--grace_period", "40", *ARGS, "--resume", "auto"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
        assert container["resources"]["requests"] == {"cpu": 16, "memory": "64Gi"}
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm"}  # no --pvc
        assert (r["restartPolicy"], r["template"]["spec"]["terminationGracePeriodSeconds"]) == (
            "OnFailure",
            60,
        )
        pods += [(kind, i, container) for i in range(r["replicas"])]
    for kind, index, container in pods:
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "pytorchjob-port")
        rank = index + (kind == "Worker")
        # As the training operator sets a pod's environment without an elastic policy.
        operator = {
            "MASTER_ADDR": "cart-master-0", "MASTER_PORT": str(port), "WORLD_SIZE": "8", "RANK": str(rank),
            "PET_MASTER_ADDR": "cart-master-0", "PET_MASTER_PORT": str(port), "PET_NNODES": "2",
            "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "4", "PYTHONUNBUFFERED": "0",
        }  # fmt: skip
        got = torchrun_line(capsys, monkeypatch, operator, container["command"][2:])
        explicit = [
            *ARGS,
            "--resume",
            "auto",
            "--node_rank",
            str(rank),
            "--master_addr",
            "cart-master-0",
            "--master_port",
            str(port),
        ]
        assert got == torchrun_line(capsys, monkeypatch, {}, explicit)
        assert got[got.index("--node_rank") + 1] == str(rank)


def test_the_job_line_is_the_same_launch(capsys, monkeypatch):
    # Every kind of option survives the trip spec -> mgpu train line -> spec.
    argv = [
        "--device", "cpu", "--num_gpus", "2", "--stall_timeout", "12.5", "--log_all_ranks", "--nnodes", "2",
        "--rdzv_endpoint", "head:29400", "--rdzv_id", "x", "--no_inject_distributed", "--rl_library", "skrl",
        "--max_restarts", "1", "--seed", "3", "env.dt=0.01",
    ]  # fmt: skip
    job = yaml.safe_load(emitted(capsys, *argv, "--emit", "pytorchjob"))
    line = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    resources = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": 2, "memory": "32Gi"}}  # CPU ranks: no GPU limit
    assert line[-2:] == ["--resume", "auto"]
    argv += ["--resume", "auto"]
    env = {"PET_NODE_RANK": "1"}
    assert torchrun_line(capsys, monkeypatch, env, line[2:]) == torchrun_line(capsys, monkeypatch, env, argv)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--nnodes", "2", "--emit", "sbatch"], "--emit sbatch needs --num_gpus N"),
        (["--num_gpus", "2", "--node_rank", "1", "--nnodes", "2", "--master_addr", "h", "--emit", "sbatch"],
         "--node_rank differs per node"),
        (["--num_gpus", "2", "--emit", "slurm"], "--emit 'slurm' is not a job file kind"),
        (["--num_gpus", "2", "--nnodes", "1:2", "--emit", "pytorchjob"], "is elastic"),
        (["--num_gpus", "2", "--image", "x:1"], "--image applies to a job file; add --emit pytorchjob or"),
        (["--num_gpus", "2", "--job_requeue"], "--job_requeue is now --requeue"),
        (["--num_gpus", "2", "--emit", "sbatch", "--job_requeue"], "give --requeue"),
    ],
)  # fmt: skip
def test_job_file_refusals(capsys, no_spawn, argv, fragment):
    code, out, err = run(capsys, "dry-run", *argv)
    assert (code, out) == (2, "") and fragment in err, err


def test_every_job_file_runs_one_command_and_the_sbatch_names_its_interpreter(monkeypatch):
    from isaaclab_mgpu.launcher.jobfiles import TERMINATION_GRACE, JobOptions, emit, job_command, stop_grace
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    spec = LaunchSpec(training_args=("--max_iterations", "5"), device="cpu", nnodes="2", nproc_per_node="2")
    assert job_command(spec)[-2:] == ["--resume", "auto"]
    pod = yaml.safe_load(emit(spec, JobOptions(kind="pytorchjob", pvc="logs")))
    container = pod["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["command"] == job_command(spec, stop_grace(TERMINATION_GRACE))  # a pod's grace too
    monkeypatch.setattr(sys, "executable", "/opt/env/bin/python")
    named = emit(spec, JobOptions(kind="sbatch"))
    assert named == emit(spec, JobOptions(kind="sbatch"))  # deterministic
    (srun,) = [line for line in named.splitlines() if line.startswith("srun ")]
    tail = shlex.split(srun)[shlex.split(srun).index("/opt/env/bin/python") :]
    assert tail[:4] == ["/opt/env/bin/python", "-m", "isaaclab_mgpu", "train"]
    assert [t for t in tail[4:] if t != "$MGPU_PORT" and t != "--master_port"] == job_command(spec)[2:]
    # No interpreter known (an empty sys.executable): mgpu from PATH, and the file says so.
    monkeypatch.setattr(sys, "executable", "")
    plain = emit(spec, JobOptions(kind="sbatch"))
    assert " mgpu train " in plain and "mgpu must be on PATH on every node" in plain
    # A --resume given is kept as given; a program of the user's continues by itself.
    given = LaunchSpec(training_args=("--resume", "logs/r"), device="cpu", nnodes="2")
    assert job_command(given)[-2:] == ["--resume", "logs/r"] and job_command(given).count("--resume") == 1
    script = LaunchSpec(script="train.py", device="cpu", nnodes="2")
    assert "--resume" not in job_command(script)
    assert "Submitting it again" not in emit(script, JobOptions(kind="sbatch"))


def test_a_requeue_job_file_announces_srun_s_exit_75_lines():
    from isaaclab_mgpu.launcher.jobfiles import JobOptions, emit
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    spec = LaunchSpec(device="cpu", nnodes="2", requeue=True)
    text = emit(spec, JobOptions(kind="sbatch"))
    assert "Exited with exit code 75" in text and "CANCELLED" in text
    assert "Exited with exit code 75" not in emit(
        LaunchSpec(device="cpu", nnodes="2"), JobOptions(kind="sbatch")
    )


def test_the_resubmit_command_comes_from_scontrol_s_batch_job():
    from isaaclab_mgpu.launcher.cluster import resubmit_command

    batch = (
        "JobId=7 JobName=two UserId=root(0) JobState=CANCELLED Restarts=0 BatchFlag=1 "
        "Command=/shared/exp/two.sbatch WorkDir=/shared/exp StdOut=/shared/exp/two-7.out"
    )
    assert resubmit_command(batch) == ("sbatch", "--chdir", "/shared/exp", "/shared/exp/two.sbatch")
    allocation = "JobId=8 JobName=interactive BatchFlag=0 Command=/bin/bash WorkDir=/home/u"
    assert resubmit_command(allocation) is None and resubmit_command("") is None


def test_the_continue_line_is_typed_as_this_mgpu_was_started(tmp_path):
    from isaaclab_mgpu.launcher.continuation import continue_line
    from isaaclab_mgpu.launcher.resolve import Machine, invocation

    venv = tmp_path / "venv" / "bin"
    uv = Machine(environ={"UV_RUN_RECURSION_DEPTH": "1"}, python=str(venv / "python"), parent="uv")
    assert invocation(uv) == ("uv", "run", "mgpu")
    # Under uv run, but started by something else (a test, a job): not uv's child, so not "uv run".
    inherited = Machine(environ={"UV_RUN_RECURSION_DEPTH": "1"}, python=str(venv / "python"), parent="bash")
    assert invocation(inherited) == (str(venv / "python"), "-m", "isaaclab_mgpu")
    on_path = Machine(python=str(venv / "python"), mgpu_on_path=str(venv / "mgpu"))
    assert invocation(on_path) == ("mgpu",)
    other = Machine(python=str(venv / "python"), mgpu_on_path="/usr/local/bin/mgpu")
    assert invocation(other) == (str(venv / "python"), "-m", "isaaclab_mgpu")
    line = continue_line(
        ("train", "--resume", "auto", "--max_iterations", "9"), tmp_path, ("uv", "run", "mgpu")
    )
    assert line == f"uv run mgpu train --max_iterations 9 --resume {tmp_path}"


def test_submit_writes_the_job_file_under_the_log_root_and_hands_it_to_sbatch(tmp_path):
    # A stand-in sbatch records its arguments and answers as sbatch --parsable does (id;cluster).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "sbatch.args"}\necho "77;c"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    argv = [sys.executable, "-m", "isaaclab_mgpu", "submit", "--device", "cpu", "--nnodes", "2"]
    argv += ["--num_gpus", "2", "--max_iterations", "5", "--job_name", "cart"]
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "77\n"), done.stderr
    job_file = work / "logs" / "mgpu" / "jobs" / "cart.sbatch"
    assert (tmp_path / "sbatch.args").read_text().split() == ["--parsable", "logs/mgpu/jobs/cart.sbatch"]
    emitted = subprocess.run(
        [*argv[:3], "dry-run", *argv[4:], "--emit", "sbatch"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert job_file.read_text() == emitted.stdout  # exactly what dry-run --emit sbatch prints
    assert "the run will live under logs/rsl_rl/cartpole/" in done.stderr
    # The one command that follows it, typed as this mgpu is started (not on PATH here: by its
    # interpreter), and the submission recorded beside the job file for runs, logs and cancel.
    assert f"follow it: {sys.executable} -m isaaclab_mgpu logs -f cart" in done.stderr, done.stderr
    record = json.loads((work / "logs" / "mgpu" / "jobs" / "cart-77.json").read_text())
    assert (record["job_id"], record["name"], record["job_file"]) == ("77", "cart", str(job_file))
    assert (record["cwd"], record["run_under"]) == (str(work), "logs/rsl_rl/cartpole")
    assert record["command"] == [sys.executable, "-m", "isaaclab_mgpu", *argv[3:]]
    # No sbatch here: one line, exit 2, nothing written.
    (bin_dir / "sbatch").unlink()
    job_file.unlink()
    refused = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "needs SLURM's sbatch" in refused.stderr and not job_file.exists()
