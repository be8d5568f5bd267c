"""Two localhost "nodes": a stall or a lost mgpu on node 1 is named on node 0, through the rendezvous store.

Each node's mgpu publishes its ranks' progress in the store node 0's torchrun serves
(:mod:`isaaclab_mgpu.launcher.peers`); node 0's verdict names node 1's rank, node rank, host and
iteration instead of "a peer on another node".
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
from training_helpers import child_env

from isaaclab_mgpu.launcher import peers

pytestmark = pytest.mark.slow

STALL = 10.0
JOB = "peers-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, node: int, port: int, cwd):
        argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "1"]
        argv += [
            "--nnodes",
            "2",
            "--node_rank",
            str(node),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            "--rdzv_id",
            JOB,
        ]
        argv += ["--stall_timeout", str(STALL), "--no_preflight", "--log_dir", str(cwd / f"logs{node}")]
        argv += ["--max_iterations", "400", "--num_envs", "16", "--seed", "1"]
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=child_env(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.times: list[float] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self.times.append(time.monotonic())

    def when(self, fragment: str) -> float | None:
        """When the first line holding ``fragment`` arrived."""
        return next((t for line, t in zip(self.lines, self.times, strict=False) if fragment in line), None)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def rank_pid(self) -> int:
        for p in psutil.Process(self.proc.pid).children(recursive=True):
            line = " ".join(p.cmdline())
            if "isaaclab_mgpu.worker" in line and "torch.distributed.run" not in line:
                return p.pid
        raise AssertionError("no rank process")

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        self.thread.join(timeout=5)
        return rc


def _training(nodes, timeout=180.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if re.search(r"iteration ([3-9]|\d\d+)/", nodes[0].text):  # global rank 0 prints the iterations
            return
        if any(n.proc.poll() is not None for n in nodes):
            break
        time.sleep(0.5)
    raise AssertionError("\n".join(n.text[-2000:] for n in nodes))


def _published(nodes, port: int, timeout: float = 60.0) -> None:
    """Wait until both nodes' mgpu published in the rendezvous store (what naming a peer needs)."""
    store = peers.tcp_store("127.0.0.1", port)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if store.check([peers.key(JOB, 0), peers.key(JOB, 1)]):
            return
        time.sleep(0.5)
    raise AssertionError("\n".join(n.text[-2000:] for n in nodes))


def _start(tmp_path):
    port = _free_port()
    nodes = [Node(0, port, tmp_path), Node(1, port, tmp_path)]
    _training(nodes)
    _published(nodes, port)
    return nodes


def _cleanup(nodes):
    for n in nodes:
        if n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait()


def test_a_stopped_rank_on_node_1_is_named_on_node_0(tmp_path):
    nodes = _start(tmp_path)
    try:
        os.kill(nodes[1].rank_pid(), signal.SIGSTOP)
        stopped = time.monotonic()
        codes = [n.wait(timeout=120) for n in nodes]
        out0 = nodes[0].text
        assert codes == [4, 4], "\n".join(n.text[-3000:] for n in nodes)
        host = socket.gethostname()
        m = re.search(rf"rank 1 \(node rank 1 on {re.escape(host)}\) at iteration (\d+), stage \w+", out0)
        assert m, out0[-3000:]
        said = nodes[0].when("rank 1 (node rank 1 on")
        assert said is not None and said - stopped < STALL + 10, (said, stopped)
        assert "C++" not in out0 and "TCPStore" not in out0
    finally:
        _cleanup(nodes)


def test_node_1s_mgpu_killed_is_named_on_node_0(tmp_path):
    nodes = _start(tmp_path)
    try:
        nodes[1].proc.send_signal(signal.SIGKILL)
        code = nodes[0].wait(timeout=120)
        out0 = nodes[0].text
        assert code != 0
        assert "node 1's mgpu on" in out0 and "stopped publishing" in out0 and "it is gone" in out0, out0[
            -3000:
        ]
    finally:
        _cleanup(nodes)
