"""The shared front half of every launch: spec → resolve (this machine) → build, as data.

:func:`prepare` is what ``train``, ``dry-run``, ``check-env``'s planned command and each
``probe-nccl`` launch run before anything is printed or spawned. It lives apart from the command
layer (:mod:`isaaclab_mgpu.launch`, which prints) so that domain packages can use it without
importing the printing layer. ``train`` then asks :func:`own_log_folder` for its per-rank log
folder, ``<log root>/<run name>/<run stamp>`` made exclusively (``-2``, ``-3``… when another
launch took the name), so two launches of one task never share, nor remove, each other's logs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from isaaclab_mgpu.launcher.build import Command, build, log_root, run_name
from isaaclab_mgpu.launcher.resolve import ResolvedSpec, probe_machine, resolve
from isaaclab_mgpu.launcher.runs import create_run_folder
from isaaclab_mgpu.launcher.spec import LaunchSpec


def prepare(
    spec: LaunchSpec,
    *,
    strict: bool,
    extra_env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[ResolvedSpec, Command]:
    """Resolve ``spec`` against this machine (or ``environ``) and build its command."""
    machine = probe_machine(environ, gpu_uuids=spec.gpu_ids is not None)
    resolved = resolve(spec, machine, strict=strict, extra_env=extra_env)
    return resolved, build(resolved)


def own_log_folder(resolved: ResolvedSpec) -> tuple[ResolvedSpec, Command]:
    """``resolved`` and its command, with ``log_launch`` a folder made for this launch alone."""
    folder = create_run_folder(Path(log_root(resolved)) / run_name(resolved), resolved.run_stamp, None)
    resolved = dataclasses.replace(resolved, log_launch=folder.name)
    return resolved, build(resolved)
