"""Everything a rank prints: the rank side's one console module (it never imports ``report``).

Rank 0 prints one plain line per iteration when its stdout is not a terminal (always under ``mgpu
train``, which turns those lines into its own progress bar; the format is
:mod:`isaaclab_mgpu.contract.lines`); a worker run by hand on a terminal draws the same bar itself.
Every rank prints one line per parameter synchronisation check; a worker's refusal is one
``isaaclab_mgpu.worker: error:`` line on stderr (:func:`worker_error`). Rich is imported only when
a bar is drawn.
"""

from __future__ import annotations

import sys
from typing import Any

from isaaclab_mgpu.contract import reasons
from isaaclab_mgpu.contract.lines import (
    BAR_COLUMNS,
    FINISHED,
    INTERRUPTED,
    PREFIX,
    STOPPED,
    final_line,
    iteration_info,
    iteration_line,
    reward_text,
)
from isaaclab_mgpu.contract.text import printable

#: How the worker names itself in its error lines.
WORKER = "isaaclab_mgpu.worker"


def _line(text: str) -> None:
    # Task names and paths are the user's: one line each, never an escape code.
    sys.stdout.write(printable(text) + "\n")
    sys.stdout.flush()


def worker_error(message: str) -> None:
    """One ``isaaclab_mgpu.worker: error:`` line on stderr, also kept as the rank's reason."""
    sys.stderr.write(f"{WORKER}: error: {printable(message)}\n")
    reasons.record(message)


def isaac_summary(path: str, checksums_equal: bool | None, env_steps_per_s: float) -> None:
    """Rank 0 of an Isaac Lab task wrote its ``summary.json``."""
    _line(f"{PREFIX} summary: {path} (checksums_equal={checksums_equal}, {env_steps_per_s:.0f} env-steps/s)")


def isaac_resumed(iteration: int, total: int | None, checkpoint: str, library: str) -> None:
    """Rank 0 of an Isaac Lab task loaded ``checkpoint`` and goes on at ``iteration`` (of ``total``)."""
    of = f" of {total}" if total is not None else ""
    # rsl-rl, skrl and rl-games all load with torch.load(weights_only=False) (or pickle, skrl JAX).
    trust = f"{library} unpickles checkpoints: resume only files you trust"
    _line(f"{PREFIX} resuming at iteration {iteration}{of} from {checkpoint} ({trust})")


class TrainingConsole:
    """Progress and summary of one rank; silent except sync lines on ranks other than 0."""

    def __init__(self, rank: int, *, tty: bool | None = None) -> None:
        self.rank = rank
        self.tty = sys.stdout.isatty() if tty is None else tty
        self._progress: Any = None
        self._task: Any = None
        self._last_reward: float | None = None

    def note(self, message: str) -> None:
        """One ``[mgpu rank r]`` line (any rank)."""
        _line(f"[mgpu rank {self.rank}] {message}")

    def synced(self, when: str, checksum: str) -> None:
        """Log that this rank's parameters are synchronised, with their checksum."""
        self.note(f"parameters synchronised ({when}): checksum {checksum}")

    def start(self, description: str, first: int, total: int, last_reward: float | None = None) -> None:
        """Show progress from ``first`` to ``total``, showing a resumed run's ``last_reward`` at first."""
        if self.rank != 0:
            return
        self._last_reward = last_reward
        self.note(f"training {description}: iterations {first + 1}..{total}")
        if self.tty:  # the bar mgpu train draws from the plain lines (contract.lines.BAR_COLUMNS)
            import rich.progress

            columns = [getattr(rich.progress, name)(*args) for name, *args in BAR_COLUMNS]
            self._progress = rich.progress.Progress(*columns, redirect_stdout=True, redirect_stderr=True)
            self._task = self._progress.add_task("train", total=total, completed=first, info="")
            self._progress.start()

    def iteration(
        self, it: int, total: int, reward: float | None, steps_per_s: float, seconds: float
    ) -> None:
        """Show iteration ``it`` (1-based) of ``total``."""
        if self.rank != 0:
            return
        info = iteration_info(reward, steps_per_s, seconds, self._last_reward)
        self._last_reward = reward if reward is not None else self._last_reward
        if self._progress is not None:
            self._progress.update(self._task, completed=it, info=info)
        else:
            _line(iteration_line(it, total, info))

    def stop(self) -> None:
        """End the progress display."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def checkpoint(self, path: str) -> None:
        """Rank 0 wrote a checkpoint."""
        if self.rank == 0:
            self.note(f"checkpoint {path}")

    def summary(self, s: dict[str, Any], path: str) -> None:
        """Rank 0's end-of-run report."""
        if self.rank != 0:
            return
        self.stop()
        rate = s["env_steps_per_s"]
        per_rank = ", ".join(f"{v:,.0f}" for v in rate["per_rank"])
        # The record's status, so a requeue stop is never told as "finished".
        status = s.get("status") if s.get("status") in (FINISHED, INTERRUPTED, STOPPED) else FINISHED
        total = s.get("total_iterations")
        of = f" of {total}" if total and s["end_iteration"] < total else ""
        run = s.get("whole") or {}
        segments = s.get("segments") or ()
        this = f"{s['train_time_s']:.1f} s ({s['s_per_iteration']:.3f} s/it) on {s['world_size']} rank(s)"
        if run.get("segments", 0) > 1 and segments:
            # A continued run: the run's iterations with the run's time, then this segment's own.
            last = segments[-1]
            told = (
                f"{s['end_iteration']}{of} iterations in {run['train_time_s']:.1f} s over {run['segments']} "
                f"segments; this one {last['start_iteration'] + 1}..{last['end_iteration']} in {this}"
            )
        else:
            told = f"{s['iterations']} iterations (to {s['end_iteration']}{of}) in {this}"
        _line(final_line(status, told))
        _line(f"{PREFIX} env-steps/s: total {rate['total']:,.0f}; per rank {per_rank}")
        steady = s.get("steady") or {}
        if steady.get("s_per_iteration"):
            _line(
                f"{PREFIX} steady: {steady['s_per_iteration']:.3f} s/it, {steady['env_steps_per_s']:,.0f} "
                f"env-steps/s after {steady['warmup_iterations']} warm-up iteration(s) of "
                f"{steady['warmup_s']:.2f} s"
            )
        if run.get("segments", 0) > 1 and run.get("steady_s_per_iteration"):
            _line(
                f"{PREFIX} whole run, steady: {run['steady_s_per_iteration']:.3f} s/it, "
                f"{run['steady_env_steps_per_s']:,.0f} env-steps/s over {run['segments']} segments "
                "(each one's warm-up left out)"
            )
        _line(
            f"{PREFIX} mean episode reward: first {reward_text(s['first_mean_reward'])}, "
            f"last {reward_text(s['last_mean_reward'])}"
        )
        equal = "equal" if s["checksums_equal"] else "DIFFERENT"
        _line(f"{PREFIX} parameter checksums across ranks: {equal}; summary {path}")
