"""Run folders and their ``summary.json``: where a run writes, how its status stays true, and the
list ``mgpu runs`` shows.

A run of the built-in worker lives in ``<log_root>/<library>/<experiment>/<stamp>[_<run_name>]``
(:func:`run_folder`; every rank names the same one from the launcher's ``MGPU_RUN_STAMP``). Rank 0
keeps ``summary.json`` there from the start:

- when training starts it writes ``status: "running"`` with what the run is (library, framework,
  task, world size, start time), and refreshes the progress fields (iterations, rewards, s/it) at
  most every :data:`REFRESH_S` seconds, so a run that dies still shows how far it got;
- at the end it writes the full summary with ``status`` ``finished`` or ``interrupted``;
- ``mgpu train`` itself, once the whole process tree is gone, settles a summary that still says
  ``running`` (:func:`settle`): ``failed`` when a rank failed, ``hung`` when the launch was stopped
  as stalled, ``interrupted`` when it was stopped by a signal; it also writes a minimal summary
  when rank 0 died before writing any. A launcher killed with SIGKILL cannot do this, so its run
  keeps ``running``.

:func:`find_runs` reads only these files (one directory walk, three levels deep at most, no
descent below a folder that holds a ``summary.json``), newest first by the folder names' stamps,
and only as many as it is asked for, so listing thousands of runs stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from isaaclab_mgpu.launcher.spec import training_option

SUMMARY = "summary.json"
DEFAULT_LOG_ROOT = "logs"
DEFAULT_TASK = "cartpole"
STATUSES = ("running", "finished", "interrupted", "failed", "hung")
#: Seconds between rank 0's refreshes of a running summary.
REFRESH_S = 30.0
_STAMP = "%Y-%m-%d_%H-%M-%S"


def run_folder(log_root: str, library: str, experiment: str, stamp: str, run_name: str | None) -> Path:
    """``<log_root>/<library>/<experiment>/<stamp>[_<run_name>]``, the folder every rank names."""
    name = f"{stamp}_{run_name}" if run_name else stamp
    return Path(log_root) / library / experiment / name


def planned_folder(training_args: tuple[str, ...], library: str, stamp: str) -> Path:
    """The run folder the built-in worker will use for ``training_args`` (as the launcher sees them)."""
    task = training_option(training_args, "task") or DEFAULT_TASK
    return run_folder(
        training_option(training_args, "log_root") or DEFAULT_LOG_ROOT,
        library,
        training_option(training_args, "experiment_name") or task,
        stamp,
        training_option(training_args, "run_name"),
    )


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def read_summary(folder: Path) -> dict[str, Any] | None:
    """The run's summary.json, or None when it is missing or unreadable."""
    try:
        data = json.loads((Path(folder) / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def settle(folder: Path, status: str, exit_status: int, identity: Mapping[str, Any]) -> bool:
    """Record how a run ended when its rank 0 could not: only a summary still ``running`` (or none)
    changes. ``identity`` (library, framework, task, world size) fills a summary that never was.
    Returns True when the file was written."""
    folder = Path(folder)
    if not folder.is_dir():
        return False
    data = read_summary(folder)
    if data is not None and data.get("status", "running") != "running":
        return False
    data = {**identity, "run_dir": str(folder), **(data or {})}
    data.update(status=status, exit_status=exit_status, settled_by="launcher")
    with contextlib.suppress(OSError):
        write_json(folder / SUMMARY, data)
        return True
    return False


@dataclass(frozen=True)
class RunRow:
    """One run as ``mgpu runs`` lists it (from its summary.json alone)."""

    folder: str
    library: str | None
    framework: str | None
    task: str | None
    world_size: int | None
    iterations: int | None
    s_per_iteration: float | None
    env_steps_per_s: float | None
    reward_first: float | None
    reward_last: float | None
    checksums_equal: bool | None
    status: str
    started: float
    """Start time (seconds since the epoch): the summary's ``started_at``, else the folder's stamp."""

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return asdict(self)


def status_of(data: Mapping[str, Any]) -> str:
    """The run's status; summaries written before statuses existed are finished or interrupted."""
    status = data.get("status")
    if status in STATUSES:
        return str(status)
    if data.get("interrupted"):
        return "interrupted"
    return "finished" if data.get("exit_status", 0) == 0 else "failed"


def _folder_time(folder: Path) -> float:
    """When the run started, from its folder name's stamp (``2026-12-01_01-44-06…``, as mgpu and Isaac
    Lab name run folders), else the summary's modification time: no file has to be read."""
    try:
        return time.mktime(time.strptime(folder.name[:19], _STAMP))
    except ValueError:
        with contextlib.suppress(OSError):
            return (folder / SUMMARY).stat().st_mtime
    return 0.0


def _started(folder: Path, data: Mapping[str, Any]) -> float:
    value = data.get("started_at")
    return float(value) if isinstance(value, (int, float)) else _folder_time(folder)


def row(folder: Path, data: Mapping[str, Any]) -> RunRow:
    """A :class:`RunRow` from one summary."""
    rate = data.get("env_steps_per_s")
    total = rate.get("total") if isinstance(rate, dict) else rate
    return RunRow(
        folder=str(folder),
        library=data.get("backend"),
        framework=data.get("framework"),
        task=data.get("task"),
        world_size=data.get("world_size"),
        iterations=data.get("iterations"),
        s_per_iteration=data.get("s_per_iteration"),
        env_steps_per_s=total,
        reward_first=data.get("first_mean_reward"),
        reward_last=data.get("last_mean_reward"),
        checksums_equal=data.get("checksums_equal"),
        status=status_of(data),
        started=_started(folder, data),
    )


def summary_folders(root: Path, depth: int = 3) -> Iterator[Path]:
    """Folders under ``root`` (itself included, ``depth`` levels down) that hold a summary.json."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    if any(e.name == SUMMARY and e.is_file() for e in entries):
        yield Path(root)
        return
    if depth == 0:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
            yield from summary_folders(Path(e.path), depth - 1)


def find_runs(root: Path, limit: int = 0) -> list[RunRow]:
    """The runs under ``root`` (a log root, library or experiment folder, or one run), newest first;
    only the newest ``limit`` (0: all). Runs are ordered by their folder names' stamps before any
    summary is read, so ``--last`` and a limited table read ``limit`` files, not thousands."""
    folders = sorted(summary_folders(Path(root)), key=lambda f: (_folder_time(f), str(f)), reverse=True)
    rows: list[RunRow] = []
    for folder in folders:
        data = read_summary(folder)
        if data is not None:
            rows.append(row(folder, data))
            if limit and len(rows) >= limit:
                break
    return rows
