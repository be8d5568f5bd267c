"""Why an attempt failed, and whether a restart can mend it: one :class:`Verdict` per failed attempt.

mgpu restarts a failed attempt (``--max_restarts``) from the run's newest checkpoint. That helps a
transient fault (a killed rank, a broken connection, memory another process held for a while) and
never a deterministic one. :func:`classify` judges a failure from what mgpu already reads of it
(:class:`Failure`) and the verdict on the attempt before, into one of :data:`KINDS`. What each class
is, whether it is restarted and its fix: the table in docs/supervision.md ("Which failures are
restarted"). A failure with no message (a signal) is never judged ``deterministic``.

:func:`classify` is pure; :func:`oom_kills` and :func:`gpu_holders` are the two reads it is given,
both answering "none" where they cannot (no cgroup file, no GPU). :mod:`.attempts` restarts only on
:attr:`Verdict.restart`, and ``train`` exits 93
(:data:`~isaaclab_mgpu.contract.errors.EXIT_NOT_RESTARTABLE`) when no restart can mend the failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract.errors import EXIT_NO_SPACE, EXIT_USAGE

__all__ = [
    "KINDS",
    "PEER_GONE",
    "Failure",
    "Verdict",
    "classify",
    "exception_line",
    "gpu_holders",
    "is_cuda_oom",
    "oom_kills",
    "signature",
]

KINDS = ("deterministic", "cuda_oom", "host_oom", "disk_full", "transport", "config", "other")
#: What gloo and NCCL say when the peer's process went away (its node stopped or died).
PEER_GONE = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "remote process exited")
#: What gloo, NCCL and torch's c10d say when a collective's transport failed.
_TRANSPORT = (
    *PEER_GONE,
    "ncclRemoteError",
    "ncclSystemError",
    "NCCL communicator was aborted",
    "DistNetworkError",
    "Gloo connectFullMesh failed",
    "gloo::IoException",
    "[../third_party/gloo",
)
_CUDA_OOM = (
    "CUDA out of memory",
    "OutOfMemoryError",
    "CUDA error: out of memory",
    "RESOURCE_EXHAUSTED: Out of memory",
)
#: Exception types that, before the first iteration, say the configuration is wrong.
_CONFIG_ERRORS = frozenset(
    {"ValueError", "KeyError", "TypeError", "ConfigAttributeError", "ConfigKeyError", "ConfigTypeError",
     "ValidationError", "MissingMandatoryValue", "InstantiationException"}
)  # fmt: skip
#: A Python exception's last traceback line: ``[module.]NameError[: message]``.
_EXCEPTION = re.compile(r"^(?:\w+\.)*(?P<name>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::\s?.*)?$")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Longest reason line a verdict keeps.
_MAX_LINE = 300


@dataclass(frozen=True)
class Failure:
    """What mgpu read of one failed attempt: :func:`classify`'s input."""

    rank: int | None = None
    """The first failed rank, when known."""

    exit_code: int | None = None
    """Its exit code, when it exited (the launcher's, when no rank was named)."""

    signal: str | None = None
    """The signal that killed it (``SIGKILL``), when one did."""

    reason: str | None = None
    """The one line the rank gave for ending (:mod:`isaaclab_mgpu.contract.reasons`)."""

    exception: str | None = None
    """The last line of its traceback (``RuntimeError: CUDA out of memory. …``), when one was read."""

    text: str = ""
    """Its traceback or the tail of its stderr, searched for the known classes' words."""

    started_at: int | None = None
    """The iteration the attempt resumed from (0: the first); None when unknown (``--script``)."""

    reached: int | None = None
    """The iterations the run had completed when the attempt ended; None when unknown."""

    oom_kills: int = 0
    """Kills the cgroup's OOM killer recorded while the attempt ran (:func:`oom_kills`)."""

    gpu_holders: tuple[str, ...] = ()
    """Other processes holding GPU memory after the attempt (:func:`gpu_holders`), described."""

    @property
    def progressed(self) -> bool | None:
        """Whether the attempt completed an iteration of its own; None when unknown."""
        if self.reached is None or self.started_at is None:
            return None
        return self.reached > self.started_at


@dataclass(frozen=True)
class Verdict:
    """A failed attempt, judged: its class, whether a restart can mend it, and what to do."""

    kind: str
    """One of :data:`KINDS`."""

    restart: bool
    """A restart can mend it (restarts are spent on it while any are left)."""

    reason: str
    """The failure's one line: the rank's reason, else its exception, else how it ended."""

    cause: str
    """What happened, in one line."""

    fix: str | None = None
    """What to change, when mgpu knows; None when a restart is the remedy."""

    repeats: int | None = None
    """The attempt whose failure this one repeats (then it is not restarted), else None."""

    signature: str | None = None
    """The exception with numbers and addresses masked (:func:`signature`): what a repeat matches."""

    iteration: int | None = None
    """The iterations the run had completed when it failed; None when unknown."""

    progressed: bool | None = None
    """Whether the attempt completed an iteration of its own; None when unknown."""

    def why_not(self) -> str | None:
        """Why no restart follows, in one phrase; None when one may."""
        if self.restart:
            return None
        if self.repeats is not None and self.kind in ("cuda_oom", "host_oom"):
            return f"attempt {self.repeats} ran out of memory too: the run's own need, not another process's"
        if self.repeats is not None:
            if self.progressed is False:
                where = "before its first iteration, as there"
            elif self.iteration is not None:
                where = f"at the same iteration ({self.iteration})"
            else:
                where = "at a point mgpu cannot tell apart (this program reports no iterations)"
            return f"the same failure as attempt {self.repeats}, {where}: a restart would meet it again"
        return "a restart would meet it again"

    def text(self) -> str:
        """``kind: cause; fix: …`` and, when no restart follows, why."""
        fix = f"; fix: {self.fix}" if self.fix else ""
        why = self.why_not()
        return f"{self.kind}: {self.cause}{fix}" + (f"; not restarted: {why}" if why else "")


def signature(line: str | None) -> str | None:
    """``line`` with hex addresses, numbers and sizes masked, so failures differing only there match."""
    if not line or not line.strip():
        return None
    masked = _NUMBER.sub("#", _HEX.sub("<addr>", " ".join(line.split())))
    return re.sub(r"# ?(?:[KMGT]i?B|bytes)\b", "#", masked)


def exception_line(traceback: str | None, stderr_tail: str | None = None) -> str | None:
    """The exception a rank died of: the last such line of its traceback, else of its stderr's tail."""
    for text in (traceback, stderr_tail):
        for line in reversed((text or "").splitlines()):
            line = line.strip()
            if _EXCEPTION.match(line):
                return line[:_MAX_LINE]
    return None


def _type_of(line: str | None) -> str | None:
    m = _EXCEPTION.match(line.strip()) if line else None
    return m["name"] if m else None


def is_cuda_oom(text: str) -> bool:
    """True when ``text`` (a traceback, a reason) says the GPU ran out of memory."""
    return any(marker in text for marker in _CUDA_OOM)


#: What to change, by class (None: a restart is the remedy).
FIXES = {
    "disk_full": "free space on that file system (or move the log root), then continue with --resume",
    "config": "correct what the error names",
    "cuda_oom": "lower --num_envs (the environments of the ranks sharing a GPU fill its memory), or free "
    "the GPU of other processes (mgpu check-env lists them)",
    "host_oom": "lower --num_envs or the ranks per node (--nproc_per_node), or ask for more memory "
    "(SLURM --mem, a pod's memory limit)",
    "deterministic": "fix what the error names; a restart cannot",
}


def classify(failure: Failure, before: Verdict | None = None, before_number: int | None = None) -> Verdict:
    """The verdict on ``failure``, given the verdict ``before`` on attempt ``before_number``."""
    how = f"signal {failure.signal}" if failure.signal else f"exit code {failure.exit_code}"
    line = failure.reason or failure.exception
    sig = signature(line)
    text = " ".join(filter(None, (failure.reason, failure.exception, failure.text)))
    who = f"rank {failure.rank}" if failure.rank is not None else "a rank"
    earlier = before.kind if before is not None else None

    def verdict(kind: str, restart: bool, cause: str, repeats: int | None = None) -> Verdict:
        return Verdict(
            kind, restart, (line or how)[:_MAX_LINE], cause, FIXES.get(kind), repeats, sig,
            failure.reached, failure.progressed,
        )  # fmt: skip

    exited = failure.signal is None
    if exited and failure.exit_code == EXIT_NO_SPACE:
        cause = f"{who} could not write: its file system is full (or the quota spent)"
        return verdict("disk_full", False, cause)
    if exited and failure.exit_code == EXIT_USAGE:
        return verdict("config", False, f"{who} refused its input (exit 2)")
    if is_cuda_oom(text):
        holders = ", ".join(failure.gpu_holders)
        cause = f"{who} ran out of GPU memory" + (
            f"; other processes on the GPUs: {holders}" if holders else ""
        )
        again = earlier == "cuda_oom"  # the first may be another process's memory; the second is not
        return verdict("cuda_oom", not again, cause, before_number if again else None)
    if failure.signal == "SIGKILL" and failure.oom_kills > 0:
        again = earlier == "host_oom"
        cause = (
            f"{who} was SIGKILLed by the out-of-memory killer (its cgroup recorded {failure.oom_kills} OOM "
            "kill(s) during the attempt): the host ran out of memory"
        )
        return verdict("host_oom", not again, cause, before_number if again else None)
    if any(marker in text for marker in _TRANSPORT):
        cause = f"{who} lost its connection to another rank (a peer died or the network failed)"
        return verdict("transport", True, cause)
    if failure.progressed is False and _type_of(line) in _CONFIG_ERRORS:
        return verdict("config", False, f"{who} failed on its configuration before its first iteration")
    if before is not None and sig is not None and before.signature == sig and _same_place(failure, before):
        cause = f"{who} failed with the same error as attempt {before_number}"
        return verdict("deterministic", False, cause, before_number)
    return verdict("other", True, "of no known class: a restart may mend it")


def _same_place(failure: Failure, before: Verdict) -> bool:
    """At the same iteration (both unknown included), or before the first iteration of both attempts."""
    if failure.progressed is False and before.progressed is False:
        return True
    return failure.reached == before.iteration


# -- the reads classify is given (I/O: never raise) ------------------------------------------------


def oom_kills(proc: str | Path = "/proc/self/cgroup", root: str | Path = "/sys/fs/cgroup") -> int:
    """The OOM kills this process's memory cgroup recorded so far (cgroup v2 or v1); 0 where unreadable."""
    try:
        lines = Path(proc).read_text().splitlines()
    except OSError:
        return 0
    candidates: list[Path] = []
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        rel = path.strip().lstrip("/")
        if controllers == "":
            candidates += [Path(root) / rel / "memory.events", Path(root) / "unified" / rel / "memory.events"]
        elif "memory" in controllers.split(","):
            candidates.append(Path(root) / "memory" / rel / "memory.oom_control")
    # A container often sees its own cgroup mounted as the root: the root's file is the same one.
    candidates += [Path(root) / "memory.events", Path(root) / "memory" / "memory.oom_control"]
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for row in text.splitlines():
            key, _, value = row.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value.strip())
    return 0


def gpu_holders() -> tuple[str, ...]:
    """Every process holding GPU memory now, as ``PID NAME (N MiB, GPU i)``; empty without NVML."""
    from isaaclab_mgpu.launcher.nvml import gpu_facts

    found = []
    for gpu in gpu_facts().gpus:
        for p in gpu.processes:
            mib = f"{p.used_mib} MiB, " if p.used_mib is not None else ""
            found.append(f"{p.pid} {p.name or '?'} ({mib}GPU {gpu.index})")
    return tuple(found)
