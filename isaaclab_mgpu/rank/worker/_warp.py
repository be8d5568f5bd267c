"""Warp's kernel settings, applied before anything can build a Warp module."""

from __future__ import annotations


def disable_warp_backward() -> bool:
    """Set ``warp.config.enable_backward = False``; return False when Warp is not installed.

    Warp compiles every module with adjoint (backward) kernels unless told otherwise, roughly
    doubling first-compile time, and the flag only affects modules built after it is set. Isaac Lab
    physics never differentiates through Warp during RL training, so the worker sets it first.
    """
    try:
        import warp
    except ImportError:
        return False
    warp.config.enable_backward = False
    return True
