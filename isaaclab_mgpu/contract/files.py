"""One way to write a file that another process may read at any moment: all of it or none.

:func:`atomic_open` writes to a fresh temporary file beside the target, made with
:func:`tempfile.mkstemp` (a new name, created exclusively: never an existing file, never through a
symlink planted at a fixed name), then renames it over the target; a reader sees the old file or
the new one, never half. On an error the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """A temporary file beside ``path`` (mode ``"w"`` or ``"wb"``), renamed over ``path`` on exit."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` atomically."""
    with atomic_open(path) as f:
        f.write(text)


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any] | list[Any]) -> None:
    """Replace ``path`` with ``data`` as strict JSON (no NaN or infinity), indented, atomically."""
    write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
