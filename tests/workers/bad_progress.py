"""Rank 0 plants two malformed progress files beside the real ones; both ranks report and end well."""

import json
import os
import time

from _common import rank

from isaaclab_mgpu.contract import progress

folder = os.environ.get("MGPU_PROGRESS_DIR")
if rank() == 0 and folder:
    planted = {
        "progress.7.json": {"rank": 7, "local_rank": "y", "pid": "x", "stage": "update", "time": time.time()},
        "progress.8.json": {"rank": 8, "pid": 123, "stage": "update", "time": "soon"},
    }
    for name, data in planted.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(data, f)
for it in range(1, 9):
    progress.iteration(it)
    time.sleep(0.4)  # the stall watch reads the folder every 0.5 s: it sees the planted files often
print(f"rank {rank()} done", flush=True)
