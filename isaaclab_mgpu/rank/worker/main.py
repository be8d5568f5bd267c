"""Entry points of the worker: the process main (``@record``) and the in-process API.

:func:`train_in_process` runs one rank in the calling process for tools and notebooks. It parses
``argv`` before touching any global state, then restores what a run changes (``sys.argv``, the
torch flags of the rsl-rl path, ``skrl.config.jax.backend``, the signal handlers, gloo's
collectives, :mod:`isaaclab_mgpu.rank.patches.gloo`) on success, on an exception and on
``SystemExit``. This is the command layer: it hands :mod:`.train` the rank's console,
:class:`isaaclab_mgpu.rank.console.TrainingConsole`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from isaaclab_mgpu.contract.errors import MgpuError
from isaaclab_mgpu.contract.worker_args import WorkerArgs
from isaaclab_mgpu.rank.worker.args import parse_args

_MISSING = object()


def run_argv(argv: list[str]) -> int:
    """Parse ``argv`` and train one rank; return the exit code (2 for bad input)."""
    args = parse_args(argv)
    return _run(args)


def _run(args: WorkerArgs) -> int:
    from isaaclab_mgpu.rank.console import TrainingConsole, worker_error
    from isaaclab_mgpu.rank.worker.train import run

    try:
        return run(args, TrainingConsole)
    except MgpuError as exc:
        worker_error(str(exc))
        return exc.exit_code


def main() -> None:
    """Process entry point (``python -m isaaclab_mgpu.worker``)."""
    args = parse_args(sys.argv[1:])  # bad input exits 2 before torch is even imported
    from isaaclab_mgpu.contract import progress
    from isaaclab_mgpu.rank.title import name_this_rank

    name_this_rank(f"isaaclab_mgpu.worker {args.rl_library}/{args.ml_framework} {args.task}")

    progress.beat("start")
    from torch.distributed.elastic.multiprocessing.errors import record

    if (args.device or "").startswith("cpu"):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU ranks must not grab a GPU through JAX
        from isaaclab_mgpu.rank.worker._warp import init_for_cpu

        init_for_cpu()  # before skrl or Isaac Lab initialise Warp, with a warning untrue on CPU ranks

    @record
    def _main() -> int:
        return _run(args)

    code = _main()
    if not args.distributed or args.ml_framework == "jax":  # JAX's own shutdown runs at exit
        raise SystemExit(code)
    _leave(code)


def _leave(code: int) -> None:
    """End a torch.distributed rank with ``code`` once its output is flushed, skipping teardown."""
    # The run's files are closed by now. In the C++ static destruction left, a gloo thread can still
    # be joinable: SIGABRT, and a finished run reported failed (1 in 10 on a loaded 2-core box).
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


@contextlib.contextmanager
def _scoped_state(argv: list[str]) -> Iterator[None]:
    from isaaclab_mgpu.rank.backends.base import TORCH_FLAGS, torch_flag

    saved_flags = [(obj, name, getattr(obj, name)) for obj, name in map(torch_flag, TORCH_FLAGS)]
    saved_argv = sys.argv
    skrl = sys.modules.get("skrl")
    skrl_before = getattr(skrl.config.jax, "backend", _MISSING) if skrl is not None else _MISSING
    sys.argv = ["isaaclab_mgpu.worker", *argv]
    try:
        yield
    finally:
        from isaaclab_mgpu.rank.worker.rank import close_local_channel

        close_local_channel()  # gloo's own collectives back, however the run ended
        sys.argv = saved_argv
        for obj, name, value in saved_flags:
            setattr(obj, name, value)
        if "skrl" in sys.modules:
            cfg = sys.modules["skrl"].config.jax
            if skrl_before is not _MISSING:
                cfg.backend = skrl_before
            elif hasattr(cfg, "backend"):
                del cfg.backend


def train_in_process(argv: list[str]) -> int:
    """Run one rank's training in this process; return its exit code, global state restored."""
    try:
        args = parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    with _scoped_state(list(argv)):
        try:
            return _run(args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
