"""One rank's training run: set up, resume, iterate, checkpoint, report. Shared by the process entry
point and :func:`isaaclab_mgpu.train_in_process`.

Order of set-up: rank context (device, seed) → run folder (the launcher's ``MGPU_RUN_DIR``) →
seeds → torch flags (rsl-rl) → process group (torch back-ends) → environments → trainer (its
constructor or ``sync`` broadcasts rank 0's parameters) → resume (:func:`_resume`) → first
checksum line. Then the loop (:func:`_loop`): after each iteration every rank puts its episode
statistics, its stop flags and, every ``--drift_interval`` iterations, its drift hashes
(:mod:`isaaclab_mgpu.rank.drift`) into one small all-gather (:mod:`.metrics`), so the mean reward
is global and all ranks stop at the same iteration boundary (a rank stopping alone would leave the
others waiting in a collective). Three requests stop the loop: SIGINT/SIGTERM
(:mod:`isaaclab_mgpu.contract.signals`; the run ends ``interrupted``, 130 on every rank), mgpu's
checkpoint request (:func:`isaaclab_mgpu.contract.resume.stop_at_checkpoint`; ``stopped``, 0 on
every rank, to be continued) and, under ``--on_drift stop``, a drift (``drifted``, 0 on every rank;
``mgpu train`` exits 65).

**Resume.** ``--max_iterations`` is the run's total. What to continue from comes from mgpu
(``MGPU_RESUME``: a checkpoint, or a run folder's newest one) or, run by hand, from ``--resume``.
Rank 0 alone reads the file; its bytes reach the other ranks over the process group
(:mod:`.checkpoint`). What a resume restores (the restart marked in the event file: one
TensorBoard curve) and what not: ``docs/training.md``, "Resume, restarts, requeue".

Rank 0 writes ``model_<N>.pt`` (and ``model_<N>.json``) every ``--save_interval`` iterations, at
the end and when stopped, and hands ``mgpu train`` its account of the attempt
(:meth:`~isaaclab_mgpu.contract.progress.Reporter.account`, at most ``summary.REFRESH_BUDGET`` of
the time), which node 0's mgpu folds into ``summary.json``; with a ``--logger`` (TensorBoard by
default) rank 0 writes the library's curves every iteration, plus the worker's own (:mod:`.metrics`).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_mgpu.contract import faults, progress, resume, signals
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import ATTEMPT, RESUME, RUN_DIR, RUN_ID
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, UsageError
from isaaclab_mgpu.contract.layout import SUMMARY, rank_folder
from isaaclab_mgpu.contract.settings import DEFAULTS, FALLBACK, PPOSettings, TaskDefaults, settings_with
from isaaclab_mgpu.contract.summary import Checksums, Rates, Summary
from isaaclab_mgpu.contract.worker_args import WorkerArgs, is_isaac_task
from isaaclab_mgpu.rank import drift, localcomm
from isaaclab_mgpu.rank.console import TrainingConsole
from isaaclab_mgpu.rank.worker import checkpoint, metrics, wandb_run
from isaaclab_mgpu.rank.worker.rank import (
    Comm,
    RankContext,
    close_local_channel,
    gather_floats,
    identity,
    init_torch_group,
    leave_torch_group,
    open_local_channel,
    rank_context,
    run_dir_of,
)


def run(
    args: WorkerArgs,
    console_for: Callable[[int], TrainingConsole],
    environ: Mapping[str, str] | None = None,
) -> int:
    """Train one rank as ``args`` asks, telling ``console_for(rank)``; return its exit code (0, or 130)."""
    if is_isaac_task(args.task):  # Isaac Lab's own training code path (isaaclab_mgpu.rank.isaac)
        from isaaclab_mgpu.rank.isaac import run as run_isaac

        return run_isaac(args, environ)
    import torch

    env_vars = os.environ if environ is None else environ
    ctx = rank_context(args, env_vars)
    console = console_for(ctx.rank)
    run_dir = run_dir_of(args, env_vars)
    my_dir = rank_folder(run_dir, ctx.rank)
    # A rank on another node than mgpu's node 0 has no run folder here, and needs none: only rank 0 writes.
    elsewhere = ATTEMPT in env_vars and RUN_DIR not in env_vars
    # A full disk met from here on (a checkpoint, the summary, a log): one line, exit 74.
    with checkpoint.disk_full_is_one_line(lambda: run_dir, lambda d: resume.newest_whole(d).checkpoint):
        if ctx.rank == 0 or not elsewhere:
            my_dir.mkdir(parents=True, exist_ok=True)
        # The W&B run: the one this run folder's summary records when the run continues (a restart,
        # a requeue, --resume), so its curves go on in the same W&B run; else a new one.
        earlier = (summaries.read(run_dir) if ctx.rank == 0 else None) or Summary()
        wandb_id = wandb_run.run_id(args.logger, ctx.rank, env_vars, earlier.wandb_run_id)
        defaults = DEFAULTS.get(args.task, FALLBACK)
        try:
            ppo = settings_with(defaults.ppo, args.overrides_for("agent"))
        except ValueError as exc:
            raise UsageError(str(exc)) from None

        random.seed(ctx.seed)
        np.random.seed(ctx.seed)
        torch.manual_seed(ctx.seed)
        if args.rl_library == "rsl_rl":
            from isaaclab_mgpu.rank.backends.rsl_rl import set_torch_flags

            set_torch_flags()
        jax = args.rl_library == "skrl" and args.ml_framework == "jax"
        progress.beat("init")
        own_group = ctx.distributed and not jax and init_torch_group(ctx)
        with contextlib.ExitStack() as cleanup:  # closes the trainer's writers however _train ends
            cleanup.enter_context(wandb_run.environment(wandb_id, resume=wandb_id == earlier.wandb_run_id))
            code = _train(args, ctx, run_dir, my_dir, defaults, ppo, console, cleanup, env_vars, wandb_id)
        if own_group:  # only after a clean finish: a failed rank must not wait in a barrier
            leave_torch_group()
        progress.beat(progress.DONE)
        return code


@dataclass
class _Loop:
    """What the iteration loop leaves behind."""

    start: int
    total: int
    done: int
    rewards: list[float | None] = field(default_factory=list)
    last_saved: Path | None = None
    status: str = "finished"
    """How the loop ended: ``finished``, ``interrupted`` (a stop signal), ``stopped`` (mgpu's checkpoint
    request) or ``drifted`` (``--on_drift stop``)."""
    train_time: float = 0.0
    steps_per_iteration: int = 0
    """Environment steps of one iteration, all ranks together (for the steady pace)."""
    iteration_s: list[float] = field(default_factory=list)
    """Rank 0's wall seconds of each iteration of this attempt, for the steady pace."""
    began: float = 0.0
    """When this attempt's loop began (seconds since the epoch): names its segment of the run."""
    who: dict[str, Any] = field(default_factory=dict)
    """What the attempt is (library, task, ranks…): the fields every account repeats."""


@dataclass(frozen=True)
class _Rank:
    """What stays fixed for one rank once its trainer is built: the resume, the loop and the saves read it."""

    args: WorkerArgs
    ctx: RankContext
    env: Any
    """The embedded task's environments."""
    trainer: Any
    """The back-end's :class:`isaaclab_mgpu.rank.backends.base.Trainer`."""
    comm: Comm
    run_dir: Path
    total: int
    """The run's total iterations (``--max_iterations``, else the task's default)."""
    console: TrainingConsole
    environ: Mapping[str, str]


def _train(
    args: WorkerArgs,
    ctx: RankContext,
    run_dir: Path,
    my_dir: Path,
    defaults: TaskDefaults,
    ppo: PPOSettings,
    console: TrainingConsole,
    cleanup: contextlib.ExitStack,
    environ: Mapping[str, str],
    wandb_id: str | None,
) -> int:
    from isaaclab_mgpu.rank import backends, tasks

    progress.beat("environment")
    try:  # an embedded task (Isaac Lab tasks took isaaclab_mgpu.rank.isaac)
        n = args.num_envs or defaults.num_envs
        env = tasks.make(args.task, n, ctx.device, ctx.seed, args.overrides_for("env"))
    except ValueError as exc:
        raise UsageError(f"{exc}; Isaac Lab task ids start with Isaac-") from None
    total = args.max_iterations or defaults.max_iterations
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

    r = _Rank(args, ctx, env, trainer, comm, run_dir, total, console, environ)
    start, resumed_from = _resume(r)
    who = {
        **identity(args, ctx, environ),
        "num_envs_per_rank": int(env.num_envs),
        "logger": args.logger,
        "wandb_run_id": wandb_id,
        "run_dir": str(run_dir),
        "resumed_from": resumed_from,
    }
    if ctx.rank == 0:  # from here the summary says where this attempt stands, not where the last one did
        _account(_Loop(start=start, total=total, done=start, who=who))
    progress.beat("broadcast")
    trainer.sync()
    start_sums = _gather_checksums(comm, trainer.checksum(), console, "after initial broadcast")
    progress.after_startup()

    # From the loop to the account, a stop signal is recorded, never fatal: a SLURM scancel reaches
    # every rank directly and torchrun signals it again, and the second must not kill rank 0
    # between the loop's stop and the checkpoint it saves at the stop.
    with signals.recording():
        loop = _loop(r, start, who)
        progress.reporter().ended(loop.status)  # every rank: another node's mgpu has no summary
        progress.beat("finish")
        end_sums = _gather_checksums(comm, trainer.checksum(), console, "at the end")
        steps_local = (loop.done - loop.start) * trainer.steps_per_iteration
        rate = steps_local / loop.train_time if loop.train_time > 0 else 0.0
        # Each rank's rate and its busy/wait totals (isaaclab_mgpu.progress), for the summary.
        t = progress.reporter().totals()
        mine = np.array([rate, t["timed"], t["busy_s"], t["wait_s"]], dtype=np.float32)
        rates = comm.gather(mine)
        if ctx.rank == 0 and (loop.last_saved is None or loop.last_saved.name != f"model_{loop.done}.pt"):
            progress.beat("checkpoint")
            loop.last_saved = _save(r, loop.done)
        code = EXIT_INTERRUPTED if loop.status == "interrupted" else 0
        if ctx.rank == 0:
            final = _account(
                loop,
                status=loop.status,
                train_time_s=round(loop.train_time, 4),
                env_steps_per_s=Rates(
                    total=float(rates[:, 0].sum()), per_rank=tuple(float(v) for v in rates[:, 0])
                ),
                checksums=Checksums(start=tuple(start_sums), end=tuple(end_sums)),
                checksums_equal=len(set(start_sums)) == 1 and len(set(end_sums)) == 1,
                timing=summaries.timing_of(rates[:, 1:4].tolist()),
                interrupted=code == EXIT_INTERRUPTED,
                exit_status=code,
            )
            # What node 0's mgpu folds into the run's summary.json, merged here the same way to tell it.
            given = [k for k, v in final.to_json().items() if v is not None]
            told = summaries.absorb(summaries.read(run_dir) or Summary(), final, given, loop.start)
            console.summary(told.to_json(), str(run_dir / SUMMARY))
        return code


def _resume(r: _Rank) -> tuple[int, str | None]:
    """Load rank 0's checkpoint on every rank, if any; return the start iteration and its path."""
    path, data, loaded = (
        _rank0_checkpoint(r.args, r.run_dir, r.environ, r.console) if r.ctx.rank == 0 else (None, b"", None)
    )
    if r.ctx.distributed:
        progress.beat("broadcast")
        data = r.comm.broadcast_bytes(data)
    if not data:
        return 0, None
    if loaded is None:
        loaded = checkpoint.load_bytes(data, path or "from rank 0")
    made_by = (loaded["library"], loaded["framework"], loaded["task"])
    if r.ctx.rank == 0 and made_by != (r.args.rl_library, r.args.ml_framework, r.args.task):
        # the launcher checked the metadata beside it; this is the file itself
        raise UsageError(
            f"--resume {path}: written by {loaded['library']}/{loaded['framework']} on {loaded['task']}, "
            f"not {r.args.rl_library}/{r.args.ml_framework} on {r.args.task}"
        )
    r.trainer.load_state_dict(loaded["state"])
    start = int(loaded["iteration"])
    r.trainer.resumed_at(start)
    saved_world = loaded.get("world_size")
    other = ""
    if saved_world not in (None, r.ctx.world_size):
        other = f" (saved by {saved_world} ranks, now {r.ctx.world_size})"
    r.console.note(f"resuming at iteration {start} of {r.total} from {path or 'rank 0'}{other}")
    return start, str(path) if path is not None else None


def _rank0_checkpoint(
    args: WorkerArgs, run_dir: Path, environ: Mapping[str, str], console: TrainingConsole
) -> tuple[Path | None, bytes, dict[str, Any] | None]:
    """Rank 0: the checkpoint to continue from, its bytes and content; (None, b"", None): none."""
    # A run folder's newest_whole pick passes over a file that does not load (one warning line); a
    # named file is taken as it is; one refused as unsafe is an error either way.
    given = environ.get(RESUME)
    if given is None and ATTEMPT in environ:
        return None, b"", None  # mgpu resolved --resume itself and found nothing to continue
    if given is None and args.resume is not None:
        given = str(checkpoint.find_latest(run_dir)) if args.resume == resume.LATEST else args.resume
    if not given:
        return None, b"", None
    path = Path(given)
    if not path.is_dir():
        if not path.is_file():
            raise UsageError(f"--resume {given}: no such run folder or checkpoint file")
        data = checkpoint.read(path)
        return path, data, checkpoint.load_bytes(data, path)
    read: dict[Path, tuple[bytes, dict[str, Any]]] = {}

    def loads(candidate: Path) -> str | None:
        try:
            data = checkpoint.read(candidate)
            read[candidate] = data, checkpoint.load_bytes(data, candidate)
        except checkpoint.TornCheckpoint as exc:
            return exc.why
        return None

    pick = resume.newest_whole(path, loads=loads)
    if (found := pick.taken()) is None:
        return None, b"", None
    if (warning := pick.warning()) is not None:
        console.note(warning)
    return found, *read[found]


def _loop(r: _Rank, start: int, who: dict[str, Any]) -> _Loop:
    """Iterate from ``start`` to ``total``, saving every ``--save_interval``, until done or asked to stop."""
    loop = _Loop(start=start, total=r.total, done=start, who=who)
    loop.steps_per_iteration = r.trainer.steps_per_iteration * r.ctx.world_size
    refreshed, refresh_cost = 0.0, 0.0
    check = drift.Check(r.args.drift_interval, agreed=start)
    fault = faults.for_this_rank(r.environ) if RUN_ID in r.environ else None
    fault = fault if fault is not None and fault.kind == "drift" else None
    with signals.recording() as stop:
        # A resumed run shows its last known mean reward until this segment's first episodes end.
        known = summaries.read(r.run_dir) if start and r.ctx.rank == 0 else None
        last = known.last_mean_reward if known is not None else None
        r.console.start(f"{r.args.rl_library}/{r.args.ml_framework} on {r.args.task}", start, r.total, last)
        t0, loop.began = time.perf_counter(), time.time()
        for it in range(start, r.total):
            t_it = time.perf_counter()
            progress.beat("rollout", it + 1)  # the back-end reports "update" itself
            if fault is not None and it + 1 == fault.iteration:  # --simulate_fault drift@IT
                faults.fire(fault, r.environ)
                r.trainer.drift_source().perturb()
                fault = None
            r.trainer.iterate()
            stats = r.env.pop_stats()
            own_rate = r.trainer.steps_per_iteration / max(time.perf_counter() - t_it, 1e-9)
            # A checkpoint request: mgpu's file, or SLURM's SIGUSR1 reaching this rank directly
            # (none counts in the last iteration: the run ends finished).
            asked = resume.stop_at_checkpoint(it + 1, r.total, r.environ)
            flags = (metrics.STOP if stop.signal is not None else 0) | (metrics.CHECKPOINT if asked else 0)
            checking = check.due(it + 1, r.ctx.world_size)
            hashed = drift.hashes(r.trainer.drift_source().components()) if checking else None
            mine = metrics.row(flags, stats, own_rate, r.trainer.checksum())
            row = np.concatenate([mine, drift.words(hashed)])
            progress.beat("sync")
            gathered = gather_floats(r.comm, row)
            m = metrics.summarize(gathered[:, : metrics.WIDTH])
            found = check.judge(gathered[:, metrics.WIDTH :], it + 1) if checking else None
            if found is not None and r.ctx.rank == 0:
                drift.tell(found, r.console.note)
            loop.done = it + 1
            loop.rewards.append(m.mean_reward)
            seconds = time.perf_counter() - t_it
            rate = loop.steps_per_iteration / seconds
            loop.iteration_s.append(seconds)
            r.console.iteration(loop.done, r.total, m.mean_reward, rate, seconds)
            warm = len(loop.iteration_s) <= summaries.WARMUP_ITERATIONS
            r.trainer.log_iteration(it, start, r.total, metrics.scalars(m, rate, seconds, warmup=warm))
            halt = found is not None and r.args.on_drift == "stop"
            if m.stop or m.checkpoint or halt:
                loop.status = "interrupted" if m.stop else "drifted" if halt else "stopped"
                break
            if r.ctx.rank == 0 and r.args.save_interval and loop.done % r.args.save_interval == 0:
                progress.beat("checkpoint")
                loop.last_saved = _save(r, loop.done)
            if r.ctx.rank == 0 and time.perf_counter() - refreshed >= summaries.REFRESH_BUDGET * refresh_cost:
                loop.train_time, refreshed = time.perf_counter() - t0, time.perf_counter()
                _account(loop)
                refresh_cost = time.perf_counter() - refreshed
        loop.train_time = time.perf_counter() - t0
        r.console.stop()
    return loop


def _gather_checksums(comm: Comm, digest: str, console: TrainingConsole, when: str) -> list[str]:
    console.synced(when, digest)
    sums = [drift.words_checksum(row) for row in comm.gather(drift.checksum_words(digest))]
    if len(set(sums)) > 1:
        console.note(f"warning: parameter checksums differ across ranks ({when}): {sums}")
    return sums


def _save(r: _Rank, iteration: int) -> Path:
    made = {"iteration": iteration, "library": r.args.rl_library, "framework": r.args.ml_framework}
    made |= {"task": r.args.task, "world_size": r.ctx.world_size}  # the checkpoint's keys, in its order
    meta = resume.CheckpointMeta(**made, total=r.total)
    payload = {**made, "state": r.trainer.state_dict()}
    path = checkpoint.save(resume.checkpoint_path(r.run_dir, iteration), payload, meta)
    r.console.checkpoint(str(path))
    # --keep_checkpoints: the older ones go only now that this one is whole on disk.
    resume.prune(resume.checkpoints(r.run_dir), path, resume.keep_checkpoints(r.environ))
    return path


def _account(loop: _Loop, **final: Any) -> Summary:
    """Rank 0: hand mgpu its account of this attempt (``final``'s fields at the end); return it."""
    steps = loop.steps_per_iteration
    segment = summaries.segment(loop.began, loop.start, loop.done, loop.train_time, loop.iteration_s, steps)
    account = Summary(
        status="running",
        **loop.who,
        start_iteration=loop.start,
        end_iteration=loop.done,
        total_iterations=loop.total,
        s_per_iteration=round(loop.train_time / max(loop.done - loop.start, 1), 4),
        steady=summaries.steady_pace(loop.iteration_s, steps),
        mean_rewards=tuple(loop.rewards),
        checkpoint=str(loop.last_saved) if loop.last_saved else None,
        segments=(segment,) if loop.iteration_s else (),
    ).replace(**final)
    progress.reporter().account(account)
    return account
