"""Running ``mgpu`` in-process for CLI tests (``no_spawn`` in conftest.py refuses any spawn)."""

from __future__ import annotations

from isaaclab_mgpu.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``mgpu ARGV`` in this process: exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
