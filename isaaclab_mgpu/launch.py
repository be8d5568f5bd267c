"""The command layer the CLI calls: domain modules compute, this module hands their data to report.

One function per command: ``dry-run`` → :func:`plan` (:func:`emit_job` with ``--emit``), ``submit``,
``logs`` → :func:`follow_logs` and ``cancel`` (SLURM: :mod:`.launcher.slurmjobs`; Kubernetes:
:mod:`.launcher.kubectl`), ``train``, ``check-env``, ``probe-nccl`` (:func:`emit_probe_job` with
``--emit``), ``scale``, ``runs`` → :func:`list_runs`, ``stacks`` → :func:`live_stacks`, ``skills check``.
Each launch runs the shared core (:func:`~.launcher.pipeline.prepare`) and the domain packages, which
return data and never print; only here do results reach :mod:`isaaclab_mgpu.report`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from isaaclab_mgpu import report
from isaaclab_mgpu.contract import events as ev
from isaaclab_mgpu.contract import faults, resume
from isaaclab_mgpu.contract.errors import (
    EXIT_INTERRUPTED,
    EXIT_KILLED_AFTER_GRACE,
    EXIT_NOT_RESTARTABLE,
    EXIT_REQUEUE,
    Drifted,
    Hang,
    Interrupted,
    MgpuError,
    NotRestartable,
    Requeued,
    UsageError,
    WorkerFailure,
    failed_run_code,
)
from isaaclab_mgpu.contract.layout import CANCEL, jobs_dir
from isaaclab_mgpu.contract.progress import AUTO, auto_cap
from isaaclab_mgpu.contract.worker_args import is_isaac_task
from isaaclab_mgpu.launcher import kubectl, runs, slurmjobs, workarounds
from isaaclab_mgpu.launcher.build import Command, build, shell_join
from isaaclab_mgpu.launcher.cluster import resubmit_command
from isaaclab_mgpu.launcher.jobfiles import KUBERNETES, JobOptions, emit, log_mount, probe_sbatch
from isaaclab_mgpu.launcher.pipeline import own_log_folder, prepare
from isaaclab_mgpu.launcher.resolve import ResolvedSpec, invocation, probe_machine, selected_devices
from isaaclab_mgpu.launcher.spec import RENDEZVOUS_OPTIONS, LaunchSpec, signal_name
from isaaclab_mgpu.launcher.verdicts import PEER_GONE

if TYPE_CHECKING:
    from collections.abc import Callable

    from isaaclab_mgpu.launcher.attempts import Attempt, Outcome, Reshape, RunPlace
    from isaaclab_mgpu.launcher.ledger import RunLedger
    from isaaclab_mgpu.launcher.probe.config import ProbeOptions
    from isaaclab_mgpu.launcher.scale import ScaleOptions
    from isaaclab_mgpu.launcher.supervise import RunResult, StallOptions, SuperviseOptions

#: Launch options ``probe-nccl`` takes as ``train`` does, in the order they are suggested.
_PROBE_OPTIONS = (*RENDEZVOUS_OPTIONS, "gpu_ids")

__all__ = [
    "cancel",
    "check_env",
    "emit_job",
    "exit_code",
    "follow_logs",
    "list_runs",
    "plan",
    "probe_nccl",
    "saved_workarounds",
    "scale",
    "skills_check",
    "submit",
    "train",
]


def saved_workarounds(spec: LaunchSpec, *, enabled: bool) -> dict[str, str]:
    """NCCL variables ``probe-nccl --save-workaround`` saved for this machine; the rest is warned of."""
    saved = workarounds.for_launch(os.environ, device=spec.device, enabled=enabled)
    for line in saved.ignored:
        report.warn(line)
    return dict(saved.variables)


def plan(
    spec: LaunchSpec, *, as_json: bool, use_saved_workarounds: bool = True, preflight: bool = True
) -> int:
    """Print the command ``train`` would exec (``dry-run``); what train would refuse is a warning."""
    extra = saved_workarounds(spec, enabled=use_saved_workarounds)
    resolved, cmd = prepare(spec, strict=False, extra_env=extra)
    refused: list[str] = []
    try:
        check_isaac_task(spec)  # this machine's Isaac Lab: a plan for another machine may still hold
    except UsageError as exc:
        refused.append(f"train would refuse: {exc}")
    if preflight:
        from isaaclab_mgpu.launcher.diagnostics import refusals

        refused += [f"train would refuse: {f.line()}" for f in refusals(spec, resolved)]
    from isaaclab_mgpu.launcher import continuation

    resumes = continuation.preview(resolved, cmd.world_size)  # read only: nothing is created
    if resumes is not None and resumes.startswith("train would refuse"):
        refused.append(resumes)
        resumes = None
    resolved = dataclasses.replace(resolved, warnings=(*resolved.warnings, *refused))
    report.dry_run(cmd, resolved, as_json=as_json)
    if resumes is not None:
        report.note(resumes)
    return 0


def emit_job(spec: LaunchSpec, options: JobOptions) -> int:
    """Print the job file ``options`` asks for (``dry-run --emit``); every node runs ``spec``'s train."""
    report.out(emit(spec, options).rstrip("\n"))
    return 0


def submit(spec: LaunchSpec, options: JobOptions) -> int:
    """``mgpu submit``: write the job file to ``<log_root>/mgpu/jobs/``, submit it and record it."""
    import shutil

    from isaaclab_mgpu.launcher import continuation

    kube = options.kind in KUBERNETES
    if not kube and shutil.which("sbatch") is None:
        raise UsageError(
            "mgpu submit needs SLURM's sbatch, which is not on PATH here; run it on the cluster's login "
            "node, or print the job file with mgpu dry-run … --emit sbatch"
        )
    path = jobs_dir(spec.log_root) / f"{options.name}{'.yaml' if kube else '.sbatch'}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(emit(spec, options))
    where = Path(log_mount(spec, options) if kube else spec.log_root)
    if spec.worker is not None:
        ident, _ = continuation.identity_of(spec)
        where = where / ident.library / ident.experiment
    if kube:
        return _submit_kubernetes(options, path, str(where))
    done = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MgpuError(f"sbatch {path} failed: {(done.stderr or done.stdout).strip() or 'no output'}")
    job = done.stdout.strip().split(";")[0]
    program = _invoked()
    record = slurmjobs.Submission(
        job_id=job, name=options.name, job_file=str(path.resolve()), cwd=os.getcwd(), run_under=str(where),
        submitted_at=time.time(), command=(*program, *spec.command_line),
    )  # fmt: skip
    slurmjobs.record(spec.log_root, record)
    report.note(f"submitted SLURM job {job}: {path}")
    report.note(f"the run will live under {where}/ (the newest unfinished one there is continued)")
    root = "" if spec.log_root == "logs" else f" --log_root {shell_join([spec.log_root])}"
    report.note(f"follow it: {shell_join([*program, 'logs', '-f', options.name])}{root}")
    report.out(job)
    return 0


def _submit_kubernetes(options: JobOptions, path: Path, where: str) -> int:
    """``kubectl apply`` the manifest at ``path``; say the run lives under ``where``, and how to follow it."""
    import shlex

    job = kubectl.submit(path, options.kind or "", run_under=where)
    report.note(f"submitted {job.kind} {job.name} in namespace {job.namespace}: {path}")
    claim = f"the claim {options.pvc}" if options.pvc else "the pod's own disk (no --pvc)"
    report.note(f"the run will live under {where}/ in the pods, on {claim}")
    report.note(f"follow it: {shlex.join(kubectl.logs_argv(job, follow=True))}")
    report.out(job.name)
    return 0


def train(
    spec: LaunchSpec,
    options: SuperviseOptions,
    *,
    preflight: bool = True,
    use_saved_workarounds: bool = True,
) -> int:
    """Launch and supervise ``spec`` through its attempts; 0, else raise the error with the exit code."""
    # ``options`` come from mgpu train's command line: console output, no on_stdout of the caller's.
    from isaaclab_mgpu.launcher import continuation, ledger
    from isaaclab_mgpu.launcher.attempts import RestartOptions, run_attempts
    from isaaclab_mgpu.report import supervise as progress

    check_isaac_task(spec)
    extra = saved_workarounds(spec, enabled=use_saved_workarounds)
    resolved, cmd = prepare(spec, strict=True, extra_env=extra)
    if preflight:
        from isaaclab_mgpu.launcher import diagnostics

        found = diagnostics.check(spec, resolved=resolved).findings
        failed = diagnostics.failures(found)
        if failed:
            for f in failed[1:]:  # the first becomes the error line
                report.note(f.line())
            raise diagnostics.preflight_error(failed)
        for f in diagnostics.train_warnings(found):  # e.g. little free disk space: said, never refused
            report.warn(f.line())
    placement = continuation.place(resolved, cmd.world_size)  # bad --resume: exit 2, nothing spawned
    report.resolve_notes(resolved)
    for line in placement.notes:
        report.note(line)
    if spec.simulate_fault is not None and cmd.world_size is not None:
        report.note(faults.describe(faults.parse(spec.simulate_fault), cmd.world_size))
    if placement.done:
        return 0
    resolved, cmd = own_log_folder(resolved)  # this launch's per-rank logs: never another's
    place = placement.place
    folder = place.run_dir
    progress.starting(resolved.nproc, cmd.world_size, cmd.launcher, str(folder) if folder else None)
    # The libraries' start-up printouts stay in the per-rank logs unless every rank's output or
    # everything (--debug) is asked for. Embedded tasks only: an Isaac Lab task's rank 0 shows the
    # library's own iteration log, which prints no [mgpu] iteration line to end the quiet.
    embedded = spec.worker is not None and not is_isaac_task(spec.worker.task)
    quiet = embedded and not (options.debug or spec.log_all_ranks or spec.local_ranks_filter)
    options = dataclasses.replace(options, stall=stall_options(spec, cmd), quiet_start=quiet)
    view = None
    if sys.stdout.isatty():
        # Only the launcher knows its stdout is a terminal; the ranks always print plain lines.
        from isaaclab_mgpu.report.bar import LiveProgress

        view = LiveProgress()
        options = dataclasses.replace(options, on_stdout=view.feed)
    restart = RestartOptions(
        max_restarts=spec.max_restarts or 0,
        requeue_signal=spec.requeue_signum,
        checkpoints=spec.builtin_worker,  # a --script's restart runs it again from its beginning
    )
    ident = continuation.identity_of(spec)[0] if spec.builtin_worker else None
    trains = (ident.task, ident.total) if ident is not None else None
    record = ledger.for_launch(resolved, cmd, place.run_dir, place.named_by_rank, placement.continued, trains)
    world = _Shrinking(resolved, cmd, record)
    alive = None
    if spec.node_floor is not None and _multi_node(cmd):
        from isaaclab_mgpu.launcher.shrink import Liveness

        alive = Liveness()  # for the whole run: the other nodes ask it before leaving this node out
        options = dataclasses.replace(options, alive_port=alive.port)
    # On mgpu's own error or a second Ctrl-C the ledger is closed as it is: running, as the summary.
    with contextlib.closing(record):
        try:
            outcome = run_attempts(
                cmd,
                place,
                restart,
                options,
                progress.tell if view is None else view.telling(progress.tell),
                ledger=record,
                reshape=world if spec.node_floor is not None else None,
            )
        finally:
            if view is not None:
                view.close()
            if alive is not None:
                alive.close()
        progress.result(outcome.result)
        return conclude(world.resolved, world.cmd, outcome, record)  # the world after any shrink


@dataclasses.dataclass
class _Shrinking:
    """The launch's world now; before a restart it plans a shrink after a lost node (``--min_nodes``)."""

    resolved: ResolvedSpec
    cmd: Command
    record: RunLedger

    def __call__(
        self, attempt: Attempt, result: RunResult, place: RunPlace, options: SuperviseOptions
    ) -> Reshape | None:
        import socket

        from isaaclab_mgpu.launcher import shrink
        from isaaclab_mgpu.launcher.attempts import Reshape
        from isaaclab_mgpu.launcher.ledger import newest_checkpoint

        hosts = {node: (host, port) for node, host, port in result.node_hosts}
        # A candidate whose mgpu still answers is alive (its own rank failed): a restart of every node.
        lost = tuple(n for n in result.lost_nodes if n not in hosts or hosts[n][1] is None
                     or not shrink.answers(*hosts[n]))  # fmt: skip
        if not lost:
            return None
        names = {node: host for node, (host, _) in hosts.items()}
        plan = shrink.plan(self.resolved, lost, names, socket.gethostname())
        folder = place.run_dir or (Path(result.run_folder) if result.run_folder else None)
        if plan is None or (plan.node_rank == 0 and folder is None):
            return None  # a node 0 that never learnt the run folder cannot keep its record: stop
        self.resolved = shrink.reshaped(self.resolved, plan)
        self.cmd = build(self.resolved)
        if plan.node_rank == 0:
            place = dataclasses.replace(place, run_dir=folder)
            self.record.adopt(folder)
        at, _ = newest_checkpoint(place.run_dir, place.named_by_rank)
        report.warn(f"{plan.describe()}; restarting from {f'checkpoint {at}' if at else 'the beginning'}")
        stall = dataclasses.replace(options.stall, multi_node=_multi_node(self.cmd))
        return Reshape(self.cmd, place, dataclasses.replace(options, stall=stall), plan.event(at))


def conclude(resolved: ResolvedSpec, cmd: Command, outcome: Outcome, record: RunLedger) -> int:
    """Record how the run ended, requeue it when asked, return 0 or raise the error with the exit code."""
    from isaaclab_mgpu.launcher.attempts import requeue

    spec, last, folder = resolved.spec, outcome.last, outcome.run_dir
    node0 = (resolved.node_rank or 0) == 0
    at = f" at iteration {last.reached}" if last.reached is not None else ""
    if outcome.result.stragglers:
        record.note(stragglers=outcome.result.stragglers)
    drift = outcome.result.drift
    if drift is not None:
        record.note(drift=drift)
        record.write(ev.DriftNamed, rank=drift.rank, component=drift.component,
                     since_iteration=drift.since_iteration, found_at=drift.found_at,
                     stopped=last.outcome == "drifted")  # fmt: skip
    if last.outcome == "finished":
        record.write(ev.Finished, iteration=last.reached, seconds=sum(a.seconds for a in outcome.attempts))
        return 0
    if last.outcome == "drifted":
        record.note(exit_status=Drifted.exit_code)
        what = drift.describe() if drift is not None else "the ranks drifted apart"
        raise Drifted(
            f"stopped{at} (--on_drift stop): {what}; rank 0's state is saved: --resume auto continues "
            "from it on every rank"
        )
    if last.outcome == "stopped":
        signame = f"SIG{signal_name(spec.requeue_signal)}"
        stop = functools.partial(record.write, ev.Requeue, signal=signame, iteration=last.reached,
                                 job_id=resolved.slurm_job_id)  # fmt: skip
        if spec.requeue and node0 and resolved.slurm_job_id:
            # Everything is recorded and said before scontrol requeue: SLURM then cancels this job
            # step at once (SIGTERM), and a line or a summary written after it may never be.
            stop(requeued=True)
            record.note(status="requeued", exit_status=EXIT_REQUEUE)
            report.note(
                f"stopped at a checkpoint{at} on {signame}; requeueing SLURM job {resolved.slurm_job_id}: "
                "the requeued job continues this run"
            )
            report.note(_REQUEUE_EXPECTED)
            ok, said = requeue(resolved.slurm_job_id)
            if not ok:
                stop(requeued=False, said=said or "no output")
                record.note(status="stopped", exit_status=EXIT_REQUEUE)
                raise MgpuError(
                    f"stopped at a checkpoint{at} on {signame}, but scontrol requeue "
                    f"{resolved.slurm_job_id} failed: {said or 'no output'}; resubmit the job by hand",
                    exit_code=EXIT_REQUEUE,
                )
            raise Requeued(f"requeued SLURM job {resolved.slurm_job_id}")
        stop(requeued=False)
        record.note(exit_status=EXIT_REQUEUE)
        if spec.requeue and not node0:
            # This node's step ends now, before node 0 has said it: srun reports each node's exit
            # as it comes, so every node says what follows before its own exit.
            report.note(_REQUEUE_EXPECTED)
            raise Requeued(f"stopped at a checkpoint{at} on {signame}; node 0 requeues the job")
        again = _resubmit_line(resolved)
        then = (
            f"to continue: {again}"
            if again
            else "run the same command with --resume auto to continue (in a SLURM job: add --requeue)"
        )
        raise Requeued(f"stopped at a checkpoint{at} on {signame}; {then}")
    # Otherwise the last attempt failed, hung or was interrupted (attempts._judge): exit_code raises.
    settle_run(outcome, record)
    try:
        return exit_code(outcome.result, cmd, spec)
    except Interrupted as exc:
        cancelled = node0 and folder is not None and os.path.exists(os.path.join(folder, CANCEL))
        record.write(ev.Interrupted, iteration=last.reached, exit_code=exc.exit_code, cancelled=cancelled)
        if cancelled:  # mgpu cancel's stop: saved, to be continued (its job ends; the same submit goes on)
            record.note(status="stopped")
        line = _continue_line(resolved, folder)
        if line is None:
            raise
        raise Interrupted(f"{exc}; to continue: {line}", exit_code=exc.exit_code) from None
    except MgpuError as exc:
        code, verdict = exc.exit_code, last.verdict
        if isinstance(exc, WorkerFailure):
            code = failed_run_code(code, _mendable(outcome))
        message = str(exc)
        if verdict is not None:
            message += f"; {verdict.text()}"  # the class, its cause and fix, and why no restart follows
        if len(outcome.attempts) > 1:
            every = "; ".join(a.describe() for a in outcome.failures)
            most = spec.max_restarts or 0
            if outcome.restarts >= most:
                used = f"restarts used up ({outcome.restarts} of {most})"
            else:  # the verdict stopped it: the rest are not spent on a failure they cannot mend
                used = f"{outcome.restarts} of {most} restarts used"
            message += f"; {used}, every failure in order: {every}"
        record.write(ev.Failed, exit_code=code, reason=message, iteration=last.reached)
        kind = NotRestartable if code == EXIT_NOT_RESTARTABLE else type(exc)
        raise kind(message, exit_code=code) from None


def _mendable(outcome: Outcome) -> bool:
    """False when the last attempt failed in a way mgpu judged no restart can mend (:mod:`.verdicts`)."""
    verdict = outcome.last.verdict
    return verdict is None or verdict.restart


def _continue_line(resolved: ResolvedSpec, folder: str | None) -> str | None:
    """The command that continues an interrupted run (node 0, typed at a prompt, with a checkpoint)."""
    from isaaclab_mgpu.launcher import continuation

    spec = resolved.spec
    if folder is None or not spec.command_line or (resolved.node_rank or 0) != 0:
        return None
    if resolved.slurm_job_id:  # not this node's command line (its job's port): the job's resubmission
        return _resubmit_line(resolved)
    run = Path(folder)

    library = spec.library if spec.isaac_task else None
    known = library is None or library in resume.ISAAC_CHECKPOINTS
    found = known and resume.newest_whole(run, library).checkpoint is not None
    return continuation.continue_line(spec.command_line, run, resolved.invoked_as) if found else None


def _resubmit_line(resolved: ResolvedSpec) -> str | None:
    """In a SLURM batch job: the command that submits it again; None outside one or when SLURM is mute."""
    if not resolved.slurm_job_id:
        return None
    ask = ["scontrol", "show", "job", "-o", resolved.slurm_job_id]
    try:
        shown = subprocess.run(ask, capture_output=True, text=True, timeout=15, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    argv = resubmit_command(shown)
    if argv is None:
        return None
    worker = resolved.spec.worker
    if worker is not None and worker.resume != resume.AUTO:
        return f"add --resume auto to the train line of {argv[-1]}, then {shell_join(list(argv))}"
    return shell_join(list(argv))


def settle_run(outcome: Outcome, record: RunLedger) -> None:
    """Record in the run's summary how the launch ended when rank 0 could not (its ledger's note)."""
    result = outcome.result
    status = "hung" if result.stall is not None else "interrupted" if result.interrupted else "failed"
    code = failed_run_code(result.exit_code, _mendable(outcome)) if status == "failed" else result.exit_code
    collided = {"rank_exit_code": result.exit_code} if status == "failed" and code != result.exit_code else {}
    record.settle(status, code, **collided)


def check_env(spec: LaunchSpec, *, as_json: bool, deep: bool) -> int:
    """Run ``check-env``: check, print the table (or JSON) and the command, return the exit code."""
    from isaaclab_mgpu.launcher.diagnostics import check
    from isaaclab_mgpu.report import checkenv as shown

    check_isaac_task(spec)  # bad input for train is bad input here too (exit 2)
    if spec.gpu_ids is not None:  # never with --device cpu (the spec refuses it)
        # Ids naming no GPU here are bad input (exit 2, as for train), not a failed check.
        selected_devices(spec, probe_machine(gpu_uuids=True))
    result = check(spec, deep=deep)
    (shown.json_report if as_json else shown.table)(result)
    return result.exit_code


def probe_nccl(spec: LaunchSpec, opts: ProbeOptions, *, as_json: bool) -> int:
    """``mgpu probe-nccl``: run the probe with a progress display, print the result, return the exit code."""
    from isaaclab_mgpu.launcher.probe.run import probe_nccl as run_probe
    from isaaclab_mgpu.report import probe as shown

    saved_workarounds(spec, enabled=opts.saved_workarounds)  # its warnings; the probe applies the same
    with shown.ProbeDisplay() as display:
        summary = run_probe(spec, opts, display)
    shown.show(summary, as_json=as_json)
    return summary.exit_code


def emit_probe_job(spec: LaunchSpec, opts: ProbeOptions, options: JobOptions, *, as_json: bool) -> int:
    """``mgpu probe-nccl --emit sbatch``: print the job file whose step runs the probe on every node."""
    from isaaclab_mgpu.launcher.probe.run import ranks_per_node

    options = dataclasses.replace(options, job_name=options.job_name or "mgpu-probe")
    shown = ["--json"] if as_json else []
    pairs = None
    if opts.pairs and spec.nnodes_max > 1:  # across nodes: one step per pair of nodes
        pairs = [*dataclasses.replace(opts, pairs=False, world_sizes=(2,)).argv(), *shown]
        opts = dataclasses.replace(opts, pairs=False)
    sweep = [*opts.argv(), *shown]
    report.out(probe_sbatch(spec, sweep, options, ranks_per_node(spec, opts), pairs).rstrip("\n"))
    return 0


def check_isaac_task(spec: LaunchSpec) -> None:
    """Refuse an Isaac Lab task the ranks could not run (:mod:`isaaclab_mgpu.launcher.isaac_preflight`)."""
    if not spec.builtin_worker:
        return
    from isaaclab_mgpu.launcher import isaac_preflight as preflight

    request = preflight.request_from(spec.training_args, spec.library)
    if request is not None:
        preflight.check(request)


def stall_options(spec: LaunchSpec, cmd: Command) -> StallOptions:
    """What the stall watch of ``train`` bounds, from the spec and the built command."""
    from isaaclab_mgpu.launcher.supervise import StallOptions

    auto = spec.stall_timeout == AUTO
    return StallOptions(
        stall_timeout=auto_cap(spec.startup_timeout) if auto else float(spec.stall_timeout),
        auto=auto,
        startup_timeout=spec.startup_timeout,
        on_silence=spec.stall_on_silence,
        reports_expected=spec.builtin_worker,
        multi_node=_multi_node(cmd),
    )


def _multi_node(cmd: Command) -> bool:
    return cmd.world_size is not None and len(cmd.rank_devices) < cmd.world_size


def probe_command(spec: LaunchSpec, world_size: int | None) -> str:
    """The ``mgpu probe-nccl`` line that checks communication with ``spec``'s launch options."""
    argv = ["mgpu", "probe-nccl"]
    if spec.device == "cpu":
        argv += ["--device", "cpu"]
    if world_size:
        argv += ["--world-size", str(world_size)]
    for name in _PROBE_OPTIONS:
        value = getattr(spec, name, None)
        if value is not None:
            argv += [f"--{name}", ",".join(value) if isinstance(value, tuple) else str(value)]
    return shell_join(argv)


def exit_code(result: RunResult, cmd: Command, spec: LaunchSpec) -> int:
    """Map a run's result to 0, or raise the :mod:`errors` exception that carries its exit code."""
    if result.stall is not None:
        where = ""
        if result.stall.phase == "rendezvous" and spec.nnodes:
            at = spec.rdzv_endpoint or ":".join(str(v) for v in (spec.master_addr, spec.master_port) if v)
            where = f" (--nnodes {spec.nnodes}{f' at {at}' if at else ''})"
        nxt = f"; check communication with: {probe_command(spec, cmd.world_size)}"
        raise Hang(f"hang: {result.stall.headline()}{where}{nxt}", exit_code=result.exit_code)
    if result.interrupted:
        killed = result.killed_after_grace
        how = "processes that outlived the grace period were SIGKILLed" if killed else "every process ended"
        raise Interrupted(f"stopped as asked; {how}", exit_code=result.exit_code)
    if result.failure is not None:
        f = result.failure
        what = f"signal {f.signal}" if f.signal else f"exit code {f.exit_code}"
        where = f" on {f.host}" if f.host else ""
        if f.exit_code == EXIT_INTERRUPTED and _multi_node(cmd):
            # Nobody interrupted this mgpu: the stop request reached this node's ranks from another.
            seen = result.elsewhere or "see the other nodes' output"
            raise WorkerFailure(
                f"the run was stopped on another node: rank {f.rank}{where} ended on that stop "
                f"request (exit code {f.exit_code}) after saving its state; {seen}",
                exit_code=result.exit_code,
            )
        broke = ""
        if _multi_node(cmd) and any(m in (f.traceback or f.stderr_tail or "") for m in PEER_GONE):
            seen = result.elsewhere or "that node stopped or died"
            broke = f"; its connection to a rank on another node broke: {seen}"
        why = f.why()
        if f.reason and not broke:
            # The rank's own words are the reason; its code is in the record and the exit status.
            raise WorkerFailure(f"rank {f.rank}{where}: {f.reason}", exit_code=result.exit_code)
        told = f": {why}" if why and not broke else ""
        message = f"rank {f.rank}{where} failed with {what}{told}{broke}"
        raise WorkerFailure(message, exit_code=result.exit_code)
    if result.exit_code != 0:
        message = f"{cmd.launcher} failed with exit code {result.exit_code}"
        raise WorkerFailure(message, exit_code=result.exit_code)
    return 0


def list_runs(log_root: str, *, as_json: bool, last: bool, limit: int) -> int:
    """Run ``runs``: the runs under ``log_root`` newest first, or one run folder's story."""
    from isaaclab_mgpu.report import runs as shown

    root = Path(log_root)
    if not root.is_dir():
        raise UsageError(f"{log_root!r} is not a folder; give the runs' log root (default: logs)")
    if last:
        shown.last(runs.last_folder(runs.find_runs(root, limit=1), log_root))
        return 0
    told = runs.story(root)
    if told is not None:
        told = dataclasses.replace(told, status=slurmjobs.run_status(told.status, told.events))
        (shown.story_json if as_json else shown.story)(told)
        return 0
    # One run more than the table shows tells it that there are more.
    rows = runs.find_runs(root, limit=0 if as_json or limit <= 0 else limit + 1)
    rows = slurmjobs.rows_with_jobs(root, rows)  # SLURM: queued jobs, and lost runs whose job is over
    rows = kubectl.rows_with_kubernetes(root, rows)  # where kubectl is: its jobs
    if as_json:
        shown.as_json(rows)
    else:
        shown.table(rows, log_root, limit=limit)
    return 0


def skills_check(path: str, parse: Callable[[list[str]], str | None]) -> int:
    """Run ``skills check``: validate ``skills/`` and ``docs/`` under ``path``, commands by ``parse``."""
    from isaaclab_mgpu.tools.skills_check import check_tree

    return report.skills_problems(check_tree(Path(path), parse))


def live_stacks(run_folder: str | None) -> int:
    """Run ``stacks``: ask the ranks of a running run for their Python stacks and print them."""
    from isaaclab_mgpu.launcher import livestacks
    from isaaclab_mgpu.report.stacks import stacks

    run = livestacks.pick(livestacks.find_runs(), run_folder)
    return stacks(run, livestacks.dump(run))


def scale(spec: LaunchSpec, options: ScaleOptions) -> int:
    """``mgpu scale``: run the sweep, print the table, write the JSON and the picture (also on Ctrl-C)."""
    from isaaclab_mgpu.launcher import scale as sweep
    from isaaclab_mgpu.report import scale as shown

    check_isaac_task(spec)
    plan = sweep.plan(spec, options)  # every bad input refused here: nothing has started
    report.note(f"scale: {len(plan.points)} point(s), each a full mgpu train; results go to {plan.out}")
    before = sweep.load_1m()
    with shown.ScaleProgress(plan) as progress:
        results, stopped = sweep.run_sweep(plan, progress)
    rows = sweep.compare(results)
    json_path = sweep.write_json(
        plan,
        results,
        complete=not stopped,
        load=(before, sweep.load_1m()),
        argv=["mgpu", *spec.command_line] if spec.command_line else None,
    )
    png, why = None, None
    if any(r.result.ok for r in rows):
        from isaaclab_mgpu.launcher.scale_plot import NoPlotter, draw

        try:
            png = draw(rows, plan.out / sweep.PNG_NAME, shown.title(plan))
        except NoPlotter as exc:
            why = str(exc)
    else:
        why = "no point measured a rate"
    shown.table(plan, rows, target=options.target_reward, verdicts=sweep.verdicts(rows))
    shown.written(json_path, png, why)
    if stopped:
        raise Interrupted(f"stopped by a signal; the points measured so far are in {plan.out}")
    missed = [r for r in results if r.status != "ok"]  # a node > 0 measures nothing itself: not a miss
    if missed:
        first = missed[0]
        raise MgpuError(
            f"{len(missed)} of {len(results)} scale point(s) did not measure; first: {first.point.label} "
            f"{first.status} ({first.reason}); its output: {first.logs[0] if first.logs else plan.out}"
        )
    return 0


def follow_logs(name: str, root: str, *, follow: bool, poll_s: float = 1.0) -> int:
    """``mgpu logs``: rank 0's console of the run ``name`` names (``follow``: until it ends)."""
    kube = _kubernetes_job(name, Path(root))
    if kube is not None:
        return _kubernetes_logs(kube, follow=follow)
    target = slurmjobs.find_target(name, Path(root))
    folder = target.folder
    if folder is None:
        job = target.jobs[-1]
        if not follow:
            again = shell_join([*_invoked(), "logs", "-f", name])
            raise MgpuError(f"SLURM job {job} has not started the run yet; {again} waits for it")
        runs_line = shell_join([*_invoked(), "runs", root])
        report.note(f"waiting for SLURM job {job} to start the run ({runs_line} says why it waits)")
        while (folder := slurmjobs.run_of_job(job, Path(root))) is None:
            state = _job_over(job)
            if state is not None:
                sub = target.submission
                out = f"; its output: {sub.cwd}/{sub.name}-{job}.out" if sub is not None else ""
                raise MgpuError(f"SLURM job {job} ended ({state}) before its run started{out}")
            time.sleep(2.0)
    report.note(f"rank 0's console of {folder}")
    follower = slurmjobs.Follower(folder)
    probed = 0.0
    while True:
        lines, fold, events = follower.read()
        for line in lines:
            report.out(line)
        if not follow:
            return 0
        status = fold.status if fold is not None else "running"
        if status == "running" and time.monotonic() - probed > 5 * poll_s:
            probed = time.monotonic()
            status = slurmjobs.run_status(status, events)  # lost when its SLURM job is over
        if status in slurmjobs.ENDED:
            for line in follower.read()[0]:
                report.out(line)
            story = shell_join([*_invoked(), "runs", str(folder)])
            report.note(f"the run ended {status}: {folder} (its story: {story})")
            return 0 if status == "finished" else 1
        time.sleep(poll_s)


def _kubernetes_job(name: str, root):
    """The Kubernetes job recorded under ``root`` as ``name`` (None: none, or a run folder's name)."""
    if Path(name).is_dir():
        return None
    return next((job for job in kubectl.submitted(root) if job.name == name), None)


def _kubernetes_logs(job, *, follow: bool) -> int:
    """Node 0's console of a Kubernetes job: ``kubectl logs`` of its pod (``-f``: until it ends)."""
    argv = kubectl.logs_argv(job, follow=follow)
    report.note(f"node 0's console of {job.kind} {job.name} in {job.namespace}: {shell_join(argv)}")
    try:
        return subprocess.run(argv, check=False, stdin=subprocess.DEVNULL).returncode
    except FileNotFoundError:
        raise UsageError(f"mgpu logs {job.name} needs kubectl, which is not on PATH here") from None


def _kubernetes_cancel(job, root, *, now: bool) -> int:
    """Delete a Kubernetes job: its pods save at the stop (``now``: force-deleted, no save)."""
    what = f"{job.kind} {job.name} in {job.namespace}"
    before = kubectl.job_state(job)
    if before.state == "gone":
        raise MgpuError(f"kubectl finds no {what}: nothing to cancel (deleted, or never applied)")
    if before.state in ("finished", "failed"):
        raise MgpuError(f"{what} has already ended ({before.state}); nothing to cancel")
    if not kubectl.cancel(job, now=now):
        raise MgpuError(f"kubectl finds no {what}: nothing to cancel (deleted meanwhile)")
    manifest = jobs_dir(root) / Path(job.manifest).name  # where mgpu submit wrote it
    again = f"; to continue, submit it again: {shell_join(['kubectl', 'apply', '-f', str(manifest)])}"
    if now:
        report.note(f"deleted {what} and force-deleted its pods: no checkpoint at the stop{again}")
    elif before.state == "queued":
        report.note(f"deleted {what} before its pods ran ({before.reason or 'queued'}){again}")
    else:
        report.note(f"deleted {what}: its pods stopped at a checkpoint (SIGTERM) and are gone{again}")
    return 0


def _invoked() -> tuple[str, ...]:
    """How the user started this mgpu (``uv run mgpu``, ``mgpu`` …), for the commands it prints."""
    return invocation(probe_machine())


def cancel(name: str, root: str, *, now: bool, timeout_s: float = 180.0) -> int:
    """``mgpu cancel``: stop the run ``name`` names at a checkpoint through its job (``now``: SIGKILL)."""
    kube = _kubernetes_job(name, Path(root))
    if kube is not None:
        return _kubernetes_cancel(kube, Path(root), now=now)
    target = slurmjobs.find_target(name, Path(root))
    folder = target.folder
    what = str(folder) if folder is not None else f"the job named {name}"
    if not target.jobs:
        raise MgpuError(f"{what}: no SLURM job trains this run; stop an mgpu train with Ctrl-C (or SIGTERM)")
    job = target.jobs[-1]
    states = slurmjobs.probe_jobs([job])
    if states is None:
        raise MgpuError(f"SLURM does not answer here (squeue); cannot cancel job {job} of {what}")
    if not states[job].alive:
        state = states[job].state or "unknown to SLURM"
        raise MgpuError(f"SLURM job {job} of {what} is not running ({state})")
    subs = [s for s in slurmjobs.submissions(root) if s.job_id in target.jobs]
    again = f"; to continue: {shell_join(list(subs[0].command))}" if subs and subs[0].command else ""
    before = ev.read(folder) if folder is not None else None
    seen = len(before.events) if before is not None else 0
    # A pending job runs nothing (a requeued one waits too): cancelled, nothing to stop.
    started = before is not None and job in runs.jobs_of(before.events) and states[job].state != "PENDING"
    if started and not now:  # started: its ledger was read, so the run folder is known
        # Node 0's mgpu reads it when the stop comes: a stop to continue, recorded as stopped.
        with contextlib.suppress(OSError):
            (Path(folder) / CANCEL).write_text(f"SLURM job {job}\n", encoding="utf-8")
    slurmjobs.scancel(job, now=now)
    if not started or now:
        ended = slurmjobs.wait(lambda: _job_over(job), timeout_s)
        if not started:
            report.note(f"cancelled SLURM job {job} before it started the run ({states[job].state})")
        else:
            report.note(f"cancelled SLURM job {job} hard (SIGKILL): no checkpoint at the stop{again}")
        return 0 if ended else _not_ended(job)
    end = slurmjobs.wait(lambda: _end_event(folder, seen), timeout_s)
    ended = slurmjobs.wait(lambda: _job_over(job), timeout_s)
    if end is None:
        raise MgpuError(
            f"SLURM job {job} was cancelled, but {folder} recorded no stop within {timeout_s:.0f} s: no "
            f"checkpoint at the stop is known ({shell_join([*_invoked(), 'runs', str(folder)])} tells what "
            f"was){again}"
        )
    at = f" at iteration {end.iteration}" if end.iteration is not None else ""
    saved = _checkpoint_at(folder, end.iteration)
    if isinstance(end, ev.Interrupted | ev.Requeue) and saved is None:
        killed = isinstance(end, ev.Interrupted) and end.exit_code == EXIT_KILLED_AFTER_GRACE
        why = " (ranks SIGKILLed after mgpu's grace period)" if killed else ""
        raise MgpuError(
            f"SLURM job {job} stopped{at} without a checkpoint at the stop{why}; its newest checkpoint "
            f"is {_checkpoint_at(folder, None) or 'none'}{again}"
        )
    told = f", saved {saved}" if saved else ""
    report.note(f"stopped{at}{told} ({end.kind}); SLURM job {job} {ended or 'still ending'}{again}")
    return 0 if ended else _not_ended(job)


def _job_over(job: str) -> str | None:
    """The job's final state once SLURM no longer runs it (None while it does or SLURM does not say)."""
    states = slurmjobs.probe_jobs([job])
    if states is None or states[job].alive:
        return None
    return states[job].state or "gone"


def _end_event(folder, seen: int):
    """The first event after the first ``seen`` that ends a launch (interrupted, requeue, finished …)."""
    ledger = ev.read(folder)
    new = ledger.events[seen:] if ledger is not None else ()
    ends = ev.Interrupted | ev.Requeue | ev.Finished | ev.Failed
    return next((e for e in new if isinstance(e, ends)), None)


#: Said on every node before its step ends for a requeue: SLURM's lines that follow are no failure.
_REQUEUE_EXPECTED = (
    "expected next, not failures: srun's 'Exited with exit code 75' for each node and "
    "slurmstepd's '*** STEP … CANCELLED … DUE TO JOB REQUEUE ***'"
)


def _checkpoint_at(folder, iteration: int | None) -> str | None:
    """The checkpoint at ``iteration`` (None: the newest) as the run folder or its ledger has it."""
    newest = resume.newest_whole(Path(folder)).checkpoint
    if newest is not None and (iteration is None or resume.saved_iteration(newest) == iteration):
        return str(newest)
    ledger = ev.read(folder, kinds=("checkpoint",))
    events = ledger.events if ledger is not None else ()
    found = [e for e in events if isinstance(e, ev.Checkpoint) and iteration in (None, e.iteration)]
    return found[-1].path if found else None


def _not_ended(job: str) -> int:
    raise MgpuError(f"SLURM job {job} was cancelled but SLURM still runs it; see squeue -j {job}")
