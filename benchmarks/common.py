"""Shared pieces of the benchmarks: timing, repeats, results files, the machine description.

Every figure is a ratio to a baseline measured in the same run, with min / median / max over the
repeats, because absolute numbers on a shared 2-core box say little. Results go to
``benchmarks/results/<name>.json`` (``MGPU_BENCH_RESULTS`` or ``--results`` moves them);
:func:`write_markdown` renders all of them into ``README.md`` beside them.

The device the training-side benchmarks use comes from ``MGPU_BENCH_DEVICE`` (``cpu``, the
default, or ``cuda``; ``--device`` sets it): on ``cpu`` they run 2 gloo ranks on this machine, on
``cuda`` one NCCL rank per visible GPU, at most 2.

What is published: :func:`save` refuses a figure (:func:`problems`) with fewer than
:data:`MIN_SAMPLES` samples (or baseline samples), or whose ratio lies outside its physical bounds
(:attr:`Figure.bounds`: N ranks cannot step more than N× the environments of one rank, nor finish an
iteration of the same per-rank work faster than one rank alone). A refused benchmark's data goes
to ``<name>.rejected.json`` with the reasons, which the README leaves out, and :func:`save` raises
:class:`Refused`. The machine's 1-minute load is recorded when the benchmark starts
(:func:`begin`) and when it saves.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from isaaclab_mgpu.contract.devices import parse_device_list
from isaaclab_mgpu.launcher import nvml

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
#: The ``mgpu`` command: this interpreter's console script, else the one on PATH (``gpu.sh`` puts a
#: shim there when the project runs from a checkout on a machine's own Python).
MGPU = str(BIN / "mgpu") if (BIN / "mgpu").exists() else (shutil.which("mgpu") or str(BIN / "mgpu"))


def results_dir() -> Path:
    """Where the JSON files and their README go."""
    return Path(os.environ.get("MGPU_BENCH_RESULTS") or ROOT / "benchmarks" / "results")


def device() -> str:
    """``cpu`` or ``cuda``: what the launch, probe and training benchmarks run on."""
    value = os.environ.get("MGPU_BENCH_DEVICE", "cpu")
    if value not in ("cpu", "cuda"):
        raise SystemExit(f"MGPU_BENCH_DEVICE={value!r}: use cpu or cuda")
    return value


def gpu_names() -> list[str]:
    """The GPUs NVML lists (empty without a driver)."""
    return [name for name, _ in nvml.list_gpus() or ()]


def ranks() -> int:
    """Ranks of a multi-rank figure: 2 on CPU, one per visible GPU (at most 2) on CUDA."""
    if device() == "cpu":
        return 2
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = len(parse_device_list(visible).visible) if visible is not None else len(gpu_names())
    return max(1, min(2, count))


#: Fewer samples than this make no published figure.
MIN_SAMPLES = 3


class Refused(RuntimeError):
    """A benchmark's figures were not published (see :func:`problems`)."""


@dataclass
class Figure:
    """One measured quantity: its samples and, when it has one, the baseline it is compared to."""

    name: str
    unit: str
    samples: list[float]
    baseline: str | None = None
    baseline_samples: list[float] = field(default_factory=list)
    goal: str = ""
    note: str = ""
    bounds: tuple[float | None, float | None] = (None, None)
    """Lowest and highest ratio physically possible (None: no bound); one outside them is refused."""
    reference: bool = False
    """The baseline is a set value (a timeout), not a measurement: it needs no repeats."""

    def stats(self, values: Sequence[float]) -> dict[str, float]:
        """min / median / max of ``values``."""
        if not values:
            return {}
        return {"min": min(values), "median": statistics.median(values), "max": max(values)}

    def ratio(self) -> float | None:
        """Median of the samples over the median of the baseline."""
        if not self.samples or not self.baseline_samples:
            return None
        base = statistics.median(self.baseline_samples)
        return statistics.median(self.samples) / base if base else None

    def problems(self) -> list[str]:
        """Why this figure may not be published (empty: it may)."""
        out = []
        if len(self.samples) < MIN_SAMPLES:
            out.append(f"{len(self.samples)} sample(s), fewer than {MIN_SAMPLES}")
        if self.baseline and not self.reference and len(self.baseline_samples) < MIN_SAMPLES:
            out.append(f"{len(self.baseline_samples)} baseline sample(s), fewer than {MIN_SAMPLES}")
        ratio, (low, high) = self.ratio(), self.bounds
        if ratio is not None and high is not None and ratio > high:
            out.append(f"ratio {ratio:.3g}x above its physical bound {high:g}x")
        if ratio is not None and low is not None and ratio < low:
            out.append(f"ratio {ratio:.3g}x below its physical bound {low:g}x")
        return out

    def to_json(self) -> dict:
        """JSON-ready form with the summary statistics."""
        data = asdict(self)
        data["stats"] = self.stats(self.samples)
        data["baseline_stats"] = self.stats(self.baseline_samples)
        data["ratio"] = self.ratio()
        return data


def load_1min() -> float | None:
    """The machine's 1-minute load average (None where unknown)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


_load_at_start: float | None = None


def begin() -> None:
    """Record the load as a benchmark starts (``python -m benchmarks`` calls it before each)."""
    global _load_at_start
    _load_at_start = load_1min()


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = load_1min()
    return {
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "device": device(),
        "load_1min_at_start": _load_at_start,
        "load_1min_at_end": load,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def wall(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    ok: tuple[int, ...] = (0,),
) -> float:
    """Seconds one command takes from exec to exit (it must exit with a code in ``ok``)."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv), capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, check=False
    )
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return took


def repeat(fn: Callable[[], float], times: int) -> list[float]:
    """Run ``fn`` ``times`` times and return its results."""
    return [fn() for _ in range(times)]


@dataclass
class Streamed:
    """A finished command's output lines, each with its arrival time after the start."""

    lines: list[tuple[float, str]]
    exit_code: int
    total_s: float

    def first(self, needle: str) -> float | None:
        """Seconds from the start until the first line containing ``needle``."""
        return next((t for t, line in self.lines if needle in line), None)

    def tail(self, n: int = 15) -> str:
        """The last ``n`` lines, for error messages."""
        return "\n".join(line for _, line in self.lines[-n:])


def stream(
    argv: Sequence[str], *, cwd: str | Path, env: dict[str, str] | None = None, timeout: float = 300
) -> Streamed:
    """Run ``argv`` with stdout and stderr on one pipe, timestamping each line as it arrives."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, bufsize=1,
    )  # fmt: skip
    killer = threading.Timer(timeout, proc.kill)  # a hung run must not hang the benchmark
    killer.start()
    lines: list[tuple[float, str]] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append((time.perf_counter() - start, line.rstrip("\n")))
        code = proc.wait()
    finally:
        killer.cancel()
    return Streamed(lines, code, time.perf_counter() - start)


def problems(figures: Sequence[Figure]) -> list[str]:
    """Every reason not to publish ``figures``, one line each naming the figure."""
    return [f"{f.name}: {why}" for f in figures for why in f.problems()]


def save(name: str, figures: list[Figure], extra: dict | None = None) -> Path:
    """Write ``<results>/<name>.json``, or refuse what may not be published (module docstring)."""
    results = results_dir()
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    rejected = results / f"{name}.rejected.json"
    payload = {"benchmark": name, "machine": machine(), "figures": [f.to_json() for f in figures]}
    payload.update(extra or {})
    reasons = problems(figures)
    if reasons:
        payload["refused"] = reasons
        rejected.write_text(json.dumps(payload, indent=2) + "\n")
        raise Refused(f"{name}: not published ({rejected}):\n  " + "\n  ".join(reasons))
    rejected.unlink(missing_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _fmt(stats: dict[str, float]) -> str:
    if not stats:
        return "—"
    return f"{_num(stats['median'])} ({_num(stats['min'])}–{_num(stats['max'])})"


def _loads(m: dict) -> str:
    start, end = m.get("load_1min_at_start"), m.get("load_1min_at_end")
    if start is not None and end is not None:
        return f", 1-min load {start:.1f} at the start and {end:.1f} at the end"
    return f", 1-min load {end:.1f} at the end" if end is not None else ""


def write_markdown() -> Path:
    """Render every results JSON into ``benchmarks/results/README.md``."""
    results = results_dir()
    lines = [
        "# Benchmark results",
        "",
        "Written by `uv run python -m benchmarks`; what each figure means: `docs/benchmarks.md`.",
        "Ratios compare medians measured in the same run.",
        "",
    ]
    for path in sorted(p for p in results.glob("*.json") if not p.name.endswith(".rejected.json")):
        data = json.loads(path.read_text())
        m = data["machine"]
        gpus = ", ".join(m["gpus"]) or "no GPU"
        on = f", ranks on {m['device']}" if m.get("device") else ""
        load = _loads(m)
        lines += [
            f"## {data['benchmark']}",
            "",
            f"Measured {m['date']} on {m['cores']} cores, {m['memory_gib']} GiB, {gpus}, "
            f"Python {m['python']}{on}{load}.",
            "",
            "| figure | unit | median (min–max) | baseline | baseline median (min–max) | ratio | goal |",
            "|---|---|---|---|---|---|---|",
        ]
        for f in data["figures"]:
            ratio = f"{f['ratio']:.3g}×" if f["ratio"] is not None else "—"
            lines.append(
                f"| {f['name']} | {f['unit']} | {_fmt(f['stats'])} | {f['baseline'] or '—'} | "
                f"{_fmt(f['baseline_stats'])} | {ratio} | {f['goal'] or '—'} |"
            )
        notes = [f"- {f['name']}: {f['note']}" for f in data["figures"] if f["note"]]
        lines += ["", *notes, ""] if notes else [""]
    out = results / "README.md"
    out.write_text("\n".join(lines))
    return out
