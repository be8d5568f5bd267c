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


#: What Warp's native library prints on stderr when it finds no CUDA driver: on a CPU rank there is
#: none to find, by design, so the line says nothing true.
NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


def init_for_cpu() -> None:
    """On a CPU rank: initialise Warp now, without its banner and its no-CUDA-driver warning.

    Warp initialises on first use (``import skrl`` is one), printing an init banner and, from its
    native library (``init_cuda_driver`` in ``cuda_util.cpp``, straight to file descriptor 2), the
    warning above. Here the banner is kept below Warp's log level for the call, and the native
    stderr of the call is caught and written back without that one line; later uses find Warp
    initialised and print nothing.
    """
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
