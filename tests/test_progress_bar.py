"""Live progress: a Rich bar when mgpu's stdout is a terminal (pseudo-terminal here), plain
per-iteration lines in a pipe and in every per-rank log file."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from training_helpers import BACKENDS, child_env

pytestmark = pytest.mark.slow

#: Sequences only a live Rich display writes: hide cursor, erase line, the bar itself.
BAR_MARKS = ("\x1b[?25l", "\x1b[2K", "━")
CHEAP = ("--num_envs", "16", "--max_iterations", "3", "env.episode_length=16")


def no_bar(text: str) -> bool:
    """True when ``text`` holds none of a live display's control sequences."""
    return not any(mark in text for mark in BAR_MARKS)


def train_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            *BACKENDS["rsl_rl"], *CHEAP, *args]  # fmt: skip


def read_all(fd: int, proc: subprocess.Popen, timeout: float) -> bytes:
    """Everything written to the pty until the process exits and the pty is drained."""
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every writer of the slave side is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif proc.poll() is not None:
            break
    return b"".join(chunks)


def rank_logs(cwd) -> str:
    return "".join(p.read_text(errors="replace") for p in (cwd / "logs" / "mgpu").rglob("stdout.log"))


def test_bar_on_a_terminal_and_plain_lines_in_the_rank_logs(tmp_path):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = {**child_env(tmp_path), "TERM": "xterm-256color", "COLUMNS": "200"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):  # Rich's overrides
        env.pop(name, None)
    proc = subprocess.Popen(
        train_argv("--run_name", "pty"), cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    try:
        text = read_all(master, proc, timeout=300).decode(errors="replace")
        assert proc.wait(timeout=60) == 0, text[-3000:]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not no_bar(text), text[-3000:]  # the live bar was drawn
    assert "ETA" in text and "3/3" in text and "s/it" in text
    assert "[mgpu] iteration 1/3" not in text  # iteration lines became the bar ...
    assert "[mgpu] finished: 3 iterations" in text  # ... every other line is printed above it
    logs = rank_logs(tmp_path)
    assert "[mgpu] iteration 3/3" in logs and no_bar(logs)


def test_plain_lines_in_a_pipe(tmp_path):
    proc = subprocess.run(
        train_argv("--run_name", "pipe"), cwd=tmp_path, env=child_env(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    for i in (1, 2, 3):
        assert f"[mgpu] iteration {i}/3 | reward " in proc.stdout
    assert no_bar(proc.stdout) and no_bar(rank_logs(tmp_path))
