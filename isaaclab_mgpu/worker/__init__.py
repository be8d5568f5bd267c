"""``python -m isaaclab_mgpu.worker``: the built-in training worker, by its public name (rank side).

The code lives in :mod:`isaaclab_mgpu.rank.worker`; this name is what torchrun's and jaxrun's
command lines, user scripts and check-env's leftover-process markers use.
"""

from __future__ import annotations

from isaaclab_mgpu.rank.worker import __getattr__ as __getattr__  # the entry points, on first use

__all__ = ["main", "run_argv", "train_in_process"]
