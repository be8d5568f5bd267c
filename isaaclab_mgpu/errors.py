"""One error hierarchy for mgpu, each class carrying the process exit code it maps to.

Every failure a user can cause or meet is an :class:`MgpuError`. The CLI entry point
(:func:`isaaclab_mgpu.cli.main`) is the single place that turns one into a line on stderr and an
exit status; nothing else prints errors or calls ``sys.exit``.

Exit codes (also in ``docs/commands.md``):

=====  ==============================================================
0      success
1      ``check-env`` found a failing check; ``probe-nccl``: a launch failed (error)
2      bad input: nothing was spawned
3..    ``train``: a worker failed: the failing rank's own exit code
3      ``probe-nccl``: an all-reduce gave a wrong result (and nothing hung)
4      ``probe-nccl``: a launch hung (timed out); the worst outcome of a sweep wins
128+N  a rank died of signal N
130    interrupted (Ctrl-C / SIGTERM) and everything shut down in time
137    interrupted, and survivors had to be SIGKILLed after the grace period
=====  ==============================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED_CHECK = 1
EXIT_USAGE = 2
#: probe-nccl: a launch failed to run (a rank crashed, init failed).
EXIT_PROBE_ERROR = 1
#: probe-nccl: an all-reduce returned wrong elements.
EXIT_PROBE_WRONG = 3
#: probe-nccl: a launch hung past --timeout.
EXIT_PROBE_HANG = 4
EXIT_INTERRUPTED = 130
EXIT_KILLED_AFTER_GRACE = 137


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


class Interrupted(MgpuError):
    """The run was stopped by a signal from the user."""

    exit_code = EXIT_INTERRUPTED
