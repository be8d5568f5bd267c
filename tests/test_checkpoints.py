"""Checkpoints a crash cannot break: durable writes, torn ones passed over, --keep_checkpoints N, a
full disk as one line, and the free-space warning of check-env and the preflight.

Real files, real torch and rsl-rl/skrl, real ``mgpu train`` with 2 CPU ranks (the slow ones), and
a real tmpfs for a full file system (mounted here as root; skipped where ``mount`` is refused)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from cli_helpers import run as mgpu
from restart_helpers import Run, run_folders, train_argv

from isaaclab_mgpu.contract import env, files, resume, space

CHEAP = ("--num_envs", "16", "env.episode_length=16")


def _mgpu_in(path: Path, capsys, *argv: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(path)
    try:
        return mgpu(capsys, *argv)
    finally:
        os.chdir(cwd)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str = "6m"):
    """A tmpfs of ``size`` mounted at ``path`` for the block (skip when mounting is refused)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill ``folder``'s file system until about ``leave`` bytes are free."""
    free = space.free_bytes(folder) or 0
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


# --- durable, atomic writes ---------------------------------------------------------------------


def test_a_durable_write_fsyncs_the_file_before_its_rename_and_the_folder_after(tmp_path, monkeypatch):
    seen: list[tuple[str, bool]] = []
    real = os.fsync

    def fsync(fd: int) -> None:  # the real fsync, recording what it was given and whether the name exists
        path = os.readlink(f"/proc/self/fd/{fd}")
        seen.append((path, (tmp_path / "model_1.pt").exists()))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with files.atomic_open(tmp_path / "model_1.pt", "wb", durable=True) as f:
        f.write(b"whole")
    assert (tmp_path / "model_1.pt").read_bytes() == b"whole"
    (file_path, named_yet), (folder, renamed) = seen
    assert Path(file_path).parent == tmp_path and Path(file_path).name.startswith(".model_1.pt.")
    assert not named_yet and folder == str(tmp_path) and renamed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_1.pt"]  # no temporary file left
    seen.clear()
    files.write_json(tmp_path / "summary.json", {"a": 1})  # not durable: no fsync (it is refreshed often)
    assert seen == []


def test_a_write_that_fails_names_the_file_and_leaves_the_old_one(tmp_path):
    target = tmp_path / "model_1.pt"
    target.write_bytes(b"old")
    with pytest.raises(OSError) as caught, files.atomic_open(target, "wb", durable=True):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() raises it: no name
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["model_1.pt"]


def test_library_saves_go_through_a_temporary_file_and_the_pickles_too(tmp_path):
    """:func:`durable_saves` on a module as the libraries write it: ``torch.save(obj, path)`` and
    ``with open(path, "wb")`` + ``pickle.dump`` (skrl JAX), both whole and in place afterwards."""
    import pickle
    import types

    import torch

    from isaaclab_mgpu.rank.patches.base import DurableTorch, durable_saves

    code = (
        "import pickle, torch\n"
        "def save(path, obj):\n    torch.save(obj, path)\n"
        "def dump(path, obj):\n    with open(path, 'wb') as f:\n        pickle.dump(obj, f)\n"
    )
    module = types.ModuleType("library_standin")
    exec(code, module.__dict__)
    with durable_saves(module):
        assert isinstance(module.torch, DurableTorch)
        module.save(tmp_path / "model_3.pt", {"w": torch.ones(2)})
        module.dump(tmp_path / "agent_8.pickle", {"step": 8})
    assert module.torch is torch and "open" not in vars(module)  # restored
    assert torch.load(tmp_path / "model_3.pt", weights_only=True)["w"].tolist() == [1.0, 1.0]
    assert pickle.loads((tmp_path / "agent_8.pickle").read_bytes()) == {"step": 8}
    assert resume.complete(tmp_path / "model_3.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent_8.pickle", "model_3.pt"]


# --- torn checkpoints ---------------------------------------------------------------------------


def _worker_checkpoints(folder: Path, *iterations: int) -> None:
    import torch

    from isaaclab_mgpu.rank.worker import checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    for n in iterations:
        meta = resume.CheckpointMeta(n, "rsl_rl", "torch", "cartpole", 2, 10)
        payload = {"iteration": n, "library": "rsl_rl", "framework": "torch", "task": "cartpole",
                   "world_size": 2, "state": {"w": torch.zeros(64)}}  # fmt: skip
        checkpoint.save(resume.checkpoint_path(folder, n), payload, meta)


def _cut(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def test_the_newest_whole_checkpoint_passes_over_a_cut_one_and_one_without_its_json(tmp_path):
    _worker_checkpoints(tmp_path, 2, 4, 6)
    assert resume.newest_whole(tmp_path) == resume.Pick(tmp_path, tmp_path / "model_6.pt")
    _cut(tmp_path / "model_6.pt")
    (tmp_path / "model_4.json").unlink()
    pick = resume.newest_whole(tmp_path)
    assert pick.checkpoint == tmp_path / "model_2.pt"
    assert pick.passed == (
        (tmp_path / "model_6.pt", "cut short"),
        (tmp_path / "model_4.pt", "no readable model_4.json"),
    )


def test_a_resume_of_a_folder_with_no_whole_checkpoint_is_one_line_before_anything_starts(tmp_path, capsys):
    folder = tmp_path / "logs" / "rsl_rl" / "cartpole" / "2026-01-01_00-00-00"
    _worker_checkpoints(folder, 2, 4)
    for n in (2, 4):
        _cut(folder / f"model_{n}.pt")
    code, _, err = _mgpu_in(tmp_path, capsys, "train", "--device", "cpu", "--nproc_per_node", "2",
                            "--resume", str(folder))  # fmt: skip
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "no whole checkpoint" in err, err
    assert "model_4.pt, model_2.pt" in err, err


def test_rank_0_passes_over_a_torn_file_but_never_over_a_refused_one(tmp_path):
    """The rank's own choice (by hand or on a restart, from the run folder): a torn newest file is
    passed over with one warning line; one that only arbitrary unpickling could load stays an error."""
    import torch

    from isaaclab_mgpu.contract.env import RESUME
    from isaaclab_mgpu.contract.errors import UsageError
    from isaaclab_mgpu.contract.worker_args import parse
    from isaaclab_mgpu.rank.worker.train import _rank0_checkpoint

    class Console:
        def __init__(self) -> None:
            self.notes: list[str] = []

        def note(self, message: str) -> None:
            self.notes.append(message)

    def rank0(source: Path, console: Console) -> tuple:
        return _rank0_checkpoint(parse([]), tmp_path, {RESUME: str(source)}, console)

    _worker_checkpoints(tmp_path, 2, 4)
    torn = bytearray((tmp_path / "model_4.pt").read_bytes())  # a whole zip whose members are garbled
    torn[len(torn) // 4 : len(torn) // 2] = bytes(len(torn) // 2 - len(torn) // 4)
    (tmp_path / "model_4.pt").write_bytes(torn)
    console = Console()
    path, data, loaded = rank0(tmp_path, console)
    assert path == tmp_path / "model_2.pt" and loaded["iteration"] == 2 and data
    (line,) = console.notes
    assert line.startswith("warning: ") and "model_4.pt (not a readable torch file" in line, line
    assert line.endswith(str(tmp_path / "model_2.pt")), line
    with pytest.raises(UsageError, match="not a readable torch file"):  # a named file is taken as it is
        rank0(tmp_path / "model_4.pt", Console())

    class Plant:
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"format": resume.FORMAT, "iteration": 6, "state": Plant()}, tmp_path / "model_6.pt")
    (tmp_path / "model_6.json").write_text((tmp_path / "model_2.json").read_text())
    with pytest.raises(UsageError, match="refused"):
        rank0(tmp_path, Console())


# --- --keep_checkpoints -------------------------------------------------------------------------


def test_prune_keeps_the_newest_n_up_to_the_one_just_saved(tmp_path):
    _worker_checkpoints(tmp_path, 1, 2, 3, 4, 8)
    deleted = resume.prune(resume.checkpoints(tmp_path), tmp_path / "model_4.pt", 2)
    assert deleted == [tmp_path / "model_1.pt", tmp_path / "model_2.pt"]
    # model_8 is a point an earlier attempt reached (the run passes it again): kept
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["model_3.json", "model_3.pt", "model_4.json", "model_4.pt", "model_8.json", "model_8.pt"]
    assert resume.prune(resume.checkpoints(tmp_path), tmp_path / "model_4.pt", None) == []


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_keep_checkpoints_below_one_is_bad_input(capsys, value):
    code, _, err = mgpu(capsys, "train", "--device", "cpu", "--keep-checkpoints", value)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--keep_checkpoints" in err, err


def test_keep_checkpoints_reaches_the_ranks_through_its_variable():
    from conftest import machine

    from isaaclab_mgpu.launcher.build import build
    from isaaclab_mgpu.launcher.resolve import resolve
    from isaaclab_mgpu.launcher.spec import LaunchSpec

    spec = LaunchSpec.from_options((), device="cpu", nproc_per_node="2", keep_checkpoints="3")
    cmd = build(resolve(spec, machine(0), strict=True, free_port=lambda: 1234))
    assert cmd.env[env.KEEP_CHECKPOINTS] == "3" and resume.keep_checkpoints(cmd.env) == 3
    spec = LaunchSpec.from_options((), device="cpu", nproc_per_node="2")
    assert env.KEEP_CHECKPOINTS not in build(resolve(spec, machine(0), strict=True, free_port=lambda: 1)).env


def test_isaac_lab_rsl_rl_files_are_kept_to_the_newest_n_as_rsl_rl_saves_them(tmp_path):
    """Real rsl-rl ``OnPolicyRunner.learn`` saving every iteration, observed as on Isaac Lab's path
    by the real Bookkeeper with ``--keep_checkpoints 2``: the newest two ``model_<N>.pt`` remain."""
    import torch

    from isaaclab_mgpu.contract.settings import PPOSettings
    from isaaclab_mgpu.rank import tasks
    from isaaclab_mgpu.rank.backends.rsl_rl import MgpuRunner, TaskVecEnv, train_cfg
    from isaaclab_mgpu.rank.isaac import Bookkeeper
    from isaaclab_mgpu.rank.patches import rsl_rl as patch
    from isaaclab_mgpu.rank.worker.rank import RankContext

    torch.manual_seed(0)
    ctx = RankContext(rank=0, local_rank=0, world_size=1, device="cpu", seed=0)
    env_ = TaskVecEnv(tasks.make("cartpole", 16, "cpu", 0, {}))
    cfg = {**train_cfg(PPOSettings(rollout=8, epochs=1, mini_batches=1)), "save_interval": 1}
    cfg["logger"] = "tensorboard"
    runner = MgpuRunner(env_, cfg, ctx, str(tmp_path))
    book = Bookkeeper(ctx, "torch", total=5, library="rsl_rl", environ={env.KEEP_CHECKPOINTS: "2"})
    book.rank_dir = str(tmp_path)
    patch.observe(runner, book)
    runner.learn(num_learning_iterations=5)
    # rsl-rl names them by the last completed iteration's index: model_0.pt ... model_4.pt
    assert sorted(p.name for p in tmp_path.glob("model_*.pt")) == ["model_3.pt", "model_4.pt"]
    assert all(resume.complete(p) for p in tmp_path.glob("model_*.pt"))
    assert not list(tmp_path.glob(".model_*"))  # written through temporary files, none left


# --- free space ---------------------------------------------------------------------------------


def test_the_disk_rule_warns_below_the_floor_and_below_three_checkpoints_of_a_resume():
    from isaaclab_mgpu.launcher.diagnostics.facts import DiskFacts
    from isaaclab_mgpu.launcher.diagnostics.rules import system

    class F:
        disk = DiskFacts("logs", "/", 50 * 2**30)

    assert [f.status for f in system.disk_rule(F)] == ["pass"]
    F.disk = DiskFacts("logs", "/mnt/x", 2**29)
    (low,) = system.disk_rule(F)
    assert low.status == "warn" and "/mnt/x" in low.observed and "below 1 GiB" in low.observed
    F.disk = DiskFacts("logs", "/", 5 * 2**30, "logs/r/model_9.pt", 2 * 2**30)
    (resumed,) = system.disk_rule(F)
    assert (
        resumed.status == "warn"
        and "less than 3 checkpoints" in resumed.observed
        and "2 GiB" in resumed.observed
    )
    F.disk = None
    assert system.disk_rule(F) == []


def test_check_env_warns_of_a_nearly_full_log_root(tmp_path, capsys):
    root = tmp_path / f"root-{uuid.uuid4().hex[:6]}"
    with _tmpfs(root, "4m"):
        code, out, _ = _mgpu_in(tmp_path, capsys, "check-env", "--json", "--device", "cpu",
                                "--log_root", root.name)  # fmt: skip
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
    disk = checks["disk_space"]
    assert disk["status"] == "warn" and str(root) in disk["observed"], disk
    assert code in (0, 1)  # a warning alone never fails check-env


def test_the_disk_full_line_names_the_file_system_its_space_the_file_and_the_checkpoint(tmp_path):
    exc = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "model_3.pt"))
    assert space.is_full(exc) and not space.is_full(OSError(errno.EACCES, "denied"))
    line = space.full_line(exc, tmp_path, tmp_path / "model_2.pt")
    assert "could not write " + str(tmp_path / "model_3.pt") in line
    assert f"mounted at {space.mount_point(tmp_path)}" in line and " free;" in line
    assert "the newest whole checkpoint is " + str(tmp_path / "model_2.pt") in line
    assert "\n" not in line


# --- real training ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_torn_newest_checkpoint_resumes_from_the_one_before_with_one_warning(tmp_path):
    code, out = Run(
        train_argv("rsl_rl", *CHEAP, "--max_iterations", "4", "--save_interval", "2"), tmp_path
    ).finish(180)
    assert code == 0, out[-3000:]
    (folder,) = run_folders(tmp_path, "rsl_rl")
    _cut(folder / "model_4.pt")  # a node that died with the file's pages unwritten
    argv = train_argv(
        "rsl_rl", *CHEAP, "--max_iterations", "6", "--save_interval", "2", "--resume", str(folder)
    )
    code, out = Run(argv, tmp_path).finish(180)
    assert code == 0, out[-3000:]
    warnings = [line for line in out.splitlines() if "warning:" in line and "model_4.pt" in line]
    assert len(warnings) == 1 and "resuming from " + str(folder / "model_2.pt") in warnings[0], out[-3000:]
    assert "resuming at iteration 2 of 6" in out
    s = json.loads((folder / "summary.json").read_text())
    assert (s["status"], s["end_iteration"], s["resumed_at"]) == ("finished", 6, 2), s


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rsl_rl", "skrl_torch"])
def test_keep_checkpoints_2_leaves_exactly_the_newest_two(backend, tmp_path):
    argv = train_argv(
        backend, *CHEAP, "--max_iterations", "5", "--save_interval", "1", "--keep_checkpoints", "2"
    )
    code, out = Run(argv, tmp_path).finish(240)
    assert code == 0, out[-3000:]
    (folder,) = run_folders(tmp_path, backend)
    assert sorted(p.name for p in folder.glob("model_*")) == [
        "model_4.json",
        "model_4.pt",
        "model_5.json",
        "model_5.pt",
    ]


@pytest.mark.slow
def test_a_full_log_root_ends_the_run_in_one_line_without_a_traceback_or_a_restart(tmp_path):
    root = tmp_path / "full"
    with _tmpfs(root, "6m"):
        _fill(root, 640 * 1024)  # room for a few checkpoints, then none
        argv = train_argv("rsl_rl", *CHEAP, "--max_iterations", "200", "--save_interval", "1",
                          "--max_restarts", "1", "--log_root", str(root))  # fmt: skip
        code, out = Run(argv, tmp_path).finish(240)
        (folder,) = [p for p in (root / "rsl_rl" / "cartpole").iterdir() if p.is_dir()]
        newest = resume.newest_whole(folder).checkpoint
        assert newest is not None
        from isaaclab_mgpu.rank.worker import checkpoint

        assert checkpoint.load(newest)["iteration"] == resume.iteration_of(newest)  # whole, and loads
    assert code == 74, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "restart 1 of 1" not in out  # a full disk is not retried
    last = out.strip().splitlines()[-1]
    assert last.startswith("mgpu: error: rank 0") and "disk full" in last, last
    assert f"mounted at {root}" in last and "could not write " + str(root) in last, last
    assert f"the newest whole checkpoint is {newest}" in last, last


def test_sizes_are_said_in_one_style_everywhere():
    sizes = (0, 1023, 1536, 10 * 1024 - 1, 64 * 2**20, 2**30, 3 * 2**39, 2**42, None)
    assert [space.size_text(n) for n in sizes] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "10 KiB",
        "64 MiB",
        "1 GiB",
        "1.5 TiB",
        "4 TiB",
        "unknown",
    ]
