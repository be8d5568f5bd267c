"""One rank of an Isaac Lab task: Isaac Lab's own training call, with mgpu's bookkeeping around it.

:func:`run` does what Isaac Lab's multi-GPU worker (``isaaclab_rl/entrypoints/multigpu.py``) does
for the chosen library, ``isaaclab_rl.entrypoints.dispatch.run_train_cli(argv)``, with:

- the Isaac Lab training command line from :func:`train_argv` (pure; what it holds:
  ``docs/training.md``, "Isaac Lab tasks");
- a resume continuing the run in its own folder, at its iteration counter (:mod:`.isaac_resume`);
- on CPU ranks, a gloo process group joined first; the patches of :mod:`.patches` on every rank;
- a :class:`Bookkeeper` observing the run: the run folder Isaac Lab chose, the parameter checksums
  after rank 0's broadcast and at the end, each iteration (:meth:`Bookkeeper.iteration`, with
  the progress heartbeat) and each checkpoint; on rank 0 its account of the attempt, with the keys
  of an embedded run, handed to mgpu (:meth:`isaaclab_mgpu.contract.progress.Reporter.account`) as
  soon as Isaac Lab names the folder and kept up to date (a checkpoint of another run loaded into a
  new folder is recorded as ``continues``);
- mgpu's checkpoint request, agreed in one tiny all-gather at each iteration's end: the library
  saves through its own code and training ends there (every rank exits 0, the run is ``stopped``);
- the ranks' drift check (:mod:`.isaac_drift`); under ``--on_drift stop`` a drift ends training the
  same way (``drifted``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from isaaclab_mgpu.contract import progress, resume, signals
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import CHECKPOINT_REQUEST
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, MgpuError, UsageError
from isaaclab_mgpu.contract.isaaclab_version import check_version
from isaaclab_mgpu.contract.layout import SUMMARY
from isaaclab_mgpu.contract.summary import REFRESH_BUDGET, Checksums, Rates, Summary
from isaaclab_mgpu.contract.worker_args import WorkerArgs
from isaaclab_mgpu.rank import drift, isaac_drift, isaac_resume, localcomm
from isaaclab_mgpu.rank.backends.base import parameters_checksum
from isaaclab_mgpu.rank.console import TrainingConsole, isaac_resumed, isaac_summary
from isaaclab_mgpu.rank.isaac_resume import Continuation, continuation
from isaaclab_mgpu.rank.patches import isaaclab as compat
from isaaclab_mgpu.rank.patches import timing
from isaaclab_mgpu.rank.worker.checkpoint import disk_full_is_one_line
from isaaclab_mgpu.rank.worker.rank import (
    Comm,
    RankContext,
    close_local_channel,
    gather_floats,
    identity,
    init_torch_group,
    rank_context,
    run_stamp,
)

#: Per-library Hydra items that put a single-rank run on the rank's device (multi-rank runs get the
#: device from Isaac Lab's distributed set-up instead).
SINGLE_RANK_DEVICE_ITEMS = {
    "rsl_rl": ("agent.device",),
    "rl_games": ("agent.params.config.device", "agent.params.config.device_name"),
    "skrl": (),
}


def logger_argv(library: str, logger: str | None) -> list[str]:
    """mgpu's ``--logger tensorboard|wandb|neptune|none`` spelled the way Isaac Lab's back-end takes it."""
    if logger in (None, "tensorboard"):
        return []  # every back-end's default
    if library == "rsl_rl" and logger in ("wandb", "neptune"):
        return ["--logger", logger]
    if library == "rl_games" and logger == "wandb":
        return ["--track"]  # Isaac Lab's rl_games flag (it also needs --wandb-entity)
    if library == "skrl" and logger == "wandb":
        return ["+agent.agent.experiment.wandb=true"]
    if library == "skrl" and logger == "none":
        return ["agent.agent.experiment.write_interval=0"]
    raise UsageError(f"--logger {logger}: Isaac Lab's {library} back-end has no such logger setting")


def train_argv(args: WorkerArgs, ctx: RankContext, cont: Continuation) -> list[str]:
    """Isaac Lab's training command line for this rank (what ``run_train_cli`` parses)."""
    argv = ["--rl_library", args.rl_library, "--task", args.task, "--device", ctx.device]
    if args.rl_library == "skrl":
        argv += ["--ml_framework", args.ml_framework]
    if args.num_envs is not None:
        argv += ["--num_envs", str(args.num_envs)]
    if args.max_iterations is not None:
        argv += ["--max_iterations", str(args.max_iterations)]
    argv += ["--seed", str(args.seed)]
    if args.rl_library == "rsl_rl":
        experiment = args.experiment_name if args.experiment_name is not None else cont.experiment
        if experiment is not None:
            argv += ["--experiment_name", experiment]
        run_name = args.run_name if args.run_name is not None else cont.run_name
        if run_name is not None:
            argv += ["--run_name", run_name]
    if cont.local is not None:
        argv += ["--checkpoint", cont.local]
    if ctx.distributed:
        argv.append("--distributed")
    isaac_args, log = list(args.isaac_args), logger_argv(args.rl_library, args.logger)
    # Hydra items (skrl's) go last; options keep their values (rsl_rl's ``--logger wandb``).
    log_items = [a for a in log if "=" in a and not a.startswith("-")]
    log_options = [a for a in log if a not in log_items]
    argv += ["--run_timestamp", cont.stamp, *isaac_args, *log_options]
    items = [f"{k}={v}" for k, v in args.overrides] + log_items
    given = {k for k, _ in args.overrides}
    if not ctx.distributed:
        items += [f"{k}={ctx.device}" for k in SINGLE_RANK_DEVICE_ITEMS[args.rl_library] if k not in given]
    return argv + items


def check_request(args: WorkerArgs) -> None:
    """Refuse worker options that have no meaning on Isaac Lab's training path."""
    if args.log_root != "logs":
        raise UsageError(
            f"--log_root {args.log_root}: Isaac Lab writes its run folders under ./logs; "
            "start the run from the folder that should hold logs/"
        )
    if args.rl_library != "rsl_rl" and (args.experiment_name or args.run_name):
        raise UsageError(
            f"--experiment_name/--run_name are rsl_rl options in Isaac Lab; for {args.rl_library} set the "
            "agent config with a Hydra item (e.g. agent.agent.experiment.directory=NAME for skrl)"
        )


class Bookkeeper(compat.Observer):
    """mgpu's per-rank record of an Isaac Lab run, rank 0's account of it, and the agreed stop."""

    def __init__(
        self,
        ctx: RankContext,
        comm_kind: str,
        cont: Continuation | None = None,
        total: int | None = None,
        library: str = "",
        args: WorkerArgs | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.ctx = ctx
        self.library = library
        self.comm_kind = comm_kind
        self.cont = cont
        self.total = total
        self.args = args
        self.environ = os.environ if environ is None else environ
        self.start = 0
        self.rank_dir: str | None = None
        self.start_sum: str | None = None
        self.end_sum: str | None = None
        self.rewards: list[float | None] = []
        self.steps = 0
        self.iteration_s: list[float] = []  # wall seconds of each iteration, for the steady pace
        self.last_steps = 0
        self._mark: float | None = None
        self.t0: float | None = None
        self.train_time = 0.0
        self.began = 0.0
        """When this attempt's training began (seconds since the epoch): names its segment."""
        self.gathered: np.ndarray | None = None
        self.loaded: str | None = None
        """The checkpoint the library loaded (rank 0's own path), None: a fresh start."""
        self.saved_at: int | None = None
        """Completed iterations at the newest checkpoint this attempt wrote."""
        self.saved_path: Path | None = None
        self.stopped = False
        """Every rank agreed to stop (mgpu's checkpoint request, or ``--on_drift stop``), after a save."""
        # Under mgpu train the checkpoint request is agreed every iteration (one tiny collective);
        # run by hand there is nobody to ask.
        self._watch = CHECKPOINT_REQUEST in self.environ
        self._refreshed = 0.0
        self._refresh_cost = 0.0
        self.drift = isaac_drift.Watch(ctx, comm_kind, args, self.environ)
        """The ranks' drift check (``--drift_interval``, ``--on_drift``)."""
        self.account: Summary | None = None
        """Rank 0's last account of this attempt (what mgpu folds into ``summary.json``)."""

    def run_folder(self, rank_dir: str) -> None:
        """Record the folder Isaac Lab gave this rank (a continued run's must be the one it continues)."""
        self.rank_dir = rank_dir
        folder = self.cont.folder if self.cont is not None else None
        if folder is not None and self.ctx.rank == 0 and Path(rank_dir).resolve() != Path(folder):
            raise UsageError(
                f"--resume: Isaac Lab names this run {rank_dir}, not the run it continues, {folder}; "
                "give the options that run was started with (--run_name, the agent's experiment settings)"
            )
        if self.ctx.rank == 0 and self.run_dir is not None and self.args is not None:
            resume.report_run_dir(self.run_dir, self.environ)  # the launcher's ledger goes there
            self._refresh(force=True)

    def resumed(self, iteration: int, checkpoint: str) -> None:
        """The library loaded the checkpoint: the count goes on from ``iteration``."""
        self.start = iteration
        self.drift.started(iteration)
        if hasattr(self, "_modules"):  # skrl broadcasts when built; every rank loads the same file after
            self.start_sum = parameters_checksum(self._modules)
        if self.ctx.rank == 0:
            source = self.cont.checkpoint if self.cont is not None and self.cont.checkpoint else checkpoint
            self.loaded = source or None
            isaac_resumed(iteration, self.total, source, self.library)
            if self.run_dir is not None:
                self._refresh(force=True)

    def state(self, source: Any) -> None:
        """The library's state, for the drift check (:mod:`.isaac_drift`)."""
        self.drift.source = source

    def synced(self, modules: list[Any]) -> None:
        """Record the first checksum (parameters now equal on every rank) and start the clock."""
        self.start_sum = parameters_checksum(modules)
        self._modules = modules
        progress.beat("broadcast")
        progress.after_startup()
        self.t0 = self._mark = time.perf_counter()
        self.began = time.time()

    def iteration(self, steps: int, reward: float | None) -> bool:
        """One iteration ended on this rank: bookkeeping, heartbeat, rank 0's account; True: all stop here."""
        iteration = self.start + len(self.rewards) + 1
        self.steps += steps
        self.last_steps = steps
        now = time.perf_counter()
        if self._mark is not None:
            self.iteration_s.append(now - self._mark)
        self._mark = now
        self.rewards.append(reward)
        progress.iteration(iteration)
        if self.ctx.rank == 0:
            self._refresh()
        asked = self._stop_here(iteration)
        drifted = self.drift.after(iteration)  # --on_drift stop: every rank stops here alike
        self.stopped = self.stopped or drifted
        return asked or drifted

    def saved(self, iteration: int) -> None:
        """The library saved after ``iteration`` iterations: rank 0 records it at once, for a restart."""
        if self.ctx.rank != 0 or self.run_dir is None:
            return
        self.saved_at = iteration
        self.saved_path = _whole(self.library, self.run_dir)
        if self.saved_path is not None:  # --keep_checkpoints: the older ones go now that this one is whole
            keep = resume.keep_checkpoints(self.environ)
            resume.prune(resume.checkpoints(self.run_dir, self.library), self.saved_path, keep)
        self._refresh(force=True)

    def _stop_here(self, iteration: int) -> bool:
        """Every rank's checkpoint request (mgpu's file, or SIGUSR1 reaching the rank), agreed."""
        if not self._watch:
            return False
        asked = resume.stop_at_checkpoint(iteration, self.total, self.environ)
        if not Comm(self.ctx, self.comm_kind).any(asked):
            return False
        if not self.stopped and self.ctx.rank == 0:
            TrainingConsole(0).note(f"checkpoint requested: saving at iteration {iteration} and stopping")
        self.stopped = True
        return True

    @property
    def ending(self) -> str:
        """How training ended (``summary.json``'s status), alike on every rank."""
        return "drifted" if self.drift.stopped else "stopped" if self.stopped else "finished"

    def finished(self) -> None:
        """Training returned: take the last checksum and gather every rank's record."""
        progress.reporter().ended(self.ending)  # every rank: another node's mgpu has no summary
        progress.beat("finish")
        if self.t0 is not None:
            self.train_time = time.perf_counter() - self.t0
        self.end_sum = parameters_checksum(self._modules) if hasattr(self, "_modules") else None
        rate = self.steps / self.train_time if self.train_time > 0 else 0.0
        rewards = [np.nan if r is None else r for r in self.rewards]
        t = progress.reporter().totals()  # this rank's busy/wait split (isaaclab_mgpu.progress)
        row = np.concatenate(
            [
                drift.checksum_words(self.start_sum or "0" * 16),
                drift.checksum_words(self.end_sum or "0" * 16),
                [rate, float(len(self.rewards))],
                [float(t[k]) for k in ("timed", "busy_s", "wait_s")],
                np.asarray(rewards, dtype=np.float64),
            ]
        )
        self.gathered = gather_floats(Comm(self.ctx, self.comm_kind), row)

    # --- rank 0's account of the attempt (node 0's mgpu folds it into summary.json) ------------

    def _refresh(self, *, force: bool = False) -> None:
        """This attempt's progress as rank 0's account (every iteration while that is cheap)."""
        if self.run_dir is None or self.args is None:
            return
        if not force and time.perf_counter() - self._refreshed < REFRESH_BUDGET * self._refresh_cost:
            return
        t0 = time.perf_counter()
        self._account(self._progress(self.rewards))
        self._refreshed = time.perf_counter()
        self._refresh_cost = self._refreshed - t0

    def _account(self, account: Summary) -> Summary:
        """Hand ``account`` to mgpu (:meth:`isaaclab_mgpu.contract.progress.Reporter.account`)."""
        self.account = account
        progress.reporter().account(account)
        return account

    def _progress(self, rewards: list[float | None], **final: Any) -> Summary:
        """How far this attempt got, as the built-in worker tells it."""
        args = self.args
        assert args is not None
        done = self.start + len(rewards)
        checkpoint = self.saved_path
        fields: dict[str, Any] = {
            "status": "running",
            **identity(args, self.ctx, self.environ),
            "num_envs_per_rank": args.num_envs,
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "start_iteration": self.start,
            "end_iteration": done,
            "total_iterations": self.total,
            "mean_rewards": tuple(rewards),
            "checkpoint": str(checkpoint) if checkpoint is not None else None,
            "checkpoint_iteration": self.saved_at,
        }
        if self.iteration_s and self.t0 is not None:
            spent = self.train_time or time.perf_counter() - self.t0
            steps = self.last_steps * self.ctx.world_size
            segment = summaries.segment(self.began, self.start, done, spent, self.iteration_s, steps)
            fields["segments"] = (segment,)
        if self.loaded is not None:
            fields["resumed_from"] = self.loaded
            origin = isaac_resume.run_folder_of(self.library, Path(self.loaded)).resolve()
            here = self.run_dir.resolve() if self.run_dir is not None else None
            # A checkpoint of another run loaded into this new folder: this run continues that one.
            if here is not None and origin != here:
                fields["continues"] = str(origin)
        return Summary(**{**fields, **final})

    def summary(self, exit_status: int) -> Summary:
        """Rank 0's last account, completed with every rank's record, handed to mgpu; returns it."""
        run_dir = self.run_dir
        g = self.gathered if self.gathered is not None else np.zeros((1, 13))
        starts = [drift.words_checksum(r[0:4]) for r in g]
        ends = [drift.words_checksum(r[4:8]) for r in g]
        per_iter = g[:, 13:]
        rewards = [None if np.all(np.isnan(c)) else float(np.nanmean(c)) for c in per_iter.T]
        iterations = len(self.rewards)
        if self.saved_path is None and run_dir is not None:
            self.saved_path = _whole(self.library, run_dir)
        status = {0: self.ending, EXIT_INTERRUPTED: "interrupted"}.get(exit_status, "failed")
        return self._account(
            self._progress(
                rewards[:iterations] if self.gathered is not None else self.rewards,
                status=status,
                train_time_s=round(self.train_time, 4),
                s_per_iteration=round(self.train_time / max(iterations, 1), 4),
                env_steps_per_s=Rates(total=float(g[:, 8].sum()), per_rank=tuple(float(v) for v in g[:, 8])),
                steady=summaries.steady_pace(self.iteration_s, self.last_steps * self.ctx.world_size),
                checksums=Checksums(start=tuple(starts), end=tuple(ends)),
                checksums_equal=len(set(starts)) == 1 and len(set(ends)) == 1 and self.end_sum is not None,
                timing=summaries.timing_of(g[:, 10:13].tolist()) if self.gathered is not None else None,
                interrupted=exit_status == EXIT_INTERRUPTED,
                exit_status=exit_status,
            )
        )

    @property
    def run_dir(self) -> Path | None:
        """Isaac Lab's run folder (rank 0's folder; other ranks write in its ``rank_<r>/``)."""
        if self.rank_dir is None:
            return None
        path = Path(self.rank_dir)
        return path.parent if path.name == f"rank_{self.ctx.rank}" and self.ctx.rank else path


def _whole(library: str | None, run_dir: Path) -> Path | None:
    """The run folder's newest whole checkpoint of ``library`` (None: none, or no library)."""
    return resume.newest_whole(run_dir, library).checkpoint if library else None


def run(args: WorkerArgs, environ: Mapping[str, str] | None = None) -> int:
    """Train one rank of an Isaac Lab task on Isaac Lab's own code path; return its exit code."""
    check_version()
    check_request(args)
    env_vars = os.environ if environ is None else environ
    ctx = rank_context(args, env_vars)
    jax = args.rl_library == "skrl" and args.ml_framework == "jax"
    cpu = not ctx.is_cuda
    own_group = False
    progress.beat("init")
    if cpu and ctx.distributed and not jax:
        own_group = init_torch_group(ctx)
        if ctx.rank == 0 and localcomm.current() is not None:
            TrainingConsole(0).note(localcomm.NOTE)
    elif ctx.distributed and not jax:  # the library creates the group (NCCL): its collectives, timed
        timing.install()
    from isaaclab_rl.entrypoints.dispatch import run_train_cli

    library, task = args.rl_library, args.task
    stamp = args.run_timestamp or run_stamp(env_vars)
    with continuation(library, task, args.resume, ctx.rank, ctx.world_size, env_vars, stamp) as cont:
        book = Bookkeeper(ctx, "jax" if jax else "torch", cont, args.max_iterations, library, args, env_vars)
        argv = train_argv(args, ctx, cont)
        progress.beat("environment")  # Isaac Lab builds the task, the simulation and the agent
        with (
            compat.patched(args.rl_library, args.ml_framework, cpu=cpu, observer=book),
            signals.recording((signal.SIGINT,), interrupt=True) as stop,
        ):
            try:
                # A full disk (a checkpoint, the summary, a log): one line, exit 74, never restarted.
                with disk_full_is_one_line(lambda: book.run_dir, lambda d: _whole(library, d)):
                    code = run_train_cli(argv)
            except KeyboardInterrupt:  # a stop on mgpu's checkpoint request leaves skrl's run this way
                code = 0 if book.stopped and stop.signal is None else EXIT_INTERRUPTED
    # Isaac Lab ends ``learn`` quietly on a KeyboardInterrupt and returns 0: an interrupted rank
    # exits with the interrupted code, as an embedded one does.
    code = EXIT_INTERRUPTED if stop.signal is not None else int(code or 0)
    if own_group:
        import torch.distributed as dist

        close_local_channel()
        if dist.is_initialized():  # Isaac Lab destroys the group after a finished run
            dist.destroy_process_group()
    if book.gathered is None and code == 0:  # e.g. Isaac Lab swallowed a KeyboardInterrupt
        raise MgpuError("Isaac Lab's training returned before it finished; see its output above")
    progress.beat(progress.DONE)
    if ctx.rank == 0 and book.run_dir is not None:
        summary = book.summary(code)
        rate = summary.env_steps_per_s.total if summary.env_steps_per_s else 0.0
        isaac_summary(str(book.run_dir / SUMMARY), summary.checksums_equal, rate)
    return code
