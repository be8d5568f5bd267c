"""Which Isaac Lab run a rank continues, from which checkpoint, and how every rank gets that file.

A rank of an Isaac Lab task continues a run when it is asked to (:func:`request`):

- the launcher's ``MGPU_RESUME`` or ``MGPU_RUN_DIR``, or the worker's ``--resume PATH``: a
  checkpoint file, or an Isaac Lab run folder (its newest checkpoint; none yet: iteration 0 in it);
- ``--resume`` without a path: the newest run of this task and library with a whole checkpoint;
- a restart (``MGPU_ATTEMPT`` > 0) with neither: this launch's own run (the folder Isaac Lab named
  from the launcher's stamp), from its newest checkpoint;
- ``--resume auto`` is the launcher's: what it chose comes as ``MGPU_RESUME``, else the run is new.

Rank 0 alone looks at the file system (:func:`locate`): the run folder, its Isaac Lab stamp (the
start of the folder's name) and the checkpoint :func:`~isaaclab_mgpu.contract.resume.newest_whole`
picks by the library's own naming. Isaac Lab then runs with ``--run_timestamp`` set to that stamp,
so it names the same folder, and ``--checkpoint`` set to the file, which its own resume code loads
on every rank.

**No shared file system needed** (torchrun launches): rank 0 sends the stamp and the checkpoint's
bytes through torchrun's key-value store before Isaac Lab starts; every other rank writes them to a
private temporary file that Isaac Lab loads (:func:`continuation`). Without a store (skrl JAX under
mgpu's JAX launcher) every rank resolves the request itself, and a rank that cannot read the
checkpoint stops with one line. How each library then goes on counting: :mod:`.patches`.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import env, layout, resume
from isaaclab_mgpu.contract.errors import UsageError

#: ``request`` for "this launch's own run" (a restart without an explicit source).
THIS_RUN = ":this-run:"
_STAMP_LEN = len(time.strftime(layout.STAMP_FORMAT))


@dataclass(frozen=True)
class Continuation:
    """What this rank hands Isaac Lab: the run folder's stamp and the checkpoint it loads."""

    stamp: str
    """``--run_timestamp``: the stamp Isaac Lab names the run folder from."""

    run_name: str | None = None
    """rsl-rl's run-name suffix read back from the continued folder's name (None: as given)."""

    experiment: str | None = None
    """rsl-rl's experiment name read back from the continued folder's parent (None: as given)."""

    folder: str | None = None
    """Rank 0's run folder being continued (None: a new run)."""

    checkpoint: str | None = None
    """Rank 0's checkpoint file (None: the run starts at iteration 0)."""

    local: str | None = None
    """This rank's readable copy of :attr:`checkpoint`: what Isaac Lab loads."""


def request(given: str | None, environ: Mapping[str, str]) -> str | None:
    """What this rank is asked to continue (a path, ``latest``, :data:`THIS_RUN`), or None."""
    if given == resume.AUTO and env.ATTEMPT in environ:
        given = None  # mgpu resolved --resume auto itself: what it found is MGPU_RESUME, else a new run
    source = environ.get(env.RESUME) or environ.get(env.RUN_DIR) or given
    if source is None and resume.attempt(environ) > 0:
        return THIS_RUN
    if source == resume.AUTO:
        raise UsageError("--resume auto is mgpu train's: it chooses the run before the ranks start")
    return source


def stamp_of(folder: Path) -> tuple[str, str | None]:
    """An Isaac Lab run folder's stamp and the rest of its name (rsl-rl's run name), or UsageError."""
    name = folder.name
    stamp = name[:_STAMP_LEN]
    try:
        datetime.datetime.strptime(stamp, layout.STAMP_FORMAT)
    except ValueError:
        raise UsageError(
            f"--resume {folder}: not an Isaac Lab run folder (named <{layout.STAMP_FORMAT} stamp>[_suffix])"
        ) from None
    rest = name[_STAMP_LEN + 1 :] if len(name) > _STAMP_LEN + 1 and name[_STAMP_LEN] == "_" else None
    return stamp, rest


def _newest(library: str, folder: Path) -> Path | None:
    """The checkpoint :func:`~isaaclab_mgpu.contract.resume.newest_whole` picks in ``folder``."""
    pick = resume.newest_whole(folder, library)
    found = pick.taken()
    if (warning := pick.warning()) is not None:
        from isaaclab_mgpu.rank.console import TrainingConsole

        TrainingConsole(0).note(warning)
    return found


def run_folder_of(library: str, checkpoint: Path) -> Path:
    """The Isaac Lab run folder a checkpoint file belongs to."""
    sub, _ = resume.ISAAC_CHECKPOINTS[library]
    folder = checkpoint.parent
    return folder.parent if sub and folder.name == sub else folder


def locate(
    library: str, task: str, source: str, stamp: str, log_root: Path = Path(layout.DEFAULT_LOG_ROOT)
) -> tuple[Path | None, Path | None]:
    """Rank 0: the run folder to continue and its checkpoint (either None: nothing to continue)."""
    runs = log_root.resolve() / library
    if source == THIS_RUN:
        mine = [f for f in runs.glob(f"*/{stamp}*") if f.is_dir() and _same_task(f, task)]
        if len(mine) > 1:
            raise UsageError(
                f"restart: two Isaac Lab run folders carry this launch's stamp: {mine[0]}, {mine[1]}"
            )
        if not mine:
            return None, None  # the first attempt died before Isaac Lab named its folder
        return mine[0], _newest(library, mine[0])
    if source == resume.LATEST:
        for folder in sorted((f for f in runs.glob("*/*") if f.is_dir()), key=lambda f: f.name, reverse=True):
            if resume.newest_whole(folder, library).checkpoint and _same_task(folder, task):
                return folder, _newest(library, folder)
        raise UsageError(
            f"--resume: no {library} run of {task} with a checkpoint under {runs}; give --resume PATH"
        )
    path = Path(source).resolve()
    if path.is_dir():
        folder, checkpoint = path, _newest(library, path)
    elif path.is_file():
        if not resume.complete(path):
            raise UsageError(f"--resume {source}: the checkpoint is cut short (saving it was interrupted)")
        folder, checkpoint = run_folder_of(library, path), path
    else:
        raise UsageError(f"--resume {source}: no such Isaac Lab run folder or checkpoint file")
    named = _manifest(folder)
    if named is not None and (named[0] != library or not _same_task(folder, task)):
        raise UsageError(
            f"--resume {source}: a {named[0]} run of {named[1]}, not {library} on {task}; "
            "resume it with the options it was started with"
        )
    return folder, checkpoint


def plan(library: str, task: str, source: str | None, stamp: str, *, restarted: bool = False) -> Continuation:
    """Rank 0's continuation of ``source`` (a new run under ``stamp`` when there is none)."""
    # On a restart a checkpoint file given at launch stands for its run folder (its newest checkpoint).
    if source is None:
        return Continuation(stamp=stamp)
    if restarted and source not in (THIS_RUN, resume.LATEST) and Path(source).is_file():
        source = str(run_folder_of(library, Path(source).resolve()))
    folder, checkpoint = locate(library, task, source, stamp)
    if folder is None:
        return Continuation(stamp=stamp)
    folder_stamp, rest = stamp_of(folder)
    rsl = library == "rsl_rl"  # skrl and rl-games name the rest of the folder from their agent config
    return Continuation(
        stamp=folder_stamp,
        run_name=rest if rsl else None,
        experiment=folder.parent.name if rsl else None,
        folder=str(folder),
        checkpoint=str(checkpoint) if checkpoint else None,
        local=str(checkpoint) if checkpoint else None,
    )


@contextlib.contextmanager
def continuation(
    library: str,
    task: str,
    given: str | None,
    rank: int,
    world_size: int,
    environ: Mapping[str, str],
    stamp: str,
) -> Iterator[Continuation]:
    """This rank's :class:`Continuation`, rank 0's plan handed to every rank; copies removed on exit."""
    source = request(given, environ)
    restarted = resume.attempt(environ) > 0
    store = _store(environ) if world_size > 1 else None
    if store is None:
        shared = "; without torchrun's store every node needs the run folder (a shared file system)"
        try:
            cont = plan(library, task, source, stamp, restarted=restarted)
        except UsageError as exc:
            raise UsageError(f"rank {rank}: {exc}{shared if rank else ''}") from None
        if cont.local is not None and not os.access(cont.local, os.R_OK):
            raise UsageError(f"--resume: rank {rank} cannot read {cont.local}{shared}")
        yield cont
        return
    # One key per torchrun launch and restart: a store outlives neither, and keys are never reused.
    launch = environ.get("TORCHELASTIC_RUN_ID", ""), environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    key = "mgpu/isaac-resume/{}/{}".format(*launch)
    if rank == 0:
        cont = plan(library, task, source, stamp, restarted=restarted)
        if cont.checkpoint is not None:
            store.set(key + "/data", Path(cont.checkpoint).read_bytes())
        store.set(key, json.dumps({**cont.__dict__, "local": None}))
        yield cont
        return
    cont = Continuation(**json.loads(store.get(key)))
    if cont.checkpoint is None:
        yield cont
        return
    folder = tempfile.mkdtemp(prefix="mgpu-resume-")
    try:
        local = Path(folder) / Path(cont.checkpoint).name  # the name carries skrl's timestep
        local.write_bytes(store.get(key + "/data"))
        yield replace(cont, local=str(local))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _store(environ: Mapping[str, str]) -> Any:
    """A client of torchrun's own key-value store (a ``TCPStore``) where torchrun started the ranks."""
    if environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    import torch.distributed as dist

    from isaaclab_mgpu.contract import progress

    timeout = progress.process_group_timeout(startup=True) or datetime.timedelta(minutes=30)
    return dist.TCPStore(
        environ["MASTER_ADDR"], int(environ["MASTER_PORT"]), is_master=False, timeout=timeout
    )


def _manifest(folder: Path) -> tuple[str, str] | None:
    """(library, task) of Isaac Lab's ``run.json`` manifest in ``folder``; None: no readable one."""
    try:
        data = json.loads((folder / "run.json").read_text())
        return str(data["library"]), str(data["task"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _same_task(folder: Path, task: str) -> bool:
    """False only when the folder's Isaac Lab manifest names another task."""
    named = _manifest(folder)
    if named is None:
        return True
    from isaaclab_rl.entrypoints.common import normalize_task_name  # how Isaac Lab writes it there

    return named[1] == normalize_task_name(task)
