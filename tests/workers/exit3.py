"""The last rank (rank 1 of 2, or a lone rank 0) exits with code 3 once every rank is up; others sleep."""

import os
import sys

from _common import rank, record, sleep_forever, wait_for_pids

record()
world = int(os.environ.get("WORLD_SIZE", "2"))
if rank() == world - 1:
    wait_for_pids(world)
    print(f"rank {rank()} giving up with exit code 3", file=sys.stderr, flush=True)
    sys.exit(3)
sleep_forever()
