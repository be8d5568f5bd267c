"""One error hierarchy for mgpu, each class carrying the process exit code it maps to.

Every failure a user can cause or meet is an :class:`MgpuError`. The CLI entry point
(:func:`isaaclab_mgpu.cli.main`) is the single place that turns one into a line on stderr and an
exit status; nothing else prints errors or calls ``sys.exit``.

Exit codes (per command, in full: ``docs/commands.md``):

=====  ==============================================================
0      success
1      ``check-env`` or ``skills check`` found problems; ``probe-nccl``: a launch failed (error);
       ``runs --last``: no run found, or a folder name it cannot print
2      bad input: nothing was spawned
1, 3.. ``train``: a rank failed; the last failed rank's own exit code (see below)
3      ``probe-nccl``: an all-reduce gave a wrong result (and nothing hung)
4      a hang: ``train``'s stall watch (``--stall_timeout``, ``--startup_timeout``) stopped the
       tree; ``probe-nccl``: a launch hung past ``--timeout`` (the worst outcome of a sweep wins)
65     ``train``: the ranks drifted apart under ``--on_drift stop`` (:class:`Drifted`)
74     ``train``: a rank's file system is full, or the quota spent (:class:`DiskFull`)
75     ``train``: stopped at a checkpoint on the requeue signal, to be continued (:class:`Requeued`)
93     ``train``: a rank failed in a way no restart can mend (:class:`NotRestartable`)
124    ``train``: stopped, and some process had to be SIGKILLed after the grace period
128+N  ``train``: the last failed rank died of signal N (139: SIGSEGV, 134: SIGABRT)
130    interrupted (Ctrl-C, SIGTERM, SIGHUP); ``probe-nccl``: the running launch was torn down
=====  ==============================================================

65, 74 and 93 are never restarted.

**One rule for a rank's own code.** mgpu's verdicts keep the reserved codes
(:data:`RESERVED`: 2, 4, 65, 75, 93, 124, 130). A failed rank's code (its exit code, or 128+N for signal
N) passes through unless it equals one of them; then ``train`` exits 1 and the rank's own code is
kept in ``summary.json`` (``rank_exit_code`` of the failure) and in ``mgpu runs --json``
(:func:`passed_through`). With ``--max_restarts`` the run ends with the last failure's code.
A failure no restart can mend is never restarted and ends with 93 (:func:`failed_run_code`, the
one place that chooses between them), except a full disk, which keeps its 74
(:data:`EXIT_NO_SPACE`; it passes through).

124 is GNU ``timeout``'s "time ran out, the command was killed": no signal's 128+N, and unlike
137 (128+SIGKILL) it cannot be confused with a rank that was itself killed by SIGKILL (e.g. by the
kernel's OOM killer), which ``train`` reports as 137.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED_CHECK = 1
EXIT_USAGE = 2
#: probe-nccl: a launch failed to run (a rank crashed, init failed).
EXIT_PROBE_ERROR = 1
#: probe-nccl: an all-reduce returned wrong elements.
EXIT_PROBE_WRONG = 3
#: A hang: train's stall watch stopped the run; probe-nccl: a launch hung past --timeout.
EXIT_HANG = 4
EXIT_PROBE_HANG = EXIT_HANG
EXIT_INTERRUPTED = 130
EXIT_KILLED_AFTER_GRACE = 124
#: train: stopped at a checkpoint on the requeue signal, to be continued (sysexits' EX_TEMPFAIL).
EXIT_REQUEUE = 75
#: train: a rank's file system was full (or over quota) while it wrote; a rank's verdict, passed
#: through (not in :data:`RESERVED`), and never restarted (sysexits' EX_IOERR).
EXIT_NO_SPACE = 74
#: train: a rank failed in a way no restart can mend; do not restart or requeue. NVIDIA's
#: resiliency launcher (nvidia-resiliency-ext) exits 93 for the same meaning, so a job script's
#: "do not requeue on 93" rule serves both; no signal's 128+N, no sysexits code.
EXIT_NOT_RESTARTABLE = 93
#: train: the ranks drifted apart and stopped at a checkpoint (``--on_drift stop``; sysexits' EX_DATAERR).
EXIT_DRIFT = 65
#: Codes that are mgpu's own verdicts; a rank's code equal to one becomes 1 (:func:`passed_through`).
RESERVED = (
    EXIT_USAGE,
    EXIT_HANG,
    EXIT_DRIFT,
    EXIT_REQUEUE,
    EXIT_NOT_RESTARTABLE,
    EXIT_KILLED_AFTER_GRACE,
    EXIT_INTERRUPTED,
)


def passed_through(rank_code: int) -> int:
    """What ``train`` exits with for a failed rank's own ``rank_code``: itself, or 1 when reserved."""
    return 1 if rank_code in RESERVED or rank_code == 0 else rank_code


def failed_run_code(rank_code: int, mendable: bool) -> int:
    """What ``train`` exits with when its last attempt failed with ``rank_code`` (module docstring)."""
    if not mendable and rank_code != EXIT_NO_SPACE:
        return EXIT_NOT_RESTARTABLE
    return passed_through(rank_code)


class MgpuError(Exception):
    """Base of every mgpu error; ``exit_code`` is what the process exits with."""

    exit_code: int = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(MgpuError):
    """Bad input from the command line or environment; raised before anything is spawned."""

    exit_code = EXIT_USAGE


class EnvironmentProblem(UsageError):
    """The machine cannot run what was asked (no GPU, port taken); nothing was spawned."""


class WorkerFailure(MgpuError):
    """A rank failed; ``exit_code`` is that rank's code (or 128+signal)."""


class DiskFull(MgpuError):
    """A rank could not write a file: no space left on its file system, or the quota spent."""

    exit_code = EXIT_NO_SPACE


class NotRestartable(MgpuError):
    """A rank failed in a way no restart can mend (mgpu's verdict); a job script must not requeue it."""

    exit_code = EXIT_NOT_RESTARTABLE


class Hang(MgpuError):
    """The run made no progress within its bound and was stopped."""

    exit_code = EXIT_HANG


class Drifted(MgpuError):
    """The ranks drifted apart and stopped at a checkpoint (``--on_drift stop``)."""

    exit_code = EXIT_DRIFT


class Interrupted(MgpuError):
    """The run was stopped by a signal from the user."""

    exit_code = EXIT_INTERRUPTED


class Requeued(Interrupted):
    """The run stopped at a checkpoint on the requeue signal, to be continued (``--requeue``: requeued)."""

    exit_code = EXIT_REQUEUE
