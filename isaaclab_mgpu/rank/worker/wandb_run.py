"""The W&B run of a ``--logger wandb`` training: one per run, opened by rank 0 alone, its id recorded.

Each library opens the W&B run itself (rsl-rl's ``WandbLogWriter``, skrl's ``Agent.init``); the
worker only chooses which run, through W&B's ``WANDB_RUN_ID``, before the library starts (a given
one is kept), so the id is recorded in ``summary.json`` (``wandb_run_id``) even when the run dies
early. A later launch that continues this training sets it to the recorded id with
``WANDB_RESUME=allow`` (:func:`run_id` with ``resume_id``): the same W&B run goes on.

W&B keeps its files where it always does (``./wandb/``, or ``WANDB_DIR``), not in the run folder,
where skrl's TensorBoard sync would read W&B's copy of the event file back a second time. Ranks
other than 0 get no variables and open no W&B run (:mod:`isaaclab_mgpu.rank.patches.skrl`, fix 7).
The variables are set only while the training runs, so an in-process run leaves its caller's
environment as it was.
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
