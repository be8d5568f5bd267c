"""``mgpu logs`` and ``mgpu cancel``: a submitted run followed and stopped by its name or folder.

Thin commands over :func:`isaaclab_mgpu.launch.follow_logs` and :func:`isaaclab_mgpu.launch.cancel`
(the logic: :mod:`isaaclab_mgpu.launcher.slurmjobs` for SLURM, :mod:`isaaclab_mgpu.launcher.kubectl`
for a Kubernetes job's name).
"""

from typing import Annotated

import typer

RUN = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        help="A run folder, the --job_name of an mgpu submit (its newest job; SLURM or Kubernetes), "
        "or a run folder's name.",
    ),
]
LOG_ROOT = Annotated[
    str, typer.Option("--log_root", metavar="DIR", help="Folder holding the runs and mgpu/jobs/.")
]


def logs_cmd(
    run: RUN,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the run ends (across requeues).")
    ] = False,
    log_root: LOG_ROOT = "logs",
) -> int:
    """Print rank 0's console lines of a run, every attempt in order; -f follows it to its end.
    A Kubernetes job: kubectl logs of node 0's pod."""
    from isaaclab_mgpu.launch import follow_logs

    return follow_logs(run, log_root, follow=follow)


def cancel_cmd(
    run: RUN,
    now: Annotated[
        bool,
        typer.Option(
            "--now",
            help="SIGKILL every process of the job (Kubernetes: force-delete its pods): no checkpoint "
            "at the stop.",
        ),
    ] = False,
    log_root: LOG_ROOT = "logs",
) -> int:
    """Stop a submitted run at a checkpoint (every node), then end its SLURM job; a Kubernetes job is
    deleted (every pod's SIGTERM: a checkpoint at the stop)."""
    from isaaclab_mgpu.launch import cancel

    return cancel(run, log_root, now=now)
