"""``isaaclab_mgpu.train_in_process``: one rank in this process, global state restored on every path."""

from __future__ import annotations

import sys

import pytest
import torch

import isaaclab_mgpu
from isaaclab_mgpu.rank import tasks

FLAGS = (
    (torch.backends.cuda.matmul, "allow_tf32"),
    (torch.backends.cudnn, "allow_tf32"),
    (torch.backends.cudnn, "deterministic"),
    (torch.backends.cudnn, "benchmark"),
)
# The opposite of what the rsl-rl path sets (TF32 on, deterministic off, benchmark off).
BEFORE = (False, False, True, True)


def _flags() -> tuple[bool, ...]:
    return tuple(bool(getattr(obj, name)) for obj, name in FLAGS)


@pytest.fixture
def state():
    saved_flags, saved_argv = _flags(), sys.argv
    for (obj, name), value in zip(FLAGS, BEFORE, strict=True):
        setattr(obj, name, value)
    sys.argv = ["caller", "--mine"]
    yield
    for (obj, name), value in zip(FLAGS, saved_flags, strict=True):
        setattr(obj, name, value)
    sys.argv = saved_argv


def _argv(tmp_path, *extra: str) -> list[str]:
    return [
        "--device",
        "cpu",
        "--num_envs",
        "8",
        "--max_iterations",
        "1",
        "--log_root",
        str(tmp_path),
        *extra,
    ]


def _spy_make(monkeypatch, then):
    """Wrap the task factory: record the torch flags at env creation (after the run set them), then act."""
    seen = {}
    real = tasks.make

    def make(*args, **kwargs):
        seen["flags"], seen["argv"] = _flags(), list(sys.argv)
        return then(real, *args, **kwargs)

    monkeypatch.setattr(tasks, "make", make)
    return seen


def test_success_restores_argv_and_torch_flags(state, tmp_path, monkeypatch):
    seen = _spy_make(monkeypatch, lambda real, *a, **k: real(*a, **k))
    assert isaaclab_mgpu.train_in_process(_argv(tmp_path)) == 0
    assert seen["flags"] == (True, True, False, False)  # the rsl-rl path really set them
    assert seen["argv"][1:] == _argv(tmp_path)
    assert _flags() == BEFORE and sys.argv == ["caller", "--mine"]
    # Run by hand (no mgpu) the rank writes no summary.json (node 0's mgpu does); its checkpoint is there.
    assert list(tmp_path.glob("rsl_rl/cartpole/*/model_*.pt"))


def test_exception_after_flags_were_set_restores_state(state, tmp_path, monkeypatch):
    def boom(real, *a, **k):
        raise RuntimeError("environment exploded")

    seen = _spy_make(monkeypatch, boom)
    with pytest.raises(RuntimeError, match="exploded"):
        isaaclab_mgpu.train_in_process(_argv(tmp_path))
    assert seen["flags"] == (True, True, False, False)
    assert _flags() == BEFORE and sys.argv == ["caller", "--mine"]


def test_system_exit_after_flags_were_set_returns_code_and_restores_state(state, tmp_path, monkeypatch):
    def leave(real, *a, **k):
        raise SystemExit(3)

    seen = _spy_make(monkeypatch, leave)
    assert isaaclab_mgpu.train_in_process(_argv(tmp_path)) == 3
    assert seen["flags"] == (True, True, False, False)
    assert _flags() == BEFORE and sys.argv == ["caller", "--mine"]


def test_bad_arguments_return_2_and_touch_nothing(state, tmp_path, capsys):
    assert isaaclab_mgpu.train_in_process(["--bogus"]) == 2
    assert "--bogus" in capsys.readouterr().err
    assert isaaclab_mgpu.train_in_process(_argv(tmp_path, "--resume", str(tmp_path / "nope"))) == 2
    assert _flags() == BEFORE and sys.argv == ["caller", "--mine"]


@pytest.mark.slow
def test_skrl_jax_backend_is_deleted_when_absent_and_restored_when_present(state, tmp_path):
    import skrl

    if hasattr(skrl.config.jax, "backend"):
        del skrl.config.jax.backend
    fast = ("--rl_library", "skrl", "--ml_framework", "jax", "agent.rollout=4", "agent.epochs=1")
    assert isaaclab_mgpu.train_in_process(_argv(tmp_path, *fast, "agent.mini_batches=1")) == 0
    assert not hasattr(skrl.config.jax, "backend")
    skrl.config.jax.backend = "numpy"
    try:
        assert isaaclab_mgpu.train_in_process(_argv(tmp_path, *fast, "agent.mini_batches=1")) == 0
        assert skrl.config.jax.backend == "numpy"
    finally:
        del skrl.config.jax.backend
    assert _flags() == BEFORE and sys.argv == ["caller", "--mine"]
