"""Where an attempt's per-rank logs are, and when each rank last wrote to them.

The launcher writes each rank's files in ``<log_dir>/rank_<global rank>/`` (the layout is
:mod:`isaaclab_mgpu.contract.elastic`'s): the supervisor learns the folder from a rank's
environment (its ``TORCHELASTIC_ERROR_FILE``) while the ranks run, or afterwards from the
attempt's ``--log_dir`` once a rank folder in it changed since the start. The stall watch's output
fallback (``--stall_on_silence``) reads the per-rank log files' change times.
"""

from __future__ import annotations

import contextlib

import psutil

from isaaclab_mgpu.contract import elastic, env
from isaaclab_mgpu.launcher.supervise.tree import children

__all__ = ["from_ranks", "made_since", "output_times"]


def from_ranks(launcher: psutil.Process | None) -> str | None:
    """The attempt's log folder, read from a rank's environment (the launcher's children)."""
    for rank in children(launcher) if launcher is not None else []:
        try:
            path = rank.environ().get(env.ERROR_FILE)
        except (psutil.Error, OSError):
            continue
        if path and (folder := elastic.attempt_dir_of(path)) is not None:
            return str(folder)
    return None


def made_since(log_dir: str, since: float) -> str | None:
    """``log_dir`` when one of its rank folders changed since ``since`` (epoch seconds), else None."""
    for folder in elastic.rank_dirs(log_dir).values():
        with contextlib.suppress(OSError):
            if folder.stat().st_mtime >= since:
                return log_dir
    return None


def output_times(log_dir: str, ranks: tuple[int, ...]) -> dict[int, float]:
    """The last output (its log files' newest change) of each global rank in ``ranks``."""
    times = {}
    folders = elastic.rank_dirs(log_dir)
    for rank in ranks:
        folder = folders.get(rank)
        if folder is None:
            continue
        stamps = []
        for name in (elastic.STDOUT, elastic.STDERR):
            with contextlib.suppress(OSError):
                info = (folder / name).stat()
                if info.st_size:  # an empty file is the launcher's, not the rank's output
                    stamps.append(info.st_mtime)
        if stamps:
            times[rank] = max(stamps)
    return times
