"""The live bar of ``mgpu train`` on a real terminal (a pty) is cleared once when the run is stopped:
no copy of it is drawn again among the shutdown lines that follow Ctrl-C."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time

import pytest
from training_helpers import BACKENDS, child_env

pytestmark = pytest.mark.slow

BAR = "━"  # the bar's own glyph (Rich's progress bar); plain lines never hold it


def test_ctrl_c_clears_the_bar_once(tmp_path):
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "2",
            *BACKENDS["rsl_rl"], "--num_envs", "16", "--max_iterations", "100000"]  # fmt: skip
    env = child_env(tmp_path)
    env.update(TERM="xterm", COLUMNS="120", LINES="40")
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def pump() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + 300  # a safety net only: the bar's appearance is waited for
    while BAR not in b"".join(chunks).decode(errors="replace") and time.monotonic() < deadline:
        assert proc.poll() is None, b"".join(chunks).decode(errors="replace")[-3000:]
        time.sleep(0.05)
    time.sleep(1.0)  # a few redraws of the bar
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=240)
    reader.join(timeout=10)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    stop = text.index("SIGINT received")
    assert BAR in text[:stop]
    assert BAR not in text[stop:], text[stop:][:3000]  # cleared, never drawn again
    assert "Traceback" not in text, text[-3000:]
