"""Each rank's name in ``ps``, ``top`` and ``htop``: which rank of which run it is.

torchrun starts every rank with the same command line; under ``mgpu train`` each rank renames itself
(setproctitle, which rewrites what ``/proc/PID/cmdline`` shows) to::

    mgpu rank 1/2 | isaaclab_mgpu.worker rsl_rl/torch cartpole | run 2026-12-02_00-24-14_stop | attempt 0

The program's name stays in the title, so ``mgpu check-env``'s leftover check still finds the
rank, and ``/proc/PID/environ`` stays readable (mgpu finds its ranks by ``MGPU_RUN_ID`` there).
Outside mgpu (no ``MGPU_RUN_ID``) and where setproctitle is missing, nothing changes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from isaaclab_mgpu.contract import env


def title(what: str, environ: Mapping[str, str]) -> str:
    """The title of a rank running ``what`` (the program and its task), from its environment."""
    rank = environ.get("RANK", environ.get("JAX_RANK", "0"))
    world = environ.get("WORLD_SIZE", environ.get("JAX_WORLD_SIZE", "1"))
    parts = [f"mgpu rank {rank}/{world}", what]
    run_dir = environ.get(env.RUN_DIR)
    run = Path(run_dir).name if run_dir else environ.get(env.RUN_STAMP)
    if run:
        parts.append(f"run {run}")
    if env.ATTEMPT in environ:
        parts.append(f"attempt {environ[env.ATTEMPT]}")
    # ASCII only: the kernel keeps the first 15 bytes as the process name (/proc/PID/status), and a
    # character cut in half there makes that file unreadable as text.
    return " | ".join(parts)


def name_this_rank(what: str, environ: Mapping[str, str] | None = None) -> None:
    """Rename this process to :func:`title` under ``mgpu train``; a no-op elsewhere, never raises."""
    environ = os.environ if environ is None else environ
    if not environ.get(env.RUN_ID):
        return
    with contextlib.suppress(Exception):  # a title is a convenience: never a reason to fail a rank
        # setproctitle takes the environment block's memory for a title longer than the command
        # line, and /proc/PID/environ then reads empty (mgpu finds its ranks by MGPU_RUN_ID there).
        # SPT_NOENV, read at the first call, fits the title into the command line's space instead.
        os.environ["SPT_NOENV"] = "1"
        import setproctitle

        setproctitle.setproctitle(title(what, environ))
        os.environ.pop("SPT_NOENV", None)
