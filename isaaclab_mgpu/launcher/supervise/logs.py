"""Where an attempt's per-rank logs are, and when each rank last wrote to them.

The launcher names the attempt's log folder ``<log_dir>/<run_id>_<rand>`` itself (the layout is
:mod:`isaaclab_mgpu.contract.elastic`'s); the supervisor learns it from a rank's environment (its
``TORCHELASTIC_ERROR_FILE``) while the ranks run, or afterwards from the newest folder of the
attempt's ``--log_dir`` made since the start. The stall watch's output fallback
(``--stall_on_silence``) reads the per-rank log files' change times.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

from isaaclab_mgpu.contract import elastic, env

__all__ = ["from_ranks", "newest_run_dir", "output_times"]


def from_ranks(launcher: psutil.Process | None) -> str | None:
    """The run's log folder, read from a rank's environment (the launcher's children)."""
    try:
        ranks = launcher.children() if launcher is not None else []
    except psutil.Error:
        return None
    for rank in ranks:
        try:
            path = rank.environ().get(env.ERROR_FILE)
        except (psutil.Error, OSError):
            continue
        if path and (run_dir := elastic.run_dir_of(path)) is not None:
            return str(run_dir)
    return None


def newest_run_dir(root: str, since: float) -> str | None:
    """The newest folder in the log root ``root`` changed since ``since`` (epoch seconds)."""
    try:
        dirs = [d for d in Path(root).iterdir() if d.is_dir() and d.stat().st_mtime >= since]
    except OSError:
        return None
    return str(max(dirs, key=lambda d: d.stat().st_mtime)) if dirs else None


def output_times(run_dir: str, ranks: tuple[int, ...]) -> dict[int, float]:
    """Each local rank's last output (its log files' newest change), by global rank."""
    times = {}
    folders = elastic.rank_dirs(run_dir)
    for local, rank in enumerate(ranks):
        folder = folders.get(local)
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
