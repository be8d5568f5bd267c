"""``mgpu probe-nccl``: options only; the probe lives in :mod:`isaaclab_mgpu.launcher.probe`."""

from typing import Annotated

import typer

from isaaclab_mgpu.cli.options import FLOAT, INT, NO_SAVED_WORKAROUNDS
from isaaclab_mgpu.launcher.spec import LaunchSpec

PROBE = "Probe options"


def _o(name: str, help: str, **kw: object) -> object:
    return typer.Option("--" + name, help=help, rich_help_panel=PROBE, **kw)  # type: ignore[arg-type]


def probe_nccl_cmd(
    world_size: Annotated[int | None, _o("world_size", "Probe one world size.", click_type=INT)] = None,
    world_sizes: Annotated[
        str | None, _o("world_sizes", "World sizes to sweep, e.g. 1,2,4 (default: 1, 2, 4, … all GPUs).")
    ] = None,
    backend: Annotated[
        str | None, _o("backend", "nccl (default on GPUs) or gloo (default with --device cpu).")
    ] = None,
    sizes: Annotated[
        str | None, _o("sizes", "Message sizes: LO:HI (×2 steps) or A,B,C (default 8:64M; 8:1M on CPU).")
    ] = None,
    iters: Annotated[int, _o("iters", "Timed all-reduces per size and mode.", click_type=INT)] = 20,
    warmup: Annotated[int, _o("warmup", "Untimed all-reduces before them.", click_type=INT)] = 5,
    timeout: Annotated[
        float, _o("timeout", "Seconds per launch before it counts as a hang.", click_type=FLOAT)
    ] = 60.0,
    pairs: Annotated[bool, _o("pairs", "Also all-reduce between every pair of GPUs.")] = False,
    try_workarounds: Annotated[
        bool, _o("try_workarounds", "On a failure, try each documented NCCL variable and confirm fixes.")
    ] = False,
    save_workaround: Annotated[
        bool, _o("save_workaround", "Store a confirmed fix for this machine (train applies it).")
    ] = False,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
    json: Annotated[bool, _o("json", "Print one JSON document instead of the tables.")] = False,
    *,
    spec: LaunchSpec,
) -> int:
    """Tell a communication hang from a task bug: time and check all-reduce at each world size."""
    from isaaclab_mgpu.launch import probe_nccl
    from isaaclab_mgpu.launcher.probe.config import options_from_cli

    opts = options_from_cli(
        world_size=world_size,
        world_sizes=world_sizes,
        sizes=sizes,
        backend=backend,
        iters=iters,
        warmup=warmup,
        timeout=timeout,
        pairs=pairs,
        try_workarounds=try_workarounds or save_workaround,
        save_workaround=save_workaround,
        saved_workarounds=not no_saved_workarounds,
    )
    return probe_nccl(spec, opts, as_json=json)
