"""Shared pieces of the benchmarks: timing, repeats, results files, the machine description.

Every figure is a ratio to a baseline measured in the same run, with min / median / max over the
repeats, because absolute numbers on a shared 2-core box say little. Results go to
``benchmarks/results/<name>.json`` (``MGPU_BENCH_RESULTS`` or ``--results`` moves them);
:func:`write_markdown` renders all of them into ``README.md`` beside them.

The device the training-side benchmarks use comes from ``MGPU_BENCH_DEVICE`` (``cpu``, the
default, or ``cuda``; ``--device`` sets it): on ``cpu`` they run 2 gloo ranks on this machine, on
``cuda`` one NCCL rank per visible GPU, at most 2.
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
    return list(nvml.gpu_names() or ())


def ranks() -> int:
    """Ranks of a multi-rank figure: 2 on CPU, one per visible GPU (at most 2) on CUDA."""
    if device() == "cpu":
        return 2
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = len(parse_device_list(visible).visible) if visible is not None else len(gpu_names())
    return max(1, min(2, count))


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

    def to_json(self) -> dict:
        """JSON-ready form with the summary statistics."""
        data = asdict(self)
        data["stats"] = self.stats(self.samples)
        data["baseline_stats"] = self.stats(self.baseline_samples)
        data["ratio"] = self.ratio()
        return data


def machine() -> dict[str, object]:
    """What the numbers were measured on."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "gpus": gpu_names(),
        "python": platform.python_version(),
        "device": device(),
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


def save(name: str, figures: list[Figure], extra: dict | None = None) -> Path:
    """Write ``benchmarks/results/<name>.json``."""
    results = results_dir()
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), "figures": [f.to_json() for f in figures]}
    payload.update(extra or {})
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _fmt(stats: dict[str, float]) -> str:
    if not stats:
        return "—"
    return f"{_num(stats['median'])} ({_num(stats['min'])}–{_num(stats['max'])})"


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
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text())
        m = data["machine"]
        gpus = ", ".join(m["gpus"]) or "no GPU"
        on = f", ranks on {m['device']}" if m.get("device") else ""
        load = f", 1-min load {m['load_1min_at_end']:.1f} at the end" if m.get("load_1min_at_end") else ""
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
