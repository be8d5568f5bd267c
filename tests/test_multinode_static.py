"""A static two-node rendezvous (--master_addr, no --rdzv_id), both "nodes" on this host.

The id mgpu gives such a launch (``mgpu_<host>_<port>``) must let the nodes meet (the static
rendezvous prefixes its store keys with it); each node's rank logs into a folder named by its global rank.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from restart_helpers import free_port

pytestmark = pytest.mark.slow

WORKERS = Path(__file__).parent / "workers"


def test_static_two_node_run_meets_and_names_its_log_folders(tmp_path):
    port = free_port()
    procs = []
    for node in (0, 1):
        argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--nproc_per_node", "1"]
        argv += ["--nnodes", "2", "--node_rank", str(node), "--master_addr", "127.0.0.1"]
        argv += ["--master_port", str(port), "--log_dir", str(tmp_path / f"node{node}"), "--no_preflight"]
        argv += ["--script", str(WORKERS / "hello.py")]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outs)[-4000:]
    assert "hello from rank 0" in outs[0] and "hello from rank 1" in outs[1]
    for node in (0, 1):
        # <log_dir>/<program>/<launch>/attempt_0/rank_<global rank>: node 1's one rank is rank 1.
        (attempt,) = (tmp_path / f"node{node}" / "hello").glob("*/attempt_0")
        folders = [d.name for d in attempt.iterdir() if d.is_dir()]
        assert folders == [f"rank_{node}"], folders
