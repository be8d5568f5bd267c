"""The launcher must start light: no heavy framework on the import path of help/dry-run."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "jax", "warp", "rsl_rl", "skrl", "tensordict", "tensorboard", "matplotlib")

PROBE = """
import sys
from isaaclab_mgpu.cli import main
RUNS = (["--help"], ["dry-run", "--num_gpus", "2", "--seed=1"], ["train", "--dry_run", "--num_gpus", "2"],
        ["train", "--help"], ["train", "--num_gpu", "2"], ["train", "--task", "cartpol"],
        ["check-env", "--devcie", "cpu"],  # the refusals before spawn stay as light as --help
        ["dry-run", "--gpu_ids", "1", "--logger", "tensorboard"], ["runs", "/nonexistent-mgpu-log-root"],
        ["scale", "--help"], ["scale", "--device", "cpu", "--world_sizes", "1,x"])
for argv in RUNS:
    try:
        main(argv)
    except SystemExit:
        pass
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {heavy})
print("LOADED", loaded, file=sys.stderr)
sys.exit(1 if loaded else 0)
"""


def test_help_and_dry_run_do_not_import_frameworks():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=set(HEAVY))],
        capture_output=True,
        text=True,
        env={"CUDA_VISIBLE_DEVICES": "0,1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


HELP_PROBE = """
import sys
from isaaclab_mgpu.cli import main
for argv in (["--help"], ["train", "--help"]):
    try:
        main(argv)
    except SystemExit:
        pass
unused = ("markdown_it", "rich.markdown", "rich.traceback", "pygments")
parsers = sorted(m for m in sys.modules if m.startswith(unused))
print("LOADED", parsers, file=sys.stderr)
import rich.markdown, rich.traceback  # the real modules, for anyone who wants them afterwards
print("REAL", hasattr(rich.markdown, "MarkdownContext"), hasattr(rich.traceback, "install"), file=sys.stderr)
"""


def test_help_loads_no_markdown_parser_nor_highlighter_and_leaves_the_real_ones_importable():
    proc = subprocess.run(
        [sys.executable, "-c", HELP_PROBE],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Usage: mgpu" in proc.stdout
    assert "LOADED []" in proc.stderr and "REAL True True" in proc.stderr, proc.stderr[-2000:]
