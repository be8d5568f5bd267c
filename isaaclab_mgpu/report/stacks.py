"""``mgpu stacks``: each rank's live Python stack, printed as the rank wrote it (as text)."""

from __future__ import annotations

import sys

from isaaclab_mgpu.launcher.livestacks import LiveRun
from isaaclab_mgpu.report import note, warn
from isaaclab_mgpu.report.text import printable


def stacks(run: LiveRun, dumped: dict[int, str]) -> int:
    """Print the stacks of ``run``'s ranks; return 0 when every rank answered, else 1."""
    note(f"run {run.stamp or run.run_id}: {len(run.ranks)} local rank(s); the run goes on")
    missing = 0
    for r in run.ranks:
        text = dumped.get(r.rank)
        if text is None:
            missing += 1
            why = "has no stack handler yet (still starting?)" if not r.ready else "wrote nothing within 3 s"
            warn(f"rank {r.rank} (pid {r.process.pid}) {why}")
            continue
        sys.stdout.write(
            f"== rank {r.rank} (local rank {r.local_rank}, pid {r.process.pid}), saved in {r.stack_file}\n"
        )
        # One line at a time through printable(): the file is the rank's, its bytes are data.
        sys.stdout.write("".join(printable(line) + "\n" for line in text.rstrip("\n").splitlines()))
    sys.stdout.flush()
    return 1 if missing else 0
