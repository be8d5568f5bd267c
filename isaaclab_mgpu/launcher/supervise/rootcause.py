"""Finding the first failed rank from what the launcher printed and what the ranks left on disk.

torchrun exits 1 whatever happened to its workers, so a rank's real exit status has to be read
from somewhere else. Two honest sources, both written by torch elastic (and by our ``jaxrun`` in
the same format):

- the launcher's stderr: a ``failed (exitcode: N) local_rank: L (pid: P)`` log line as soon as a
  worker fails, and at the end a summary whose ``Root Cause (first observed failure):`` entry
  lists ``host``, ``rank : R (local_rank: L)``, ``exitcode : N (pid: P)`` (negative N: killed by
  signal -N), ``error_file`` and ``traceback``;
- the per-rank error file ``<run log dir>/attempt_<k>/<local_rank>/error.json`` that torch
  elastic's ``@record`` writes with the Python traceback of the failing rank.

Everything here is pure text/file parsing so it can be tested against captured real output.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT_CAUSE_HEADER = "Root Cause (first observed failure):"
_FAILED_LINE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"(-?\d+)\s*\(local_rank:\s*(\d+)\)")
_EXITCODE = re.compile(r"(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
TRACEBACK_LINES = 15


@dataclass(frozen=True)
class ParsedFailure:
    """A failure as the launcher reported it, before the error file is read."""

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


def failed_line(line: str) -> tuple[int, int, int] | None:
    """``(exitcode, local_rank, pid)`` from a launcher's "failed (exitcode: …)" log line."""
    if line.startswith("["):  # a rank's own tee'd output, not the launcher's
        return None
    m = _FAILED_LINE.search(line)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def parse_root_cause(lines: Iterable[str]) -> ParsedFailure | None:
    """The root-cause entry of the launcher's last failure summary, or the first "failed" line."""
    lines = list(lines)
    start = max((i for i, line in enumerate(lines) if ROOT_CAUSE_HEADER in line), default=None)
    if start is None:
        first = next((f for f in map(failed_line, lines) if f is not None), None)
        if first is None:
            return None
        code, local, pid = first
        return ParsedFailure(None, local, None, code, pid, None)
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
    return ParsedFailure(rank, local, fields.get("host") or None, code, pid, error_file)


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


def read_error_file(path: str | Path) -> str | None:
    """The tail of the traceback in a ``@record`` error file, or None if absent or unreadable."""
    try:
        data = json.loads(Path(path).read_text(errors="replace").strip() or "null")
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    text = None
    if isinstance(message, dict):
        extra = message.get("extraInfo") or {}
        text = extra.get("py_callstack") or message.get("message")
    elif isinstance(message, str):
        text = message
    if not text:
        return None
    return "\n".join(str(text).rstrip().splitlines()[-TRACEBACK_LINES:])


def rank_folder(run_dir: str | Path | None, local_rank: int | None) -> Path | None:
    """``<run dir>/attempt_<k>/<local_rank>`` of the latest attempt that has it."""
    if run_dir is None or local_rank is None:
        return None
    attempts = sorted(
        Path(run_dir).glob(f"attempt_*/{local_rank}"),
        key=lambda p: int(p.parent.name.split("_")[-1]) if p.parent.name.split("_")[-1].isdigit() else -1,
    )
    return attempts[-1] if attempts else None


def earliest_error_file(run_dir: str | Path | None) -> tuple[int, Path] | None:
    """``(local_rank, path)`` of the oldest error file under the run dir (first to fail)."""
    if run_dir is None:
        return None
    files = [p for p in Path(run_dir).glob("attempt_*/*/error.json") if p.parent.name.isdigit()]
    if not files:
        return None
    first = min(files, key=lambda p: p.stat().st_mtime)
    return int(first.parent.name), first


def tail(path: Path | None, lines: int = 8) -> str | None:
    """The last ``lines`` non-empty lines of a text file, or None."""
    if path is None:
        return None
    try:
        text = path.read_bytes()[-16384:].decode(errors="replace")
    except OSError:
        return None
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(kept) or None
