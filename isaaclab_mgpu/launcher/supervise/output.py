"""What the launcher says: its stdout passed on, its stderr mirrored and searched for failures.

The launcher's stdout is passed straight through (or, with ``SuperviseOptions.on_stdout``, handed
line by line to a live progress view). With ``SuperviseOptions.quiet_start`` the console keeps,
until rank 0's first iteration line, only the worker's own ``[mgpu`` lines (and drops torch
elastic's own log lines, ``W1203 … elastic/…``, from stderr); the per-rank logs keep every line.

Its stderr is read line by line to find failures (the ``failed (exitcode: N) local_rank: L`` line
and the "Root Cause" summary, parsed by :mod:`isaaclab_mgpu.contract.elastic`), and mirrored to the
console minus torch elastic's own Python traceback, minus its failure summary (the ``====`` block
with "Root Cause", which mgpu's own lines retell; shown with ``--debug``) and, once mgpu has asked
the launcher to stop, minus the launcher's own ``KeyboardInterrupt`` traceback (a Ctrl-C during its
start-up imports lands in the middle of ``import torch``). Daemon threads read both streams.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract.lines import ITERATION, MGPU_LINE

__all__ = ["LauncherOutput"]

#: A line of torch elastic's own logging (glog style: level, date, time, pid, its source file).
_ELASTIC_LOG = re.compile(r"^[IWE]\d{4} [\d:.]+ \d+ \S*torch/distributed/(elastic|run)")

_TRACEBACK_STARTS = (
    "Traceback (most recent call last):",
    "During handling of the above exception",
    "The above exception was the direct cause",
)


class LauncherOutput:
    """Reader threads of one launcher's output streams."""

    def __init__(
        self,
        console: bool,
        on_stdout: Callable[[bytes], None] | None,
        *,
        failure_summary: bool = False,
        quiet_start: bool = False,
    ) -> None:
        self.console = console
        self.on_stdout = on_stdout
        self.failure_summary = failure_summary
        """Mirror torch elastic's failure summary block too (``--debug``)."""
        self.quiet_start = quiet_start
        """Until rank 0's first iteration line, pass only the worker's ``[mgpu`` lines."""
        self.training = False
        """Rank 0's first iteration line has passed."""
        self.lines: collections.deque[str] = collections.deque(maxlen=500)
        """The launcher's last stderr lines that are not rank output (for the failure summary)."""
        self.failed: tuple[int, int, int] | None = None
        """The first ``failed (exitcode, local_rank, pid)`` line, once the launcher printed one."""
        self.stopped = False
        """Set by the supervisor when it asks the launcher to stop."""
        self._threads: list[threading.Thread] = []

    def stdout(self) -> int | None:
        """What the launcher's stdout should be: the console, a pipe to the view, or nothing."""
        if not self.console:
            return subprocess.DEVNULL
        return subprocess.PIPE if self.on_stdout is not None or self.quiet_start else None

    def start(self, proc: subprocess.Popen[bytes]) -> None:
        """Start reading ``proc``'s streams."""
        readers = [("stderr", self._read_stderr, proc.stderr)]
        if proc.stdout is not None:
            readers.append(("stdout", self._read_stdout, proc.stdout))
        for name, target, stream in readers:
            thread = threading.Thread(
                target=target, args=(stream,), name=f"mgpu-launcher-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float = 2.0) -> None:
        """Wait for both streams to end (the launcher and whoever holds its pipes are gone)."""
        for thread in self._threads:
            thread.join(timeout=timeout)

    def _read_stdout(self, stream: IO[bytes]) -> None:
        sink = self.on_stdout or _passed_on
        for raw in iter(stream.readline, b""):
            if self.quiet_start and not self.training:
                line = raw.decode(errors="replace")
                if not MGPU_LINE.match(line):
                    continue  # kept in the rank's stdout.log
                self.training = ITERATION.match(line) is not None
            try:
                sink(raw)
            except Exception:  # a display problem must never stop the supervision
                _passed_on(raw)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        out = getattr(sys.stderr, "buffer", None) if self.console else None
        held: list[bytes] = []
        rule: bytes | None = None  # a "=====" line held until the next shows whether a summary starts
        in_summary = False
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.startswith("["):
                self.lines.append(line)
                if self.failed is None:
                    self.failed = elastic.failed_line(line)
            if out is None:
                continue
            if self.quiet_start and _ELASTIC_LOG.match(line):
                continue
            if not self.failure_summary:
                if in_summary:
                    in_summary = not _is_rule(line)
                    continue
                if rule is not None:
                    if line.endswith(" FAILED"):
                        rule, in_summary = None, True
                        continue
                    out.write(rule)
                    rule = None
                if _is_rule(line):
                    rule = raw
                    continue
            if held:
                # Hold back a launcher traceback (and its chain) until its last line shows whose it is.
                held.append(raw)
                if line and not line[0].isspace() and not line.startswith(_TRACEBACK_STARTS):
                    own = line.startswith("torch.distributed.elastic.")
                    if not own and not (line == "KeyboardInterrupt" and self.stopped):
                        out.write(b"".join(held))
                    held = []
                    out.flush()
                continue
            if line.startswith(_TRACEBACK_STARTS):
                held = [raw]
                continue
            out.write(raw)
            out.flush()
        if out is not None and (held or rule):
            out.write(b"".join(held) + (rule or b""))
            out.flush()


def _passed_on(raw: bytes) -> None:
    sys.stdout.buffer.write(raw)
    sys.stdout.flush()


def _is_rule(line: str) -> bool:
    """A ``=====`` line: torch elastic's failure summary starts and ends with one."""
    return len(line) >= 20 and set(line) == {"="}
