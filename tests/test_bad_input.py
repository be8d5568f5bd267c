"""Bad input, as a careless user or an attacker types it: one line and exit 2, or the right result.

Every case runs the real command line in this process (``cli_helpers.run``) with nothing allowed
to spawn, under a SIGALRM bound of its own, so a case that would hang (``--num_gpus
99999999999999999999`` once built a dict of that many ranks) fails instead of stalling the suite.
Whatever a case prints, no traceback and no raw ESC reaches stdout or stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run

from isaaclab_mgpu.contract.errors import EnvironmentProblem
from isaaclab_mgpu.launcher import workarounds
from isaaclab_mgpu.launcher.resolve import CPU_RANKS_PER_CORE

#: Seconds a case may take (they take well under one; the box is shared and slow).
BOUND_S = 30
CPUS = os.cpu_count() or 1
#: More CPU ranks than train accepts on this box without --oversubscribe_cpu.
TOO_MANY_CPU_RANKS = str(CPU_RANKS_PER_CORE * CPUS + 1)


@pytest.fixture(autouse=True)
def bounded():
    """Fail a case that runs past BOUND_S instead of hanging the suite."""

    def expire(signum, frame):
        raise TimeoutError(f"the case ran past {BOUND_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(BOUND_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def own_config(tmp_path, monkeypatch):
    """No case reads the caller's saved workarounds."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def clean(out: str, err: str) -> None:
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err


def refused(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    clean(out, err)
    assert code == 2, (code, out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("mgpu: error: "), err
    assert message in err, err
    return err


CPU = ("--device", "cpu")
TWO_NODES = ("--nnodes", "2", "--master_addr", "node01")

#: (command line, part of the one error line). Each ends with exit 2 and nothing started.
REFUSED = [
    # rank counts no machine has, and counts in other digits
    (["dry-run", *CPU, "--num_gpus", "99999999999999999999"], "give at most 1024"),
    (["dry-run", *CPU, "--num_gpus", "100000"], "give at most 1024"),
    (["check-env", *CPU, "--num_gpus", "1025"], "give at most 1024"),
    (["probe-nccl", *CPU, "--num_gpus", "99999999999999999999"], "give at most 1024"),
    (["train", "--num_gpus", "2000", "--gpu_ids", "0"], "give at most 1024"),
    (["dry-run", *CPU, "--nnodes", "99999999999999999999", "--master_addr", "node01"], "at most 65536"),
    (["dry-run", *CPU, "--nnodes", "\uff12", "--master_addr", "node01"], "must be a positive integer"),
    (["dry-run", *CPU, "--nnodes", "1:\uff12", "--master_addr", "node01"], "must be a positive integer"),
    (["dry-run", *CPU, "--num_gpus", "\uff12"], "is not a rank count"),  # full-width 2
    (["dry-run", *CPU, "--num_gpus", "1_0"], "is not a rank count"),
    (["dry-run", *CPU, "--num_gpus", "-3"], "must be at least 1"),
    (["train", *CPU, "--num_gpus", TOO_MANY_CPU_RANKS], "--oversubscribe_cpu"),
    (["train", "--num_gpus", "2"], "more than the 1 GPU(s) visible"),  # CUDA_VISIBLE_DEVICES=0 below
    (["train", "--num_gpus", "2", "--oversubscribe_cpu"], "--oversubscribe_cpu applies to CPU ranks"),
    # host names
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", ""], "--master_addr is empty"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "   "], "--master_addr is empty"),
    (["check-env", *CPU, "--nnodes", "2", "--master_addr", "[/oops]"], "is not a host name or address"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "node 01"], "is not a host name or address"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "n\u00f6de"], "is not a host name or address"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "node01\n"], "holds a control character"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "a\x1b[2Jb"], "holds a control character"),
    (["dry-run", *CPU, "--nnodes", "2", "--rdzv_endpoint", ""], "is malformed"),
    (["dry-run", *CPU, "--nnodes", "2", "--rdzv_endpoint", " node01:29400"], "is malformed"),
    (["dry-run", *CPU, "--nnodes", "2", "--rdzv_endpoint", "[/x]:29400"], "is malformed"),
    (["dry-run", *CPU, "--nnodes", "2", "--rdzv_endpoint", "node01:\uff12\uff19\uff14"], "is not a port"),
    (["dry-run", *CPU, "--rl_library", "skrl", "--ml_framework", "jax", "--num_gpus", "2",
      "--coordinator_address", "node01:\u0665\u0660\u0660\u0660"], "is not a port"),  # Arabic-Indic 5000
    # ports and integers in other digits
    (["dry-run", *CPU, *TWO_NODES, "--master_port", "\uff12\uff19\uff15\uff10\uff10"], "is not a port"),
    (["dry-run", *CPU, *TWO_NODES, "--node_rank", "\uff11"], "is not an integer"),
    (["dry-run", *CPU, "--max_restarts", "\u0663"], "is not an integer count"),
    (["dry-run", *CPU, "--monitor_interval", "\uff15"], "is not a number of seconds"),
    (["dry-run", "--gpu_ids", "\uff10"], "is neither a GPU index"),
    (["dry-run", *CPU, "--tee", "\uff13"], "is not a stream spec"),
    (["dry-run", *CPU, "--redirects", "0:\u0663"], "is not a stream spec"),
    (["dry-run", *CPU, "--num_gpus", "2", "--local_ranks_filter", "\uff10"], "is not a list of local ranks"),
    # paths and names
    (["dry-run", *CPU, "--log_dir", "logs\nmgpu"], "--log_dir 'logs\\nmgpu' holds a control character"),
    (["train", *CPU, "--log_dir", "logs\x1b]0;pwned\x07"], "holds a control character"),
    (["dry-run", *CPU, "--rdzv_id", "a\nb"], "holds a control character"),
    (["dry-run", *CPU, "--role", "w\r"], "holds a control character"),
    (["dry-run", *CPU, "--run_name", "../.."], "must name one folder inside the log root"),
    (["dry-run", *CPU, "--run_name", "a/b"], "must name one folder inside the log root"),
    (["dry-run", *CPU, "--run_name=.."], "must name one folder inside the log root"),
    (["train", *CPU, "--experiment_name", ".."], "must name one folder inside the log root"),
    (["check-env", *CPU, "--experiment_name", "/etc"], "must name one folder inside the log root"),
    (["dry-run", *CPU, "--run_name", "a\nb"], "holds a control character"),
    (["dry-run", *CPU, "--log_root", "logs\n"], "holds a control character"),
    # the worker's own parser names the bad value; its line is escaped too
    (["dry-run", *CPU, "--task", "\x1b[31mcartpole"], "\\x1b[31mcartpole"),
    (["dry-run", *CPU, "--max_iterations", "[/oops]"], "[/oops]"),
    (["dry-run", "--gpu_ids", ",".join(map(str, range(1025)))], "list at most 1024"),
    # Click's own refusals quote the value; their line is escaped too
    (["[/oops]\x1b[2J"], "No such command '[/oops]\\x1b[2J'"),
    (["train", "--stall_timeout", "[bold]x"], "'[bold]x' is not a valid number of seconds or auto"),
    (["dry-run", "--num_gpus"], "requires an argument"),
    # numbers mgpu's own options read: ASCII digits, finite
    (["train", *CPU, "--stall_timeout", "nan"], "'nan' is not a valid number of seconds or auto"),
    (["train", *CPU, "--grace_period", "inf"], "'inf' is not a valid float"),
    (["train", *CPU, "--kill_after", "\uff15"], "is not a valid float"),
    (["probe-nccl", *CPU, "--timeout", "\uff16\uff10"], "is not a valid float"),
    (["probe-nccl", *CPU, "--world-size", "\uff12"], "is not a valid integer"),
    (["probe-nccl", *CPU, "--iters", "1_000"], "is not a valid integer"),
    # mgpu runs
    (["runs", "/nonexistent/[/oops]"], "is not a folder"),
    (["runs", ".", "--limit", "\uff15"], "is not a valid integer"),
]  # fmt: skip

#: The --script cases need a folder and a file that exist.
SCRIPT_CASES = ["folder", "missing"]


def _case_id(case):
    argv, _ = case
    return " ".join(argv)[:60].encode("unicode_escape").decode()


@pytest.mark.parametrize(("argv", "message"), REFUSED, ids=[_case_id(c) for c in REFUSED])
def test_refused_with_one_line_and_exit_2(capsys, monkeypatch, no_spawn, argv, message):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU "visible", whatever this box has
    refused(capsys, argv, message)


@pytest.mark.parametrize("kind", SCRIPT_CASES)
def test_script_must_be_a_file(capsys, no_spawn, tmp_path, kind):
    folder = tmp_path / "train_dir"
    folder.mkdir()
    path = folder if kind == "folder" else folder / "train.py"
    expected = "is a folder" if kind == "folder" else "does not exist"
    refused(capsys, ["train", *CPU, "--num_gpus", "2", "--script", str(path)], expected)


#: (command line, what stdout or stderr must hold). Each exits 0: legitimate, if unusual.
ACCEPTED = [
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "fe80::1"], "--master_addr fe80::1"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "10.0.0.1", "--master_port", "+29500"],
     "--master_port 29500"),
    (["dry-run", *CPU, "--nnodes", "2", "--rdzv_endpoint", "[fe80::1%eth0]:29400", "--rdzv_backend", "c10d"],
     "[fe80::1%eth0]:29400"),
    (["dry-run", *CPU, "--nnodes", "2", "--master_addr", "gpu-node_07.cluster.local"], "gpu-node_07"),
    (["dry-run", *CPU, "--run_name", "v1..2"], "--run_name v1..2"),
    (["dry-run", *CPU, "--run_name", "caf\u00e9"], "--run_name 'caf\u00e9'"),
    (["dry-run", *CPU, "--log_dir", "logs/[bold]x[/bold]"], "--log_dir 'logs/[bold]x[/bold]/"),
    (["dry-run", *CPU, "--num_gpus", "1024", "--oversubscribe-cpu"], "--nproc_per_node 1024"),
    (["train", *CPU, "--num_gpus", TOO_MANY_CPU_RANKS, "--oversubscribe_cpu", "--dry_run"],
     f"--nproc_per_node {TOO_MANY_CPU_RANKS}"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "expected"), ACCEPTED, ids=[_case_id(c) for c in ACCEPTED])
def test_accepted(capsys, no_spawn, argv, expected):
    code, out, err = run(capsys, *argv, "--no_preflight" if argv[0] == "train" else "--json")
    clean(out, err)
    assert code == 0, err
    shown = json.loads(out)["command"] if out.startswith("{") else out
    assert expected in shown


def test_dry_run_warns_where_train_refuses(capsys, monkeypatch, no_spawn):
    code, out, err = run(capsys, "dry-run", *CPU, "--num_gpus", TOO_MANY_CPU_RANKS)
    assert code == 0 and f"--nproc_per_node {TOO_MANY_CPU_RANKS}" in out
    assert f"mgpu: warning: --num_gpus {TOO_MANY_CPU_RANKS} with --device cpu" in err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    code, out, err = run(capsys, "dry-run", "--num_gpus", "2")
    assert code == 0 and "--nproc_per_node 2" in out
    assert "--num_gpus 2 is more than the 1 GPU(s) visible" in err


# --- data that looks like markup or holds control characters ---------------------------------


def test_check_env_shows_markup_and_escapes_from_the_environment(capsys, monkeypatch, no_spawn):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "[/x][bold]eth0\x1b[31m")
    code, out, err = run(capsys, "check-env", *CPU)
    clean(out, err)
    assert code in (0, 1)
    assert "[/x][bold]eth0\\x1b[31m" in out.replace("\n", "")


def test_dry_run_line_quotes_a_control_character_and_still_runs(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    tag = "a\x1bb\nc'd"
    code, out, err = run(capsys, "dry-run", *CPU, "--script", str(script), "--", "--tag", tag)
    clean(out, err)
    assert code == 0
    assert out.count("\n") == 1 and out.rstrip().endswith("--tag $'a\\x1bb\\nc\\'d'")
    shell = subprocess.run(
        ["bash", "-c", f"printf '%s' {out.split()[-1]}"], capture_output=True, text=True, timeout=10
    )
    assert shell.stdout == tag  # bash reads the printed word back as the argument itself


# --- saved workarounds -------------------------------------------------------------------------


def plant(tmp_path, entry) -> None:
    store = workarounds.store_path({"XDG_CONFIG_HOME": str(tmp_path / "config")})
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({workarounds.this_machine(): entry}))


def test_a_planted_ld_preload_is_not_applied(capsys, no_spawn, tmp_path):
    plant(tmp_path, {"LD_PRELOAD": "/tmp/x.so", "PYTHONPATH": "/tmp", "NCCL_P2P_DISABLE": "1"})
    code, out, err = run(capsys, "dry-run", "--json", "--num_gpus", "1", "--gpu_ids", "0")
    assert code == 0, err
    env = json.loads(out)["env"]
    assert "LD_PRELOAD" not in env and "PYTHONPATH" not in env
    assert env["NCCL_P2P_DISABLE"] == "1"  # what probe-nccl --save-workaround writes still applies
    ignored = [line for line in err.splitlines() if "ignoring" in line]
    assert len(ignored) == 1 and "LD_PRELOAD=/tmp/x.so" in ignored[0] and "PYTHONPATH=/tmp" in ignored[0]


@pytest.mark.parametrize(
    "entry",
    [
        {"NCCL_ALGO": "Tree"},  # a documented name with a value mgpu never saves
        {"NCCL_P2P_DISABLE": 1},  # not a string
        {"NCCL_P2P_DISABLE": ["1"]},  # unhashable
        {"NCCL_DEBUG_SUBSYS": "ALL"},
    ],
)
def test_only_pairs_mgpu_saves_are_applied(tmp_path, entry):
    plant(tmp_path, entry)
    saved = workarounds.for_launch({"XDG_CONFIG_HOME": str(tmp_path / "config")}, device="cuda", enabled=True)
    assert saved.variables == {}
    assert len(saved.ignored) == 1 and next(iter(entry)) in saved.ignored[0]


@pytest.mark.parametrize("kind", ["folder", "latin-1", "bad json", "a list", "machine entry a string"])
def test_an_unreadable_store_is_one_warning(capsys, no_spawn, tmp_path, kind):
    store = workarounds.store_path({"XDG_CONFIG_HOME": str(tmp_path / "config")})
    store.parent.mkdir(parents=True)
    if kind == "folder":
        store.mkdir()
    else:
        text = {
            "latin-1": '{"caf\xe9": 1}'.encode("latin-1"),
            "bad json": b'{"a": ',
            "a list": b"[1, 2]",
            "machine entry a string": json.dumps({workarounds.this_machine(): "x"}).encode(),
        }[kind]
        store.write_bytes(text)
    code, out, err = run(capsys, "dry-run", "--json", "--num_gpus", "1", "--gpu_ids", "0")
    clean(out, err)
    assert code == 0
    lines = [line for line in err.splitlines() if "saved workarounds" in line]
    assert len(lines) == 1 and str(store) in lines[0] and lines[0].startswith("mgpu: warning: ")
    assert not any(k.startswith("NCCL_") for k in json.loads(out)["env"])


def test_saving_into_an_unwritable_store_is_one_error(tmp_path):
    store = tmp_path / "config" / "isaaclab-mgpu" / "workarounds.json"
    store.mkdir(parents=True)  # a folder where the file goes
    with pytest.raises(EnvironmentProblem, match="cannot save the workaround"):
        workarounds.save(store, "k", "NCCL_P2P_DISABLE", "1")
    assert [p.name for p in store.parent.iterdir()] == ["workarounds.json"]  # no temporary file left


def test_a_relative_xdg_config_home_is_ignored():
    env = {"XDG_CONFIG_HOME": "relative/config", "HOME": "/home/u"}
    assert workarounds.store_path(env) == Path("/home/u/.config/isaaclab-mgpu/workarounds.json")
    assert workarounds.store_path({"XDG_CONFIG_HOME": "/etc/xdg"}).parts[:3] == ("/", "etc", "xdg")


def test_check_env_warns_about_ignored_entries(capsys, no_spawn, tmp_path):
    plant(tmp_path, {"LD_PRELOAD": "/tmp/x.so"})
    code, out, err = run(capsys, "check-env", "--json", *CPU)
    clean(out, err)
    assert code in (0, 1)  # a warning never fails check-env; this box may fail another check
    check = {c["name"]: c for c in json.loads(out)["checks"]}["saved_workarounds"]
    assert check["status"] == "warn" and "LD_PRELOAD=/tmp/x.so" in check["observed"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--run_name", "../.."],
        ["--run-name=a/b"],
        ["--experiment_name", ".."],
        ["--experiment_name", "x\ny"],
        ["--run_name", "\x1b[2J"],
    ],
    ids=lambda argv: " ".join(argv).encode("unicode_escape").decode(),
)
def test_the_worker_run_by_hand_refuses_a_name_leaving_the_log_root(capsys, argv):
    from isaaclab_mgpu.rank.worker.args import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "\x1b" not in err
    assert err.startswith("isaaclab_mgpu.worker: error: argument --")
    assert "must name one folder inside the log root" in err or "holds a control character" in err
