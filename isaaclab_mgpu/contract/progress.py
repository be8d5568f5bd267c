"""Progress reports from a training rank to the ``mgpu`` supervisor of its node: one call per stage.

``mgpu train`` watches every rank for stalls (``--stall_timeout``, ``--startup_timeout``; see
``docs/hang-triage.md``). A rank tells it where it is with one cheap call::

    from isaaclab_mgpu import progress

    for it in range(iterations):
        progress.iteration(it + 1)      # once per iteration: that is all a training loop needs
        ...

The first iteration a process runs counts as start-up (``"warmup": true`` in the report): it
holds just-in-time compilation and first allocations. Finer stages name *where* a rank stalled:
``progress.beat("update")`` (the iteration number is kept from the last call); the built-in
worker's are :data:`STARTUP_STAGES`, :data:`ITERATION_STAGES`, ``finish`` and :data:`DONE`, and
any other name is a training stage too. A library callback can hold a :class:`Reporter`.

The channel is a file per rank, ``<MGPU_PROGRESS_DIR>/progress.<rank>.json`` (one :class:`Report`,
padded with spaces), overwritten in place by one ``pwrite`` per call, in a folder on the node;
nothing travels through the communicator that may be hung. Outside ``mgpu train`` (no
``MGPU_PROGRESS_DIR``) every call is a no-op. :class:`Channel` writes one rank's file,
:class:`Reports` reads a folder of them (the stall watch, ``mgpu probe-nccl``'s parent:
:mod:`.probe_channel`). Rank 0 also hands its account of the attempt (``summary.json``'s fields)
through the same folder, :data:`ACCOUNT` (:meth:`Reporter.account`).

Under ``mgpu`` the first :class:`Reporter` registers the stack-dump signal (:mod:`.stacks`; the
report names the stack file) and makes the rank survive SLURM's SIGUSR1: :func:`stop_requested`
turns True and the rank goes on (:mod:`.signals`).

:func:`process_group_timeout` is the second line of defence for programs that create their own
process group: ``init_process_group(..., timeout=progress.process_group_timeout(startup=True))``
makes a hung collective fail after mgpu's start-up bound plus :data:`MARGIN_S`, instead of NCCL's
10 or gloo's 30 minutes; :func:`after_startup` then shortens it to the stall bound plus the margin.

**Busy and wait time.** From a process's second iteration on, the report carries the totals of its
timed iterations' wall seconds (``wall_s``), of the seconds it waited in collectives (``wait_s``,
added by :func:`waited`: :mod:`isaaclab_mgpu.rank.patches.timing`) and of the rest (``busy_s``),
with the count of such iterations (``timed``) and of collectives; :data:`UNTIMED_STAGES` count in
none. The totals move as the next iteration begins. The others wait for the slowest rank in the
collectives, so the rank whose busy time stands above the others' is the straggler.

:data:`AUTO` is ``--stall_timeout auto`` (the default): the bound follows the run's steady
iterations (:data:`AUTO_FACTOR` times their median, at least :data:`AUTO_FLOOR_S`, at most
:func:`auto_cap`); a process group's timeout under it is the cap plus :data:`MARGIN_S`.

Standard library only: importing this module is cheap in any process.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from isaaclab_mgpu.contract import elastic, env, faults, files, records, stacks
from isaaclab_mgpu.contract.records import Count, NonNegative, Range
from isaaclab_mgpu.contract.signals import record_stop_requests, stop_requested
from isaaclab_mgpu.contract.summary import Drift, Summary

__all__ = [
    "ITERATION_STAGES",
    "STARTUP_STAGES",
    "Reporter",
    "after_startup",
    "auto_cap",
    "beat",
    "iteration",
    "process_group_timeout",
    "record_stop_requests",
    "stop_requested",
    "waited",
]

#: Seconds a process group's timeout adds to mgpu's bound, so mgpu's report comes first.
MARGIN_S = 60.0
#: ``--stall_timeout auto``: the bound follows the run's steady iteration times.
AUTO = "auto"
#: The auto bound is at least this many seconds...
AUTO_FLOOR_S = 30.0
#: ... and this many times the median steady iteration...
AUTO_FACTOR = 20.0
#: ... and at most :func:`auto_cap` (also the bound of a checkpoint save and the run's finish).
AUTO_CAP_S = 900.0

#: Start-up stages in order; a rank in one of them has not begun training.
STARTUP_STAGES = ("start", "init", "environment", "trainer", "broadcast")
#: Stages of one iteration in order (their order tells which rank lags behind another).
ITERATION_STAGES = ("iteration", "rollout", "update", "sync", "checkpoint")
#: The rank finished training and is exiting.
DONE = "done"
#: Rank 0's account of its attempt (``summary.json``'s fields), beside the progress files.
ACCOUNT = "account.json"
#: Stages whose seconds count as neither busy nor waiting (rank 0 alone saves).
UNTIMED_STAGES = ("checkpoint",)


def auto_cap(startup_timeout: float) -> float:
    """The most the auto stall bound can grow to: the start-up bound, at least :data:`AUTO_CAP_S`."""
    return max(startup_timeout, AUTO_CAP_S)


def progress_path(folder: str | Path, rank: int) -> Path:
    """Where rank ``rank`` reports its progress."""
    return Path(folder) / f"progress.{rank}.json"


def stack_path(folder: str | Path, rank: int) -> Path:
    """Where rank ``rank`` dumps its Python stack when it has no torchrun log folder (a probe rank's too)."""
    return Path(folder) / f"stack.{rank}.txt"


@dataclass(frozen=True)
class Report:
    """A rank's last progress report: one ``progress.<rank>.json``, as :class:`Channel` writes it."""

    rank: Count
    """Global rank."""

    local_rank: Count | None
    """Rank on its node."""

    pid: Annotated[int, Range(1)] | None
    """The rank's process id."""

    host: str | None
    """Host it runs on."""

    stage: str
    """The stage it entered last (``mgpu probe-nccl``'s: :data:`.probe_channel.STAGES`)."""

    iteration: int | None
    """The iteration of that stage, once training began."""

    time: float
    """When it entered the stage (epoch seconds)."""

    stack_file: str | None = None
    """Where the stack-dump signal makes it write its stack; None: no handler (never send it)."""

    warmup: bool = False
    """The stage belongs to the first iteration its process runs (counted as start-up)."""

    timed: Count | None = None
    """Steady iterations its busy/wait totals cover (see the module docstring)."""

    busy_s: NonNegative | None = None
    """Seconds it worked in those iterations (their wall time less its wait in collectives)."""

    wait_s: NonNegative | None = None
    """Seconds it waited in collectives in them."""

    wall_s: NonNegative | None = None
    """Their wall seconds (checkpoint saves left out)."""

    collectives: Count | None = None
    """Collectives it timed in them."""

    index: Count | None = None
    """``probe-nccl``'s collective stage: 0-based index of the message size."""

    size: Count | None = None
    """``probe-nccl``'s collective stage: message size in bytes."""

    mode: str | None = None
    """``probe-nccl``'s collective stage: ``out-of-place`` or ``in-place``."""

    phase: str | None = None
    """``probe-nccl``'s collective stage: ``warmup``, ``timed`` or ``check``."""

    drift: Drift | None = None
    """The first divergence between the ranks the drift check found (rank 0 reports it from then on)."""

    ended: str | None = None
    """How its training ended, as the rank judged it (``summary.json``'s status: ``finished``,
    ``stopped`` at a checkpoint request...); None: not said (a ``--script`` program)."""


def read_report(path: str | Path) -> Report | None:
    """The report in ``path``; None when absent or half-written; ValueError when malformed (never judged)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None  # not written yet, or caught in the middle of a write: keep the last one
    return records.strict(Report, data)


class Reports:
    """The progress files in one folder, as last read: the supervisor's and ``probe-nccl``'s reader."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.last: dict[int, Report] = {}
        """Every rank's last report found (:meth:`read` updates it)."""
        self.account: dict[str, Any] | None = None
        """Rank 0's last account (:meth:`read_account` updates it); None: none yet."""
        self._account_at: int | None = None
        self._rejected: dict[str, str] = {}
        self._told: set[str] = set()

    def read(self) -> dict[int, Report]:
        """Every rank's last report (a half-written one keeps the last; :meth:`rejected` names bad ones)."""
        found = dict(self.last)
        for path in self.folder.glob("progress.*.json"):
            try:
                rep = read_report(path)
            except ValueError as exc:
                self._rejected.setdefault(str(path), str(exc))
                continue
            if rep is not None:
                found[rep.rank] = rep
        self.last = found
        return found

    def read_account(self) -> dict[str, Any] | None:
        """Rank 0's account, read again when its file changed (:meth:`Reporter.account`)."""
        path = self.folder / ACCOUNT
        try:
            at = path.stat().st_mtime_ns
            if at != self._account_at:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.account, self._account_at = (data if isinstance(data, dict) else None), at
        except (OSError, ValueError):
            pass  # none yet, or the folder is gone: keep the last one
        return self.account

    def rejected(self) -> list[tuple[str, str]]:
        """Malformed progress files not named before, each with what is wrong (each named once)."""
        new = [(path, why) for path, why in self._rejected.items() if path not in self._told]
        self._told.update(path for path, _ in new)
        return new


class Channel:
    """One rank's progress file: a :class:`Report` padded with spaces, overwritten by one ``pwrite``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        # pwrite: about 1 µs, where a write-and-rename costs 0.2 ms; the fixed members are encoded once.
        self._prefix = "{"
        self._size = 512

    def open(self) -> bool:
        """Create the file; False when its folder is gone (then every report is a no-op)."""
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError:
            return False
        return True

    def identify(self, rank: int, local_rank: int, stack_file: str | None) -> None:
        """Fix the members that never change (this process's pid and host with them)."""
        fixed = {
            "rank": rank,
            "local_rank": local_rank,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "stack_file": stack_file,
        }
        self._prefix = json.dumps(fixed)[:-1] + ", "
        self._size = max(512, len(self._prefix) + 160)

    def put(self, members: str) -> None:
        """Replace the report with the fixed members and ``members`` (JSON object members, as text)."""
        if self._fd is None:
            return
        record = f"{self._prefix}{members}}}".encode()
        if len(record) > self._size:
            self._size = len(record) + 64
        try:  # noqa: SIM105  (a try costs nothing here; contextlib.suppress costs a context manager)
            os.pwrite(self._fd, record.ljust(self._size), 0)
        except OSError:
            pass  # the reader's folder is gone (the run is ending): the rank goes on

    def report(self, stage: str, **members: Any) -> None:
        """Replace the report with ``stage``, ``members`` (:class:`Report`'s) and the time now."""
        self.put(json.dumps({"stage": stage, **members, "time": time.time()})[1:-1])


class Reporter:
    """This rank's progress channel; :func:`beat` and :func:`iteration` use one per process."""

    def __init__(self, environ: Any = None) -> None:
        values = os.environ if environ is None else environ
        folder = values.get(env.PROGRESS_DIR)
        self.rank = int(values.get("RANK", values.get("JAX_RANK", "0")) or 0)
        self.local_rank = int(values.get("LOCAL_RANK", values.get("JAX_LOCAL_RANK", "0")) or 0)
        self.path = progress_path(folder, self.rank) if folder else None
        self._error_file = values.get(env.ERROR_FILE)
        self._channel: Channel | None = None
        self._stack_path: str | None = None
        self._stages: dict[str, str] = {}
        self.iteration_number: int | None = None
        self._iterations = 0
        self._environ = values
        fault = faults.for_this_rank(values) if values.get(env.RUN_ID) else None
        # A drift perturbs the trainer's state: the worker meets that one itself.
        self._fault = fault if fault is not None and fault.kind != "drift" else None
        # Busy/wait accounting (see the module docstring): a few clock reads per iteration.
        self._stage: str | None = None
        self._stage_t = 0.0
        self._iter_t: float | None = None
        self._wait_it = 0.0
        self._untimed_it = 0.0
        self._calls_it = 0
        self._busy = self._wait = self._wall = 0.0
        self._timed = self._calls = 0
        self._timing = ""
        self._drift = ""
        self._ended = ""
        self._flushers: list[Any] = []
        if values.get(env.RUN_ID):
            record_stop_requests()
            # Under mgpu the stack handler is there even with the stall watch off: `mgpu stacks`.
            self._stack_path = self._open_stack_file()

    @property
    def enabled(self) -> bool:
        """True when a supervisor reads the reports."""
        return self.path is not None

    def beat(self, stage: str, iteration: int | None = None) -> None:
        """Report entering ``stage`` (of ``iteration``, else the last iteration given)."""
        if self.path is None or (self._channel is None and not self._start()):
            if self._fault is not None and iteration is not None:
                self.iteration_number = iteration
                self._meet_fault()
            return
        now = time.perf_counter()
        if self._stage in UNTIMED_STAGES:
            self._untimed_it += now - self._stage_t
        self._stage, self._stage_t = stage, now
        if iteration is not None and iteration != self.iteration_number:
            self.iteration_number = iteration
            self._iterations += 1
            self._close_iteration(now)
        text = self._stages.get(stage)
        if text is None:
            text = self._stages[stage] = json.dumps(stage)
        # Written by hand, not through json.dumps: this is the training loop's hot path. The
        # members are Report's (test_progress checks that every report reads whole).
        warm = "true" if self._iterations <= 1 else "false"
        self._channel.put(  # type: ignore[union-attr]
            f'"stage": {text}, "iteration": {self.iteration_number or "null"}, '
            f'"warmup": {warm}, {self._timing}{self._drift}{self._ended}"time": {time.time()!r}'
        )
        if self._fault is not None:
            self._meet_fault()  # after the report that names the iteration: the watch sees where

    def _meet_fault(self) -> None:
        """``--simulate_fault``: meet it once this rank reaches its iteration."""
        fault = self._fault
        if fault is not None and self.iteration_number == fault.iteration:
            self._fault = None
            faults.fire(fault, self._environ)

    def iteration(self, number: int) -> None:
        """Report that iteration ``number`` begins (the one call a training loop needs)."""
        self.beat("iteration", number)

    def waited(self, seconds: float) -> None:
        """Add ``seconds`` spent in one collective to this iteration's wait."""
        self._wait_it += seconds
        self._calls_it += 1

    def drift(self, found: Drift) -> None:
        """Carry ``found`` in every report from the next one on (the supervisor names it once)."""
        self._drift = f'"drift": {json.dumps(records.plain(found))}, '

    def ended(self, status: str) -> None:
        """Carry how this rank's training ended (``status``) in every report from the next one on."""
        self._ended = f'"ended": {json.dumps(status)}, '

    def account(self, account: Summary) -> None:
        """Rank 0: replace its account of the attempt (``account``'s set fields); a no-op elsewhere."""
        if self.path is None or self.rank != 0:
            return
        fields = {k: v for k, v in account.to_json().items() if v is not None}
        try:  # noqa: SIM105
            files.write_json(self.path.parent / ACCOUNT, fields)
        except OSError:
            pass  # the reader's folder is gone (the run is ending): the rank goes on

    def on_iteration_end(self, flush: Any) -> None:
        """Call ``flush()`` as each iteration ends: collective seconds measured late (CUDA events)."""
        self._flushers.append(flush)

    def _close_iteration(self, now: float) -> None:
        """The previous iteration ends at ``now``: add it to the totals unless it was the first."""
        for flush in self._flushers:
            self._wait_it += flush()
        if self._iter_t is not None and self._iterations > 2:  # the process's first is start-up
            wall = max(now - self._iter_t - self._untimed_it, 0.0)
            wait = min(self._wait_it, wall)
            self._wall += wall
            self._wait += wait
            self._busy += wall - wait
            self._timed += 1
            self._calls += self._calls_it
            self._timing = (
                f'"busy_s": {self._busy:.6f}, "wait_s": {self._wait:.6f}, "wall_s": {self._wall:.6f}, '
                f'"timed": {self._timed}, "collectives": {self._calls}, '
            )
        self._iter_t = now
        self._wait_it = self._untimed_it = 0.0
        self._calls_it = 0

    def totals(self) -> dict[str, float]:
        """This process's timed iterations so far, with their busy, wait and wall seconds and collectives."""
        return {
            "timed": self._timed,
            "busy_s": self._busy,
            "wait_s": self._wait,
            "wall_s": self._wall,
            "collectives": self._calls,
        }

    def _start(self) -> bool:
        channel = Channel(self.path)  # type: ignore[arg-type]
        if not channel.open():
            self.path = None  # no supervisor folder (any more): reports are off
            return False
        if self._stack_path is None:
            self._stack_path = self._open_stack_file()
        channel.identify(self.rank, self.local_rank, self._stack_path)
        self._channel = channel
        return True

    def _open_stack_file(self) -> str | None:
        if self._error_file:  # beside the rank's torchrun logs
            return stacks.register(elastic.beside_error_file(self._error_file, elastic.STACK_FILE))
        if self.path is None:
            return None
        return stacks.register(stack_path(self.path.parent, self.rank))


_reporter: Reporter | None = None


def reporter() -> Reporter:
    """This process's reporter (the one :func:`beat` and :func:`iteration` write through)."""
    global _reporter
    if _reporter is None:
        _reporter = Reporter()
    return _reporter


def beat(stage: str, iteration: int | None = None) -> None:
    """Tell this node's ``mgpu`` that this rank enters ``stage`` (no-op outside ``mgpu train``)."""
    reporter().beat(stage, iteration)


def iteration(number: int) -> None:
    """Tell this node's ``mgpu`` that iteration ``number`` begins: call it once per iteration."""
    reporter().iteration(number)


def waited(seconds: float) -> None:
    """Add ``seconds`` spent waiting in a collective to this rank's current iteration."""
    reporter().waited(seconds)


def _seconds(name: str, environ: Any) -> float:
    try:
        return max(0.0, float(environ.get(name, "0")))
    except ValueError:
        return 0.0


def process_group_timeout(*, startup: bool = False, environ: Any = None) -> timedelta | None:
    """mgpu's start-up or stall bound (``auto``: :func:`auto_cap`) plus :data:`MARGIN_S`; None: off."""
    values = environ if environ is not None else os.environ
    if not startup and values.get(env.STALL_TIMEOUT, "").strip() == AUTO:
        bound = auto_cap(_seconds(env.STARTUP_TIMEOUT, values))
    else:
        bound = _seconds(env.STARTUP_TIMEOUT if startup else env.STALL_TIMEOUT, values)
    return timedelta(seconds=bound + MARGIN_S) if bound > 0 else None


def after_startup(environ: Any = None) -> None:
    """Shorten the default process group's timeout to the stall bound once start-up is over."""
    timeout = process_group_timeout(environ=environ)
    if timeout is None:
        return
    # Not imported here (this package is standard library only): without torch.distributed loaded
    # no process group can exist.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        # torch 2.x: _set_pg_timeout is the one call that changes a live group's timeout
        # (gloo and NCCL back-ends alike); init_process_group only sets it once.
        setter = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
        if setter is not None:
            setter(timeout)
