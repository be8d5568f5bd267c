"""TensorBoard: a resumed run's curve goes on from its checkpoint, not beside an older one.

A run that stopped after its last checkpoint had already written the steps after it; the resumed
run writes those steps again into a new event file of the same folder. TensorBoard's loader
(``event_accumulator.EventAccumulator``) purges earlier events from step *s* on only when it reads a
``SessionLog.START`` event at *s* (``_CheckForRestartAndMaybePurge``; for version-2 event files it
ignores steps that merely go back). That event is what ``torch.utils.tensorboard.SummaryWriter``
writes when created with ``purge_step``; :func:`restart_curve` writes it into a writer the library
already created, for libraries that give no way to pass ``purge_step``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def restart_curve(add_event: Callable[[Any], None], step: int) -> None:
    """Write a ``SessionLog.START`` at ``step``: TensorBoard drops older events from ``step`` on."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    add_event(Event(step=step, wall_time=time.time(), session_log=SessionLog(status=SessionLog.START)))
