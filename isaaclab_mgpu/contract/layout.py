"""Where a run writes: the run folder's layout, shared by the launcher, the ranks and ``mgpu runs``.

A run of the built-in worker lives in ``<log_root>/<library>/<experiment>/<stamp>[_<run_name>]``
(:func:`run_folder`; ``<experiment>`` is the task unless ``--experiment_name`` is given). The
launcher chooses ``<stamp>`` once (:data:`STAMP_FORMAT`, Isaac Lab's) and hands it to every rank
through :data:`~isaaclab_mgpu.contract.env.RUN_STAMP`, so all ranks name the same folder. Inside it:

- ``summary.json`` (:data:`SUMMARY`, :mod:`.summary`), the ledger's fold, written by node 0's mgpu;
- ``events.jsonl`` (:data:`EVENTS`, :mod:`.events`), the run's ledger, written by node 0's ``mgpu``;
- ``model_<N>.pt`` checkpoints after ``N`` completed iterations (:func:`.resume.checkpoint_path`);
- ``rank_<r>/`` for every rank ``r > 0`` (:func:`rank_folder`): rank 0 owns the folder itself.

``mgpu submit`` writes its job files and submission records to ``<log_root>/mgpu/jobs/`` (:func:`jobs_dir`).

``<experiment>`` and ``<run_name>`` each name one folder inside the log root
(:func:`name_problem`): no ``/`` (``--run_name ../..`` would leave it), not ``.`` or ``..``, no
control character; the launcher and the worker's own parser refuse anything else.
"""

from __future__ import annotations

from pathlib import Path

from isaaclab_mgpu.contract.text import has_control

SUMMARY = "summary.json"
EVENTS = "events.jsonl"
#: Left in a run folder by ``mgpu cancel`` before it stops the run's job: the stop it asks for is
#: one to continue (the run ends ``stopped``), not an interruption; the next launch removes it.
CANCEL = "cancel.request"
DEFAULT_LOG_ROOT = "logs"
DEFAULT_TASK = "cartpole"
#: The loggers the built-in worker knows (Isaac Lab tasks take their library's own).
LOGGERS = ("tensorboard", "wandb", "none")
#: The run folder's timestamp, as Isaac Lab names its run folders.
STAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"


def run_folder(log_root: str, library: str, experiment: str, stamp: str, run_name: str | None) -> Path:
    """``<log_root>/<library>/<experiment>/<stamp>[_<run_name>]``, the folder every rank names."""
    name = f"{stamp}_{run_name}" if run_name else stamp
    return Path(log_root) / library / experiment / name


def jobs_dir(log_root: str | Path) -> Path:
    """``<log_root>/mgpu/jobs``: the folder of job files and submission records under ``log_root``."""
    return Path(log_root) / "mgpu" / "jobs"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a run folder's ``<experiment>`` or ``<run_name>``, or None when it can."""
    if "/" in name or "\\" in name or name in (".", ".."):
        return "must name one folder inside the log root: no / and not . or .."
    if has_control(name):
        return "holds a control character"
    return None


def rank_folder(run_dir: Path, rank: int) -> Path:
    """Where rank ``rank`` may write: the run folder itself for rank 0, ``rank_<r>/`` otherwise."""
    return run_dir if rank == 0 else run_dir / f"rank_{rank}"
