"""What ``mgpu scale`` is asked: its options, each declared once (:mod:`.options`), and their reading.

Apart from :mod:`.scale` so that the command line builds ``mgpu scale`` without importing the sweep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.summary import WARMUP_ITERATIONS
from isaaclab_mgpu.launcher.options import check_options, option

SCALE = "Scale options"
#: Fewest iterations a point may run: one warm-up and at least two measured.
MIN_ITERATIONS = WARMUP_ITERATIONS + 2


def parse_counts(text: str, option: str) -> tuple[int, ...]:
    """``1,2,4`` as positive integers in the order given; bad text is a UsageError."""
    counts: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not re.fullmatch(r"[0-9]+", part, re.ASCII) or int(part) < 1:
            raise UsageError(
                f"{option} {text!r}: {part!r} is not a positive whole number; give a comma-separated "
                "list such as 1,2,4"
            )
        if int(part) in counts:
            raise UsageError(f"{option} {text!r} lists {int(part)} twice; list each value once")
        counts.append(int(part))
    return tuple(counts)


@dataclass(frozen=True)
class ScaleOptions:
    """What ``mgpu scale`` sweeps and how long each point runs (each field's documentation is its help)."""

    world_sizes: tuple[int, ...] | None = option(
        help="Ranks per point, all nodes together, e.g. 1,2,4 (default: 1, 2, 4, … up to the visible "
        "GPUs; 1,2 with --device cpu).",
        metavar="N,N,…", panel=SCALE, parse=parse_counts,
    )  # fmt: skip
    num_envs: tuple[int, ...] | None = option(
        help="Environments per rank: one count, or A,B,C to sweep (default: the task's).",
        metavar="N,N,…", panel=SCALE, parse=parse_counts,
    )  # fmt: skip
    iterations: int = option(
        30, "Training iterations per point; the first is warm-up, left out.", panel=SCALE
    )
    target_reward: float | None = option(
        help="Also time each point until its mean reward first reaches this.", panel=SCALE
    )
    out: str | None = option(
        help="Folder for scale.json, scale.png and each point's output (default <log root>/scale/<stamp>).",
        metavar="DIR", panel=SCALE,
    )  # fmt: skip
    ceiling: bool = option(
        True, "CPU ranks: also run each world size as that many independent one-rank trainings.", panel=SCALE,
        on=False, off=("no_ceiling", "--device cpu: skip the independent-process ceiling runs."),
    )  # fmt: skip
    point_timeout: float = option(
        0.0, "Seconds a point may run before it is stopped and counted as timed out (0: none).",
        metavar="SECONDS", panel=SCALE,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_options(self)
        if self.iterations < MIN_ITERATIONS:
            raise UsageError(
                f"--iterations {self.iterations}: a point needs at least {MIN_ITERATIONS} (the first "
                "is warm-up, the rest are measured)"
            )
        if not self.point_timeout >= 0:
            raise UsageError(f"--point_timeout {self.point_timeout!r} must be 0 (no limit) or more seconds")
