"""``dry-run --emit pytorchjob|trainjob``: manifests the API server accepts, pods that dry-run into the
right command, and a pod rerun after the kubelet's SIGTERM that continues the run to its total.

There is no API server here. What it would accept is checked against the CRD schemas of the
Kubeflow training operator and Trainer (``../shared/k8s/`` beside the repository, see its
README), made strict: a field the schema does not name is an error here, where the API server
would drop it without a word. What the operator does is played: each pod's environment is the
one the operator sets, and "the operator reruns the pod" is the same command started again in
the same working directory, whose ``logs/`` stands for the PersistentVolumeClaim.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from cli_helpers import run, torchrun_line
from restart_helpers import Run, run_folders, summary_of
from training_helpers import child_env

SCHEMAS = Path(__file__).resolve().parent.parent.parent / "shared" / "k8s"
CRDS = {
    "PyTorchJob": "kubeflow.org_pytorchjobs.yaml",
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
    "TrainingRuntime": "trainer.kubeflow.org_trainingruntimes.yaml",
}
#: The port Kubeflow Trainer v2.3.0's torch plugin gives PET_MASTER_PORT.
TRAINER_PORT = "29500"
#: The pod-template label by which Trainer v2.3.0 finds the replicated Job it runs as the trainer.
ANCESTOR_STEP = ("trainer.kubeflow.org/trainjob-ancestor-step", "trainer")
GPU_ARGS = ["--num_gpus", "4", "--max_iterations", "50", "--seed", "3", "agent.learning_rate=0.0003"]


@pytest.fixture(autouse=True)
def four_gpus(monkeypatch):
    """Four visible GPUs; no scheduler variables; no preflight verdicts about this box."""
    import isaaclab_mgpu.launcher.diagnostics as diagnostics

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(diagnostics, "refusals", lambda spec, resolved: ())
    monkeypatch.setattr("isaaclab_mgpu.launch.check_isaac_task", lambda spec: None)
    for name in [n for n in os.environ if n.startswith(("PET_", "SLURM_", "KUBERNETES_"))] + ["MGPU_DEBUG"]:
        monkeypatch.delenv(name, raising=False)


def _strict(schema):
    """The schema with unnamed fields refused, as ``kubectl apply --validate=strict`` refuses them
    (the API server otherwise prunes them: a misspelt field would vanish, not fail)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    named = "properties" in out and "additionalProperties" not in out
    if named and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def validators():
    """One strict validator per kind, from the CRDs in ../shared/k8s/."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev group: uv sync")
    if not SCHEMAS.is_dir():
        pytest.skip(f"no CRD schemas at {SCHEMAS} (shared/k8s/ beside the repository)")
    out = {}
    for kind, name in CRDS.items():
        crd = yaml.safe_load((SCHEMAS / name).read_text())
        version = crd["spec"]["versions"][0]
        assert crd["spec"]["names"]["kind"] == kind
        api = f"{crd['spec']['group']}/{version['name']}"
        schema = _strict(version["schema"]["openAPIV3Schema"])
        out[kind] = (api, jsonschema.Draft7Validator(schema))
    return out


def emitted(capsys, *argv: str) -> list[dict]:
    """The YAML documents ``mgpu dry-run ARGV`` prints."""
    code, out, err = run(capsys, "dry-run", *argv)
    assert code == 0, err
    return list(yaml.safe_load_all(out))


def trainer_pods(runtime: dict, job: dict) -> list[tuple[str, int, dict, dict, dict[str, str]]]:
    """Every pod Kubeflow Trainer v2.3.0 makes of ``runtime`` and ``job``, by its operator's rules.

    (replicated job, index, pod spec, container, the ``PET_*`` it injects). The rules, as
    ``../shared/k8s/README.md`` reads them from v2.3.0's ``pkg/runtime/core/trainingruntime.go``
    (which replicated Job is the trainer: the one whose pod template carries the ancestor-step label;
    it alone gets ``numNodes`` pods, any other Job its own ``parallelism``, 1 by default) and
    ``pkg/runtime/framework/plugins/torch/torch.go`` ``EnforceMLPolicy`` (the ``PET_*`` variables
    and the TrainJob's ``spec.trainer`` go only into the trainer Job's container named ``node``;
    ``numProcPerNode`` from the TrainJob, else the GPU limit, else the CPU count; the master is
    ``<trainjob>-node-0-0.<trainjob>`` on 29500; the node rank is the Job completion index).
    """
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer", {})
    nodes = trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1))
    found = []
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        labels = rjob["template"].get("metadata", {}).get("labels", {})
        is_trainer = labels.get(ANCESTOR_STEP[0]) == ANCESTOR_STEP[1]
        jobspec = rjob["template"]["spec"]
        count = nodes if is_trainer else jobspec.get("parallelism", 1)
        pod = jobspec["template"]["spec"]
        for index in range(rjob.get("replicas", 1) * count):
            for container in pod["containers"]:
                env: dict[str, str] = {}
                if is_trainer and container["name"] == "node":
                    limits = container.get("resources", {}).get("limits", {})
                    nproc = trainer.get("numProcPerNode", limits.get("nvidia.com/gpu", "auto"))
                    env = {
                        "PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc),
                        "PET_NODE_RANK": str(index), "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
                        "PET_MASTER_PORT": TRAINER_PORT,
                    }  # fmt: skip
                found.append((rjob["name"], index, pod, container, env))
    return found


def pods(docs: list[dict]) -> list[tuple[int, dict, dict]]:
    """(node rank, pod spec, container) of every pod the manifest makes, node 0 first."""
    found = []
    for doc in docs:
        if doc["kind"] == "PyTorchJob":
            for kind, replica in doc["spec"]["pytorchReplicaSpecs"].items():
                spec = replica["template"]["spec"]
                for i in range(replica["replicas"]):
                    found.append((i + (kind == "Worker"), spec, spec["containers"][0]))
    if [d["kind"] for d in docs] == ["TrainingRuntime", "TrainJob"]:
        found += [(i, pod, c) for _, i, pod, c, env in trainer_pods(*docs) if env]
    return sorted(found, key=lambda p: p[0])


@pytest.mark.parametrize("kind", ["pytorchjob", "trainjob"])
@pytest.mark.parametrize("nodes", [1, 2, 4])
@pytest.mark.parametrize("pvc", [None, "runs"])
def test_every_manifest_validates_against_its_crd(capsys, validators, kind, nodes, pvc):
    extra = ["--pvc", pvc] if pvc else []
    docs = emitted(capsys, *GPU_ARGS, "--nnodes", str(nodes), "--emit", kind, "--job_name", "cart", *extra)
    assert [d["kind"] for d in docs] == (
        ["PyTorchJob"] if kind == "pytorchjob" else ["TrainingRuntime", "TrainJob"]
    )
    for doc in docs:
        api, validator = validators[doc["kind"]]
        assert doc["apiVersion"] == api
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, errors
    found = pods(docs)
    assert [rank for rank, _, _ in found] == list(range(nodes))
    for _, spec, container in found:
        assert spec["terminationGracePeriodSeconds"] == 60
        assert container["command"][-2:] == ["--resume", "auto"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        if pvc:
            assert mounts["logs"] == "/workspace/logs" and container["workingDir"] == "/workspace"
            assert volumes["logs"]["persistentVolumeClaim"] == {"claimName": "runs"}
        else:
            assert set(mounts) == set(volumes) == {"dshm"}
    if kind == "trainjob":
        runtime, job = docs
        assert job["spec"]["runtimeRef"] == {
            "name": runtime["metadata"]["name"], "apiGroup": "trainer.kubeflow.org",
            "kind": "TrainingRuntime",
        }  # fmt: skip
        assert runtime["spec"]["template"]["spec"]["failurePolicy"] == {"maxRestarts": 3}
        assert job["spec"]["trainer"]["numNodes"] == runtime["spec"]["mlPolicy"]["numNodes"] == nodes
    else:
        assert docs[0]["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "Running"}


def test_the_comment_says_checkpoints_die_with_the_pod_without_a_volume(capsys):
    for kind in ("pytorchjob", "trainjob"):
        code, out, _ = run(capsys, "dry-run", *GPU_ARGS, "--emit", kind)
        assert code == 0
        head = " ".join(line.lstrip("# ") for line in out.splitlines() if line.startswith("#"))
        assert "its checkpoints die with the pod and a restarted pod cannot continue the run" in head
        code, out, _ = run(capsys, "dry-run", *GPU_ARGS, "--emit", kind, "--pvc", "runs")
        assert "PersistentVolumeClaim runs at /workspace/logs" in out and "die with the pod" not in out


def test_the_volume_follows_the_log_root_and_the_options_reach_the_pod(capsys, validators):
    (doc,) = emitted(
        capsys, "--device", "cpu", "--num_gpus", "2", "--log_root", "runs/cart", "--emit", "pytorchjob",
        "--pvc", "claim", "--workdir", "/app", "--cpus_per_rank", "3", "--memory", "6Gi", "--shm_size", "1Gi",
        "--image", "reg/img:2", "--backoff_limit", "7", "--termination_grace", "300", "--rdzv_port", "31000",
    )  # fmt: skip
    assert not list(validators["PyTorchJob"][1].iter_errors(doc))
    ((_, spec, container),) = pods([doc])
    assert container["volumeMounts"][1] == {"name": "logs", "mountPath": "/app/runs/cart"}
    assert (container["workingDir"], container["image"]) == ("/app", "reg/img:2")
    assert container["resources"] == {"requests": {"cpu": 6, "memory": "6Gi"}}  # CPU ranks: no GPUs
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 31000}]
    assert (
        spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi" and spec["terminationGracePeriodSeconds"] == 300
    )
    # mgpu's own grace takes the pod's all but the reserve for --kill_after and mgpu's exit.
    assert container["command"][2:4] == ["--grace_period", "280"]
    assert doc["spec"]["runPolicy"]["backoffLimit"] == 7
    # A program of your own gets no --resume: it continues from its own checkpoints.
    (doc,) = emitted(capsys, "--num_gpus", "2", "--script", "train.py", "--emit", "pytorchjob")
    assert pods([doc])[0][2]["command"] == [
        "mgpu", "train", "--grace_period", "40", "--num_gpus", "2", "--script", "train.py"
    ]  # fmt: skip
    # A --resume given is kept as given.
    (doc,) = emitted(capsys, "--num_gpus", "2", "--resume", "logs/rsl_rl/cartpole/x", "--emit", "pytorchjob")
    assert pods([doc])[0][2]["command"][-2:] == ["--resume", "logs/rsl_rl/cartpole/x"]


@pytest.mark.parametrize("nodes", [2, 4])
def test_each_pytorchjob_pod_dry_runs_into_its_command(capsys, monkeypatch, nodes):
    (doc,) = emitted(capsys, *GPU_ARGS, "--nnodes", str(nodes), "--emit", "pytorchjob", "--job_name", "cart")
    for rank, _, container in pods([doc]):
        port = str(container["ports"][0]["containerPort"])
        # The operator without an elastic policy (WORLD_SIZE: older operators count pods there).
        operator = {
            "MASTER_ADDR": "cart-master-0", "MASTER_PORT": port, "WORLD_SIZE": str(nodes), "RANK": str(rank),
            "PET_NNODES": str(nodes), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "4",
            "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        }  # fmt: skip
        got = torchrun_line(capsys, monkeypatch, operator, container["command"][2:])
        explicit = [
            *container["command"][2:], "--node_rank", str(rank), "--master_addr", "cart-master-0",
            "--master_port", port,
        ]  # fmt: skip
        assert got == torchrun_line(capsys, monkeypatch, {}, explicit)
        assert got[got.index("--nnodes") + 1] == str(nodes) and got[got.index("--node_rank") + 1] == str(rank)


@pytest.mark.parametrize("nodes", [1, 2, 4])
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_each_trainjob_pod_gets_the_operators_variables_and_dry_runs_into_its_command(
    capsys, monkeypatch, nodes, device
):
    args = [*GPU_ARGS, "--device", device] if device == "cpu" else GPU_ARGS
    docs = emitted(capsys, *args, "--nnodes", str(nodes), "--emit", "trainjob", "--job_name", "cart")
    made = trainer_pods(*docs)
    # One pod per node, every one the operator's trainer with its PET_* variables: a Job or a
    # container named otherwise would get one pod and none (turn 4's trainer-node/trainer).
    assert [(job, index, bool(env)) for job, index, _, _, env in made] == [
        ("node", i, True) for i in range(nodes)
    ]
    for _, rank, _, container, pet in made:
        assert pet["PET_NPROC_PER_NODE"] == "4"  # the TrainJob's numProcPerNode, not the operator's auto
        got = torchrun_line(capsys, monkeypatch, {**pet, "KUBERNETES_SERVICE_HOST": "10.96.0.1"},
                            container["command"][2:])  # fmt: skip
        assert got[got.index("--nproc_per_node") + 1] == "4"
        if nodes == 1:  # one node: a standalone launch, nothing to join
            assert "--standalone" in got and "--node_rank" not in got
            continue
        explicit = [
            *container["command"][2:], "--node_rank", str(rank),
            "--master_addr", "cart-node-0-0.cart", "--master_port", TRAINER_PORT,
        ]  # fmt: skip
        assert got == torchrun_line(capsys, monkeypatch, pet, explicit)
        assert got[got.index("--nnodes") + 1] == str(nodes) and got[got.index("--node_rank") + 1] == str(rank)
        assert got[got.index("--master_addr") + 1] == "cart-node-0-0.cart"


def test_a_trainjob_pod_takes_its_rank_count_from_the_operator(capsys, monkeypatch):
    """Without --num_gpus in the command, PET_NPROC_PER_NODE sets the ranks per node."""
    argv = ["--device", "cpu", "--max_iterations", "5"]
    pet = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": "1",
           "PET_MASTER_ADDR": "cart-node-0-0.cart", "PET_MASTER_PORT": TRAINER_PORT,
           "KUBERNETES_SERVICE_HOST": "10.96.0.1"}  # fmt: skip
    got = torchrun_line(capsys, monkeypatch, pet, argv)
    assert got[got.index("--nproc_per_node") + 1] == "3" and got[got.index("--node_rank") + 1] == "1"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--emit", "sbatch", "--image", "x:1"], "--image does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--shm_size", "1Gi"], "--shm_size does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--pvc", "runs"], "--pvc does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--memory", "8Gi"], "--memory does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--workdir", "/w"], "--workdir does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--backoff_limit", "2"], "--backoff_limit does not apply to --emit sbatch"),
        (["--emit", "sbatch", "--termination_grace", "30"], "--termination_grace does not apply"),
        (["--emit", "pytorchjob", "--job_time", "01:00:00"], "--job_time does not apply to --emit pytorch"),
        (["--emit", "trainjob", "--job_time", "04:00:00"], "--job_time does not apply to --emit trainjob"),
        (["--emit", "pytorchjob", "--partition", "gpu"], "--partition does not apply to --emit pytorchjob"),
        (["--emit", "trainjob", "--partition", "gpu"], "--partition does not apply to --emit trainjob"),
        (["--emit", "trainjob", "--rdzv_port", "31000"], "--rdzv_port does not apply to --emit trainjob"),
        (["--emit", "pytorchjob", "--requeue"], "--requeue is SLURM's"),
        (["--emit", "trainjob", "--requeue"], "--requeue is SLURM's"),
        (["--pvc", "runs"], "--pvc applies to a job file; add --emit pytorchjob or --emit trainjob"),
        (["--emit", "pytorchjob", "--pvc", "My_Claim"], "--pvc 'My_Claim' is not a claim name"),
        (["--emit", "trainjob", "--memory", "lots"], "--memory 'lots' is not a Kubernetes quantity"),
        (["--emit", "pytorchjob", "--workdir", "work"], "--workdir 'work' is not an absolute path"),
        (["--emit", "trainjob", "--backoff_limit", "-1"], "--backoff_limit -1: give a whole number"),
        (["--emit", "sbatch", "--cpus_per_rank", "0"], "--cpus_per_rank 0: give a whole"),
        (["--emit", "trainjob", "--job_name", "Cart"], "--job_name 'Cart' is not a Kubernetes name"),
        (["--emit", "trainjob", "--nnodes", "1:4"], "is elastic"),
        (["--emit", "pytorchjob", "--device", "cpu", "--num_gpus", "auto"], "needs --num_gpus N: the CPU"),
    ],
)  # fmt: skip
def test_an_option_of_another_kind_is_refused_in_one_line(capsys, no_spawn, argv, fragment):
    num = [] if "--num_gpus" in argv else ["--num_gpus", "2"]
    code, out, err = run(capsys, "dry-run", *num, *argv)
    assert (code, out) == (2, ""), err
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def _pod_env(kind: str, cwd: Path) -> dict[str, str]:
    """A one-node pod's environment as the operator sets it, on this machine's CPU ranks."""
    env = child_env(cwd)
    if kind == "pytorchjob":
        env.update(
            MASTER_ADDR="cart-master-0", MASTER_PORT="23456", WORLD_SIZE="1", RANK="0", PET_NNODES="1",
            PET_NODE_RANK="0", PET_NPROC_PER_NODE="2", KUBERNETES_SERVICE_HOST="10.96.0.1",
        )  # fmt: skip
    else:
        env.update(
            PET_NNODES="1", PET_NPROC_PER_NODE="2", PET_NODE_RANK="0",
            PET_MASTER_ADDR="cart-node-0-0.cart", PET_MASTER_PORT=TRAINER_PORT,
            KUBERNETES_SERVICE_HOST="10.96.0.1",
        )  # fmt: skip
    return env


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pytorchjob", "trainjob"])
def test_a_pod_stopped_by_sigterm_is_rerun_and_continues_the_run_to_its_total(capsys, tmp_path, kind):
    train = ["--num_envs", "16", "--max_iterations", "40", "--save_interval", "10", "env.episode_length=16"]
    docs = emitted(capsys, "--device", "cpu", "--num_gpus", "2", *train, "--emit", kind, "--pvc", "runs")
    ((_, spec, container),) = pods(docs)
    assert spec.get("restartPolicy", "OnFailure") in ("OnFailure", "Never")  # Never: the JobSet reruns it
    # The pod: the manifest's command in its working directory, whose logs/ is the claim.
    workdir = tmp_path / container["workingDir"].lstrip("/")
    workdir.mkdir(parents=True)
    assert container["volumeMounts"][-1]["mountPath"] == f"{container['workingDir']}/logs"
    argv = [sys.executable, "-m", "isaaclab_mgpu", *container["command"][1:]]
    env = _pod_env(kind, workdir)

    first = Run(argv, workdir, env)
    first.wait_for("iteration 3/40", 180)
    first.proc.send_signal(signal.SIGTERM)  # the kubelet: SIGTERM to the container's first process
    code, out = first.finish(spec["terminationGracePeriodSeconds"])
    assert code != 0, out[-4000:]  # a failure to OnFailure and to the Job: the pod is rerun
    assert code == 130, out[-4000:]  # every process ended within the grace period
    (folder,) = run_folders(workdir, "rsl_rl")
    stopped = summary_of(folder)
    assert stopped["status"] == "interrupted", stopped
    reached = stopped["end_iteration"]
    # The ranks saved where they stopped (the periodic checkpoints are every 10): nothing is lost.
    assert 3 <= reached < 40 and (folder / f"model_{reached}.pt").is_file(), sorted(os.listdir(folder))

    code, out = Run(argv, workdir, env).finish(240)  # the rerun pod: the same command, the same claim
    assert code == 0, out[-4000:]
    assert "--resume auto: the newest unfinished run: continuing" in out and f"at iteration {reached}" in out
    assert run_folders(workdir, "rsl_rl") == [folder]
    done = summary_of(folder)
    assert (done["status"], done["end_iteration"], done["attempts"][-1]["started_at"]) == (
        "finished",
        40,
        reached,
    )
    assert done["resumed_from"].endswith(f"/model_{reached}.pt") and len(done["mean_rewards"]) == 40, done
    code, listed, err = run(capsys, "runs", str(workdir / "logs"), "--json")
    assert code == 0, err
    assert [(r["folder"], r["status"], r["iterations"]) for r in json.loads(listed)] == [
        (str(folder), "finished", 40)
    ]
