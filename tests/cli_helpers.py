"""Running ``mgpu`` in-process for CLI tests (``no_spawn`` in conftest.py refuses any spawn)."""

from __future__ import annotations

import re
import shlex

from isaaclab_mgpu.cli import main

#: The launch's log folder is named by the clock's second (the run stamp): two calls may differ.
_LAUNCH = re.compile(r"/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d/attempt_")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``mgpu ARGV`` in this process: exit code, stdout (the launch folder's stamp zeroed), stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, _LAUNCH.sub("/0000-00-00_00-00-00/attempt_", out), err


def torchrun_line(capsys, monkeypatch, env: dict[str, str], argv: list[str]) -> list[str]:
    """What ``mgpu dry-run ARGV`` prints as the command under ``env``, as a list (interpreter left out)."""
    with monkeypatch.context() as m:
        for name, value in env.items():
            m.setenv(name, value)
        code, out, err = run(capsys, "dry-run", *argv)
    assert code == 0, err
    return shlex.split(out.strip().splitlines()[-1])[1:]
