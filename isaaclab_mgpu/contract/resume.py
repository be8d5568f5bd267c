"""Restarts, resume and requeue: what the launcher and a rank agree on. Standard library only.

``mgpu train`` owns a run's lifetime across attempts (see :mod:`isaaclab_mgpu.launcher.attempts`).
It tells every rank it starts the run folder, what rank 0 resumes from, the attempt number, the
checkpoint-request file and, for a rank that names its own folder (Isaac Lab's), where to report
it, through the environment (:mod:`.env`: ``RUN_DIR``, ``RESUME``, ``ATTEMPT``,
``CHECKPOINT_REQUEST``, ``RUN_DIR_REPORT``).

A rank of any kind (the built-in worker, an Isaac Lab rank, a user script) follows the same
contract: rank 0 alone reads ``MGPU_RESUME``'s checkpoint and hands its state to the others over the
process group (no shared file system needed); every rank calls
:func:`checkpoint_requested` once per iteration and puts the answer into a collective it already
runs, so all ranks stop at the same iteration; ``--max_iterations`` is the run's total.

Checkpoints are ``model_<N>.pt`` (``N`` completed iterations) with a small JSON file beside it,
``model_<N>.json`` (:class:`CheckpointMeta`), so the launcher can refuse a mismatched ``--resume``
and name the iteration a restart resumes from without importing torch.

**Which checkpoint a resume continues from** is chosen by one function, :func:`newest_whole`,
for the launcher and both rank paths alike (the built-in worker's ``model_<N>.pt``, an Isaac Lab
library's own names, :data:`ISAAC_CHECKPOINTS`): the highest counter in the run folder (iteration,
timestep or epoch, never the file's time) that is whole. A torn file (copied half, lost pages, a
crash between ``model_<N>.pt`` and its JSON) is passed over to the one before, in one warning line
(:meth:`Pick.warning`): one cut short (:func:`complete`), one of the built-in worker's without its
readable JSON, or, on rank 0, one that does not load; none whole is one error line
(:meth:`Pick.taken`). A file that loads but is refused as unsafe is never passed over, and a
checkpoint named by its path is taken as it is, or refused. ``--resume auto`` and a bare
``--resume``: :data:`AUTO` and :data:`LATEST`.

**Keeping the newest N** (``--keep_checkpoints N``, ``MGPU_KEEP_CHECKPOINTS``): after rank 0
wrote a checkpoint whole, it deletes the older ones beyond the newest N (:func:`prune`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from isaaclab_mgpu.contract import env, files, records
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.contract.records import Count, Range
from isaaclab_mgpu.contract.signals import stop_requested

#: Format tag of mgpu's checkpoints and their metadata files.
FORMAT = "isaaclab-mgpu/1"
#: ``model_<N>.pt``: the built-in worker's checkpoint names (and rsl-rl's); the group is ``N``.
CHECKPOINT = re.compile(r"^model_(\d+)\.pt$")
#: ``--resume auto``, the one meaning: ``mgpu train`` (node 0's launcher, before any rank starts)
#: continues the run a requeued SLURM job trained, else the newest unfinished run of this task,
#: library and framework, else starts a new run; the ranks get its choice as ``MGPU_RESUME``
#: (absent: a new run). A rank run by hand refuses it.
AUTO = "auto"
#: ``--resume`` without a path. Built-in worker under ``mgpu train``: as :data:`AUTO`, but with no
#: unfinished run it is refused (exit 2). An Isaac Lab rank, or a rank run by hand: the newest
#: run of this experiment (Isaac Lab: task and library) holding a checkpoint.
LATEST = "latest"


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint is, as ``model_<N>.json`` beside ``model_<N>.pt`` records it."""

    iteration: Count
    """Completed iterations when it was saved."""

    library: str
    """``rsl_rl``, ``skrl`` or ``rl_games``."""

    framework: str
    """``torch`` or ``jax``."""

    task: str
    """The task it trained."""

    world_size: Annotated[int, Range(1)]
    """Ranks of the run that saved it."""

    total: Count | None = None
    """The run's ``--max_iterations`` (its total), when known."""

    format: str = FORMAT
    """Format tag."""

    def identity(self) -> tuple[str, str, str]:
        """(library, framework, task): a resume must match all three."""
        return self.library, self.framework, self.task


def checkpoint_path(folder: Path, iteration: int) -> Path:
    """``<folder>/model_<iteration>.pt``: the checkpoint after ``iteration`` completed iterations."""
    return Path(folder) / f"model_{iteration}.pt"


def meta_path(checkpoint: Path) -> Path:
    """The metadata file beside ``checkpoint``."""
    return Path(checkpoint).with_suffix(".json")


def iteration_of(checkpoint: Path) -> int | None:
    """``N`` of a ``model_<N>.pt`` name, else None."""
    m = CHECKPOINT.match(Path(checkpoint).name)
    return int(m.group(1)) if m else None


def saved_iteration(checkpoint: Path) -> int | None:
    """The iterations ``checkpoint`` holds: its JSON's, else its name's ``N``."""
    meta = read_meta(checkpoint)
    return meta.iteration if meta is not None else iteration_of(checkpoint)


def write_meta(checkpoint: Path, meta: CheckpointMeta) -> Path:
    """Write ``checkpoint``'s metadata file atomically and durably (:mod:`.files`)."""
    path = meta_path(checkpoint)
    files.write_json(path, records.plain(meta), durable=True)
    return path


def read_meta(checkpoint: Path) -> CheckpointMeta | None:
    """The metadata of ``checkpoint``, or None when it is missing, unreadable or malformed."""
    data = files.read_json(meta_path(checkpoint))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return records.read(CheckpointMeta, data).whole()  # one bad field: the file is not to be trusted


#: Checkpoint files of each library inside an Isaac Lab run folder: (sub-folder, name pattern).
#: The pattern's group is the counter that orders them (rsl-rl: iteration; skrl: timestep;
#: rl-games: epoch). The built-in worker's ``model_<N>.pt`` are rsl-rl's names.
ISAAC_CHECKPOINTS = {
    "rsl_rl": ("", CHECKPOINT),
    "skrl": ("checkpoints", re.compile(r"^agent_(\d+)\.(?:pt|pickle)$")),  # torch, JAX
    "rl_games": ("nn", re.compile(r"^last_.+_ep_(\d+)_rew_.*\.pth$")),  # epochs; <name>.pth is the best
}


def checkpoints(folder: Path, library: str | None = None) -> list[tuple[int, Path]]:
    """Every checkpoint file (regular, whole or not) of a run folder of ``library``, lowest counter first."""
    sub, pattern = ISAAC_CHECKPOINTS[library or "rsl_rl"]
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(Path(folder) / sub if sub else folder):
            m = pattern.match(entry.name)
            with contextlib.suppress(OSError):
                if m and stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    found.append((int(m.group(1)), Path(entry.path)))
    return sorted(found)


def complete(checkpoint: Path) -> bool:
    """False for a torch checkpoint cut short (its zip archive has no end record), else True."""
    # torch.save's zip directory is at its end; other formats (skrl JAX's pickles) have no cheap check.
    if Path(checkpoint).suffix not in (".pt", ".pth"):
        return True
    try:
        return zipfile.is_zipfile(checkpoint)
    except OSError:
        return False


def flaw(checkpoint: Path, library: str | None = None) -> str | None:
    """Why ``checkpoint`` is not whole (None: it is): cut short, or the built-in worker's without its JSON."""
    if not complete(checkpoint):
        return "cut short"
    if library is None and read_meta(checkpoint) is None:
        return f"no readable {meta_path(checkpoint).name}"
    return None


@dataclass(frozen=True)
class Pick:
    """The checkpoint a resume of a run folder continues from, and the newer ones passed over."""

    folder: Path
    """The run folder."""

    checkpoint: Path | None
    """Its newest whole checkpoint (None: none whole, or none at all)."""

    passed: tuple[tuple[Path, str], ...] = ()
    """The newer ones that are not whole, newest first, each with why (``cut short``)."""

    def warning(self) -> str | None:
        """The one line rank 0 prints when it passed over a torn checkpoint (None: it did not)."""
        if not self.passed or self.checkpoint is None:
            return None
        torn = ", ".join(f"{p} ({why})" for p, why in self.passed)
        return f"warning: passed over a checkpoint that is not whole: {torn}; resuming from {self.checkpoint}"

    def taken(self) -> Path | None:
        """:attr:`checkpoint`; UsageError when the folder holds checkpoints but none is whole."""
        if self.checkpoint is None and self.passed:
            names = ", ".join(p.name for p, _ in self.passed)
            why = "; ".join(dict.fromkeys(w for _, w in self.passed))
            raise UsageError(
                f"--resume {self.folder}: no whole checkpoint there ({names}: {why}); give --resume "
                "a whole checkpoint file, or start a new run without --resume"
            )
        return self.checkpoint


def newest_whole(
    folder: Path, library: str | None = None, loads: Callable[[Path], str | None] | None = None
) -> Pick:
    """The checkpoint a resume of ``folder`` continues from: the newest whole one that ``loads``."""
    passed: list[tuple[Path, str]] = []
    for _, path in reversed(checkpoints(folder, library)):
        why = flaw(path, library) or (loads(path) if loads is not None else None)
        if why is None:
            return Pick(Path(folder), path, tuple(passed))
        passed.append((path, why))
    return Pick(Path(folder), None, tuple(passed))


def keep_checkpoints(environ: Mapping[str, str] | None = None) -> int | None:
    """``--keep_checkpoints`` as mgpu passed it (None: keep every checkpoint)."""
    value = (os.environ if environ is None else environ).get(env.KEEP_CHECKPOINTS, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def prune(found: list[tuple[int, Path]], saved: Path, keep: int | None) -> list[Path]:
    """Delete ``found``'s checkpoints older than the newest ``keep`` up to ``saved``; return them."""
    # One above saved's counter is an earlier attempt's, which the run overwrites: kept. Call it
    # after saved's durable write, so nothing goes before it is whole on disk.
    if keep is None:
        return []
    at = next((n for n, p in found if Path(p) == Path(saved)), None)
    if at is None:
        return []
    older = [p for n, p in sorted(found) if n <= at and Path(p) != Path(saved)]
    doomed = older[: max(len(older) - (keep - 1), 0)]
    for path in doomed:
        for name in (path, meta_path(path)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
    return doomed


def checkpoint_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when this node's mgpu asks the ranks to checkpoint and stop (one ``stat``; call per iteration)."""
    path = (os.environ if environ is None else environ).get(env.CHECKPOINT_REQUEST)
    return bool(path) and os.path.exists(path)


def stop_at_checkpoint(done: int, total: int | None, environ: Mapping[str, str] | None = None) -> bool:
    """This rank's vote to save and stop after iteration ``done``: mgpu's request or the requeue signal."""
    # Never at the total: the run ends finished anyway, and a requeue would only find it done.
    if total is not None and done >= total:
        return False
    return checkpoint_requested(environ) or stop_requested()


def report_run_dir(folder: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Rank 0: tell the launcher the run folder it named (atomically); False outside ``mgpu train``."""
    path = (os.environ if environ is None else environ).get(env.RUN_DIR_REPORT)
    if not path:
        return False
    try:
        files.write_text(path, str(Path(folder).resolve()))
    except OSError:
        return False  # the launcher's folder is gone: it no longer waits for the report
    return True


def reported_run_dir(report: str | Path) -> Path | None:
    """The launcher: the run folder rank 0 reported in ``report``, if it did and the folder exists."""
    try:
        folder = Path(Path(report).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return folder if folder.is_absolute() and folder.is_dir() else None


def attempt(environ: Mapping[str, str] | None = None) -> int:
    """This launch's attempt number (0 outside ``mgpu train`` or on its first launch)."""
    value = (os.environ if environ is None else environ).get(env.ATTEMPT, "0")
    return int(value) if value.isdigit() else 0


def own_run_folders(parent: Path, root: Path) -> list[Path]:
    """Run folders in ``parent`` (inside log root ``root``), newest first, that ``--resume`` may choose."""
    # Real folders of this user only: anyone who can write into a shared log root can plant folders.
    try:
        root_real = Path(root).resolve(strict=True)
        parent_real = Path(parent).resolve(strict=True)
        inside = parent_real == root_real or root_real in parent_real.parents
        entries = list(os.scandir(parent_real)) if inside else []
    except OSError:
        return []
    uid = os.getuid()
    found = []
    for e in entries:
        with contextlib.suppress(OSError):
            info = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not e.name.startswith("."):
                found.append(Path(parent) / e.name)  # as the caller spells it (relative stays relative)
    return sorted(found, key=lambda p: p.name, reverse=True)
