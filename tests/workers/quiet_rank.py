"""A user script that reports no progress; rank 1 goes silent (and stuck) after a few lines."""

import os
import time

rank = int(os.environ.get("RANK", "0"))
for i in range(100_000):
    if rank == 1 and i >= 5:
        time.sleep(3600)  # stuck, and silent
    print(f"rank {rank} step {i}", flush=True)
    time.sleep(0.2)
