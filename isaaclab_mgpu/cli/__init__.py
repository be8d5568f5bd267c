"""The ``mgpu`` command line: thin Typer commands over one launch core (the command layer of
``docs/architecture.md``).

Each launch command's options come from their one declaration (:mod:`.options`); every command
calls one function of :mod:`isaaclab_mgpu.launch`. No logic lives here; :func:`main` is the one
place where errors become a stderr line and an exit code.
"""

import os
import sys
import traceback
from typing import Annotated

import click
import typer

from isaaclab_mgpu import __version__
from isaaclab_mgpu.cli.jobs import cancel_cmd, logs_cmd
from isaaclab_mgpu.cli.options import (
    GRACE_PERIOD,
    INT,
    KILL_AFTER,
    NO_SAVED_WORKAROUNDS,
    Invocation,
    launch_command,
)
from isaaclab_mgpu.contract.env import DEBUG
from isaaclab_mgpu.contract.errors import EXIT_INTERRUPTED, EXIT_REQUEUE, Interrupted, MgpuError
from isaaclab_mgpu.launcher.jobfiles import JobOptions
from isaaclab_mgpu.launcher.probe.config import PROBE, ProbeOptions
from isaaclab_mgpu.launcher.scale_options import ScaleOptions
from isaaclab_mgpu.launcher.spec import LaunchSpec

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


@launch_command(app, "dry-run", job=JobOptions)
def dry_run_cmd(
    json: Annotated[bool, typer.Option("--json", help="Print argv, env, ranks as JSON.")] = False,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
    *,
    job: JobOptions,
    grace_period: GRACE_PERIOD = 10.0,
    kill_after: KILL_AFTER = 5.0,
    spec: LaunchSpec,
) -> int:
    """Print exactly the command [bold]train[/] would exec; nothing is started."""
    del grace_period, kill_after  # train's shutdown timings: taken so a job's pod command dry-runs as is
    from isaaclab_mgpu.launch import emit_job, plan

    if job.kind is not None:
        return emit_job(spec, job)
    return plan(spec, as_json=json, use_saved_workarounds=not no_saved_workarounds)


@launch_command(app, "submit", job=(JobOptions, {"kind": "sbatch"}))
def submit_cmd(*, job: JobOptions, spec: LaunchSpec) -> int:
    """Write the job file [bold]dry-run --emit[/] prints under the log root and submit it: sbatch
    (the default) or, with --emit trainjob|pytorchjob, kubectl apply."""
    from isaaclab_mgpu.launch import submit

    return submit(spec, job)


@launch_command(app, "train")
def train_cmd(
    dry_run: Annotated[bool, typer.Option("--dry_run", help="Print the command, start nothing.")] = False,
    json: Annotated[bool, typer.Option("--json", help="With --dry_run: print JSON.")] = False,
    no_preflight: Annotated[
        bool,
        typer.Option("--no_preflight", help="Skip the check-env checks that run before launching."),
    ] = False,
    grace_period: GRACE_PERIOD = 10.0,
    kill_after: KILL_AFTER = 5.0,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
    *,
    spec: LaunchSpec,
    debug: bool,
) -> int:
    """Launch training on N ranks per node and supervise the whole process tree."""
    from isaaclab_mgpu.launch import plan, train
    from isaaclab_mgpu.launcher.supervise import SuperviseOptions

    options = SuperviseOptions(grace_period=grace_period, kill_after=kill_after, debug=debug)
    use_saved = not no_saved_workarounds
    if dry_run:
        return plan(spec, as_json=json, use_saved_workarounds=use_saved, preflight=not no_preflight)
    return train(spec, options, preflight=not no_preflight, use_saved_workarounds=use_saved)


@launch_command(app, "check-env")
def check_env_cmd(
    json: Annotated[bool, typer.Option("--json", help="Print every check as JSON.")] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also import torch and jax (in subprocesses, with a timeout).")
    ] = False,
    *,
    spec: LaunchSpec,
) -> int:
    """Say what will break a launch before it happens; exit 1 when a check fails."""
    from isaaclab_mgpu.launch import check_env

    return check_env(spec, as_json=json, deep=deep)


@app.command("runs")
def runs_cmd(
    folder: Annotated[
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
    from isaaclab_mgpu.launch import list_runs

    return list_runs(folder, as_json=json, last=last, limit=limit)


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
    from isaaclab_mgpu.cli.validate import parse_command_line
    from isaaclab_mgpu.launch import skills_check

    return skills_check(path, lambda argv: parse_command_line(app, argv))


app.command("logs")(logs_cmd)
app.command("cancel")(cancel_cmd)


@launch_command(app, "probe-nccl", cls=None, options=ProbeOptions, job=JobOptions)
def probe_nccl_cmd(
    *,
    options: ProbeOptions,
    job: JobOptions,
    no_saved_workarounds: Annotated[bool, NO_SAVED_WORKAROUNDS] = False,
    json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON document instead of the tables.", rich_help_panel=PROBE),
    ] = False,
    spec: LaunchSpec,
) -> int:
    """Tell a communication hang from a task bug: time and check all-reduce at each world size
    (across nodes: [bold]--nnodes N --emit sbatch[/] prints the job that runs it on every node)."""
    from dataclasses import replace

    from isaaclab_mgpu.launch import emit_probe_job, probe_nccl

    options = replace(options, saved_workarounds=not no_saved_workarounds)
    if job.kind is not None:
        return emit_probe_job(spec, options, job, as_json=json)
    return probe_nccl(spec, options, as_json=json)


@launch_command(app, "scale", options=ScaleOptions)
def scale_cmd(*, options: ScaleOptions, spec: LaunchSpec) -> int:
    """Does scaling pay? Train briefly at each world size (and env count); speedup, efficiency, picture."""
    # Every launch option of train and its stall watch apply to each point (see launcher/scale.py).
    from isaaclab_mgpu.launch import scale

    return scale(spec, options)


def main(argv: list[str] | None = None) -> int:
    """Run the ``mgpu`` command line and return its exit code."""
    from isaaclab_mgpu import report

    args = sys.argv[1:] if argv is None else argv
    if not args or "--help" in args:
        from isaaclab_mgpu.report.help import lean_help

        lean_help()
    invocation = Invocation(argv=tuple(args), debug=os.environ.get(DEBUG, "") not in ("", "0"))
    command = typer.main.get_command(app)
    try:
        result = command.main(args, prog_name="mgpu", standalone_mode=False, obj=invocation)
    except Interrupted as exc:  # a deliberate stop, not an error
        report.stopped(str(exc), clean=exc.exit_code in (EXIT_INTERRUPTED, EXIT_REQUEUE))
        return exc.exit_code
    except (MgpuError, click.ClickException) as exc:
        if invocation.debug:
            traceback.print_exc()
        report.error(exc.format_message() if isinstance(exc, click.ClickException) else str(exc))
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        report.stopped("stopped by Ctrl-C", clean=True)
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else 0
