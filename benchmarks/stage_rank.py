"""One rank of ``benchmarks/stages.py``: the built-in worker with a timer around each stage of an iteration.

Run by torchrun (or mgpu's JAX launcher) in place of ``-m isaaclab_mgpu.worker``, with the worker's
arguments. Before the worker starts it wraps, with wall-clock timers and call counters:

- ``env``: the embedded task's ``VecTask.step``;
- ``act`` / ``record``: the library's policy step and its storage of a transition (rsl-rl
  ``PPO.act`` / ``process_env_step`` and its logger's ``process_env_step``; skrl ``PPO.act`` /
  ``record_transition``);
- ``update``: the library's PPO update, its collectives included, and inside it ``collectives``:
  ``torch.distributed.all_reduce`` / ``broadcast`` as the libraries reach them (gloo, or the
  shared-memory channel once installed), or skrl JAX's ``Model.reduce_parameters`` (which there
  also waits for the gradients JAX computes asynchronously);
- ``gather``: the worker's per-iteration all-gather of statistics (``Comm.gather``);
- ``checksum``, ``log`` (rank 0's curves), ``progress`` (``progress.beat``).

A snapshot of the accumulated times, the process's CPU time (user, system) and its context
switches is taken as each iteration starts and when training finishes; the rank writes them to
``$MGPU_BENCH_STAGES_OUT.rank<r>.json`` when it exits.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

TIMES: dict[str, float] = collections.defaultdict(float)
CALLS: collections.Counter[str] = collections.Counter()
SNAPSHOTS: list[dict[str, Any]] = []


def timed(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` by a version that adds its wall time to ``TIMES[label]``."""
    function = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            TIMES[label] += time.perf_counter() - start
            CALLS[label] += 1

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(owner, name, wrapper)


def snapshot(tag: str) -> None:
    """Record the totals so far (one per iteration start, one at the finish)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    SNAPSHOTS.append(
        {
            "tag": tag, "t": time.perf_counter(), "user": use.ru_utime, "system": use.ru_stime,
            "voluntary": use.ru_nvcsw, "involuntary": use.ru_nivcsw,
            "times": dict(TIMES), "calls": dict(CALLS),
        }
    )  # fmt: skip


def _after(owner: Any, name: str, then: Callable[[], None]) -> None:
    function = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        then()
        return result

    setattr(owner, name, wrapper)


def install(argv: list[str]) -> None:
    """Wrap the stages for the back-end ``argv`` asks for."""
    import torch.distributed as dist

    from isaaclab_mgpu.contract import progress
    from isaaclab_mgpu.rank.patches import gloo, skrl
    from isaaclab_mgpu.rank.tasks import base as tasks
    from isaaclab_mgpu.rank.worker import rank

    def wrap_collectives() -> None:
        for name in ("all_reduce", "broadcast"):
            current = getattr(dist, name)
            setattr(dist, name, getattr(current, "__wrapped__", current))
            timed(dist, name, "collectives")

    wrap_collectives()
    original_install = gloo.install

    def install_then_time(channel: Any) -> None:
        for name in ("all_reduce", "broadcast"):  # the channel's fallback is gloo itself, untimed
            setattr(dist, name, getattr(dist, name).__wrapped__)
        original_install(channel)
        wrap_collectives()

    gloo.install = install_then_time
    timed(tasks.VecTask, "step", "env")
    timed(rank.Comm, "gather", "gather")
    beat = progress.beat

    def beat_timed(stage: str, iteration: int | None = None) -> None:
        if stage == "rollout":
            snapshot(f"iteration {iteration}")
        elif stage == "finish":
            snapshot("finish")
        start = time.perf_counter()
        beat(stage, iteration)
        TIMES["progress"] += time.perf_counter() - start
        CALLS["progress"] += 1

    progress.beat = beat_timed
    library = argv[argv.index("--rl_library") + 1] if "--rl_library" in argv else "rsl_rl"
    framework = argv[argv.index("--ml_framework") + 1] if "--ml_framework" in argv else "torch"
    if library == "rsl_rl":
        import rsl_rl.algorithms.ppo as ppo
        from rsl_rl.utils import logger

        from isaaclab_mgpu.rank.backends import rsl_rl as backend

        timed(ppo.PPO, "update", "update")
        timed(ppo.PPO, "act", "act")
        timed(ppo.PPO, "process_env_step", "record")
        timed(logger.Logger, "process_env_step", "record")
        trainer = backend.RslRlTrainer
    elif framework == "jax":
        from isaaclab_mgpu.rank.backends import skrl_jax as backend

        def jax_stages() -> None:
            import skrl.agents.jax.ppo.ppo as ppo
            import skrl.models.jax.base as models

            if hasattr(ppo.PPO.update, "__wrapped__"):
                return
            timed(ppo.PPO, "update", "update")
            timed(ppo.PPO, "act", "act")
            timed(ppo.PPO, "record_transition", "record")
            timed(models.Model, "reduce_parameters", "collectives")

        _after(skrl, "patch_skrl_jax", jax_stages)
        backend.patch_skrl_jax = skrl.patch_skrl_jax
        trainer = backend.SkrlJaxTrainer
    else:
        from isaaclab_mgpu.rank.backends import skrl_torch as backend

        def torch_stages() -> None:  # skrl is imported by the trainer, after the process group
            import skrl.agents.torch.ppo.ppo as ppo

            if not hasattr(ppo.PPO.update, "__wrapped__"):
                timed(ppo.PPO, "update", "update")
                timed(ppo.PPO, "act", "act")
                timed(ppo.PPO, "record_transition", "record")

        _after(backend, "import_skrl", torch_stages)
        trainer = backend.SkrlTorchTrainer
    timed(trainer, "checksum", "checksum")
    timed(trainer, "log_iteration", "log")


def main() -> None:
    """Train one rank with the stage timers in place; write the snapshots."""
    argv = sys.argv[1:]
    install(argv)
    from isaaclab_mgpu.rank.worker.main import run_argv

    code = run_argv(argv)
    snapshot("end")
    rank = int(os.environ.get("RANK", os.environ.get("JAX_RANK", "0")))
    out = os.environ["MGPU_BENCH_STAGES_OUT"]
    with open(f"{out}.rank{rank}.json", "w") as f:
        json.dump({"rank": rank, "snapshots": SNAPSHOTS}, f)
    sys.exit(code)


if __name__ == "__main__":
    main()
