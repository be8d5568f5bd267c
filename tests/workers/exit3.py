"""Rank 1 exits with code 3 once both ranks are up; rank 0 sleeps."""

import sys

from _common import rank, record, sleep_forever, wait_for_pids

record()
if rank() == 1:
    wait_for_pids(2)
    print("rank 1 giving up with exit code 3", file=sys.stderr, flush=True)
    sys.exit(3)
sleep_forever()
