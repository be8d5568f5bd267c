"""Rank 1 ignores SIGTERM and SIGINT (only SIGKILL ends it); rank 0 is cooperative."""

import signal

from _common import ignore, rank, record, sleep_forever

if rank() == 1:
    ignore(signal.SIGTERM, signal.SIGINT)
record()
sleep_forever()
