"""A user training loop that reports each iteration with the public helper; rank 1 freezes at 5."""

import os
import signal
import time

from isaaclab_mgpu.contract import progress


def train_step(iteration: int) -> None:
    if iteration == 5 and int(os.environ.get("RANK", "0")) == 1:
        os.kill(os.getpid(), signal.SIGSTOP)  # a frozen rank: it makes no progress from here
    time.sleep(0.1)


for it in range(1, 100_000):
    progress.iteration(it)
    train_step(it)
