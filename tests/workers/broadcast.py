"""A rank that broadcasts rank 0's bytes with the worker's own ``Comm`` (JAX or gloo).

Usage: ``broadcast.py jax|torch SIZE OUT``: rank 0 sends SIZE seeded random bytes, every other rank
passes empty bytes (as the worker does when resuming); each writes what it got to OUT.<rank>.
"""

import os
import sys

import numpy as np

from isaaclab_mgpu.rank.worker.rank import Comm, RankContext

kind, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prefix = "JAX_" if kind == "jax" else ""
rank, world = int(os.environ[f"{prefix}RANK"]), int(os.environ[f"{prefix}WORLD_SIZE"])
if kind == "jax":
    import jax

    jax.distributed.initialize(
        coordinator_address=f"{os.environ['JAX_COORDINATOR_ADDR']}:{os.environ['JAX_COORDINATOR_PORT']}",
        num_processes=world,
        process_id=rank,
    )
else:
    import torch.distributed as dist

    dist.init_process_group("gloo")
ctx = RankContext(rank=rank, local_rank=rank, world_size=world, device="cpu", seed=0)
data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes() if rank == 0 else b""
got = Comm(ctx, kind).broadcast_bytes(data)
with open(f"{out}.{rank}", "wb") as f:
    f.write(got)
if kind == "torch":
    dist.destroy_process_group()
