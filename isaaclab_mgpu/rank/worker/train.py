"""One rank's training run: set up, iterate, checkpoint, report. Shared by the process entry point
and :func:`isaaclab_mgpu.train_in_process`.

Order of set-up: rank context (device, seed) → run folder → seeds → torch flags (rsl-rl) → process
group (torch back-ends) → environments → trainer (its constructor or ``sync`` broadcasts rank 0's
parameters) → optional resume → first checksum line. Then the loop: after each iteration every rank
contributes its episode statistics and its stop flag to one small all-gather, so the mean reward is
global and all ranks agree on stopping at the same iteration boundary (a rank stopping alone would
leave the others waiting in a collective). A SIGINT/SIGTERM handler only records the request.

Rank 0 writes ``model_<N>.pt`` every ``--save_interval`` iterations, at the end and when stopped,
then ``summary.json``; with ``--logger tensorboard`` (the default) it also writes the library's
TensorBoard event file every iteration, plus the worker's own scalars (:mod:`.metrics`). An
interrupted run returns 130 on every rank.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from isaaclab_mgpu.contract import progress
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, UsageError
from isaaclab_mgpu.contract.summary import Checksums, Rates, Steady, Summary
from isaaclab_mgpu.rank import localcomm
from isaaclab_mgpu.rank.worker import checkpoint, metrics
from isaaclab_mgpu.rank.worker.args import WorkerArgs
from isaaclab_mgpu.rank.worker.rank import (
    Comm,
    RankContext,
    checksum_words,
    close_local_channel,
    init_torch_group,
    leave_torch_group,
    open_local_channel,
    rank_context,
    rank_folder,
    run_folder,
    run_stamp,
    words_checksum,
)


class StopRequest:
    """Set by SIGINT/SIGTERM; read between iterations."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.signal = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Record SIGINT/SIGTERM while the block runs (main thread only); restore the old handlers."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    old = {s: signal.signal(s, request) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield request
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _make_env(args: WorkerArgs, num_envs: int | None, ctx: RankContext) -> Any:
    """The rank's embedded task (Isaac Lab tasks take :mod:`isaaclab_mgpu.isaac` instead)."""
    from isaaclab_mgpu.rank import backends, tasks

    n = num_envs or backends.DEFAULTS.get(args.task, backends.FALLBACK).num_envs
    try:
        return tasks.make(args.task, n, ctx.device, ctx.seed, args.overrides_for("env"))
    except ValueError as exc:
        raise UsageError(f"{exc}; Isaac Lab task ids start with Isaac-") from None


class TrainingConsole(Protocol):
    """What a rank tells people (``report.training.TrainingConsole`` implements it)."""

    def note(self, message: str) -> None: ...

    def synced(self, when: str, checksum: str) -> None: ...

    def start(self, description: str, first: int, total: int) -> None: ...

    def iteration(
        self, it: int, total: int, reward: float | None, steps_per_s: float, seconds: float
    ) -> None: ...

    def stop(self) -> None: ...

    def checkpoint(self, path: str) -> None: ...

    def summary(self, s: dict[str, Any], path: str) -> None: ...


def run(
    args: WorkerArgs,
    console_for: Callable[[int], TrainingConsole],
    environ: Mapping[str, str] | None = None,
) -> int:
    """Train one rank as ``args`` asks, telling ``console_for(rank)``; return its exit code (0, or 130)."""
    from isaaclab_mgpu.rank.worker.args import is_isaac_task

    if is_isaac_task(args.task):  # Isaac Lab's own training code path (isaaclab_mgpu.isaac)
        from isaaclab_mgpu.rank.isaac import run as run_isaac

        return run_isaac(args, environ)
    import torch

    from isaaclab_mgpu.rank import backends

    env_vars = os.environ if environ is None else environ
    cuda = torch.cuda.is_available()
    ctx = rank_context(args, env_vars, cuda)
    if ctx.is_cuda and not cuda:
        raise UsageError(f"--device {args.device or 'cuda'}: no CUDA device here; use --device cpu")
    console = console_for(ctx.rank)
    run_dir = run_folder(args, run_stamp(env_vars))
    my_dir = rank_folder(run_dir, ctx.rank)
    my_dir.mkdir(parents=True, exist_ok=True)
    if ctx.rank == 0:
        _begin_summary(args, ctx, run_dir)

    defaults = backends.DEFAULTS.get(args.task, backends.FALLBACK)
    try:
        ppo = backends.settings_with(defaults.ppo, args.overrides_for("agent"))
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    _seed(ctx.seed)
    if args.rl_library == "rsl_rl":
        from isaaclab_mgpu.rank.backends.rsl_rl import set_torch_flags

        set_torch_flags()
    jax = args.rl_library == "skrl" and args.ml_framework == "jax"
    progress.beat("init")
    own_group = ctx.distributed and not jax and init_torch_group(ctx)
    with contextlib.ExitStack() as cleanup:  # closes the trainer's writers however _train ends
        code = _train(args, ctx, run_dir, my_dir, ppo, console, cleanup)
    if own_group:  # only after a clean finish: a failed rank must not wait in a barrier
        leave_torch_group()
    progress.beat(progress.DONE)
    return code


def _train(
    args: WorkerArgs,
    ctx: RankContext,
    run_dir: Path,
    my_dir: Path,
    ppo: Any,
    console: TrainingConsole,
    cleanup: contextlib.ExitStack,
) -> int:
    from isaaclab_mgpu.rank import backends

    defaults = backends.DEFAULTS.get(args.task, backends.FALLBACK)
    progress.beat("environment")
    env = _make_env(args, args.num_envs, ctx)
    num_envs = int(env.num_envs)
    iterations = args.max_iterations or defaults.max_iterations
    # skrl JAX joins its distributed runtime here (skrl's import calls jax.distributed.initialize).
    progress.beat("trainer")
    trainer = backends.create(args.rl_library, args.ml_framework, env, ppo, ctx, str(my_dir), args.logger)
    cleanup.callback(trainer.close)  # flush the training curves however the run ends
    if trainer.comm_kind == "jax":  # JAX's runtime is up now; torch ranks opened theirs with the group
        open_local_channel(ctx, "jax")
        cleanup.callback(close_local_channel)
    comm = Comm(ctx, trainer.comm_kind)
    if ctx.rank == 0 and localcomm.current() is not None:
        console.note(localcomm.NOTE)

    start = 0
    resumed_from = None
    if args.resume is not None:
        path = checkpoint.find(args.resume, run_dir.parent, run_dir)
        data = checkpoint.load(path)
        if (data["library"], data["framework"], data["task"]) != (
            args.rl_library,
            args.ml_framework,
            args.task,
        ):
            raise UsageError(
                f"--resume {path}: written by {data['library']}/{data['framework']} on {data['task']}, "
                f"not {args.rl_library}/{args.ml_framework} on {args.task}"
            )
        trainer.load_state_dict(data["state"])
        start, resumed_from = int(data["iteration"]), str(path)
        console.note(f"resumed from {path} at iteration {start}")
    progress.beat("broadcast")
    trainer.sync()
    start_sums = _gather_checksums(comm, trainer.checksum(), console, "after initial broadcast")
    progress.after_startup()

    total = start + iterations
    rewards: list[float | None] = []
    done = start
    last_saved: Path | None = None
    interrupted = False
    steps_local = 0
    iteration_s: list[float] = []  # rank 0's wall seconds of each iteration, for the steady pace
    refresh_at = time.monotonic() + summaries.REFRESH_S
    with stop_on_signals() as stop:
        console.start(f"{args.rl_library}/{args.ml_framework} on {args.task}", start, total)
        t0 = time.perf_counter()
        for it in range(start, total):
            t_it = time.perf_counter()
            progress.beat("rollout", it + 1)  # the back-end reports "update" itself
            trainer.iterate()
            steps_local += trainer.steps_per_iteration
            stats = env.pop_stats() if hasattr(env, "pop_stats") else None
            own_rate = trainer.steps_per_iteration / max(time.perf_counter() - t_it, 1e-9)
            row = metrics.row(stop.signal is not None, stats, own_rate, trainer.checksum())
            progress.beat("sync")
            m = metrics.summarize(comm.gather(row if comm.kind != "jax" else row.astype(np.float32)))
            done = it + 1
            rewards.append(m.mean_reward)
            seconds = time.perf_counter() - t_it
            iteration_s.append(seconds)
            rate = trainer.steps_per_iteration * ctx.world_size / seconds
            console.iteration(done, total, m.mean_reward, rate, seconds)
            warm = len(iteration_s) <= summaries.WARMUP_ITERATIONS
            trainer.log_iteration(it, start, total, metrics.scalars(m, rate, seconds, warmup=warm))
            if m.stop:
                interrupted = True
                break
            if ctx.rank == 0 and args.save_interval and done % args.save_interval == 0:
                progress.beat("checkpoint")
                last_saved = _save(trainer, args, run_dir, done, console)
            if ctx.rank == 0 and time.monotonic() >= refresh_at:
                refresh_at = time.monotonic() + summaries.REFRESH_S
                pace = summaries.steady_pace(iteration_s, trainer.steps_per_iteration * ctx.world_size)
                _refresh_summary(run_dir, start, done, rewards, time.perf_counter() - t0, pace)
        train_time = time.perf_counter() - t0
        console.stop()

    progress.beat("finish")
    end_sums = _gather_checksums(comm, trainer.checksum(), console, "at the end")
    rates = comm.gather(np.array([steps_local / train_time if train_time > 0 else 0.0], dtype=np.float32))
    if ctx.rank == 0 and (last_saved is None or last_saved.name != f"model_{done}.pt"):
        progress.beat("checkpoint")
        last_saved = _save(trainer, args, run_dir, done, console)
    code = EXIT_INTERRUPTED if interrupted else 0
    if ctx.rank == 0:
        measured = [r for r in rewards if r is not None]
        final = (summaries.read(run_dir) or Summary()).replace(
            status="interrupted" if interrupted else "finished",
            world_size=ctx.world_size,
            backend=args.rl_library,
            framework=args.ml_framework,
            device="cuda" if ctx.is_cuda else "cpu",
            task=args.task,
            num_envs_per_rank=num_envs,
            seed=args.seed,
            logger=args.logger,
            start_iteration=start,
            end_iteration=done,
            iterations=done - start,
            train_time_s=round(train_time, 4),
            s_per_iteration=round(train_time / max(done - start, 1), 4),
            env_steps_per_s=Rates(
                total=float(rates[:, 0].sum()), per_rank=tuple(float(v) for v in rates[:, 0])
            ),
            steady=summaries.steady_pace(iteration_s, trainer.steps_per_iteration * ctx.world_size),
            first_mean_reward=measured[0] if measured else None,
            last_mean_reward=measured[-1] if measured else None,
            mean_rewards=tuple(rewards),
            checksums=Checksums(start=tuple(start_sums), end=tuple(end_sums)),
            checksums_equal=len(set(start_sums)) == 1 and len(set(end_sums)) == 1,
            checkpoint=str(last_saved) if last_saved else None,
            resumed_from=resumed_from,
            run_dir=str(run_dir),
            interrupted=interrupted,
            exit_status=code,
        )
        path = summaries.write(run_dir, final)
        console.summary(final.to_json(), str(path))
    return code


def _gather_checksums(comm: Comm, digest: str, console: TrainingConsole, when: str) -> list[str]:
    console.synced(when, digest)
    words = comm.gather(checksum_words(digest))
    sums = [words_checksum(row) for row in words]
    if len(set(sums)) > 1:
        console.note(f"warning: parameter checksums differ across ranks ({when}): {sums}")
    return sums


def _save(trainer: Any, args: WorkerArgs, run_dir: Path, iteration: int, console: TrainingConsole) -> Path:
    path = checkpoint.save(
        run_dir / f"model_{iteration}.pt",
        {
            "iteration": iteration,
            "library": args.rl_library,
            "framework": args.ml_framework,
            "task": args.task,
            "state": trainer.state_dict(),
        },
    )
    console.checkpoint(str(path))
    return path


def _begin_summary(args: WorkerArgs, ctx: RankContext, run_dir: Path) -> None:
    """A ``running`` summary from the start, so a run that dies is still listed."""
    summaries.write(
        run_dir,
        Summary(
            status="running",
            started_at=time.time(),
            world_size=ctx.world_size,
            backend=args.rl_library,
            framework=args.ml_framework,
            device="cuda" if ctx.is_cuda else "cpu",
            task=args.task,
            seed=args.seed,
            logger=args.logger,
            run_dir=str(run_dir),
        ),
    )


def _refresh_summary(
    run_dir: Path, start: int, done: int, rewards: list[float | None], seconds: float, pace: Steady
) -> None:
    """Progress so far, into the ``running`` summary."""
    measured = [r for r in rewards if r is not None]
    summaries.update(
        run_dir,
        start_iteration=start,
        end_iteration=done,
        iterations=done - start,
        s_per_iteration=round(seconds / max(done - start, 1), 4),
        steady=pace,
        first_mean_reward=measured[0] if measured else None,
        last_mean_reward=measured[-1] if measured else None,
        mean_rewards=tuple(rewards),
    )
