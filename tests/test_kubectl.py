"""Kubernetes ``submit``, job state and ``cancel`` through ``kubectl`` (launcher/kubectl.py).

No API server can run here, so these tests stand in for ``kubectl`` alone: a small executable named
``kubectl`` first on ``PATH`` records each call's argv and stdin (one JSON line per call) and
answers canned JSON as kubectl would (the created objects for ``apply -o json``, the object for
``get -o json``, ``Error from server (NotFound)`` for a job that is not there). What is tested is
what mgpu passes to kubectl (``apply -f`` the file it wrote, ``delete`` and ``get`` by name and
namespace) and how it reads the answers: the manifest's namespace, the jobs' conditions as run
states, which ``mgpu runs`` lists, ``mgpu cancel`` deleting the job by its name and ``mgpu logs``
reading node 0's pod. What the operator then does with the manifest is tests/test_kubernetes_jobs.py's and
tests/test_kubernetes_pods.py's (the pods' SIGTERM path that a delete starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from isaaclab_mgpu.launcher import kubectl
from isaaclab_mgpu.launcher.kubectl import KubeJob, state_of

#: The stand-in: argv and stdin to calls.jsonl; the answer for the verb (argv[1]) from answers.json.
STANDIN = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": stdin}}) + "\\n")
answer = json.load(open(os.path.join(here, "answers.json"))).get(sys.argv[1], {{}})
sys.stdout.write(answer.get("stdout", ""))
sys.stderr.write(answer.get("stderr", ""))
sys.exit(answer.get("rc", 0))
"""
NOT_FOUND = 'Error from server (NotFound): trainjobs.trainer.kubeflow.org "cart" not found\n'


def standin(tmp_path: Path, **answers: dict) -> Path:
    """A ``kubectl`` stand-in in ``tmp_path/bin`` answering ``answers`` by verb; returns its folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "kubectl"
    script.write_text(STANDIN.format(python=sys.executable))
    script.chmod(0o755)
    (bin_dir / "answers.json").write_text(json.dumps(answers))
    return bin_dir


def calls(bin_dir: Path) -> list[dict]:
    path = bin_dir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def applied(*objects: dict) -> dict:
    """``kubectl apply -f FILE -o json``'s answer: one object, or a List of several."""
    return {
        "stdout": json.dumps(objects[0] if len(objects) == 1 else {"kind": "List", "items": list(objects)})
    }


def obj(kind: str, name: str, namespace: str = "team-a", **status: object) -> dict:
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace}, "status": status}


def cond(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}


@pytest.mark.parametrize("kind", ["trainjob", "pytorchjob"])
def test_submit_applies_the_written_manifest_and_records_the_job(tmp_path, kind):
    runtime = obj("TrainingRuntime", "cart-runtime")
    job = obj(kubectl.KINDS[kind], "cart")
    bin_dir = standin(tmp_path, apply=applied(runtime, job) if kind == "trainjob" else applied(job))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "isaaclab_mgpu", "submit", "--device", "cpu", "--nnodes", "2"]
    argv += ["--num_gpus", "2", "--max_iterations", "5", "--job_name", "cart", "--pvc", "runs"]
    argv += ["--emit", kind]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (0, "cart\n"), done.stderr
    manifest = work / "logs" / "mgpu" / "jobs" / "cart.yaml"
    assert calls(bin_dir) == [
        {"argv": ["apply", "-f", "logs/mgpu/jobs/cart.yaml", "-o", "json"], "stdin": ""}
    ]
    emitted = subprocess.run(
        [*argv[:3], "dry-run", *argv[4:]], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    assert manifest.read_text() == emitted.stdout  # exactly what dry-run --emit prints
    # The namespace comes from kubectl's answer (the context's): later commands name it.
    record = json.loads((work / "logs" / "mgpu" / "jobs" / "cart.kubernetes.json").read_text())
    assert record == {"kind": kubectl.KINDS[kind], "name": "cart", "namespace": "team-a",
                      "manifest": "logs/mgpu/jobs/cart.yaml",
                      "run_under": "/workspace/logs/rsl_rl/cartpole"}  # fmt: skip
    assert kubectl.submitted(work / "logs") == [KubeJob(**record)]
    assert "/workspace/logs/rsl_rl/cartpole/ in the pods, on the claim runs" in done.stderr
    assert "follow it: kubectl logs -f -n team-a" in done.stderr


def test_submitting_again_replaces_an_ended_job_and_refuses_a_live_one(tmp_path):
    work = tmp_path / "work"
    jobs = work / "logs" / "mgpu" / "jobs"
    jobs.mkdir(parents=True)
    record = {
        "kind": "TrainJob",
        "name": "cart",
        "namespace": "team-a",
        "manifest": "logs/mgpu/jobs/cart.yaml",
    }
    (jobs / "cart.kubernetes.json").write_text(json.dumps(record))
    failed = obj("TrainJob", "cart", conditions=[cond("Failed", reason="FailedJobs")])
    created = applied(obj("TrainingRuntime", "cart-runtime"), obj("TrainJob", "cart"))
    bin_dir = standin(
        tmp_path, get={"stdout": json.dumps(failed)}, delete={"stdout": "deleted\n"}, apply=created
    )
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "isaaclab_mgpu", "submit", "--device", "cpu", "--emit", "trainjob"]
    argv += ["--job_name", "cart"]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    # The ended job is deleted first: applying to it would change nothing; the new one resumes.
    assert [c["argv"][0] for c in calls(bin_dir)] == ["get", "delete", "apply"]
    (bin_dir / "calls.jsonl").unlink()
    running = obj("TrainJob", "cart", jobsStatus=[{"name": "node", "ready": 1}])
    standin(tmp_path, get={"stdout": json.dumps(running)}, apply=created)
    again = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert again.returncode == 2 and "already running" in again.stderr
    assert [c["argv"][0] for c in calls(bin_dir)] == ["get"]  # nothing applied, nothing deleted


def test_submit_without_kubectl_or_with_a_refused_manifest_says_so(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "isaaclab_mgpu", "submit", "--device", "cpu", "--emit", "trainjob"]
    empty = tmp_path / "empty"
    empty.mkdir()
    no_kubectl = subprocess.run(
        argv, cwd=work, env={**os.environ, "PATH": str(empty)}, capture_output=True, text=True
    )
    assert no_kubectl.returncode == 2 and "needs kubectl" in no_kubectl.stderr
    refusal = 'The TrainJob "mgpu-train" is invalid: spec.trainer.numNodes: Invalid value\n'
    bin_dir = standin(tmp_path, apply={"stderr": refusal, "rc": 1})
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    refused = subprocess.run(
        argv, cwd=work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert refused.returncode == 1 and "spec.trainer.numNodes: Invalid value" in refused.stderr
    assert not (work / "logs" / "mgpu" / "jobs" / "mgpu-train.kubernetes.json").exists()


def test_state_and_cancel_ask_kubectl_by_name_and_namespace(tmp_path, monkeypatch):
    running = obj("TrainJob", "cart", jobsStatus=[{"name": "node", "ready": 1, "active": 1}])
    bin_dir = standin(tmp_path, get={"stdout": json.dumps(running)}, delete={"stdout": "deleted\n"})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    job = KubeJob("TrainJob", "cart", "team-a", "logs/mgpu/jobs/cart.yaml")
    assert kubectl.job_state(job).state == "running"
    assert kubectl.cancel(job) is True
    resource = "trainjobs.trainer.kubeflow.org"
    assert [c["argv"] for c in calls(bin_dir)] == [
        ["get", resource, "cart", "-n", "team-a", "-o", "json"],
        # Foreground: kubectl returns once the pods are gone, i.e. after their SIGTERM's checkpoint.
        ["delete", resource, "cart", "-n", "team-a", "--cascade=foreground", "--wait=true"],
    ]
    assert all(c["stdin"] == "" for c in calls(bin_dir))
    # A job kubectl no longer finds: gone, and cancelling it is no error.
    standin(tmp_path, get={"stderr": NOT_FOUND, "rc": 1}, delete={"stderr": NOT_FOUND, "rc": 1})
    assert kubectl.job_state(job).state == "gone"
    assert kubectl.cancel(job) is False
    pytorch = KubeJob("PyTorchJob", "cart", "default", "x.yaml")
    assert kubectl.get_argv(pytorch)[2:4] == ["pytorchjobs.kubeflow.org", "cart"]
    # Anything else kubectl says is an error carrying its words.
    standin(tmp_path, get={"stderr": "error: You must be logged in to the server (Unauthorized)\n", "rc": 1})
    with pytest.raises(kubectl.MgpuError, match="Unauthorized"):
        kubectl.job_state(job)


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ({}, "queued"),  # just created: the operator has not looked yet
        ({"conditions": [cond("Created", reason="JobsCreationSucceeded")]}, "queued"),  # pods pending
        ({"conditions": [cond("Suspended", reason="Suspended")]}, "queued"),  # e.g. Kueue holds it
        (
            {"conditions": [cond("Created"), cond("Suspended", "False")], "jobsStatus": [{"ready": 0}]},
            "queued",
        ),
        ({"conditions": [cond("Created")], "jobsStatus": [{"name": "node", "ready": 1}]}, "running"),
        ({"conditions": [cond("Created"), cond("Complete", reason="JobsCompleted")]}, "finished"),
        ({"conditions": [cond("Complete", "False"), cond("Failed", reason="FailedJobs")]}, "failed"),
    ],
)
def test_trainjob_conditions_map_to_run_states(status, state):
    assert state_of(obj("TrainJob", "cart", **status)).state == state


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        ([], "queued"),
        ([cond("Created")], "queued"),
        ([cond("Created"), cond("Suspended")], "queued"),
        ([cond("Created"), cond("Running")], "running"),
        ([cond("Created"), cond("Running", "False"), cond("Restarting")], "running"),
        (
            [cond("Created"), cond("Running", "False"), cond("Succeeded", reason="PyTorchJobSucceeded")],
            "finished",
        ),
        (
            [cond("Running", "False"), cond("Failed", reason="PyTorchJobFailed", message="pod OOMKilled")],
            "failed",
        ),
    ],
)
def test_pytorchjob_conditions_map_to_run_states(conditions, state):
    said = state_of(obj("PyTorchJob", "cart", conditions=conditions))
    assert said.state == state
    if state == "failed":
        assert said.reason == "PyTorchJobFailed: pod OOMKilled"


# -- mgpu runs, cancel and logs of a Kubernetes job by its name ------------------------------------

RECORD = {
    "kind": "TrainJob",
    "name": "cart",
    "namespace": "team-a",
    "manifest": "logs/mgpu/jobs/cart.yaml",
    "run_under": "/workspace/logs/rsl_rl/cartpole",
}


def submitted_job(tmp_path: Path, record: dict = RECORD) -> Path:
    """A working folder whose log root holds ``record`` as ``mgpu submit`` wrote it; returns it."""
    work = tmp_path / "work"
    jobs = work / "logs" / "mgpu" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{record['name']}.kubernetes.json").write_text(json.dumps(record))
    return work


def mgpu(work: Path, bin_dir: Path | None, *args: str) -> subprocess.CompletedProcess:
    path = os.environ["PATH"] if bin_dir is None else f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", *args], cwd=work, env={**os.environ, "PATH": path},
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "answer", "state"),
    [
        ("TrainJob", {"conditions": [cond("Suspended", reason="Suspended")]}, "queued"),
        (
            "TrainJob",
            {"conditions": [cond("Created")], "jobsStatus": [{"name": "node", "ready": 2}]},
            "running",
        ),
        ("TrainJob", {"conditions": [cond("Complete", reason="JobsCompleted")]}, "finished"),
        ("PyTorchJob", {"conditions": [cond("Failed", reason="PyTorchJobFailed")]}, "failed"),
        ("PyTorchJob", {"conditions": [cond("Created"), cond("Running")]}, "running"),
        ("TrainJob", None, "gone"),
    ],
)
def test_runs_lists_each_kubernetes_job_with_its_state(tmp_path, kind, answer, state):
    work = submitted_job(tmp_path, {**RECORD, "kind": kind})
    get = (
        {"stderr": NOT_FOUND, "rc": 1}
        if answer is None
        else {"stdout": json.dumps(obj(kind, "cart", **answer))}
    )
    bin_dir = standin(tmp_path, get=get)
    done = mgpu(work, bin_dir, "runs", "logs", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["status"], r["job_kind"], r["job_name"], r["job_namespace"]) for r in rows] == [
        (state, kind, "cart", "team-a")
    ]
    # The run lives in the pods' storage, which this machine does not see: the row says so.
    assert rows[0]["folder"] == "/workspace/logs/rsl_rl/cartpole" and rows[0]["in_pods"] is True
    resource = kubectl.RESOURCES[kind]
    assert [c["argv"] for c in calls(bin_dir)] == [["get", resource, "cart", "-n", "team-a", "-o", "json"]]
    table = mgpu(work, bin_dir, "runs", "logs")
    assert table.returncode == 0 and f"{kind} cart in team-a" in table.stdout
    assert "not here" in table.stdout


def test_runs_without_kubectl_lists_as_before(tmp_path):
    work = submitted_job(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "runs", "logs", "--json"], cwd=work,
        env={**os.environ, "PATH": str(empty)}, capture_output=True, text=True,
    )  # fmt: skip
    assert (done.returncode, json.loads(done.stdout)) == (0, []), done.stderr


def test_cancel_deletes_the_job_by_its_name(tmp_path):
    work = submitted_job(tmp_path)
    running = obj("TrainJob", "cart", jobsStatus=[{"name": "node", "ready": 2}])
    bin_dir = standin(tmp_path, get={"stdout": json.dumps(running)}, delete={"stdout": "deleted\n"})
    done = mgpu(work, bin_dir, "cancel", "cart")
    assert done.returncode == 0, done.stderr
    resource = "trainjobs.trainer.kubeflow.org"
    # The delete waits for the pods: each one's mgpu got SIGTERM and saved (test_kubernetes_pods.py).
    assert [c["argv"] for c in calls(bin_dir)] == [
        ["get", resource, "cart", "-n", "team-a", "-o", "json"],
        ["delete", resource, "cart", "-n", "team-a", "--cascade=foreground", "--wait=true"],
    ]
    assert "kubectl apply -f logs/mgpu/jobs/cart.yaml" in done.stderr  # how it goes on
    (bin_dir / "calls.jsonl").unlink()
    hard = mgpu(work, bin_dir, "cancel", "cart", "--now")
    assert hard.returncode == 0, hard.stderr
    assert [c["argv"] for c in calls(bin_dir)] == [
        ["get", resource, "cart", "-n", "team-a", "-o", "json"],
        ["delete", resource, "cart", "-n", "team-a", "--cascade=foreground", "--wait=false"],
        ["delete", "pods", "-n", "team-a", "-l", "jobset.sigs.k8s.io/jobset-name=cart",
         "--grace-period=0", "--force"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("get", "said"),
    [
        ({"stderr": NOT_FOUND, "rc": 1}, "kubectl finds no TrainJob cart in team-a"),
        ({"stdout": json.dumps(obj("TrainJob", "cart", conditions=[cond("Complete")]))}, "already ended"),
    ],
)
def test_cancel_of_a_job_that_is_gone_or_ended_deletes_nothing(tmp_path, get, said):
    work = submitted_job(tmp_path)
    bin_dir = standin(tmp_path, get=get, delete={"stdout": "deleted\n"})
    done = mgpu(work, bin_dir, "cancel", "cart")
    assert done.returncode == 1 and said in done.stderr
    assert [c["argv"][0] for c in calls(bin_dir)] == ["get"]
    unknown = mgpu(work, bin_dir, "cancel", "nosuchjob")
    assert unknown.returncode == 2 and "nosuchjob" in unknown.stderr


@pytest.mark.parametrize(("kind", "pod"), [("TrainJob", None), ("PyTorchJob", "cart-master-0")])
def test_logs_prints_node_0_pods_console(tmp_path, kind, pod):
    work = submitted_job(tmp_path, {**RECORD, "kind": kind})
    bin_dir = standin(tmp_path, logs={"stdout": "iteration 1/5\n"})
    done = mgpu(work, bin_dir, "logs", "-f", "cart")
    assert (done.returncode, done.stdout) == (0, "iteration 1/5\n"), done.stderr
    selector = "jobset.sigs.k8s.io/jobset-name=cart,batch.kubernetes.io/job-completion-index=0"
    target = [pod] if pod else ["-l", selector, "--tail=-1"]
    assert [c["argv"] for c in calls(bin_dir)] == [["logs", "-f", "-n", "team-a", *target]]


def test_runs_with_an_unreachable_cluster_says_kubectls_own_sentence(tmp_path):
    work = submitted_job(tmp_path)
    klog = 'E1203 14:02:11.687867   12622 memcache.go:265] "Unhandled Error" err="couldn\'t get …"\n'
    refused = (
        "The connection to the server localhost:8080 was refused - did you specify the right host or port?\n"
    )
    bin_dir = standin(tmp_path, get={"stderr": klog * 3 + refused, "rc": 1})
    done = mgpu(work, bin_dir, "runs", "logs", "--json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["status"] == "unknown" and row["job_reason"].endswith(refused.strip())
    assert "memcache" not in row["job_reason"]  # client-go's log lines left out
