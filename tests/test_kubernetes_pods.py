"""Two PyTorchJob "pods" on this host: each starts ``mgpu train`` with only what the operator sets.

The training operator gives every pod torchrun's ``PET_*`` variables and the same container
command. torchrun reads ``PET_NNODES`` itself, so a command built for one node (``--standalone``)
waits forever for a pod that can never join; mgpu fills the launch from the variables instead, and
the two pods train together.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from training_helpers import child_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_pods_with_only_the_operators_variables_train_together(tmp_path):
    port = _free_port()
    procs = []
    for pod in (0, 1):
        env = child_env(tmp_path)
        env.update(
            PET_NNODES="2",
            PET_NODE_RANK=str(pod),
            PET_NPROC_PER_NODE="1",
            PET_RDZV_ENDPOINT=f"127.0.0.1:{port}",
            PET_RDZV_BACKEND="c10d",
        )
        argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--max_iterations", "3"]
        procs.append(
            subprocess.Popen(
                [*argv, "--no_preflight"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outs)[-4000:]
    for out in outs:
        assert "mgpu: filled --nnodes 2 from PET_NNODES" in out
        assert f"mgpu: filled --rdzv_endpoint 127.0.0.1:{port} from PET_RDZV_ENDPOINT" in out
    summaries = list((tmp_path / "logs").glob("*/*/*/summary.json"))
    assert len(summaries) == 1, summaries
    s = json.loads(summaries[0].read_text())
    assert (s["world_size"], s["iterations"], s["status"], s["checksums_equal"]) == (2, 3, "finished", True)
    assert len(s["checksums"]["end"]) == 2 and len(set(s["checksums"]["end"])) == 1, s["checksums"]
