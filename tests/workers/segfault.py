"""Rank 1 kills itself with SIGSEGV once both ranks are up; rank 0 sleeps."""

import os
import signal

from _common import rank, record, sleep_forever, wait_for_pids

record()
if rank() == 1:
    wait_for_pids(2)
    os.kill(os.getpid(), signal.SIGSEGV)
sleep_forever()
