"""One way to write a file that another process may read at any moment: all of it or none.

:func:`atomic_open` writes to a fresh temporary file beside the target, made with
:func:`tempfile.mkstemp` (a new name, created exclusively: never an existing file, never through a
symlink planted at a fixed name), then renames it over the target; a reader sees the old file or
the new one, never half. On an error the temporary file is removed and the target is untouched,
and an error that names no file (a ``write`` that found the disk full) is raised naming the target.

``durable=True`` (checkpoints) also survives a crash of the machine: the file's data is
fsynced before the rename and the folder after it (:func:`fsync_dir`), so after a power loss
the name holds the old file or the whole new one, never a file whose pages were never written.

:func:`read_json` is the reading side for a reader that takes a missing or torn file as none.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, durable: bool = False) -> Iterator[IO[Any]]:
    """A temporary file beside ``path`` (mode ``"w"`` or ``"wb"``), renamed over ``path`` on exit."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _naming(exc, target) from None
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, target) from None
        raise
    if durable:
        fsync_dir(target.parent)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """``fsync`` a folder, so a rename into it survives a crash (file systems that cannot: no-op)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _naming(exc: OSError, target: Path) -> OSError:
    """``exc``, naming ``target`` when it names no file (``write``'s errors carry no name)."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(target))


def write_text(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` atomically (``durable``: fsynced)."""
    with atomic_open(path, durable=durable) as f:
        f.write(text)


def write_json(
    path: str | os.PathLike[str], data: Mapping[str, Any] | list[Any], *, durable: bool = False
) -> None:
    """Replace ``path`` with ``data`` as strict JSON (no NaN or infinity), indented, atomically."""
    write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n", durable=durable)


def read_json(path: str | os.PathLike[str], encoding: str | None = None) -> Any:
    """The JSON value in ``path``; None when it cannot be read or is not JSON (as for ``null``)."""
    try:
        return json.loads(Path(path).read_text(encoding=encoding))
    except (OSError, ValueError):
        return None
