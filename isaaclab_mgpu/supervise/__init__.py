"""Run a launch command under supervision (minimal: the full supervisor lands with issue 3)."""

from __future__ import annotations

import os
import subprocess

from ..build import Command


def supervise(cmd: Command) -> int:
    """Run ``cmd`` and return its exit code."""
    proc = subprocess.Popen(cmd.argv, env={**os.environ, **cmd.env}, start_new_session=True)
    return proc.wait()
