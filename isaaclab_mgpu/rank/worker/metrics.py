"""What every rank measures each iteration, and the curves rank 0 writes from it.

Each rank puts one :func:`row` into the iteration's all-gather (the one that agrees on stopping):
its stop flags, the return sum, count and length sum of the episodes it finished, its own
env-steps/s, and its parameter checksum as four 16-bit words (exact even in JAX's float32 gather).
:func:`summarize` derives the run-wide mean episode reward and length, every rank's env-steps/s and
whether all ranks hold identical parameters. :func:`scalars` turns that into the worker's own
TensorBoard scalars, written by rank 0 through the library's writer on the library's step axis:

==================================  ==========================================================
``mgpu/mean_reward``                mean return of the episodes all ranks finished this iteration
``mgpu/mean_episode_length``        their mean length in steps
``mgpu/env_steps_per_s``            environment steps per second, all ranks together
``mgpu/env_steps_per_s/rank_<r>``   rank r's own steps per second (rollout and update)
``mgpu/s_per_iteration``            wall seconds of the iteration on rank 0
``mgpu/checksums_equal``            1 when every rank's parameters hash the same, else 0
==================================  ==========================================================

The reward and length tags are left out of an iteration in which no episode ended. The pace of the
warm-up iterations (``contract.summary.WARMUP_ITERATIONS``: compilation, first allocations) goes
under ``mgpu/warmup/`` instead, so the ``mgpu/`` pace curves show the steady rate only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from isaaclab_mgpu.rank.drift import checksum_words

_STOP, _RETURNS, _EPISODES, _LENGTHS, _RATE = range(5)
_SUM = slice(5, 9)
#: Columns of :func:`row` (the worker appends the drift check's words after them:
#: :mod:`isaaclab_mgpu.rank.drift`).
WIDTH = 9
#: Stop flags a rank puts into its row (bits of one number, exact in float32).
STOP, CHECKPOINT = 1, 2


@dataclass(frozen=True)
class IterationStats:
    """One iteration, seen from all ranks."""

    stop: bool
    """Some rank was asked to stop (SIGINT/SIGTERM)."""

    checkpoint: bool
    """Some rank's mgpu asked for a checkpoint and a stop (the requeue signal)."""

    mean_reward: float | None
    """Mean return of the episodes that ended on any rank; None when none ended."""

    mean_length: float | None
    """Mean length of those episodes; None when none ended."""

    per_rank_steps_per_s: tuple[float, ...]
    """Each rank's own env-steps/s, in rank order."""

    checksums_equal: bool
    """Every rank's parameter checksum is the same."""


def row(stop: int, stats: Any, steps_per_s: float, digest: str) -> np.ndarray:
    """This rank's contribution to the iteration's all-gather."""
    counts = [float(stop), stats.return_sum, stats.episodes, stats.length_sum, steps_per_s]
    return np.array([*counts, *checksum_words(digest)], dtype=np.float64)


def summarize(gathered: np.ndarray) -> IterationStats:
    """Reduce the gathered rows (one per rank) to :class:`IterationStats`."""
    g = np.asarray(gathered, dtype=np.float64)
    episodes = float(g[:, _EPISODES].sum())
    sums = {tuple(r) for r in g[:, _SUM].astype(np.int64).tolist()}
    flags = g[:, _STOP].astype(np.int64)
    return IterationStats(
        stop=bool((flags & STOP).any()),
        checkpoint=bool((flags & CHECKPOINT).any()),
        mean_reward=float(g[:, _RETURNS].sum() / episodes) if episodes else None,
        mean_length=float(g[:, _LENGTHS].sum() / episodes) if episodes else None,
        per_rank_steps_per_s=tuple(float(v) for v in g[:, _RATE]),
        checksums_equal=len(sums) == 1,
    )


def scalars(
    s: IterationStats, steps_per_s: float, seconds: float, *, warmup: bool = False
) -> dict[str, float]:
    """The ``mgpu/...`` scalars of one iteration (module docstring); a warm-up pace under ``mgpu/warmup/``."""
    out: dict[str, float] = {}
    if s.mean_reward is not None:
        out["mgpu/mean_reward"] = s.mean_reward
    if s.mean_length is not None:
        out["mgpu/mean_episode_length"] = s.mean_length
    pace = "mgpu/warmup" if warmup else "mgpu"
    out[f"{pace}/env_steps_per_s"] = steps_per_s
    for rank, rate in enumerate(s.per_rank_steps_per_s):
        out[f"{pace}/env_steps_per_s/rank_{rank}"] = rate
    out[f"{pace}/s_per_iteration"] = seconds
    out["mgpu/checksums_equal"] = float(s.checksums_equal)
    return out
