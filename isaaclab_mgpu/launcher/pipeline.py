"""The shared front half of every launch: spec → resolve (this machine) → build, as data.

:func:`prepare` is what ``train``, ``dry-run``, ``check-env``'s planned command and each
``probe-nccl`` launch run before anything is printed or spawned. It lives apart from the command
layer (:mod:`isaaclab_mgpu.launch`, which prints) so that domain packages can use it without
importing the printing layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from isaaclab_mgpu.launcher.build import Command, build
from isaaclab_mgpu.launcher.resolve import ResolvedSpec, probe_machine, resolve
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
