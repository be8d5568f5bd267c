"""``mgpu scale``: options only; the sweep lives in :mod:`isaaclab_mgpu.launcher.scale`.

Every launch option of ``train`` (declared once, on :class:`~isaaclab_mgpu.launcher.spec.LaunchSpec`)
and its stall watch apply to each point; the training arguments pass through to each point's
``mgpu train`` as they would.
"""

from typing import Annotated

import typer

from isaaclab_mgpu.cli.options import FLOAT, INT
from isaaclab_mgpu.launcher.spec import LaunchSpec

SCALE = "Scale options"


def _o(name: str, help: str, **kw: object) -> object:
    return typer.Option("--" + name, help=help, rich_help_panel=SCALE, **kw)  # type: ignore[arg-type]


def scale_cmd(
    world_sizes: Annotated[
        str | None,
        _o(
            "world_sizes",
            "Ranks per point, all nodes together, e.g. 1,2,4 (default: 1, 2, 4, … up to the visible "
            "GPUs; 1,2 with --device cpu).",
            metavar="N,N,…",
        ),
    ] = None,
    num_envs: Annotated[
        str | None,
        _o(
            "num_envs",
            "Environments per rank: one count, or A,B,C to sweep (default: the task's).",
            metavar="N,N,…",
        ),
    ] = None,
    iterations: Annotated[
        int,
        _o("iterations", "Training iterations per point; the first is warm-up, left out.", click_type=INT),
    ] = 30,
    target_reward: Annotated[
        float | None,
        _o(
            "target_reward",
            "Also time each point until its mean reward first reaches this.",
            click_type=FLOAT,
        ),
    ] = None,
    out: Annotated[
        str | None,
        _o(
            "out",
            "Folder for scale.json, scale.png and each point's output (default <log root>/scale/<stamp>).",
            metavar="DIR",
        ),
    ] = None,
    no_ceiling: Annotated[
        bool, _o("no_ceiling", "--device cpu: skip the independent-process ceiling runs.")
    ] = False,
    point_timeout: Annotated[
        float,
        _o(
            "point_timeout",
            "Seconds a point may run before it is stopped and counted as timed out (0: none).",
            click_type=FLOAT,
            metavar="SECONDS",
        ),
    ] = 0.0,
    *,
    spec: LaunchSpec,
) -> int:
    """Does scaling pay? Train briefly at each world size (and env count); speedup, efficiency, picture."""
    from isaaclab_mgpu.launch import scale
    from isaaclab_mgpu.launcher.scale import ScaleOptions, parse_counts

    options = ScaleOptions(
        world_sizes=parse_counts(world_sizes, "--world_sizes"),
        num_envs=parse_counts(num_envs, "--num_envs"),
        iterations=iterations,
        target_reward=target_reward,
        out=out,
        ceiling=not no_ceiling,
        point_timeout=point_timeout,
    )
    return scale(spec, options)
