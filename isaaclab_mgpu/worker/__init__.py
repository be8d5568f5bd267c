"""``python -m isaaclab_mgpu.worker``: the built-in training worker, by its public name (rank side).

The code lives in :mod:`isaaclab_mgpu.rank.worker`; this name is what torchrun's and jaxrun's
command lines, user scripts and check-env's leftover-process markers use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main", "run_argv", "train_in_process"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from isaaclab_mgpu.rank import worker

        return getattr(worker, name)
    raise AttributeError(f"module 'isaaclab_mgpu.worker' has no attribute {name!r}")
