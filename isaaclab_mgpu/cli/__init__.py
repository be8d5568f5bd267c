"""The ``mgpu`` command line: thin Typer commands over one launch core.

Launcher side, command layer: runs in the ``mgpu`` process; with :mod:`isaaclab_mgpu.launch` the
only code that imports :mod:`isaaclab_mgpu.report`.

Each command turns its options into a :class:`~isaaclab_mgpu.launcher.spec.LaunchSpec` (shared options
live in :mod:`.options`), then calls the core: resolve → build → print or supervise. No logic
lives here; :func:`main` is the one place where errors become a stderr line and an exit code.
"""

import os
import sys
import traceback
from typing import Annotated

import click
import typer

from isaaclab_mgpu import __version__
from isaaclab_mgpu.cli.command import LaunchCommand
from isaaclab_mgpu.cli.jobs import cancel_cmd, logs_cmd
from isaaclab_mgpu.cli.options import (
    BACKOFF_LIMIT,
    CPUS_PER_RANK,
    EMIT,
    GRACE_PERIOD,
    IMAGE,
    INT,
    JOB_NAME,
    JOB_REQUEUE,
    JOB_TIME,
    KILL_AFTER,
    MEMORY,
    NO_SAVED_WORKAROUNDS,
    PARTITION,
    PASSTHROUGH,
    PVC,
    RDZV_PORT,
    SHM_SIZE,
    STALL,
    STATE,
    TERMINATION_GRACE,
    WORKDIR,
    launch_command,
    train_launch_command,
)
from isaaclab_mgpu.cli.probe import probe_nccl_cmd
from isaaclab_mgpu.cli.scale import scale_cmd
from isaaclab_mgpu.contract.env import DEBUG
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, EXIT_REQUEUE, Interrupted, MgpuError

app = typer.Typer(
    name="mgpu",
    help="Launch, supervise and diagnose multi-GPU and multi-node RL training.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    suggest_commands=False,  # Click's own "No such command" already suggests; Typer would repeat it
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mgpu {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Launch, supervise and diagnose multi-GPU and multi-node RL training."""


@app.command("dry-run", cls=LaunchCommand, context_settings=PASSTHROUGH)
@train_launch_command
def dry_run_cmd(
    spec,
    json: Annotated[bool, typer.Option("--json", help="Print argv, env, ranks as JSON.")] = False,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
    emit: EMIT = None,
    job_name: JOB_NAME = None,
    job_time: JOB_TIME = None,
    partition: PARTITION = None,
    job_requeue: JOB_REQUEUE = False,
    rdzv_port: RDZV_PORT = None,
    cpus_per_rank: CPUS_PER_RANK = None,
    image: IMAGE = None,
    shm_size: SHM_SIZE = None,
    memory: MEMORY = None,
    pvc: PVC = None,
    workdir: WORKDIR = None,
    backoff_limit: BACKOFF_LIMIT = None,
    termination_grace: TERMINATION_GRACE = None,
    grace_period: GRACE_PERIOD = 10.0,
    kill_after: KILL_AFTER = 5.0,
) -> int:
    """Print exactly the command [bold]train[/] would exec; nothing is started."""
    del grace_period, kill_after  # train's shutdown timings: taken so a job's pod command dry-runs as is
    from isaaclab_mgpu.launch import emit_job, plan
    from isaaclab_mgpu.launcher.jobfiles import JobOptions

    job = JobOptions(
        kind=emit, job_name=job_name, time=job_time, partition=partition, job_requeue=job_requeue,
        rdzv_port=rdzv_port, cpus_per_rank=cpus_per_rank, image=image, shm_size=shm_size, memory=memory,
        pvc=pvc, workdir=workdir, backoff_limit=backoff_limit, termination_grace=termination_grace,
    )  # fmt: skip
    if job.kind is not None:
        return emit_job(spec, job)
    return plan(spec, as_json=json, use_saved_workarounds=not no_saved_workarounds)


@app.command("submit", cls=LaunchCommand, context_settings=PASSTHROUGH)
@train_launch_command
def submit_cmd(
    spec,
    emit: EMIT = None,
    job_name: JOB_NAME = None,
    job_time: JOB_TIME = None,
    partition: PARTITION = None,
    rdzv_port: RDZV_PORT = None,
    cpus_per_rank: CPUS_PER_RANK = None,
    image: IMAGE = None,
    shm_size: SHM_SIZE = None,
    memory: MEMORY = None,
    pvc: PVC = None,
    workdir: WORKDIR = None,
    backoff_limit: BACKOFF_LIMIT = None,
    termination_grace: TERMINATION_GRACE = None,
) -> int:
    """Write the job file [bold]dry-run --emit[/] prints under the log root and submit it: sbatch
    (the default) or, with --emit trainjob|pytorchjob, kubectl apply."""
    from isaaclab_mgpu.launch import submit
    from isaaclab_mgpu.launcher.jobfiles import JobOptions

    job = JobOptions(
        kind=emit or "sbatch", job_name=job_name, time=job_time, partition=partition, rdzv_port=rdzv_port,
        cpus_per_rank=cpus_per_rank, image=image, shm_size=shm_size, memory=memory, pvc=pvc,
        workdir=workdir, backoff_limit=backoff_limit, termination_grace=termination_grace,
    )  # fmt: skip
    return submit(spec, job)


@app.command("train", cls=LaunchCommand, context_settings=PASSTHROUGH)
@train_launch_command
def train_cmd(
    spec,
    dry_run: Annotated[bool, typer.Option("--dry_run", help="Print the command, start nothing.")] = False,
    json: Annotated[bool, typer.Option("--json", help="With --dry_run: print JSON.")] = False,
    no_preflight: Annotated[
        bool,
        typer.Option("--no_preflight", help="Skip the check-env checks that run before launching."),
    ] = False,
    grace_period: GRACE_PERIOD = 10.0,
    kill_after: KILL_AFTER = 5.0,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
) -> int:
    """Launch training on N ranks per node and supervise the whole process tree."""
    from isaaclab_mgpu.launch import plan, train
    from isaaclab_mgpu.launcher.supervise import SuperviseOptions

    options = SuperviseOptions(grace_period=grace_period, kill_after=kill_after, debug=STATE.debug)
    use_saved = not no_saved_workarounds
    if dry_run:
        return plan(spec, as_json=json, use_saved_workarounds=use_saved, preflight=not no_preflight)
    return train(spec, options, preflight=not no_preflight, use_saved_workarounds=use_saved)


@app.command("check-env", cls=LaunchCommand, context_settings=PASSTHROUGH)
@launch_command
def check_env_cmd(
    spec,
    json: Annotated[bool, typer.Option("--json", help="Print every check as JSON.")] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also import torch and jax (in subprocesses, with a timeout).")
    ] = False,
) -> int:
    """Say what will break a launch before it happens; exit 1 when a check fails."""
    from isaaclab_mgpu.launch import check_env

    return check_env(spec, as_json=json, deep=deep)


@app.command("runs")
def runs_cmd(
    log_root: Annotated[
        str,
        typer.Argument(
            metavar="[LOG_ROOT|RUN_FOLDER]",
            help="Folder holding the runs (the worker's --log_root), or one run's folder: its story.",
        ),
    ] = "logs",
    json: Annotated[
        bool, typer.Option("--json", help="Print the runs as a JSON list (a run folder: every event).")
    ] = False,
    last: Annotated[bool, typer.Option("--last", help="Print only the newest run's folder.")] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", metavar="N", click_type=INT, help="Table: the newest N runs (0: all)."),
    ] = 50,
) -> int:
    """List training runs, newest first, from their summary.json files; or tell one run's story
    from its ledger (events.jsonl)."""
    from pathlib import Path

    from isaaclab_mgpu.contract.errors import UsageError
    from isaaclab_mgpu.launcher import kubectl, slurmjobs
    from isaaclab_mgpu.launcher.runs import find_runs, last_folder, story
    from isaaclab_mgpu.report import runs as report

    if not Path(log_root).is_dir():
        raise UsageError(f"{log_root!r} is not a folder; give the runs' log root (default: logs)")
    told = None if last else story(Path(log_root))
    if told is not None:
        told = slurmjobs.story_status(told)  # lost when its SLURM job is over
        (report.story_json if json else report.story)(told)
        return 0
    # One run more than the table shows tells it that there are more.
    wanted = 1 if last else 0 if json or limit <= 0 else limit + 1
    rows = find_runs(Path(log_root), limit=wanted)
    if not last:  # on a SLURM login node: queued jobs, and lost runs whose job is over
        rows = slurmjobs.rows_with_jobs(Path(log_root), rows)
        rows = kubectl.rows_with_kubernetes(Path(log_root), rows)  # where kubectl is: its jobs
    if last:
        report.last(last_folder(rows, log_root))
    elif json:
        report.as_json(rows)
    else:
        report.table(rows, log_root, limit=limit)
    return 0


@app.command("stacks")
def stacks_cmd(
    run_folder: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN_FOLDER]",
            help="A running run's folder (default: the one run started from this folder; "
            "several: listed, none signalled).",
        ),
    ] = None,
) -> int:
    """Print every local rank's live Python stack (saved beside its logs); the run goes on."""
    from isaaclab_mgpu.launch import live_stacks

    return live_stacks(run_folder)


skills_app = typer.Typer(help="Agent skills shipped in skills/.", no_args_is_help=True)
app.add_typer(skills_app, name="skills")


@skills_app.command("check")
def skills_check_cmd(
    path: Annotated[str, typer.Argument(help="Project root holding skills/ and docs/.")] = ".",
) -> int:
    """Validate skills/ and docs/: front matter, sections, links, paths and every quoted mgpu command."""
    from pathlib import Path

    from isaaclab_mgpu import report
    from isaaclab_mgpu.cli.validate import parse_command_line
    from isaaclab_mgpu.tools.skills_check import check_tree

    problems = check_tree(Path(path), lambda argv: parse_command_line(app, argv))
    return report.skills_problems(problems)


app.command("logs")(logs_cmd)
app.command("cancel")(cancel_cmd)
app.command("probe-nccl", context_settings=PASSTHROUGH)(launch_command(probe_nccl_cmd))
app.command("scale", cls=LaunchCommand, context_settings=PASSTHROUGH)(
    launch_command(scale_cmd, groups=(STALL,))
)


def main(argv: list[str] | None = None) -> int:
    """Run the ``mgpu`` command line and return its exit code."""
    from isaaclab_mgpu import report

    args = sys.argv[1:] if argv is None else argv
    if not args or "--help" in args:
        from isaaclab_mgpu.report.help import lean_help

        lean_help()
    STATE.debug = os.environ.get(DEBUG, "") not in ("", "0")
    command = typer.main.get_command(app)
    STATE.argv = list(args)
    try:
        result = command.main(args, prog_name="mgpu", standalone_mode=False)
    except Interrupted as exc:  # a deliberate stop, not an error
        report.stopped(str(exc), clean=exc.exit_code in (EXIT_INTERRUPTED, EXIT_REQUEUE))
        return exc.exit_code
    except MgpuError as exc:
        if STATE.debug:
            traceback.print_exc()
        report.error(str(exc))
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        report.stopped("stopped by Ctrl-C", clean=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        if STATE.debug:
            traceback.print_exc()
        report.error(exc.format_message())
        return exc.exit_code
    finally:
        STATE.argv = None
    return result if isinstance(result, int) else 0
