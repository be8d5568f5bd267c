"""Which run a launch belongs to: a new run folder, or the run it continues. Decided before spawning.

Node 0's launcher decides, for the built-in worker, once per ``mgpu train`` (restarts reuse it):
a SLURM job requeued by SLURM (``SLURM_RESTART_COUNT`` > 0) continues the run whose recorded
SLURM job id is this job's (the batch script runs the same ``mgpu train`` again); ``--resume``
continues the run docs/training.md names ("Resume, restarts, requeue": which run a resume takes;
a folder's checkpoint is :func:`isaaclab_mgpu.contract.resume.newest_whole`'s, as rank 0 picks
it); otherwise a new folder, created exclusively (two runs started in the same second get two).

:func:`choose` makes that choice without writing anything (``dry-run`` says what it would take,
:func:`preview`); :func:`place` acts on it.

An Isaac Lab task's folder is named by its rank 0 (:attr:`~.attempts.RunPlace.named_by_rank`): a
requeued SLURM job and ``--resume auto`` find the run they continue by its summary and hand its
folder to rank 0 (``MGPU_RESUME``); ``--resume PATH`` and ``--resume`` are resolved by the rank
(:mod:`isaaclab_mgpu.rank.isaac_resume`).

Candidates are only run folders inside the log root that this user owns, never reached through a
symlink (:func:`isaaclab_mgpu.contract.resume.own_run_folders`). Nothing here writes ``summary.json``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from isaaclab_mgpu.contract import layout, resume
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.errors import UsageError
from isaaclab_mgpu.launcher import runs
from isaaclab_mgpu.launcher.attempts import RunPlace
from isaaclab_mgpu.launcher.resolve import ResolvedSpec
from isaaclab_mgpu.launcher.spec import LaunchSpec


@dataclass(frozen=True)
class Identity:
    """What a run trains: a checkpoint continues only a run of the same."""

    library: str
    framework: str
    task: str
    experiment: str
    log_root: str
    run_name: str | None
    total: int | None


@dataclass(frozen=True)
class Placement:
    """The run folder, what the first attempt resumes from, and what to tell people about it."""

    place: RunPlace
    """Handed to :func:`isaaclab_mgpu.launcher.attempts.run_attempts`."""

    notes: tuple[str, ...] = ()
    """One line each: which run is continued and from which iteration, a world-size change."""

    continued: bool = False
    """True when an existing run folder is continued."""

    done: bool = False
    """The continued run is already at its total: nothing is started and nothing written."""


def identity_of(spec: LaunchSpec) -> tuple[Identity, str | None]:
    """The run's identity and its ``--resume`` value, from the worker's own parse of the arguments."""
    from isaaclab_mgpu.contract.settings import DEFAULTS, FALLBACK
    from isaaclab_mgpu.contract.worker_args import parse

    # The spec's own parse, cached; a refused one is parsed again here to raise its error.
    args = spec.worker or parse(list(spec.training_args))
    total = args.max_iterations or DEFAULTS.get(args.task, FALLBACK).max_iterations
    ident = Identity(
        library=spec.library,
        framework=spec.framework,
        task=args.task,
        experiment=args.experiment,
        log_root=args.log_root,
        run_name=args.run_name,
        total=total,
    )
    return ident, args.resume


@dataclass(frozen=True)
class Choice:
    """The existing run a launch would continue, chosen without writing anything."""

    folder: Path
    """Its run folder."""

    source: str
    """What rank 0 loads: the folder (its newest whole checkpoint) or one checkpoint file."""

    checkpoint: Path | None
    """The checkpoint that is loaded (None: the folder holds none)."""

    at: int
    """Completed iterations at that checkpoint."""

    why: str
    """Why this run: ``--resume auto: the newest unfinished run`` and the like."""

    notes: tuple[str, ...] = ()
    """What else to say (another world size)."""


def choose(
    resolved: ResolvedSpec, world_size: int | None, ident: Identity, given: str | None
) -> Choice | None:
    """The built-in worker's run this launch continues, or None for a new run; writes nothing."""
    experiment = Path(ident.log_root) / ident.library / ident.experiment
    root = Path(ident.log_root)
    folder: Path | None = None
    source: str | None = None
    why = ""
    if resolved.slurm_job_id and resolved.slurm_restart_count > 0:
        folder = _slurm_run(resume.own_run_folders(experiment, root), resolved.slurm_job_id)
        why = f"SLURM requeued job {resolved.slurm_job_id} (restart {resolved.slurm_restart_count})"
    if folder is None and given in (resume.AUTO, resume.LATEST):
        # One meaning for both: the newest unfinished run of this task, library and framework.
        folder = unfinished_run(resume.own_run_folders(experiment, root), ident)
        flag = "--resume auto" if given == resume.AUTO else "--resume"
        why = f"{flag}: the newest unfinished run"
        if folder is None and given == resume.LATEST:
            raise UsageError(
                f"--resume: no unfinished {ident.library}/{ident.framework} run of {ident.task} under "
                f"{experiment}; give --resume PATH to continue a finished one, or --resume auto to "
                "start a new run when none is unfinished"
            )
    elif folder is None and given:
        folder, source = _given(Path(given))
        why = f"--resume {given}"
    if folder is None:
        return None
    source = source or str(folder)
    checkpoint = resume.newest_whole(folder).taken() if Path(source).is_dir() else Path(source)
    notes: list[str] = []
    at = _check(checkpoint, ident, world_size, notes) if checkpoint is not None else 0
    return Choice(folder, source, checkpoint, at, why, tuple(notes))


def preview(resolved: ResolvedSpec, world_size: int | None) -> str | None:
    """What ``dry-run`` says of the run a resume would take (None: the launch starts a new run)."""
    spec = resolved.spec
    if not spec.builtin_worker or (resolved.node_rank or 0) != 0:
        return None
    ident, given = identity_of(spec)
    if ident.task.startswith("Isaac-"):
        if given is None and not resolved.slurm_restart_count:
            return None
        folder, notes = _isaac_run(resolved, ident, given)
        if folder is not None or notes:
            return f"train would resume: {notes[0] if notes else folder}"
        return f"train would resume: --resume {given}: Isaac Lab's rank 0 chooses by its checkpoint names"
    try:
        choice = choose(resolved, world_size, ident, given)
    except UsageError as exc:
        return f"train would refuse: {exc}"
    if choice is None:
        new = "train would start a new run: --resume auto found no unfinished run"
        return new if given == resume.AUTO else None
    loads = f"from {choice.checkpoint}" if choice.checkpoint is not None else "from nothing (no checkpoint)"
    total = f" of {ident.total}" if ident.total else ""
    return f"train would resume: {choice.why}: {choice.folder} at iteration {choice.at}{total}, {loads}"


def place(resolved: ResolvedSpec, world_size: int | None) -> Placement:
    """Choose (and create, when new) the run folder for this launch; nothing when not node 0."""
    spec = resolved.spec
    if not spec.builtin_worker or (resolved.node_rank or 0) != 0:
        return Placement(RunPlace())
    ident, given = identity_of(spec)
    if ident.task.startswith("Isaac-"):
        folder, notes = _isaac_run(resolved, ident, given)
        place = RunPlace(resume=str(folder) if folder is not None else None, named_by_rank=True)
        return Placement(place, notes, continued=folder is not None)
    experiment = Path(ident.log_root) / ident.library / ident.experiment
    choice = choose(resolved, world_size, ident, given)
    if choice is not None:
        folder, source, at, why = choice.folder, choice.source, choice.at, choice.why
        if ident.total is not None and at >= ident.total:
            # Starting the ranks would only rewrite the finished run's record with an empty segment.
            done = (
                f"{why}: {folder} is at iteration {at} of --max_iterations {ident.total}: nothing to "
                "train, nothing started; raise --max_iterations to train on"
            )
            return Placement(RunPlace(folder, source), (done,), continued=True, done=True)
        total = f" of {ident.total}" if ident.total else ""
        notes = (f"{why}: continuing {folder} at iteration {at}{total}", *choice.notes)
        return Placement(RunPlace(folder, source), notes, continued=True)
    stamp = resolved.run_stamp or time.strftime("%Y-%m-%d_%H-%M-%S")
    try:
        folder = runs.create_run_folder(experiment, stamp, ident.run_name)
    except OSError as exc:
        raise UsageError(f"cannot create the run folder under {experiment}: {exc}") from None
    new_notes: tuple[str, ...] = ()
    if given == resume.AUTO:
        new_notes = (f"--resume auto: no unfinished run under {experiment}; starting {folder}",)
    return Placement(RunPlace(folder, None), new_notes)


def _isaac_run(
    resolved: ResolvedSpec, ident: Identity, given: str | None
) -> tuple[Path | None, tuple[str, ...]]:
    """The Isaac Lab run a requeued SLURM job or ``--resume auto`` continues; None: the rank decides."""
    root = Path(layout.DEFAULT_LOG_ROOT)  # Isaac Lab writes under ./logs
    library = root / ident.library
    experiments = sorted(p for p in library.glob("*") if p.is_dir()) if library.is_dir() else []
    folders = sorted(
        (f for e in experiments for f in resume.own_run_folders(e, root)), key=lambda f: f.name, reverse=True
    )
    job = resolved.slurm_job_id
    if job and resolved.slurm_restart_count > 0 and (folder := _slurm_run(folders, job)) is not None:
        why = f"SLURM requeued job {job} (restart {resolved.slurm_restart_count})"
        return folder, (f"{why}: continuing {folder} from its newest checkpoint",)
    if given != resume.AUTO:
        return None, ()
    if (folder := unfinished_run(folders, ident)) is not None:
        return folder, (f"--resume auto: the newest unfinished run: continuing {folder}",)
    return None, (f"--resume auto: no unfinished {ident.library} run of {ident.task} under {library}; "
                  "starting a new one",)  # fmt: skip


def _given(path: Path) -> tuple[Path, str]:
    """``--resume PATH``: the run folder it continues and the checkpoint (or folder) to load."""
    if path.is_dir():
        if not resume.checkpoints(path):
            raise UsageError(f"--resume {path}: no model_<N>.pt in this folder")
        return path, str(path)
    if path.is_file():
        if resume.iteration_of(path) is None:
            raise UsageError(f"--resume {path}: not a model_<N>.pt checkpoint of a run folder")
        return path.parent, str(path)
    raise UsageError(f"--resume {path}: no such run folder or checkpoint file")


def _check(checkpoint: Path, ident: Identity, world_size: int | None, notes: list[str]) -> int:
    """Refuse a checkpoint of another task, library or framework; return its iteration."""
    meta = resume.read_meta(checkpoint)
    if meta is None:
        raise UsageError(
            f"--resume {checkpoint}: no readable {resume.meta_path(checkpoint).name} beside it; "
            "not a checkpoint of mgpu's built-in worker"
        )
    if meta.identity() != (ident.library, ident.framework, ident.task):
        raise UsageError(
            f"--resume {checkpoint}: written by {meta.library}/{meta.framework} on {meta.task}, "
            f"not {ident.library}/{ident.framework} on {ident.task}; resume it with those options"
        )
    if world_size is not None and meta.world_size != world_size:
        notes.append(f"resuming a checkpoint of {meta.world_size} ranks on {world_size} ranks")
    return meta.iteration


def _slurm_run(folders: Iterable[Path], job_id: str) -> Path | None:
    """The first of ``folders`` (newest first) that SLURM job ``job_id`` trained."""
    found = (f for f in folders if (s := summaries.read(f)) is not None and s.slurm_job_id == job_id)
    return next(found, None)


def unfinished_run(folders: Iterable[Path], ident: Identity) -> Path | None:
    """The first of ``folders`` (newest first) left unfinished by a run of ``ident``'s training."""
    for folder in folders:
        found = summaries.read(folder)
        # A "running" one is alive (or on another host): never two launches on one run.
        if found is None or runs.status_of(found) not in runs.UNFINISHED:
            continue
        if (found.backend, found.framework, found.task) == (ident.library, ident.framework, ident.task):
            return folder
    return None


def continue_line(command_line: tuple[str, ...], folder: Path, program: tuple[str, ...] = ("mgpu",)) -> str:
    """``program`` then ``command_line`` with its ``--resume`` (any form) replaced by ``--resume FOLDER``."""

    def resume_part(i: int, tok: str) -> bool:  # the flag in either form, or a bare flag's value
        value = i > 0 and command_line[i - 1] == "--resume" and not tok.startswith("-")
        return tok == "--resume" or tok.startswith("--resume=") or value

    out = [tok for i, tok in enumerate(command_line) if not resume_part(i, tok)]
    from isaaclab_mgpu.launcher.build import shell_join

    return shell_join([*program, *out, "--resume", str(folder)])
