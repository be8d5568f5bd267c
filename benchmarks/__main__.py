"""Run the benchmarks: ``uv run python -m benchmarks [NAME ...] [--repeats N]``.

Each benchmark writes ``benchmarks/results/<name>.json``; the Markdown table of all results is
rewritten to ``benchmarks/results/README.md`` at the end.
"""

from __future__ import annotations

import argparse
import importlib

from .common import write_markdown

ALL = ("startup", "shutdown")


def main() -> None:
    """Run the chosen benchmarks (all by default) and render the results table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*ALL, []], help="benchmarks to run (default: all)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per figure")
    args = parser.parse_args()
    for name in args.names or ALL:
        module = importlib.import_module(f"benchmarks.{name}")
        for figure in module.run(repeats=args.repeats):
            ratio = figure.ratio()
            print(
                f"{name}: {figure.name}: {figure.stats(figure.samples)}"
                + (f" ratio {ratio:.3f}" if ratio else "")
            )
    print(f"wrote {write_markdown()}")


if __name__ == "__main__":
    main()
