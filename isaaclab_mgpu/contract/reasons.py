"""Why a rank gave up, in one line: written by the rank, read by its node's ``mgpu`` for the final line.

A rank that ends on an error of its own (bad input, a refused checkpoint, a full disk) says so on
its stderr, where torchrun's failure summary buries it; so it also writes the line to
``reason.txt`` in its log folder (:mod:`.elastic`), and ``mgpu train`` ends with it: ``error:
rank 1 on node9: <reason>``. Outside ``mgpu train`` :func:`record` does nothing.

Standard library only: both processes import it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from isaaclab_mgpu.contract import elastic, env

#: Longest reason kept (a message that names a long path is still one readable line).
MAX_CHARS = 2000


def record(message: str, environ: Mapping[str, str] | None = None) -> None:
    """Write ``message`` (made one line) as this rank's reason; never raises."""
    environ = os.environ if environ is None else environ
    error_file = environ.get(env.ERROR_FILE)
    if not error_file:
        return
    line = " ".join(message.split())[:MAX_CHARS]
    with contextlib.suppress(OSError):
        path = elastic.beside_error_file(error_file, elastic.REASON_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n", encoding="utf-8")


def read(rank_folder: str | Path | None) -> str | None:
    """The reason a rank recorded in its log folder ``rank_folder``, or None."""
    if rank_folder is None:
        return None
    try:
        text = (Path(rank_folder) / elastic.REASON_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    line = " ".join(text.split())[:MAX_CHARS]
    return line or None
