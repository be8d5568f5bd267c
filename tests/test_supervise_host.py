"""The supervisor used in-process leaves its host as it was: no subreaper flag, no zombie children.

``Supervisor`` makes its host a child subreaper for the run, so the tree's orphans come back to it
instead of init. The host here is a fresh Python process (pytest's own state must not decide the
outcome) that runs one supervised launch whose launcher orphans two grandchildren (one of them
after ``setsid``), then checks what a library user would see afterwards. The grandchildren live 2 s
so that the supervisor sees them (it probes every 0.5 s) however loaded the machine is; an escapee
that dies unseen is not told from the host's own children (see ``Supervisor._release_subreaper``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HOST = r"""
import ctypes, json, os, subprocess, sys, time
import psutil
from isaaclab_mgpu.launcher.build import Command
from isaaclab_mgpu.launcher.supervise import SuperviseOptions, Supervisor

libc = ctypes.CDLL(None, use_errno=True)

def subreaper():
    value = ctypes.c_int(-1)
    assert libc.prctl(37, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    return value.value

def zombies():
    return sorted(c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE)

before = subreaper()
# The host's own child, ending during the run: its exit status belongs to the host.
own = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(0.5); sys.exit(7)"])
ORPHANS = (
    "import os, time\n"
    "for escape in (False, True):\n"
    "    if os.fork() == 0:\n"
    "        if escape:\n"
    "            os.setsid()\n"
    "        time.sleep(2)\n"
    "        os._exit(0)\n"
    "os._exit(0)\n"
)
cmd = Command(
    argv=(sys.executable, "-c", ORPHANS), env={}, world_size=1, rank_devices={0: "cpu"},
    launcher="orphans", log_dir=sys.argv[1],
)
sup = Supervisor(cmd, SuperviseOptions(grace_period=1, kill_after=1, console=False))
sup.start()
during = subreaper()
result = sup.wait()
after = subreaper()
left = [pid for pid in zombies() if pid != own.pid]
own_code = own.wait()
# An orphan made after the run goes to init again, not to this host.
LATER = "import os, time\nif os.fork() == 0:\n    time.sleep(0.3)\n    os._exit(0)\n"
subprocess.run([sys.executable, "-c", LATER])
time.sleep(1.5)
print(json.dumps({
    "before": before, "during": during, "after": after, "exit_code": result.exit_code,
    "zombies_after_run": left, "own_child_code": own_code, "zombies_later": zombies(),
}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux-only")
def test_in_process_supervisor_leaves_no_subreaper_flag_and_no_zombies(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", HOST, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {
        "before": 0,
        "during": 1,  # the run did adopt orphans: the test exercises the flag
        "after": 0,
        "exit_code": 0,
        "zombies_after_run": [],
        "own_child_code": 7,
        "zombies_later": [],
    }, seen
