"""How long a rank waits in the libraries' collectives, for its progress report's busy/wait split.

:func:`install` wraps ``torch.distributed``'s ``all_reduce``, ``broadcast`` and
``broadcast_object_list`` (what rsl-rl 5.5 and skrl 2.1 torch call during an iteration) with two
clock reads each and hands the seconds to :func:`isaaclab_mgpu.contract.progress.waited`; skrl
JAX's collectives are timed where :mod:`.skrl` replaces them (fixes 3 and 5), the worker's own
all-gather in ``Comm.gather``. An NCCL call returns once queued, so on a GPU each call is bracketed
by two CUDA events on the current stream instead, read when the iteration ends
(:meth:`Reporter.on_iteration_end`), after the worker's all-gather has waited for them anyway.

Installed after :mod:`.gloo`'s shared-memory path, so that path is timed too; :func:`uninstall`
(from ``leave_torch_group``) puts back what it found. Idempotent.
"""

from __future__ import annotations

import time
from typing import Any

from isaaclab_mgpu.contract import progress

NAMES = ("all_reduce", "broadcast", "broadcast_object_list")
_saved: dict[str, Any] = {}


def install() -> None:
    """Time ``torch.distributed``'s all-reduce and broadcasts into this rank's progress report."""
    import torch
    import torch.distributed as dist

    if _saved and all(getattr(getattr(dist, n), "_mgpu_timed", False) for n in NAMES):
        return
    reporter = progress.reporter()
    gpu = torch.cuda.is_available()
    pending: list[tuple[Any, Any]] = []  # CUDA event pairs of this iteration's collectives

    def flush() -> float:
        # The iteration ended: its collectives' stream seconds.
        total = 0.0
        for start, end in pending:
            end.synchronize()
            total += start.elapsed_time(end) / 1000.0
        pending.clear()
        return total

    if gpu:
        reporter.on_iteration_end(flush)
    clock, waited = time.perf_counter, reporter.waited

    def timed(function: Any) -> Any:
        def collective(*args: Any, **kwargs: Any) -> Any:
            # torch.distributed.<name> as rsl-rl and skrl call it, with its wall time (CPU) or its
            # stream time (GPU, CUDA events) added to the rank's wait.
            tensor = args[0] if args else kwargs.get("tensor")
            if gpu and isinstance(tensor, torch.Tensor) and tensor.is_cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                pending.append((start, end))
                start.record()
                result = function(*args, **kwargs)
                end.record()
                return result
            t0 = clock()
            try:
                return function(*args, **kwargs)
            finally:
                waited(clock() - t0)

        collective._mgpu_timed = True  # type: ignore[attr-defined]
        collective.__wrapped__ = function  # type: ignore[attr-defined]
        return collective

    for name in NAMES:
        current = getattr(dist, name)
        if getattr(current, "_mgpu_timed", False):
            continue
        _saved.setdefault(name, current)
        setattr(dist, name, timed(current))


def uninstall() -> None:
    """Put back the functions :func:`install` wrapped (idempotent)."""
    import torch.distributed as dist

    for name, function in _saved.items():
        if getattr(getattr(dist, name), "_mgpu_timed", False):
            setattr(dist, name, function)
    _saved.clear()
