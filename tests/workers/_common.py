"""Shared helpers of the test workers: record PIDs, know the rank, wait, sleep."""

import os
import signal
import sys
import time


def rank() -> int:
    """This process's global rank (0 outside a launch)."""
    return int(os.environ.get("RANK", "0"))


def record(role: str = "rank") -> None:
    """Write this PID to the test's PID folder (atomically: the test polls the folder)."""
    folder = os.environ.get("MGPU_TEST_PIDS")
    if not folder:
        return
    tmp = os.path.join(folder, f".{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(f"{role} {rank()}\n")
    os.rename(tmp, os.path.join(folder, str(os.getpid())))


def wait_for_pids(count: int, timeout: float = 60.0) -> None:
    """Block until ``count`` PIDs are recorded, so a failure never races the others' start."""
    folder = os.environ.get("MGPU_TEST_PIDS")
    end = time.monotonic() + timeout
    while folder and time.monotonic() < end:
        if len([n for n in os.listdir(folder) if n.isdigit()]) >= count:
            return
        time.sleep(0.05)


def ignore(*sigs: int) -> None:
    """Ignore the given signals."""
    for sig in sigs:
        signal.signal(sig, signal.SIG_IGN)


def sleep_forever() -> None:
    """Sleep until killed."""
    while True:
        time.sleep(0.2)


def spawn(role: str, *, setsid: bool = False, stubborn: bool = False) -> None:
    """Fork a sleeping child (a grandchild of the launcher); with setsid, one that escaped the group."""
    pid = os.fork()
    if pid:
        if setsid:
            os.waitpid(pid, 0)  # the intermediate exits at once, orphaning the escapee
        return
    try:
        if setsid:
            os.setsid()
            if os.fork():
                os._exit(0)
            ignore(signal.SIGINT, signal.SIGHUP)
        if stubborn:
            ignore(signal.SIGTERM, signal.SIGINT)
        sys.stdout.flush()
        record(role)
        sleep_forever()
    finally:
        os._exit(0)
