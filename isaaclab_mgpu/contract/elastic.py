"""torch elastic's per-rank logs, its error files and its failure report: the one place that knows them.

**Layout.** mgpu gives each attempt's launcher the ``--log_dir`` :func:`attempt_log_dir`, and the
launcher writes each rank's files directly in it, in a folder named by the rank's global rank::

    <log root>/<run name>/<launch>/attempt_<k>/rank_<global rank>/stdout.log
                                                                 stderr.log
                                                                 error.json   (@record, on failure)
                                                                 reason.txt   (ours: the reason)
                                                                 stack.txt    (ours: live stacks)
    <log root>/<run name>/<launch>/attempt_<k>/launcher_error.<host>.<pid>.json   (launcher's copy)

``<launch>`` is the run stamp (``%Y-%m-%d_%H-%M-%S``), made exclusively by each mgpu that
launches (``<stamp>-2``, ``-3``… when another launch took the name), so no launch ever writes in,
or removes, another's files; a global rank names one folder across all nodes. torchrun writes it
through mgpu's logs spec (:mod:`isaaclab_mgpu.launcher.logspecs`), ``python -m
isaaclab_mgpu.jaxrun`` through :func:`rank_dir`, so one reader serves both. Each rank learns its
folder from ``TORCHELASTIC_ERROR_FILE``; what mgpu's ranks add goes beside it
(:func:`beside_error_file`).

**Error files.** ``@record`` writes ``{"message": {"message": "ValueError: …", "extraInfo":
{"py_callstack": "Traceback …", "timestamp": "<epoch seconds>"}}}`` (an older form has a plain
string ``message``). A launcher's own copy of its root cause's file adds ``"errorCode"`` (the
rank's exit code): :func:`launcher_error_file`, :func:`write_launcher_error` for jaxrun.
:func:`read_error_file` is the one parser; :func:`first_error` picks the first failure by torch's
own ``timestamp``, else the file's change time, as torch picks its root cause.

**The failure report.** torchrun exits 1 whatever its workers did; the rank's code, or the signal
that killed it, reaches the launcher's stderr only as text: a ``failed (exitcode: N) local_rank:
L (pid: P)`` line per failed worker, and a closing summary whose ``Root Cause (first observed
failure):`` entry names host, rank, exit code (negative: a signal), error file and traceback.
jaxrun prints the same (:func:`failed_line_text`, :func:`failure_summary`) beside the parsers
(:func:`failed_line`, :func:`parse_root_cause`), which are the fallback when no error file holds
the failure (a rank killed by a signal leaves none; :mod:`isaaclab_mgpu.launcher.supervise.result`).

Standard library only: the rank side (reasons, stacks) and the launcher side both import it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ERROR_FILE",
    "LAUNCHER_ERROR_FILE",
    "RANK_PREFIX",
    "REASON_FILE",
    "ROOT_CAUSE_HEADER",
    "STACK_FILE",
    "STDERR",
    "STDOUT",
    "ErrorRecord",
    "RootCause",
    "attempt_dir_of",
    "attempt_log_dir",
    "beside_error_file",
    "error_files",
    "exit_status_code",
    "failed_line",
    "failed_line_text",
    "failure_summary",
    "first_error",
    "launcher_error_file",
    "make_rank_dir",
    "parse_root_cause",
    "rank_dir",
    "rank_dirs",
    "read_error_file",
    "split_exitcode",
    "tail",
    "write_launcher_error",
]

STDOUT = "stdout.log"
STDERR = "stderr.log"
#: The rank's ``@record`` error file (``TORCHELASTIC_ERROR_FILE`` names it).
ERROR_FILE = "error.json"
#: A rank's one-line reason (:mod:`isaaclab_mgpu.contract.reasons`), beside its error file.
REASON_FILE = "reason.txt"
#: A rank's stack dumps (:mod:`isaaclab_mgpu.contract.stacks`), beside its error file.
STACK_FILE = "stack.txt"
#: The launcher's own error file in an attempt's log folder: its root cause's, with ``errorCode``.
LAUNCHER_ERROR_FILE = "launcher_error.json"
_ATTEMPT = "attempt_"
#: A rank's log folder is ``rank_<global rank>``.
RANK_PREFIX = "rank_"
#: Lines of a traceback kept for the console.
TRACEBACK_LINES = 15


def attempt_log_dir(root: str, run_name: str, launch: str, attempt: int) -> str:
    """``<root>/<run_name>/<launch>/attempt_<attempt>``: the ``--log_dir`` of one attempt's launcher."""
    return os.path.join(root, run_name, launch, f"{_ATTEMPT}{attempt}")


def launcher_error_file(log_dir: str | Path, owner: str = "") -> Path:
    """Where an attempt's launcher copies its root cause's error file (``owner``: mgpu's host and PID)."""
    name = f"{LAUNCHER_ERROR_FILE[: -len('.json')]}.{owner}.json" if owner else LAUNCHER_ERROR_FILE
    return Path(log_dir) / name


def rank_dir(attempt_dir: str | Path, rank: int) -> Path:
    """``<attempt_dir>/rank_<rank>``: the log folder of global rank ``rank``."""
    return Path(attempt_dir) / f"{RANK_PREFIX}{rank}"


def make_rank_dir(attempt_dir: str | Path, rank: int) -> Path:
    """Create ``rank``'s log folder in ``attempt_dir`` (this launch's own: nothing removed) and return it."""
    folder = rank_dir(attempt_dir, rank)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _rank_of(folder: Path) -> int | None:
    """The global rank a ``rank_<N>`` folder belongs to; None for any other folder."""
    number = folder.name.removeprefix(RANK_PREFIX)
    return int(number) if folder.name.startswith(RANK_PREFIX) and number.isdigit() else None


def attempt_dir_of(error_file: str | Path) -> Path | None:
    """The attempt folder of a rank's error file path (``<attempt_dir>/rank_<n>/error.json``), else None."""
    # Not the launcher's own: a rank shows the launcher's environment until it execs.
    path = Path(error_file)
    return path.parent.parent if _rank_of(path.parent) is not None else None


def beside_error_file(error_file: str | Path, name: str) -> Path:
    """The file ``name`` in the rank's own log folder (the folder of its error file)."""
    return Path(error_file).parent / name


def rank_dirs(attempt_dir: str | Path | None) -> dict[int, Path]:
    """Each global rank's log folder in ``attempt_dir``, by rank."""
    if attempt_dir is None:
        return {}
    try:
        found = {n: p for p in Path(attempt_dir).iterdir() if (n := _rank_of(p)) is not None and p.is_dir()}
    except OSError:
        return {}
    return dict(sorted(found.items()))


def tail(path: str | Path | None, lines: int = 8) -> str | None:
    """The last ``lines`` non-empty lines of a text file (a rank's ``stderr.log``), or None."""
    if path is None:
        return None
    try:
        text = Path(path).read_bytes()[-16384:].decode(errors="replace")
    except OSError:
        return None
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(kept) or None


@dataclass(frozen=True)
class ErrorRecord:
    """One ``@record`` error file, parsed."""

    path: Path
    """The file."""

    rank: int | None
    """The global rank whose folder holds it (None: a launcher's copy)."""

    message: str
    """The exception as one line (``ValueError: bad value``)."""

    traceback: str | None
    """The Python traceback (``py_callstack``), when recorded."""

    timestamp: float | None
    """When the rank recorded it (torch's ``timestamp``, whole seconds since the epoch)."""

    error_code: int | None
    """The rank's exit code, where a launcher added it to its copy (``errorCode``)."""

    mtime: float
    """The file's change time (seconds since the epoch)."""

    @property
    def when(self) -> float:
        """torch's timestamp, else the file's change time: the first-failure rule's key."""
        return self.timestamp if self.timestamp is not None else self.mtime

    def text(self, lines: int = TRACEBACK_LINES) -> str | None:
        """The last ``lines`` lines of the traceback, else the message; None when both are empty."""
        body = (self.traceback or self.message).rstrip()
        return "\n".join(body.splitlines()[-lines:]) or None

    def same_failure(self, other: ErrorRecord) -> bool:
        """True when ``other`` records the same exception at the same time (a launcher's copy)."""
        key = lambda r: (r.message, r.traceback, r.timestamp)  # noqa: E731
        return key(self) == key(other)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return float(value.strip())
    return None


def read_error_file(path: str | Path) -> ErrorRecord | None:
    """The error file at ``path``, or None when it is absent, unreadable or records nothing."""
    path = Path(path)
    try:
        mtime = path.stat().st_mtime
        data = json.loads(path.read_text(errors="replace").strip() or "null")
    except (OSError, ValueError):
        return None
    body = data.get("message") if isinstance(data, dict) else None
    traceback = stamp = code = None
    if isinstance(body, dict):
        message = body.get("message")
        extra = body.get("extraInfo") if isinstance(body.get("extraInfo"), dict) else {}
        traceback = extra.get("py_callstack") if isinstance(extra.get("py_callstack"), str) else None
        stamp = _number(extra.get("timestamp"))
        found = _number(body.get("errorCode"))
        code = int(found) if found is not None else None
    else:
        message = body
    if not isinstance(message, str):
        message = ""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    if not lines and not traceback:
        return None
    one_line = lines[-1].strip() if lines else traceback.strip().splitlines()[-1].strip()  # type: ignore[union-attr]
    return ErrorRecord(path, _rank_of(path.parent), one_line, traceback, stamp, code, mtime)


def error_files(root: str | Path | None) -> list[ErrorRecord]:
    """Every rank's error file under ``root`` (an attempt folder or any folder above one), parsed once."""
    if root is None:
        return []
    found = (read_error_file(p) for p in Path(root).rglob(ERROR_FILE) if _rank_of(p.parent) is not None)
    return [record for record in found if record is not None]


def first_error(records: Iterable[ErrorRecord]) -> ErrorRecord | None:
    """The first failure: the earliest :attr:`ErrorRecord.when`, the change time breaking ties."""
    return min(records, key=lambda r: (r.when, r.mtime), default=None)


def write_launcher_error(path: str | Path, root_cause: ErrorRecord, exit_code: int) -> None:
    """Copy ``root_cause``'s error file to ``path`` with ``errorCode``, as ``@record`` does; never raises."""
    try:
        data = json.loads(root_cause.path.read_text(errors="replace"))
        if isinstance(data, dict) and isinstance(data.get("message"), dict):
            data["message"]["errorCode"] = exit_code
        Path(path).write_text(json.dumps(data))
    except (OSError, ValueError):
        pass


def split_exitcode(code: int | None) -> tuple[int | None, str | None]:
    """torch elastic's code (negative: signal) → (exit code, signal name)."""
    if code is None or code >= 0:
        return code, None
    try:
        return None, signal.Signals(-code).name
    except ValueError:
        return None, f"signal {-code}"


def exit_status_code(exit_code: int | None, signal_name: str | None) -> int:
    """The shell-style code for a rank's end: its exit code, or 128+N for signal N; never 0."""
    if signal_name is not None:
        try:
            return 128 + int(signal.Signals[signal_name])
        except KeyError:
            digits = re.sub(r"\D", "", signal_name)
            return 128 + int(digits) if digits else 1
    return exit_code if exit_code else 1


# -- the launcher's failure report (torchrun's wording; jaxrun prints it through these) -----------

ROOT_CAUSE_HEADER = "Root Cause (first observed failure):"
_FAILED_LINE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"(-?\d+)\s*\(local_rank:\s*(\d+)\)")
_EXITCODE = re.compile(r"(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
_NO_FILE = "<N/A>"
_RULE = "=" * 60


@dataclass(frozen=True)
class RootCause:
    """A failure as the launcher's report tells it."""

    rank: int | None
    """Global rank, when the summary named it."""

    local_rank: int | None
    """Local rank on its node."""

    host: str | None
    """Host name from the summary."""

    exitcode: int | None
    """torch elastic's exit code: the rank's code, or -N for signal N."""

    pid: int | None
    """PID of the failed rank."""

    error_file: str | None
    """Path of the rank's ``@record`` error file, when the launcher named one."""


def failed_line_text(exitcode: int, local_rank: int, pid: int) -> str:
    """The launcher's log phrase for a failed worker, as torch elastic words it."""
    return f"failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid})"


def failed_line(line: str) -> tuple[int, int, int] | None:
    """``(exitcode, local_rank, pid)`` from a launcher's "failed (exitcode: …)" log line."""
    if line.startswith("["):  # a rank's own tee'd output, not the launcher's
        return None
    m = _FAILED_LINE.search(line)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def failure_summary(script: str, cause: RootCause, traceback: str | None, when: float | None = None) -> str:
    """The launcher's closing failure summary with one Root Cause entry, in torchrun's layout."""
    lines = (traceback or "no traceback: wrap the rank's main in torch elastic's @record").splitlines()
    stamp = time.strftime("%Y-%m-%d_%H:%M:%S", time.localtime(when))
    return "\n".join(
        [
            _RULE,
            f"{script} FAILED",
            "-" * 60,
            ROOT_CAUSE_HEADER,
            "[0]:",
            f"  time      : {stamp}",
            f"  host      : {cause.host}",
            f"  rank      : {cause.rank} (local_rank: {cause.local_rank})",
            f"  exitcode  : {cause.exitcode} (pid: {cause.pid})",
            f"  error_file: {cause.error_file or _NO_FILE}",
            f"  traceback : {lines[0]}",
            *(f"    {line}" for line in lines[1:]),
            _RULE,
        ]
    )


def parse_root_cause(lines: Iterable[str]) -> RootCause | None:
    """The root-cause entry of the launcher's last failure summary, or the first "failed" line."""
    lines = list(lines)
    start = max((i for i, line in enumerate(lines) if ROOT_CAUSE_HEADER in line), default=None)
    if start is None:
        first = next((f for f in map(failed_line, lines) if f is not None), None)
        if first is None:
            return None
        code, local, pid = first
        return RootCause(None, local, None, code, pid, None)
    fields: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if line.startswith("====="):
            break
        m = _FIELD.match(line)
        if m and m.group(1) not in fields:
            fields[m.group(1)] = m.group(2).strip()
    rank = local = code = pid = None
    if m := _RANK.match(fields.get("rank", "")):
        rank, local = int(m.group(1)), int(m.group(2))
    if m := _EXITCODE.match(fields.get("exitcode", "")):
        code = int(m.group(1))
        pid = int(m.group(2)) if m.group(2) else None
    error_file = fields.get("error_file")
    if not error_file or error_file.startswith("<"):
        error_file = None
    return RootCause(rank, local, fields.get("host") or None, code, pid, error_file)
