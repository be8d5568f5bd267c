"""A rank's first moments: a stop request while it is still starting ends it quietly.

Python turns SIGINT into ``KeyboardInterrupt``, whose traceback from the middle of ``import torch``
is all a user would see of a Ctrl-C pressed during start-up. :func:`quiet_interrupts` makes SIGINT
end the process with :data:`~isaaclab_mgpu.contract.errors.EXIT_INTERRUPTED` instead (a
``SystemExit``, which prints nothing); the training loop's own handler replaces it while training.
Standard library only: it runs before anything heavy is imported.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(EXIT_INTERRUPTED)


def quiet_interrupts() -> None:
    """Exit with the interrupted code, without a traceback, on SIGINT (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _stop)
