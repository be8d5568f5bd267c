"""The W&B run of a ``--logger wandb`` training: one per run, opened by rank 0 alone, its id recorded.

Each library opens the W&B run itself (rsl-rl's ``WandbLogWriter``, skrl's ``Agent.init``); the worker
only decides, through W&B's own environment variable, which run that is:

- ``WANDB_RUN_ID``: chosen by the worker before the library starts (a given one is kept), so the id is
  known up front and recorded in ``summary.json`` (``wandb_run_id``) even when the run dies early. A
  later launch that continues this training sets ``WANDB_RUN_ID`` to the recorded id and
  ``WANDB_RESUME=allow`` (:func:`run_id` with ``resume_id``), and the library's ``wandb.init`` then
  continues the same W&B run.

W&B keeps its files where it always does: ``./wandb/`` of the working folder (``WANDB_DIR`` moves
it), ``offline-run-<time>-<id>/`` with ``WANDB_MODE=offline`` (no network; ``wandb sync`` uploads it
later). Not in the run folder: skrl's TensorBoard sync watches that folder and would read W&B's own
copy of the event file back a second time.

Ranks other than 0 get no variables and open no W&B run (skrl's own attempt to is turned off in
:mod:`isaaclab_mgpu.rank.patches.skrl`). The variables are set only while the training runs and
restored afterwards, so an in-process run leaves its caller's environment as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import string
from collections.abc import Iterator, Mapping

RUN_ID = "WANDB_RUN_ID"
RESUME = "WANDB_RESUME"
_ALPHABET = string.ascii_lowercase + string.digits


def run_id(logger: str, rank: int, environ: Mapping[str, str], resume_id: str | None = None) -> str | None:
    """Rank 0's W&B run id (a given ``WANDB_RUN_ID``, ``resume_id``, else a new one); None: no W&B."""
    if logger != "wandb" or rank != 0:
        return None
    return environ.get(RUN_ID) or resume_id or new_id()


def new_id() -> str:
    """A new W&B run id, drawn as W&B draws its own: 8 characters of [a-z0-9]."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(8))


@contextlib.contextmanager
def environment(wandb_id: str | None, *, resume: bool = False) -> Iterator[None]:
    """Set W&B's variables for ``wandb_id`` (nothing when None) while the block runs."""
    if wandb_id is None:
        yield
        return
    wanted = {RUN_ID: wandb_id}
    if resume:
        wanted[RESUME] = "allow"
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
