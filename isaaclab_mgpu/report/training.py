"""Console output of a training rank: sync lines from every rank, progress and summary from rank 0.

Rank 0 prints one plain line per iteration (iteration, mean episode reward, steps/s, s/it) when its
stdout is not a terminal, which is always the case under ``mgpu train`` (torchrun's ``--tee`` and
jaxrun pipe it), so logs stay greppable; ``mgpu train`` turns those lines into its own progress bar
on a terminal (:mod:`.progress`). A worker run by hand on a terminal draws the same bar itself.
Every rank prints exactly one line per parameter synchronisation check.
"""

from __future__ import annotations

import sys
from typing import Any


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _reward(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


class TrainingConsole:
    """Progress and summary of one rank; silent except sync lines on ranks other than 0."""

    def __init__(self, rank: int, *, tty: bool | None = None) -> None:
        self.rank = rank
        self.tty = sys.stdout.isatty() if tty is None else tty
        self._progress: Any = None
        self._task: Any = None

    def note(self, message: str) -> None:
        """One ``[mgpu rank r]`` line (any rank)."""
        _line(f"[mgpu rank {self.rank}] {message}")

    def synced(self, when: str, checksum: str) -> None:
        """Log that this rank's parameters are synchronised, with their checksum."""
        self.note(f"parameters synchronised ({when}): checksum {checksum}")

    def start(self, description: str, first: int, total: int) -> None:
        """Begin showing progress from iteration ``first`` to ``total``."""
        if self.rank != 0:
            return
        self.note(f"training {description}: iterations {first + 1}..{total}")
        if self.tty:
            from isaaclab_mgpu.report.progress import iteration_bar

            self._progress = iteration_bar()
            self._task = self._progress.add_task("train", total=total, completed=first, info="")
            self._progress.start()

    def iteration(
        self, it: int, total: int, reward: float | None, steps_per_s: float, seconds: float
    ) -> None:
        """Show iteration ``it`` (1-based) of ``total``."""
        if self.rank != 0:
            return
        info = f"reward {_reward(reward)} | {steps_per_s:,.0f} steps/s | {seconds:.2f} s/it"
        if self._progress is not None:
            self._progress.update(self._task, completed=it, info=info)
        else:
            _line(f"[mgpu] iteration {it}/{total} | {info}")

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
        status = "interrupted" if s["interrupted"] else "finished"
        _line(
            f"[mgpu] {status}: {s['iterations']} iterations (to {s['end_iteration']}) in "
            f"{s['train_time_s']:.1f} s ({s['s_per_iteration']:.3f} s/it) on {s['world_size']} rank(s)"
        )
        _line(f"[mgpu] env-steps/s: total {rate['total']:,.0f}; per rank {per_rank}")
        _line(
            f"[mgpu] mean episode reward: first {_reward(s['first_mean_reward'])}, "
            f"last {_reward(s['last_mean_reward'])}"
        )
        equal = "equal" if s["checksums_equal"] else "DIFFERENT"
        _line(f"[mgpu] parameter checksums across ranks: {equal}; summary {path}")
