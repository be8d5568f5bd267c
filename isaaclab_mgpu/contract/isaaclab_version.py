"""The Isaac Lab releases mgpu drives, checked alike before a launch and inside each rank.

The rank's patches (:mod:`isaaclab_mgpu.rank.patches`) are written against one Isaac Lab release
line, :data:`SUPPORTED`. The launcher refuses any other version before it spawns a rank
(``isaaclab_mgpu.launcher.isaac_preflight``), and each rank checks again before patching, both
with :func:`check_version`: one line naming the supported range, never a traceback from a patched
private function. The version is read from the installed distribution's metadata; Isaac Lab is
never imported here.
"""

from __future__ import annotations

from isaaclab_mgpu.contract.errors import UsageError

#: Isaac Lab releases the patches were written against (``>=`` lower, ``<`` upper).
SUPPORTED = ("3.0", "3.1")
SUPPORTED_TEXT = f"isaaclab>={SUPPORTED[0]},<{SUPPORTED[1]}"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in piece if ch.isdigit()) or 0) for piece in version.split(".")[:2])


def version_supported(version: str) -> bool:
    """True when ``version`` lies in :data:`SUPPORTED`."""
    low, high = (_release(v) for v in SUPPORTED)
    return low <= _release(version) < high


def installed_version() -> str | None:
    """The installed isaaclab distribution's version, or None."""
    from importlib import metadata  # 20 ms: only when an Isaac Lab task is named, not at every launch

    try:
        return metadata.version("isaaclab")
    except metadata.PackageNotFoundError:
        return None


def check_version(version: str | None = None) -> str:
    """Return the Isaac Lab version; raise a one-line UsageError outside :data:`SUPPORTED`."""
    version = installed_version() if version is None else version
    if version is None:
        raise UsageError(
            "Isaac Lab is not installed; install it with `uv pip install -e '.[isaaclab]'` on Python 3.12"
        )
    if not version_supported(version):
        raise UsageError(
            f"Isaac Lab {version} is not supported by this mgpu; it drives {SUPPORTED_TEXT} "
            f"(install one with `uv pip install '{SUPPORTED_TEXT}'`)"
        )
    return version
