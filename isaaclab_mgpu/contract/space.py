"""Disk space: how much a run's file system has left, and the one line for a rank that found it full.

Both sides use it. ``mgpu check-env`` and the ``train`` preflight warn (never refuse) when the log
root's file system has less than :data:`FREE_FLOOR` free, or, on a resume, less than
:data:`RESUME_CHECKPOINTS` times the size of the checkpoint it continues from (the run writes
that much again every ``--save_interval``). A rank that meets ``ENOSPC`` or ``EDQUOT``
(:func:`is_full`) while writing a checkpoint, the summary or a log ends with one line
(:func:`full_line`: the file system's mount point, its free space, the file it could not write
and the newest whole checkpoint) and exit code 74
(:data:`~isaaclab_mgpu.contract.errors.EXIT_NO_SPACE`), which ``mgpu train`` never restarts.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: Free space on the log root's file system below which check-env and the preflight warn (1 GiB).
FREE_FLOOR = 1 << 30
#: On a resume: warn below this many times the size of the checkpoint it continues from.
RESUME_CHECKPOINTS = 3
#: The ``errno`` values of a full file system or a spent quota.
FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


def is_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that says the file system is full or the quota spent."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def existing(path: str | os.PathLike[str]) -> Path:
    """``path`` or its nearest folder above that exists (the log root may not exist yet)."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def mount_point(path: str | os.PathLike[str]) -> Path:
    """The mount point of the file system holding ``path`` (or its nearest existing folder)."""
    here = existing(path)
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return here


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged user may still write on ``path``'s file system; None if unknown."""
    try:
        st = os.statvfs(existing(path))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def size_text(n: int | None) -> str:
    """``1.5 GiB``, ``312 KiB``, ``0 B`` (a decimal only below 10 of a unit); ``unknown`` for None."""
    if n is None:
        return "unknown"
    value, unit = float(n), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    if unit == "B":
        return f"{n} B"
    value = round(value, 1)
    return f"{value:.0f} {unit}" if value >= 10 or value.is_integer() else f"{value} {unit}"


def full_line(exc: OSError, folder: str | os.PathLike[str], newest: str | os.PathLike[str] | None) -> str:
    """The one line of a rank that could not write into ``folder``'s file system (``exc``)."""
    written = exc.filename if exc.filename is not None else folder
    what = "disk quota exceeded" if exc.errno == getattr(errno, "EDQUOT", None) else "no space left on device"
    mount = mount_point(written)
    kept = f"the newest whole checkpoint is {newest}" if newest else "no checkpoint was saved yet"
    return (
        f"disk full ({what}): could not write {written}; the file system mounted at {mount} has "
        f"{size_text(free_bytes(mount))} free; {kept}; free space there (or --keep_checkpoints N, "
        "another --log_root) and resume"
    )
