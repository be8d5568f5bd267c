"""Launch, supervise and diagnose multi-GPU and multi-node RL training.

The package is split by the process a module runs in: see ``docs/architecture.md``. The command
line is ``mgpu`` (:mod:`isaaclab_mgpu.cli`). Importing this package is cheap: torch, jax, warp,
rsl_rl and skrl are imported only inside the per-rank worker. The in-process API
``isaaclab_mgpu.train_in_process(argv) -> int`` (one rank in the calling process) is loaded on
first access.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "train_in_process":
        from isaaclab_mgpu.rank.worker import train_in_process

        return train_in_process
    raise AttributeError(f"module 'isaaclab_mgpu' has no attribute {name!r}")
