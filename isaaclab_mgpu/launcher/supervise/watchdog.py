"""The watchdog: kills a run's process tree when ``mgpu`` itself dies without cleaning up.

``mgpu train`` starts this file as a script (``python watchdog.py``), in its own session, with a
pipe from ``mgpu`` as its stdin, before it starts the launcher. The first line on that pipe is
JSON, ``{"run_id": ..., "since": ..., "folders": [...]}``: the marker travels on the pipe, never
in an argument list (``ps`` shows every process's arguments to every user, and a marker known to
a stranger could be planted into a process mgpu would then signal). When ``mgpu`` finishes
normally it writes ``done`` and the watchdog exits quietly. When the pipe reaches end-of-file
without ``done`` (``mgpu`` was SIGKILLed, crashed, or lost its terminal) the watchdog kills every
process whose environment carries ``MGPU_RUN_ID=RUN_ID`` (:func:`kill_marked`), then removes the
folders mgpu named (the stall watch's progress folder).

It imports only the standard library, psutil and :mod:`isaaclab_mgpu.contract.env`, so it starts
in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time

import psutil

from isaaclab_mgpu.contract import env

#: What ``mgpu`` writes to the watchdog's stdin when the run ended and the tree is gone.
DONE = b"done"
#: A marked process gets SIGKILL this long after its SIGTERM; the sweep gives up after LIMIT_S.
TERM_WAIT_S = 1.0
LIMIT_S = 10.0


def marked_processes(
    run_id: str, since: float, exclude: frozenset[int] = frozenset()
) -> list[psutil.Process]:
    """Processes of this user created after ``since`` (epoch seconds) whose environment has the marker."""
    # The user first: mgpu as root reads every environment, and another user could plant the marker.
    found = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    for proc in psutil.process_iter(["create_time", "uids"]):
        if proc.pid in exclude:
            continue
        created = proc.info.get("create_time")
        if created is None or created < since:
            continue
        uids = proc.info.get("uids")
        if uid is not None and (uids is None or uids.real != uid):
            continue
        try:
            # /proc/PID/environ is the environment the process started with; a zombie's is empty.
            if proc.environ().get(env.RUN_ID) == run_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def send_each(procs: list[psutil.Process], sig: int) -> None:
    """Send ``sig`` to each process that can still get it (psutil checks the PID was not reused)."""
    for proc in procs:
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(sig)


def kill_marked(run_id: str, since: float) -> None:
    """SIGTERM (with SIGCONT), then SIGKILL, every marked process until none is left."""
    me = frozenset({os.getpid()})
    start = time.monotonic()
    termed: dict[int, float] = {}
    quiet = 0
    while time.monotonic() - start < LIMIT_S and quiet < 3:
        procs = [p for p in marked_processes(run_id, since, me) if alive(p)]
        quiet = 0 if procs else quiet + 1
        now = time.monotonic()
        fresh = [p for p in procs if p.pid not in termed]
        send_each(fresh, signal.SIGTERM)
        send_each(fresh, signal.SIGCONT)
        for p in fresh:
            termed[p.pid] = now
        send_each([p for p in procs if now - termed[p.pid] >= TERM_WAIT_S], signal.SIGKILL)
        time.sleep(0.1)


def alive(proc: psutil.Process) -> bool:
    """True when ``proc`` still runs (a zombie has already died)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def header(run_id: str, since: float, folders: list[str]) -> bytes:
    """The first line ``mgpu`` writes to the watchdog: what to kill and what to remove."""
    return json.dumps({"run_id": run_id, "since": since, "folders": folders}).encode() + b"\n"


def main() -> int:
    """Wait for ``mgpu`` to finish or die; on death, kill the run's tree."""
    # Ctrl-C and hang-ups are for mgpu to handle, SIGUSR1 (SLURM's time-limit warning to the whole
    # job step) for the ranks: the watchdog outlives them on purpose.
    for name in ("SIGINT", "SIGHUP", "SIGUSR1"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    data = sys.stdin.buffer.read()  # until mgpu writes done and closes the pipe, or dies
    if data.strip().endswith(DONE):
        return 0
    try:
        start = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return 0  # mgpu died before it named its run: there is nothing to find
    kill_marked(start["run_id"], float(start["since"]))
    for folder in start["folders"]:  # the stall watch's progress folder: mgpu can no longer remove it
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
