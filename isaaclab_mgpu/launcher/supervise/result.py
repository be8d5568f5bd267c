"""How a supervised run ended: :class:`RunResult`, the first failed rank, and the exit code.

torchrun always exits 1 when a worker fails, so :func:`first_failure` asks, in this order, what
torch elastic left (:mod:`isaaclab_mgpu.contract.elastic` knows every file and format):

1. the launcher's own error file: its copy of the root cause's ``@record`` file with the rank's
   exit code (``errorCode``), matched to the rank folder that holds the original;
2. else the launcher's report on its stderr (the "Root Cause" entry, or the first "failed
   (exitcode: …)" line): the only record of a rank killed by a signal, which leaves no file;
3. else the earliest of the ranks' error files (torch's timestamp, else the file's time).

The traceback then comes from that rank's error file, even when its console output was filtered,
else the tail of its ``stderr.log``; its one-line reason from its ``reason.txt``. Exit codes are
listed in :mod:`isaaclab_mgpu.contract.errors`; :func:`exit_code` is where they are chosen.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract import elastic, reasons
from isaaclab_mgpu.contract.errors import EXIT_HANG, EXIT_INTERRUPTED, EXIT_KILLED_AFTER_GRACE
from isaaclab_mgpu.contract.summary import Drift, Straggler
from isaaclab_mgpu.launcher.supervise.stall import Stall

__all__ = ["RankFailure", "RunResult", "exit_code", "first_failure"]


@dataclass(frozen=True)
class RankFailure:
    """The first rank that failed, as far as the launcher and the rank's files tell."""

    rank: int | None
    """Global rank."""

    local_rank: int | None
    """Rank on its node."""

    host: str | None
    """Host the rank ran on."""

    exit_code: int | None
    """The rank's exit code, when it exited."""

    signal: str | None
    """Name of the signal that killed it (e.g. ``SIGSEGV``), when it was killed."""

    traceback: str | None
    """Tail of the traceback in the rank's ``@record`` error file, if any."""

    stderr_tail: str | None = None
    """Last lines of the rank's stderr log, when there is no error file."""

    log_path: str | None = None
    """The rank's log folder (``stdout.log``, ``stderr.log``, ``error.json``)."""

    reason: str | None = None
    """The one line the rank gave for ending (its own error; :mod:`isaaclab_mgpu.contract.reasons`)."""

    def why(self) -> str | None:
        """The rank's own reason, else the last line of its traceback (``ValueError: ...``)."""
        if self.reason:
            return self.reason
        lines = [ln.strip() for ln in (self.traceback or "").splitlines() if ln.strip()]
        return lines[-1] if lines else None

    @property
    def code(self) -> int:
        """The shell-style code of this failure: the exit code, or 128+N for signal N."""
        return elastic.exit_status_code(self.exit_code, self.signal)


@dataclass(frozen=True)
class RunResult:
    """How a supervised run ended."""

    exit_code: int
    """What ``mgpu`` exits with (see :mod:`isaaclab_mgpu.contract.errors`)."""

    interrupted: bool
    """A stop was requested (a signal, :meth:`Supervisor.stop` or ``kill``, a hang)."""

    killed_after_grace: bool
    """Some process of the tree had to be SIGKILLed after the grace period."""

    failure: RankFailure | None
    """The first failed rank, when a rank failed."""

    log_dir: str | None
    """This attempt's log folder, holding its ``rank_<global rank>`` folders (:mod:`.contract.elastic`)."""

    survivors: tuple[int, ...]
    """PIDs of the tree still alive at the end; empty unless a process could not be killed."""

    stall: Stall | None = None
    """The stall watch's verdict when the run was stopped as hung."""

    elsewhere: str | None = None
    """A rank failed on a broken connection: what the other nodes' mgpu published (:mod:`..peers`)."""

    stragglers: tuple[Straggler, ...] = ()
    """Ranks the straggler watch named during the run (:mod:`.straggler`)."""

    drift: Drift | None = None
    """The first divergence between the ranks, from rank 0's progress report (the worker's drift check)."""

    ended: str | None = None
    """How this node's ranks said their training ended (:attr:`~.contract.progress.Report.ended`)."""

    lost_nodes: tuple[int, ...] = ()
    """Multi-node, a rank failed on a broken connection: the other nodes shown gone (what a shrink drops)."""

    node_hosts: tuple[tuple[int, str, int | None], ...] = ()
    """Multi-node: each other node's rank, host and liveness port (``--min_nodes``) as last published."""

    run_folder: str | None = None
    """Multi-node: the run folder node 0 published (node 0: its own), once known."""


def exit_code(
    rc: int, *, stall: Stall | None, interrupted: bool, killed_after_grace: bool, failure: RankFailure | None
) -> int:
    """What ``mgpu`` exits with, from the launcher's status ``rc`` and how the run was stopped."""
    if stall is not None:
        return EXIT_HANG
    if interrupted:
        return EXIT_KILLED_AFTER_GRACE if killed_after_grace else EXIT_INTERRUPTED
    if rc != 0:
        if failure is not None and (failure.exit_code or failure.signal):
            return failure.code
        return rc if rc > 0 else 128 - rc
    return 0


#: torchrun's words when its interpreter has no ``torchrun.logs_specs`` entry point of the name given.
_NO_LOGS_SPECS = "Could not find entrypoint under 'torchrun.logs_specs["


def missing_logs_specs(lines: Iterable[str], python: str) -> str | None:
    """What to tell the user when torchrun (run by ``python``) could not find mgpu's per-rank log layout."""
    if not any(_NO_LOGS_SPECS in line for line in lines):
        return None
    return (
        f"torchrun ({python}) cannot find mgpu's per-rank log layout: the entry point "
        "torchrun.logs_specs 'mgpu' is registered by installing isaaclab-mgpu into that interpreter "
        "(pip install -e <isaaclab-mgpu checkout>, or pip install isaaclab-mgpu); on PYTHONPATH alone "
        "it is not found"
    )


def first_failure(
    lines: Iterable[str],
    run_dir: str | None,
    ranks: Sequence[int],
    newest: Callable[[], str | None],
    launcher_file: str | None = None,
) -> tuple[RankFailure | None, str | None]:
    """The first failed rank, and the log folder as now known (``newest()``'s guess is not kept)."""
    # run_dir: the attempt's log folder when known, else the one the failure summary's error file
    # names, else newest(). ranks: this node's global ranks by local rank (empty: the first is 0);
    # the folder holds the ranks of every node sharing the file system.
    first_rank = ranks[0] if ranks else 0
    told = elastic.parse_root_cause(lines)
    if run_dir is None and told is not None and told.error_file:
        named = elastic.attempt_dir_of(told.error_file)
        run_dir = str(named) if named is not None else None
    known = run_dir
    run_dir = run_dir or newest()
    folders = elastic.rank_dirs(run_dir)
    mine = lambda r: r.rank is not None and (not ranks or r.rank in ranks)  # noqa: E731
    records = {r.path.parent: r for r in elastic.error_files(run_dir) if mine(r)}
    copy = elastic.read_error_file(launcher_file) if launcher_file else None
    cause = next((r for r in records.values() if copy is not None and r.same_failure(copy)), None)
    if cause is not None and cause.rank is not None:
        local, exitcode = cause.rank - first_rank, copy.error_code if copy is not None else None
        if exitcode is None and told is not None and told.local_rank == local:
            exitcode = told.exitcode
    elif told is not None:
        local, exitcode = told.local_rank, told.exitcode
    elif (cause := elastic.first_error(records.values())) is not None and cause.rank is not None:
        local, exitcode = cause.rank - first_rank, None
    else:
        return None, known
    same = told is not None and told.local_rank == local
    folder = folders.get(first_rank + local) if local is not None else None
    if told is not None and same and told.error_file:
        folder = Path(told.error_file).parent
    record = records.get(folder) if folder is not None else None
    if record is None and same and told is not None and told.error_file:
        record = elastic.read_error_file(told.error_file)
    code, sig = elastic.split_exitcode(exitcode)
    rank = told.rank if same and told is not None else None
    if rank is None and local is not None:
        rank = first_rank + local
    tb = record.text() if record is not None else None
    failure = RankFailure(
        rank=rank,
        local_rank=local,
        # torch's summary names the host by getfqdn (often "localhost"); the failed rank is one of
        # this node's, named as every other line of mgpu names it.
        host=socket.gethostname(),
        exit_code=code,
        signal=sig,
        traceback=tb,
        stderr_tail=None if tb else elastic.tail(folder / elastic.STDERR if folder else None),
        log_path=str(folder) if folder else None,
        reason=reasons.read(folder),
    )
    return failure, known
