"""check-env for real on this machine (no GPU): the command, its JSON, its speed contract, preflight."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import psutil
import pytest

from isaaclab_mgpu.cli import main
from isaaclab_mgpu.contract.errors import EnvironmentProblem
from isaaclab_mgpu.launcher.diagnostics import check, failures, preflight_error
from isaaclab_mgpu.launcher.diagnostics.deep import collect_deep, run_probes
from isaaclab_mgpu.launcher.diagnostics.rules import AREAS, STATUSES
from isaaclab_mgpu.launcher.resolve import probe_machine, resolve
from isaaclab_mgpu.launcher.spec import LaunchSpec

HEAVY = ("torch", "jax", "warp", "rsl_rl", "skrl", "tensordict")
NO_GPU = probe_machine({}).nvml_gpu_count is None  # tests run without the caller's CUDA_VISIBLE_DEVICES


def mgpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    code = "import sys; from isaaclab_mgpu.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


@pytest.fixture
def busy_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_check_env_json_imports_no_framework():
    code = (
        "import io, contextlib, json, sys\n"
        "from isaaclab_mgpu.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['check-env', '--json'])\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "json.loads(buf.getvalue())\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert result["rc"] in (0, 1)


def test_real_run_on_cpu_passes_with_the_right_warnings():
    env = {
        "NCCL_P2P_DISABLE": "1",
        "OMP_NUM_THREADS": str(4 * (os.cpu_count() or 1)),
        "XDG_CONFIG_HOME": "/nonexistent",
    }
    proc = mgpu("check-env", "--json", "--device", "cpu", "--num_gpus", "2", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["exit_code"] == 0
    warned = {c["name"] for c in report["checks"] if c["status"] == "warn"}
    assert {"nccl_env:NCCL_P2P_DISABLE", "omp_num_threads"} <= warned
    # Nothing else is wrong on this box for CPU ranks.
    assert report["summary"]["fail"] == 0
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["driver"]["status"] == "pass"
    assert by_name["plan"]["observed"].startswith("torchrun, 2 rank(s)")
    # The same core builds the command dry-run prints.
    dry = mgpu("dry-run", "--device", "cpu", "--num_gpus", "2", env=env)
    cmd = report["would_launch"]["command"]
    stamp = lambda line: re.sub(r"/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d/", "/<stamp>/", line)  # noqa: E731
    assert dry.returncode == 0 and stamp(dry.stdout.strip()) == stamp(cmd)  # the per-rank logs: the clock's
    assert "--nproc_per_node 2" in cmd and cmd.endswith("--distributed")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_real_run_for_gpus_on_a_machine_without_one_fails():
    proc = mgpu("check-env")
    assert proc.returncode == 1
    assert "no NVIDIA driver" in proc.stdout and "--device cpu" in proc.stdout
    assert "would launch:" in proc.stdout


def test_table_groups_by_area_and_ends_with_the_command():
    proc = mgpu("check-env", "--device", "cpu", "--num-gpus", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    positions = [next(i for i, line in enumerate(lines) if f"│ {a} " in line) for a in AREAS]
    assert positions == sorted(positions)
    assert lines[-2] == "would launch:"
    assert lines[-1].split()[1:4] == ["-m", "torch.distributed.run", "--nproc_per_node"]


STABLE_CHECKS = {
    "python",
    "omp_num_threads",
    "dev_shm",
    "memlock",
    "open_files",
    "driver",
    "cuda_visible_devices",
    "cuda_device_order",
    "gpu_links",
    "nccl_env",
    "saved_workarounds",
    "nccl_version",
    "plan",
    "rendezvous",
    "hostname",
    "slurm",
    "torch",
    "rsl-rl-lib",
    "skrl",
    "jax",
    "warp-lang",
    "isaaclab",
}


def test_json_schema_is_stable():
    proc = mgpu("check-env", "--json", "--device", "cpu", env={"XDG_CONFIG_HOME": "/nonexistent"})
    report = json.loads(proc.stdout)
    assert list(report) == ["schema", "ok", "exit_code", "summary", "checks", "would_launch", "facts"]
    assert report["schema"] == "mgpu.check-env/1"
    assert list(report["summary"]) == ["pass", "warn", "fail"]
    assert sum(report["summary"].values()) == len(report["checks"])
    for c in report["checks"]:
        assert list(c) == ["area", "name", "status", "observed", "fix"]
        assert c["area"] in AREAS and c["status"] in STATUSES and isinstance(c["observed"], str)
    assert {c["name"] for c in report["checks"]} >= STABLE_CHECKS
    assert list(report["would_launch"]) == [
        "command",
        "argv",
        "error",
        "launcher",
        "device",
        "nproc_per_node",
        "nnodes",
        "world_size",
    ]
    assert report["exit_code"] == proc.returncode


#: What NVIDIA's CUDA images export to describe themselves (measured on an H200 container).
IMAGE_LABELS = {
    "NCCL_VERSION": "2.28.3-1",
    "CUDA_VERSION": "13.0.0",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    "NV_LIBNCCL_PACKAGE_VERSION": "2.28.3-1",
    "NV_CUDA_LIB_VERSION": "13.0.0-1",
}


def test_check_env_ignores_container_labels():
    env = {**IMAGE_LABELS, "XDG_CONFIG_HOME": "/nonexistent"}
    proc = mgpu("check-env", "--json", "--device", "cpu", env=env)
    report = json.loads(proc.stdout)
    nccl = [c for c in report["checks"] if c["name"].startswith("nccl_env")]
    assert [(c["name"], c["status"]) for c in nccl] == [("nccl_env", "pass")], nccl
    assert "NCCL_VERSION=2.28.3-1" in nccl[0]["observed"] and "label" in nccl[0]["observed"]
    # A real setting beside the label is still seen, and the label still is not.
    proc = mgpu("check-env", "--json", "--device", "cpu", env={**IMAGE_LABELS, "NCCL_DEBUG": "INFO"})
    names = [c["name"] for c in json.loads(proc.stdout)["checks"] if c["name"].startswith("nccl_env")]
    assert names == ["nccl_env:NCCL_DEBUG"]


def test_tests_do_not_inherit_the_callers_environment():
    from conftest import caller_variables

    assert not caller_variables(os.environ)
    assert caller_variables({**IMAGE_LABELS, "TORCH_NCCL_TRACE_BUFFER_SIZE": "1", "PATH": "/bin"}) == sorted(
        [*IMAGE_LABELS, "TORCH_NCCL_TRACE_BUFFER_SIZE"]
    )


def test_check_env_takes_launch_options_busy_port(busy_port):
    proc = mgpu("check-env", "--json", "--device", "cpu", "--master_port", str(busy_port))
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["port:master"]
    assert str(busy_port) in failed[0]["observed"]
    # dry-run tolerates it; the command is still shown.
    assert f"--master_port {busy_port}" in report["would_launch"]["command"]


def test_master_address_probe_from_node_one(busy_port):
    common = ["--device", "cpu", "--nnodes", "2", "--node_rank", "1", "--master_addr"]
    res = check(
        LaunchSpec(device="cpu", nnodes="2", node_rank=1, master_addr="127.0.0.1", master_port=busy_port)
    )
    (ep,) = res.facts.net.endpoints
    assert ep.reachable == "open" and not ep.local
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    proc = mgpu("check-env", "--json", *common, "127.0.0.1", "--master_port", str(closed))
    by_name = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert by_name["address:master"]["status"] == "pass"
    assert "nothing listens yet" in by_name["address:master"]["observed"]
    proc = mgpu("check-env", "--json", *common, "no-such-host.invalid", "--master_port", "29555")
    by_name = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert proc.returncode == 1 and by_name["address:master"]["status"] == "fail"


def test_resolve_errors_become_a_failed_check_not_exit_2():
    proc = mgpu("check-env", "--json", env={"CUDA_VISIBLE_DEVICES": "0,0"})
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["cuda_visible_devices"]["status"] == "fail"
    assert by_name["plan"]["status"] == "fail"
    assert report["would_launch"]["command"] is None and "listed twice" in report["would_launch"]["error"]


def test_bad_options_still_exit_2():
    proc = mgpu("check-env", "--rl_library", "rl_games")
    assert proc.returncode == 2 and "rl_library" in proc.stderr


# -- preflight ---------------------------------------------------------------------------------


@pytest.fixture
def spawned(monkeypatch, tmp_path):
    """Record every attempt train would supervise (and start nothing; run folders go to tmp)."""
    import isaaclab_mgpu.launcher.attempts as attempts
    import isaaclab_mgpu.launcher.supervise as supervise

    monkeypatch.chdir(tmp_path)
    calls = []
    done = supervise.RunResult(
        exit_code=0, interrupted=False, killed_after_grace=False, failure=None, log_dir=None, survivors=()
    )

    class Idle:
        """What the ledger reads of a supervisor that started nothing."""

        launcher_pid, log_dir = None, None

        def reports(self):
            return {}

        def stragglers(self):
            return ()

        def account(self):
            return None

    # attempts._one is where an attempt's process tree would start.
    monkeypatch.setattr(attempts, "_one", lambda cmd, *a, **k: calls.append(cmd) or (done, Idle()))
    return calls


def test_preflight_refuses_a_busy_port_through_the_rules(busy_port):
    spec = LaunchSpec(device="cpu", nproc_per_node="2", master_port=busy_port)
    tolerant = resolve(spec, probe_machine(), strict=False)  # what a launch would carry past resolve
    failed = failures(check(spec, resolved=tolerant).findings)
    assert [f"{f.area}/{f.name}" for f in failed] == ["launch/port:master"]
    error = preflight_error(failed)
    assert isinstance(error, EnvironmentProblem) and error.exit_code == 2
    assert "launch/port:master" in str(error) and str(busy_port) in str(error)


def test_train_with_busy_port_fails_before_spawning(busy_port, spawned, capsys):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rc = main(
        [
            "train",
            "--device",
            "cpu",
            "--num_gpus",
            "2",
            "--master_port",
            str(busy_port),
            "--max_iterations",
            "1",
        ]
    )
    assert rc == 2
    assert spawned == []
    assert "already in use" in capsys.readouterr().err
    after = psutil.Process().children(recursive=True)
    assert not [p for p in after if p.pid not in before and "torch" in " ".join(p.cmdline())]


def test_train_preflight_refuses_what_resolve_lets_through(spawned, capsys):
    args = ["--device", "cpu", "--nnodes", "2", "--node_rank", "1", "--master_addr", "no-such-host.invalid"]
    rc = main(["train", *args, "--master_port", "29555"])
    err = capsys.readouterr().err
    assert rc == 2 and spawned == []
    assert "preflight launch/address:master" in err and "does not resolve" in err and "--no_preflight" in err
    for flag in ("--no_preflight", "--no-preflight"):
        assert main(["train", flag, *args, "--master_port", "29555"]) == 0
    assert len(spawned) == 2


def test_train_preflight_passes_silently_on_a_good_machine(spawned, capsys):
    assert main(["train", "--device", "cpu", "--num_gpus", "2"]) == 0
    assert len(spawned) == 1
    assert "preflight" not in capsys.readouterr().err


# -- deep ------------------------------------------------------------------------------------------


def test_probe_that_hangs_is_killed_at_the_deadline():
    started = time.monotonic()
    results = run_probes(
        {"hang": "import os, time; print(os.getpid(), flush=True); time.sleep(60)"}, os.environ, 1.0
    )
    assert time.monotonic() - started < 30
    assert results["hang"].error == "timed out after 1 s"


def test_probe_that_crashes_reports_its_status():
    results = run_probes({"crash": "import os; os._exit(3)"}, os.environ, 30)
    assert "status 3" in results["crash"].error


def test_deep_probes_torch_and_jax_for_real():
    deep = collect_deep(dict(os.environ), timeout=120)
    assert deep.torch.ran and deep.torch.error is None, deep.torch
    assert deep.torch.values["version"].startswith("2.")
    assert deep.jax.ran and deep.jax.error is None, deep.jax
    assert deep.jax.values["devices"]
    if NO_GPU:
        assert deep.torch.values["cuda_available"] is False
        assert deep.jax.values["backend"] == "cpu"


def test_endpoints_from_rdzv_and_coordinator_options(busy_port):
    res = check(
        LaunchSpec(device="cpu", nnodes="2", rdzv_endpoint=f"127.0.0.1:{busy_port}", rdzv_backend="c10d")
    )
    (ep,) = res.facts.net.endpoints
    assert (ep.role, ep.host, ep.port, ep.local, ep.port_free) == (
        "rdzv_endpoint",
        "127.0.0.1",
        busy_port,
        True,
        False,
    )
    spec = LaunchSpec(
        device="cpu",
        rl_library="skrl",
        ml_framework="jax",
        nproc_per_node="2",
        coordinator_address=f"[::1]:{busy_port}",
    )
    (ep,) = check(spec).facts.net.endpoints
    assert (ep.role, ep.host, ep.port, ep.local) == ("coordinator", "::1", busy_port, True)
