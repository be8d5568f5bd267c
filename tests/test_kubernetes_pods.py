"""Two PyTorchJob "pods" on this host: each starts ``mgpu train`` with only what the operator sets.

The training operator gives every pod torchrun's ``PET_*`` variables and the same container
command. torchrun reads ``PET_NNODES`` itself, so a command built for one node (``--standalone``)
waits forever for a pod that can never join; mgpu fills the launch from the variables instead, and
the two pods train together.

Each pod has a log root of its own (a pod's own disk), and they start in either order. torch's c10d
rendezvous would number them by sorting their descriptors (host, then pid): the pod started second
often got global rank 0, while the pod with ``PET_NODE_RANK=0`` kept a run record that never
settled (``running``, then ``lost``). A fixed-size pod set meets on the static rendezvous instead,
so rank 0 runs in the ``PET_NODE_RANK=0`` pod, whose log root holds the one run, and the other
pod's holds none.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from training_helpers import child_env

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["node0-first", "node1-first"])
def test_two_pods_with_only_the_operators_variables_train_together_with_rank_0_in_pod_0(tmp_path, order):
    port = _free_port()
    procs = {}
    for pod in order:
        home = tmp_path / f"pod{pod}"
        home.mkdir()
        env = child_env(home)
        env.update(
            PET_NNODES="2",
            PET_NODE_RANK=str(pod),
            PET_NPROC_PER_NODE="1",
            PET_RDZV_ENDPOINT=f"127.0.0.1:{port}",
            PET_RDZV_BACKEND="c10d",
        )
        argv = [sys.executable, "-m", "isaaclab_mgpu", "train", "--device", "cpu", "--max_iterations", "3"]
        procs[pod] = subprocess.Popen(
            [*argv, "--no_preflight"], cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        time.sleep(0.5)  # the second pod starts later, as a second pod does
    outs = {}
    try:
        for pod, proc in procs.items():
            outs[pod] = proc.communicate(timeout=240)[0]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    assert [procs[p].returncode for p in (0, 1)] == [0, 0], "\n".join(outs.values())[-4000:]
    for out in outs.values():
        assert "mgpu: filled --nnodes 2 from PET_NNODES" in out
        assert "mgpu: filled --master_addr 127.0.0.1 from PET_RDZV_ENDPOINT" in out
        assert "mgpu: filled --rdzv_backend static for a fixed-size job" in out
    summaries = list((tmp_path / "pod0" / "logs").glob("*/*/*/summary.json"))
    assert len(summaries) == 1, summaries
    s = json.loads(summaries[0].read_text())
    assert (s["world_size"], s["iterations"], s["status"], s["checksums_equal"]) == (2, 3, "finished", True)
    assert len(s["checksums"]["end"]) == 2 and len(set(s["checksums"]["end"])) == 1, s["checksums"]
    # rank 0 trained in pod 0 (its TensorBoard file is there); pod 1 holds no run, running or lost.
    assert list(summaries[0].parent.glob("events.out.tfevents.*"))
    assert not list((tmp_path / "pod1" / "logs").glob("*/*/*/summary.json"))
    rows = subprocess.run(
        [sys.executable, "-m", "isaaclab_mgpu", "runs", "--json"], cwd=tmp_path / "pod1", capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert json.loads(rows.stdout) == []
