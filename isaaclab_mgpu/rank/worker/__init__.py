"""The per-rank training worker: ``python -m isaaclab_mgpu.worker`` (started by torchrun or jaxrun).

Its option parser is :mod:`isaaclab_mgpu.contract.worker_args` (``--help``, ``docs/training.md``),
which the launcher runs before spawning too; :mod:`.args` is the rank's entry to it (a bad argument
exits 2 with one line on stderr).

Reaching an entry point of this package (``main``, ``run_argv``, ``train_in_process``) first sets
Warp's ``config.enable_backward = False``, before any task, back-end or Isaac Lab module can create
a Warp module; importing the package itself, or :mod:`.args`, stays light (no Warp, no torch). The
process entry point is wrapped in torch elastic's ``@record``, so a failing rank's traceback lands
in ``TORCHELASTIC_ERROR_FILE`` and the launcher names it as the root cause.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["main", "run_argv", "train_in_process"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from isaaclab_mgpu.rank.worker._warp import disable_warp_backward

        disable_warp_backward()  # before .main can lead to a task, back-end or Isaac Lab import
        entry = importlib.import_module(".main", __name__)
        # Importing the submodule bound the name ``main`` to it; the entry points take the names.
        globals().update({n: getattr(entry, n) for n in __all__})
        return globals()[name]
    raise AttributeError(f"module 'isaaclab_mgpu.worker' has no attribute {name!r}")
