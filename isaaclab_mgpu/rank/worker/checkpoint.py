"""Checkpoints: ``model_<iteration>.pt`` in the run folder, written atomically by rank 0, loaded safely.

A checkpoint is one ``torch.save`` file holding ``{"format", "iteration", "library", "framework",
"task", "world_size", "state"}``, where ``state`` is the back-end's own ``state_dict`` (tensors,
numbers, strings and bytes only) and ``iteration`` the number of completed iterations. Beside it,
``model_<iteration>.json`` (:class:`isaaclab_mgpu.contract.resume.CheckpointMeta`) says the same
without torch. Both are written through :func:`isaaclab_mgpu.contract.files.atomic_open` (a reader
or a crash never sees half a file), the checkpoint serialised in memory first, so a full disk fails
in a plain ``write`` naming the file.

Loading never runs code from the file: :func:`load_bytes` uses ``torch.load(weights_only=True)``
and refuses, in one line, a file that needs arbitrary unpickling. Only rank 0 reads the file
(:func:`read`); the others load its bytes from the process group. A file that is not a readable
torch archive at all is :class:`TornCheckpoint`, which a resume from a run folder passes over
(:func:`isaaclab_mgpu.contract.resume.newest_whole`); a refused one is never passed over.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import resume, space
from isaaclab_mgpu.contract.errors import DiskFull, UsageError
from isaaclab_mgpu.rank.patches.base import DurableTorch


class TornCheckpoint(UsageError):
    """A checkpoint that is not a readable torch file (cut short, or unreadable): not whole."""

    def __init__(self, path: str | Path, why: str, sep: str = " ") -> None:
        super().__init__(f"checkpoint {path}{sep}{why}")
        self.why = why
        """Why it is not whole, without the path (what a warning line lists beside the file)."""


def save(path: Path, payload: dict[str, Any], meta: resume.CheckpointMeta) -> Path:
    """Write ``payload`` to ``path`` and its metadata beside it, each atomically and durably."""
    import torch

    DurableTorch(torch).save({"format": resume.FORMAT, **payload}, path)
    resume.write_meta(path, meta)
    return path


def read(path: Path) -> bytes:
    """The bytes of checkpoint ``path`` (rank 0); a missing or non-regular file is bad input."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"checkpoint {path} is not a file; give a model_<N>.pt or its run folder")
        return Path(path).read_bytes()
    except OSError as exc:
        raise TornCheckpoint(path, f"cannot read it ({exc.strerror})", ": ") from None


def load_bytes(data: bytes, name: str | Path) -> dict[str, Any]:
    """Unpack a checkpoint's bytes with ``torch.load(weights_only=True)``; refuse anything else."""
    import torch

    try:
        loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UsageError(
            f"checkpoint {name} refused: it holds objects that only arbitrary unpickling can load "
            "(not an isaaclab-mgpu checkpoint, or a tampered one); nothing in it was run"
        ) from None
    except (RuntimeError, EOFError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TornCheckpoint(name, f"not a readable torch file: {reason}", " is ") from None
    if not isinstance(loaded, dict) or loaded.get("format") != resume.FORMAT:
        raise UsageError(f"checkpoint {name}: not an isaaclab-mgpu checkpoint (model_<N>.pt of a run folder)")
    return loaded


def load(path: Path) -> dict[str, Any]:
    """Read and safely unpack checkpoint ``path`` in this process."""
    return load_bytes(read(path), path)


def find_latest(current_run: Path) -> Path:
    """``--resume`` alone, by hand: this user's newest earlier run of the experiment with a checkpoint."""
    experiment = Path(current_run).parent
    log_root = experiment.parent.parent
    for run in resume.own_run_folders(experiment, log_root):
        if run.name != Path(current_run).name and resume.checkpoints(run):
            return run
    raise UsageError(f"--resume: no checkpoint under {experiment}; train once first or give --resume PATH")


def full_error(exc: BaseException) -> OSError | None:
    """The ``ENOSPC``/``EDQUOT`` error that ``exc`` is or was raised while handling, if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if space.is_full(exc):
            return exc  # type: ignore[return-value]
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


@contextlib.contextmanager
def disk_full_is_one_line(
    folder: Callable[[], Path | None], newest: Callable[[Path], Path | None]
) -> Iterator[None]:
    """A full disk met inside the block becomes :class:`~isaaclab_mgpu.contract.errors.DiskFull` (exit 74)."""
    # folder() is the run folder as known by then, newest(folder) its newest whole checkpoint.
    try:
        yield
    except Exception as exc:
        full = full_error(exc)
        if full is None:
            raise
        where = folder() or Path(full.filename or ".").parent
        raise DiskFull(space.full_line(full, where, newest(where))) from None
