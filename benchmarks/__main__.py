"""Run the benchmarks: ``uv run python -m benchmarks [NAME ...] [--repeats N] [--device cpu|cuda]``.

Each benchmark writes ``<results>/<name>.json`` (default ``benchmarks/results``); the Markdown
table of every JSON file there is rewritten to ``<results>/README.md`` at the end. ``--device``
(or ``MGPU_BENCH_DEVICE``) chooses CPU ranks (gloo) or GPU ranks (NCCL) for launch, probe and
training; ``benchmarks/gpu.sh`` runs them on a GPU machine. See ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from .common import Refused, begin, write_markdown

ALL = ("startup", "launch", "shutdown", "probe", "training", "stages", "stall", "timers", "drift", "restart")
#: Benchmarks run only when named (Isaac Lab needs its own Python 3.12 environment; the CPU ceiling
#: takes about ten minutes and wants a quiet box).
EXTRA = ("isaac", "ceiling")


def main() -> None:
    """Run the chosen benchmarks (all by default) and render the results table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    names = [*ALL, *EXTRA, []]
    parser.add_argument("names", nargs="*", choices=names, help="benchmarks to run (default: all but isaac)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per figure (default 3)")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="ranks on CPU (gloo) or GPUs (NCCL)")
    parser.add_argument("--results", help="folder for the JSON files and README.md")
    args = parser.parse_args()
    if args.device:
        os.environ["MGPU_BENCH_DEVICE"] = args.device
    if args.results:
        os.environ["MGPU_BENCH_RESULTS"] = os.path.abspath(args.results)
    refused = []
    for name in args.names or ALL:
        module = importlib.import_module(f"benchmarks.{name}")
        started = time.perf_counter()
        begin()
        try:
            figures = module.run(repeats=args.repeats)
        except Refused as exc:  # measured, but not publishable: say why and go on with the others
            print(exc, flush=True)
            refused.append(name)
            continue
        for figure in figures:
            ratio = figure.ratio()
            print(
                f"{name}: {figure.name}: {figure.stats(figure.samples)}"
                + (f" ratio {ratio:.3f}" if ratio else ""),
                flush=True,
            )
        print(f"{name}: done in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"wrote {write_markdown()}")
    if refused:
        sys.exit(f"refused to publish: {', '.join(refused)}")


if __name__ == "__main__":
    main()
