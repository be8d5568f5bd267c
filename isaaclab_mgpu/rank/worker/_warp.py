"""Warp's kernel settings, applied before anything can build a Warp module."""

from __future__ import annotations


def disable_warp_backward() -> None:
    """Set ``warp.config.enable_backward = False`` (nothing to set when Warp is not installed)."""
    # Adjoint kernels roughly double first-compile time, and the flag only affects modules built
    # after it is set; RL training never differentiates through Warp.
    try:
        import warp
    except ImportError:
        return
    warp.config.enable_backward = False


#: What Warp's native library prints on stderr when it finds no CUDA driver: on a CPU rank there is
#: none to find, by design, so the line says nothing true.
NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


def init_for_cpu() -> None:
    """On a CPU rank: initialise Warp now, without its banner and its no-CUDA-driver warning."""
    # The warning comes from Warp's native init_cuda_driver, straight to fd 2: that fd is caught for
    # the call and written back without it. Later uses find Warp initialised and print nothing.
    try:
        import warp
    except ImportError:
        return
    import os
    import sys
    import tempfile

    config = warp.config
    level = getattr(config, "log_level", None)
    if level is not None and hasattr(warp, "LOG_WARNING"):
        config.log_level = warp.LOG_WARNING
    sys.stderr.flush()
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            warp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if level is not None:
                config.log_level = level
        caught.seek(0)
        text = caught.read().decode(errors="replace")
    sys.stderr.write("".join(line for line in text.splitlines(True) if NO_DRIVER not in line))
    sys.stderr.flush()
