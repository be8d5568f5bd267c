"""Checkpoints: ``model_<iteration>.pt`` in the run folder, written atomically by rank 0.

A checkpoint is one ``torch.save`` file holding ``{"format", "iteration", "library", "framework",
"task", "state"}``, where ``state`` is the back-end's own ``state_dict`` and ``iteration`` the
number of completed iterations. It is written to a temporary name next to the target, then renamed
over it, so a reader (or a resumed run) never sees half a file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files
from isaaclab_mgpu.contract.errors import UsageError

FORMAT = "isaaclab-mgpu/1"
_NAME = re.compile(r"^model_(\d+)\.pt$")


def save(path: Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` atomically (temporary file, then rename)."""
    import torch

    with files.atomic_open(path, "wb") as f:
        torch.save({"format": FORMAT, **payload}, f)
    return path


def load(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save`."""
    import torch

    data = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"--resume {path}: not an isaaclab-mgpu checkpoint (model_<N>.pt of a run folder)")
    return data


def latest_in(folder: Path) -> Path | None:
    """The checkpoint with the highest iteration in ``folder``, if any."""
    found = [(int(m.group(1)), p) for p in folder.glob("model_*.pt") if (m := _NAME.match(p.name))]
    return max(found)[1] if found else None


def find(resume: str, experiment_dir: Path, current_run: Path) -> Path:
    """Resolve ``--resume``: ``latest``, a run folder or a checkpoint file, to a checkpoint file."""
    if resume == "latest":
        runs = sorted((p for p in experiment_dir.glob("*") if p.is_dir() and p != current_run), reverse=True)
        for run in runs:
            found = latest_in(run)
            if found is not None:
                return found
        raise UsageError(
            f"--resume: no checkpoint under {experiment_dir}; train once first or give --resume PATH"
        )
    path = Path(resume)
    if path.is_dir():
        found = latest_in(path)
        if found is None:
            raise UsageError(f"--resume {resume}: no model_<N>.pt in this folder")
        return found
    if not path.is_file():
        raise UsageError(f"--resume {resume}: no such run folder or checkpoint file")
    return path
