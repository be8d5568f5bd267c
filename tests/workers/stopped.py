"""Rank 1 stops itself with SIGSTOP (it cannot react to anything until SIGCONT); rank 0 sleeps."""

import os
import signal

from _common import rank, record, sleep_forever

record()
if rank() == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
sleep_forever()
