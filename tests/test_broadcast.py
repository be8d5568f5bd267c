"""The worker's broadcast of rank 0's bytes (a resumed checkpoint) on 2 real ranks: JAX and gloo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "workers" / "broadcast.py"
LAUNCHERS = {
    "jax": [sys.executable, "-m", "isaaclab_mgpu.jaxrun", "--coordinator_address", "127.0.0.1:0"],
    "torch": [sys.executable, "-m", "torch.distributed.run", "--standalone"],
}


@pytest.mark.parametrize("kind", ["jax", "torch"])
@pytest.mark.parametrize("size", [0, 3_000_000])
def test_every_rank_gets_rank_0s_bytes_while_the_others_pass_none(kind, size, tmp_path):
    out = tmp_path / "got"
    argv = [*LAUNCHERS[kind], "--nproc_per_node", "2", str(WORKER), kind, str(size), str(out)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "OMP_NUM_THREADS": "1"}
    # Before the fix a JAX rank receiving into a buffer of its own (empty) size waited forever.
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the ranks too, not only their launcher
        _, err = proc.communicate()
        pytest.fail(f"the broadcast did not finish in 60 s:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    sent = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert [(tmp_path / f"got.{r}").read_bytes() == sent for r in (0, 1)] == [True, True]
