"""Shared pieces of the benchmarks: timing, repeats, results files, the machine description.

Every figure is a ratio to a baseline measured in the same run, with min / median / max over the
repeats, because absolute numbers on a shared 2-core box say little. Results go to
``benchmarks/results/<name>.json``; :func:`write_markdown` renders all of them into
``benchmarks/results/README.md``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PYTHON = sys.executable
BIN = Path(PYTHON).parent


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
    try:
        gpus = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.split("\n")  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        gpus = []
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "gpus": [g for g in gpus if g.strip()],
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def wall(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120) -> float:
    """Seconds one command takes from exec to exit (it must exit 0)."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv), capture_output=True, env={**os.environ, **(env or {})}, timeout=timeout, check=False
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return took


def repeat(fn: Callable[[], float], times: int) -> list[float]:
    """Run ``fn`` ``times`` times and return its results."""
    return [fn() for _ in range(times)]


def save(name: str, figures: list[Figure], extra: dict | None = None) -> Path:
    """Write ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), "figures": [f.to_json() for f in figures]}
    payload.update(extra or {})
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _fmt(stats: dict[str, float]) -> str:
    if not stats:
        return "—"
    return f"{stats['median']:.3g} ({stats['min']:.3g}–{stats['max']:.3g})"


def write_markdown() -> Path:
    """Render every results JSON into ``benchmarks/results/README.md``."""
    lines = ["# Benchmark results", ""]
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        m = data["machine"]
        gpus = ", ".join(m["gpus"]) or "no GPU"
        lines += [
            f"## {data['benchmark']}",
            "",
            f"Measured {m['date']} on {m['cores']} cores, {m['memory_gib']} GiB, {gpus}, "
            f"Python {m['python']}.",
            "",
            "| figure | unit | median (min–max) | baseline | baseline median (min–max) | ratio | goal |",
            "|---|---|---|---|---|---|---|",
        ]
        for f in data["figures"]:
            ratio = f"{f['ratio']:.3g}×" if f["ratio"] is not None else "—"
            lines.append(
                f"| {f['name']} | {f['unit']} | {_fmt(f['stats'])} | {f['baseline'] or '—'} | "
                f"{_fmt(f['baseline_stats'])} | {ratio} | {f['goal']} |"
            )
        notes = [f"- {f['name']}: {f['note']}" for f in data["figures"] if f["note"]]
        lines += ["", *notes, ""] if notes else [""]
    out = RESULTS / "README.md"
    out.write_text("\n".join(lines))
    return out
