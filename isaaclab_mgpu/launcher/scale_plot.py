"""``mgpu scale``'s picture: env-steps/s and efficiency against world size, one line per ``--num_envs``.

Left: the measured env-steps/s of each environment count per rank, with its ideal (one rank's rate
× world size, dashed) and, on CPU ranks, the box's own ceiling (independent one-rank trainings side
by side, dotted). Right: efficiency (speedup ÷ ranks; 1 is ideal) and, on CPU, the rate against
that ceiling. Points that did not measure are left out of their line. matplotlib is imported here
only, with its file-only backend (no display needed), so ``mgpu --help`` never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from isaaclab_mgpu.contract import files
from isaaclab_mgpu.launcher.scale import Row


class NoPlotter(Exception):
    """matplotlib cannot be imported here; the message says so."""


def draw(rows: Sequence[Row], path: Path, title: str) -> Path:
    """Draw the sweep's picture to ``path`` (PNG); raise :class:`NoPlotter` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise NoPlotter(f"matplotlib is not installed ({exc}); the JSON has every figure") from None

    envs = sorted({r.result.point.num_envs for r in rows}, key=lambda n: (n is None, n or 0))
    sizes = sorted({r.result.point.world_size for r in rows})
    fig, (rate_ax, eff_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for n in envs:
        line = [r for r in rows if r.result.point.num_envs == n and r.result.ok]
        if not line:
            continue
        label = f"{n} envs/rank" if n is not None else "default envs/rank"
        xs = [r.result.point.world_size for r in line]
        drawn = rate_ax.plot(xs, [r.result.env_steps_per_s for r in line], "o-", label=label)[0]
        colour = drawn.get_color()
        one = next((r.result.env_steps_per_s for r in line if r.result.point.world_size == 1), None)
        if one:
            rate_ax.plot(sizes, [one * k for k in sizes], "--", color=colour, alpha=0.5)
        ceil = [r for r in line if r.vs_ceiling is not None and r.ceiling_speedup is not None]
        if ceil and one:
            cx = [r.result.point.world_size for r in ceil]
            cy = [one * (r.ceiling_speedup or 0) for r in ceil]
            rate_ax.plot(cx, cy, ":", color=colour, alpha=0.8)
            eff_ax.plot(cx, [r.vs_ceiling for r in ceil], "s:", color=colour, label=f"{label}: vs ceiling")
        eff = [r for r in line if r.efficiency is not None]
        if eff:
            eff_ax.plot(
                [r.result.point.world_size for r in eff], [r.efficiency for r in eff], "o-", color=colour,
                label=f"{label}: vs 1 rank × N",
            )  # fmt: skip
    rate_ax.plot([], [], "--", color="grey", label="ideal: 1 rank × N")
    if any(r.vs_ceiling is not None and r.result.point.world_size > 1 for r in rows):
        rate_ax.plot([], [], ":", color="grey", label="ceiling: N independent runs")
    eff_ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    for ax in (rate_ax, eff_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(k) for k in sizes])
        ax.set_xlabel("world size (ranks)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    rate_ax.set_ylabel("env-steps/s (steady, all ranks)")
    rate_ax.set_ylim(bottom=0)
    eff_ax.set_ylabel("efficiency")
    eff_ax.set_ylim(0, 1.15)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with files.atomic_open(path, "wb") as f:  # a reader never sees half a picture
            fig.savefig(f, format="png", dpi=110)
    finally:
        plt.close(fig)
    return path
