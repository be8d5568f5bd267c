"""``mgpu scale``: does training on more ranks pay for this task? A sweep, measured for real.

The user's own training (a built-in task or an Isaac Lab task, any library, the options of
``mgpu train``) runs briefly at each world size of ``--world_sizes`` and, with ``--num_envs
A,B,C``, at each environment count per rank. Each point is one complete ``mgpu train`` child: the
same spec (:func:`point_spec` changes only the rank count, the environments, the iterations and the
run name), run by the argv ``dry-run --emit`` writes (:func:`~.jobfiles.train_argv`). A child, not
the supervisor in-process, because the CPU ceiling runs several trainings at once and one mgpu
process owns one supervised tree at a time (its signal handlers, subreaper and watchdog).

1. :func:`plan` (the one step that looks at the machine) refuses every bad input before anything
   starts (exit 2): a malformed list, a world size the node count does not divide, more ranks than
   visible GPUs (each point's spec goes through resolve, strictly, as ``train`` would), a user
   ``--script``, ``--max_iterations`` or ``--resume`` among the training arguments.
2. :func:`run_sweep` runs the points in order; a point that fails, hangs (exit 4) or outlives
   ``--point_timeout`` is a row that says so and the sweep goes on. A stop signal is passed to the
   running children and ends the sweep; the points measured so far are kept.
3. :func:`measure` reads a point's own run record (its ``summary.json``; no console line is
   parsed): the steady env-steps/s and s/iteration (warm-up left out) and their quartiles, the wall
   time from the point's start until the mean reward first reached ``--target_reward`` (start-up
   included), and on GPUs each rank's peak memory and mean utilisation once training began (NVML).
4. :func:`compare` gives each point its speedup and efficiency (speedup ÷ ranks) against the
   one-rank point of the same environment count.

On CPU ranks two ranks on a 2-core box cannot step twice the environments of one whatever the
collectives cost, so a world size ``k`` is also run as ``k`` independent one-rank trainings side by
side, its measured ideal: docs/scaling.md, "The CPU ceiling" (and ``OMP_NUM_THREADS=1``). Each child
runs in the output folder, so its run lands under its :data:`POINTS`: docs/scaling.md, "Output".
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isaaclab_mgpu.contract import files, records
from isaaclab_mgpu.contract import summary as summaries
from isaaclab_mgpu.contract.env import RUN_STAMP
from isaaclab_mgpu.contract.errors import EXIT_HANG, EXIT_INTERRUPTED, UsageError
from isaaclab_mgpu.launcher import jobfiles, nvml
from isaaclab_mgpu.launcher.notes import Note, Tell, silent
from isaaclab_mgpu.launcher.probe.config import default_world_sizes
from isaaclab_mgpu.launcher.resolve import probe_machine, selected_devices
from isaaclab_mgpu.launcher.scale_options import ScaleOptions
from isaaclab_mgpu.launcher.spec import RENDEZVOUS_OPTIONS, LaunchSpec
from isaaclab_mgpu.launcher.supervise.shutdown import Interrupts

#: The JSON file and the picture in the output folder.
JSON_NAME, PNG_NAME = "scale.json", "scale.png"
#: The points' runs and saved consoles in the output folder: each child's ``./logs`` (it runs there).
POINTS = "logs"
#: Seconds between NVML samples while a point runs on GPUs.
SAMPLE_S = 0.5
#: Training arguments a point sets itself, and what to use instead.
_OWNED = {
    "max_iterations": "use --iterations",
    "num_envs": "use --num_envs",
    "resume": "a point always starts afresh: leave it out",
}


@dataclass(frozen=True)
class Point:
    """One measurement of the sweep."""

    world_size: int
    """Ranks of the point (all nodes); for a ceiling point, how many independent trainings."""

    num_envs: int | None
    """Environments per rank (None: the task's default)."""

    ceiling: bool = False
    """``world_size`` independent one-rank trainings at once instead of one distributed run."""

    @property
    def label(self) -> str:
        """A short name, used for its log file: ``w2-e256``, ``w2-e256-ceiling``."""
        envs = "default" if self.num_envs is None else str(self.num_envs)
        return f"w{self.world_size}-e{envs}" + ("-ceiling" if self.ceiling else "")


@dataclass(frozen=True)
class Planned:
    """A point and the ``mgpu train`` command lines that measure it (one; ``k`` for a ceiling)."""

    point: Point
    """What is measured."""

    argvs: tuple[tuple[str, ...], ...]
    """Each child's argv (``python -m isaaclab_mgpu train …``)."""

    gpus: tuple[int, ...] = ()
    """NVML indices of the GPUs this node's ranks use (empty on CPU or without NVML)."""


@dataclass(frozen=True)
class ScalePlan:
    """Everything the sweep runs, decided before anything starts."""

    spec: LaunchSpec
    """The user's launch, as given."""

    options: ScaleOptions
    """The sweep's own options."""

    world_sizes: tuple[int, ...]
    """The world sizes, in order."""

    num_envs: tuple[int | None, ...]
    """The environment counts per rank, in order."""

    points: tuple[Planned, ...]
    """Every point, each distributed point followed by its ceiling (CPU)."""

    out: Path
    """The output folder."""

    env: tuple[tuple[str, str], ...]
    """Variables every child gets on top of this environment."""


def without_option(args: Sequence[str], name: str) -> list[str]:
    """``args`` without training option ``--name`` and its value (either spelling, ``=`` or not)."""
    spellings = {f"--{name}", f"--{name.replace('_', '-')}"}
    out: list[str] = []
    items = iter(args)
    for arg in items:
        flag, sep, _ = arg.partition("=")
        if flag in spellings:
            if not sep:
                next(items, None)  # its value
            continue
        out.append(arg)
    return out


def point_spec(
    spec: LaunchSpec, point: Point, iterations: int, *, copy: int | None = None, nnodes: int = 1
) -> LaunchSpec:
    """``spec`` for one point: its ranks per node, environments, iterations and run name (pure)."""
    # A point's run lives under the sweep's folder (its child's ./logs), never the user's log root.
    args = without_option(without_option(spec.training_args, "run_name"), "log_root")
    base = spec.run_name or "scale"
    name = f"{base}-{point.label}" + (f"-{copy}" if copy is not None else "")
    args += ["--max_iterations", str(iterations), "--run_name", name]
    if point.num_envs is not None:
        args += ["--num_envs", str(point.num_envs)]
    changes: dict[str, Any] = {"training_args": tuple(args)}
    if point.ceiling:
        # An independent one-rank training: no nodes to meet, nothing to share.
        changes.update(dict.fromkeys((*RENDEZVOUS_OPTIONS, "coordinator_address"), None))
        changes["nproc_per_node"] = "1"
    else:
        per_node = point.world_size // nnodes
        changes["nproc_per_node"] = str(per_node)
        if spec.gpu_ids is not None:
            changes["gpu_ids"] = spec.gpu_ids[:per_node]  # the first ones named, a rank each
    return dataclasses.replace(spec, **changes)


def child_argv(spec: LaunchSpec, python: str) -> tuple[str, ...]:
    """The ``mgpu train`` command line of ``spec``, run by ``python`` (pure)."""
    return (python, "-m", "isaaclab_mgpu", *jobfiles.train_argv(spec)[1:])


def plan(spec: LaunchSpec, options: ScaleOptions, environ: Mapping[str, str] | None = None) -> ScalePlan:
    """Every point and its command lines; every bad input refused here, before anything starts."""
    from isaaclab_mgpu.launcher.pipeline import prepare

    if not spec.builtin_worker:
        raise UsageError(
            "mgpu scale measures the built-in worker (a built-in or Isaac Lab task), whose ranks write "
            "summary.json; a --script/-m program writes none: time it with mgpu train"
        )
    if spec.nproc_per_node is not None:
        raise UsageError(
            f"--num_gpus {spec.nproc_per_node}: mgpu scale chooses the ranks of each point; give the "
            "world sizes with --world_sizes (e.g. 1,2,4)"
        )
    for name, instead in _OWNED.items():
        if spec.worker is not None and getattr(spec.worker, name) is not None:
            raise UsageError(f"--{name} is set by mgpu scale for each point; {instead}")
    env = os.environ if environ is None else environ
    nnodes = spec.nnodes_max
    if spec.nnodes is not None and ":" in spec.nnodes:
        raise UsageError(f"--nnodes {spec.nnodes}: a scale point needs a fixed node count, not MIN:MAX")
    machine = probe_machine(env, gpu_uuids=spec.device == "cuda")
    gpus = selected_devices(spec, machine) if spec.device == "cuda" else None
    world_sizes = options.world_sizes
    if world_sizes is None:
        if gpus is not None and gpus.count == 0:
            raise UsageError("no GPU is visible here; run mgpu scale --device cpu, or name --world_sizes")
        world_sizes = default_world_sizes(gpus.count if gpus else 0, nnodes, cpu=gpus is None)
    for k in world_sizes:
        if gpus is not None and gpus.count and k // nnodes > gpus.count:
            shown = ",".join(map(str, world_sizes))
            raise UsageError(
                f"--world_sizes {shown}: {k // nnodes} rank(s) per node need as many GPUs, but "
                f"{gpus.count} are visible here ({gpus.source}); list world sizes up to {gpus.count * nnodes}"
            )
        if k % nnodes:
            raise UsageError(
                f"--world_sizes: {k} ranks cannot be split evenly over --nnodes {nnodes}; give multiples "
                f"of {nnodes}"
            )
    envs: tuple[int | None, ...] = options.num_envs or (None,)
    ceiling = options.ceiling and spec.device == "cpu" and nnodes == 1
    out = (Path(options.out) if options.out else Path(spec.log_root) / "scale" / machine.run_stamp).absolute()
    planned: list[Planned] = []
    for n in envs:
        for k in world_sizes:
            point = Point(k, n)
            ps = point_spec(spec, point, options.iterations, nnodes=nnodes)
            try:
                resolved, _ = prepare(ps, strict=True, environ=env)  # what train would refuse
            except UsageError as exc:
                raise type(exc)(f"scale point {point.label}: {exc}") from None
            indices = _nvml_indices(resolved, machine) if spec.device == "cuda" else ()
            planned.append(Planned(point, (child_argv(ps, machine.python),), indices))
            if ceiling and k > 1:
                twin = Point(k, n, ceiling=True)
                copies = tuple(point_spec(spec, twin, options.iterations, copy=j) for j in range(k))
                prepare(copies[0], strict=True, environ=env)
                planned.append(Planned(twin, tuple(child_argv(c, machine.python) for c in copies)))
    extra = {"PYTHONUNBUFFERED": "1"}
    if spec.device == "cpu" and "OMP_NUM_THREADS" not in env:
        extra["OMP_NUM_THREADS"] = "1"
    return ScalePlan(
        spec=spec,
        options=options,
        world_sizes=tuple(world_sizes),
        num_envs=envs,
        points=tuple(planned),
        out=out,
        env=tuple(extra.items()),
    )


def _nvml_indices(resolved: Any, machine: Any) -> tuple[int, ...]:
    """NVML indices of the GPUs a resolved launch's ranks on this node get (what NVML can tell)."""
    uuids = machine.nvml_gpu_uuids or ()
    chosen = resolved.cuda_visible_devices
    entries = chosen.split(",") if chosen else list(resolved.visible.entries)
    if isinstance(resolved.nproc, int):
        entries = entries[: resolved.nproc]
    out: list[int] = []
    for entry in entries:
        if entry.isdigit():
            out.append(int(entry))
        else:
            matches = [i for i, u in enumerate(uuids) if u.startswith(entry)]
            if matches:
                out.append(matches[0])
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Running a point


@dataclass
class _Child:
    """One ``mgpu train`` child."""

    proc: subprocess.Popen[bytes]
    started: float
    """``time.time()`` at spawn."""
    log: Path
    """Its console output, saved."""


@dataclass(frozen=True)
class GpuUse:
    """One GPU's use during a point."""

    index: int
    """NVML index."""

    memory_peak_mib: int | None
    """Most memory in use at any sample, MiB."""

    utilization_pct: float | None
    """Mean GPU utilisation over the samples after the training began, percent."""


@dataclass(frozen=True)
class PointResult:
    """What one point measured, or why it could not."""

    point: Point
    """The point."""

    status: str
    """``ok``, ``failed``, ``hung``, ``timed out``, ``interrupted`` or ``not run``."""

    reason: str | None = None
    """Why it is not ``ok``: the child's exit code and its last error line."""

    exit_codes: tuple[int, ...] = ()
    """Each child's exit code."""

    wall_s: float | None = None
    """Seconds from the point's start to its last child's end."""

    env_steps_per_s: float | None = None
    """Steady environment steps per second, all ranks (a ceiling point: all trainings together)."""

    env_steps_per_s_iqr: tuple[float, float] | None = None
    """The quartiles of the per-iteration rates after the warm-up (the spread)."""

    s_per_iteration: float | None = None
    """Steady seconds per iteration (rank 0's clock; a ceiling point: the median of its trainings)."""

    measured_iterations: int | None = None
    """Iterations the steady figures come from."""

    warmup_s: float | None = None
    """Seconds of the warm-up iteration(s)."""

    num_envs_per_rank: int | None = None
    """Environments per rank, as the summary records them."""

    time_to_target_s: float | None = None
    """Wall seconds from the point's start until the mean reward first reached the target."""

    target_iteration: int | None = None
    """The iteration it first reached it."""

    target_estimated: bool = False
    """True: the time is reckoned from the summary's start, warm-up and steady pace (always, now)."""

    last_mean_reward: float | None = None
    """The mean episode reward at the point's last iteration."""

    overlap_iterations: int | None = None
    """Ceiling point: measured iterations all its trainings ran at once (per training, fewest)."""

    gpus: tuple[GpuUse, ...] = ()
    """Each GPU of the point, on GPUs."""

    run_dirs: tuple[str, ...] = ()
    """The run folder of each child."""

    logs: tuple[str, ...] = ()
    """Each child's console output, saved."""

    @property
    def ok(self) -> bool:
        """True when the point measured a rate."""
        return self.status == "ok" and self.env_steps_per_s is not None


@dataclass(frozen=True)
class PointStarted(Note):
    """Point ``index`` (0-based) of the sweep starts."""

    index: int
    planned: Planned


@dataclass(frozen=True)
class PointDone(Note):
    """Point ``index`` (0-based) of the sweep ended, measured or not."""

    index: int
    result: PointResult


def run_sweep(plan: ScalePlan, tell: Tell = silent) -> tuple[list[PointResult], bool]:
    """Run every point in order; the results (unrun points ``not run``) and whether a stop ended it."""
    logs = plan.out / POINTS
    logs.mkdir(parents=True, exist_ok=True)
    results: list[PointResult] = []
    env = {**os.environ, **dict(plan.env)}
    env.pop(RUN_STAMP, None)  # each point its own run folder stamp
    stopped = False
    # The launcher side's one signal recorder; the sweep has no checkpoint signal of its own.
    interrupts = Interrupts(checkpoint_signal=None)
    with interrupts.installed():
        for i, planned in enumerate(plan.points):
            stopped = stopped or interrupts.stop_asked
            if stopped:
                results.append(PointResult(planned.point, "not run", reason="the sweep was stopped"))
                continue
            tell(PointStarted(i, planned))
            result = _run_point(plan, planned, env, logs, interrupts)
            results.append(result)
            tell(PointDone(i, result))
            stopped = stopped or interrupts.stop_asked or result.status == "interrupted"
    return results, stopped


def _run_point(
    plan: ScalePlan, planned: Planned, env: dict[str, str], logs: Path, interrupts: Interrupts
) -> PointResult:
    """Start the point's children at once, pass on stop signals, wait, read what their runs recorded."""
    point = planned.point
    children: list[_Child] = []
    t0 = time.monotonic()
    for j, argv in enumerate(planned.argvs):
        path = logs / (f"{point.label}-{j}.log" if len(planned.argvs) > 1 else f"{point.label}.log")
        with open(path, "wb") as log:
            proc = subprocess.Popen(
                list(argv),
                cwd=plan.out,  # its ./logs (a run folder's root, Isaac Lab's too) is the sweep's
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # signals reach it from here only, once each
            )
        children.append(_Child(proc, time.time(), path))
    sampler = _GpuSampler(planned.gpus) if planned.gpus else None
    timed_out = False
    stopping = interrupts.stop_asked  # a stop taken by an earlier point: any new signal is a second
    while any(c.proc.poll() is None for c in children):
        # The first stop and a deliberate second one reach every child (each in its own session);
        # the same Ctrl-C delivered twice is passed on once.
        for _, sig in interrupts.take(stopping):
            stopping = True
            _signal(children, sig)
        limit = plan.options.point_timeout
        if limit and not timed_out and time.monotonic() - t0 > limit:
            timed_out = True
            _signal(children, signal.SIGTERM)
        time.sleep(0.1)
    wall = time.monotonic() - t0
    codes = tuple(int(c.proc.returncode) for c in children)
    node0 = (plan.spec.node_rank or 0) == 0  # several nodes: only node 0 finds the summaries
    found = [_run_of(plan, c) for c in children] if node0 else []
    began = [s.started_at for _, s in found if s is not None and s.started_at is not None]
    status, reason = _status(codes, children, timed_out, interrupts.stop_asked, plan.options.point_timeout)
    base = PointResult(
        point,
        status,
        reason=reason,
        exit_codes=codes,
        wall_s=round(wall, 2),
        gpus=sampler.stop(since=min(began, default=None)) if sampler is not None else (),
        run_dirs=tuple(str(f.absolute()) for f, _ in found if f is not None),
        logs=tuple(str(c.log) for c in children),
    )
    if status != "ok":
        return base
    if not node0:
        return dataclasses.replace(base, reason="measured on node 0 (its summary.json)")
    summaries_found = [s for _, s in found]
    if any(s is None for s in summaries_found):
        return dataclasses.replace(base, status="failed", reason="no summary.json found for the point's run")
    return measure(base, summaries_found, plan.options.target_reward, children[0].started)


def _signal(children: Sequence[_Child], sig: int) -> None:
    for c in children:
        with contextlib.suppress(ProcessLookupError):
            c.proc.send_signal(sig)


def _status(
    codes: Sequence[int], children: Sequence[_Child], timed_out: bool, stopped: bool, limit: float
) -> tuple[str, str | None]:
    if all(c == 0 for c in codes) and not timed_out:
        return "ok", None
    if timed_out:
        return "timed out", f"stopped after --point_timeout {limit:g} s"
    if stopped or any(c == EXIT_INTERRUPTED for c in codes):
        return "interrupted", "stopped by a signal"
    bad = next(i for i, c in enumerate(codes) if c != 0)
    status = "hung" if codes[bad] == EXIT_HANG else "failed"
    said = _error_line(children[bad].log)
    return status, f"exit code {codes[bad]}" + (f": {said}" if said else "")


def _error_line(log: Path) -> str | None:
    """The child's own error line (``mgpu: error: …``) in its saved output, else its last line."""
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines()[-20:] if line.strip()]
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("mgpu: error:"):
            return line.removeprefix("mgpu: error:").strip()
    return lines[-1].strip()[:300] if lines else None


def _run_of(plan: ScalePlan, child: _Child) -> tuple[Path | None, summaries.Summary | None]:
    """The run folder under :data:`POINTS` whose summary names this child's pid, and that summary."""
    from isaaclab_mgpu.launcher.runs import summary_folders

    best: tuple[Path | None, summaries.Summary | None] = (None, None)
    for folder in summary_folders(plan.out / POINTS, depth=3):
        s = summaries.read(folder)
        if s is None or s.launcher_pid != child.proc.pid:
            continue
        if s.launcher_started is not None and s.launcher_started < child.started - 5:
            continue  # an earlier process with the same PID (a reused --out)
        best = (folder, s)
    return best


def measure(
    base: PointResult, found: Sequence[summaries.Summary], target: float | None, spawned: float | None = None
) -> PointResult:
    """Fill ``base`` from its children's summaries (pure); the time to ``target`` counts from ``spawned``."""
    if base.point.ceiling:
        return _measure_ceiling(base, found)
    first = found[0]
    steady = first.steady or summaries.Steady()
    iqr = steady.env_steps_per_s_iqr
    result = dataclasses.replace(
        base,
        env_steps_per_s=steady.env_steps_per_s,
        env_steps_per_s_iqr=(iqr[0], iqr[-1]) if iqr else None,
        s_per_iteration=steady.s_per_iteration,
        measured_iterations=_measured(first, steady),
        warmup_s=steady.warmup_s,
        num_envs_per_rank=first.num_envs_per_rank,
        last_mean_reward=first.last_mean_reward,
    )
    if target is None or not steady.s_per_iteration:
        return result
    for i, reward in enumerate(first.mean_rewards, start=1):
        if reward is not None and reward >= target:
            startup = 0.0
            if spawned is not None and first.started_at is not None:
                startup = max(0.0, first.started_at - spawned)
            spent = (steady.warmup_s or 0.0) + max(0, i - steady.warmup_iterations) * steady.s_per_iteration
            return dataclasses.replace(
                result, time_to_target_s=round(startup + spent, 2), target_iteration=i, target_estimated=True
            )
    return result


def _measure_ceiling(base: PointResult, found: Sequence[summaries.Summary]) -> PointResult:
    """The summed steady rates of independent trainings, and how many steady iterations overlapped."""
    steady = [s.steady for s in found]
    if any(p is None or not p.env_steps_per_s or not p.s_per_iteration for p in steady):
        return dataclasses.replace(base, status="failed", reason="a training measured no steady pace")
    runs = list(zip(found, steady, strict=True))
    begin = max((s.started_at or 0.0) + (p.warmup_s or 0.0) for s, p in runs)
    end = min((s.started_at or 0.0) + (s.train_time_s or 0.0) for s, _ in runs)
    paces = [p.s_per_iteration for p in steady]
    return dataclasses.replace(
        base,
        env_steps_per_s=sum(p.env_steps_per_s for p in steady),
        s_per_iteration=statistics.median(paces),
        measured_iterations=min(_measured(s, p) for s, p in runs),
        overlap_iterations=max(0, int((end - begin) // max(paces))),
        num_envs_per_rank=found[0].num_envs_per_rank,
    )


def _measured(s: summaries.Summary, steady: summaries.Steady) -> int:
    """The iterations a summary's steady figures come from: all but the warm-up."""
    return max(0, (s.iterations or 0) - steady.warmup_iterations)


class _GpuSampler:
    """Samples the point's GPUs' memory and utilisation through NVML while it runs."""

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = tuple(indices)
        self.peak: dict[int, int] = {}
        self.util: dict[int, list[tuple[float, float]]] = {i: [] for i in self.indices}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mgpu-scale-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with nvml.nvml() as nv:
                handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
                while not self._done.wait(SAMPLE_S):
                    for i, h in handles.items():
                        with contextlib.suppress(nv.NVMLError):
                            used = int(nv.nvmlDeviceGetMemoryInfo(h).used) // 2**20
                            self.peak[i] = max(self.peak.get(i, 0), used)
                        with contextlib.suppress(nv.NVMLError):
                            util = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
                            self.util[i].append((time.time(), util))
        except nvml.NvmlUnavailable:
            return

    def stop(self, since: float | None) -> tuple[GpuUse, ...]:
        """End sampling; each GPU's peak memory and mean utilisation from ``since`` (epoch) on."""
        self._done.set()
        self._thread.join(timeout=5)
        out = []
        for i in self.indices:
            util = [u for t, u in self.util.get(i, ()) if since is None or t >= since]
            out.append(GpuUse(i, self.peak.get(i), round(statistics.fmean(util), 1) if util else None))
        return tuple(out)


# ---------------------------------------------------------------------------------------------
# Comparing and writing


@dataclass(frozen=True)
class Row:
    """A measured distributed point against its baselines."""

    result: PointResult
    """The point."""

    speedup: float | None = None
    """Its env-steps/s ÷ the one-rank point's of the same environment count."""

    efficiency: float | None = None
    """``speedup`` ÷ world size (1.0: ideal)."""

    ceiling: PointResult | None = None
    """Its CPU ceiling point (independent trainings), when measured."""

    ceiling_speedup: float | None = None
    """The ceiling's env-steps/s ÷ the one-rank point's."""

    vs_ceiling: float | None = None
    """Its env-steps/s ÷ the ceiling's (1.0: the collectives cost nothing)."""


def compare(results: Sequence[PointResult]) -> list[Row]:
    """One row per distributed point, with speedup and efficiency against one rank (pure)."""
    one = {r.point.num_envs: r for r in results if r.point.world_size == 1 and not r.point.ceiling and r.ok}
    ceilings = {(r.point.world_size, r.point.num_envs): r for r in results if r.point.ceiling}
    rows = []
    for r in results:
        if r.point.ceiling:
            continue
        base = one.get(r.point.num_envs)
        ceiling = ceilings.get((r.point.world_size, r.point.num_envs))
        if r.point.world_size == 1 and r.ok:
            ceiling = r  # one rank is its own ceiling
        speedup = _ratio(r, base)
        rows.append(
            Row(
                r,
                speedup=speedup,
                efficiency=None if speedup is None else speedup / r.point.world_size,
                ceiling=ceiling if ceiling is not r else None,
                ceiling_speedup=_ratio(ceiling, base),
                vs_ceiling=_ratio(r, ceiling),
            )
        )
    return rows


#: Efficiency (speedup ÷ ranks) from which more ranks are called worth it: below it, most of each
#: added rank's hardware buys nothing.
WORTH_IT = 0.7
#: A rate this close to the CPU ceiling means the box's cores, not the collectives, set the limit.
NEAR_CEILING = 0.8


@dataclass(frozen=True)
class Verdict:
    """The sweep's answer for one environment count: how many ranks to use there."""

    num_envs: int | None
    """Environments per rank of the rows judged (None: the task's default)."""

    ranks: int
    """The world size to use: the fastest one at least :data:`WORTH_IT` efficient, else 1."""

    best: Row
    """The row the verdict names: the chosen world size's, or (none pays) the fastest multi-rank row."""

    cpu_bound: bool = False
    """More ranks do not pay but reach :data:`NEAR_CEILING` of the CPU ceiling: the cores set the limit."""


def verdicts(rows: Sequence[Row]) -> list[Verdict]:
    """One verdict per environment count that has a measured multi-rank row, in the rows' order (pure)."""
    groups: dict[int | None, list[Row]] = {}
    for row in rows:
        if row.speedup is not None and row.result.point.world_size > 1:  # a speedup: both points measured
            groups.setdefault(row.result.point.num_envs, []).append(row)
    out = []
    for envs, measured in groups.items():
        paying = [row for row in measured if row.efficiency >= WORTH_IT and row.speedup > 1.0]
        if paying:
            best = max(paying, key=lambda row: row.speedup)
            out.append(Verdict(envs, best.result.point.world_size, best))
            continue
        best = max(measured, key=lambda row: row.speedup)
        cpu = best.vs_ceiling is not None and best.vs_ceiling >= NEAR_CEILING
        out.append(Verdict(envs, 1, best, cpu_bound=cpu))
    return out


def _ratio(a: PointResult | None, b: PointResult | None) -> float | None:
    if a is None or b is None or not a.ok or not b.ok or not b.env_steps_per_s:
        return None
    return (a.env_steps_per_s or 0.0) / b.env_steps_per_s


def load_1m() -> float | None:
    """The machine's 1-minute load average (None where the system does not say)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def write_json(
    plan: ScalePlan,
    results: Sequence[PointResult],
    *,
    complete: bool,
    load: tuple[float | None, float | None],
    argv: Sequence[str] | None = None,
) -> Path:
    """Write the sweep's JSON (plan, machine, every point and row) atomically; return its path."""
    rows = compare(results)
    spec = plan.spec
    doc = {
        "version": 1,
        "complete": complete,
        "command": list(argv) if argv is not None else None,
        "created": time.time(),
        "device": spec.device,
        "library": spec.library,
        "framework": spec.framework,
        "task": spec.task,
        "iterations": plan.options.iterations,
        "warmup_iterations": summaries.WARMUP_ITERATIONS,
        "target_reward": plan.options.target_reward,
        "world_sizes": list(plan.world_sizes),
        "num_envs": list(plan.num_envs),
        "nnodes": spec.nnodes_max,
        "ceiling": any(p.point.ceiling for p in plan.points),
        "machine": {
            "hostname": os.uname().nodename,
            "cpus": os.cpu_count(),
            "load_1m_before": load[0],
            "load_1m_after": load[1],
            "python": sys.version.split()[0],
        },
        "points": [records.plain(r) for r in results],
        "rows": [
            {
                "world_size": row.result.point.world_size,
                "num_envs": row.result.point.num_envs,
                "status": row.result.status,
                "env_steps_per_s": row.result.env_steps_per_s,
                "speedup": row.speedup,
                "efficiency": row.efficiency,
                "ceiling_env_steps_per_s": (row.ceiling or row.result).env_steps_per_s
                if row.vs_ceiling is not None
                else None,
                "ceiling_speedup": row.ceiling_speedup,
                "vs_ceiling": row.vs_ceiling,
            }
            for row in rows
        ],
        "verdicts": [
            {
                "num_envs": v.num_envs,
                "ranks": v.ranks,
                "world_size_judged": v.best.result.point.world_size,
                "speedup": v.best.speedup,
                "efficiency": v.best.efficiency,
                "cpu_bound": v.cpu_bound,
            }
            for v in verdicts(rows)
        ],
    }
    path = plan.out / JSON_NAME
    plan.out.mkdir(parents=True, exist_ok=True)
    files.write_json(path, doc)
    return path
