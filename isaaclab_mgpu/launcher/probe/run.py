"""The parent side of ``mgpu probe-nccl``: one supervised launch per world size, each with a timeout.

For every world size (then every device pair with ``--pairs``) the probe builds a
:class:`~isaaclab_mgpu.launcher.spec.LaunchSpec` running :mod:`isaaclab_mgpu.rank.probe_worker`
and sends it down ``train``'s path (``pipeline.prepare`` → ``build`` → ``Supervisor``), reading the
ranks' progress reports for the progress display. When ``--timeout`` passes first,
:func:`diagnose_hang` names the local ranks that did not finish, their stage, process state and
stacks (:func:`isaaclab_mgpu.launcher.supervise.stacks.of_ranks`), then ``Supervisor.kill``
SIGKILLs the tree (no process survives) and the sweep moves on.

Ctrl-C, SIGTERM and SIGHUP are handed to the launch's ``Supervisor`` (its one shutdown path); the
probe then stops with the supervisor's code (130, or 124 when a process had to be SIGKILLed). Its
notes go to the caller's ``Tell`` (``report.probe`` renders them).

Each launch's folder under ``<log_dir>/probe-<stamp>/``, the workaround search (:mod:`.bisect`,
on the smallest failing world size) and the multi-node probe (:attr:`Launch.port_offset`,
:func:`ranks_per_node` for ``--emit sbatch``): ``docs/probe-nccl.md``, "On a hang",
"Workarounds" and "Across nodes".
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from isaaclab_mgpu.contract import elastic
from isaaclab_mgpu.contract import probe_channel as channel
from isaaclab_mgpu.contract.errors import EnvironmentProblem, Interrupted, UsageError
from isaaclab_mgpu.contract.progress import Report, Reports
from isaaclab_mgpu.launcher import workarounds
from isaaclab_mgpu.launcher.build import DEFAULT_LOG_DIR
from isaaclab_mgpu.launcher.notes import Note, Tell
from isaaclab_mgpu.launcher.probe.bisect import Search, Trial, find_workarounds
from isaaclab_mgpu.launcher.probe.config import ProbeOptions, default_world_sizes
from isaaclab_mgpu.launcher.probe.results import (
    ERROR,
    HANG,
    OK,
    HungRank,
    WorldResult,
    aggregate,
    exit_code,
    slowest,
)
from isaaclab_mgpu.launcher.resolve import Machine, probe_machine, selected_devices
from isaaclab_mgpu.launcher.spec import LaunchSpec
from isaaclab_mgpu.launcher.supervise import RunResult, SuperviseOptions, Supervisor, stacks
from isaaclab_mgpu.launcher.supervise.shutdown import Interrupts

WORKER_MODULE = "isaaclab_mgpu.rank.probe_worker"
#: How often the parent looks at the launch and the ranks' reports.
POLL_S = 0.2
#: Hung ranks are stuck by definition: keep the teardown short.
TEARDOWN = SuperviseOptions(grace_period=3.0, kill_after=2.0, console=False)
#: Launch options the probe decides itself.
_NOT_FOR_PROBE = ("nproc_per_node", "rl_library", "ml_framework", "script", "module", "inject_distributed")


@dataclass(frozen=True)
class Launch:
    """One planned launch: a world size, or a pair of devices."""

    label: str
    """``world size 2`` or ``pair 0,1``."""

    world_size: int
    """Total ranks."""

    nproc: int
    """Ranks on this node."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Variables this launch adds (``CUDA_VISIBLE_DEVICES`` for a pair)."""

    port_offset: int = 0
    """Added to a given ``--master_port`` on several nodes, so no node joins the last launch's store."""

    @property
    def slug(self) -> str:
        """Folder name for this launch."""
        return self.label.replace("world size ", "ws").replace("pair ", "pair-").replace(",", "-")


@dataclass(frozen=True)
class ProbePlan:
    """Everything decided before the first launch."""

    backend: str
    """``nccl`` or ``gloo``."""

    sizes: tuple[int, ...]
    """Message sizes in bytes."""

    world: tuple[Launch, ...]
    """One launch per world size, in order."""

    pairs: tuple[Launch, ...] = ()
    """One launch per device pair (``--pairs``)."""


@dataclass(frozen=True)
class ProbeSummary:
    """The whole probe, for the report."""

    backend: str
    """Backend probed."""

    device: str
    """``cuda`` or ``cpu``."""

    folder: str
    """Root of this probe's files."""

    world: tuple[WorldResult, ...]
    """Per world size."""

    pairs: tuple[WorldResult, ...] = ()
    """Per device pair."""

    applied: Mapping[str, str] = field(default_factory=dict)
    """Saved workarounds applied to every launch."""

    search_label: str | None = None
    """The launch ``--try-workarounds`` worked on."""

    search: Search | None = None
    """What ``--try-workarounds`` found."""

    skipped: tuple[str, ...] = ()
    """Candidates not tried because the environment already sets them."""

    saved: str | None = None
    """``NAME=VALUE`` stored by ``--save-workaround``."""

    store: str | None = None
    """Where it was stored."""

    @property
    def exit_code(self) -> int:
        """0 only when every launch passed."""
        return exit_code(r.status for r in (*self.world, *self.pairs))


@dataclass(frozen=True)
class WorkaroundsApplied(Note):
    """The saved workarounds ``env`` are applied to every launch of the probe."""

    env: Mapping[str, str]


@dataclass(frozen=True)
class LaunchBegun(Note):
    """The launch ``label`` (a world size or a GPU pair) starts; ``timeout`` seconds make it a hang."""

    label: str
    timeout: float


@dataclass(frozen=True)
class LaunchAt(Note):
    """Where the running launch ``label`` is now (``text``, from its ranks' heartbeats)."""

    label: str
    text: str


@dataclass(frozen=True)
class LaunchEnded(Note):
    """A launch finished or was torn down: what it measured or why it failed."""

    result: WorldResult


@dataclass(frozen=True)
class TrialDone(Note):
    """A workaround candidate was tried on the failing launch ``label``."""

    label: str
    trial: Trial


def check_spec(spec: LaunchSpec) -> None:
    """Reject launch options that make no sense for a probe (before anything is spawned)."""
    for name in _NOT_FOR_PROBE:
        if getattr(spec, name) not in (None, False):
            hint = "; use --world-size N" if name == "nproc_per_node" else ""
            raise UsageError(f"--{name} does not apply to probe-nccl, which runs its own worker{hint}")
    if spec.training_args:
        raise UsageError(f"probe-nccl got unexpected arguments {' '.join(spec.training_args)!r}; see --help")
    if spec.nnodes is not None and ":" in spec.nnodes:
        raise UsageError(f"--nnodes {spec.nnodes!r}: probe-nccl needs a fixed node count, e.g. --nnodes 2")


def ranks_per_node(spec: LaunchSpec, opts: ProbeOptions) -> int:
    """The most ranks one node starts in the sweep: what a probe job books per node (no machine read)."""
    check_spec(spec)
    nnodes = spec.nnodes_max
    if opts.world_sizes is None and spec.device != "cpu":
        raise UsageError(
            "--emit: give the world sizes to probe (--world-sizes 8,16): the GPUs each node books"
        )
    sizes = opts.world_sizes or default_world_sizes(0, nnodes, cpu=True)
    return max(_per_node(ws, nnodes) for ws in sizes)


def _per_node(world_size: int, nnodes: int) -> int:
    """The ranks each node starts for ``world_size``; raise when it does not split over the nodes."""
    if world_size % nnodes:
        raise UsageError(
            f"world size {world_size} does not split over --nnodes {nnodes}; use a multiple of {nnodes}"
        )
    return world_size // nnodes


def plan_probe(spec: LaunchSpec, opts: ProbeOptions, machine: Machine) -> ProbePlan:
    """Decide backend, sizes and launches for ``spec`` on ``machine``; raise on impossible input."""
    check_spec(spec)
    cpu = spec.device == "cpu"
    backend = opts.backend_for(spec.device)
    nnodes = spec.nnodes_max
    gpus = 0 if cpu else selected_devices(spec, machine).count
    if not cpu and gpus == 0:
        raise EnvironmentProblem(
            "no GPU is visible here; use --device cpu to probe gloo on CPU ranks, or run on a GPU node"
        )
    world_sizes = opts.world_sizes or default_world_sizes(gpus, nnodes, cpu=cpu)
    world = []
    for ws in world_sizes:
        nproc = _per_node(ws, nnodes)
        if not cpu and nproc > gpus:
            raise EnvironmentProblem(
                f"world size {ws} needs {nproc} GPU(s) per node but {gpus} are visible; "
                f"use world sizes up to {gpus * nnodes}"
            )
        world.append(Launch(f"world size {ws}", ws, nproc, port_offset=len(world) if nnodes > 1 else 0))
    pairs: list[Launch] = []
    if opts.pairs:
        if cpu or nnodes > 1:
            raise UsageError(
                "--pairs tests the links between this node's GPUs; use it with --device cuda on one node"
            )
        entries = selected_devices(spec, machine).entries
        if len(entries) < 2:
            raise EnvironmentProblem("--pairs needs at least 2 visible GPUs")
        for i, j in itertools.combinations(range(len(entries)), 2):
            env = {"CUDA_VISIBLE_DEVICES": f"{entries[i]},{entries[j]}"}
            pairs.append(Launch(f"pair {i},{j}", 2, 2, env))
    if opts.try_workarounds and backend != "nccl":
        raise UsageError("--try-workarounds tries NCCL variables; it needs --backend nccl on GPUs")
    return ProbePlan(backend, opts.sizes_for(spec.device), tuple(world), tuple(pairs))


def launch_spec(
    spec: LaunchSpec,
    launch: Launch,
    plan: ProbePlan,
    opts: ProbeOptions,
    folder: Path,
    *,
    module: str = WORKER_MODULE,
) -> LaunchSpec:
    """The LaunchSpec that runs the probe worker for ``launch``, writing into ``folder``."""
    args = [
        "--results", str(folder.resolve()),
        "--backend", plan.backend,
        "--device", spec.device,
        "--sizes", ",".join(str(s) for s in plan.sizes),
        "--iters", str(opts.iters),
        "--warmup", str(opts.warmup),
    ]  # fmt: skip
    # A pair names its two GPUs in CUDA_VISIBLE_DEVICES itself; a world size uses the first ids.
    gpu_ids = None if spec.gpu_ids is None or launch.env else spec.gpu_ids[: launch.nproc]
    port = spec.master_port + launch.port_offset if spec.master_port is not None else None
    return dataclasses.replace(
        spec,
        master_port=port,
        gpu_ids=gpu_ids,
        nproc_per_node=str(launch.nproc),
        module=module,
        inject_distributed=False,
        training_args=tuple(args),
        log_dir=str(folder / "logs"),
    )


class Prober:
    """Runs launches of one probe, each in a fresh folder under ``root``."""

    def __init__(
        self,
        spec: LaunchSpec,
        opts: ProbeOptions,
        plan: ProbePlan,
        root: Path,
        tell: Tell,
        *,
        base_env: Mapping[str, str] | None = None,
        module: str = WORKER_MODULE,
    ) -> None:
        self.spec, self.opts, self.plan, self.root = spec, opts, plan, root
        self.tell = tell
        self.base_env = dict(base_env or {})
        self.module = module
        self._runs: dict[str, int] = {}

    def validate(self, launches: tuple[Launch, ...]) -> None:
        """Resolve every launch strictly, so impossible input fails before anything is spawned."""
        from isaaclab_mgpu.launcher.pipeline import prepare

        for launch in launches:
            folder = self.root / launch.slug
            spec = launch_spec(self.spec, launch, self.plan, self.opts, folder, module=self.module)
            prepare(spec, strict=True, extra_env={**self.base_env, **launch.env})

    def run(self, launch: Launch, extra_env: Mapping[str, str] | None = None) -> WorldResult:
        """Run ``launch`` once with ``extra_env`` added; always returns with its tree gone."""
        from isaaclab_mgpu.launcher.pipeline import prepare

        n = self._runs[launch.slug] = self._runs.get(launch.slug, 0) + 1
        folder = self.root / (launch.slug if n == 1 else f"{launch.slug}-{n}")  # reruns: -2, -3, ...
        folder.mkdir(parents=True, exist_ok=True)
        env = {**self.base_env, **launch.env, **(extra_env or {})}
        spec = launch_spec(self.spec, launch, self.plan, self.opts, folder, module=self.module)
        # Validated strictly before the sweep (validate()); here a master port still in TIME_WAIT
        # from the previous launch must not abort the sweep.
        _, cmd = prepare(spec, strict=False, extra_env=env)
        ranks = tuple(sorted(cmd.rank_devices)) or tuple(range(launch.nproc))
        reports = Reports(folder)

        self.tell(LaunchBegun(launch.label, self.opts.timeout))
        start = time.monotonic()
        signals = Interrupts()  # stop signals go to the supervisor, its one shutdown path
        sup = Supervisor(cmd, TEARDOWN, signals=signals)
        hung: tuple[HungRank, ...] = ()
        timed_out = False
        with signals.installed():
            sup.start()
            deadline = start + self.opts.timeout  # polled up to it, not the next POLL_S past it
            while (outcome := sup.wait(timeout=min(POLL_S, max(0.01, deadline - time.monotonic())))) is None:
                if signals.stop_asked:
                    continue  # the supervisor is stopping the tree (a second Ctrl-C kills it)
                self.tell(LaunchAt(launch.label, _position(reports.read(), ranks)))
                if time.monotonic() >= deadline:
                    hung = diagnose_hang(sup, reports.read(), ranks)
                    # Hung ranks can save nothing, and the launcher's own shutdown would only wait
                    # for them (torchrun's grace, then ours: 5 s): the tree is SIGKILLed at once.
                    outcome = sup.kill()
                    timed_out = True
                    break
        elapsed = time.monotonic() - start
        if signals.stop_asked:
            ended = WorldResult(launch.label, launch.world_size, "interrupted", elapsed, str(folder))
            self.tell(LaunchEnded(ended))
            message = "probe-nccl interrupted; every rank of the launch was stopped"
            raise Interrupted(message, exit_code=outcome.exit_code)
        beats = reports.read()
        per_rank = channel.read_results(folder)
        sizes = aggregate(per_rank, launch.world_size)
        error = None
        if timed_out:
            status = HANG
        elif outcome.exit_code != 0:
            status, error = ERROR, _error_text(outcome, folder)
        elif any(beats.get(r) is None or beats[r].stage != "done" for r in ranks):
            status, error = ERROR, "a rank exited without finishing the probe"
        elif len(sizes) < len(self.plan.sizes):
            status, error = ERROR, "a rank reported fewer message sizes than asked"
        else:
            status = "wrong-result" if any(s.wrong for s in sizes) else OK
        result = WorldResult(
            label=launch.label,
            world_size=launch.world_size,
            status=status,
            elapsed_s=elapsed,
            folder=str(folder),
            init_s=slowest(per_rank, "init_s"),
            barrier_s=slowest(per_rank, "barrier_s"),
            sizes=sizes,
            hung=hung,
            error=error,
            env=dict(env),
            survivors=tuple(outcome.survivors),
        )
        self.tell(LaunchEnded(result))
        return result


def diagnose_hang(
    sup: Supervisor, beats: Mapping[int, Report], ranks: tuple[int, ...]
) -> tuple[HungRank, ...]:
    """The ranks that did not finish (``beats``: their last reports), their stage, state and stacks."""
    tree = sup.descendants()
    members = {p.pid: p for p in tree}
    now = time.time()
    pending = [(rank, beats.get(rank)) for rank in ranks if rank not in beats or beats[rank].stage != "done"]
    # The state before the stacks are dumped (a stopped rank is resumed for it); no tree process: gone.
    states = {rank: _state(members.get(beat.pid)) for rank, beat in pending if beat is not None}
    dumped = stacks.of_ranks(tree, (beat for _, beat in pending if beat is not None))
    hung = []
    for rank, beat in pending:
        if beat is None:
            hung.append(HungRank(rank, "not started (launcher or rendezvous)", None))
            continue
        stack = dumped.get(rank, "").strip()
        hung.append(
            HungRank(
                rank=rank,
                stage=channel.describe(beat),
                state=states[rank],
                pid=beat.pid,
                host=beat.host,
                since_s=max(0.0, now - beat.time),
                stack=stack or None,
                stack_file=beat.stack_file if stack else None,
            )
        )
    return tuple(hung)


def _state(proc: psutil.Process | None) -> str:
    if proc is None:
        return "gone"
    try:
        return str(proc.status())
    except psutil.Error:
        return "gone"


def _position(beats: Mapping[int, Report], ranks: tuple[int, ...]) -> str:
    """The lagging rank's stage, for the progress line."""
    mine = [beats[r] for r in ranks if r in beats]
    if len(mine) < len(ranks):
        return "starting ranks"
    lag = min(mine, key=channel.order)
    if lag.stage == "done":
        return "every rank done; the launcher is exiting"
    return f"rank {lag.rank}: {channel.describe(lag)}"


def _error_text(outcome: RunResult, folder: Path) -> str:
    failure = outcome.failure
    if failure is not None:
        where = f"rank {failure.rank}: " if failure.rank is not None else ""
        for text in (failure.traceback, failure.stderr_tail):
            lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
            if lines:
                return where + lines[-1]
    first = elastic.first_error(elastic.error_files(folder / "logs"))  # torchrun's @record files
    if first is not None:
        return f"rank {first.rank}: {first.message}"
    if failure is not None and failure.signal:
        return f"a rank died of {failure.signal}"
    return f"the launch exited with {outcome.exit_code}"


def probe_nccl(
    spec: LaunchSpec,
    opts: ProbeOptions,
    tell: Tell,
    *,
    module: str = WORKER_MODULE,
    extra_env: Mapping[str, str] | None = None,
    machine: Machine | None = None,
) -> ProbeSummary:
    """Run the whole probe: the world-size sweep, pairs, and the workaround search."""
    machine = machine or probe_machine(gpu_uuids=spec.gpu_ids is not None)
    plan = plan_probe(spec, opts, machine)
    applied = dict(
        workarounds.for_launch(machine.environ, device=spec.device, enabled=opts.saved_workarounds).variables
    )
    # Nodes of one job share the file system: each keeps its launches' files under its own name.
    host = f"-{machine.hostname}" if spec.nnodes_max > 1 else ""
    root = Path(spec.log_dir or DEFAULT_LOG_DIR) / f"probe-{machine.run_stamp}{host}"
    base_env = {**applied, **(extra_env or {})}
    prober = Prober(spec, opts, plan, root, tell, base_env=base_env, module=module)

    prober.validate((*plan.world, *plan.pairs))
    tell(WorkaroundsApplied(applied))
    world = tuple(prober.run(launch) for launch in plan.world)
    pairs = tuple(prober.run(launch) for launch in plan.pairs)
    summary = ProbeSummary(plan.backend, spec.device, str(root), world, pairs, applied)

    failing = next((launch for launch, r in zip(plan.world, world, strict=True) if not r.ok), None)
    if opts.try_workarounds and failing is not None:
        already = {*machine.environ, *applied}
        candidates = [c for c in workarounds.CANDIDATES if c.name not in already]
        skipped = tuple(c.assignment for c in workarounds.CANDIDATES if c not in candidates)
        search = find_workarounds(
            lambda env: prober.run(failing, env).status,
            candidates,
            on_trial=lambda t: tell(TrialDone(failing.label, t)),
        )
        summary = dataclasses.replace(summary, search_label=failing.label, search=search, skipped=skipped)
        if opts.save_workaround and search.confirmed:
            best = search.confirmed[0]
            path = workarounds.store_path(machine.environ)
            workarounds.save(path, workarounds.this_machine(), best.name, best.value)
            summary = dataclasses.replace(summary, saved=best.assignment, store=str(path))
    return summary
